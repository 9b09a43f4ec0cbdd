"""The on-disk layout of a corpus run, shared by both engines.

    OUT/manifest.json                 input, options and library version of the run
    OUT/positions/part-KEY.parquet    one row per (text id, label, position)
    OUT/texts/part-KEY.parquet        one row per (text id, label)
    OUT/failures/part-KEY.parquet     one row per text that could not be explained
    OUT/done/KEY.json                 the ids of chunk KEY and its fingerprint, written last

KEY is a hash of the chunk's ids (of their JSON list, so ids holding a newline or any other
separator cannot give two chunks one key). A chunk counts only once its ``done`` marker
exists: a run killed while writing leaves parts without a marker, which a resumed run
removes and redoes, so a finished run holds every text exactly once. The marker's
fingerprint hashes the chunk's ids with a digest of each text, so that a resumed run can
tell which finished chunks were explained from texts the data file no longer holds. A run
holds an exclusive ``flock`` on OUT itself while it writes (:func:`run_lock`), so that two
runs never share one folder's temp files.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path

from ..files import MANIFEST, has_manifest, read_manifest, replace_with
from ..scores import STORED_SCORES
from .fingerprint import DUPLICATE
from .rows import ChunkTables

__all__ = [
    "write_chunk",
    "write_duplicates",
    "chunk_fingerprint",
    "changed_chunks",
    "remove_chunk",
    "done_ids",
    "content_digest",
    "markers",
    "remove_unfinished",
    "missing_parts",
    "chunks_failed_by",
    "read_table",
    "read_parts",
    "schemas",
    "run_lock",
    "holds_no_results",
    "TABLES",
    "SIDECARS",
    "QUALITY",
]

TABLES = ("positions", "texts", "failures")
#: What a run leaves before its first chunk: nothing another run would lose.
_NO_RESULTS = {MANIFEST, f"{MANIFEST}.tmp", "ray-driver.log", "done", *TABLES}
#: What a pipeline keeps beside the run's own tables (the amortized pipeline's label run,
#: head and audit run in ``auto/``; its per-text flags in ``quality.parquet``): written
#: before the run's first chunk, so they do not make the folder one that holds results.
SIDECARS = ("auto", "quality.parquet")
#: The per-text quality table (:meth:`CorpusRun.quality`).
QUALITY = "quality.parquet"


@contextlib.contextmanager
def run_lock(out: Path) -> Iterator[None]:
    """Hold ``out`` for one run: a second run on it is refused, not left to race on temp files.

    Args:
        out: the run folder (created if missing).

    Returns:
        A context manager; a FileExistsError when another process or thread holds the folder.

    Example:
        >>> with run_lock(Path("runs/r")):  # doctest: +SKIP
        ...     write_chunk(Path("runs/r"), ids, tables, digests)
    """
    out.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: runs are not locked
        yield
        return
    # The folder itself is locked, not a file in it: a lock file would be left behind in
    # every folder a run was refused, and removing it would race with the next run.
    fd = os.open(out, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise FileExistsError(
                f"{str(out)!r} is in use by another run (one still writing into it); wait for that run to end, or "
                "choose another output path"
            ) from None
        yield
    finally:
        os.close(fd)  # releases the lock


def holds_no_results(out: Path) -> bool:
    """True when ``out`` holds no finished chunk, no part and nothing but a run's own files.

    A run killed while writing its manifest, or before its first chunk, leaves such a
    folder; the next command may start afresh in it. A manifest that is not a
    corpus run's (another tool's file) is kept: the folder then holds results.
    """
    if not out.is_dir():
        return True
    entries = [p for p in out.iterdir() if p.name not in SIDECARS]
    if any(p.name not in _NO_RESULTS for p in entries) or markers(out):
        return False
    if any(p.is_dir() and any(p.iterdir()) for p in entries):
        return False
    if not has_manifest(out):
        return True
    try:
        return "input" in read_manifest(out)
    except ValueError:  # cut short, or not a corpus run's
        return False


def schemas():
    """The Arrow schema of each table."""
    import pyarrow as pa

    f64, i64, i32, s = pa.float64(), pa.int64(), pa.int32(), pa.string()
    return {
        "positions": pa.schema(
            [("id", s), ("explained_class", s), ("position", i32), ("unit", i32), ("word", i32), ("token", s)]
            + [("token_ids", pa.list_(i64))]
            + [(c, f64) for c in (*STORED_SCORES, "value_se", "importance_se")]
        ),
        "texts": pa.schema(
            [("id", s), ("explained_class", s), ("gold_label", s), ("text", s), ("target", i64), ("class_names", s)]
            + [("class_index", i64), ("n_positions", i32), ("n_units", i32), ("truncated_positions", i32)]
            + [(c, f64) for c in ("base_value", "model_output", "surrogate_output", "full_text_gap", "heldout_r2")]
            + [("converged", pa.bool_()), ("model_evaluations", i64), ("tokens_evaluated", i64)]
            + [("seconds", f64), ("model_seconds", f64), ("fit_seconds", f64)]
            + [("method", s), ("n_samples", i64), ("seed", i64), ("output", s), ("options", s), ("diagnostics", s)]
            + [("version", s), ("ood", s)]
        ),
        "failures": pa.schema([("id", s), ("error", s), ("message", s)]),
    }


#: Columns renamed since runs were first written: old name -> current name.
RENAMED = {"label": "explained_class"}


def _current(table, schema):
    """A part written by an older slalom-xai, in the current schema: renamed columns take
    their new names, columns it lacks are null (its texts' gold labels, for example, were
    not kept)."""
    import pyarrow as pa

    table = table.rename_columns([RENAMED.get(c, c) for c in table.column_names])
    columns = [
        table.column(f.name).cast(f.type) if f.name in table.column_names else pa.nulls(len(table), f.type)
        for f in schema
    ]
    return pa.table(columns, schema=schema)


def chunk_key(ids: list[str]) -> str:
    """A chunk's file key: the same ids in the same order give the same key."""
    # JSON, not the ids joined by newlines: ["a\nb"] and ["a", "b"] must not share a file.
    return hashlib.blake2b(json.dumps(list(ids)).encode(), digest_size=10).hexdigest()


