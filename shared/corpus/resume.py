"""Starting or resuming a corpus run in its folder: the checks a resume must pass (same
model, amortized head, input and options) and the finished chunks it must redo."""

from __future__ import annotations

import json
from pathlib import Path

from ..files import has_manifest, read_manifest, write_manifest
from ..models import BudgetExceededError
from ..warn import warn_user
from . import store
from .fingerprint import DUPLICATE, cell_digest
from .source import CorpusSource

__all__ = ["check_out", "prepare_out", "changed_texts", "redo_changed_chunks", "redo_budget_failures"]


def check_out(out: Path, resume: bool) -> None:
    """Refuse an output folder this call may not write, from the folder alone: one that holds
    results without ``resume``, or that holds something other than a corpus run. Cheap (no
    data read, no model loaded), so a run calls it first: a rerun into a full folder is told
    so at once, not after the model has loaded.

    Raises:
        FileExistsError: ``out`` is a file, holds results and ``resume`` is False, or holds
            files but no corpus run.

    Example:
        >>> check_out(Path("runs/new"), resume=False)  # doctest: +SKIP
    """
    if out.exists() and not out.is_dir():
        raise FileExistsError(f"{str(out)!r} is a file; give a folder as the output path")
    if store.holds_no_results(out):
        return
    if not resume:
        raise FileExistsError(
            f"{str(out)!r} exists and is not empty; pass resume=True (--resume) to continue that run, "
            "or choose another output path (nothing was overwritten)"
        )
    if not has_manifest(out):
        raise FileExistsError(f"{str(out)!r} is not empty and holds no corpus run; choose another output path")


def prepare_out(out: Path, manifest: dict, resume: bool) -> None:
    """Make ``out`` a new run's folder (writing its manifest), or check that the run in it
    may be resumed by this call (same model, head, input and options) and drop its
    unfinished chunks.

    Args:
        out: the run's folder.
        manifest: this call's manifest.
        resume: whether the call asked to resume.

    Example:
        >>> prepare_out(Path("runs/imdb"), manifest, resume=True)  # doctest: +SKIP
    """
    check_out(out, resume)
    if not store.holds_no_results(out):
        old = read_manifest(out)
        if old.get("model") != manifest.get("model"):
            raise ValueError(_other_model(out, old.get("model"), manifest["model"]))
        heads = [m.get("amortized") or {} for m in (old, manifest)]
        if heads[0].get("digest") != heads[1].get("digest"):
            raise ValueError(_other_head(out, *heads))
        differ = [k for k in ("input", "options") if old.get(k) != manifest.get(k)]
        if differ:
            raise ValueError(
                f"cannot resume {str(out)!r}: its {', '.join(differ)} differ from this call's "
                f"(was {json.dumps({k: old.get(k) for k in differ})}); use the same command, or another output path"
            )
        store.remove_unfinished(out)
        return
    out.mkdir(parents=True, exist_ok=True)
    write_manifest(out, manifest)


def _other_model(out: Path, old: object, new: dict) -> str:
    def said(m: object) -> str:
        if not isinstance(m, dict):
            return f"{m!r}, recorded without a fingerprint by an older slalom-xai"
        return f"{m.get('name')!r} ({m.get('class')}, fingerprint {m.get('digest')})"

    what = (
        "weights, config, tokenizer or settings, a call function's code, defaults, closure or the globals it reads "
        "(e.g. a prompt) included"
        if isinstance(old, dict)
        else "model"
    )
    return (
        f"cannot resume {str(out)!r}: it was explained with the model {said(old)}, this call's is {said(new)} "
        f"(their {what} differ); resume with the run's own model, or explain with this one into a new "
        "output path (--out / out=); nothing was changed"
    )


def _other_head(out: Path, old: dict, new: dict) -> str:
    def said(head: dict) -> str:
        if not head:
            return "per text"
        return f"with the amortized explainer {head.get('folder')!r} (digest {head.get('digest')})"

    return (
        f"cannot resume {str(out)!r}: it was explained {said(old)}, this call explains {said(new)}; resume with "
        "the run's own explainer, or explain into a new output path (--out / out=); nothing was changed"
    )


def changed_texts(
    out: Path, source: CorpusSource, finished: set[str] | None = None
) -> tuple[dict[str, list[str]], list[str]]:
    """The finished chunks of the run in ``out`` whose texts the data no longer hold.

    Args:
        out: the run's folder.
        source: the data as they are now (scanned).
        finished: the run's finished ids (default: read from ``out``).

    Returns:
        ``({key: ids} of chunks with an id or a text the data no longer hold, [keys of chunks
        written without a fingerprint, which cannot be checked])``.

    Example:
        >>> changed, unchecked = changed_texts(Path("runs/imdb"), CorpusSource("imdb.jsonl").scan())  # doctest: +SKIP
    """
    finished = store.done_ids(out) if finished is None else finished
    duplicates = source.duplicate_ids
    digests = {
        r.id: DUPLICATE if r.id in duplicates else cell_digest(r.text)
        for chunk in source.chunks(1024)
        for r in chunk
        if r.id in finished
    }
    return store.changed_chunks(out, digests)


def redo_changed_chunks(out: Path, source: CorpusSource, finished: set[str]) -> None:
    """Forget finished chunks whose texts the data no longer hold, and say which.

    Example:
        >>> redo_changed_chunks(Path("runs/imdb"), source, store.done_ids(Path("runs/imdb")))  # doctest: +SKIP

    The data file may be edited between a run and its resume without changing its row
    count; a kept chunk would then go on explaining texts that are no longer there. Its
    rows are explained again from the data as they are now.
    """
    changed, unchecked = changed_texts(out, source, finished)
    if unchecked:
        warn_user(
            f"{len(unchecked)} finished chunks of {str(out)!r} were written without a fingerprint (by an older "
            "slalom-xai), so their texts cannot be checked against the data; to be sure, explain into a new "
            "output path",
            UserWarning,
        )
    if not changed:
        return
    ids = sorted({i for chunk_ids in changed.values() for i in chunk_ids})
    for key in changed:
        store.remove_chunk(out, key)
    shown = ", ".join(repr(i) for i in ids[:5]) + (", ..." if len(ids) > 5 else "")
    warn_user(
        f"the data changed since {str(out)!r} was written: {len(changed)} finished chunks ({len(ids)} texts: "
        f"{shown}) held ids or texts that are no longer in the data, and are explained again",
        UserWarning,
    )


def redo_budget_failures(out: Path) -> None:
    """Explain again the chunks holding texts an API budget stopped: a resume may bring a
    new budget. The chunk is redone whole (its other texts' answers are free where the
    classifier has a cache file)."""
    keys = store.chunks_failed_by(out, BudgetExceededError.__name__)
    for key in keys:
        store.remove_chunk(out, key)
    if keys:
        warn_user(f"{len(keys)} finished chunks held texts the API budget stopped: explained again", UserWarning)
