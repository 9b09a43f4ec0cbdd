"""Reading samples through the model once each: :class:`SampleScorer`.

A fitter asks for samples of a text's units; two requests can be the same token sequence.
Short texts repeat samples outright (a text of 6 unique tokens has 20 triples, so 1,000
random triples repeat each about 50 times), and a fitter may ask again for the full text
or the empty input, which round zero has read. A deterministic model answers a sequence
the same way every time, so each distinct sequence is read once per call: across the texts
of a batch and across a fitter's rounds. The texts' diagnostics count what the model read (``model_evaluations``,
``tokens_evaluated``): the first text to ask for a sequence pays for it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np
import torch

from ..models import ModelAdapter
from .plan import TextPlan

__all__ = ["SampleScorer", "check_rows", "as_2d", "score_in_chunks"]

Key = tuple[int, ...]


def check_rows(raw: torch.Tensor, n: int) -> None:
    """Raise unless ``raw`` is a (n, K) matrix: one row per input."""
    if raw.ndim != 2 or raw.shape[0] != n:
        raise ValueError(f"the model returned {tuple(raw.shape)} outputs for {n} inputs; expected one row per input")


def as_2d(y: torch.Tensor) -> np.ndarray:
    """A link's output as a (rows, outputs) array: one explained output is one column."""
    y = y.numpy()
    return y[:, None] if y.ndim == 1 else y


def score_in_chunks(adapter: ModelAdapter, seqs: list[list[int]], bar) -> torch.Tensor:
    """Score all sequences; with a progress bar, in chunks so that it moves."""
    if bar is None:
        return adapter.score(seqs)
    chunk = max(adapter.batch_size * 4, 1)
    parts = []
    for start in range(0, len(seqs), chunk):
        parts.append(adapter.score(seqs[start : start + chunk]))
        bar.update(min(chunk, len(seqs) - start))
    return torch.cat(parts)


def book_round(
    adapter: ModelAdapter, plans: list[TextPlan], paid: dict[int, list[Sequence[int]]], elapsed: float
) -> None:
    """Book one model round on the texts whose sequences it read (``paid``: text → sequences).

    The round's time is shared in proportion to the tokens each text's sequences hold: one
    text's near-full-length deletions cost more than another's short samples.
    """
    total_tokens = max(sum(adapter.n_tokens_scored(s) for s in paid.values()), 1)
    for i, seqs in paid.items():
        toks = adapter.n_tokens_scored(seqs)
        plans[i].book_model(len(seqs), toks, elapsed * toks / total_tokens)


class SampleScorer:
    """The raw outputs of every distinct sequence read in one ``explain_batch`` call.

    Args:
        adapter: the model adapter, inside its session.
        plans: the texts of the call; their diagnostics are booked here.
        bar: a progress bar counting sequences read, or None.

    Example:
        >>> scorer = SampleScorer(adapter, plans, None)  # doctest: +SKIP
        >>> raw = scorer.score({0: [[101, 7], [7]], 1: [[7]]})  # doctest: +SKIP  # reads 2 sequences
    """

    def __init__(self, adapter: ModelAdapter, plans: list[TextPlan], bar) -> None:
        self.adapter, self.plans, self.bar = adapter, plans, bar
        # Sequences read and planned so far (round zero is counted by the driver).
        self.read = self.planned = 0
        self._rows: dict[Key, torch.Tensor] = {}
        self._width: tuple[int, ...] = ()  # the outputs per sequence, known from round zero on

    def remember(self, seqs: Sequence[Sequence[int]], raw: torch.Tensor) -> None:
        """Keep outputs read elsewhere (the full texts, the empty input) for later requests."""
        self._width = tuple(raw.shape[1:])
        if self.adapter.deterministic:
            for s, row in zip(seqs, raw):
                self._rows.setdefault(tuple(s), row)

    def score(self, requests: dict[int, list[list[int]]]) -> dict[int, torch.Tensor]:
        """Raw outputs (n, K) per text for its token sequences, each new sequence read once.

        A model declared not deterministic reads every sequence asked for, repeats included.
        """
        order = sorted(requests)
        if not self.adapter.deterministic and any(requests[i] for i in order):
            paid = {i: requests[i] for i in order if requests[i]}
            raw = self._read([s for i in order for s in requests[i]], paid)
            starts = np.cumsum([0] + [len(requests[i]) for i in order])
            return {i: raw[starts[k] : starts[k + 1]] for k, i in enumerate(order)}
        paid_keys: dict[int, list[Key]] = {}
        new: dict[Key, None] = {}  # insertion-ordered: the model reads them in request order
        for i in order:
            for s in requests[i]:
                key = tuple(s)
                if key not in self._rows and key not in new:
                    new[key] = None
                    paid_keys.setdefault(i, []).append(key)
        if new:
            seqs = [list(k) for k in new]
            self.remember(seqs, self._read(seqs, paid_keys))
        return {
            i: torch.stack([self._rows[tuple(s)] for s in requests[i]])
            if requests[i]
            else torch.empty((0, *self._width), dtype=torch.float64)
            for i in order
        }

    def _read(self, seqs: list[list[int]], paid: dict[int, list[Sequence[int]]]) -> torch.Tensor:
        """One model round over ``seqs``, checked and booked on the texts that pay for them."""
        if self.bar is not None:
            # The bar starts at the planned reads (see driver.explain_batch); a fitter that
            # reads more than planned grows it, never below what is already counted.
            self.read += len(seqs)
            if self.read > self.planned:
                self.bar.total += self.read - self.planned
                self.planned = self.read
        t0 = time.perf_counter()
        raw = score_in_chunks(self.adapter, seqs, self.bar)
        elapsed = time.perf_counter() - t0
        check_rows(raw, len(seqs))
        book_round(self.adapter, self.plans, paid, elapsed)
        return raw
