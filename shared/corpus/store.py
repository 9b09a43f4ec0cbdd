"""The on-disk layout of a corpus run, shared by both engines.

    OUT/manifest.json                 input, options and library version of the run
    OUT/positions/part-KEY.parquet    one row per (text id, label, position)
    OUT/texts/part-KEY.parquet        one row per (text id, label)
    OUT/failures/part-KEY.parquet     one row per text that could not be explained
    OUT/done/KEY.json                 the ids of chunk KEY, written last

KEY is a hash of the chunk's ids. A chunk counts only once its ``done`` marker exists: a
run killed while writing leaves parts without a marker, which a resumed run removes and
redoes, so a finished run holds every text exactly once.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np

from .rows import ChunkTables

__all__ = [
    "write_chunk",
    "write_duplicates",
    "done_ids",
    "markers",
    "remove_unfinished",
    "read_table",
    "schemas",
    "TABLES",
]

TABLES = ("positions", "texts", "failures")


def schemas():
    """The Arrow schema of each table."""
    import pyarrow as pa

    f64, i64, i32, s = pa.float64(), pa.int64(), pa.int32(), pa.string()
    return {
        "positions": pa.schema(
            [("id", s), ("label", s), ("position", i32), ("word", i32), ("token", s), ("token_ids", pa.list_(i64))]
            + [(c, f64) for c in ("value", "importance", "lin", "removal", "contribution", "value_se", "importance_se")]
        ),
        "texts": pa.schema(
            [("id", s), ("label", s), ("n_positions", i32), ("n_units", i32), ("truncated_positions", i32)]
            + [(c, f64) for c in ("base_value", "model_output", "surrogate_output", "full_text_gap", "heldout_r2")]
            + [("converged", pa.bool_()), ("model_evaluations", i64), ("tokens_evaluated", i64)]
            + [("seconds", f64), ("model_seconds", f64), ("fit_seconds", f64)]
            + [("method", s), ("n_samples", i64), ("seed", i64), ("output", s), ("options", s), ("version", s)]
        ),
        "failures": pa.schema([("id", s), ("error", s), ("message", s)]),
    }


def chunk_key(ids: list[str]) -> str:
    """A chunk's file key: the same ids in the same order give the same key."""
    return hashlib.blake2b("\n".join(ids).encode(), digest_size=10).hexdigest()


def _atomic_write(path: Path, write) -> None:
    tmp = path.with_name(path.name + ".tmp")
    write(tmp)
    os.replace(tmp, path)  # a reader (or a resumed run) never sees half a file


def write_chunk(out: Path, ids: list[str], tables: ChunkTables) -> str:
    """Write one chunk's three tables, then its ``done`` marker. Returns the chunk's key."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    key = chunk_key(ids)
    schema = schemas()
    for name, columns in (("positions", tables.positions), ("texts", tables.texts), ("failures", tables.failures)):
        (out / name).mkdir(parents=True, exist_ok=True)
        table = pa.table({c: columns[c] for c in schema[name].names}, schema=schema[name])
        _atomic_write(out / name / f"part-{key}.parquet", lambda p, t=table: pq.write_table(t, p))
    (out / "done").mkdir(parents=True, exist_ok=True)
    marker = {"ids": ids, "n_failures": len(tables.failures["id"]), "warnings": sorted(set(tables.warnings))}
    _atomic_write(out / "done" / f"{key}.json", lambda p: p.write_text(json.dumps(marker)))
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
    return write_chunk(out, ids, tables)


def done_ids(out: Path) -> set[str]:
    """Ids of every finished chunk."""
    return {i for m in markers(out).values() for i in m["ids"]}


def remove_unfinished(out: Path) -> int:
    """Delete parts (and temp files) of chunks that have no ``done`` marker; returns how many."""
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
    tables = [pq.read_table(p, schema=schema) for p in parts if p.exists()]
    table = pa.concat_tables(tables) if tables else schema.empty_table()
    df = table.to_pandas()
    order = [c for c in ("id", "label", "position") if c in df.columns]
    # A stable sort: rows of one text stay in position order.
    return df.sort_values(order, kind="stable", key=_natural_key).reset_index(drop=True)


def _natural_key(col):
    # Row-number ids ("0", "1", ..., "10") sort as numbers; other ids as strings.
    if col.name == "id" and len(col) and col.str.fullmatch(r"\d+").all():
        return col.astype(np.int64)
    return col
