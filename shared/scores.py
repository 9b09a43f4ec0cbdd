"""Scores per position, computed from a fitted surrogate without any model call.

``value``, ``importance`` and ``lin`` are properties of a unique token and are simply
broadcast to its positions. ``removal``, ``contribution`` and ``shapley`` depend on the
text: they treat each *position* as a player (a token occurring twice is two players).

All functions take per-position value ``v`` ((n,) or (n, C)) and importance ``s`` (n,); the
text-dependent ones also the surrogate's length law (:class:`~slalom_core.surrogate.LengthLaw`,
the identity by default), since F on a sub-text depends on how many tokens it keeps.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from .surrogate import IDENTITY_LAW, LengthLaw, dense_slots, softmax_weights, surrogate_forward

__all__ = [
    "Score",
    "SCORES",
    "SCORE_NAMES",
    "ADDITIVE_SCORES",
    "STORED_SCORES",
    "register_score",
    "unregister_score",
    "DEFAULT_SCORE",
    "check_score",
    "attention",
    "contribution",
    "removal",
    "lin",
    "shapley",
]


def _bcast(a: np.ndarray, like: np.ndarray) -> np.ndarray:
    return a[:, None] if like.ndim == 2 else a


def attention(s: np.ndarray) -> np.ndarray:
    """α_i = exp(s_i) / Σ_j exp(s_j) over the positions of the text.

    Example:
        >>> attention(np.zeros(4)).tolist()
        [0.25, 0.25, 0.25, 0.25]
    """
    st = torch.as_tensor(np.asarray(s, dtype=np.float64))
    # The text is one sample in which every position is its own slot.
    return softmax_weights(torch.ones(1, len(st), dtype=torch.float64), st)[0].numpy()


def contribution(v: np.ndarray, s: np.ndarray, law: LengthLaw = IDENTITY_LAW) -> np.ndarray:
    """α_i·ṽ_i, ṽ_i = p + A(n)(v_i − p) each value read at the text's length n (the length
    law): an additive split of the surrogate's output F(t) over positions. Under the
    identity law, α_i·v_i."""
    return _bcast(attention(s), v) * law.read_at(v, len(s))


def lin(v: np.ndarray, s: np.ndarray) -> np.ndarray:
    """v·exp(s), the paper's linearised score (Sec. 5.4, Eq. 65; s normalised by the caller).

    The exact gradient of the soft-removal model at λ = 1 is α_i (v_i − F(t)) (Eq. 64); the
    paper drops the −F(t) term on the way to Eq. 65, and so do we, to match its numbers.
    """
    return v * _bcast(np.exp(s), v)


def removal(v: np.ndarray, s: np.ndarray, empty_value: float = 0.0, law: LengthLaw = IDENTITY_LAW) -> np.ndarray:
    """F(t) − F(t without position i): the weighted mean without i is (f − α_i v_i)/(1 − α_i)
    (under the identity law the difference is α_i (v_i − f) / (1 − α_i)), read at n − 1 tokens.

    Removing the only position of a one-token text leaves the empty text, whose output is
    taken to be ``empty_value``.
    """
    n = len(s)
    a = attention(s)
    f = (_bcast(a, v) * v).sum(axis=0)
    full = law.apply(f[None] if v.ndim == 2 else np.array([f]), np.array([n]))[0]
    out = np.empty_like(v)
    single = a >= 1.0 - 1e-12
    rest = ~single
    without = (f - _bcast(a[rest], v) * v[rest]) / _bcast(1.0 - a[rest], v)
    out[rest] = full - law.apply(without, np.full(int(rest.sum()), n - 1.0))
    out[single] = full - empty_value
    return out


def _game_values(
    masks: np.ndarray, v: np.ndarray, s: np.ndarray, empty_value: float, law: LengthLaw = IDENTITY_LAW
) -> np.ndarray:
    """Surrogate output for each coalition (rows of a 0/1 mask over positions), under ``law``."""
    vt = torch.as_tensor(np.asarray(v, dtype=np.float64))
    pred, _ = surrogate_forward(
        vt if vt.ndim == 2 else vt[:, None],
        torch.as_tensor(s, dtype=torch.float64),
        *dense_slots(torch.as_tensor(masks, dtype=torch.float64)),
    )
    out = law.apply(pred.numpy() if vt.ndim == 2 else pred[:, 0].numpy(), masks.sum(axis=1))
    # The empty coalition is the reference point, not the all-zero weights' output 0.
    out[masks.sum(axis=1) == 0] = float(empty_value)
    return out


def shapley(
    v: np.ndarray,
    s: np.ndarray,
    *,
    empty_value: float = 0.0,
    exact_max_positions: int = 12,
    n_permutations: int = 512,
    seed: int | None = 0,
    law: LengthLaw = IDENTITY_LAW,
) -> np.ndarray:
    """Shapley values of the surrogate game S ↦ F(S) over the text's positions.

    The game is the fitted SLALOM evaluated on the sub-sequence S (no model calls), with
    F(∅) = ``empty_value`` (default 0: the reference point, when v are measured from it as
    in :class:`~slalom_core.SlalomExplanation`).
    Exact by enumerating coalitions for up to ``exact_max_positions`` positions; otherwise
    estimated from ``n_permutations`` random permutations, each used with its reverse
    (antithetic pairs). Both satisfy efficiency: Σ_i φ_i = F(t) − F(∅).

    Example:
        >>> phi = shapley(np.array([1.0, -1.0]), np.zeros(2))
        >>> phi.tolist()
        [1.0, -1.0]
    """
    n = len(s)
    if n <= exact_max_positions:
        codes = np.arange(2**n)
        masks = ((codes[:, None] >> np.arange(n)) & 1).astype(float)
        vals = _game_values(masks, v, s, empty_value, law)
        sizes = masks.sum(axis=1).astype(int)
        weight = np.array([math.factorial(k) * math.factorial(n - k - 1) / math.factorial(n) for k in range(n)])
        phi = np.zeros_like(v, dtype=float)
        for i in range(n):
            without = codes[(codes >> i) & 1 == 0]
            gain = vals[without | (1 << i)] - vals[without]
            wts = weight[sizes[without]]
            phi[i] = (_bcast(wts, gain) * gain).sum(axis=0)
        return phi
    w = np.exp(s - s.max())
    wv = _bcast(w, v) * v
    rng = np.random.default_rng(seed)
    half = max(1, n_permutations // 2)
    perms = np.argsort(rng.random((half, n)), axis=1)
    perms = np.concatenate([perms, perms[:, ::-1]])
    # Prefix sums along each permutation give F of every prefix in one pass: the same
    # forward as surrogate_forward, computed incrementally, which is O(n) per permutation
    # instead of O(n²) for n separate coalitions.
    cw = np.cumsum(w[perms], axis=1)
    cwv = np.cumsum(wv[perms], axis=1)
    vals = cwv / (cw[..., None] if v.ndim == 2 else cw)
    # The prefix of length j + 1 reads j + 1 tokens: the law scales each prefix's mean.
    k = np.arange(1, n + 1, dtype=np.float64)
    vals = law.apply(vals.reshape(-1, *v.shape[1:]), np.tile(k, len(perms))).reshape(vals.shape)
    start = np.full((len(perms), 1) + v.shape[1:], float(empty_value))
    gains = np.diff(np.concatenate([start, vals], axis=1), axis=1)
    phi = np.zeros_like(v, dtype=float)
    for p in range(len(perms)):
        phi[perms[p]] += gains[p]
    return phi / len(perms)


@dataclass(frozen=True)
class Score:
    """What one score is and how it is computed: a row of the score table every entry point reads.

    Attributes:
        name: the score's name (``score=`` in every adapter).
        formula: how it is computed from the fitted value v and importance s.
        unit: what its numbers are in.
        additive: the scores of a text sum, with the reference point, to an output (the
            surrogate's); safe for waterfall plots.
        from_base: measured from ``base_value`` (the reference point); False for a score
            with no zero of its own (importance).
        class0_sign: for a binary model, class 0's score is this times class 1's (log-odds
            of class 0 are minus those of class 1; importances are shared).
        per: "token" (a property of the unique token, broadcast to its positions) or
            "position" (each position is a player: a repeated token counts twice).
        compute: ``compute(v, s) -> scores``: per-position values ((n,) or (n, C), measured
            from the reference point) and importances ((n,)) to per-position scores, shaped
            like ``v``. No model call.
        stored: kept in saved tables (``to_dict``, corpus runs); False for a score that
            is cheap to recompute from v and s but costly to compute for every text (Shapley).
        takes_law: ``compute`` also takes the surrogate's length law as ``law=`` (scores of
            the surrogate on sub-texts: removal, contribution, shapley); call :meth:`of`.

    Example:
        >>> SCORES["contribution"].additive, SCORES["importance"].class0_sign
        (True, 1)
        >>> SCORES["lin"].compute(np.array([1.0, -2.0]), np.zeros(2)).tolist()
        [1.0, -2.0]
    """

    name: str
    formula: str
    unit: str
    additive: bool
    from_base: bool
    class0_sign: int
    per: str
    compute: Callable[..., np.ndarray]
    stored: bool = True
    takes_law: bool = False

    def of(self, v: np.ndarray, s: np.ndarray, law: LengthLaw = IDENTITY_LAW) -> np.ndarray:
        """The score of per-position ``v`` and ``s`` under the surrogate's length ``law``."""
        return self.compute(v, s, law=law) if self.takes_law else self.compute(v, s)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise ValueError(f"a score's name must be an identifier (a table column), got {self.name!r}")
        if self.per not in ("token", "position"):
            raise ValueError(f"per must be 'token' or 'position', got {self.per!r}")
        if self.class0_sign not in (-1, 1):
            raise ValueError(f"class0_sign must be -1 or 1, got {self.class0_sign!r}")
        if not callable(self.compute):
            raise TypeError(f"compute must be a function (v, s) -> scores, got {type(self.compute).__name__}")


