"""A corpus run as a ``shap.Explanation`` cohort, for ``shap.plots.bar`` and ``beeswarm``."""

from __future__ import annotations

import numpy as np
import shap
from slalom_core.corpus import cohort_matrix

from .cohort import score_label

__all__ = ["corpus_explanation"]


def corpus_explanation(
    run, *, score: str = "contribution", top: int = 30, min_texts: int = 3, label: str | None = None
) -> shap.Explanation:
    """One row per explained text, one column per token, of a corpus run.

    The numbers are :func:`slalom_core.corpus.cohort_matrix`'s: the ``top`` tokens of
    largest mean |score| over the texts they occur in, among tokens seen in at least
    ``min_texts`` texts (not the most frequent: those are "the" and "."); a token that
    does not occur in a text scores 0 there, and ``data`` holds its count.
    ``shap_slalom.plots.bar`` ranks them by mean |score| over the texts they occur in and
    ``shap_slalom.plots.beeswarm`` shows their spread, coloured by how often the token
    occurs (grey where it does not), both with the score's name and unit on the axis (``score_label``).
    ``base_values`` are the texts' base values. ``contribution`` (the default) adds up,
    with the base value, over every token of a text (not only the ``top`` shown) to the
    surrogate's output.

    Args:
        run: a :class:`slalom_core.corpus.CorpusRun` or its path.
        score: "contribution" (default), "value", "importance", "lin" or "removal".
        top: how many tokens.
        min_texts: only tokens seen in at least this many texts (default 3).
        label: the explained class (default: the run's first).

    Returns:
        A texts × tokens ``shap.Explanation`` of float64 values.

    Example:
        >>> sv = corpus_explanation("runs/imdb", top=20)  # doctest: +SKIP
        >>> shap_slalom.plots.beeswarm(sv)  # doctest: +SKIP
    """
    ids, tokens, values, counts, base = cohort_matrix(run, score=score, top=top, min_texts=min_texts, label=label)
    # Rows follow the texts table's order (ids in ``CorpusRun.texts()``, one class).
    del ids
    out = shap.Explanation(
        values=np.asarray(values, dtype=np.float64), base_values=base, data=counts, feature_names=tokens
    )
    out.score_label = score_label(score)
    return out
