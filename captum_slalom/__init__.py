"""SLALOM for Captum.

- :class:`SlalomAttribution`: a ``captum.attr.PerturbationAttribution``; a drop-in beside
  ``Lime`` and ``KernelShap`` for token-id inputs (SLALOM deletes tokens; a baseline marks
  special tokens, ``perturbation="replace"`` replaces absent tokens as Lime does).
- :class:`SlalomLLMAttribution`: ``captum.attr.LLMAttribution`` that accepts SLALOM, for
  causal LMs with ``TextTokenInput`` / ``TextTemplateInput``.
- :func:`visualization_record`: signed scores -> ``VisualizationDataRecord`` for
  ``visualize_text``; :func:`importance_record` and :func:`importance_html`: the importance
  (no sign) on a sequential scale with its own legend.

All fitting is done by the ``slalom_core`` engine.

Example:
    >>> from captum_slalom import SlalomAttribution
    >>> slalom = SlalomAttribution(forward_func, tokenizer=tok)  # doctest: +SKIP
    >>> attr = slalom.attribute(input_ids, target=1, n_samples=500, seed=0)  # doctest: +SKIP
"""

from slalom_core import SCORE_NAMES

from .attribution import SlalomAttribution, SlalomAttributionResult
from .llm import SlalomLLMAttribution
from .visualization import importance_html, importance_record, normalise_scores, visualization_record

__all__ = [
    "SlalomAttribution",
    "SlalomAttributionResult",
    "SlalomLLMAttribution",
    "visualization_record",
    "importance_record",
    "importance_html",
    "normalise_scores",
    "SCORE_NAMES",
]
