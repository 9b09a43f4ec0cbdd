"""``explain_corpus(..., engine="ray")``: the same chunks, explained by Ray Data actors.

Ray Data reads the corpus (``read_json`` / ``read_csv`` / ``read_parquet`` /
``from_huggingface``) and streams it through ``map_batches`` over :class:`ExplainActor`, a
callable class that loads the model once per worker. Each actor call explains one batch of
``chunk_size`` texts with the same :func:`~.rows.explain_chunk` as the local engine and writes
the same parts (so ``out`` must be a folder every worker can write: local disk for a local
Ray instance, shared storage on a cluster). Texts get their seeds from their ids, so the
scores equal the local engine's within the fits' tolerance.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from ..api import CallOptions, CheckedCall
from . import store
from .fingerprint import cell_digest
from .rows import explain_chunk
from .source import CorpusSource, Row, is_json_array, parse_json_line

__all__ = ["ExplainActor", "run_ray", "quiet_ray", "RAY_LOGS", "DRIVER_LOG"]


class ExplainActor:
    """One Ray worker: loads the model once, then explains the batches it is handed.

    Example:
        >>> ds.map_batches(ExplainActor, fn_constructor_kwargs={...}, compute=ActorPoolStrategy(size=2))  # doctest: +SKIP
    """

    def __init__(self, model, tokenizer, out: str, opts: CallOptions, text_column: str, id_column: str, **kw) -> None:
        import torch

        from ..models import as_adapter
        from .loading import load_model

        # Ray sets no thread count for fractional CPUs: N actors share the cores evenly.
        torch.set_num_threads(kw.get("threads", 1))
        model, tokenizer = load_model(model, tokenizer)
        self.adapter = as_adapter(model, tokenizer, batch_size=kw.get("batch_size"), device=kw.get("device"))
        self.explainer = None
        if kw.get("worker_copy"):  # a chunk explainer's run (protocol.py): its copy, once per worker
            self.explainer = kw["worker_copy"](model, tokenizer)
            self.explainer.batch_size = kw.get("batch_size") or self.explainer.batch_size
            self.adapter = self.explainer.adapter
        self.out, self.opts, self.version = Path(out), opts, kw.get("version", "")
        self.call = kw.get("call")  # the run's options, checked once by the driver
        self.text_column, self.id_column = text_column, id_column
        self.label_column = kw.get("label_column")

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        # Ray hands numpy arrays: ids back to the local engine's str form, cells to Python.
        ids = [str(i.item() if isinstance(i, np.generic) else i) for i in batch[self.id_column]]
        texts = [t.item() if isinstance(t, np.generic) else t for t in batch[self.text_column]]
        golds = batch[self.label_column] if self.label_column else [None] * len(ids)
        golds = [g.item() if isinstance(g, np.generic) else g for g in golds]
        rows = [Row(i, t, -1, g) for i, t, g in zip(ids, texts, golds)]
        tables = explain_chunk(
            self.adapter, rows, self.opts, call=self.call, version=self.version, explainer=self.explainer
        )
        store.write_chunk(self.out, ids, tables, [cell_digest(t) for t in texts])
        failed = set(tables.failures["id"])
        return {"id": np.array(ids, dtype=object), "failed": np.array([i in failed for i in ids])}


# Reading and selecting columns are light: they must not wait for the CPUs that the
# explaining actors hold (with num_cpus=1 each they can take every CPU of the cluster).
_LIGHT = 0.05


class _JsonLines:
    """JSONL lines (from ``read_text``) to id, text and label columns, parsed as the local reader does.

    Ray's ``read_json`` infers column types with Arrow: ids ``1`` and ``1.5`` in one column
    become floats (``"1.0"``), and a text that is a number in one row fails the whole read.
    Parsing each line with :func:`~.source.parse_json_line` gives every id the same string
    as the local engine, so seeds, resumes and rows agree between engines.
    """

    def __init__(self, text_column: str, id_column: str, label_column: str | None = None) -> None:
        self.text_column, self.id_column, self.label_column = text_column, id_column, label_column

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        recs = [parse_json_line(line, self.id_column) for line in batch["text"] if line.strip()]
        cols = {self.id_column: np.array([str(r[self.id_column]) for r in recs], dtype=object)}
        for name in (self.text_column, self.label_column):
            if name and name != self.id_column:
                cells = np.empty(len(recs), dtype=object)  # cells as parsed (a bad one fails in its chunk)
                cells[:] = [r.get(name) for r in recs]
                cols[name] = cells
        return cols


def _read(source: CorpusSource):
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import ray.data

    files = [str(p) for p in source.files]
    text_col, id_col, label_col = source.text_column, source.resolved_id_column, source.resolved_label_column
    if source.format == "hf":
        from datasets import load_from_disk

        return ray.data.from_huggingface(load_from_disk(files[0]))
    if source.format == "jsonl":
        arrays = [p.name for p in source.files if is_json_array(p)]
        if arrays:
            # Ray reads JSON by lines; an array's lines are not records.
            raise ValueError(
                f"{arrays[0]} is a JSON array, not JSON lines: the Ray engine reads JSON lines (one object "
                "per line); convert it, or use engine='local', which reads arrays"
            )
        lines = ray.data.read_text(files, encoding="utf-8", num_cpus=_LIGHT)
        return lines.map_batches(_JsonLines(text_col, id_col, label_col), batch_format="numpy", num_cpus=_LIGHT)
    if source.format == "csv":
        # Every CSV cell is text, as csv.DictReader reads it locally: without these types
        # Arrow would read the id "007" as 7 and a text "123" as a number. Quoted newlines
        # are allowed, as they are locally.
        return ray.data.read_csv(
            files,
            num_cpus=_LIGHT,
            convert_options=pacsv.ConvertOptions(
                column_types={c: pa.string() for c in (text_col, id_col, label_col) if c}
            ),
            parse_options=pacsv.ParseOptions(newlines_in_values=True),
        )
    return ray.data.read_parquet(files, num_cpus=_LIGHT)


#: Where Ray keeps its own logs (the workers', Ray Data's ray-data.log) when it starts a
#: local instance: its session folder, which Ray links as session_latest.
RAY_LOGS = "/tmp/ray/session_latest/logs"
#: The file in the run's folder that takes what Ray's driver prints to stderr during a run.
DRIVER_LOG = "ray-driver.log"


@contextmanager
def quiet_ray(out: Path):
    """Keep Ray's own messages out of the user's terminal while a run is on; yields a
    text stream to the terminal (for the progress bar).

    Ray's C++ core writes to the process's stderr (token authentication, actor notices)
    below anything Python can filter, and Ray Data logs each dataset's start, plan, finish
    and its issue detectors' advice to the console (as well as to ``ray-data.log`` in
    :data:`RAY_LOGS`). For the run, the stderr file descriptor points at
    ``out/ray-driver.log``, so all of it lands there; the terminal is put back afterwards,
    before the run's own warnings.
    """
    import sys

    sys.stderr.flush()
    saved = os.dup(2)
    terminal = os.fdopen(os.dup(saved), "w", buffering=1, encoding="utf-8", errors="replace")
    with open(out / DRIVER_LOG, "ab") as log:
        os.dup2(log.fileno(), 2)
        try:
            yield terminal
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            terminal.close()


def _init_local_ray(ray) -> None:
    """Start a local Ray instance whose servers listen on 127.0.0.1 only.

    By default Ray's GCS, raylet and workers listen on every interface, so a laptop's
    corpus run would accept connections from its network. Ray binds to loopback when the
    node's IP is 127.0.0.1, but ``ray.init(_node_ip_address="127.0.0.1")`` alone is turned
    back into the machine's reachable IP (``services.resolve_ip_for_localhost``) unless
    ``ray_constants.ENABLE_RAY_CLUSTER`` is off (as on macOS and Windows), so it is off for
    the start of this instance only. Checked with Ray 2.x; a Ray without that constant
    starts as before.
    """
    from ray._private import ray_constants

    had = getattr(ray_constants, "ENABLE_RAY_CLUSTER", None)
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        ray.init(
            _node_ip_address="127.0.0.1",
            include_dashboard=False,
            log_to_driver=False,
            configure_logging=False,
        )
    finally:
        if had is None:
            del ray_constants.ENABLE_RAY_CLUSTER
        else:
            ray_constants.ENABLE_RAY_CLUSTER = had


def _check_no_budget(model) -> None:
    """Refuse a model with a budget: each Ray worker would get a copy, and spend all of it."""
    budget = {
        k: getattr(model, k) for k in getattr(type(model), "budget_settings", ()) if getattr(model, k) is not None
    }
    if budget:
        said = ", ".join(f"{k}={v}" for k, v in budget.items())
        raise ValueError(
            f"the model's budget ({said}) cannot be shared by Ray workers: each Ray worker gets a copy and "
            "would spend all of it; run with engine='local' (the classifier's workers= sends requests "
            "concurrently), or without a budget"
        )


def _start_ray(ray, address: str | None) -> None:
    """Join the user's cluster (``address``, or ``RAY_ADDRESS``), or start a quiet local one;
    Ray Data keeps the rows' order and shows no bars of its own."""
    if not ray.is_initialized():
        if address is None and not os.environ.get("RAY_ADDRESS"):
            _init_local_ray(ray)
        else:  # the user's own cluster (given, or named by RAY_ADDRESS): joined as before
            ray.init(address=address, include_dashboard=False, log_to_driver=False, configure_logging=False)
    ctx = ray.data.DataContext.get_current()
    ctx.execution_options.preserve_order = True  # --limit takes the first rows, as locally
    ctx.enable_progress_bars = False  # our bar counts texts


