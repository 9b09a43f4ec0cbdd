"""Knowing when not to trust an amortized explanation.

Two checks. :func:`ood_check` flags a text far from what the head was trained on (a length
outside the training texts' range, or many tokens it never saw in training), from the text
alone. :func:`agreement` compares amortized explanations with per-text fits of the same
texts (the audit), by the Spearman correlation of value and of importance over each text's
unique tokens.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["AmortizedFewTextsWarning", "AmortizedOODWarning", "ood_check", "spearman", "agreement", "AuditReport"]


class AmortizedOODWarning(UserWarning):
    """Texts unlike the training texts: their amortized scores are extrapolations."""


class AmortizedFewTextsWarning(UserWarning):
    """A head trained on fewer texts than the fewest measured (docs/amortized.md): its
    quality is untested (the message states the number)."""


def ood_check(n_positions: int, token_ids: list[int], stats: dict, *, max_unseen: float) -> dict:
    """How far one text is from the training texts.

    Args:
        n_positions: the text's positions.
        token_ids: its token ids.
        stats: the training texts' ``length_range`` [lo, hi] and ``vocabulary`` (a set of ids).
        max_unseen: the largest share of unseen token ids that is not flagged.

    Returns:
        ``{"length": n, "length_range": [lo, hi], "unseen_share": x, "warning": str or None}``.

    Example:
        >>> ood_check(3, [1, 2, 9], {"length_range": [2, 5], "vocabulary": {1, 2}}, max_unseen=0.5)["warning"] is None
        True
        >>> ood_check(9, [1], {"length_range": [2, 5], "vocabulary": {1}}, max_unseen=0.5)["warning"]
        "its length 9 is outside the training texts' range [2, 5]"
    """
    lo, hi = stats["length_range"]
    vocab = stats["vocabulary"]
    unseen = float(np.mean([t not in vocab for t in token_ids])) if token_ids else 0.0
    why = []
    if not lo <= n_positions <= hi:
        why.append(f"its length {n_positions} is outside the training texts' range [{lo}, {hi}]")
    if unseen > max_unseen:
        why.append(f"{unseen:.0%} of its tokens never occur in the training texts (more than {max_unseen:.0%})")
    return {
        "length": int(n_positions),
        "length_range": [int(lo), int(hi)],
        "unseen_share": unseen,
        "warning": "; ".join(why) or None,
    }


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's rank correlation (average ranks for ties); nan when either is constant.

    Example:
        >>> spearman(np.array([1.0, 2.0, 3.0]), np.array([10.0, 30.0, 20.0]))
        0.5
    """
    rx, ry = _ranks(np.asarray(x, dtype=float)), _ranks(np.asarray(y, dtype=float))
    if len(rx) < 2 or rx.std() == 0 or ry.std() == 0:
        return float("nan")
    return float(np.corrcoef(rx, ry)[0, 1])


def _ranks(x: np.ndarray) -> np.ndarray:
    order = np.argsort(x, kind="stable")
    ranks = np.empty(len(x))
    ranks[order] = np.arange(len(x), dtype=float)
    for value in np.unique(x[np.isnan(x) == False]):  # noqa: E712 - elementwise
        tied = x == value
        if tied.sum() > 1:
            ranks[tied] = ranks[tied].mean()
    return ranks


@dataclass
class AuditReport:
    """Agreement of amortized explanations with per-text fits of the same texts.

    Attributes:
        indices: the audited texts' places in the call.
        value_spearman, importance_spearman: per audited text, over its unique tokens.
        method, n_samples: the per-text fits' method and budget.
        seconds: what the per-text fits cost.
    """

    indices: list[int]
    value_spearman: list[float]
    importance_spearman: list[float]
    method: str
    n_samples: int
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def mean_value_spearman(self) -> float:
        return float(np.nanmean(self.value_spearman)) if self.indices else float("nan")

    @property
    def mean_importance_spearman(self) -> float:
        return float(np.nanmean(self.importance_spearman)) if self.indices else float("nan")

    def summary(self) -> dict:
        """The report as plain numbers (for logs and JSON)."""
        return {
            "n_audited": len(self.indices),
            "value_spearman": self.mean_value_spearman,
            "importance_spearman": self.mean_importance_spearman,
            "method": self.method,
            "n_samples": self.n_samples,
            "seconds": self.seconds,
        }


def agreement(amortized, fitted) -> tuple[float, float]:
    """Spearman of value and of importance between two explanations of one text, per unique unit.

    Example:
        >>> agreement(exp_amortized, exp_fitted)  # doctest: +SKIP
        (0.83, 0.61)
    """
    if list(amortized.token_ids) != list(fitted.token_ids):
        raise ValueError("the two explanations are of different texts (their tokens differ)")
    first = np.unique(np.asarray(amortized.unit_index), return_index=True)[1]
    return (
        spearman(amortized.value[first], fitted.value[first]),
        spearman(amortized.importance[first], fitted.importance[first]),
    )
