"""Folders a command writes whole (a report's site, an exported dataset) and may write again.

Such a folder holds a marker file that lists every file the command wrote. A later command
replaces the folder only when every file in it is one of those: a file the user added (a
``.git`` folder, a ``.gitattributes``, notes) is never deleted, the command refuses and
names it. A marker written by an older slalom-xai, which listed nothing, vouches for the
top-level names the command writes now (``known``), and for nothing else.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Collection
from pathlib import Path

__all__ = ["write_marker", "foreign_files", "check_owned", "replace_folder"]


def _files(folder: Path) -> list[str]:
    """Every file (and link, and empty folder) under ``folder``, as posix paths relative to it."""
    found = []
    for root, dirs, files in os.walk(folder, followlinks=False):
        rel = Path(root).relative_to(folder)
        found += [(rel / f).as_posix() for f in files]
        found += [(rel / d).as_posix() + "/" for d in dirs if (Path(root) / d).is_symlink()]
        if not dirs and not files and rel != Path("."):
            found.append(rel.as_posix() + "/")
    return sorted(found)


def write_marker(folder: Path, marker: str, note: str) -> None:
    """Write ``folder/marker`` listing every file now in ``folder`` (call it last).

    Example:
        >>> write_marker(Path("site.tmp"), ".slalom-report", "written by slalom-xai report")  # doctest: +SKIP
    """
    files = [f for f in _files(folder) if f != marker]
    (folder / marker).write_text(json.dumps({"note": note, "files": files}, indent=0) + "\n", encoding="utf-8")


def foreign_files(out: Path, marker: str, known: Collection[str] = ()) -> list[str]:
    """The files in ``out`` that the marker does not list (all of them when there is no marker).

    Args:
        out: a folder.
        marker: the marker's file name.
        known: top-level names an older marker (which lists no files) vouches for.

    Example:
        >>> foreign_files(Path("site"), ".slalom-report")  # doctest: +SKIP
        ['.git/HEAD', 'notes.md']
    """
    if not out.is_dir():
        return []
    files = [f for f in _files(out) if f != marker]
    if not (out / marker).is_file():
        return files
    try:
        listed = json.loads((out / marker).read_text(encoding="utf-8"))["files"]
        return [f for f in files if f not in set(listed)]
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):  # an older marker: one line of text
        return [f for f in files if f.split("/", 1)[0] not in set(known)]


def check_owned(out: Path, marker: str, command: str, known: Collection[str] = ()) -> None:
    """Refuse an ``out`` that holds files ``command`` did not write, naming them.

    Raises:
        FileExistsError: ``out`` is a file, or holds files the marker does not list.

    Example:
        >>> check_owned(Path("site"), ".slalom-report", "slalom-xai report")  # doctest: +SKIP
    """
    if out.exists() and not out.is_dir():
        raise FileExistsError(f"{out} is a file: give a new folder (--out)")
    other = foreign_files(out, marker, known)
    if other:
        shown = ", ".join(repr(f) for f in other[:6]) + (f" and {len(other) - 6} more" if len(other) > 6 else "")
        raise FileExistsError(
            f"{out} holds files that {command} did not write ({shown}); nothing was changed. Give a new or "
            "empty folder (--out), or move those files out first: they would be deleted with the folder's "
            "earlier contents"
        )


def replace_folder(new: Path, out: Path, marker: str, command: str, known: Collection[str] = ()) -> None:
    """Put the finished folder ``new`` (with its marker) at ``out``. An empty ``out`` is
    taken; an earlier one, which must hold only files its marker lists (checked again here,
    see :func:`check_owned`), goes as a whole (renamed aside, then removed), so that ``out``
    never holds half of each.

    Example:
        >>> replace_folder(Path("site.tmp"), Path("site"), ".slalom-report", "slalom-xai report")  # doctest: +SKIP
    """
    if out.exists() and out.is_dir() and not any(out.iterdir()):
        out.rmdir()
    if not out.exists():
        new.rename(out)
        return
    check_owned(out, marker, command, known)
    old = out.with_name(f".{out.name}.old-{uuid.uuid4().hex[:8]}")
    out.rename(old)
    new.rename(out)
    shutil.rmtree(old, ignore_errors=True)
