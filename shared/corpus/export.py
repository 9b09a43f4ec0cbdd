"""A finished corpus run written out in another format, chunk by chunk, over :class:`CorpusRun`.

A run's own tables are Parquet parts (:mod:`.store`: atomic, resumable, what both engines
write and :class:`CorpusRun` reads). Another format is an export of those tables: one writer
per format in :data:`EXPORTERS`, ``writer(frame, path)``, called once per table and chunk,
so that memory holds one chunk. Adding a format is adding one entry.

Example:
    >>> export_run("runs/imdb", "runs/imdb-csv", "csv")  # doctest: +SKIP
    [PosixPath('runs/imdb-csv/texts/part-....csv'), ...]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .store import TABLES
from .stored import CorpusRun

__all__ = ["EXPORTERS", "export_run"]


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
