"""Does a fitted SLALOM describe the model *in the text's context*? Held-out sub-texts.

A local explanation explains one text. Its surrogate should then predict what the model does
on that text's sub-texts, not only on the samples it was fitted to. This module draws, per
text, ``per_keep`` sub-texts for each share of positions kept (50, 70 and 90 % by default,
positions kept in their order), scores them with the model once, and measures a fitted
surrogate on them:

- ``ctx_r2``: R² of the surrogate's log-odds against the model's (the same reference point
  for both; the sub-texts' own variance in the denominator);
- ``ctx_rho``: Spearman rank correlation between the two;
- ``ctx_r2_equal``, ``ctx_rho_equal``: the same with every importance set equal (the
  surrogate is then the mean value of the sub-text's tokens): the fitted importances earn
  their place only if they beat these (paired, per text).

The sub-texts are drawn from their own seeded generator, never from a design's, so every
design is judged on the same sub-texts, none of which it was fitted to (a design may draw a
sample equal to one by chance; on texts of 120+ tokens that has probability ~0).

Used by :mod:`.front` (the ``ctx_*`` columns) and :mod:`.recovery`. Not a test.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

#: Shares of the text's positions kept in the held-out sub-texts (the issue's 50, 70, 90 %).
KEEPS: tuple[float, ...] = (0.5, 0.7, 0.9)
#: Sub-texts per share: 45 per text in all.
PER_KEEP = 15


def held_out_subtexts(
    rng: np.random.Generator, n_positions: int, keeps: Sequence[float] = KEEPS, per_keep: int = PER_KEEP
) -> list[np.ndarray]:
    """Position indices of the held-out sub-texts: ``per_keep`` for each share in ``keeps``,
    each a sorted random subset of ``round(share · n)`` positions (at least one).

    Example:
        >>> subs = held_out_subtexts(np.random.default_rng(0), 10)
        >>> len(subs), [len(s) for s in subs[::15]]
        (45, [5, 7, 9])
    """
    out = []
    for keep in keeps:
        k = max(1, int(round(keep * n_positions)))
        out += [np.sort(rng.choice(n_positions, size=k, replace=False)) for _ in range(per_keep)]
    return out


def surrogate_on(positions: Sequence[np.ndarray], value: np.ndarray, importance: np.ndarray) -> np.ndarray:
    """The SLALOM Σ α_i v_i on each sub-text (per-position ``value`` and ``importance``, one
    output column), measured from the same point as ``value``.

    Example:
        >>> surrogate_on([np.array([0, 1])], np.array([1.0, -1.0]), np.array([0.0, 0.0]))
        array([0.])
    """
    out = np.empty(len(positions))
    for j, p in enumerate(positions):
        s = importance[p]
        w = np.exp(s - s.max())
        out[j] = float(np.dot(w, value[p]) / w.sum())
    return out


def _r2(y: np.ndarray, pred: np.ndarray) -> float:
    sst = float(np.sum((y - y.mean()) ** 2))
    return float(1.0 - np.sum((pred - y) ** 2) / sst) if sst > 1e-12 else float("nan")


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    from scipy.stats import spearmanr

    if np.ptp(a) == 0 or np.ptp(b) == 0:
        return float("nan")
    return float(spearmanr(a, b)[0])


def context_metrics(
    y: np.ndarray, positions: Sequence[np.ndarray], value: np.ndarray, importance: np.ndarray
) -> dict[str, float]:
    """``ctx_r2``, ``ctx_rho`` and their equal-importance counterparts (module docstring).

    ``y`` are the model's log-odds on the sub-texts, measured from the same point as
    ``value`` (the explanation's base value subtracted).

    Example:
        >>> subs = [np.array([0]), np.array([1]), np.array([0, 1])]
        >>> v, s = np.array([2.0, -1.0]), np.array([1.0, 0.0])
        >>> y = surrogate_on(subs, v, s)
        >>> context_metrics(y, subs, v, s)["ctx_r2"]
        1.0
    """
    pred = surrogate_on(positions, value, importance)
    equal = surrogate_on(positions, value, np.zeros_like(importance))
    return {
        "ctx_r2": _r2(y, pred),
        "ctx_rho": _spearman(y, pred),
        "ctx_r2_equal": _r2(y, equal),
        "ctx_rho_equal": _spearman(y, equal),
    }


def score_subtexts(
    log_odds: Callable[[list[list[int]]], np.ndarray], token_ids: Sequence[int], positions: Sequence[np.ndarray]
) -> np.ndarray:
    """The model's log-odds on each sub-text (``log_odds`` takes lists of token ids)."""
    ids = np.asarray(token_ids)
    return np.asarray(log_odds([ids[p].tolist() for p in positions]), dtype=float)
