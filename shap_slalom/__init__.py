"""SLALOM for SHAP: ``SlalomExplainer``, a ``shap.Explainer`` returning ``shap.Explanation``.

SLALOM (Leemann, Fastowski, Pfeiffer, Kasneci, TMLR 2025) explains a text classifier with a
local surrogate that gives every token a value and an importance. This package is a thin
adapter: the fitting is done by :mod:`slalom_core`.

Example:
    >>> import shap, shap_slalom
    >>> explainer = shap_slalom.SlalomExplainer(pipe)  # a text-classification pipeline  # doctest: +SKIP
    >>> sv = explainer(["a great movie", "a dull plot"])  # doctest: +SKIP
    >>> shap.plots.text(sv[0, :, "POSITIVE"])  # doctest: +SKIP
    >>> scores = explainer.explain_scores(["a great movie"])  # value, importance, lin, ...  # doctest: +SKIP
    >>> shap_slalom.plots.value_importance(scores)  # doctest: +SKIP
"""

from . import benchmark, plots
from .explainer import ADDITIVE_SCORES, ADDITIVITY, SCORES, SlalomExplainer
from .models import LogOddsModel

__all__ = ["SlalomExplainer", "LogOddsModel", "SCORES", "ADDITIVE_SCORES", "ADDITIVITY", "plots", "benchmark"]
