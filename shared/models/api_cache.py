"""The answer cache of an :class:`~slalom_core.models.APIClassifier`: one JSON file per
classifier, merged under a lock and replaced atomically, refused when another classifier wrote
it, and checked before it serves (:class:`CacheCheck`: a few stored answers asked again)."""

from __future__ import annotations

import contextlib
import json
import math
import os
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import torch

from ..files import write_atomically
from ..warn import warn_user
from .access import without_access
from .code_digest import CallDigest

__all__ = ["CACHE_FORMAT", "read_cache", "write_cache", "usable_file", "CacheCheck", "CacheChangedError"]

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
    # An older release wrote a declared identity's nested keys verbatim: compared without them
    # (never quoted in the message below), and gone from the file at its next write.
    theirs = without_access(data.get("identity"))
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


def usable_file(path: Path | None, digest: CallDigest) -> Path | None:
    """The cache file a call with this digest may use, with a warning naming what the digest
    leaves out by name yet looks like more than access, or what it cannot see into (then
    None: a cache that cannot vouch for its answers does not serve them).

    Example:
        >>> usable_file(Path("answers.json"), CallDigest("0" * 32))
        PosixPath('answers.json')
    """
    if path is not None and digest.left_out:
        warn_user(
            f"the API cache key leaves out {', '.join(digest.left_out[:4])}{', ...' if len(digest.left_out) > 4 else ''} "
            "by their access-like names (keys, tokens, headers, timeouts are never hashed or written), but they hold "
            "more than access (a number under another name, a sentence): an edit there is seen only by the cache's "
            "check of a few stored answers. If they decide the answers, rename them or declare call.cache_identity",
            UserWarning,
        )
    if path is not None and digest.unseen:
        warn_user(
            f"the API cache file {str(path)!r} is not used: the call reads {', '.join(digest.unseen[:4])}"
            f"{', ...' if len(digest.unseen) > 4 else ''}, which the cache cannot see into (an edit there would be "
            "served the old answers). Declare what decides the answers as a JSON-able dict on the call, e.g. "
            "call.cache_identity = {'model': ..., 'prompt': ..., 'labels': ...} (never a key), or keep those "
            "settings in plain globals, defaults or closures",
            UserWarning,
        )
        return None
    return path


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


class CacheChangedError(ValueError):
    """Stored answers of a cache file that the call, asked again, no longer gives: nothing was
    served from the file (see :class:`CacheCheck`).

    Example:
        >>> try:
        ...     clf.score(ids)  # a call edited where its code does not show it  # doctest: +SKIP
        ... except CacheChangedError as err:
        ...     print(err)  # which answers changed, and how to rebuild the cache  # doctest: +SKIP
    """


class CacheCheck:
    """What an API cache checks before it serves a stored answer: what a digest of the call's
    code cannot see (an environment variable, a file or a module read inside the call, a
    global read through ``globals()``, the endpoint's own model) can change its answers.

    At a classifier's first request in a process while it holds stored answers (read from the
    file, or merged from it, not those it was given itself), before it serves any of them,
    ``n`` of them, chosen at random
    (the generator seeded with ``seed``, or with a draw from torch's global generator, as
    ``explain(seed=None)`` draws, so ``torch.manual_seed`` reproduces), are asked again: ``n``
    paid calls once per classifier and process, counted in ``estimate_cost``, the budget and
    ``usage()["cache_checks"]``. Any answer off its stored one by more than ``tolerance``
    (absolute, and relative to the stored score) refuses the file for the classifier's life
    in that process with a :class:`CacheChangedError` that names the texts. An edit that
    changes a fraction q of the answers is caught with probability 1 - (1 - q)^n.

    Shared by a classifier's shallow copies; a copy unpickled in another process (a Ray
    worker) checks again.

    Example:
        >>> check = CacheCheck(2, 1e-6, seed=0)
        >>> check.pending({"a good film": [0.0, 1.0], "a bad film": [1.0, 0.0], "film": [0.5, 0.5]})
        ['a good film', 'film']
    """

    def __init__(self, n: int, tolerance: float, seed: int | None) -> None:
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"cache_checks must be an int >= 0, got {n!r}")
        if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or not 0 <= tolerance < math.inf:
            raise ValueError(f"cache_tolerance must be a finite number >= 0, got {tolerance!r}")
        self.n, self.tolerance, self.seed = int(n), float(tolerance), seed
        self._reset()

    def _reset(self) -> None:
        self.pid = os.getpid()
        self.lock = threading.Lock()
        self.own: set[str] = set()  # answered in this process: nothing to check
        self.plan: list[str] | None = None
        self.done = False
        self.refused: str | None = None

    def __getstate__(self) -> dict:
        return {"n": self.n, "tolerance": self.tolerance, "seed": self.seed}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["n"], state["tolerance"], state["seed"])

    def here(self) -> CacheCheck:
        """This check, started again in a process (a fork) that has not checked yet."""
        if self.pid != os.getpid():
            self._reset()
        return self

    def pending(self, cache: Mapping[str, Sequence[float]]) -> list[str]:
        """The stored answers to ask again before any is served (chosen once per process);
        [] once checked, or while nothing stored is held. Raises once the file was refused."""
        if self.here().refused is not None:
            raise CacheChangedError(self.refused)
        if self.done or self.n == 0:
            return []
        if self.plan is None:
            stored = sorted(t for t in cache if t not in self.own)
            if not stored:
                return []
            seed = self.seed if self.seed is not None else int(torch.randint(0, 2**31 - 1, (1,)).item())
            picks = np.random.default_rng(seed).choice(len(stored), size=min(self.n, len(stored)), replace=False)
            self.plan = [stored[int(i)] for i in sorted(picks)]
        return list(self.plan)

    def compare(
        self, path: Path, asked: Mapping[str, Sequence[float]], cache: Mapping, left_out: Sequence[str]
    ) -> None:
        """Mark the check passed, or refuse the file: ``asked`` (the answers now) against
        ``cache`` (the stored ones)."""
        changed = [
            t
            for t, now in asked.items()
            if len(now) != len(cache[t]) or not np.allclose(now, cache[t], rtol=self.tolerance, atol=self.tolerance)
        ]
        if not changed:
            self.done = True
            return
        shown = "; ".join(f"{t[:50]!r}: stored {list(cache[t])}, now {list(asked[t])}" for t in changed[:3])
        hidden = f", a setting left out of the key by its access-like name ({', '.join(left_out)})" if left_out else ""
        self.refused = (
            f"the API cache file {str(path)!r} holds answers this call no longer gives: of {len(asked)} stored "
            f"answers asked again (chosen at random), {len(changed)} differ by more than cache_tolerance="
            f"{self.tolerance:g} ({shown}). Something that decides the answers changed where the cache key cannot "
            f"see it (an environment variable, a file or module read inside the call, a global read through "
            f"globals(), the endpoint's model{hidden}); nothing was served from the file. Delete {str(path)!r} (or "
            "give another cache_file) to rebuild it from fresh answers; if the endpoint is not deterministic, set "
            "cache_tolerance to its noise"
        )
        raise CacheChangedError(self.refused)
