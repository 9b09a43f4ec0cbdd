"""A finished corpus run written out in another format, chunk by chunk, over :class:`CorpusRun`.

A run's own tables are Parquet parts (:mod:`.store`: atomic, resumable, what both engines
write and :class:`CorpusRun` reads). Another format is an export of those tables: one writer
per format in :data:`EXPORTERS`, ``writer(frame, path)``, called once per table and chunk,
so that memory holds one chunk. Adding a format is adding one entry.

:func:`export_dataset` writes a run as a dataset to share (``datasets.load_dataset`` reads
it, the Hugging Face Hub shows its card): one row per (text, explained class) with its
tokens and every score as lists, in Parquet shards, and a dataset card (:mod:`.card`).

Example:
    >>> export_run("runs/imdb", "runs/imdb-csv", "csv")  # doctest: +SKIP
    [PosixPath('runs/imdb-csv/texts/part-....csv'), ...]
    >>> export_dataset("runs/imdb", "datasets/imdb-slalom")  # doctest: +SKIP
    PosixPath('datasets/imdb-slalom')
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..files import check_owned, writing_folder
from ..scores import STORED_SCORES
from .card import dataset_card
from .restore import class_names_of, explanation_from_tables, fit_status, json_cell, predicted_class
from .store import TABLES
from .stored import CorpusRun

__all__ = ["EXPORTERS", "export_run", "export_dataset", "dataset_schema", "DATASET_MARKER", "QUALITY_COLUMNS"]


def _csv(frame: Any, path: Path) -> None:
    frame.to_csv(path, index=False)


def _jsonl(frame: Any, path: Path) -> None:
    # Arrays (token ids, per-class scores) become JSON lists; NaN becomes null.
    frame.to_json(path, orient="records", lines=True, force_ascii=False)


#: Format name -> (file suffix, ``writer(frame, path)``).
EXPORTERS: dict[str, tuple[str, Callable[[Any, Path], None]]] = {
    "csv": (".csv", _csv),
    "jsonl": (".jsonl", _jsonl),
}


def export_run(
    run: CorpusRun | str | Path, out: str | Path, format: str = "csv", tables: Sequence[str] = TABLES
) -> list[Path]:
    """Write a run's tables to ``out/<table>/part-<chunk><suffix>``, one file per finished chunk.

    Args:
        run: a :class:`CorpusRun` or its folder.
        out: a new folder (an existing one is refused: nothing is overwritten).
        format: a key of :data:`EXPORTERS`. Default: "csv".
        tables: which of "texts", "positions", "failures". Default: all three.

    Returns:
        The files written.

    Example:
        >>> export_run(CorpusRun("runs/imdb"), "runs/imdb-jsonl", "jsonl", tables=["texts"])  # doctest: +SKIP
    """
    if format not in EXPORTERS:
        raise ValueError(f"unknown export format {format!r}; choose one of {sorted(EXPORTERS)}")
    unknown = sorted(set(tables) - set(TABLES))
    if unknown:
        raise ValueError(f"unknown tables {unknown}; choose among {list(TABLES)}")
    run = run if isinstance(run, CorpusRun) else CorpusRun(run)
    out = Path(out)
    if out.exists():
        raise FileExistsError(f"{str(out)!r} exists: export into a new folder")
    suffix, write = EXPORTERS[format]
    written = []
    for table in tables:
        (out / table).mkdir(parents=True)
        for key, frame in run.parts(table):
            path = out / table / f"part-{key}{suffix}"
            write(frame, path)
            written.append(path)
    return written


#: The file that marks a folder as a dataset :func:`export_dataset` wrote and lists its files:
#: only a folder holding nothing else (or an empty or new one) is ever replaced.
DATASET_MARKER = ".slalom-export"
#: Columns of an amortized pipeline's quality table (``quality.parquet``), joined by id.
QUALITY_COLUMNS = {
    "in_label_set": "bool",
    "audited": "bool",
    "audit_value_spearman": "float64",
    "audit_importance_spearman": "float64",
    "ood": "bool",
    "poor_audit": "bool",
    "flagged": "bool",
    "flag_reason": "string",
}
#: Per-text columns of the texts table a dataset row keeps, with their Arrow types.
_TEXT_FIELDS = {
    "text": "string",
    "gold_label": "string",
    "model_output": "float64",
    "base_value": "float64",
    "surrogate_output": "float64",
    "method": "string",
    "n_samples": "int64",
    "full_text_gap": "float64",
    "heldout_r2": "float64",
    "n_positions": "int32",
    "truncated_positions": "int32",
}


def dataset_schema(flags: str | None = None, scores: Sequence[str] | None = None):
    """The Arrow schema of an exported dataset: fixed for one export, so that every shard
    has it (a shard without flagged texts or standard errors too).

    Args:
        flags: "quality" (an amortized pipeline's quality table, joined by id), "ood" (an
            amortized run's out-of-distribution check, from the texts table) or None.
        scores: the per-position score columns. Default: :data:`slalom_core.STORED_SCORES`.

    Example:
        >>> dataset_schema().field("contribution").type
        ListType(list<item: double>)
    """
    import pyarrow as pa

    kinds = {"string": pa.string(), "float64": pa.float64(), "int64": pa.int64(), "int32": pa.int32()}
    kinds["bool"] = pa.bool_()
    scores = list(STORED_SCORES if scores is None else scores)
    fields = [("id", pa.string()), ("explained_class", pa.string()), ("predicted", pa.string())]
    fields += [("status", pa.string())]
    fields += [(name, kinds[kind]) for name, kind in _TEXT_FIELDS.items()]
    fields += [("tokens", pa.list_(pa.string())), ("token_ids", pa.list_(pa.list_(pa.int64())))]
    fields += [(name, pa.list_(pa.float64())) for name in (*scores, "value_se", "importance_se")]
    fields += [("importance_determined", pa.list_(pa.bool_()))]
    if flags == "quality":
        fields += [(name, kinds[kind]) for name, kind in QUALITY_COLUMNS.items()]
    elif flags == "ood":
        fields += [("ood", pa.bool_()), ("ood_reason", pa.string())]
    elif flags is not None:
        raise ValueError(f"flags must be 'quality', 'ood' or None, got {flags!r}")
    return pa.schema(fields)


def _flags_of(run: CorpusRun):
    """("quality", {id: row}) for a pipeline's run, ("ood", None) for another amortized run,
    (None, None) for a per-text run."""
    quality = run.quality()
    if quality is not None:
        missing = sorted(set(QUALITY_COLUMNS) - set(quality.columns) | ({"id"} - set(quality.columns)))
        if missing:
            raise ValueError(f"{run.path / 'quality.parquet'} lacks the columns {missing}: it is not a quality table")
        quality = quality.astype({"id": str}).drop_duplicates("id").set_index("id")
        return "quality", quality[list(QUALITY_COLUMNS)].to_dict("index")
    amortized = run.manifest.get("amortized") or run.manifest["options"].get("method") == "amortized"
    return ("ood" if amortized else None), None


def _scalar(x: object, kind: str) -> object:
    """A table cell as the dataset's type; None where it is null (None or NaN)."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return None if kind != "float64" else math.nan
    if kind in ("int64", "int32"):
        return int(x)
    return {"float64": float, "bool": bool, "string": str}[kind](x)


def _optional(column) -> list[float] | None:
    """A per-position column that may be absent (standard errors): None when every entry is."""
    x = column.to_numpy(dtype=np.float64, na_value=np.nan)
    return None if np.isnan(x).all() else x.tolist()


def _text_rows(
    text_id: str, rows, records: list[dict], positions, run: CorpusRun, flags: str | None, quality, scores
) -> list[dict]:
    """The dataset rows of one text: one per explained class (``records``: its texts rows as dicts)."""
    predicted, _ = predicted_class(rows, run)
    names = [row["explained_class"] for row in records]
    status = fit_status(rows)
    classes = _class_names(rows, run)
    out = []
    for row, name in zip(records, names):
        pos = positions[positions["explained_class"] == name].sort_values("position", kind="stable")
        exp = explanation_from_tables(positions, rows, explained_class=None if len(names) == 1 else name)
        # A binary fit's class is stored as its index ("1"): named as `predicted` is.
        shown = classes[int(name)] if classes and str(name).isdigit() and int(name) < len(classes) else str(name)
        item = {"id": text_id, "explained_class": shown, "predicted": predicted, "status": status}
        item |= {c: _scalar(row[c], kind) for c, kind in _TEXT_FIELDS.items()}
        item["tokens"] = pos["token"].astype(str).tolist()
        item["token_ids"] = [ids.tolist() if hasattr(ids, "tolist") else list(ids) for ids in pos["token_ids"]]
        item |= {c: pos[c].to_numpy(dtype=np.float64).tolist() for c in scores}
        item |= {c: _optional(pos[c]) for c in ("value_se", "importance_se")}
        item["importance_determined"] = np.asarray(exp.importance_determined, dtype=bool).tolist()
        if flags == "quality":
            found = quality.get(text_id, {})
            item |= {c: _scalar(found.get(c), kind) for c, kind in QUALITY_COLUMNS.items()}
        elif flags == "ood":
            why = json_cell(row["ood"], {}).get("warning")
            checked = _scalar(row["ood"], "string") is not None  # null (NaN in pandas): never checked
            item |= {"ood": why is not None if checked else None, "ood_reason": why or ""}
        if item.get("flagged") or item.get("ood"):
            item["status"] = "flagged"  # the amortized run's own flag: its scores are not to be trusted
        out.append(item)
    return out


class _Shards:
    """Parquet shards of at most ``rows`` rows, written as chunks come: one chunk in memory."""

    def __init__(self, folder: Path, schema, rows: int) -> None:
        self.folder, self.schema, self.rows = folder, schema, rows
        self.paths: list[Path] = []
        self.writer, self.filled, self.total = None, 0, 0

    def write(self, table) -> None:
        import pyarrow.parquet as pq

        start = 0
        while start < len(table):
            if self.writer is None:
                self.paths.append(self.folder / f"shard-{len(self.paths):05d}.partial")
                self.writer, self.filled = pq.ParquetWriter(self.paths[-1], self.schema), 0
            take = min(self.rows - self.filled, len(table) - start)
            self.writer.write_table(table.slice(start, take))
            start, self.filled, self.total = start + take, self.filled + take, self.total + take
            if self.filled == self.rows:
                self.close()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None

    def finish(self) -> int:
        """Close the last shard and give each its name ``train-0000i-of-0000n.parquet``."""
        self.close()
        n = len(self.paths)
        for i, path in enumerate(self.paths):
            path.rename(self.folder / f"train-{i:05d}-of-{n:05d}.parquet")
        return n


def export_dataset(
    run: CorpusRun | str | Path, out: str | Path, *, shard_rows: int = 10_000, overwrite: bool = False
) -> Path:
    """Write a run as a dataset to share: ``out/data/train-*.parquet`` and a card, ``out/README.md``.

    One row per (text, explained class): id, explained class, text, gold label, predicted
    class, the model's output, the reference point (``base_value``), method and budget,
    the tokens and their token ids, every stored score and its standard error per position
    (lists), which importances the data determine, the fit's gap and held-out R², and, for
    an amortized run, its out-of-distribution check (or the pipeline's quality columns,
    joined by id). ``datasets.load_dataset("parquet", data_dir=out)`` reads it, and so does
    the Hub once the folder is pushed. The run is read one chunk at a time (memory holds one
    chunk's positions, and the pipeline's one-row-per-text quality table); the dataset is
    written into a new folder beside ``out`` and renamed into place when whole, so a failed
    export leaves nothing, or the earlier export as it was.

    Args:
        run: a :class:`CorpusRun` or its folder.
        out: the dataset's folder: new, empty, or (with ``overwrite``) one this function wrote.
        shard_rows: rows per Parquet shard. Default: 10,000.
        overwrite: replace an earlier export at ``out``: a folder that holds only the
            files its :data:`DATASET_MARKER` lists (a folder holding any other file, a
            ``.git`` or notes, is refused, naming them, never emptied). Default: False.

    Returns:
        ``out``.

    Raises:
        FileExistsError: ``out`` exists and is not empty (and is not an export, or
            ``overwrite`` is False), or holds the run.
        FileNotFoundError: a finished chunk's positions part is missing (named).
        ValueError: the run holds no explained text (a dataset of no row is refused).

    Example:
        >>> export_dataset(CorpusRun("runs/imdb"), "datasets/imdb-slalom")  # doctest: +SKIP
        PosixPath('datasets/imdb-slalom')
    """
    import pyarrow as pa

    if not isinstance(shard_rows, int) or isinstance(shard_rows, bool) or shard_rows < 1:
        raise ValueError(f"shard_rows must be a positive int, got {shard_rows!r}")
    run = run if isinstance(run, CorpusRun) else CorpusRun(run)
    out = Path(out)
    _check_dataset_out(out, run, overwrite)
    flags, quality = _flags_of(run)
    scores = list(STORED_SCORES)
    schema = dataset_schema(flags, scores)
    note = "written by slalom-xai export; replaced by export --overwrite if it holds nothing else"
    with writing_folder(out, DATASET_MARKER, note, "slalom-xai export") as new:
        (new / "data").mkdir()
        shards = _Shards(new / "data", schema, shard_rows)
        seen = {"texts": 0, "class_names": None, "output": None}
        for key, texts in run.parts("texts"):
            if not len(texts):
                continue
            positions = run.part("positions", key)
            rows = []
            # One pass over the chunk's positions, not one scan of them per text.
            by_id = dict(tuple(positions.groupby("id", sort=False)))
            # The chunk's texts as plain values, column by column (pandas reads a row slowly).
            texts = texts.reset_index(drop=True)
            needed = ["explained_class", "ood", *_TEXT_FIELDS]
            columns = {c: texts[c].astype(object).tolist() for c in needed}
            for text_id, group in texts.groupby("id", sort=False):
                records = [{c: columns[c][i] for c in needed} for i in group.index]
                mine = by_id.get(text_id, positions.iloc[:0])
                rows += _text_rows(str(text_id), group, records, mine, run, flags, quality, scores)
                seen["texts"] += 1
                if seen["texts"] == 1:
                    seen["class_names"], seen["output"] = (
                        _class_names(group, run),
                        _scalar(group["output"].iloc[0], "string"),
                    )
            shards.write(pa.Table.from_pylist(rows, schema=schema))
        n_failed = sum(len(failed) for _, failed in run.parts("failures"))
        if not seen["texts"]:  # datasets reads no split from shards without a row
            raise ValueError(
                f"{str(run.path)!r} holds no explained text ({n_failed} failed: see CorpusRun.failures()): a dataset "
                "of no row cannot be loaded, so none is written; nothing was changed"
            )
        n_shards = shards.finish()
        card = dataset_card(
            run,
            schema,
            n_rows=shards.total,
            n_texts=seen["texts"],
            n_failed=n_failed,
            n_shards=n_shards,
            class_names=seen["class_names"],
            output=seen["output"],
        )
        (new / "README.md").write_text(card, encoding="utf-8")
    return out


def _class_names(rows, run: CorpusRun) -> list[str] | None:
    names = class_names_of(rows, run)
    return None if names is None else [str(n) for n in names]


def _check_dataset_out(out: Path, run: CorpusRun, overwrite: bool) -> None:
    """Refuse an ``out`` that is not ours to replace: a file, a folder of other files, an
    earlier export without ``overwrite``, or a folder that holds the run."""
    if out.exists() and not out.is_dir():
        raise FileExistsError(f"{out} is a file: give a new folder for the dataset (--out)")
    here, data = out.resolve(), run.path.resolve()
    if here == data or here in data.parents:
        raise FileExistsError(f"{out} holds the run {run.path}: give another folder for the dataset (--out)")
    if not out.is_dir() or not any(out.iterdir()):
        return
    check_owned(out, DATASET_MARKER, "slalom-xai export")
    if not overwrite:
        raise FileExistsError(f"{out} holds an earlier export: pass overwrite=True (--overwrite) to replace it")
