"""Checks of a fitted surrogate against what the model did on samples it already read.

A SLALOM is a softmax-weighted mean of values, so it cannot accumulate evidence: when a fit
puts the surrogate's output near a confident model's, deleting a mildly polar token *raises*
the mean while the model's own output falls. The surrogate's ``removal`` score (F(t) minus F
of the text without the token) then points the wrong way for such tokens. That is a property
of the surrogate class, not of one fit, so it is measured per text, on the design's own
deletion samples, and reported rather than fitted away.
"""

from __future__ import annotations

import numpy as np

from ..surrogate import IDENTITY_LAW, LengthLaw, count_matrix

__all__ = ["removal_agreement", "REMOVAL_AGREEMENT_MIN"]

#: ``removal`` is reported as agreeing with the model's deletions where the rank correlation
#: below is at least this: half the way from no relation to a perfect one. With the 20-40
#: deletion samples a design reads, chance alone stays below it (the sd of a rank
#: correlation of unrelated lists is about 1/√(n − 1), 0.16–0.23).
REMOVAL_AGREEMENT_MIN = 0.5


def _ranks(x: np.ndarray) -> np.ndarray:
    order = np.argsort(x, kind="stable")
    r = np.empty(len(x))
    r[order] = np.arange(len(x), dtype=float)
    # ties share their mean rank, so that a constant list has no spurious order
    for v in np.unique(x):
        tie = x == v
        if tie.sum() > 1:
            r[tie] = r[tie].mean()
    return r


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    ra, rb = _ranks(a), _ranks(b)
    ra, rb = ra - ra.mean(), rb - rb.mean()
    den = float(np.sqrt(np.sum(ra**2) * np.sum(rb**2)))
    return float(np.sum(ra * rb) / den) if den > 0 else float("nan")


def removal_agreement(
    deletions: list[np.ndarray],
    y_deletions: np.ndarray,
    position_units: np.ndarray,
    full_target: np.ndarray,
    value: np.ndarray,
    importance: np.ndarray,
    law: LengthLaw = IDENTITY_LAW,
) -> float:
    """Spearman correlation, over deletion samples of the text, between the drop that the
    surrogate's ``removal`` scores predict (their sum over the deleted tokens) and the model's
    own drop (its output on the text minus its output on the sample).

    Both drops are read along the model's move on the text (for one log-odds column, the
    log-odds themselves), so a positive correlation means: the tokens that ``removal`` calls
    supportive are those whose deletion lowers the model's output. NaN with fewer than 5
    deletion samples or where either drop is constant.

    Args:
        deletions: unit-index sequences, each the text with some positions deleted.
        y_deletions: (n, K) the model's outputs on them, from the reference point.
        position_units: the text's unit index per position.
        full_target: (K,) the model's output on the text, from the reference point.
        value: (U, K) fitted values; importance: (U,) fitted importances.
        law: the surrogate's length law (the identity: the paper's SLALOM).

    Example:
        >>> v = np.array([[2.0], [-1.0], [0.5]]); s = np.zeros(3)
        >>> text = np.array([0, 1, 2])
        >>> dels = [np.array([1, 2]), np.array([0, 2]), np.array([0, 1]), np.array([2]), np.array([0])]
        >>> y = np.array([[-0.25], [1.25], [0.5], [0.5], [2.0]])  # a model that is this SLALOM
        >>> round(removal_agreement(dels, y, text, np.array([0.5]), v, s), 3)  # not 1: two tokens deleted
        0.973
    """
    if len(deletions) < 5:
        return float("nan")
    n_units = len(value)
    value = np.asarray(value, dtype=np.float64).reshape(n_units, -1)
    full = np.asarray(full_target, dtype=np.float64).ravel()
    direction = full / np.linalg.norm(full) if value.shape[1] > 1 and np.linalg.norm(full) > 0 else np.ones(1)
    along = value @ direction  # (U,) each unit's value along the model's move
    counts = count_matrix([np.asarray(position_units)], n_units)[0].astype(np.float64)
    w = np.exp(np.asarray(importance, dtype=np.float64) - np.max(importance))
    total_w = float(counts @ w)
    f_full = float(counts @ (w * along)) / total_w
    # F(t) − F(t without one occurrence of u), from the surrogate's closed form.
    rest_w = total_w - w
    with np.errstate(invalid="ignore", divide="ignore"):
        f_without = np.where(rest_w > 0, (f_full * total_w - w * along) / np.where(rest_w > 0, rest_w, 1.0), f_full)
    # Under the length law the text reads n tokens and the text without u one fewer.
    n = float(counts.sum())
    pivot = np.broadcast_to(np.asarray(law.pivot, dtype=np.float64), (value.shape[1],)) @ direction
    along_law = LengthLaw(law.exponent, law.curvature, float(pivot))  # the law along the move
    removal = along_law.apply(np.array([f_full]), np.array([n]))[0] - along_law.apply(f_without, np.full(len(w), n - 1))
    removed = counts[None, :] - count_matrix(deletions, n_units)
    predicted = removed @ removal
    observed = (
        float(full @ direction) - np.asarray(y_deletions, dtype=np.float64).reshape(len(deletions), -1) @ direction
    )
    return _spearman(predicted, observed)
