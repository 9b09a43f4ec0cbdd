"""The answer cache of an :class:`~slalom_core.models.APIClassifier`: one JSON file per
classifier, merged under a lock and replaced atomically, refused when another classifier wrote it."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

from ..files import write_atomically

__all__ = ["CACHE_FORMAT", "read_cache", "write_cache"]

CACHE_FORMAT = "slalom-xai api cache"


def read_cache(path: Path, key: object, identity: dict, class_names: list[str] | None) -> dict[str, list[float]]:
    """The cache file's answers, after checking they are this classifier's.

    Args:
        path: the cache file.
        key: the classifier's ``cache_key`` (the file must have been written with it).
        identity: the classifier's ``cache_identity()`` (model, prompt, labels...).
        class_names: the classifier's class names, if known (the answers' width must match).

    Example:
        >>> read_cache(Path("answers.json"), "my-model", {}, None)  # doctest: +SKIP
    """
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise ValueError(f"cannot read the cache file {path}: {err}") from err
    if not isinstance(data, dict) or data.get("format") != CACHE_FORMAT:
        raise ValueError(f"{path} is not a slalom-xai API cache file")
    if data.get("key") != key:
        raise ValueError(
            f"the cache file {path} holds answers for cache_key={data.get('key')!r}, not "
            f"{key!r}: use another file (answers of one model must not stand in for another's)"
        )
    entries = {str(t): [float(x) for x in v] for t, v in data["entries"].items()}
    mine = identity
    theirs = data.get("identity")
    if theirs is not None and theirs != mine:
        differ = sorted(k for k in set(mine) | set(theirs) if mine.get(k) != theirs.get(k))
        said = [f"{k} {theirs.get(k)!r}, not {mine.get(k)!r}" for k in differ if k != "call_code"]
        if "call_code" in differ:
            said.append(
                "the call function's code or settings (its body, defaults, closure or the globals it reads, "
                "such as a prompt) differ from those that wrote it"
                if theirs.get("call_code") is not None
                else "it was written by an older slalom-xai that did not record the call function's code"
            )
        raise ValueError(
            f"the cache file {path} holds answers of another classifier: its "
            + "; ".join(said)
            + ". Use another cache_file (answers of one model, prompt or label set must not stand in for another's)"
        )
    widths = {len(v) for v in entries.values()}
    if class_names is not None:
        widths.add(len(class_names))
    if len(widths) > 1:
        raise ValueError(
            f"the cache file {path} holds answers of {sorted(widths)} scores each, and this "
            f"classifier has {len(class_names or [])} class names: use another cache_file"
        )
    return entries


def write_cache(
    path: Path, answers: dict[str, list[float]], key: object, identity: dict, class_names: list[str] | None
) -> None:
    """Merge ``answers`` with what the file holds (other processes' answers), under a lock,
    and replace the file atomically. ``answers`` gains the file's answers.

    Example:
        >>> write_cache(Path("answers.json"), {"a text": [0.1, 0.9]}, "my-model", {}, None)  # doctest: +SKIP
    """
    folder = path.parent
    folder.mkdir(parents=True, exist_ok=True)
    # Another process may have written answers since this one read the file: under the
    # lock, read them back and write the union, so that neither process loses the other's.
    with locked(path.with_name(path.name + ".lock")):
        if path.exists():
            for text, scores in read_cache(path, key, identity, class_names).items():
                answers.setdefault(text, scores)
        data = {
            "format": CACHE_FORMAT,
            "key": key,
            "identity": identity,
            "entries": dict(sorted(answers.items())),
        }
        # Written beside the target and renamed over it: a crash leaves the old file whole.
        # Private as the answers of a paid endpoint were always kept.
        write_atomically(path, json.dumps(data).encode(), private=True)


@contextlib.contextmanager
def locked(path: Path):
    """An exclusive ``flock`` on ``path`` (created if missing) while the block runs.

    POSIX only: where ``fcntl`` is missing (Windows) the block runs unlocked, and processes
    sharing a cache file may then lose each other's last answers.
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    with open(path, "a") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