def _rows_to_explain(source: CorpusSource, finished: set[str]):
    """The Ray dataset of the rows still to explain: the source's first ``limit`` rows, its
    text, id and label columns, without finished or duplicated ids (a subset run: its ids only)."""
    text_col, id_col, label_col = source.text_column, source.resolved_id_column, source.resolved_label_column
    ds = _read(source)
    if source.limit is not None:
        ds = ds.limit(source.limit)
    ds = ds.select_columns(list(dict.fromkeys(c for c in (text_col, id_col, label_col) if c)), num_cpus=_LIGHT)
    skip = set(finished) | set(source.duplicate_ids)
    if skip:
        ds = ds.filter(lambda r: str(r[id_col]) not in skip, num_cpus=_LIGHT)
    if source.ids is not None:  # a subset run (explain_corpus(ids=...)): only those rows
        keep = source.ids
        ds = ds.filter(lambda r: str(r[id_col]) in keep, num_cpus=_LIGHT)
    return ds


def run_ray(
    model,
    tokenizer,
    source: CorpusSource,
    out: Path,
    opts: CallOptions,
    *,
    call: CheckedCall | None = None,
    chunk_size: int,
    finished: set[str],
    batch_size: int | None,
    device,
    address: str | None,
    num_workers: int | None,
    num_gpus: float | None,
    bar,
    version: str,
    worker_copy: Callable | None = None,
) -> None:
    """Explain the rows of ``source`` not in ``finished`` with Ray Data actors (each with its
    chunk explainer from ``worker_copy(model, tokenizer)``, if given: :mod:`.protocol`)."""
    try:
        import ray
        import ray.data
    except ImportError as err:  # pragma: no cover - depends on the install
        raise ImportError("engine='ray' needs Ray Data: pip install 'slalom-xai[ray]'") from err

    _check_no_budget(model)
    _start_ray(ray, address)
    cpus = int(ray.cluster_resources().get("CPU", 1))
    gpus = int(ray.cluster_resources().get("GPU", 0))
    if num_workers is None:
        num_workers = max(1, gpus // max(num_gpus, 1e-9) if num_gpus else cpus)
    text_col, id_col, label_col = source.text_column, source.resolved_id_column, source.resolved_label_column
    results = _rows_to_explain(source, finished).map_batches(
        ExplainActor,
        fn_constructor_kwargs=dict(
            model=model,
            tokenizer=tokenizer,
            out=str(out.resolve()),
            opts=opts,
            call=call,
            text_column=text_col,
            id_column=id_col,
            label_column=label_col,
            batch_size=batch_size,
            device=device,
            version=version,
            threads=max(1, cpus // int(num_workers)),
            worker_copy=worker_copy,
        ),
        batch_size=chunk_size,
        batch_format="numpy",
        compute=ray.data.ActorPoolStrategy(size=int(num_workers)),
        num_gpus=num_gpus or 0,
        # At most one CPU per actor, less where the actors would otherwise hold every CPU and
        # leave none for the read tasks (Ray Data then waits forever on a small cluster).
        num_cpus=min(1.0, (cpus - 0.2) / num_workers),
    )
    for batch in results.iter_batches(batch_size=None, batch_format="numpy"):
        if bar is not None:
            bar.update(len(batch["id"]))
