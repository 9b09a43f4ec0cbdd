"""Agreement with Naive-Bayes word scores (the paper's Table 2a, App. E.3): the log-count
ratios of a labelled corpus and the Spearman correlation of an explanation with them.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from .statistics import spearman

__all__ = ["SpearmanResult", "naive_bayes_log_ratios", "nb_spearman"]


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
