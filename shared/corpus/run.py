"""``explain_corpus``: a whole dataset, streamed, resumable, on one machine or a Ray cluster."""

from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

import torch

from ..api import (
    DEFAULT_METHOD,
    DEFAULT_N_SAMPLES,
    CallOptions,
    CheckedCall,
    SlalomFitWarning,
)
from ..files import has_manifest, read_manifest
from ..fit_quality import FLAG_CODES, row_flags
from ..link import SlalomOutputWarning
from ..models import ModelAdapter, as_adapter
from ..models.fingerprint import model_fingerprint
from ..warn import warn_user
from . import store
from .checks import ENGINES, check_run_options, check_run_target, ids_digest, scan_source
from .fingerprint import cell_digest
from .loading import load_model, model_name
from .protocol import ChunkExplainerSource, check_source
from .resume import check_out, prepare_out, redo_budget_failures, redo_changed_chunks
from .rows import explain_chunk, options_record
from .source import CorpusSource, Row
from .stored import CorpusRun

__all__ = ["explain_corpus", "ENGINES"]


def _bar(show: bool, total: int, done: int, desc: str, file=None):
    if not show:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=done, desc=desc, unit="text", smoothing=0.1, file=file)


def explain_corpus(
    model: object,
    data: str | Path,
    out: str | Path,
    tokenizer: object | None = None,
    *,
    text_column: str = "text",
    id_column: str | None = "auto",
    label_column: str | None = "auto",
    limit: int | None = None,
    ids: Collection[str] | None = None,
    chunk_size: int = 64,
    resume: bool = False,
    truncate: bool = True,
    engine: str = "local",
    ray_address: str | None = None,
    num_workers: int | None = None,
    num_gpus_per_worker: float | None = None,
    method: str = DEFAULT_METHOD,
    n_samples: int = DEFAULT_N_SAMPLES,
    target: int | None = None,
    output: str = "auto",
    reference: str | float = "empty",
    multiclass: str = "joint",
    granularity: str = "token",
    seed: int | None = 0,
    batch_size: int | None = None,
    device: torch.device | str | None = None,
    show_progress: bool = True,
    amortized: ChunkExplainerSource | None = None,
    **fit_options,
) -> CorpusRun:
    """Explain every text of a corpus into a Parquet dataset, chunk by chunk.

    Texts are read in chunks of ``chunk_size`` and each chunk is explained with one
    :func:`~slalom_core.explain_batch` call, then written to ``out`` (layout:
    :mod:`slalom_core.corpus.store`). Memory is bounded by the chunk. Each text's seed is a
    hash of ``seed`` and its id, and each text's samples are read and its fit solved apart
    from the other texts of its chunk, so its scores depend neither on the chunking nor on
    the engine, worker count or order (on one kind of machine: another CPU or a GPU rounds
    the forward differently). Every input row ends in the texts
    table or the failures table (bad text, duplicate id, over-length text without
    ``truncate``, a model error).

    Args:
        model: what :func:`~slalom_core.explain` takes, a Hub name or local path of a
            sequence classifier (loaded with ``AutoModelForSequenceClassification``), or a
            :class:`ModelLoader`. With ``engine="ray"`` a path or loader lets each worker
            load the weights itself; a model object is pickled to every worker. The model
            is loaded once in this process too (after the data check), to record its
            fingerprint (weights, config, tokenizer) in the manifest.
        data: a JSONL / CSV / Parquet file (JSONL and CSV may be gzipped), a folder of
            them, or a folder saved by ``datasets.Dataset.save_to_disk``.
        out: the output folder. It must not exist (or be empty) unless ``resume``.
        tokenizer: the model's tokenizer (read from ``model`` when it is a path).
        text_column: the column of texts. Default: "text".
        id_column: the column of ids; "auto" (default): "id" if present, else row numbers.
        label_column: the column of the data's own (gold) labels, kept in the texts table
            as ``gold_label``; "auto" (default): "label" if present; None: none.
        limit: explain only the first ``limit`` rows.
        ids: explain only the rows with these ids (str, as the texts table holds them; a
            list, set, iterator or generator, read once); ids the data lack are ignored, and
            ids none of which is in the data are refused. None (default): every row. A subset run's texts have
            the seeds, and so the scores, that a run of every row gives them.
        chunk_size: texts per chunk (per ``explain_batch`` call, per written part). Default: 64.
        resume: continue an interrupted run in ``out``: finished chunks are kept, unfinished
            ones redone. The input, options and model (by fingerprint) must be those of the
            first call; finished chunks whose ids or texts the data no longer hold are
            explained again (with a warning naming them).
        truncate: cut texts longer than the model accepts to their first tokens (default):
            the texts table records each text's cut in ``truncated_positions`` and the run
            warns once with their number. False: such texts fail, with the reason, in the
            failures table. A review of IMDB often exceeds BERT's 512 tokens; its first 512
            are what a classifier fine-tuned with truncation saw in training too.
        engine: "local" (this process) or "ray" (Ray Data; ``pip install slalom-xai[ray]``).
        ray_address: the cluster to join (``ray.init(address=...)``, e.g. "auto" or
            "ray://head:10001"); None starts a local Ray instance, listening on 127.0.0.1
            only (unless ``RAY_ADDRESS`` names a cluster, or Ray is already initialized).
        num_workers: Ray actors (model copies) to run; default: one per CPU, or per GPU
            when ``num_gpus_per_worker`` is given.
        num_gpus_per_worker: GPUs each Ray actor holds (e.g. 1, or 0.5 to share one).
        method, n_samples, target, output, reference, multiclass, granularity,
            batch_size, device, **fit_options: as in :func:`~slalom_core.explain`.
        seed: the run's seed (each text's seed is derived from it and its id). Default: 0.
            None draws one from torch's global generator (recorded in the manifest, and
            reused by ``resume``).
        show_progress: a progress bar over texts (texts/s, ETA).
        amortized: a chunk-explainer source (:mod:`slalom_core.corpus.protocol`), e.g.
            :class:`slalom_core.amortized.CorpusHead` of an ``AmortizedExplainer`` of this
            model or of the folder it was saved to: each chunk is explained by it (one forward
            pass per text) instead of per-text fits, into the same tables, with ``method``
            "amortized" and each text's out-of-distribution check in the texts table's ``ood`` column.
            The manifest records the head's folder and digest; a resume with another head is
            refused. Options the head cannot honour (method, n_samples, target, ...) are
            refused. Ray's workers load the head from its folder (save it first), and the
            model from its path or ``ModelLoader`` (transformers gives an unpickled model
            object no hidden states).

    Returns:
        A :class:`CorpusRun` to read the tables from (pandas DataFrames).

    Example:
        >>> run = explain_corpus(model, "imdb_test.jsonl", "runs/imdb", tokenizer=tok, limit=100)  # doctest: +SKIP
        >>> run.texts().full_text_gap.abs().mean()  # doctest: +SKIP
    """
    opts = CallOptions(
        method=method,
        n_samples=n_samples,
        target=target,
        output=output,
        reference=reference,
        multiclass=multiclass,
        granularity=granularity,
        seed=_run_seed(seed, out, resume),
        truncate=bool(truncate),
        fit_options=dict(fit_options),
    )
    amortized = None if amortized is None else check_source(amortized)
    opts, call = check_run_options(opts, amortized, chunk_size, engine, device)
    check_out(Path(out), resume)  # a full folder refused before the data scan and the model load
    selected = CorpusSource(
        data, text_column=text_column, id_column=id_column, limit=limit, label_column=label_column, ids=ids
    )
    source = scan_source(selected, data, engine)
    settings = _Settings(chunk_size, batch_size, device, engine, (ray_address, num_workers, num_gpus_per_worker))
    run, manifest = _start(model, tokenizer, source, Path(out), opts, call, amortized, settings)
    with store.run_lock(run.out):  # held until the run ends: one run per output folder
        _explain_pending(run, settings, _prepare_folder(run.out, manifest, resume, source), show_progress)
    return _report(CorpusRun(run.out), UserWarning if amortized is None else amortized.ood_warning)


