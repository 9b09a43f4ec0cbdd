"""Where the project's reference data live (IMDB, Yelp-HAT; never shipped in the package).

The data folder is looked up, in order, in ``$SLALOM_DATA``, in ``../shared/data`` from the
working directory, and in ``shared/data`` beside the checkout that holds this file (an
editable install). A normal install has no checkout, so only the first two apply there.

Example:
    >>> from slalom_core.experiments.data import data_dir
    >>> folder = data_dir()  # None when no data folder is found
"""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

__all__ = ["DATA_ENV", "data_dir", "data_file", "read_jsonl"]

#: Environment variable that names the data folder explicitly.
DATA_ENV = "SLALOM_DATA"


def _candidates() -> list[Path]:
    out = []
    if os.environ.get(DATA_ENV):
        out.append(Path(os.environ[DATA_ENV]))
    out.append(Path.cwd().parent / "shared" / "data")
    # <checkout>/shared/experiments/data.py -> <checkout>/../shared/data
    out.append(Path(__file__).resolve().parents[3] / "shared" / "data")
    return out


def data_dir() -> Path | None:
    """The first existing data folder among the candidates, or None.

    Example:
        >>> data_dir() is None or data_dir().is_dir()
        True
    """
    for path in _candidates():
        if path.is_dir():
            return path
    return None


def data_file(name: str) -> Path:
    """A file in the data folder, e.g. ``data_file("imdb_test.jsonl")``.

    Raises:
        FileNotFoundError: no data folder, or no such file in it (the message says where
            it looked and how to point at the folder).
    """
    folder = data_dir()
    if folder is None or not (folder / name).is_file():
        looked = ", ".join(str(p) for p in _candidates())
        raise FileNotFoundError(f"{name} not found (looked in: {looked}); set ${DATA_ENV} to the data folder")
    return folder / name


def read_jsonl(path: str | os.PathLike) -> list[dict]:
    """Rows of a JSON-lines file, plain or gzipped (by the ``.gz`` suffix); blank lines skipped.

    Example:
        >>> rows = read_jsonl(data_file("imdb_test.jsonl"))  # doctest: +SKIP
        >>> sorted(rows[0])  # doctest: +SKIP
        ['id', 'label', 'rating', 'text']
    """
    p = Path(path)
    opener = gzip.open if p.suffix == ".gz" else open
    with opener(p, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]
