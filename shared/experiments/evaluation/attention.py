"""Agreement of token scores with human attention (Yelp-HAT, the paper's Table 2b), and
the mapping between tokens and the words the labels are given for.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from .statistics import average_precision, roc_auc

__all__ = [
    "AgreementResult",
    "human_attention_agreement",
    "word_ids_from_offsets",
    "word_labels_to_tokens",
    "token_scores_to_words",
]


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
        first character that is not whitespace, or None.

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
        # Byte-level BPE (GPT-2, RoBERTa without trimmed offsets) puts the space before a
        # word inside its token's span: the token belongs to the word after the space.
        while a < b and text[a].isspace():
            a += 1
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