def chunk_fingerprint(ids: list[str], digests: list[str | None]) -> str:
    """A chunk's ids with the digests of their texts (:func:`~.fingerprint.cell_digest`)."""
    return hashlib.blake2b(json.dumps([list(ids), list(digests)]).encode(), digest_size=16).hexdigest()


def write_chunk(out: Path, ids: list[str], tables: ChunkTables, digests: list[str]) -> str:
    """Write one chunk's three tables, then its ``done`` marker. Returns the chunk's key.

    ``digests`` has one :func:`~.fingerprint.cell_digest` per id: of the text the chunk
    explained (recorded in the marker's fingerprint, checked by a resumed run).
    """
    if len(digests) != len(ids):
        raise ValueError(f"write_chunk needs one text digest per id ({len(ids)} ids, {len(digests)} digests)")
    import pyarrow as pa
    import pyarrow.parquet as pq

    key = chunk_key(ids)
    schema = schemas()
    for name, columns in (("positions", tables.positions), ("texts", tables.texts), ("failures", tables.failures)):
        (out / name).mkdir(parents=True, exist_ok=True)
        table = pa.table({c: columns[c] for c in schema[name].names}, schema=schema[name])
        # A reader (or a resumed run) never sees half a part; the run's lock makes NAME.tmp its own.
        replace_with(out / name / f"part-{key}.parquet", lambda p, t=table: pq.write_table(t, p), shared=False)
    (out / "done").mkdir(parents=True, exist_ok=True)
    marker = {
        "ids": ids,
        "fingerprint": chunk_fingerprint(ids, digests),
        "n_failures": len(tables.failures["id"]),
        "warnings": sorted(set(tables.warnings)),
    }
    replace_with(out / "done" / f"{key}.json", lambda p: p.write_text(json.dumps(marker)), shared=False)
    return key


def markers(out: Path) -> dict[str, dict]:
    """The ``done`` marker of every finished chunk, by key."""
    folder = out / "done"
    if not folder.is_dir():
        return {}
    return {p.stem: json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))}


def write_duplicates(out: Path, counts: dict[str, int]) -> str:
    """Every row of a duplicated id, as failures of one chunk of their own.

    Written before the texts, so that every other id is unique and a run can skip finished
    texts by id alone.
    """
    tables = ChunkTables()
    ids = []
    for text_id in sorted(counts):
        for _ in range(counts[text_id]):
            tables.fail(text_id, f"the id {text_id!r} occurs {counts[text_id]} times in the corpus", "DuplicateIdError")
            ids.append(text_id)
    return write_chunk(out, ids, tables, [DUPLICATE] * len(ids))


def done_ids(out: Path) -> set[str]:
    """Ids of every finished chunk."""
    return {i for m in markers(out).values() for i in m["ids"]}


