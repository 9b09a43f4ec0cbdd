"""Evaluation metrics for token attributions: faithfulness, human attention, Naive Bayes.

Everything here works on plain token-id sequences and numpy arrays, so that SLALOM, the
Captum and SHAP baselines and the reference implementation are scored by exactly the same
code. Nothing here imports captum, shap, scipy or scikit-learn: the rank statistics are
implemented in numpy (and tested against scipy / scikit-learn), because those two packages
are only an optional ``eval`` extra of the distribution.

Four groups of functions:

1. **Removal-based faithfulness** (ERASER, DeYoung et al. 2020; the paper's Sec. 6 and
   App. F): :func:`comprehensiveness`, :func:`sufficiency`, :func:`deletion_aopc`,
   :func:`insertion_aopc`, the curves :func:`deletion_curve` / :func:`insertion_curve`,
   and :func:`faithfulness_metrics`, which computes all of them with one model call.
   The model is a callable ``predict(sequences) -> np.ndarray`` of shape ``(B,)`` that
   returns the probability (or any score) of the target class for token-id sequences given
   *without* special tokens (the caller's adapter adds them).
2. **Human-attention agreement** (Yelp-HAT, Table 2b): :func:`human_attention_agreement`
   (ROC-AUC and average precision of unsigned scores against binary labels),
   :func:`word_labels_to_tokens`, :func:`token_scores_to_words`,
   :func:`word_ids_from_offsets`.
3. **Naive-Bayes agreement** (Table 2a, App. E.3): :func:`naive_bayes_log_ratios` and
   :func:`nb_spearman`.
4. **Bookkeeping**: :class:`InstanceResult`, :class:`CountingPredictor` and
   :func:`aggregate_results` (mean and standard error per metric and method).

Conventions for the faithfulness metrics
---------------------------------------
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

import math
import time
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

__all__ = [
    "ERASER_BINS",
    "CURVE_FRACTIONS",
    "Predictor",
    "PerturbationResult",
    "FaithfulnessReport",
    "AgreementResult",
    "SpearmanResult",
    "InstanceResult",
    "CountingPredictor",
    "rank_tokens",
    "tokens_for_fraction",
    "perturb_sequence",
    "random_attributions",
    "comprehensiveness",
    "sufficiency",
    "deletion_aopc",
    "insertion_aopc",
    "deletion_curve",
    "insertion_curve",
    "faithfulness_metrics",
    "mean_curve",
    "roc_auc",
    "average_precision",
    "human_attention_agreement",
    "word_ids_from_offsets",
    "word_labels_to_tokens",
    "token_scores_to_words",
    "naive_bayes_log_ratios",
    "spearman",
    "nb_spearman",
    "standard_error",
    "aggregate_results",
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


# --------------------------------------------------------------------------------------
# 1. Removal-based faithfulness
# --------------------------------------------------------------------------------------


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


def _single(
    mode: str,
    predict: Predictor,
    token_ids: Sequence[int],
    attributions: Sequence[float] | np.ndarray,
    fractions: Iterable[float],
    strategy: str,
    replacement_id: int | None,
    absolute: bool,
    full_score: float | None,
) -> PerturbationResult:
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


def comprehensiveness(
    predict: Predictor,
    token_ids: Sequence[int],
    attributions: Sequence[float] | np.ndarray,
    *,
    bins: Iterable[float] = ERASER_BINS,
    strategy: Strategy = "delete",
    replacement_id: int | None = None,
    absolute: bool = False,
    full_score: float | None = None,
) -> PerturbationResult:
    """ERASER comprehensiveness: how much the score drops when the top tokens are removed.

    ``mean_b [ f(x) - f(x without its top ceil(b·n) tokens) ]`` over the bins ``b``.
    Higher is more faithful. This is also the "deletion AOPC" of the issue's tables.

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
    """
    return _single("deletion", predict, token_ids, attributions, bins, strategy, replacement_id, absolute, full_score)


def sufficiency(
    predict: Predictor,
    token_ids: Sequence[int],
    attributions: Sequence[float] | np.ndarray,
    *,
    bins: Iterable[float] = ERASER_BINS,
    strategy: Strategy = "delete",
    replacement_id: int | None = None,
    absolute: bool = False,
    full_score: float | None = None,
) -> PerturbationResult:
    """ERASER sufficiency: the score drop when *only* the top tokens are kept.

    ``mean_b [ f(x) - f(top ceil(b·n) tokens of x) ]``; lower is more faithful (it can
    be negative). Kept tokens keep their original order. Also the "insertion AOPC".
    Arguments as in :func:`comprehensiveness`.

    Example:
        >>> w = {1: 2.0, 2: -1.0, 3: 0.5}
        >>> predict = lambda seqs: np.array([sum(w[t] for t in s) for s in seqs])
        >>> sufficiency(predict, [1, 2, 3], [2.0, -1.0, 0.5], bins=(0.3,)).value
        -0.5
    """
    return _single("insertion", predict, token_ids, attributions, bins, strategy, replacement_id, absolute, full_score)


def deletion_aopc(
    predict: Predictor,
    token_ids: Sequence[int],
    attributions: Sequence[float] | np.ndarray,
    *,
    fractions: Iterable[float] = ERASER_BINS,
    strategy: Strategy = "delete",
    replacement_id: int | None = None,
    absolute: bool = False,
    full_score: float | None = None,
) -> float:
    """Deletion AOPC as a number (higher is better).

    With the default ERASER bins it equals :func:`comprehensiveness`; pass
    ``fractions=CURVE_FRACTIONS`` for the whole-curve area of the paper's deletion plots.

    Example:
        >>> predict = lambda seqs: np.array([len(s) / 4 for s in seqs])
        >>> deletion_aopc(predict, [5, 6, 7, 8], [1, 2, 3, 4], fractions=(0.25, 0.5))
        0.375
    """
    return _single(
        "deletion", predict, token_ids, attributions, fractions, strategy, replacement_id, absolute, full_score
    ).aopc


def insertion_aopc(
    predict: Predictor,
    token_ids: Sequence[int],
    attributions: Sequence[float] | np.ndarray,
    *,
    fractions: Iterable[float] = ERASER_BINS,
    strategy: Strategy = "delete",
    replacement_id: int | None = None,
    absolute: bool = False,
    full_score: float | None = None,
) -> float:
    """Insertion AOPC as a number (lower is better; the paper's Table 9).

    With the default ERASER bins it equals :func:`sufficiency`.

    Example:
        >>> predict = lambda seqs: np.array([len(s) / 4 for s in seqs])
        >>> insertion_aopc(predict, [5, 6, 7, 8], [1, 2, 3, 4], fractions=(0.25, 0.5))
        0.625
    """
    return _single(
        "insertion", predict, token_ids, attributions, fractions, strategy, replacement_id, absolute, full_score
    ).aopc


def deletion_curve(
    predict: Predictor,
    token_ids: Sequence[int],
    attributions: Sequence[float] | np.ndarray,
    *,
    fractions: Iterable[float] = CURVE_FRACTIONS,
    strategy: Strategy = "delete",
    replacement_id: int | None = None,
    absolute: bool = False,
    full_score: float | None = None,
) -> PerturbationResult:
    """Score vs fraction of top tokens deleted, for plotting (x = ``fractions``, y = ``scores``).

    The default x-axis is 0 %, 10 %, …, 100 %; ``.aopc`` is the mean drop over those
    points (the point at 0 % contributes 0, as in the ``k = 0`` term of DeYoung et al.).

    Example:
        >>> predict = lambda seqs: np.array([len(s) / 2 for s in seqs])
        >>> deletion_curve(predict, [7, 8], [0.1, 0.9], fractions=(0, 0.5, 1)).scores.tolist()
        [1.0, 0.5, 0.0]
    """
    return _single(
        "deletion", predict, token_ids, attributions, fractions, strategy, replacement_id, absolute, full_score
    )


def insertion_curve(
    predict: Predictor,
    token_ids: Sequence[int],
    attributions: Sequence[float] | np.ndarray,
    *,
    fractions: Iterable[float] = CURVE_FRACTIONS,
    strategy: Strategy = "delete",
    replacement_id: int | None = None,
    absolute: bool = False,
    full_score: float | None = None,
) -> PerturbationResult:
    """Score vs fraction of top tokens inserted (kept), starting from the empty text.

    With ``"replace"`` the start is the all-``replacement_id`` sequence instead.

    Example:
        >>> predict = lambda seqs: np.array([len(s) / 2 for s in seqs])
        >>> insertion_curve(predict, [7, 8], [0.1, 0.9], fractions=(0, 0.5, 1)).scores.tolist()
        [0.0, 0.5, 1.0]
    """
    return _single(
        "insertion", predict, token_ids, attributions, fractions, strategy, replacement_id, absolute, full_score
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


# --------------------------------------------------------------------------------------
# 2. Human-attention agreement
# --------------------------------------------------------------------------------------


@dataclass
class AgreementResult:
    """Agreement of unsigned token scores with binary human labels.

    Attributes:
        roc_auc: area under the ROC curve (nan when degenerate).
        auprc: average precision, i.e. area under the precision-recall curve (nan when
            degenerate). Its chance level is ``n_positive / (n_positive + n_negative)``.
        n_positive: positions labelled 1 (unmapped positions excluded).
        n_negative: positions labelled 0.
        degenerate: None, or why the metrics are nan (``"no positive labels"``,
            ``"no negative labels"``, ``"no labelled tokens"``).
    """

    roc_auc: float
    auprc: float
    n_positive: int
    n_negative: int
    degenerate: str | None = None

    @property
    def ok(self) -> bool:
        """True when both classes are present and the metrics are defined."""
        return self.degenerate is None


def _average_ranks(x: np.ndarray) -> np.ndarray:
    """1-based ranks with ties sharing their average rank (scipy's ``rankdata`` default)."""
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
    r = _average_ranks(s)
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


def human_attention_agreement(
    scores: Sequence[float] | np.ndarray,
    labels: Sequence[float] | np.ndarray,
    *,
    absolute: bool = True,
) -> AgreementResult:
    """ROC-AUC and AUPRC of token scores against binary human-attention labels.

    Args:
        scores: one score per position.
        labels: 0/1 per position; NaN marks positions without a label (special or
            unmapped tokens, as produced by :func:`word_labels_to_tokens`), which are
            ignored.
        absolute: use ``|score|`` (default): human attention has no direction, so a
            strongly negative word is as "attended" as a strongly positive one.

    Returns:
        An :class:`AgreementResult`; degenerate label vectors give nan metrics and a
        reason in ``.degenerate`` instead of an exception, so one all-zero map does not
        stop a benchmark (aggregation skips nan).

    Example:
        >>> r = human_attention_agreement([0.9, -0.8, 0.1, 0.0], [1, 1, 0, 0])
        >>> r.roc_auc, r.auprc
        (1.0, 1.0)
        >>> human_attention_agreement([0.3, 0.1], [0, 0]).degenerate
        'no positive labels'
    """
    s = np.asarray(scores, dtype=float).reshape(-1)
    y = np.asarray(labels, dtype=float).reshape(-1)
    if s.shape != y.shape:
        raise ValueError(f"{s.shape[0]} scores for {y.shape[0]} labels")
    keep = ~np.isnan(y)
    s, y = s[keep], y[keep]
    if absolute:
        s = np.abs(s)
    n_pos, n_neg = int(np.sum(y == 1)), int(np.sum(y == 0))
    nan = float("nan")
    if n_pos + n_neg == 0:
        return AgreementResult(nan, nan, 0, 0, "no labelled tokens")
    if n_pos == 0:
        return AgreementResult(nan, nan, 0, n_neg, "no positive labels")
    if n_neg == 0:
        # Average precision would be a trivial 1.0 here; report nan to keep means honest.
        return AgreementResult(nan, nan, n_pos, 0, "no negative labels")
    return AgreementResult(roc_auc(y, s), average_precision(y, s), n_pos, n_neg, None)


def word_ids_from_offsets(
    offsets: Sequence[tuple[int, int]] | np.ndarray,
    text: str,
    words: Sequence[str] | None = None,
) -> list[int | None]:
    """Token position → word index, from a fast tokenizer's character offsets.

    Use this when the text was tokenized as one string (as the engine does) but the
    labels are per whitespace word (as in Yelp-HAT), because the tokenizer's own
    ``word_ids()`` then counts punctuation as separate words. (Tokenizing
    ``words`` with ``is_split_into_words=True`` gives the same mapping directly.)

    Args:
        offsets: ``(start, end)`` per token, e.g. ``enc["offset_mapping"]``. Tokens with
            ``start == end`` (special tokens) map to None.
        text: the string that was tokenized.
        words: the words, in order, as substrings of ``text``; default ``text.split()``.

    Returns:
        A list with one entry per token: the index of the word containing the token's
        first character, or None.

    Example:
        >>> word_ids_from_offsets([(0, 0), (0, 3), (4, 8), (8, 9), (0, 0)], "the food,")
        [None, 0, 1, 1, None]
    """
    words = text.split() if words is None else list(words)
    spans = []
    pos = 0
    for w in words:
        start = text.find(w, pos)
        if start < 0:
            raise ValueError(f"word {w!r} not found in text after position {pos}")
        spans.append((start, start + len(w)))
        pos = start + len(w)
    starts = np.array([a for a, _ in spans], dtype=int)
    ends = np.array([b for _, b in spans], dtype=int)
    out: list[int | None] = []
    for off in offsets:
        a, b = int(off[0]), int(off[1])
        if b <= a:
            out.append(None)
            continue
        j = int(np.searchsorted(starts, a, side="right")) - 1
        out.append(j if j >= 0 and a < ends[j] else None)
    return out


def word_labels_to_tokens(
    word_labels: Sequence[float] | np.ndarray,
    word_ids: Sequence[int | None],
) -> np.ndarray:
    """Give every token its word's label (every sub-token inherits it, as in the paper).

    Args:
        word_labels: one label per word.
        word_ids: per token, the word index or None (special / unmapped token).

    Returns:
        Float array, one entry per token; NaN where ``word_ids`` is None.

    Example:
        >>> word_labels_to_tokens([0, 1], [None, 0, 1, 1, None]).tolist()
        [nan, 0.0, 1.0, 1.0, nan]
    """
    wl = np.asarray(word_labels, dtype=float).reshape(-1)
    out = np.full(len(word_ids), np.nan)
    for i, w in enumerate(word_ids):
        if w is None:
            continue
        if not 0 <= w < len(wl):
            raise ValueError(f"word index {w} at token {i} outside [0, {len(wl)})")
        out[i] = wl[w]
    return out


def token_scores_to_words(
    token_scores: Sequence[float] | np.ndarray,
    word_ids: Sequence[int | None],
    n_words: int | None = None,
    *,
    reduce: Literal["max", "sum", "mean"] = "max",
    absolute: bool = False,
) -> np.ndarray:
    """Aggregate token scores to word scores (the reverse of :func:`word_labels_to_tokens`).

    Args:
        token_scores: one score per token.
        word_ids: per token, the word index or None (ignored).
        n_words: number of words (default: largest index + 1).
        reduce: ``"max"`` (a word is as important as its most important piece; the
            usual choice for attention agreement), ``"sum"`` (additive scores such as
            contributions), or ``"mean"``.
        absolute: take ``|score|`` before reducing (then "max" is the largest magnitude).

    Returns:
        Float array of length ``n_words``; NaN for words without any token (e.g. cut off
        by truncation).

    Example:
        >>> token_scores_to_words([9.0, 0.5, -2.0, 1.0], [None, 0, 1, 1]).tolist()
        [0.5, 1.0]
        >>> token_scores_to_words([9.0, 0.5, -2.0, 1.0], [None, 0, 1, 1], reduce="sum").tolist()
        [0.5, -1.0]
    """
    s = np.asarray(token_scores, dtype=float).reshape(-1)
    if s.shape[0] != len(word_ids):
        raise ValueError(f"{s.shape[0]} scores for {len(word_ids)} word ids")
    if absolute:
        s = np.abs(s)
    valid = [w for w in word_ids if w is not None]
    if n_words is None:
        n_words = (max(valid) + 1) if valid else 0
    groups: list[list[float]] = [[] for _ in range(n_words)]
    for score, w in zip(s, word_ids):
        if w is None:
            continue
        if not 0 <= w < n_words:
            raise ValueError(f"word index {w} outside [0, {n_words})")
        groups[w].append(float(score))
    fn = {"max": np.max, "sum": np.sum, "mean": np.mean}.get(reduce)
    if fn is None:
        raise ValueError(f"reduce must be 'max', 'sum' or 'mean', got {reduce!r}")
    return np.array([fn(g) if g else np.nan for g in groups], dtype=float)


# --------------------------------------------------------------------------------------
# 3. Naive-Bayes word scores
# --------------------------------------------------------------------------------------


@dataclass
class SpearmanResult:
    """Spearman correlation of an explanation with reference scores.

    Attributes:
        rho: the correlation, nan when undefined.
        n_tokens: unique tokens that entered the correlation.
        degenerate: None, or why ``rho`` is nan.
    """

    rho: float
    n_tokens: int
    degenerate: str | None = None


def naive_bayes_log_ratios(
    documents: Iterable[Sequence[Hashable]],
    labels: Iterable[int],
    *,
    alpha: float = 40.0,
    normalize: bool = False,
) -> dict[Hashable, float]:
    """Naive-Bayes log-count ratios of every token in a labelled corpus (App. E.3).

    With ``c_y(w)`` the number of occurrences of ``w`` in documents of class ``y``:

    * ``normalize=False`` (default, the paper's formula):
      ``log((c_1(w) + α) / (c_0(w) + α))``;
    * ``normalize=True`` (a proper multinomial NB): ``log p(w|1) / p(w|0)`` with
      ``p(w|y) = (c_y(w) + α) / (N_y + α|V|)``, ``N_y`` the token count of class ``y``.

    The two differ by a constant, so Spearman correlations with signed scores are equal;
    they differ for ``|NB|`` when the classes have different token counts.

    Args:
        documents: token (or word) sequences; any hashable tokens (ids or strings).
        labels: 0/1 per document.
        alpha: Laplace smoothing added to every count (the paper uses 40).
        normalize: see above.

    Returns:
        ``{token: log ratio}`` for every token seen in the corpus (positive = evidence
        for class 1).

    Example:
        >>> nb = naive_bayes_log_ratios([["good", "good"], ["bad"]], [1, 0], alpha=1.0)
        >>> round(nb["good"], 4), round(nb["bad"], 4)
        (1.0986, -0.6931)
    """
    if alpha <= 0:
        raise ValueError("alpha must be > 0 (log of zero counts otherwise)")
    c1: dict[Hashable, int] = {}
    c0: dict[Hashable, int] = {}
    n_docs = 0
    for doc, y in zip(documents, labels, strict=True):
        n_docs += 1
        if y not in (0, 1):
            raise ValueError(f"labels must be 0 or 1, got {y!r}")
        target = c1 if y == 1 else c0
        for t in doc:
            target[t] = target.get(t, 0) + 1
    vocab = list(dict.fromkeys([*c1.keys(), *c0.keys()]))
    if not vocab:
        return {}
    a = np.array([c1.get(t, 0) for t in vocab], dtype=float) + alpha
    b = np.array([c0.get(t, 0) for t in vocab], dtype=float) + alpha
    ratio = np.log(a) - np.log(b)
    if normalize:
        n1 = sum(c1.values()) + alpha * len(vocab)
        n0 = sum(c0.values()) + alpha * len(vocab)
        ratio = ratio - math.log(n1) + math.log(n0)
    return {t: float(r) for t, r in zip(vocab, ratio)}


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
    ra, rb = _average_ranks(a), _average_ranks(b)
    ra -= ra.mean()
    rb -= rb.mean()
    den = math.sqrt(float(ra @ ra) * float(rb @ rb))
    if den == 0.0:
        return float("nan")
    return float(np.clip((ra @ rb) / den, -1.0, 1.0))


def nb_spearman(
    tokens: Sequence[Hashable],
    scores: Sequence[float] | np.ndarray,
    nb_scores: Mapping[Hashable, float],
    *,
    reduce: Literal["mean", "max", "sum", "first"] = "mean",
    absolute_nb: bool = False,
    absolute_scores: bool = False,
) -> SpearmanResult:
    """Spearman correlation between an explanation and Naive-Bayes scores of its tokens.

    Scores are first collapsed to one per unique token (SLALOM's are already per token;
    position-wise methods such as LIME or IG can differ between repeats), then compared
    with the NB score of the tokens that occur in both the text and the NB table
    (tokens never seen in the NB corpus have no evidence and are skipped).

    Args:
        tokens: the text's tokens (ids or strings, the same kind as the NB keys), one per
            position.
        scores: one explanation score per position.
        nb_scores: from :func:`naive_bayes_log_ratios`.
        reduce: how repeated tokens are collapsed: ``"mean"``, ``"max"``, ``"sum"`` or
            ``"first"``.
        absolute_nb: correlate with ``|NB|``; use it for unsigned scores such as SLALOM
            importance, as the paper does (App. E.3).
        absolute_scores: take ``|score|`` first.

    Returns:
        A :class:`SpearmanResult`; ``rho`` is nan with a reason when fewer than two unique
        tokens are in the NB table or one side is constant.

    Example:
        >>> nb = {"good": 1.0, "bad": -1.0, "film": 0.1}
        >>> nb_spearman(["good", "film", "bad", "good"], [2.0, 0.0, -1.0, 1.0], nb).rho
        1.0
    """
    s = np.asarray(scores, dtype=float).reshape(-1)
    if s.shape[0] != len(tokens):
        raise ValueError(f"{s.shape[0]} scores for {len(tokens)} tokens")
    if absolute_scores:
        s = np.abs(s)
    per_token: dict[Hashable, list[float]] = {}
    for t, v in zip(tokens, s):
        if t in nb_scores:
            per_token.setdefault(t, []).append(float(v))
    fn = {"mean": np.mean, "max": np.max, "sum": np.sum, "first": lambda g: g[0]}.get(reduce)
    if fn is None:
        raise ValueError(f"reduce must be 'mean', 'max', 'sum' or 'first', got {reduce!r}")
    keys = list(per_token)
    if len(keys) < 2:
        return SpearmanResult(float("nan"), len(keys), "fewer than 2 tokens with NB scores")
    x = np.array([fn(per_token[t]) for t in keys], dtype=float)
    y = np.array([nb_scores[t] for t in keys], dtype=float)
    if absolute_nb:
        y = np.abs(y)
    rho = spearman(x, y)
    reason = None if not math.isnan(rho) else "constant scores"
    return SpearmanResult(rho, len(keys), reason)


# --------------------------------------------------------------------------------------
# 4. Runtime and model-evaluation bookkeeping
# --------------------------------------------------------------------------------------


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
