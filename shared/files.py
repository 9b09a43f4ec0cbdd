"""The files the engine writes in place: the one room that renames a file over another.

- **Atomic files**: written beside their place and renamed over it (:func:`replace_with`,
  :func:`write_atomically`, :func:`write_json`), so that a reader, or a run resumed after a
  kill, sees the old file or the new one, never half of one.
- **A corpus run's manifest** (``RUN/manifest.json``: input, options, model and version):
  :func:`read_manifest`, :func:`write_manifest`, :func:`set_manifest_key`, :func:`has_manifest`.
- **Folders a command writes whole** (a report's site, an exported dataset) and may write
  again: :func:`writing_folder` builds one beside its place and swaps it in. Such a folder
  holds a marker file that lists every file the command wrote. A later command replaces the
  folder only when every file in it is one of those: a file the user added (a ``.git``
  folder, a ``.gitattributes``, notes) is never deleted, the command refuses and names it. A
  marker that is not such a list (one line of text, as an older slalom-xai wrote it, or a
  file edited by hand) vouches for nothing: the command refuses, names the folder and says
  how to proceed, and changes nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

__all__ = [
    "replace_with",
    "write_atomically",
    "write_json",
    "read_json",
    "default_mode",
    "MANIFEST",
    "has_manifest",
    "read_manifest",
    "write_manifest",
    "set_manifest_key",
    "write_marker",
    "foreign_files",
    "check_owned",
    "replace_folder",
    "writing_folder",
]

T = TypeVar("T")
#: A corpus run's manifest, in its folder.
MANIFEST = "manifest.json"


def default_mode(full: int = 0o666) -> int:
    """The permissions a new file (``0o666``) or folder (``0o777``) gets under the process's umask.

    Example:
        >>> default_mode() & 0o600
        384
    """
    mask = os.umask(0)  # the umask is read by setting it: put it back at once
    os.umask(mask)
    return full & ~mask


def replace_with(path: Path, write: Callable[[Path], T], *, shared: bool = True, mode: int | None = None) -> T:
    """Have ``write(tmp)`` write a temp file beside ``path``, then rename it over ``path``.

    Args:
        path: the file to write.
        write: writes the file it is given (a Parquet writer, ``save_file``, ...); its result is returned.
        shared: writers of other processes may write ``path`` at once (a saved explanation, a
            cache file): the temp file's name is one of its own, hidden. False: the caller holds
            the folder (a corpus run's lock), and the temp file is ``NAME.tmp``, which a
            resumed run clears.
        mode: the new file's permissions (default: as ``write`` created it).

    Example:
        >>> import tempfile
        >>> target = Path(tempfile.mkdtemp()) / "a.txt"
        >>> replace_with(target, lambda tmp: tmp.write_text("hello"))
        5
    """
    path = Path(path)
    if shared:
        tmp = path.with_name(f".{path.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")
    else:
        tmp = path.with_name(path.name + ".tmp")
    try:
        result = write(tmp)
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)  # a reader never sees half a file
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return result


def write_atomically(path: Path, data: bytes, *, private: bool = False) -> None:
    """Write ``data`` beside ``path``, flushed to disk, and rename it over: ``path`` is either
    the old file or the new one, with the old one's permissions (a new one the umask's
    default), or readable by its owner alone when ``private`` (a cache of paid answers).

    Example:
        >>> import tempfile
        >>> target = Path(tempfile.mkdtemp()) / "a.bin"
        >>> write_atomically(target, b"hello"); target.read_bytes()
        b'hello'
    """

    def write(tmp: Path) -> None:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())  # on disk before the rename: a crash leaves the old file whole

    path = Path(path)
    try:
        mode = 0o600 if private else path.stat().st_mode & 0o777
    except FileNotFoundError:
        mode = default_mode()
    replace_with(path, write, mode=mode)


def write_json(path: Path, value: object, *, indent: int | None = 1, shared: bool = True) -> None:
    """``value`` as JSON (keys sorted), atomically, its folder created if missing.

    Example:
        >>> import tempfile
        >>> target = Path(tempfile.mkdtemp()) / "state.json"
        >>> write_json(target, {"b": 1, "a": 2}); read_json(target)
        {'a': 2, 'b': 1}
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(value, indent=indent, sort_keys=True, default=str)
    replace_with(path, lambda tmp: tmp.write_text(text, encoding="utf-8"), shared=shared)


def read_json(path: Path) -> dict | None:
    """The JSON object at ``path``, None when there is no file, or an error naming a file cut short.

    Example:
        >>> read_json(Path("no-such-file.json")) is None
        True
    """
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise ValueError(
            f"{str(path)!r} is not valid JSON (cut short?): restore it, or start in a new folder"
        ) from None


def has_manifest(folder: Path) -> bool:
    """Whether ``folder`` holds a manifest (a corpus run was started in it).

    Example:
        >>> has_manifest(Path("no-such-run"))
        False
    """
    return (Path(folder) / MANIFEST).exists()