def _value(v: np.ndarray, s: np.ndarray) -> np.ndarray:
    return v


def _importance(v: np.ndarray, s: np.ndarray) -> np.ndarray:
    return s


def _shapley_default(v: np.ndarray, s: np.ndarray, law: LengthLaw = IDENTITY_LAW) -> np.ndarray:
    return shapley(v, s, law=law)


#: The one table of scores (all computed from the fitted surrogate, no model call), in
#: display order. Add a score with :func:`register_score`: every entry point reads it.
SCORES: dict[str, Score] = {
    row.name: row
    for row in (
        Score(
            "value",
            "v_i",
            "log-odds from the reference point",
            additive=False,
            from_base=True,
            class0_sign=-1,
            per="token",
            compute=_value,
        ),
        Score(
            "importance",
            "s_i (mean-zero over the text's units)",
            "log-weight",
            additive=False,
            from_base=False,
            class0_sign=1,
            per="token",
            compute=_importance,
        ),
        Score(
            "lin",
            "v_i·exp(s_i)",
            "log-odds from the reference point × weight",
            additive=False,
            from_base=True,
            class0_sign=-1,
            per="token",
            compute=lin,
        ),
        Score(
            "removal",
            "F(t) − F(t∖i)",
            "log-odds (a difference)",
            additive=False,
            from_base=False,
            class0_sign=-1,
            per="position",
            compute=removal,
            takes_law=True,
        ),
        Score(
            "contribution",
            "α_i·ṽ_i, α = softmax(s), ṽ_i = p + A(n)(v_i − p) the value read at the text's length",
            "log-odds from the reference point",
            additive=True,
            from_base=True,
            class0_sign=-1,
            per="position",
            compute=contribution,
            takes_law=True,
        ),
        Score(
            "shapley",
            "Shapley values of S ↦ F(S)",
            "log-odds from the reference point",
            additive=True,
            from_base=True,
            class0_sign=-1,
            per="position",
            compute=_shapley_default,
            takes_law=True,
            stored=False,
        ),
    )
}


