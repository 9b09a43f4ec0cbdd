"""Each text of a call cut into positions and units, with its running bookkeeping: :class:`TextPlan`."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from ..inputs import text_batch
from ..models import ModelAdapter, Segmentation, as_adapter, check_segmentation
from .call import CheckedCall, check_memory

__all__ = ["TextPlan", "TextLike", "prepare_texts"]

TextLike = str | Sequence[int] | torch.Tensor | Segmentation


class TextPlan:
    """One text's positions, unique units and running bookkeeping."""

    def __init__(self, seg: Segmentation) -> None:
        self.seg = seg
        index: dict[tuple[int, ...], int] = {}
        self.position_units = np.array([index.setdefault(u, len(index)) for u in seg.unit_ids], dtype=np.int64)
        self.units: list[tuple[int, ...]] = list(index)
        # Token granularity: one id per unit, so a sample maps to ids by one gather.
        self.single_token_units = all(len(u) == 1 for u in self.units)
        self.unit_first = np.array([u[0] for u in self.units], dtype=np.int64)
        self.model_evaluations = 0
        self.tokens_evaluated = 0
        self.model_seconds = 0.0
        self.fit_seconds = 0.0
        #: The text as given, kept on the explanation (views show its original spelling).
        self.text: str | None = seg.text
        #: The model's output on the full text, in fitted units (set by the first round).
        self.model_output: np.ndarray | None = None
        #: Positions cut off the text's end to fit the model (``truncate=True``).
        self.truncated = 0

    def token_sequence(self, sample: np.ndarray) -> list[int]:
        if self.single_token_units:
            return self.unit_first[sample].tolist()
        out: list[int] = []
        for u in sample.tolist():
            out.extend(self.units[u])
        return out

    def token_sequences(self, samples: list[np.ndarray]) -> list[list[int]]:
        """Token ids of many samples; at token granularity one gather for all of them."""
        if not self.single_token_units or not samples:
            return [self.token_sequence(s) for s in samples]
        lengths = np.fromiter((len(s) for s in samples), dtype=np.int64, count=len(samples))
        ids = self.unit_first[np.concatenate(samples)].tolist()
        bounds = np.concatenate([[0], np.cumsum(lengths)]).tolist()
        return [ids[a:b] for a, b in zip(bounds[:-1], bounds[1:])]

    def book_model(self, n_evaluations: int, tokens: int, seconds: float) -> None:
        """Count model evaluations against this text: its diagnostics report what it cost."""
        self.model_evaluations += n_evaluations
        self.tokens_evaluated += tokens
        self.model_seconds += seconds


def prepare_texts(
    model: object,
    texts: Sequence[TextLike],
    tokenizer: object | None,
    call: CheckedCall,
    batch_size: int | None,
    device: torch.device | str | None,
) -> tuple[ModelAdapter, list[TextPlan]]:
    """The adapter and each text's plan; the per-text checks, all before any model call."""
    if isinstance(texts, (str, Segmentation)):
        raise TypeError("explain_batch takes a list of texts; use explain() for one text")
    texts = text_batch(texts, only_str=False)  # a DataFrame or {"text": ...}: its texts, not its keys
    adapter: ModelAdapter = as_adapter(model, tokenizer, batch_size=batch_size, device=device)
    fitter, n_samples = call.fitter, call.n_samples
    plans = []
    for t in texts:
        if isinstance(t, Segmentation):
            check_segmentation(t)
        # The one cutting rule (the command line's): too long a text is refused, or with
        # truncate=True keeps its first positions that fit.
        seg, cut = adapter.segment_within_length(t, call.granularity, truncate=call.truncate)
        if isinstance(t, Segmentation):
            seg = adapter.relabel(seg)  # the ids the adapter scores (a string model's own pieces)
        plan = TextPlan(seg)
        plan.truncated = cut
        plan.text = t if isinstance(t, str) and not cut else seg.text
        need = fitter.min_samples(len(plan.units))
        if n_samples < need:
            raise ValueError(
                f"n_samples={n_samples} is too few to fit method {fitter.name!r} on a text with "
                f"{len(plan.units)} unique units: use at least {need} (a few times more is better)"
            )
        plans.append(plan)
    if plans:
        check_memory(fitter, n_samples, max(len(p.units) for p in plans))
    return adapter, plans
