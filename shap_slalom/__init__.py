"""SLALOM for SHAP: ``SlalomExplainer``, a ``shap.Explainer`` returning ``shap.Explanation``.

SLALOM (Leemann, Fastowski, Pfeiffer, Kasneci, TMLR 2025) explains a text classifier with a
local surrogate that gives every token a value and an importance. This package is a thin
adapter: the fitting, the log-odds link and the SLALOM plots are :mod:`slalom_core`'s; here
is only what speaks shap (the explainer, its string model, the waterfall with the residual).
A keep/remove benchmark of shap Explanations is in ``slalom_core.experiments.baselines``.

Example:
    >>> import shap, shap_slalom
    >>> from slalom_core import plots
    >>> explainer = shap_slalom.SlalomExplainer(pipe)  # a text-classification pipeline  # doctest: +SKIP
    >>> sv = explainer(["a great movie", "a dull plot"])  # doctest: +SKIP
    >>> shap_slalom.plots.text(sv[0, :, "POSITIVE"])  # shap's text plot, with its colours  # doctest: +SKIP
    >>> shap_slalom.plots.beeswarm(shap_slalom.cohort(sv, "POSITIVE"))  # texts × tokens  # doctest: +SKIP
    >>> shap_slalom.plots.waterfall(sv, 0, "POSITIVE")  # ends at F(x); f(x) and the residual in the title  # doctest: +SKIP
    >>> plots.plot_scatter(explainer.fit("a great movie")[0])  # value vs importance  # doctest: +SKIP
"""

from . import plots
from .cohort import cohort
from .corpus import corpus_explanation
from .explainer import ADDITIVE_SCORES, ADDITIVITY, SCORES, SlalomExplainer
from .models import LogOddsModel

__all__ = [
    "SlalomExplainer",
    "cohort",
    "corpus_explanation",
    "LogOddsModel",
    "SCORES",
    "ADDITIVE_SCORES",
    "ADDITIVITY",
    "plots",
]
