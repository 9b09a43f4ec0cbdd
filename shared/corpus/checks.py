"""What a corpus run refuses up front: everything that would fail every text, refused before
the data scan, the model load or the first write (:func:`~.run.explain_corpus`)."""

from __future__ import annotations

import hashlib
from collections.abc import Collection
from pathlib import Path

import torch

from ..api.call import CallOptions, CheckedCall, check_call
from ..models.session import check_device
from .protocol import ChunkExplainerSource
from .source import CorpusSource

__all__ = ["ENGINES", "check_run_options", "check_run_device", "check_run_target", "scan_source", "ids_digest"]

ENGINES = ("local", "ray")


def check_run_options(
    opts: CallOptions, amortized: ChunkExplainerSource | None, chunk_size: int, engine: str, device: object = None
) -> tuple[CallOptions, CheckedCall | None]:
    """The run's options, checked once for every chunk: the engine's own
    :func:`~slalom_core.check_call` (the one every explain call runs first, so a run refuses
    what every chunk would, with the same errors), then the corpus's own and the device.

    Returns:
        The options the run records (a chunk explainer's, with ``amortized``:
        :meth:`~.protocol.ChunkExplainerSource.run_options`, which checks its own) and their
        check (None with ``amortized``).

    Example:
        >>> opts, call = check_run_options(CallOptions(method="eff", seed=0), None, 64, "local")
        >>> call.fitter.name
        'eff'
    """
    if amortized is not None:
        opts = amortized.run_options(opts)
    if "gamma" in opts.fit_options:
        # explain's gamma only shifts the importances (they sum to gamma); a run's tables
        # store them mean-zero, which its manifest does not record and its readers assume.
        raise TypeError(
            "a corpus run takes no gamma: its tables store every text's importances and lin "
            "with the importances summing to 0 (explain's default)"
        )
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}; choose one of {ENGINES}")
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
        raise ValueError(f"chunk_size must be a positive int, got {chunk_size!r}")
    call = check_call(opts) if amortized is None else None
    if not isinstance(opts.seed if call is None else call.seed, int):
        # Each text's seed is derived from the run's one seed and its id (rows.text_seed).
        raise TypeError(f"a corpus run takes one seed (an int, or None), got {opts.seed!r}")
    check_run_device(device, engine)
    return opts, call


def ids_digest(ids: Collection[str]) -> dict:
    """A subset's record in the manifest: its size and a hash of its sorted ids.

    Example:
        >>> ids_digest(["b", "a"])["n"]
        2
    """
    h = hashlib.blake2b(digest_size=16)
    for i in sorted(ids):
        h.update(i.encode("utf-8") + b"\0")
    return {"n": len(ids), "digest": h.hexdigest()}


def check_run_device(device: object, engine: str) -> None:
    """A device this machine lacks fails every text: refused up front (locally; a Ray
    driver may hold no GPU that its workers have)."""
    if device is None:
        return
    dev = check_device(device)
    if engine != "local" or dev.type != "cuda":
        return
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if dev.index is not None and dev.index >= count or count == 0:
        raise ValueError(
            f"device={str(device)!r}: torch sees {count} CUDA GPU(s) here"
            + ("" if count == 0 else f" (cuda:0..cuda:{count - 1})")
            + "; use device='cpu' or leave it unset"
        )


def check_run_target(model: object, target: int | None) -> None:
    """A target beyond the model's classes (as its config states them) fails every text: refused up front."""
    n = getattr(getattr(model, "config", None), "num_labels", None)
    if target is None or not isinstance(n, int) or isinstance(target, bool) or not isinstance(target, int):
        return
    if not -n <= target < n:
        raise ValueError(f"target={target}: the model has {n} classes (targets 0..{n - 1}, as its config states)")


def scan_source(source: CorpusSource, data: str | Path, engine: str) -> CorpusSource:
    """``source`` scanned, refused when a subset selects none of its rows, or when Ray
    would have no ids to read it by."""
    source = source.scan()
    if source.ids is not None and source.n_rows == 0:
        raise ValueError(
            f"none of the {len(source.ids)} ids given (ids=) is an id of {str(data)!r}: there is nothing to explain "
            "(ids are str, as the texts table holds them)"
        )
    if engine == "ray" and source.resolved_id_column is None:
        raise ValueError(
            "engine='ray' needs an id column (a distributed read has no row numbers): add one to the data "
            "and give id_column=, or run with engine='local'"
        )
    return source
