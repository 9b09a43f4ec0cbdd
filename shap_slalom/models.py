"""The quantity SLALOM explains, as a plain shap model ``f(list[str]) -> array``.

Why it stays here: shap's explainers, maskers and ``shap.benchmark`` call their model with
strings, so ``SlalomExplainer.model`` must be such a callable; the log-odds themselves come
from the engine's :meth:`slalom_core.OutputLink.per_class`, the one place they are defined.

SLALOM fits log-odds (paper Sec. 5.1; App. C.1 for k > 2 classes). To compare it with SHAP's
own explainers or score it with ``shap.benchmark``, those must see the *same* outputs, so
:class:`LogOddsModel` returns exactly the columns whose attributions
:class:`~shap_slalom.SlalomExplainer` reports.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import slalom_core as sc

__all__ = ["LogOddsModel"]


class LogOddsModel:
    """Strings in, the outputs SLALOM explains out (:meth:`slalom_core.OutputLink.per_class`):

    - a binary model (two outputs): ``(B, 2)`` log-odds of each class, ``[-F, F]`` with
      ``F = log p1/p0`` (for logits ``z1 - z0``), i.e. ``logit(p_c)`` per class;
    - ``k > 2`` classes: ``(B, k)`` centred logits ``z_c - mean(z)`` (the joint fit);
    - a multi-label model: ``(B, k)``, each label's own log-odds (its sigmoid's logit);
    - a single output: ``(B,)``, that logit (or ``logit(p)`` with ``output="probs"``).

    What the wrapped model returns is decided once, as the engine decides it
    (``output="auto"``: the model's config or pipeline, else the outputs themselves; see
    :func:`slalom_core.class_outputs`), and then kept, by this object and by the explainer
    that owns it, so that every call is in the same units.

    Args:
        adapter: the engine adapter that scores token-id sequences (or strings).
        output: what the wrapped model returns, one of :data:`slalom_core.OUTPUT_KINDS`.
        class_names: names of the model's outputs (become ``output_names``).

    Example:
        >>> f = LogOddsModel(explainer.adapter)  # doctest: +SKIP
        >>> f(["a great movie"])  # doctest: +SKIP
        array([[-2.1,  2.1]])
    """

    def __init__(
        self, adapter: sc.ModelAdapter, output: str = "auto", class_names: Sequence[str] | None = None
    ) -> None:
        sc.check_call(output=output)  # the engine's check, and its error
        self.adapter = adapter
        self.output = output
        self.output_names = list(class_names) if class_names is not None else None
        #: what the raw outputs are, once known (None while ``output="auto"`` is undecided)
        self.output_kind: str | None = None if output == "auto" else output
        #: how that was decided, as the engine's ``diagnostics["output"]`` says it
        self.output_description: str | None = None if output == "auto" else output

    def pin(self, kind: str, description: str) -> None:
        """Fix what the raw outputs are (the first decision stands)."""
        if self.output_kind is None:
            self.output_kind, self.output_description = kind, description

    def raw(self, texts: Sequence[str]) -> np.ndarray:
        """The wrapped model's raw outputs, (B, K) float64 (:meth:`slalom_core.ModelAdapter.score_texts`)."""
        return self.adapter.score_texts(list(texts)).numpy()

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        """Explained outputs for a list (or numpy array) of strings (:func:`slalom_core.class_outputs`)."""
        if isinstance(texts, str):
            raise TypeError("LogOddsModel takes a list of strings, not a single string")
        y, kind, how = sc.class_outputs(self.adapter, list(texts), self.output_kind or self.output)
        self.pin(kind, how)
        return y.numpy()
