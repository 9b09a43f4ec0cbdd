"""Reading a corpus: JSONL / CSV / Parquet files, a folder of them, or a saved HF dataset.

Rows are read in chunks so that memory is bounded by the chunk, not the corpus. Every row
gets a string id: the id column's value as written in the file (a CSV ``007`` stays
``"007"``, a JSON ``1.0`` stays ``"1.0"``), or its row number (0-based, across the files of a
folder in name order) when the data have none. Text files are read as UTF-8, a leading
byte-order mark dropped (a byte that is not UTF-8 is an error naming its file and line). A
``.json`` file may hold JSON lines or one JSON array of objects (pretty-printed or not). A
first pass over the ids alone checks the columns and finds duplicate ids before any model
is called.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["CorpusSource", "Row", "SUFFIXES", "parse_json_line", "as_ids"]

#: File kinds a corpus may be made of (a ``.gz`` suffix may follow JSONL and CSV).
SUFFIXES = (".jsonl", ".json", ".csv", ".parquet")


@dataclass(frozen=True)
class Row:
    """One input row: its id, the raw text cell (not yet checked), its row number and the
    data's own (gold) label, when the data have a label column."""

    id: str
    text: object
    row: int
    gold: object = None


class _JsonNumber(str):
    """A JSON number's literal, kept while a line is parsed so that an id reads as written."""


def _numbers_back(value: object) -> object:
    # Every cell but the id gets its number back (a number as text must still fail as
    # "int, not str"): json.loads of the literal is exactly what the default parse gives.
    if isinstance(value, _JsonNumber):
        return json.loads(value)
    if isinstance(value, list):
        return [_numbers_back(v) for v in value]
    if isinstance(value, dict):
        return {k: _numbers_back(v) for k, v in value.items()}
    return value


def parse_json_line(line: str, id_column: str | None) -> dict:
    """One JSONL record; a number in ``id_column`` is kept as its literal string.

    Shared by the local reader and the Ray engine, so that both give an id the same string:
    ``{"id": 1}`` is id ``"1"`` and ``{"id": 1e3}`` is ``"1e3"`` (Arrow's JSON reader types a
    column of ``1`` and ``1.5`` as floats, and ``1`` would become ``"1.0"``).
    Raises ``json.JSONDecodeError`` for a line that is not JSON, ``TypeError`` for one that
    is not an object.
    """
    return _record(json.loads(line.lstrip("\ufeff"), parse_int=_JsonNumber, parse_float=_JsonNumber), id_column)


def _record(rec: object, id_column: str | None) -> dict:
    if not isinstance(rec, dict):
        raise TypeError("expected a JSON object per line")
    return {k: (str(v) if k == id_column and isinstance(v, _JsonNumber) else _numbers_back(v)) for k, v in rec.items()}


def _open_bytes(path: Path):
    return gzip.open(path, "rb") if path.name.lower().endswith(".gz") else open(path, "rb")


def is_json_array(path: Path) -> bool:
    """Whether a JSON file holds one array (``[{...}, {...}]``, pretty-printed or not)
    rather than JSON lines: its first character that is not whitespace is ``[``."""
    with _open_bytes(path) as f:
        head = f.read(4096).decode("utf-8", "ignore").lstrip("\ufeff \t\r\n")
        while not head:
            chunk = f.read(65536)
            if not chunk:
                return False
            head = chunk.decode("utf-8", "ignore").lstrip(" \t\r\n")
    return head.startswith("[")


def _not_utf8(path: Path, err: UnicodeDecodeError) -> ValueError:
    """The error for a file that is not UTF-8, naming its first bad line: the decoder reads
    in blocks, so its own position says neither the line nor the file."""
    with _open_bytes(path) as f:
        for lineno, line in enumerate(f, 1):
            try:
                line.decode("utf-8")
            except UnicodeDecodeError as bad:
                return ValueError(
                    f"{path.name}, line {lineno}: not UTF-8 (byte 0x{line[bad.start]:02x} at column {bad.start + 1}); "
                    "save the file as UTF-8 (e.g. iconv -f latin1 -t utf-8)"
                )
    return ValueError(f"{path.name}: not UTF-8 ({err.reason}); save the file as UTF-8")


