"""Amortized SLALOM: a head on the model's hidden states, trained on a corpus run's fits.

Example:
    >>> from slalom_core.amortized import AmortizedExplainer
    >>> amortized = AmortizedExplainer(model, tok).fit("runs/imdb-train")  # doctest: +SKIP
    >>> amortized.explain_batch(texts, audit=0.05)  # doctest: +SKIP
"""

from .audit import AmortizedFewTextsWarning, AmortizedOODWarning, AuditReport
from .corpus_run import CorpusHead
from .explainer import METHOD, AmortizedExplainer

__all__ = [
    "AmortizedExplainer",
    "AmortizedFewTextsWarning",
    "AmortizedOODWarning",
    "AuditReport",
    "CorpusHead",
    "METHOD",
]
