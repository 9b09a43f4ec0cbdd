"""Bookkeeping of a benchmark: one result per (method, text), a predictor wrapper that
counts model evaluations and time, and the mean ± standard error per method and metric.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .faithfulness import Predictor
from .statistics import standard_error

__all__ = ["InstanceResult", "CountingPredictor", "aggregate_results"]


@dataclass
class InstanceResult:
    """The evaluation of one explanation method on one text.

    Attributes:
        method: the method's display name, e.g. ``"slalom-eff/lin"`` or ``"captum-lime"``.
        metrics: ``{metric name: value}``; nan for undefined values (skipped when
            aggregating).
        seconds: wall time of the explanation (not of its evaluation).
        model_evaluations: sequences the explainer sent to the model (None if unknown).
        instance_id: the text's id in the data set.
        extra: anything else worth keeping (diagnostics, curves as lists, ...).

    Example:
        >>> InstanceResult("random", {"comprehensiveness": 0.04}, seconds=0.0).method
        'random'
    """

    method: str
    metrics: dict[str, float] = field(default_factory=dict)
    seconds: float = float("nan")
    model_evaluations: int | None = None
    instance_id: Any = None
    extra: dict[str, Any] = field(default_factory=dict)

    def values(self) -> dict[str, float]:
        """All numbers to aggregate: the metrics plus ``seconds`` and ``model_evaluations``."""
        out = {k: float(v) for k, v in self.metrics.items()}
        out["seconds"] = float(self.seconds)
        out["model_evaluations"] = float("nan") if self.model_evaluations is None else float(self.model_evaluations)
        return out

    def to_dict(self) -> dict[str, Any]:
        """A flat, JSON-friendly row (metrics as top-level keys)."""
        row: dict[str, Any] = {"method": self.method, "instance_id": self.instance_id}
        row.update(self.values())
        return row


class CountingPredictor:
    """Wraps a ``predict`` callable and counts what goes through it.

    Use it around the model given to an explainer to count its model evaluations and
    time, the same way for every method.

    Attributes:
        calls: number of calls.
        sequences: number of sequences scored (= model evaluations).
        tokens: total tokens in those sequences (without special tokens); short
            sequences are cheaper, which is where SLALOM-eff saves time.
        seconds: wall time spent inside the wrapped callable.

    Example:
        >>> cp = CountingPredictor(lambda seqs: np.zeros(len(seqs)))
        >>> _ = cp([[1, 2], [3]])
        >>> cp.calls, cp.sequences, cp.tokens
        (1, 2, 3)
    """

    def __init__(self, predict: Predictor) -> None:
        self.predict = predict
        self.reset()

    def reset(self) -> None:
        """Set all counters to zero."""
        self.calls = 0
        self.sequences = 0
        self.tokens = 0
        self.seconds = 0.0

    def __call__(self, sequences: list[list[int]]) -> Any:
        t0 = time.perf_counter()
        try:
            return self.predict(sequences)
        finally:
            self.seconds += time.perf_counter() - t0
            self.calls += 1
            self.sequences += len(sequences)
            self.tokens += sum(len(s) for s in sequences)


def aggregate_results(
    results: Iterable[InstanceResult],
    *,
    metrics: Sequence[str] | None = None,
) -> list[dict[str, Any]]:
    """Mean ± standard error per method and metric (pandas-free).

    NaN values (degenerate instances) are skipped and counted in ``n_missing``.

    Args:
        results: per-instance results of any number of methods.
        metrics: which metrics to report, in this order; default: every metric seen,
            in order of first appearance, then ``seconds`` and ``model_evaluations``.

    Returns:
        One dict per (method, metric), methods in order of first appearance, with keys
        ``method``, ``metric``, ``n``, ``n_missing``, ``mean``, ``se``, ``median``.
        ``pandas.DataFrame(rows)`` turns it into a table.

    Example:
        >>> rows = aggregate_results([InstanceResult("a", {"x": 1.0}),
        ...                           InstanceResult("a", {"x": 3.0})], metrics=["x"])
        >>> rows[0]["mean"], rows[0]["se"]
        (2.0, 1.0)
    """
    by_method: dict[str, list[dict[str, float]]] = {}
    seen: dict[str, None] = {}
    for r in results:
        vals = r.values()
        by_method.setdefault(r.method, []).append(vals)
        for k in r.metrics:
            seen.setdefault(k, None)
    names = list(metrics) if metrics is not None else [*seen, "seconds", "model_evaluations"]
    rows: list[dict[str, Any]] = []
    for method, items in by_method.items():
        for name in names:
            v = np.array([it.get(name, np.nan) for it in items], dtype=float)
            ok = v[~np.isnan(v)]
            rows.append(
                {
                    "method": method,
                    "metric": name,
                    "n": int(ok.size),
                    "n_missing": int(v.size - ok.size),
                    "mean": float(ok.mean()) if ok.size else float("nan"),
                    "se": standard_error(ok),
                    "median": float(np.median(ok)) if ok.size else float("nan"),
                }
            )
    return rows
