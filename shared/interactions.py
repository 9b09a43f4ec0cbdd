"""Shapley interactions of the surrogate game, and the game itself for shapiq.

A fitted SLALOM is a cheap, exact cooperative game over a text's positions: a coalition S
(the positions kept, in order) is worth F(S) = Σ_{i∈S} α_i(S) v_i, the softmax-weighted mean
of the kept tokens' values, and the empty coalition is worth the reference point (0 in the
units of :attr:`~slalom_core.SlalomExplanation.value`, measured from it). This is the game
whose Shapley values :meth:`~slalom_core.SlalomExplanation.shapley` returns; here are its
Shapley interaction indices (SII, Grabisch & Roubens 1999) and their k-SII aggregation
(Bord et al. 2023), computed by enumerating its 2^n coalitions: no model call, exact.

shapiq is optional: only :func:`to_interaction_values` imports it, when called.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from itertools import combinations
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from .surrogate import IDENTITY_LAW, LengthLaw, dense_slots, surrogate_forward

if TYPE_CHECKING:
    from .explained import Explained

__all__ = [
    "INDICES",
    "EXACT_MAX_POSITIONS",
    "coalition_values",
    "shapley_interactions",
    "surrogate_game",
    "to_interaction_values",
]

#: The interaction indices computed here: "SII" (order 1 = the Shapley values) and "k-SII"
#: (efficient: every value up to ``max_order`` sums to F(x) − F(∅)).
INDICES = ("SII", "k-SII")
#: Positions up to which the interactions are enumerated by default (2^16 coalitions).
EXACT_MAX_POSITIONS = 16
#: Above this many positions the enumeration is refused whatever is asked (2^22 coalitions).
HARD_MAX_POSITIONS = 22
_SHAPIQ_MISSING = (
    "to_interaction_values needs shapiq: pip install 'slalom-xai[shapiq]' (or pip install 'shapiq==1.4.1')"
)


def coalition_values(
    v: np.ndarray, s: np.ndarray, masks: np.ndarray, *, empty_value: float = 0.0, law: LengthLaw = IDENTITY_LAW
) -> np.ndarray:
    """F(S) of the surrogate game for each row of a 0/1 mask over positions, under the
    surrogate's length ``law`` (a coalition of k positions reads k tokens).

    Args:
        v: (n,) per-position values, measured from the reference point.
        s: (n,) per-position importances.
        masks: (m, n) 0/1 (or bool): the positions each coalition keeps.
        empty_value: the empty coalition's worth (the reference point in these units).

    Returns:
        (m,) the surrogate's output on each coalition.

    Example:
        >>> coalition_values(np.array([1.0, -1.0]), np.zeros(2), np.array([[1, 0], [1, 1], [0, 0]])).tolist()
        [1.0, 0.0, 0.0]
    """
    v = np.asarray(v, dtype=np.float64)
    masks = np.atleast_2d(np.asarray(masks, dtype=np.float64))
    if v.ndim != 1 or masks.shape[1] != len(v) or len(s) != len(v):
        raise ValueError(f"v and s must be (n,) and masks (m, n); got {v.shape}, {np.shape(s)}, {masks.shape}")
    pred, _ = surrogate_forward(
        torch.as_tensor(v)[:, None],
        torch.as_tensor(np.asarray(s, dtype=np.float64)),
        *dense_slots(torch.as_tensor(masks)),
    )
    out = law.apply(pred[:, 0].numpy(), masks.sum(axis=1))
    out[masks.sum(axis=1) == 0] = float(empty_value)  # the reference point, not 0/0
    return out


def _bernoulli(m: int) -> float:
    """The Bernoulli number B_m (B_1 = −1/2), for k-SII's aggregation."""
    b = [Fraction(1)]
    for j in range(1, m + 1):
        b.append(-sum(math.comb(j + 1, i) * b[i] for i in range(j)) / (j + 1))
    return float(b[m])


def _check(n: int, max_order: int, index: str, exact_max_positions: int) -> None:
    if index not in INDICES:
        raise ValueError(f"index must be one of {INDICES}, got {index!r}")
    if not 1 <= max_order:
        raise ValueError(f"max_order must be at least 1, got {max_order}")
    limit = min(exact_max_positions, HARD_MAX_POSITIONS)
    if n > limit:
        raise ValueError(
            f"exact interactions enumerate 2^n coalitions: this text has {n} positions, above the "
            f"limit of {limit} (exact_max_positions={exact_max_positions}, at most {HARD_MAX_POSITIONS}). "
            "Explain a shorter text or word granularity, raise exact_max_positions, or run a shapiq "
            "approximator on slalom_core.interactions.surrogate_game(exp) (no model calls either)"
        )