class _Names(Sequence):
    """The names of the table's rows that pass ``keep``, read from :data:`SCORES` at each use,
    so that a score registered later is listed too."""

    def __init__(self, keep: Callable[[Score], bool]) -> None:
        self._keep = keep

    def _names(self) -> tuple[str, ...]:
        return tuple(name for name, row in SCORES.items() if self._keep(row))

    def __getitem__(self, i):  # type: ignore[override]
        return self._names()[i]

    def __len__(self) -> int:
        return len(self._names())

    def __eq__(self, other: object) -> bool:
        return tuple(self) == tuple(other) if isinstance(other, (tuple, list, _Names)) else NotImplemented

    def __hash__(self) -> int:
        return hash(self._names())

    def __repr__(self) -> str:
        return repr(self._names())


#: Every score's name, in table order (a live view of :data:`SCORES`).
SCORE_NAMES: Sequence[str] = _Names(lambda row: True)
#: Scores that add up, with the reference point, to the surrogate's output.
ADDITIVE_SCORES: Sequence[str] = _Names(lambda row: row.additive)
#: Scores kept in saved tables (``to_dict``, corpus runs).
STORED_SCORES: Sequence[str] = _Names(lambda row: row.stored)

#: The one score every adapter returns unless told otherwise: alpha_i * v_i, exact (no
#: sampling), in log-odds measured from the reference point, and additive (sums with the
#: reference to the surrogate's output), like Lime's and SHAP's attributions.
DEFAULT_SCORE = "contribution"