def _kind(path: Path) -> str | None:
    name = path.name.lower()
    if name.endswith(".gz"):
        name = name[:-3]
    for suffix in SUFFIXES:
        if name.endswith(suffix):
            return "jsonl" if suffix == ".json" else suffix[1:]
    return None


def _is_saved_hf_dataset(path: Path) -> bool:
    return path.is_dir() and (path / "state.json").exists() and (path / "dataset_info.json").exists()


def as_ids(ids: object) -> frozenset[str]:
    """A subset's ids as a set, read once: a list, set, tuple, iterator or generator of str.

    An iterator is materialised before any check looks at it, so that a check cannot
    consume the ids it then hands on.

    Example:
        >>> sorted(as_ids(map(str, range(3))))
        ['0', '1', '2']
    """
    if isinstance(ids, (str, bytes)) or not isinstance(ids, Iterable):
        raise TypeError(f"ids must be a collection of str ids (as the texts table holds them), got {ids!r}")
    ids = tuple(ids)
    bad = next((i for i in ids if not isinstance(i, str)), None)
    if bad is not None:
        raise TypeError(
            f"ids must be a collection of str ids (as the texts table holds them); found {bad!r} "
            f"({type(bad).__name__}): pass e.g. map(str, ids)"
        )
    return frozenset(ids)


