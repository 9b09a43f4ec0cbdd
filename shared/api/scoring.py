"""Reading samples through the model once each: :class:`SampleScorer`.

A fitter asks for samples of a text's units; two requests can be the same token sequence.
Short texts repeat samples outright (a text of 6 unique tokens has 20 triples, so 1,000
random triples repeat each about 50 times), and a fitter may ask again for the full text
or the empty input, which round zero has read. A deterministic model answers a sequence
the same way every time, so each distinct sequence is read once per text and call, across
a fitter's rounds. A text's sequences are read in model calls of their own, so that its
scores do not depend on the texts that share its call, chunk or engine (see
:class:`SampleScorer`). The texts' diagnostics count what the model read
(``model_evaluations``, ``tokens_evaluated``).
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
    """The raw outputs of every distinct sequence each text reads in one ``explain_batch`` call.

    A text's sequences are read in model calls of their own, never in a batch shaped by
    the other texts of the call: a forward's float32 result moves (~1e-7) with the batch's
    padding and size, and the fit can carry such a difference far along a flat direction.
    So a text's scores do not depend on which texts share its call, chunk or engine. Within
    a text each distinct sequence is read once (across the fitter's rounds too); the input
    with no tokens, read once alone, serves every text.

    Args:
        adapter: the model adapter, inside its session.
        plans: the texts of the call; their diagnostics are booked here.
        bar: a progress bar counting sequences read, or None.

    Example:
        >>> scorer = SampleScorer(adapter, plans, None)  # doctest: +SKIP
        >>> raw = scorer.score({0: [[101, 7], [7]], 1: [[7]]})  # doctest: +SKIP  # two model calls
    """

    def __init__(self, adapter: ModelAdapter, plans: list[TextPlan], bar) -> None:
        self.adapter, self.plans, self.bar = adapter, plans, bar
        # Sequences read and planned so far (round zero is counted by the driver).
        self.read = self.planned = 0
        self._rows: dict[int, dict[Key, torch.Tensor]] = {}  # per text
        self._shared: dict[Key, torch.Tensor] = {}  # read alone: the same for every text
        self._width: tuple[int, ...] = ()  # the outputs per sequence, known from round zero on

    def remember(self, text: int | None, seqs: Sequence[Sequence[int]], raw: torch.Tensor) -> None:
        """Keep outputs read elsewhere for later requests: text ``text``'s own (its full
        text), or, with ``text=None``, ones read alone that every text may reuse (the empty input)."""
        self._width = tuple(raw.shape[1:])
        if self.adapter.deterministic:
            rows = self._shared if text is None else self._rows.setdefault(text, {})
            for s, row in zip(seqs, raw):
                rows.setdefault(tuple(s), row)

    def score(self, requests: dict[int, list[list[int]]]) -> dict[int, torch.Tensor]:
        """Raw outputs (n, K) per text for its token sequences, each new one read once per text.

        A model declared not deterministic reads every sequence asked for, repeats included.
        """
        out: dict[int, torch.Tensor] = {}
        for i in sorted(requests):
            seqs = requests[i]
            if not seqs:
                out[i] = torch.empty((0, *self._width), dtype=torch.float64)
            elif not self.adapter.deterministic:
                out[i] = self._read([list(s) for s in seqs], {i: seqs})
            else:
                rows = self._rows.setdefault(i, {})
                new = list(dict.fromkeys(k for k in map(tuple, seqs) if k not in rows and k not in self._shared))
                if new:
                    self.remember(i, new, self._read([list(k) for k in new], {i: new}))
                out[i] = torch.stack([rows[k] if k in rows else self._shared[k] for k in map(tuple, seqs)])
        return out

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
