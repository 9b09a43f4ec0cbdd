"""Removal-based faithfulness (ERASER, DeYoung et al. 2020; the paper's Sec. 6 and App. F).

:func:`removal_metric` scores one text under deletion (top tokens removed) or insertion
(only the top tokens kept) at a list of fractions; :func:`comprehensiveness`,
:func:`sufficiency`, :func:`deletion_aopc`, :func:`insertion_aopc`,
:func:`deletion_curve` and :func:`insertion_curve` are that function with the mode and
the default fractions fixed, and :func:`faithfulness_metrics` computes the ERASER pair and
both curves with one model call. The model is a callable ``predict(sequences) ->
np.ndarray`` of shape ``(B,)`` that returns the probability (or any score) of the target
class for token-id sequences given *without* special tokens (the caller's adapter adds
them).

Conventions
-----------
* **Ranking.** Tokens are ranked by their attribution value, *descending*: with signed
  attributions the most positive evidence for the target class comes first, which is what
  deletion / comprehensiveness should remove first. ``absolute=True`` ranks by ``|a|``
  instead (for unsigned scores such as SLALOM importance). Ties are broken by position,
  earlier first (a stable sort), so results are deterministic.
* **Bins.** A fraction ``f`` of an ``n``-token text means ``k = ceil(f * n)`` tokens,
  at least 1 for ``f > 0`` and at most ``n``; ``f = 0`` means ``k = 0``. A tolerance of
  1e-9 keeps float noise (``0.1 * 30 = 3.0000000000000004``) from adding a token.
* **AOPC** is the mean, over the requested fractions, of ``f(x) - f(x')`` where ``x'`` is
  the perturbed text. For deletion that is ERASER comprehensiveness (higher is better);
  for insertion (keep only the top-k tokens) it is ERASER sufficiency (lower is better).
  ERASER's bins are 1, 5, 10, 20, 50 %; like the ERASER reference code the mean runs over
  the bins only (no ``k = 0`` term). Pass ``fractions`` containing 0 to include it.
* **Removal strategy.** ``"delete"`` drops tokens (shorter sequences); ``"replace"``
  substitutes ``replacement_id`` (e.g. the tokenizer's mask or pad id) and keeps the
  length. The strategy and id are stored in every result.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from .statistics import standard_error

__all__ = [
    "ERASER_BINS",
    "CURVE_FRACTIONS",
    "Predictor",
    "PerturbationResult",
    "FaithfulnessReport",
    "rank_tokens",
    "tokens_for_fraction",
    "perturb_sequence",
    "random_attributions",
    "removal_metric",
    "comprehensiveness",
    "sufficiency",
    "deletion_aopc",
    "insertion_aopc",
    "deletion_curve",
    "insertion_curve",
    "faithfulness_metrics",
    "mean_curve",
]

#: ERASER's default bins (DeYoung et al. 2020): fractions of the text's tokens.
ERASER_BINS: tuple[float, ...] = (0.01, 0.05, 0.10, 0.20, 0.50)
#: Default x-axis of the deletion / insertion curves (0 %, 10 %, …, 100 %).
CURVE_FRACTIONS: tuple[float, ...] = tuple(i / 10 for i in range(11))

#: ``predict(sequences) -> scores``: target-class probability (or score), shape ``(B,)``.
Predictor = Callable[[list[list[int]]], Any]
Mode = Literal["deletion", "insertion"]
Strategy = Literal["delete", "replace"]

_FRACTION_TOL = 1e-9


@dataclass
class PerturbationResult:
    """Scores of one text under deletion or insertion of its top-ranked tokens.

    Attributes:
        mode: ``"deletion"`` (top-k tokens removed) or ``"insertion"`` (only the top-k
            tokens kept).
        fractions: the requested fractions (bins, or the curve's x-axis).
        k: tokens removed (deletion) or kept (insertion) for each fraction.
        scores: the model's score of the perturbed text for each fraction.
        full_score: the model's score of the unperturbed text.
        n_tokens: length of the text.
        strategy: ``"delete"`` or ``"replace"``.
        replacement_id: the id used by ``"replace"`` (None for ``"delete"``).
        absolute: whether tokens were ranked by ``|attribution|``.
        model_evaluations: sequences sent to ``predict`` for this result (shared
            sequences are counted once; see :func:`faithfulness_metrics`).

    Example:
        >>> r = PerturbationResult("deletion", (0.5,), np.array([1]), np.array([0.2]),
        ...                        0.9, 2, "delete", None, False, 2)
        >>> round(r.aopc, 3)
        0.7
    """

    mode: str
    fractions: tuple[float, ...]
    k: np.ndarray
    scores: np.ndarray
    full_score: float
    n_tokens: int
    strategy: str
    replacement_id: int | None
    absolute: bool
    model_evaluations: int

    @property
    def deltas(self) -> np.ndarray:
        """``f(x) - f(x')`` for each fraction."""
        return self.full_score - self.scores

    @property
    def aopc(self) -> float:
        """Area over the perturbation curve: the mean of :attr:`deltas` over the fractions.

        For deletion this is comprehensiveness (higher = more faithful), for insertion
        sufficiency (lower = more faithful).
        """
        return float(np.mean(self.deltas))

    @property
    def value(self) -> float:
        """Alias of :attr:`aopc`, the number reported in tables."""
        return self.aopc

    @property
    def actual_fractions(self) -> np.ndarray:
        """``k / n`` for each fraction: the fraction of tokens really perturbed."""
        return self.k / max(self.n_tokens, 1)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-friendly dict (lists instead of arrays)."""
        return {
            "mode": self.mode,
            "fractions": list(self.fractions),
            "k": self.k.tolist(),
            "scores": self.scores.tolist(),
            "full_score": self.full_score,
            "aopc": self.aopc,
            "n_tokens": self.n_tokens,
            "strategy": self.strategy,
            "replacement_id": self.replacement_id,
            "absolute": self.absolute,
            "model_evaluations": self.model_evaluations,
        }


@dataclass
class FaithfulnessReport:
    """All removal metrics of one text, computed with a single ``predict`` call.

    Attributes:
        comprehensiveness: deletion on the ERASER bins (= deletion AOPC).
        sufficiency: insertion on the ERASER bins (= insertion AOPC).
        deletion_curve: deletion on the curve fractions, or None if not requested.
        insertion_curve: insertion on the curve fractions, or None if not requested.
        model_evaluations: sequences sent to ``predict`` (unique sequences, the full text
            included unless ``full_score`` was given).
    """

    comprehensiveness: PerturbationResult
    sufficiency: PerturbationResult
    deletion_curve: PerturbationResult | None
    insertion_curve: PerturbationResult | None
    model_evaluations: int

    def as_metrics(self) -> dict[str, float]:
        """Flat ``{metric name: value}`` for an :class:`InstanceResult`."""
        out = {
            "comprehensiveness": self.comprehensiveness.aopc,
            "sufficiency": self.sufficiency.aopc,
        }
        if self.deletion_curve is not None:
            out["deletion_curve_aopc"] = self.deletion_curve.aopc
        if self.insertion_curve is not None:
            out["insertion_curve_aopc"] = self.insertion_curve.aopc
        return out


def rank_tokens(attributions: Sequence[float] | np.ndarray, *, absolute: bool = False) -> np.ndarray:
    """Positions ordered from most to least important.

    Args:
        attributions: one score per token position (1-D).
        absolute: rank by ``|attribution|`` instead of the signed value.

    Returns:
        Integer array, a permutation of ``range(n)``. Ties keep position order.

    Raises:
        ValueError: on non-finite attributions (a NaN has no defined rank).

    Example:
        >>> rank_tokens([0.5, 2.0, 2.0, -3.0]).tolist()
        [1, 2, 0, 3]
        >>> rank_tokens([0.5, 2.0, 2.0, -3.0], absolute=True).tolist()
        [3, 1, 2, 0]
    """
    a = np.asarray(attributions, dtype=float).reshape(-1)
    if not np.all(np.isfinite(a)):
        raise ValueError("attributions contain NaN or inf; they cannot be ranked")
    key = np.abs(a) if absolute else a
    # argsort of the negated key with a stable sort = descending order, ties by position.
    return np.argsort(-key, kind="stable")


def tokens_for_fraction(fraction: float, n_tokens: int) -> int:
    """Number of tokens a fraction of an ``n_tokens`` text stands for.

    ``k = ceil(fraction * n_tokens)``, clipped to ``[1, n_tokens]`` for a positive
    fraction; 0 for fraction 0. Rounding up guarantees that every positive bin perturbs
    at least one token, so short texts still get a signal.

    Example:
        >>> [tokens_for_fraction(f, 30) for f in (0.0, 0.01, 0.05, 0.1, 0.2, 0.5)]
        [0, 1, 2, 3, 6, 15]
    """
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"fractions must lie in [0, 1], got {fraction}")
    if n_tokens < 0:
        raise ValueError("n_tokens must be >= 0")
    if fraction == 0.0 or n_tokens == 0:
        return 0
    k = math.ceil(fraction * n_tokens - _FRACTION_TOL)
    return int(min(n_tokens, max(1, k)))


def _check_strategy(strategy: str, replacement_id: int | None) -> None:
    if strategy == "delete":
        if replacement_id is not None:
            raise ValueError("strategy='delete' takes no replacement_id; use strategy='replace'")
    elif strategy == "replace":
        if replacement_id is None:
            raise ValueError("strategy='replace' needs replacement_id (e.g. the mask or pad id)")
    else:
        raise ValueError(f"strategy must be 'delete' or 'replace', got {strategy!r}")


def perturb_sequence(
    token_ids: Sequence[int],
    order: Sequence[int] | np.ndarray,
    k: int,
    *,
    mode: Mode = "deletion",
    strategy: Strategy = "delete",
    replacement_id: int | None = None,
) -> list[int]:
    """Remove (deletion) or keep only (insertion) the first ``k`` positions of ``order``.

    Args:
        token_ids: the text's token ids, without special tokens.
        order: positions from most to least important (see :func:`rank_tokens`).
        k: how many of the top positions to remove / keep.
        mode: ``"deletion"`` or ``"insertion"``.
        strategy: ``"delete"`` drops the removed tokens; ``"replace"`` writes
            ``replacement_id`` in their place. Kept tokens always keep their order.
        replacement_id: the id for ``"replace"``.

    Returns:
        The perturbed sequence as a list of ints.

    Example:
        >>> perturb_sequence([10, 11, 12], [2, 0, 1], 1)
        [10, 11]
        >>> perturb_sequence([10, 11, 12], [2, 0, 1], 1, mode="insertion",
        ...                  strategy="replace", replacement_id=0)
        [0, 0, 12]
    """
    _check_strategy(strategy, replacement_id)
    ids = [int(t) for t in token_ids]
    n = len(ids)
    if not 0 <= k <= n:
        raise ValueError(f"k={k} outside [0, {n}]")
    top = np.zeros(n, dtype=bool)
    top[np.asarray(order, dtype=int)[:k]] = True
    if mode == "deletion":
        removed = top
    elif mode == "insertion":
        removed = ~top
    else:
        raise ValueError(f"mode must be 'deletion' or 'insertion', got {mode!r}")
    if strategy == "delete":
        return [t for t, r in zip(ids, removed) if not r]
    return [int(replacement_id) if r else t for t, r in zip(ids, removed)]  # type: ignore[arg-type]


def random_attributions(n_tokens: int, seed: int | None = 0) -> np.ndarray:
    """Random attributions: the "random ranking" baseline of the faithfulness tables.

    Example:
        >>> sorted(rank_tokens(random_attributions(4, seed=1)).tolist())
        [0, 1, 2, 3]
    """
    return np.random.default_rng(seed).standard_normal(n_tokens)


def _normalise_fractions(fractions: Iterable[float]) -> tuple[float, ...]:
    fr = tuple(float(f) for f in fractions)
    if not fr:
        raise ValueError("at least one fraction is needed")
    for f in fr:
        if not 0.0 <= f <= 1.0:
            raise ValueError(f"fractions must lie in [0, 1], got {f}")
    return fr


def _prepare(token_ids: Sequence[int], attributions: Sequence[float] | np.ndarray) -> list[int]:
    ids = [int(t) for t in np.asarray(token_ids).reshape(-1).tolist()]
    a = np.asarray(attributions, dtype=float).reshape(-1)
    if len(ids) == 0:
        raise ValueError("the text has no tokens: faithfulness is undefined")
    if a.shape[0] != len(ids):
        raise ValueError(f"{a.shape[0]} attributions for {len(ids)} tokens")
    return ids


def _run_predict(predict: Predictor, sequences: list[list[int]]) -> np.ndarray:
    out = predict(sequences)
    if hasattr(out, "detach"):  # a torch tensor: no import of torch needed here
        out = out.detach().cpu().numpy()
    arr = np.asarray(out, dtype=float)
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.shape != (len(sequences),):
        raise ValueError(
            f"predict must return shape ({len(sequences)},) for {len(sequences)} sequences, got {arr.shape}"
        )
    return arr


def _evaluate_requests(
    predict: Predictor,
    token_ids: list[int],
    attributions: Sequence[float] | np.ndarray,
    requests: Sequence[tuple[str, tuple[float, ...]]],
    *,
    strategy: str,
    replacement_id: int | None,
    absolute: bool,
    full_score: float | None,
) -> tuple[list[PerturbationResult], int]:
    """Evaluate several (mode, fractions) requests of one text in one ``predict`` call."""
    _check_strategy(strategy, replacement_id)
    n = len(token_ids)
    order = rank_tokens(attributions, absolute=absolute)

    # Identical perturbed sequences (e.g. 1 % and 5 % of a short text are both one token,
    # or deletion of everything and insertion of nothing) are sent to the model once.
    index: dict[tuple[int, ...], int] = {}
    batch: list[list[int]] = []
    full_key = tuple(token_ids)
    if full_score is None:
        index[full_key] = 0
        batch.append(list(token_ids))

    plans: list[tuple[str, tuple[float, ...], np.ndarray, list[tuple[int, ...]]]] = []
    for mode, fractions in requests:
        ks = np.array([tokens_for_fraction(f, n) for f in fractions], dtype=int)
        keys = []
        for k in ks:
            seq = perturb_sequence(
                token_ids, order, int(k), mode=mode, strategy=strategy, replacement_id=replacement_id
            )
            key = tuple(seq)
            if key not in index and not (full_score is not None and key == full_key):
                index[key] = len(batch)
                batch.append(seq)
            keys.append(key)
        plans.append((mode, fractions, ks, keys))

    scores = _run_predict(predict, batch) if batch else np.zeros(0)
    full = float(scores[0]) if full_score is None else float(full_score)

    def lookup(key: tuple[int, ...]) -> float:
        if full_score is not None and key == full_key:
            return full
        return float(scores[index[key]])

    results = [
        PerturbationResult(
            mode=mode,
            fractions=fractions,
            k=ks,
            scores=np.array([lookup(key) for key in keys], dtype=float),
            full_score=full,
            n_tokens=n,
            strategy=strategy,
            replacement_id=None if replacement_id is None else int(replacement_id),
            absolute=absolute,
            model_evaluations=len(batch),
        )
        for mode, fractions, ks, keys in plans
    ]
    return results, len(batch)


def removal_metric(
    predict: Predictor,
    token_ids: Sequence[int],
    attributions: Sequence[float] | np.ndarray,
    *,
    mode: Mode,
    fractions: Iterable[float],
    strategy: Strategy = "delete",
    replacement_id: int | None = None,
    absolute: bool = False,
    full_score: float | None = None,
) -> PerturbationResult:
    """Scores of one text with its top-ranked tokens removed (deletion) or kept alone (insertion).

    The one implementation of the six named metrics below, which fix ``mode`` and the
    default fractions.

    Args:
        predict: ``predict(list of id lists) -> (B,)`` target-class scores.
        token_ids: the text's ids without special tokens.
        attributions: one score per position; ranked descending (see module notes).
        mode: ``"deletion"`` (the top ``ceil(f·n)`` tokens removed) or ``"insertion"``
            (only they are kept, in their original order).
        fractions: the fractions ``f`` of the text's tokens (ERASER bins or a curve's x-axis).
        strategy: ``"delete"`` or ``"replace"`` (with ``replacement_id``).
        replacement_id: mask / pad id for ``"replace"``.
        absolute: rank by ``|attribution|``.
        full_score: the model's score on the full text, if already known (saves a pass).

    Returns:
        A :class:`PerturbationResult`; its ``.aopc`` is the mean drop over the fractions.

    Example:
        >>> predict = lambda seqs: np.array([len(s) / 4 for s in seqs])
        >>> r = removal_metric(predict, [5, 6, 7, 8], [1, 2, 3, 4], mode="deletion", fractions=(0.25, 0.5))
        >>> r.k.tolist(), r.scores.tolist(), r.aopc
        ([1, 2], [0.75, 0.5], 0.375)
    """
    ids = _prepare(token_ids, attributions)
    results, _ = _evaluate_requests(
        predict,
        ids,
        attributions,
        [(mode, _normalise_fractions(fractions))],
        strategy=strategy,
        replacement_id=replacement_id,
        absolute=absolute,
        full_score=full_score,
    )
    return results[0]


def _named_metric(
    name: str, *, mode: Mode, keyword: str, default: tuple[float, ...], number: bool, doc: str
) -> Callable[..., Any]:
    """:func:`removal_metric` with ``mode`` fixed and its fractions renamed ``keyword``.

    ERASER's metrics call their fractions ``bins`` and the curves ``fractions``; the
    returned function has that keyword (default ``default``) and returns the AOPC as a
    float when ``number`` is true, the whole :class:`PerturbationResult` otherwise. Its
    signature is :func:`removal_metric`'s, so ``help()`` and argument errors read as for a
    hand-written function.
    """
    params = [p for p in inspect.signature(removal_metric).parameters.values() if p.name not in ("mode", "fractions")]
    params.insert(
        3, inspect.Parameter(keyword, inspect.Parameter.KEYWORD_ONLY, default=default, annotation="Iterable[float]")
    )
    signature = inspect.Signature(params, return_annotation="float" if number else "PerturbationResult")

    def metric(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        options = dict(bound.arguments)
        fractions = options.pop(keyword)
        result = removal_metric(**options, mode=mode, fractions=fractions)
        return result.aopc if number else result

    metric.__name__ = metric.__qualname__ = name
    metric.__doc__ = doc
    metric.__signature__ = signature  # type: ignore[attr-defined]
    return metric


comprehensiveness = _named_metric(
    "comprehensiveness",
    mode="deletion",
    keyword="bins",
    default=ERASER_BINS,
    number=False,
    doc="""ERASER comprehensiveness: how much the score drops when the top tokens are removed.

        ``mean_b [ f(x) - f(x without its top ceil(b·n) tokens) ]`` over the bins ``b``.
        Higher is more faithful. This is also the "deletion AOPC" of the benchmark tables.

        Args:
            predict: ``predict(list of id lists) -> (B,)`` target-class scores.
            token_ids: the text's ids without special tokens.
            attributions: one score per position; ranked descending (see module notes).
            bins: fractions of the text's tokens (default 1, 5, 10, 20, 50 %).
            strategy: ``"delete"`` or ``"replace"`` (with ``replacement_id``).
            replacement_id: mask / pad id for ``"replace"``.
            absolute: rank by ``|attribution|``.
            full_score: the model's score on the full text, if already known (saves a pass).

        Returns:
            A :class:`PerturbationResult`; the metric is ``.value``.

        Example:
            >>> w = {1: 2.0, 2: -1.0, 3: 0.5}
            >>> predict = lambda seqs: np.array([sum(w[t] for t in s) for s in seqs])
            >>> comprehensiveness(predict, [1, 2, 3], [2.0, -1.0, 0.5], bins=(0.3,)).value
            2.0
    """,
)


sufficiency = _named_metric(
    "sufficiency",
    mode="insertion",
    keyword="bins",
    default=ERASER_BINS,
    number=False,
    doc="""ERASER sufficiency: the score drop when *only* the top tokens are kept.

        ``mean_b [ f(x) - f(top ceil(b·n) tokens of x) ]``; lower is more faithful (it can
        be negative). Kept tokens keep their original order. Also the "insertion AOPC".
        Arguments as in :func:`comprehensiveness`.

        Example:
            >>> w = {1: 2.0, 2: -1.0, 3: 0.5}
            >>> predict = lambda seqs: np.array([sum(w[t] for t in s) for s in seqs])
            >>> sufficiency(predict, [1, 2, 3], [2.0, -1.0, 0.5], bins=(0.3,)).value
            -0.5
    """,
)


deletion_aopc = _named_metric(
    "deletion_aopc",
    mode="deletion",
    keyword="fractions",
    default=ERASER_BINS,
    number=True,
    doc="""Deletion AOPC as a number (higher is better).

        With the default ERASER bins it equals :func:`comprehensiveness`; pass
        ``fractions=CURVE_FRACTIONS`` for the whole-curve area of the paper's deletion plots.

        Example:
            >>> predict = lambda seqs: np.array([len(s) / 4 for s in seqs])
            >>> deletion_aopc(predict, [5, 6, 7, 8], [1, 2, 3, 4], fractions=(0.25, 0.5))
            0.375
    """,
)


insertion_aopc = _named_metric(
    "insertion_aopc",
    mode="insertion",
    keyword="fractions",
    default=ERASER_BINS,
    number=True,
    doc="""Insertion AOPC as a number (lower is better; the paper's Table 9).

        With the default ERASER bins it equals :func:`sufficiency`.

        Example:
            >>> predict = lambda seqs: np.array([len(s) / 4 for s in seqs])
            >>> insertion_aopc(predict, [5, 6, 7, 8], [1, 2, 3, 4], fractions=(0.25, 0.5))
            0.625
    """,
)


deletion_curve = _named_metric(
    "deletion_curve",
    mode="deletion",
    keyword="fractions",
    default=CURVE_FRACTIONS,
    number=False,
    doc="""Score vs fraction of top tokens deleted, for plotting (x = ``fractions``, y = ``scores``).

        The default x-axis is 0 %, 10 %, …, 100 %; ``.aopc`` is the mean drop over those
        points (the point at 0 % contributes 0, as in the ``k = 0`` term of DeYoung et al.).

        Example:
            >>> predict = lambda seqs: np.array([len(s) / 2 for s in seqs])
            >>> deletion_curve(predict, [7, 8], [0.1, 0.9], fractions=(0, 0.5, 1)).scores.tolist()
            [1.0, 0.5, 0.0]
    """,
)


insertion_curve = _named_metric(
    "insertion_curve",
    mode="insertion",
    keyword="fractions",
    default=CURVE_FRACTIONS,
    number=False,
    doc="""Score vs fraction of top tokens inserted (kept), starting from the empty text.

        With ``"replace"`` the start is the all-``replacement_id`` sequence instead.

        Example:
            >>> predict = lambda seqs: np.array([len(s) / 2 for s in seqs])
            >>> insertion_curve(predict, [7, 8], [0.1, 0.9], fractions=(0, 0.5, 1)).scores.tolist()
            [0.0, 0.5, 1.0]
    """,
)


def faithfulness_metrics(
    predict: Predictor,
    token_ids: Sequence[int],
    attributions: Sequence[float] | np.ndarray,
    *,
    bins: Iterable[float] = ERASER_BINS,
    curve_fractions: Iterable[float] | None = None,
    strategy: Strategy = "delete",
    replacement_id: int | None = None,
    absolute: bool = False,
    full_score: float | None = None,
) -> FaithfulnessReport:
    """Comprehensiveness, sufficiency and (optionally) both curves in one ``predict`` call.

    A benchmark runner should prefer this over the single metrics: every perturbed
    sequence of the text goes to the model in one batch, and sequences shared between
    metrics are evaluated once.

    Args:
        curve_fractions: x-axis for the deletion and insertion curves; None = no curves.
        Others: as in :func:`comprehensiveness`.

    Example:
        >>> predict = lambda seqs: np.array([len(s) / 4 for s in seqs])
        >>> rep = faithfulness_metrics(predict, [5, 6, 7, 8], [1, 2, 3, 4], bins=(0.5,))
        >>> rep.as_metrics()
        {'comprehensiveness': 0.5, 'sufficiency': 0.5}
        >>> rep.model_evaluations  # the full text, [5, 6] (deletion) and [7, 8] (insertion)
        3
    """
    ids = _prepare(token_ids, attributions)
    b = _normalise_fractions(bins)
    requests: list[tuple[str, tuple[float, ...]]] = [("deletion", b), ("insertion", b)]
    if curve_fractions is not None:
        c = _normalise_fractions(curve_fractions)
        requests += [("deletion", c), ("insertion", c)]
    results, n_evals = _evaluate_requests(
        predict,
        ids,
        attributions,
        requests,
        strategy=strategy,
        replacement_id=replacement_id,
        absolute=absolute,
        full_score=full_score,
    )
    return FaithfulnessReport(
        comprehensiveness=results[0],
        sufficiency=results[1],
        deletion_curve=results[2] if curve_fractions is not None else None,
        insertion_curve=results[3] if curve_fractions is not None else None,
        model_evaluations=n_evals,
    )


def mean_curve(curves: Sequence[PerturbationResult], *, relative: bool = False) -> dict[str, Any]:
    """Average curves of several texts on their common x-axis, for plotting.

    Args:
        curves: results with identical ``mode`` and ``fractions``.
        relative: plot ``score / full_score`` instead of the raw score (texts whose full
            score is 0 are then skipped).

    Returns:
        ``{"mode", "fractions", "mean", "se", "n"}`` with numpy arrays for mean and s.e.

    Example:
        >>> c = PerturbationResult("deletion", (0.0, 1.0), np.array([0, 1]),
        ...                        np.array([1.0, 0.0]), 1.0, 1, "delete", None, False, 2)
        >>> mean_curve([c, c])["mean"].tolist()
        [1.0, 0.0]
    """
    if not curves:
        raise ValueError("no curves to average")
    mode, fractions = curves[0].mode, tuple(curves[0].fractions)
    for c in curves:
        if c.mode != mode or tuple(c.fractions) != fractions:
            raise ValueError("curves must share mode and fractions")
    rows = []
    for c in curves:
        if relative:
            if c.full_score == 0:
                continue
            rows.append(c.scores / c.full_score)
        else:
            rows.append(c.scores)
    if not rows:
        raise ValueError("no curve with a non-zero full score")
    m = np.vstack(rows)
    se = np.array([standard_error(col) for col in m.T])
    return {"mode": mode, "fractions": np.array(fractions), "mean": m.mean(axis=0), "se": se, "n": m.shape[0]}