def content_digest(out: Path) -> str:
    """A digest of every finished chunk of the run in ``out``: its key, its marker and the
    bytes of its parts. A chunk redone (for changed texts, or after a budget stop) or
    removed changes it, even when its texts did not change.

    Example:
        >>> content_digest(Path("runs/r")) == content_digest(Path("runs/r"))  # doctest: +SKIP
        True
    """
    h = hashlib.blake2b(digest_size=16)
    for key, marker in markers(out).items():
        h.update(f"\x00{key}\x00".encode() + json.dumps(marker, sort_keys=True).encode())
        for name in TABLES:
            part = out / name / f"part-{key}.parquet"
            h.update(f"\x00{name}\x00".encode() + (part.read_bytes() if part.exists() else b"missing"))
    return h.hexdigest()


def changed_chunks(out: Path, digests: dict[str, str]) -> tuple[dict[str, list[str]], list[str]]:
    """Finished chunks whose texts are no longer those of the data.

    ``digests``: the current text digest of every finished id found in the data (an id
    the data no longer holds is missing). Returns ``({key: ids} of chunks whose fingerprint
    differs, [keys of chunks whose marker has no fingerprint])``; the latter were written
    by a version that recorded none, and cannot be checked.
    """
    changed, unchecked = {}, []
    for key, m in markers(out).items():
        if "fingerprint" not in m:
            unchecked.append(key)
        elif chunk_fingerprint(m["ids"], [digests.get(i) for i in m["ids"]]) != m["fingerprint"]:
            changed[key] = m["ids"]
    return changed, unchecked


def remove_chunk(out: Path, key: str) -> None:
    """Forget a finished chunk: its marker first (so that a crash here leaves an unfinished
    chunk, which :func:`remove_unfinished` clears), then its parts."""
    (out / "done" / f"{key}.json").unlink(missing_ok=True)
    for name in TABLES:
        (out / name / f"part-{key}.parquet").unlink(missing_ok=True)


def missing_parts(out: Path) -> list[str]:
    """Keys of finished chunks one of whose parts is gone (deleted by hand, a partial copy):
    their marker alone would count rows no table holds."""
    return [k for k in markers(out) if not all((out / n / f"part-{k}.parquet").exists() for n in TABLES)]


def chunks_failed_by(out: Path, error: str) -> list[str]:
    """Keys of finished chunks where some text failed with the error class named ``error``."""
    keys = [k for k, m in markers(out).items() if m.get("n_failures", 1)]
    return [k for k, failed in read_parts(out, "failures", keys) if (failed["error"] == error).any()]


def remove_unfinished(out: Path) -> int:
    """Delete parts (and temp files) of chunks that have no ``done`` marker, and the chunks
    that lost a part (so that they are explained again); returns how many files went."""
    for key in missing_parts(out):
        remove_chunk(out, key)
    keys = set(markers(out))
    removed = 0
    for name in TABLES:
        for p in (out / name).glob("part-*") if (out / name).is_dir() else []:
            key = p.name[len("part-") :].split(".")[0]
            if key not in keys or p.name.endswith(".tmp"):
                p.unlink()
                removed += 1
    for p in (out / "done").glob("*.tmp") if (out / "done").is_dir() else []:
        p.unlink()
    return removed


def read_table(out: Path, name: str):
    """One table of a run (finished chunks only) as a pandas DataFrame, sorted by id."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if name not in TABLES:
        raise ValueError(f"unknown table {name!r}; choose one of {TABLES}")
    parts = [out / name / f"part-{key}.parquet" for key in markers(out)]
    schema = schemas()[name]
    tables = [_current(pq.read_table(p), schema) for p in parts if p.exists()]
    table = pa.concat_tables(tables) if tables else schema.empty_table()
    df = table.to_pandas()
    order = [c for c in ("id", "explained_class", "position") if c in df.columns]
    # A stable sort: rows of one text stay in position order.
    return df.sort_values(order, kind="stable", key=_natural_key).reset_index(drop=True)


def read_parts(out: Path, name: str, keys: list[str] | None = None):
    """One table of a run, one finished chunk at a time: ``(key, DataFrame)`` pairs.

    Memory holds one chunk, so that a report over a large run never loads every position.
    ``keys`` restricts the chunks read (default: every finished chunk).
    """
    import pyarrow.parquet as pq

    if name not in TABLES:
        raise ValueError(f"unknown table {name!r}; choose one of {TABLES}")
    schema = schemas()[name]
    for key in markers(out) if keys is None else keys:
        part = out / name / f"part-{key}.parquet"
        if part.exists():
            yield key, _current(pq.read_table(part), schema).to_pandas()


def _natural_key(col):
    # Row-number ids ("0", "1", ..., "10") sort as numbers; other ids as strings.
    if col.name == "id" and len(col) and col.str.fullmatch(r"\d+").all():
        # Zero-padded to one width, digit strings sort as their numbers, of any size (an
        # id of 10**20 is no int64).
        return col.str.zfill(int(col.str.len().max()))
    return col