def _start(
    model: object,
    tokenizer: object | None,
    source: CorpusSource,
    out: Path,
    opts: CallOptions,
    call: CheckedCall | None,
    amortized: ChunkExplainerSource | None,
    settings: _Settings,
) -> tuple[_Run, dict]:
    """The model loaded and fingerprinted, the run's manifest, and its chunk explainer (if any)."""
    from .. import __version__

    # Loaded here, once the data and options have passed their checks, to fingerprint the
    # model (a resume must use the same one); the local engine explains with this copy,
    # the Ray engine drops it and each worker loads its own.
    loaded, loaded_tokenizer = load_model(model, tokenizer)
    check_run_target(loaded, opts.target)
    fingerprint = model_fingerprint(loaded, loaded_tokenizer, name=model_name(model))
    manifest = _manifest(__version__, source, opts, fingerprint)
    explainer = worker_copy = None
    if amortized is not None:
        explainer = amortized.for_run(loaded, loaded_tokenizer, digest=fingerprint["digest"], output=opts.output)
        explainer.batch_size = explainer.batch_size if settings.batch_size is None else int(settings.batch_size)
        manifest["amortized"] = amortized.record(explainer)
        worker_copy = amortized.worker_copy(manifest["amortized"]) if settings.engine == "ray" else None
    manifest = json.loads(json.dumps(manifest, default=str))  # compared with the file's after a restart
    if settings.engine == "local":
        model, tokenizer = loaded, loaded_tokenizer
    run = _Run(model, tokenizer, source, out, opts, call, explainer, worker_copy, __version__)
    return run, manifest


