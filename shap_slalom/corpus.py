"""A corpus run as a ``shap.Explanation`` cohort, for ``shap.plots.bar`` and ``beeswarm``."""

from __future__ import annotations

import shap
from slalom_core.corpus import cohort_matrix

__all__ = ["corpus_explanation"]


def corpus_explanation(run, *, score: str = "lin", top: int = 30, min_texts: int = 1, label: str | None = None):
    """One row per explained text, one column per frequent token, of a corpus run.

    The numbers are :func:`slalom_core.corpus.cohort_matrix`'s (a token that does not occur
    in a text scores 0 there; ``data`` holds its count), so ``shap.plots.bar`` ranks tokens
    by mean |score| over the corpus and ``shap.plots.beeswarm`` shows its spread, coloured
    by how often the token occurs. ``base_values`` are the texts' base values. Only
    ``score="contribution"`` adds up (with the base value, over every token of a text, not
    only the ``top`` shown) to the surrogate's output.

    Args:
        run: a :class:`slalom_core.corpus.CorpusRun` or its path.
        score: "lin" (default), "value", "importance", "contribution" or "removal".
        top: how many tokens (the most frequent by number of texts).
        min_texts: only tokens seen in at least this many texts.
        label: the explained label (default: the run's first).

    Example:
        >>> sv = corpus_explanation("runs/imdb", top=20)  # doctest: +SKIP
        >>> shap.plots.beeswarm(sv)  # doctest: +SKIP
    """
    ids, tokens, values, counts, base = cohort_matrix(run, score=score, top=top, min_texts=min_texts, label=label)
    # Rows follow the texts table's order (ids in ``CorpusRun.texts()``, one label).
    del ids
    return shap.Explanation(values=values, base_values=base, data=counts, feature_names=tokens)