def read_manifest(folder: Path) -> dict:
    """The manifest of the corpus run in ``folder``, or an error naming it: missing, not
    JSON (a run killed while it was written by hand, a copy cut short; json's own message
    names no file), or not a run's.

    Raises:
        FileNotFoundError: ``folder`` holds no manifest.
        ValueError: the manifest is cut short or not a corpus run's.

    Example:
        >>> read_manifest(Path("runs/imdb"))["options"]["method"]  # doctest: +SKIP
        'hybrid'
    """
    path = Path(folder) / MANIFEST
    if not path.exists():
        raise FileNotFoundError(f"{str(folder)!r} holds no corpus run (no {MANIFEST})")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        where = f" at line {err.lineno}" if isinstance(err, json.JSONDecodeError) else ""
        why = err.msg if isinstance(err, json.JSONDecodeError) else "not UTF-8"
        raise ValueError(
            f"{str(path)!r} is not a valid manifest ({why}{where}; truncated?): restore it, or start the run "
            "again in another output path"
        ) from None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("options"), dict):
        raise ValueError(f"{str(path)!r} is not a corpus run's manifest (no options): restore it, or use another path")
    return manifest


def write_manifest(folder: Path, manifest: dict) -> None:
    """Write the manifest of the run in ``folder`` (whose lock the caller holds), atomically.

    Example:
        >>> write_manifest(Path("runs/imdb"), {"input": {}, "options": {}})  # doctest: +SKIP
    """
    write_json(Path(folder) / MANIFEST, manifest, indent=2, shared=False)


def set_manifest_key(folder: Path, key: str, value: object) -> None:
    """Add ``key`` to the manifest of the run in ``folder`` (a resume compares only the model,
    head, input and options, so a pipeline's record may be written after the run).

    Example:
        >>> set_manifest_key(Path("runs/imdb"), "auto", {"flags": {}})  # doctest: +SKIP
    """
    manifest = read_manifest(folder)
    manifest[key] = value
    write_manifest(folder, manifest)


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


def foreign_files(out: Path, marker: str, command: str = "slalom-xai") -> list[str]:
    """The files in ``out`` that the marker does not list (all of them when there is no marker).

    Args:
        out: a folder.
        marker: the marker's file name.
        command: what writes such folders (named in the error).

    Raises:
        FileExistsError: the marker is not a list of files (an older slalom-xai's one line of
            text, a file edited by hand): it cannot tell the command's files from the user's.

    Example:
        >>> foreign_files(Path("site"), ".slalom-report")  # doctest: +SKIP
        ['.git/HEAD', 'notes.md']
    """
    if not out.is_dir():
        return []
    files = [f for f in _files(out) if f != marker]
    if not (out / marker).is_file():
        return files
    listed = _listed(out / marker)
    if listed is None:
        # An older release's marker (one line of text) names no file: taking the names this
        # release writes on its word deleted the user's files under them (data/).
        raise FileExistsError(
            f"{out} holds a marker {marker!r} that does not list the files in it (written by an older slalom-xai, "
            f"or edited): {command} cannot tell its own files from yours, so nothing was changed. Move what you "
            f"want to keep out of {out} and delete the folder, or give a new folder (--out)"
        )
    return [f for f in files if f not in listed]


def _listed(path: Path) -> set[str] | None:
    """The files a marker lists, or None when it is not a marker's list of files."""
    try:
        listed = json.loads(path.read_text(encoding="utf-8"))["files"]
    except (OSError, ValueError, KeyError, TypeError, UnicodeDecodeError):
        return None
    if not isinstance(listed, list) or not all(isinstance(f, str) for f in listed):
        return None
    return set(listed)


def check_owned(out: Path, marker: str, command: str) -> None:
    """Refuse an ``out`` that holds files ``command`` did not write, naming them.

    Raises:
        FileExistsError: ``out`` is a file, holds files the marker does not list, or its
            marker lists no files (see :func:`foreign_files`).

    Example:
        >>> check_owned(Path("site"), ".slalom-report", "slalom-xai report")  # doctest: +SKIP
    """
    if out.exists() and not out.is_dir():
        raise FileExistsError(f"{out} is a file: give a new folder (--out)")
    other = foreign_files(out, marker, command)
    if other:
        shown = ", ".join(repr(f) for f in other[:6]) + (f" and {len(other) - 6} more" if len(other) > 6 else "")
        raise FileExistsError(
            f"{out} holds files that {command} did not write ({shown}); nothing was changed. Give a new or "
            "empty folder (--out), or move those files out first: they would be deleted with the folder's "
            "earlier contents"
        )


def replace_folder(new: Path, out: Path, marker: str, command: str) -> None:
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
    check_owned(out, marker, command)
    old = out.with_name(f".{out.name}.old-{uuid.uuid4().hex[:8]}")
    out.rename(old)
    new.rename(out)
    shutil.rmtree(old, ignore_errors=True)


@contextlib.contextmanager
def writing_folder(out: Path, marker: str, note: str, command: str) -> Iterator[Path]:
    """A new folder beside ``out`` for the block to fill; when the block ends without an
    error, its marker is written (``note``) and it replaces ``out`` (:func:`replace_folder`);
    otherwise it is removed and ``out`` is left as it was.

    Example:
        >>> with writing_folder(Path("site"), ".slalom-report", "written by slalom-xai report", "slalom-xai report") as new:  # doctest: +SKIP
        ...     (new / "index.html").write_text("<html>")
    """
    out.parent.mkdir(parents=True, exist_ok=True)
    new = Path(tempfile.mkdtemp(prefix=f".{out.name}.writing-", dir=out.parent))
    try:
        os.chmod(new, default_mode(0o777))  # mkdtemp's 0700 would hide a shared folder
        yield new
        write_marker(new, marker, note)
        replace_folder(new, out, marker, command)
    finally:
        if new.exists():
            shutil.rmtree(new, ignore_errors=True)
