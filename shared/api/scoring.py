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

__all__ = ["SampleScorer", "SampleProgress", "check_rows", "as_2d", "score_in_chunks"]

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
    """Score all sequences; with a progress bar (anything with ``update(n)``: n sequences
    read), in chunks so that it moves."""
    if bar is None:
        return adapter.score(seqs)
    chunk = max(adapter.batch_size * 4, 1)
    parts = []
    for start in range(0, len(seqs), chunk):
        parts.append(adapter.score(seqs[start : start + chunk]))
        bar.update(min(chunk, len(seqs) - start))
    return torch.cat(parts)


class SampleProgress:
    """A progress bar over the samples a call asks for, its total known before the first model call.

    A fitter asks each text for its planned samples; how many of them the model must really
    read (each distinct sequence once) is known only as they come. So the bar counts samples
    asked for, against the planned total it was made with, and moves as the model reads
    them: a round of ``asked`` samples of which ``reads`` are new moves ``asked`` steps, in
    proportion as the reads complete (at once when they were all read before). It never
    passes its total (a fitter asking for more than planned waits at it) and :meth:`finish`
    fills it, so its total never changes while it runs.

    Example:
        >>> class Bar:
        ...     n = 0
        ...     def update(self, k): self.n += k
        ...     def close(self): pass
        >>> p = SampleProgress(Bar(), total=10)
        >>> p.answered(6, reads=2).update(1); p.bar.n  # half the reads: half the samples
        3
        >>> p.finish(); p.bar.n
        10
    """

    def __init__(self, bar, total: int) -> None:
        self.bar, self.total, self.shown = bar, int(total), 0

    def advance(self, n: int) -> None:
        """Move by ``n`` samples, never past the total."""
        step = min(int(n), self.total - self.shown)
        if step > 0:
            self.bar.update(step)
            self.shown += step

    def answered(self, asked: int, reads: int) -> _RoundProgress:
        """What the model's reads of one round move: ``asked`` samples over ``reads`` reads."""
        return _RoundProgress(self, asked, reads)

    def finish(self) -> None:
        """Fill the bar to its total (the samples were all answered) and close it."""
        self.advance(self.total - self.shown)
        self.bar.close()


class _RoundProgress:
    """One round's reads, moving its progress by the round's samples in proportion."""

    def __init__(self, progress: SampleProgress, asked: int, reads: int) -> None:
        self.progress, self.asked, self.reads, self.done, self.moved = progress, asked, max(reads, 1), 0, 0

    def update(self, n: int) -> None:
        self.done += n
        target = self.asked * min(self.done, self.reads) // self.reads
        self.progress.advance(target - self.moved)
        self.moved = target


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
        progress: a :class:`SampleProgress` (samples asked for, moved as they are read), or None.

    Example:
        >>> scorer = SampleScorer(adapter, plans, None)  # doctest: +SKIP
        >>> raw = scorer.score({0: [[101, 7], [7]], 1: [[7]]})  # doctest: +SKIP  # two model calls
    """

    def __init__(self, adapter: ModelAdapter, plans: list[TextPlan], progress: SampleProgress | None) -> None:
        self.adapter, self.plans, self.progress = adapter, plans, progress
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
                out[i] = self._read([list(s) for s in seqs], {i: seqs}, len(seqs))
            else:
                rows = self._rows.setdefault(i, {})
                new = list(dict.fromkeys(k for k in map(tuple, seqs) if k not in rows and k not in self._shared))
                if new:
                    self.remember(i, new, self._read([list(k) for k in new], {i: new}, len(seqs)))
                elif self.progress is not None:
                    self.progress.advance(len(seqs))  # all read before: answered at once
                out[i] = torch.stack([rows[k] if k in rows else self._shared[k] for k in map(tuple, seqs)])
        return out

    def _read(self, seqs: list[list[int]], paid: dict[int, list[Sequence[int]]], asked: int) -> torch.Tensor:
        """One model round over ``seqs`` (for ``asked`` samples), checked and booked on the
        texts that pay for them."""
        bar = None if self.progress is None else self.progress.answered(asked, len(seqs))
        t0 = time.perf_counter()
        raw = score_in_chunks(self.adapter, seqs, bar)
        elapsed = time.perf_counter() - t0
        check_rows(raw, len(seqs))
        book_round(self.adapter, self.plans, paid, elapsed)
        return raw
