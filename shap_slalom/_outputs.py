"""What a row of a shap Explanation adds up to: the reference point, f(x) and the residual.

Why it is here: shap reads ``base_values`` as E[f(X)], one expected value per model and
output, so the base value of every text is the reference point b; what the surrogate leaves
of the model's own output (the residual f(x) − F(x)) is reported beside it. The numbers
themselves are the engine's (:meth:`slalom_core.SlalomExplanation.per_class_outputs`).
"""

from __future__ import annotations

import numpy as np
import slalom_core as sc

from .models import LogOddsModel

__all__ = ["ADDITIVITY", "check_choices", "text_outputs", "unfitted_reference"]

#: Choices of ``additivity=``, what ``base_values + values.sum()`` equals for additive scores:
#: "surrogate", the surrogate's output F(x), with ``base_values`` the reference point b (the
#: model's output on the empty input), one per output and the same for every text, as shap's
#: explainers give E[f(X)]. The fit's residual f(x) − F(x) is reported beside
#: (``residual_values``), never inside ``base_values``; "model" (which folded it in) is refused.
ADDITIVITY = ("surrogate",)


def check_choices(score: str, additivity: str) -> None:
    """Check ``score`` (the engine's table) and ``additivity`` (:data:`ADDITIVITY`).

    Example:
        >>> check_choices("contribution", "surrogate")
    """
    sc.check_score(score)
    # What a row adds up to is shap's choice; the engine knows nothing of it.
    if additivity == "model":
        raise ValueError(
            'additivity="model" is gone: base_values is the reference point b for every text (E[f(X)], as '
            "shap's explainers give it) and base_values + values add up to the surrogate's F(x); the model's "
            "f(x) = F(x) + residual_values (shap_slalom.plots.waterfall states it under the plot)"
        )
    if additivity not in ADDITIVITY:
        raise ValueError(f"unknown additivity {additivity!r}; choose one of {ADDITIVITY}")


def unfitted_reference(model: LogOddsModel, reference: sc.api.ReferenceOption, f_x: np.ndarray) -> np.ndarray:
    """The reference point in the explained units when no text of a call was fitted.

    Args:
        model: the explainer's :class:`LogOddsModel` (the explained units).
        reference: the explainer's ``reference=``: "empty" or a number (one per class).
        f_x: the model's explained output on one text (its shape is the reference's).
    """
    if isinstance(reference, str):  # "empty": the model's output on the empty input
        return np.asarray(model([""])[0], dtype=np.float64)
    r = np.asarray(reference, dtype=np.float64)
    kind = model.output_kind or ""
    if f_x.ndim == 1 and f_x.shape[0] == 2 and r.ndim == 0 and not kind.startswith("multilabel"):
        return np.array([-float(r), float(r)])  # binary: class 0's log-odds are minus class 1's
    if r.ndim == 1 and f_x.ndim == 1 and not kind.startswith("multilabel"):
        r = r - r.mean()  # k > 2 classes: centred, as the joint fit explains them
    return np.broadcast_to(r, f_x.shape).astype(np.float64)


def text_outputs(
    model: LogOddsModel,
    reference: sc.api.ReferenceOption,
    text: str,
    fit: sc.outputs.Fit,
    shared: np.ndarray | None = None,
) -> sc.ClassOutputs:
    """The engine's (reference point, f(x), residual) of one text, one entry per output column.

    A text with no tokens has no fit: its surrogate is the reference point itself (``shared``,
    the call's fitted texts' reference, if any), and its residual is f(x) minus that.
    """
    if fit is None:
        f_x = np.asarray(model([text])[0], dtype=np.float64)
        ref = unfitted_reference(model, reference, f_x) if shared is None else shared
        return sc.ClassOutputs(ref, f_x, f_x - ref)
    return fit.per_class_outputs()