def register_score(row: Score, *, replace: bool = False) -> Score:
    """Add a score to the table: :meth:`SlalomExplanation.scores`, ``to_dict``, Captum's and
    SHAP's ``score=``, corpus tables and summaries then offer it, with no other edit.

    Args:
        row: the score, its metadata and its ``compute(v, s)``.
        replace: allow replacing a score of the same name (the built-in ones included).

    Returns:
        ``row``.

    Example:
        >>> row = Score("odds_share", "exp(v_i)·α_i", "odds ratio × weight", additive=False, from_base=True,
        ...             class0_sign=-1, per="position", compute=lambda v, s: np.exp(v) * attention(s))
        >>> register_score(row).name in SCORE_NAMES
        True
        >>> unregister_score("odds_share")
    """
    if not isinstance(row, Score):
        raise TypeError(f"register_score takes a slalom_core.Score, got {type(row).__name__}")
    if row.name in SCORES and not replace:
        raise ValueError(f"a score named {row.name!r} exists; pass replace=True to replace it")
    SCORES[row.name] = row
    return row


def unregister_score(name: str) -> None:
    """Remove a registered score (a built-in one cannot be removed: the adapters rely on it).

    Example:
        >>> unregister_score("lin")
        Traceback (most recent call last):
        ...
        ValueError: 'lin' is a built-in score and cannot be removed
    """
    if name in _BUILT_IN:
        raise ValueError(f"{name!r} is a built-in score and cannot be removed")
    SCORES.pop(check_score(name))


_BUILT_IN = frozenset(SCORES)


def check_score(name: str) -> str:
    """``name`` if it is a score of the table, else a ValueError listing them.

    Example:
        >>> check_score("lin")
        'lin'
    """
    if name not in SCORES:
        raise ValueError(f"unknown score {name!r}; choose one of {SCORE_NAMES}")
    return name
