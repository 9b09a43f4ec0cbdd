"""Rank and summary statistics in numpy: average ranks, ROC-AUC, average precision,
Spearman's ρ and the standard error of a mean.

scipy and scikit-learn are only an optional ``eval`` extra of the distribution, so the
metrics implement these themselves; the tests check them against both packages.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

__all__ = ["average_ranks", "roc_auc", "average_precision", "spearman", "standard_error"]


def average_ranks(x: np.ndarray) -> np.ndarray:
    """1-based ranks with ties sharing their average rank (scipy's ``rankdata`` default).

    Args:
        x: a 1-D float array.

    Returns:
        Float array of the same length: the rank of each entry, ties averaged.

    Example:
        >>> average_ranks(np.array([3.0, 1.0, 3.0])).tolist()
        [2.5, 1.0, 2.5]
    """
    order = np.argsort(x, kind="stable")
    xs = x[order]
    # Boundaries of runs of equal values in sorted order.
    starts = np.r_[0, np.flatnonzero(xs[1:] != xs[:-1]) + 1]
    ends = np.r_[starts[1:], len(xs)]
    avg = (starts + ends + 1) / 2.0  # mean of the 1-based ranks starts+1 … ends
    ranks = np.empty(len(x), dtype=float)
    ranks[order] = np.repeat(avg, ends - starts)
    return ranks


def _binary_inputs(labels: Any, scores: Any) -> tuple[np.ndarray, np.ndarray]:
    y = np.asarray(labels, dtype=float).reshape(-1)
    s = np.asarray(scores, dtype=float).reshape(-1)
    if y.shape != s.shape:
        raise ValueError(f"{y.shape[0]} labels for {s.shape[0]} scores")
    if not np.all(np.isin(y, (0.0, 1.0))):
        raise ValueError("labels must be 0 or 1")
    if not np.all(np.isfinite(s)):
        raise ValueError("scores contain NaN or inf")
    return y.astype(bool), s


def roc_auc(labels: Sequence[int] | np.ndarray, scores: Sequence[float] | np.ndarray) -> float:
    """ROC-AUC of ``scores`` for binary ``labels`` (ties count one half); nan if one class.

    Computed as the Mann-Whitney statistic, which equals scikit-learn's
    ``roc_auc_score`` including ties.

    Example:
        >>> roc_auc([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8])
        0.75
    """
    y, s = _binary_inputs(labels, scores)
    n_pos, n_neg = int(y.sum()), int((~y).sum())
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    r = average_ranks(s)
    return float((r[y].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


def average_precision(labels: Sequence[int] | np.ndarray, scores: Sequence[float] | np.ndarray) -> float:
    """Average precision (AUPRC) as in scikit-learn: ``Σ_n (R_n − R_{n−1}) P_n``.

    Thresholds are the distinct score values, so tied scores enter together (no
    interpolation). nan when there is no positive label.

    Example:
        >>> round(average_precision([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8]), 4)
        0.8333
    """
    y, s = _binary_inputs(labels, scores)
    n_pos = int(y.sum())
    if n_pos == 0:
        return float("nan")
    order = np.argsort(-s, kind="stable")
    ys, ss = y[order], s[order]
    # Last index of every run of equal scores = one threshold.
    last = np.r_[np.flatnonzero(ss[1:] != ss[:-1]), len(ss) - 1]
    tp = np.cumsum(ys)[last]
    predicted = last + 1
    precision = tp / predicted
    recall = tp / n_pos
    recall_prev = np.r_[0.0, recall[:-1]]
    return float(np.sum((recall - recall_prev) * precision))


def spearman(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> float:
    """Spearman's rank correlation (average ranks for ties); nan if undefined.

    Undefined means fewer than 2 points or a constant input. Equals
    ``scipy.stats.spearmanr(x, y).statistic``.

    Example:
        >>> spearman([1, 2, 3, 4], [10, 30, 20, 40])
        0.8
    """
    a = np.asarray(x, dtype=float).reshape(-1)
    b = np.asarray(y, dtype=float).reshape(-1)
    if a.shape != b.shape:
        raise ValueError("x and y must have the same length")
    if a.shape[0] < 2 or not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        return float("nan")
    ra, rb = average_ranks(a), average_ranks(b)
    ra -= ra.mean()
    rb -= rb.mean()
    den = math.sqrt(float(ra @ ra) * float(rb @ rb))
    if den == 0.0:
        return float("nan")
    return float(np.clip((ra @ rb) / den, -1.0, 1.0))


def standard_error(values: Iterable[float]) -> float:
    """Standard error of the mean, ``std(ddof=1) / sqrt(n)``, ignoring NaN; nan if n < 2.

    Example:
        >>> standard_error([1.0, 2.0, 3.0]) == 1 / 3 ** 0.5
        True
    """
    v = np.asarray(list(values), dtype=float)
    v = v[~np.isnan(v)]
    if v.size < 2:
        return float("nan")
    return float(np.std(v, ddof=1) / math.sqrt(v.size))