@dataclass
class CorpusSource:
    """A corpus on disk, read as a stream of :class:`Row` chunks.

    Args:
        data: a ``.jsonl`` or ``.json`` (JSON lines, or one JSON array of objects; optionally
            ``.gz``), ``.csv`` (optionally ``.gz``) or ``.parquet`` file; a folder of such
            files (read in name order); or a folder written by ``datasets.Dataset.save_to_disk``.
        text_column: the column holding the texts. Default: "text".
        id_column: the column holding the ids; "auto" (default) takes a column named
            "id" when there is one and row numbers otherwise; None always uses row numbers.
        limit: read only the first ``limit`` rows.
        label_column: the column holding the data's own (gold) labels, carried into the
            run's texts table as ``gold_label``; "auto" (default) takes a column named
            "label" when there is one; None reads none.
        ids: read only the rows with these ids (the others are skipped, not counted); None
            (default) reads every row. Row-number ids are the rows' numbers in the whole
            data, so a subset's texts keep the ids a full run gives them.

    Example:
        >>> src = CorpusSource("reviews.jsonl", text_column="text")  # doctest: +SKIP
        >>> src.scan().n_rows  # doctest: +SKIP
    """

    data: str | Path
    text_column: str = "text"
    id_column: str | None = "auto"
    limit: int | None = None
    label_column: str | None = "auto"
    ids: frozenset[str] | None = None
    n_rows: int = field(default=0, init=False)
    duplicate_counts: dict[str, int] = field(default_factory=dict, init=False)
    resolved_id_column: str | None = field(default=None, init=False)
    resolved_label_column: str | None = field(default=None, init=False)
    _scanned: bool = field(default=False, init=False, repr=False)

    def __post_init__(self) -> None:
        path = Path(self.data)
        if not path.exists():
            raise FileNotFoundError(f"no corpus at {str(path)!r}")
        if self.limit is not None and (
            isinstance(self.limit, bool) or not isinstance(self.limit, int) or self.limit < 1
        ):
            raise ValueError(f"limit must be a positive int, got {self.limit!r}")
        if not isinstance(self.text_column, str) or not self.text_column:
            raise ValueError("text_column must be a column name")
        if self.ids is not None:
            self.ids = as_ids(self.ids)
        if path.is_dir() and (path / "dataset_dict.json").exists():
            # DatasetDict.save_to_disk: one saved dataset per split, each in its own folder.
            splits = sorted(p.name for p in path.iterdir() if _is_saved_hf_dataset(p))
            raise ValueError(
                f"{str(path)!r} is a saved DatasetDict with splits {splits}: give one split's folder, "
                f"e.g. {str(path / ('train' if 'train' in splits or not splits else splits[0]))!r}"
            )
        if _is_saved_hf_dataset(path):
            self.files = [path]
            self.format = "hf"
        elif path.is_dir():
            self.files = sorted(p for p in path.iterdir() if p.is_file() and _kind(p))
            if not self.files:
                raise ValueError(f"{str(path)!r} holds no {', '.join(SUFFIXES)} files and is no saved HF dataset")
            kinds = {_kind(p) for p in self.files}
            if len(kinds) > 1:
                raise ValueError(f"{str(path)!r} mixes file kinds {sorted(kinds)}; keep one kind per folder")
            self.format = kinds.pop()
        else:
            kind = _kind(path)
            if kind is None:
                raise ValueError(f"unknown corpus file type {path.name!r}; use one of {', '.join(SUFFIXES)}")
            self.files = [path]
            self.format = kind

    # -- columns --------------------------------------------------------------------------
    def columns(self) -> list[str]:
        """The column names of the first file (every file must have the text column)."""
        first = next(self._records(self.files[0], columns=None), None)
        return [] if first is None else list(first)

    def _resolve_id_column(self) -> str | None:
        cols = self.columns()
        if self.text_column not in cols:
            raise ValueError(f"the corpus has no text column {self.text_column!r}; its columns are {cols}")
        if self.id_column == "auto":
            return "id" if "id" in cols else None
        if self.id_column is not None and self.id_column not in cols:
            raise ValueError(f"the corpus has no id column {self.id_column!r}; its columns are {cols}")
        return self.id_column

    def _resolve_label_column(self) -> str | None:
        cols = self.columns()
        if self.label_column == "auto":
            return "label" if "label" in cols and self.text_column != "label" else None
        if self.label_column is not None and self.label_column not in cols:
            raise ValueError(f"the corpus has no label column {self.label_column!r}; its columns are {cols}")
        return self.label_column

    def scan(self) -> CorpusSource:
        """Check the columns and count rows and ids (no texts kept). Returns ``self``."""
        self.resolved_id_column = self._resolve_id_column()
        self.resolved_label_column = self._resolve_label_column()
        counts: Counter[str] = Counter()
        n = 0
        for row in self._rows(texts=False):
            counts[row.id] += 1
            n += 1
        self.n_rows = n
        self.duplicate_counts = {k: c for k, c in counts.items() if c > 1}
        self._scanned = True
        return self

    @property
    def duplicate_ids(self) -> frozenset[str]:
        """Ids that occur more than once (every row of them fails)."""
        return frozenset(self.duplicate_counts)

    def row_ids(self) -> list[str]:
        """Every row's id, in file order (no texts read; duplicates included).

        Example:
            >>> CorpusSource("reviews.jsonl").scan().row_ids()[:2]  # doctest: +SKIP
            ['0', '1']
        """
        if not self._scanned:
            self.scan()
        return [row.id for row in self._rows(texts=False)]

    # -- streaming ------------------------------------------------------------------------
    def chunks(self, chunk_size: int) -> Iterator[list[Row]]:
        """Rows in chunks of ``chunk_size`` (the last may be shorter), in file order."""
        if not self._scanned:
            self.scan()
        chunk: list[Row] = []
        for row in self._rows(texts=True):
            chunk.append(row)
            if len(chunk) == chunk_size:
                yield chunk
                chunk = []
        if chunk:
            yield chunk

    def _rows(self, texts: bool) -> Iterator[Row]:
        id_col, label_col = self.resolved_id_column, self.resolved_label_column
        wanted = [self.text_column] + [c for c in (id_col, label_col) if c]
        n = 0
        for path in self.files:
            for rec in self._records(path, columns=wanted):
                if self.limit is not None and n >= self.limit:
                    return
                if self.text_column not in rec:
                    raise ValueError(f"row {n} ({path.name}) has no {self.text_column!r} field")
                if id_col is None:
                    rid = str(n)
                else:
                    raw_id = rec.get(id_col)
                    if raw_id is None or (isinstance(raw_id, float) and raw_id != raw_id):
                        raise ValueError(f"row {n} ({path.name}) has no id in column {id_col!r}")
                    rid = str(raw_id)
                gold = rec.get(label_col) if texts and label_col else None
                if self.ids is None or rid in self.ids:
                    yield Row(rid, rec[self.text_column] if texts else None, n, gold)
                n += 1

    def _records(self, path: Path, columns: list[str] | None) -> Iterator[dict]:
        # Each reader streams: memory holds one line, one CSV record or one Parquet batch
        # (a JSON array, which has no lines to stream, is read whole).
        try:
            if self.format == "jsonl" and is_json_array(path):
                yield from self._json_array(path)
            elif self.format == "jsonl":
                opener = gzip.open if path.name.lower().endswith(".gz") else open
                # utf-8-sig: an editor's byte-order mark must not stick to the first key.
                with opener(path, "rt", encoding="utf-8-sig") as f:
                    for lineno, line in enumerate(f, 1):
                        if not line.strip():
                            continue
                        try:
                            rec = parse_json_line(line, self.resolved_id_column)
                        except json.JSONDecodeError as err:
                            raise ValueError(f"{path.name}, line {lineno}: not valid JSON ({err.msg})") from None
                        except TypeError:
                            raise ValueError(f"{path.name}, line {lineno}: expected a JSON object per line") from None
                        yield rec
            elif self.format == "csv":
                # utf-8-sig: a CSV saved by Excel starts with a byte-order mark, which would
                # otherwise turn the header "id" into "\ufeffid" and lose the id column.
                with _open_bytes(path) as raw, io.TextIOWrapper(raw, encoding="utf-8-sig", newline="") as f:
                    yield from csv.DictReader(f)
            else:
                yield from self._binary_records(path, columns)
        except UnicodeDecodeError as err:
            raise _not_utf8(path, err) from None

    def _json_array(self, path: Path) -> Iterator[dict]:
        """The objects of a file holding one JSON array (read whole: an array cannot be
        streamed by line as JSON lines are)."""
        with _open_bytes(path) as f:
            raw = f.read().decode("utf-8-sig")
        try:
            items = json.loads(raw, parse_int=_JsonNumber, parse_float=_JsonNumber)
        except json.JSONDecodeError as err:
            raise ValueError(
                f"{path.name}, line {err.lineno}: starts with '[' but is not one JSON array ({err.msg}); give "
                "JSON lines (one object per line) or a single JSON array of objects"
            ) from None
        if not isinstance(items, list):
            raise ValueError(f"{path.name}: starts with '[' but is not one JSON array")
        for i, item in enumerate(items):
            try:
                yield _record(item, self.resolved_id_column)
            except TypeError:
                raise ValueError(f"{path.name}: element {i} of its JSON array is not an object") from None

    def _binary_records(self, path: Path, columns: list[str] | None) -> Iterator[dict]:
        """Parquet batches or a saved Hugging Face dataset (no text decoding of ours)."""
        if self.format == "parquet":
            import pyarrow.parquet as pq

            pf = pq.ParquetFile(path)
            names = pf.schema_arrow.names
            cols = None if columns is None else [c for c in columns if c in names]
            for batch in pf.iter_batches(batch_size=1024, columns=cols):
                yield from batch.to_pylist()
        else:  # a saved Hugging Face dataset
            from datasets import load_from_disk

            ds = load_from_disk(str(path))
            if not hasattr(ds, "iter"):
                raise ValueError(f"{str(path)!r} is a DatasetDict with splits {list(ds)}; point at one split's folder")
            cols = None if columns is None else [c for c in columns if c in ds.column_names]
            if cols is not None:
                ds = ds.select_columns(cols)
            for batch in ds.iter(batch_size=1024):
                keys = list(batch)
                for i in range(len(batch[keys[0]]) if keys else 0):
                    yield {k: batch[k][i] for k in keys}