def _run_seed(seed: int | None, out: str | Path, resume: bool) -> int:
    """The run's seed: as given, or (None) the one a resumed run's first call drew, or a new draw."""
    if seed is None:
        # A resumed run keeps the seed its first call drew; a new one draws from torch's
        # global generator (torch.manual_seed reproduces) and records it in the manifest.
        if resume and has_manifest(Path(out)):
            seed = read_manifest(Path(out))["options"]["seed"]
        else:
            seed = int(torch.randint(0, 2**31 - 1, (1,)).item())
    return seed


def _manifest(version: str, source: CorpusSource, opts: CallOptions, fingerprint: dict) -> dict:
    """What the run records of its input, options and model (a resume must match it)."""
    return {
        "version": version,
        "input": {
            "data": str(Path(source.data).resolve()),
            "text_column": source.text_column,
            "id_column": source.resolved_id_column,
            "label_column": source.resolved_label_column,
            "limit": source.limit,
            "n_rows": source.n_rows,
            # A subset run records which subset (a resume must read the same one).
            **({} if source.ids is None else {"ids": ids_digest(source.ids)}),
        },
        "options": options_record(opts),
        "model": fingerprint,
    }


@dataclass(frozen=True)
class _Run:
    """What a run explains, and with what: its stages read it."""

    model: object  # loaded (local engine), or as given (Ray's workers load their own)
    tokenizer: object | None
    source: CorpusSource
    out: Path
    opts: CallOptions  # as recorded per text
    call: CheckedCall | None  # opts checked once, for every chunk (None: a chunk explainer's run)
    explainer: object | None  # a chunk explainer (local engine), or None
    worker_copy: object | None  # a chunk explainer's copy for Ray's workers, or None
    version: str  # the library's, recorded per text


@dataclass(frozen=True)
class _Settings:
    """How a run is carried out (no bearing on its scores)."""

    chunk_size: int
    batch_size: int | None
    device: object
    engine: str
    ray: tuple  # address, num_workers, num_gpus_per_worker


def _prepare_folder(out: Path, manifest: dict, resume: bool, source: CorpusSource) -> set[str]:
    """The run's folder made, or checked for a resume (chunks to redo removed); the ids already done."""
    prepare_out(out, manifest, resume)
    if resume and store.markers(out):
        redo_changed_chunks(out, source, store.done_ids(out))
        redo_budget_failures(out)
    if source.duplicate_ids and not store.done_ids(out) & source.duplicate_ids:
        store.write_duplicates(out, source.duplicate_counts)
    return store.done_ids(out)


def _explain_pending(run: _Run, settings: _Settings, finished: set[str], show_progress: bool) -> None:
    """Every text not in ``finished``, by the run's engine, with a bar over texts."""
    desc = f"SLALOM {run.opts.method} corpus"
    if settings.engine == "local":
        bar = _bar(show_progress, run.source.n_rows, len(finished), desc)
        try:
            _run_local(run, settings, finished, bar)
        finally:
            if bar is not None:
                bar.close()
        return
    from .ray_engine import quiet_ray, run_ray

    with quiet_ray(run.out) as terminal:
        bar = _bar(show_progress, run.source.n_rows, len(finished), desc, file=terminal)
        try:
            run_ray(
                run.model,
                run.tokenizer,
                run.source,
                run.out,
                run.opts,
                call=run.call,
                chunk_size=settings.chunk_size,
                finished=finished,
                batch_size=settings.batch_size,
                device=settings.device,
                address=settings.ray[0],
                num_workers=settings.ray[1],
                num_gpus=settings.ray[2],
                bar=bar,
                version=run.version,
                worker_copy=run.worker_copy,
            )
        finally:
            if bar is not None:
                bar.close()  # while the terminal is open


