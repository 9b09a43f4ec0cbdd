"""SLALOM for inseq: ``import inseq_slalom`` registers the attribution method "slalom".

``pip install "slalom-xai[inseq]"`` (tested with inseq 0.7.1). Then
``inseq.load_model(model, "slalom").attribute(prompt, generation_args=...)`` attributes
every generated token to the prompt and the tokens generated before it;
``inseq_slalom.show(out)`` draws inseq's heatmap with its colours under numpy 2; see
``docs/inseq.md``.

Example:
    >>> import inseq, inseq_slalom  # doctest: +SKIP
    >>> "slalom" in inseq.list_feature_attribution_methods()  # doctest: +SKIP
    True
"""

from .method import EXTRA_MAPS, OPTIONS, STEP_SCORES, SlalomInseqAttribution, channel
from .scorer import NextTokenLogProb
from .show import show

__all__ = ["SlalomInseqAttribution", "NextTokenLogProb", "channel", "show", "OPTIONS", "EXTRA_MAPS", "STEP_SCORES"]
