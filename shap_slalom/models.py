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
import torch
from slalom_core.link import warn_user

__all__ = ["LogOddsModel"]


class LogOddsModel:
    """Strings in, the outputs SLALOM explains out (:meth:`slalom_core.OutputLink.per_class`):

    - a binary model (two outputs): ``(B, 2)`` log-odds of each class, ``[-F, F]`` with
      ``F = log p1/p0`` (for logits ``z1 - z0``), i.e. ``logit(p_c)`` per class;
    - ``k > 2`` classes: ``(B, k)`` centred logits ``z_c - mean(z)`` (the joint fit);
    - a multi-label model: ``(B, k)``, each label's own log-odds (its sigmoid's logit);
    - a single output: ``(B,)``, that logit (or ``logit(p)`` with ``output="probs"``).

    What the wrapped model returns is decided once (``output="auto"``: see
    :func:`slalom_core.resolve_output`) and then kept, by this object and by the explainer
    that owns it, so that every call is in the same units.

    Texts are tokenized without truncation, as the explainer does.

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
        self._n_outputs: int | None = None
        #: what the raw outputs are, once known (None while ``output="auto"`` is undecided)
        self.output_kind: str | None = None if output == "auto" else output
        #: how that was decided, as the engine's ``diagnostics["output"]`` says it
        self.output_description: str | None = None if output == "auto" else output

    def pin(self, kind: str, description: str) -> None:
        """Fix what the raw outputs are (the first decision stands)."""
        if self.output_kind is None:
            self.output_kind, self.output_description = kind, description

    def raw(self, texts: Sequence[str]) -> np.ndarray:
        """The wrapped model's raw outputs, (B, K) float64."""
        texts = [str(t) for t in texts]
        if isinstance(self.adapter, sc.StringClassifier):
            return self.adapter.score_texts(texts).numpy()
        tok = self.adapter.tokenizer
        ids = [list(tok(t, add_special_tokens=False)["input_ids"]) for t in texts]
        with self.adapter.session():
            return self.adapter.score(ids).numpy()

    def n_outputs(self, probe: str = "a") -> int:
        """K, the wrapped model's number of outputs (one model call the first time)."""
        if self._n_outputs is None:
            cfg = getattr(getattr(self.adapter, "model", None), "config", None)
            k = getattr(cfg, "num_labels", None)
            self._n_outputs = int(k) if isinstance(k, int) and k > 0 else int(self.raw([probe]).shape[1])
        return self._n_outputs

    @property
    def multilabel(self) -> bool:
        """True when the outputs are independent labels (one fit per label)."""
        return (self.output_kind or "").startswith("multilabel")

    def transform(self, raw: np.ndarray) -> np.ndarray:
        """Raw outputs (B, K) to the explained outputs (see the class docstring)."""
        raw = np.asarray(raw, dtype=np.float64).reshape(len(raw), -1)
        self._n_outputs = raw.shape[1]
        t = torch.from_numpy(raw)
        if self.output_kind is None:
            kind, how, note = sc.resolve_output("auto", t, dtype=self.adapter.output_dtype)
            if note is not None:
                warn_user(note, sc.SlalomOutputWarning)
            self.pin(kind, how)
        return sc.OutputLink(raw.shape[1], self.output_kind).per_class(t).numpy()

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        """Explained outputs for a list (or numpy array) of strings."""
        if isinstance(texts, str):
            raise TypeError("LogOddsModel takes a list of strings, not a single string")
        return self.transform(self.raw(list(texts)))
