"""Several texts as one texts × tokens ``shap.Explanation``, for ``shap.plots.beeswarm`` and ``bar``.

shap's beeswarm and bar need one column per feature, the same in every row. The
Explanation of several texts of different lengths has one ragged row per text (its own
tokens), and shap fails on it with a numpy broadcast error. :func:`cohort` aligns the rows
on tokens: column j is token j wherever it occurs in a text.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import shap
import slalom_core as sc

from .plots import output_index

__all__ = ["cohort", "score_label"]


def score_label(score: str) -> str:
    """The axis label of a score: its name, formula and unit (not shap's "SHAP value").

    Example:
        >>> score_label("contribution")
        "contribution α_i·ṽ_i, α = softmax(s), ṽ_i = p + A(n)(v_i − p) the value read at the text's length (log-odds from the reference point)"
    """
    s = sc.SCORES[sc.check_score(score)]
    return f"{s.name} {s.formula} ({s.unit})"


def _rank(observed: dict[str, list[float]], top: int, min_texts: int) -> list[str]:
    """Tokens seen in at least ``min_texts`` texts, by the mean over those texts of |score|."""
    kept = {t: float(np.mean(np.abs(x))) for t, x in observed.items() if len(x) >= min_texts}
    return sorted(kept, key=lambda t: -kept[t])[:top]


def cohort(
    explanation: shap.Explanation,
    output: int | str | None = None,
    *,
    top: int = 20,
    min_texts: int = 1,
) -> shap.Explanation:
    """One row per text, one column per token, of a :class:`~shap_slalom.SlalomExplainer` Explanation.

    Entry (i, j) is text i's score for token j: summed over the token's occurrences for an
    additive score (contribution, shapley: what the token adds to the text's output), the
    score of its first occurrence otherwise (value, importance and lin are properties of
    the token, shared by its occurrences); 0 where the token does not occur (it adds
    nothing to that text, and shap's plots need a full matrix). ``data`` holds its
    occurrences, 0 where absent, so a mean can be taken over the texts a token occurs in:
    tokens are the ``top`` of largest mean |score| over the texts they occur in, among those
    seen in at least ``min_texts`` texts (frequency alone would rank "the" and "." first),
    and :func:`shap_slalom.plots.bar` draws that mean (:func:`~shap_slalom.plots.occurring_means`);
    :func:`shap_slalom.plots.beeswarm` draws the texts without the token grey.

    Args:
        explanation: the unsliced Explanation of several texts (``explainer(texts)``).
        output: the class (name or index); default: the positive class of a binary model.
        top: how many tokens.
        min_texts: only tokens seen in at least this many texts.

    Returns:
        A 2-D float64 ``shap.Explanation`` (texts × tokens) with ``base_values`` per text
        and ``score_label`` naming the score and its unit.

    Example:
        >>> sv = explainer(texts)  # doctest: +SKIP
        >>> shap_slalom.plots.beeswarm(cohort(sv, "POSITIVE"))  # doctest: +SKIP
    """
    score = getattr(explanation, "slalom_score", None)
    if score is None:
        raise ValueError("cohort takes the unsliced Explanation a SlalomExplainer returned (it names its score)")
    names = list(explanation.output_names) if explanation.output_names is not None else None
    if names is not None and np.ndim(names) > 1:
        names = list(names[0])
    additive = sc.SCORES[score].additive
    per_text: list[dict[str, tuple[float, int]]] = []
    observed: dict[str, list[float]] = defaultdict(list)
    base = []
    for values, tokens, b in zip(explanation.values, explanation.data, explanation.base_values):
        values = np.asarray(values, dtype=np.float64)
        if values.ndim == 2:
            values = values[:, output_index(values.shape[1], output, names)]
        b = np.asarray(b, dtype=np.float64)
        base.append(float(b if b.ndim == 0 else b[output_index(b.shape[0], output, names)]))
        row: dict[str, tuple[float, int]] = {}
        for x, tok in zip(values.tolist(), tokens):
            tok = str(tok).strip()
            if not tok:  # the masker's special tokens ([CLS], [SEP]) show as ""
                continue
            x0, n = row.get(tok, (0.0, 0))
            row[tok] = (x0 + x if additive or n == 0 else x0, n + 1)
        for tok, (x, _) in row.items():
            observed[tok].append(x)
        per_text.append(row)
    tokens = _rank(observed, top, min_texts)
    values = np.array([[row.get(t, (0.0, 0))[0] for t in tokens] for row in per_text], dtype=np.float64)
    counts = np.array([[row.get(t, (0.0, 0))[1] for t in tokens] for row in per_text], dtype=np.float64)
    out = shap.Explanation(values=values, base_values=np.array(base), data=counts, feature_names=tokens)
    out.score_label = score_label(score)
    return out
