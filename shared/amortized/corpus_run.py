"""A corpus explained by an amortized explainer: what ``explain_corpus(..., amortized=...)``
needs beyond its per-text path.

The run writes the same tables as a per-text run, through the same chunk code
(:func:`slalom_core.corpus.rows.explain_chunk` with the explainer), with ``method ==
"amortized"`` and each text's out-of-distribution check in the texts table's ``ood`` column.
The manifest records the head (its folder and :attr:`AmortizedExplainer.digest`), so that a
resume with another head is refused.
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path

from ..api import CallOptions
from .audit import AmortizedOODWarning
from .explainer import METHOD, AmortizedExplainer

__all__ = ["amortized_options", "resolve_explainer", "head_record", "worker_explainer", "HEAD_FOLDER", "CorpusHead"]

#: Where a run saves an explainer it was handed unsaved, for Ray's workers to load.
HEAD_FOLDER = "amortized-head"


def amortized_options(opts: CallOptions) -> CallOptions:
    """The run's options for an amortized run, after refusing what the head cannot honour.

    A head predicts one thing: its training run's token-level explanation of class 1 from
    the empty input. Options asking for anything else (another method or budget, a target,
    words, another reference point, fit options) are refused rather than ignored.

    Args:
        opts: the options ``explain_corpus`` was called with.

    Returns:
        The options recorded for the run: ``method="amortized"``, no sample budget.

    Example:
        >>> amortized_options(CallOptions(seed=0)).method
        'amortized'
    """
    # The options a head cannot honour, left at the table's defaults (CallOptions) or refused.
    default = CallOptions()
    asked = ("method", "n_samples", "target", "reference", "granularity", "fit_options")
    differ = {k: getattr(opts, k) for k in asked if getattr(opts, k) != getattr(default, k)}
    if differ:
        said = ", ".join(f"{k}={v!r}" for k, v in differ.items())
        raise ValueError(
            f"an amortized run explains as its head was trained (method, budget, tokens of class 1, from the "
            f"empty input); these options cannot apply to it: {said}. Leave them out, or explain per text"
        )
    return dataclasses.replace(opts, method=METHOD, n_samples=None)


def resolve_explainer(
    amortized: AmortizedExplainer | str | Path, *, model: object, tokenizer: object, digest: str, output: str
) -> AmortizedExplainer:
    """The trained explainer a run uses, checked against the run's model and output reading.

    Args:
        amortized: an :class:`AmortizedExplainer` or the folder it was saved to.
        model, tokenizer: the run's loaded model (a folder is loaded for it).
        digest: the run's model fingerprint (an explainer object must be for this model).
        output: the run's output reading ("auto", or the one the head was trained on).

    Returns:
        The explainer.

    Example:
        >>> resolve_explainer("heads/imdb", model=m, tokenizer=t, digest=d, output="auto")  # doctest: +SKIP
    """
    if isinstance(amortized, (str, Path)):
        explainer = AmortizedExplainer.load(amortized, model, tokenizer)
    elif isinstance(amortized, AmortizedExplainer):
        explainer = amortized
        if explainer.head is None:
            raise ValueError("the amortized explainer is not trained: fit it on a corpus run, or load a saved one")
        if explainer.fingerprint["digest"] != digest:
            raise ValueError(
                f"the amortized explainer was made for another model or tokenizer (fingerprint "
                f"{explainer.fingerprint['digest']}; the run's model {digest}): pass the explainer's own model"
            )
    else:
        raise TypeError(f"amortized takes an AmortizedExplainer or its folder, got {type(amortized).__name__}")
    trained = explainer.config["trained_on"]["output"]
    if output not in ("auto", trained):
        raise ValueError(f"the head was trained on output={trained!r}; output={output!r} cannot apply to it")
    return explainer


def head_record(explainer: AmortizedExplainer) -> dict:
    """The manifest's record of the head: its folder (None if never saved), digest and training run.

    Example:
        >>> head_record(AmortizedExplainer.load("heads/imdb", model, tok))["digest"]  # doctest: +SKIP
    """
    trained = explainer.config["trained_on"]
    return {
        "folder": None if explainer.path is None else str(Path(explainer.path).resolve()),
        "digest": explainer.digest,
        "trained_on": {k: trained.get(k) for k in ("method", "n_samples", "output", "run")},
    }


def worker_explainer(record: dict, model: object, tokenizer: object) -> AmortizedExplainer:
    """A Ray worker's copy of the run's head, loaded from the recorded folder and refused if
    the folder no longer holds the head the run started with.

    Example:
        >>> worker_explainer(manifest["amortized"], model, tok)  # doctest: +SKIP
    """
    explainer = AmortizedExplainer.load(record["folder"], model, tokenizer)
    if explainer.digest != record["digest"]:
        raise ValueError(
            f"the amortized explainer in {record['folder']!r} changed since the run started (digest "
            f"{explainer.digest}, the run's {record['digest']}): restore it, or start a new run"
        )
    return explainer


class CorpusHead:
    """An amortized head as a corpus run's chunk explainer
    (:class:`slalom_core.corpus.protocol.ChunkExplainerSource`).

    Args:
        head: an :class:`AmortizedExplainer`, or the folder one was saved to (loaded for the
            run's model when the run starts).

    Example:
        >>> run = explain_corpus(model, "more.jsonl", "runs/more", tok, amortized=CorpusHead("heads/imdb"))  # doctest: +SKIP
    """

    ood_warning = AmortizedOODWarning

    def __init__(self, head: AmortizedExplainer | str | Path) -> None:
        if not isinstance(head, (AmortizedExplainer, str, Path)):
            raise TypeError(f"CorpusHead takes an AmortizedExplainer or its folder, got {type(head).__name__}")
        self.head = head

    def run_options(self, opts: CallOptions) -> CallOptions:
        """:func:`amortized_options`."""
        return amortized_options(opts)

    def for_run(self, model: object, tokenizer: object, *, digest: str, output: str) -> AmortizedExplainer:
        """:func:`resolve_explainer`."""
        return resolve_explainer(self.head, model=model, tokenizer=tokenizer, digest=digest, output=output)

    def record(self, explainer: AmortizedExplainer) -> dict:
        """:func:`head_record`; Ray's workers load the head from its folder: it must be saved."""
        return head_record(explainer)

    def worker_copy(self, record: dict) -> functools.partial:
        """:func:`worker_explainer` for ``record``, refused up front for a head never saved."""
        if record.get("folder") is None:
            raise ValueError("engine='ray' loads the amortized explainer from its folder in each worker: save it first")
        return functools.partial(worker_explainer, record)