def shapley_interactions(
    v: np.ndarray,
    s: np.ndarray,
    *,
    max_order: int = 2,
    index: str = "SII",
    empty_value: float = 0.0,
    exact_max_positions: int = EXACT_MAX_POSITIONS,
    law: LengthLaw = IDENTITY_LAW,
) -> dict[tuple[int, ...], float]:
    """Exact interaction indices of the surrogate game, every coalition up to ``max_order``.

    SII of a set T of k positions: Σ_{S ⊆ N∖T} (n−|S|−k)!·|S|!/(n−k+1)! · Δ_T F(S), with
    Δ_T F(S) = Σ_{L ⊆ T} (−1)^{k−|L|} F(S ∪ L). Its order-1 values are the Shapley values
    (:func:`slalom_core.scores.shapley`); its order-0 entry, the game's mean over coalition
    sizes. k-SII folds each higher order into the lower ones with Bernoulli numbers, so that
    all its values sum to F(N) − F(∅); its order-0 entry is F(∅).

    Args:
        v: (n,) per-position values, measured from the reference point.
        s: (n,) per-position importances.
        max_order: the largest coalition with a value. Default: 2 (pairs).
        index: "SII" (default) or "k-SII".
        empty_value: F(∅), the reference point (added to every F(S), so order 0 is absolute).
        exact_max_positions: enumerate up to this many positions (default 16, at most 22);
            beyond, a ValueError says what to do instead.
        law: the surrogate's length law (default: the identity, the paper's SLALOM).

    Returns:
        {coalition (sorted position tuple): value}, from () up to ``max_order``.

    Example:
        >>> iv = shapley_interactions(np.array([2.0, -1.0]), np.zeros(2))
        >>> iv[(0,)], iv[(1,)], iv[(0, 1)]
        (1.75, -1.25, -0.5)
    """
    n = len(s)
    _check(n, max_order, index, exact_max_positions)
    max_order = min(max_order, n)
    codes = np.arange(2**n)
    masks = (codes[:, None] >> np.arange(n)) & 1
    game = empty_value + coalition_values(v, s, masks, law=law)
    sizes = masks.sum(axis=1)
    sii: dict[tuple[int, ...], float] = {}
    for k in range(max_order + 1):
        weight = np.array(
            [math.factorial(n - j - k) * math.factorial(j) / math.factorial(n - k + 1) for j in range(n - k + 1)]
        )
        for coalition in combinations(range(n), k):
            t = sum(1 << i for i in coalition)
            free = codes[(codes & t) == 0]
            delta = np.zeros(len(free))
            for size in range(k + 1):
                for part in combinations(coalition, size):
                    delta += (-1) ** (k - size) * game[free | sum(1 << i for i in part)]
            sii[coalition] = float((weight[sizes[free]] * delta).sum())
    if index == "SII":
        return sii
    ksii = {(): float(game[0])}
    for coalition in sii:
        if coalition:
            ksii[coalition] = sum(
                _bernoulli(len(other) - len(coalition)) * val
                for other, val in sii.items()
                if set(coalition) <= set(other)
            )
    return ksii


def _output(exp: Explained, output: int | str | None) -> tuple[np.ndarray, float, LengthLaw]:
    """The values (n,), reference point and length law of one explained output."""
    v = np.asarray(exp.value, dtype=np.float64)
    base = np.asarray(exp.base_value, dtype=np.float64)
    if v.ndim == 1:
        if output is not None:
            raise ValueError("this explanation has one explained output: leave output=None")
        return v, float(base.reshape(-1)[0]) if base.ndim else float(base), exp.surrogate.law.column(exp.class_index)
    names = list(exp.class_names or range(v.shape[1]))
    if output in names and not isinstance(output, bool):
        col = names.index(output)
    elif isinstance(output, (int, np.integer)) and not isinstance(output, bool) and 0 <= output < v.shape[1]:
        # A class index counts from 0; a negative one is refused rather than read from the
        # end, so that output=-1 never stands for a class the caller did not name.
        col = int(output)
    else:
        got = "" if output is None else f", not {output!r}"
        raise ValueError(
            f"a joint fit explains {v.shape[1]} outputs: choose one with output= (a class name, one of "
            f"{names}, or an index 0..{v.shape[1] - 1}{got})"
        )
    return v[:, col], float(base.reshape(-1)[col]) if base.ndim else float(base), exp.surrogate.law.column(col)


def surrogate_game(exp: Explained, *, output: int | str | None = None) -> Callable[[np.ndarray], np.ndarray]:
    """The explanation's surrogate game as a callable on (m, n) coalition masks, in absolute units.

    ``game(masks)`` returns the reference point plus F(S) per row (the reference point for
    the empty row): what shapiq's approximators and exact computer call, at no model cost.

    Example:
        >>> game = surrogate_game(exp)  # doctest: +SKIP
        >>> shapiq.SVARMIQ(exp.n_positions, max_order=2).approximate(budget=2000, game=game)  # doctest: +SKIP
    """
    v, base, law = _output(exp, output)
    s = np.asarray(exp.importance, dtype=np.float64)

    def game(masks: np.ndarray) -> np.ndarray:
        return base + coalition_values(v, s, masks, law=law)

    return game


def to_interaction_values(
    exp: Explained,
    *,
    max_order: int = 2,
    index: str = "SII",
    output: int | str | None = None,
    exact_max_positions: int = EXACT_MAX_POSITIONS,
) -> Any:
    """A shapiq ``InteractionValues`` of the surrogate game (see :func:`shapley_interactions`).

    ``baseline_value`` is the reference point (``exp.base_value``), so shapiq's plots start
    there; with ``index="SII"`` order 1 equals ``exp.shapley()``, with ``"k-SII"`` every
    value sums, with the baseline, to ``exp.surrogate_output`` (force and waterfall plots).

    Example:
        >>> iv = exp.to_interaction_values(max_order=2)  # doctest: +SKIP
        >>> iv.plot_network(feature_names=exp.tokens)  # doctest: +SKIP
    """
    try:
        import shapiq
    except ImportError as err:
        raise ImportError(_SHAPIQ_MISSING) from err
    v, base, law = _output(exp, output)
    values = shapley_interactions(
        v,
        exp.importance,
        max_order=max_order,
        index=index,
        empty_value=base,
        exact_max_positions=exact_max_positions,
        law=law,
    )
    lookup = {c: i for i, c in enumerate(values)}
    return shapiq.InteractionValues(
        np.array(list(values.values())),
        index=index,
        max_order=max(len(c) for c in values),
        n_players=exp.n_positions,
        min_order=0,
        interaction_lookup=lookup,
        estimated=False,
        estimation_budget=None,
        baseline_value=base,
    )