def _run_local(run: _Run, settings: _Settings, finished: set[str], bar) -> None:
    """The pending texts, chunk by chunk, in this process."""
    if run.explainer is not None:  # it segments with its own adapter, as it explains
        adapter: ModelAdapter = run.explainer.adapter
    else:
        adapter = as_adapter(run.model, run.tokenizer, batch_size=settings.batch_size, device=settings.device)
    size = settings.chunk_size
    pending: list[Row] = []
    # Chunks are cut from the rows still to do, so that a resumed run re-forms the chunks
    # an uninterrupted run would have written (same keys, same files).
    for chunk in run.source.chunks(size):
        pending.extend(r for r in chunk if r.id not in finished)
        while len(pending) >= size:
            _explain_and_write(run, settings, adapter, pending[:size], bar)
            pending = pending[size:]
    if pending:
        _explain_and_write(run, settings, adapter, pending, bar)


def _explain_and_write(run: _Run, settings: _Settings, adapter: ModelAdapter, rows: list[Row], bar) -> None:
    """One chunk explained and written (its part, atomically)."""
    out, opts, version, explainer = run.out, run.opts, run.version, run.explainer
    # The bar counts texts: it moves while the chunk's fits read the model, not only
    # when the whole chunk (64 texts by default) is written.
    texts = _ChunkTexts(bar, len(rows)) if bar is not None else None
    progress = texts if texts is not None and explainer is None else False
    tables = explain_chunk(
        adapter, rows, opts, call=run.call, version=version, explainer=explainer, show_progress=progress
    )
    store.write_chunk(out, [r.id for r in rows], tables, [cell_digest(r.text) for r in rows])
    if texts is not None:
        texts.written()


class _ChunkTexts:
    """The run's bar over texts, moved by one chunk's fits as they read the model.

    :func:`~slalom_core.explain_batch` asks for its bar (``show_progress=``) with the
    chunk's planned samples as total and reports each sample answered; this shows that share
    of the chunk's texts on the run's bar, all but the last text, which counts once the chunk
    is written (:meth:`written`).
    """

    def __init__(self, bar, n_texts: int) -> None:
        self.bar, self.n_texts, self.moved, self.total, self.done = bar, n_texts, 0, 1, 0

    def __call__(self, total: int) -> _ChunkTexts:
        self.total, self.done = max(int(total), 1), 0  # a retry of the chunk's texts starts again
        return self

    def update(self, n: int) -> None:
        self.done += n
        self._move(min(self.n_texts * self.done // self.total, self.n_texts - 1))

    def close(self) -> None:
        pass  # the run's bar is closed by the run

    def written(self) -> None:
        self._move(self.n_texts)

    def _move(self, target: int) -> None:
        if target > self.moved:
            self.bar.update(target - self.moved)
            self.moved = target


def _report(run: CorpusRun, ood_warning: type[Warning]) -> CorpusRun:
    """One warning for the whole run, instead of one per chunk; the run."""
    notes = sorted({w for m in store.markers(run.path).values() for w in m.get("warnings", [])})
    for note in notes:
        if note.startswith("SlalomOutputWarning: "):
            warn_user(note.split(": ", 1)[1], SlalomOutputWarning)
    failures = run.failures()
    if len(failures):
        kinds = failures["error"].value_counts().to_dict()
        warn_user(
            f"{len(failures)} of {run.manifest['input']['n_rows']} texts could not be explained "
            f"({', '.join(f'{k}: {v}' for k, v in kinds.items())}); see CorpusRun.failures()",
            UserWarning,
        )
    texts = run.texts()
    flagged = sum(json.loads(o).get("warning") is not None for o in texts["ood"].dropna())
    if flagged:
        warn_user(
            f"{flagged} of {len(texts)} texts are unlike the amortized explainer's training texts: their scores are "
            "extrapolations (the texts table's ood column says why); explain them per text to be sure",
            ood_warning,
        )
    cut = texts.drop_duplicates("id")["truncated_positions"]
    if (cut > 0).any():
        warn_user(
            f"{int((cut > 0).sum())} texts were longer than the model accepts and were cut to their first tokens "
            f"(at most {int(cut.max())} positions dropped); the texts table's truncated_positions says which and "
            "by how much (truncate=False / --no-truncate fails them instead)",
            UserWarning,
        )
    counts: dict[str, int] = {}
    by_id: dict[str, list[dict]] = {}
    for r in texts.to_dict("records"):
        by_id.setdefault(str(r["id"]), []).append(r)
    for rows in by_id.values():  # the fit-quality rule, per text (its rows: one explanation)
        for flag in row_flags(rows):
            counts[flag.code] = counts.get(flag.code, 0) + 1
    if counts:
        said = "; ".join(f"{n} {FLAG_CODES[code]}" for code, n in counts.items())
        warn_user(
            f"SLALOM fits of {len(by_id)} texts, flagged by the fit-quality rule (a text may have several flags): "
            f"{said}. `slalom-xai report` marks each flagged text and says why; read those texts' scores with care",
            SlalomFitWarning,
        )
    return run
