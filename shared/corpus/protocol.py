"""What a corpus run asks of an explainer that stands in for its per-text fits.

:func:`~slalom_core.corpus.explain_corpus` explains each chunk with ``explain_batch``
unless it is handed a *chunk-explainer source* (``amortized=``): then each chunk goes to
the explainer that source gives for the run's model. The corpus knows only these two
protocols; the amortized head (:class:`slalom_core.amortized.CorpusHead`) implements them,
and so may any other explainer of a chunk of texts, without the corpus importing it.

Example:
    >>> from slalom_core.amortized import CorpusHead  # doctest: +SKIP
    >>> explain_corpus(model, "more.jsonl", "runs/more", tok, amortized=CorpusHead("heads/imdb"))  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from ..api import CallOptions
    from ..explanation import SlalomExplanation
    from ..models import ModelAdapter, Segmentation

__all__ = ["ChunkExplainer", "ChunkExplainerSource", "check_source"]


@runtime_checkable
class ChunkExplainer(Protocol):
    """An explainer of a chunk of texts, bound to the run's model.

    Attributes:
        adapter: segments the texts (and is what the explainer reads them with).
        batch_size: texts per forward pass (None: the explainer's own default); the run sets it
            from its ``batch_size`` when given.
    """

    adapter: ModelAdapter
    batch_size: int | None

    def explain_batch(self, segmentations: Sequence[Segmentation]) -> list[SlalomExplanation]:
        """One explanation per segmented text, in order (the chunk's rows come from them)."""
        ...


@runtime_checkable
class ChunkExplainerSource(Protocol):
    """What ``explain_corpus(..., amortized=)`` takes: options it allows, the explainer it
    gives for the run's model, its record in the manifest, and a worker's copy.

    Attributes:
        ood_warning: the warning the run gives once for texts whose ``ood`` check flagged them.
    """

    ood_warning: type[Warning]

    def run_options(self, opts: CallOptions) -> CallOptions:
        """The options the run records, after refusing those the explainer cannot honour."""
        ...

    def for_run(self, model: Any, tokenizer: Any, *, digest: str, output: str) -> ChunkExplainer:
        """The explainer for the run's loaded model (``digest``: its fingerprint), checked."""
        ...

    def record(self, explainer: ChunkExplainer) -> dict:
        """What the manifest keeps of the explainer (a resume with another one is refused);
        JSON-safe, and all :meth:`worker_copy` needs."""
        ...

    def worker_copy(self, record: dict) -> Callable[[Any, Any], ChunkExplainer]:
        """A picklable ``f(model, tokenizer) -> ChunkExplainer`` that a Ray worker calls
        with its own copy of the model; raises if ``record`` cannot be honoured there."""
        ...


def check_source(source: object) -> ChunkExplainerSource:
    """``source`` if it is a chunk-explainer source, else a TypeError that says what to pass.

    Example:
        >>> try:
        ...     check_source("heads/imdb")
        ... except TypeError as err:
        ...     print(str(err).split("; ")[1])
        for a saved amortized head or an AmortizedExplainer pass slalom_core.amortized.CorpusHead(head)
    """
    if not isinstance(source, ChunkExplainerSource):
        raise TypeError(
            "amortized= takes a chunk-explainer source (slalom_core.corpus.protocol.ChunkExplainerSource), got "
            f"{type(source).__name__}; for a saved amortized head or an AmortizedExplainer pass "
            "slalom_core.amortized.CorpusHead(head)"
        )
    return source
