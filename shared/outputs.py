"""Every output of a model at once: what an explanation "of all classes" is.

:func:`explain` explains one output (class 1's log-odds, a joint fit of k classes, one
label). A caller that shows every class side by side (the SHAP adapter's output axis, a
shap model, a table of fits) needs the same outputs for every column, decided here once:

- :func:`class_outputs`: a model's explained outputs of raw texts, one column per class
  (:meth:`OutputLink.per_class`), with what the raw outputs were read as;
- :func:`explain_outputs`: one fit per text covering every output: one fit for a binary
  or k-class model, one per label (a :class:`LabelExplanations`) for a multi-label model;
- :func:`fit_summary`: one row per fitted text (model vs surrogate, residual, cost).

Per-class scores and outputs of a fit are :meth:`SlalomExplanation.per_class` and
:meth:`SlalomExplanation.per_class_outputs`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch

from .api import explain_batch
from .explanation import LabelExplanations, SlalomExplanation
from .link import OutputLink, SlalomOutputWarning, declared_output, resolve_output
from .models import ModelAdapter, as_adapter
from .warn import warn_user

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["class_outputs", "explain_outputs", "fit_summary", "Fit"]

#: One text's entry in :func:`explain_outputs`: one fit, one per label, or None (no tokens).
Fit = SlalomExplanation | LabelExplanations | None


def class_outputs(adapter: ModelAdapter, texts: Sequence[str], output: str = "auto") -> tuple[torch.Tensor, str, str]:
    """The outputs SLALOM explains for whole texts, every class at once, in one call.

    The texts are scored through the adapter (:meth:`ModelAdapter.score_texts`); what the
    raw outputs are is decided as :func:`explain` decides it (:func:`resolve_output`: the
    model's own declaration first, then the outputs themselves, with a
    :class:`SlalomOutputWarning` when detected), and they are turned into
    :meth:`OutputLink.per_class`: a binary model's ``[-F, F]``, k classes' centred logits,
    each label's log-odds, or one output's (B,).

    Returns:
        ``(outputs, kind, description)``: the (B, K) or (B,) float64 outputs, the kind the
        raw outputs were read as (pass it as ``output=`` to keep later calls in the same
        units) and how that was decided, e.g. ``"probs (detected)"``.

    Example:
        >>> y, kind, how = class_outputs(sc.as_adapter(model, tok), ["a great movie"])  # doctest: +SKIP
        >>> y.shape, kind  # doctest: +SKIP
        (torch.Size([1, 2]), 'logits')
    """
    raw = adapter.score_texts(list(texts))
    kind, how, note = resolve_output(output, raw, declared_output(adapter), adapter.output_dtype)
    if note is not None:
        warn_user(note, SlalomOutputWarning)
    return OutputLink(raw.shape[1], kind, dtype=adapter.output_dtype).per_class(raw), kind, how


def explain_outputs(
    model: object, texts: Sequence, tokenizer: object | None = None, *, output: str = "auto", **options
) -> list[SlalomExplanation | LabelExplanations]:
    """Explain every output of the model for each text: what a per-class display needs.

    A binary or k-class model gets one fit per text (:func:`explain_batch`, no ``target``:
    class 1's log-odds, or the joint fit of k classes), whose
    :meth:`~SlalomExplanation.per_class` gives every class. A multi-label model (declared
    in its config or pipeline, or ``output="multilabel_..."``) has independent labels and
    no joint fit: each label is fitted on its own log-odds, one :func:`explain_batch` per
    label with the same options and seed, and each text gets a :class:`LabelExplanations`.
    That costs one call's model evaluations per label.

    Args:
        model, texts, tokenizer: as for :func:`explain_batch`.
        output: as for :func:`explain_batch`.
        **options: every other option of :func:`explain_batch` but ``target`` (every
            output is explained).

    Example:
        >>> fits = explain_outputs(multilabel_model, ["a text"], tokenizer=tok, seed=0)  # doctest: +SKIP
        >>> fits[0].per_class("contribution").shape  # (positions, labels)  # doctest: +SKIP
    """
    if "target" in options:
        raise TypeError("explain_outputs explains every output: use explain_batch for one target")
    adapter = as_adapter(model, tokenizer)
    declared = declared_output(adapter)
    kind = declared[0] if output == "auto" and declared is not None else output
    if not kind.startswith("multilabel"):
        return explain_batch(adapter, texts, output=output, **options)
    # The first label's call learns how many labels there are (its round zero reads every output).
    first = explain_batch(adapter, texts, output=output, target=0, **options)
    n_labels = first[0].diagnostics.n_outputs if first else 1
    if n_labels == 1:
        return first
    per_label = [first] + [
        explain_batch(adapter, texts, output=output, target=c, **options) for c in range(1, n_labels)
    ]
    return [LabelExplanations(label[j] for label in per_label) for j in range(len(first))]


def fit_summary(fits: Sequence[Fit]) -> pd.DataFrame:
    """One row per fitted text: model vs surrogate output, residual, held-out fit, cost.

    Columns ``tokens``, ``model_output``, ``surrogate_output``, ``residual`` (f(x) −
    surrogate(x)), ``heldout_r2``, ``heldout_mse``, ``model_evaluations``, ``seconds``. A
    joint k-class fit lists its outputs per class, a :class:`LabelExplanations` per label
    (its cost summed); None (a text with nothing to fit) gives 0 tokens and no outputs.
    Needs pandas; returns a ``pandas.DataFrame``.

    Example:
        >>> fit_summary(explain_batch(model, texts, tokenizer=tok))[["residual", "heldout_r2"]]  # doctest: +SKIP
    """
    try:
        import pandas as pd
    except ImportError:
        raise ImportError("fit_summary needs pandas: pip install pandas") from None
    none = dict.fromkeys(("model_output", "surrogate_output", "residual", "heldout_r2", "heldout_mse"))
    empty = {"tokens": 0, **none, "model_evaluations": 0, "seconds": 0.0}
    return pd.DataFrame([empty if fit is None else fit.summary() for fit in fits], columns=list(empty))
