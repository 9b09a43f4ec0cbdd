"""Explanations kept in files: versioned JSON, a dict round trip and a table.

- :func:`save_explanation` / :func:`load_explanation`: one explanation per JSON file;
- :func:`explanation_fields`: the inverse of :meth:`SlalomExplanation.to_dict` (the class
  builds the explanation from them, :meth:`SlalomExplanation.from_dict`);
- :func:`explanation_frame`: one row per position, every score and standard error.

The file is :meth:`~SlalomExplanation.to_dict` with ``format`` and ``format_version``:
the per-unit arrays of the fitted surrogate (all class columns), the unit of each
position, the standard errors, outputs and diagnostics, so that a loaded explanation
gives back every score exactly (floats are written with full precision). The per-position
scores in the file are for readers without this library; loading recomputes them.

Format versions: 1 (this one). A dict without a version is the ``to_dict`` of earlier
releases: it is rebuilt from its unit table where that is exact (its ``gamma``, which it
does not name, is the sum of the table's importances, normalised so), and refused with the
reason where it is not. A newer version is refused with a message to upgrade.

What decides a file's meaning is checked before it is believed: the ``unit_index`` (one
unit per position, in range, positions of one unit holding one token and each unit used),
the surrogate's shapes and ``gamma`` (the importances sum to it), and the per-position
scores the file also holds (they must be those the surrogate gives). A file that fails a
check is refused with the field named: a tampered or hand-edited file never loads as other
scores than its own.

Example:
    >>> exp.save("review.slalom.json")  # doctest: +SKIP
    >>> again = slalom_core.load_explanation("review.slalom.json")  # doctest: +SKIP
    >>> np.array_equal(again.lin, exp.lin)  # doctest: +SKIP
    True
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .diagnostics import Diagnostics
from .files import write_atomically
from .scores import SCORES, STORED_SCORES
from .surrogate import LengthLaw, SlalomSurrogate

if TYPE_CHECKING:
    import pandas as pd

    from .explained import Explained as SlalomExplanation  # the protocol: saving looks down

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "save_explanation",
    "explanation_dict",
    "read_explanation_dict",
    "check_stored_scores",
    "explanation_fields",
    "explanation_frame",
]

FORMAT = "slalom-explanation"
FORMAT_VERSION = 1
# The scores that have a standard error, and the attribute holding it per position.
_STANDARD_ERRORS = {"value": "value_se", "importance": "importance_se"}
# Diagnostics entries that explain_batch stores as arrays (one per class); JSON makes lists of them.
_ARRAY_DIAGNOSTICS = ("model_output", "surrogate_output", "full_text_gap")
# Stored per-position scores are recomputed on loading from the same floats, by the same
# code: they agree to the last bit unless the file was edited. The slack only absorbs an
# unversioned file's gamma, re-summed from its importances (rounding of a sum of ~100 terms).
_SCORE_RTOL, _SCORE_ATOL = 1e-9, 1e-9


def plain(x: Any) -> Any:
    """A numpy array or scalar as plain Python (what JSON writes); anything else as it is.

    Example:
        >>> plain(np.array([1.5, 2.0])), plain(np.int64(3)), plain("a")
        ([1.5, 2.0], 3, 'a')
    """
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, np.generic):
        return x.item()
    return x


def explanation_dict(explanation: SlalomExplanation) -> dict:
    """The plain (JSON-serialisable) dict of ``explanation`` in format version :data:`FORMAT_VERSION`
    (what :meth:`SlalomExplanation.to_dict` returns and :func:`save_explanation` writes).

    Besides the per-position scores it holds what :func:`explanation_fields` needs to
    rebuild the explanation exactly: ``format_version``, ``unit_index``, ``surrogate`` (with
    its ``gamma``), the per-unit standard errors, ``class_index`` and ``text``.

    Example:
        >>> explanation_dict(exp)["surrogate"]["gamma"]  # doctest: +SKIP
        0.0
    """
    e = explanation
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "tokens": list(e.tokens),
        "token_ids": [list(t) for t in e.token_ids],
        "method": e.method,
        "granularity": e.granularity,
        "target": e.target,
        "class_names": e.class_names,
        **{name: plain(e.scores(name)) for name in STORED_SCORES},
        "model_output": plain(e.model_output),
        "base_value": plain(e.base_value),
        "value_se": plain(e.value_se),
        "importance_se": plain(e.importance_se),
        "surrogate_output": plain(e.surrogate_output),
        "units": e.unit_table(),
        "diagnostics": {k: plain(v) for k, v in e.diagnostics.items()},
        "text": e.text,
        "class_index": e.class_index,
        "unit_index": plain(np.asarray(e.unit_index, dtype=np.int64)),
        "surrogate": {
            "value": plain(e.surrogate.value),
            "importance": plain(e.surrogate.importance),
            "gamma": float(e.surrogate.gamma),
            "law": e.surrogate.law.as_dict(),
        },
        "unit_value_se": plain(e.unit_value_se),
        "unit_importance_se": plain(e.unit_importance_se),
    }


def _array(x: Any, dtype: type = np.float64) -> np.ndarray | None:
    return None if x is None else np.asarray(x, dtype=dtype)


def _output(x: Any) -> np.ndarray | float | None:
    """An output as explain stores it: a float, or an array with a class axis."""
    if x is None:
        return None
    return np.asarray(x, dtype=np.float64) if isinstance(x, (list, tuple, np.ndarray)) else float(x)


def _check_version(d: Mapping) -> int:
    fmt, version = d.get("format"), d.get("format_version")
    if version is None:
        return 0
    if fmt != FORMAT:
        raise ValueError(f"not a SLALOM explanation: format {fmt!r}, expected {FORMAT!r}")
    if not isinstance(version, int) or version < 1:
        raise ValueError(f"unknown format_version {version!r} of a SLALOM explanation")
    if version > FORMAT_VERSION:
        raise ValueError(
            f"this explanation was written in format version {version}; this slalom_core reads versions up "
            f"to {FORMAT_VERSION}: upgrade slalom-xai to load it"
        )
    return version


def _units_of_version_0(d: Mapping) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(unit_index, unit value, unit importance) from an unversioned ``to_dict``.

    Its unit table lists each unique unit with the ids of its first occurrence, in the
    order of first occurrence, as explain numbers units; positions find theirs by ids.
    """
    units = d.get("units")
    if not units:
        raise ValueError(
            "this explanation dict has no format_version and no unit table ('units'): it cannot be "
            "rebuilt exactly; save explanations with exp.save() (format version 1)"
        )
    index = {tuple(u["token_ids"]): k for k, u in enumerate(units)}
    try:
        unit_index = np.array([index[tuple(t)] for t in d["token_ids"]], dtype=np.int64)
    except KeyError:
        raise ValueError("the unit table does not cover every position's token ids: the dict is inconsistent") from None
    value = np.asarray([u["value"] for u in units], dtype=np.float64)
    importance = np.asarray([u["importance"] for u in units], dtype=np.float64)
    return unit_index, value, importance


def _unit_index(d: Mapping, n_units: int) -> np.ndarray:
    """The file's ``unit_index``, checked: one unit per position, in range, every unit used,
    and positions of one unit holding the same token ids (units are unique tokens)."""
    raw = d.get("unit_index")
    n = len(d["tokens"])
    if not isinstance(raw, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in raw):
        raise ValueError("'unit_index' must be a list of integers, one per position")
    if len(raw) != n:
        raise ValueError(f"'unit_index' has {len(raw)} entries for {n} positions ('tokens')")
    idx = np.asarray(raw, dtype=np.int64).reshape(-1)
    if n and (idx.min() < 0 or idx.max() >= n_units):
        raise ValueError(
            f"'unit_index' holds {int(idx.min())}..{int(idx.max())}; the surrogate has units 0..{n_units - 1}"
        )
    if len(np.unique(idx)) != n_units:
        raise ValueError(f"'unit_index' uses {len(np.unique(idx))} of the surrogate's {n_units} units")
    ids_of: dict[int, tuple] = {}
    unit_of: dict[tuple, int] = {}
    for pos, (u, ids) in enumerate(zip(idx.tolist(), d["token_ids"])):
        ids = tuple(ids)
        if ids_of.setdefault(u, ids) != ids or unit_of.setdefault(ids, u) != u:
            raise ValueError(
                f"'unit_index' is inconsistent with 'token_ids' at position {pos}: a unit is one unique token, "
                "so positions share a unit exactly when they hold the same token ids"
            )
    return idx


def _surrogate_arrays(sur: Any) -> tuple[np.ndarray, np.ndarray, float]:
    """(value, importance, gamma) of a version-1 file's ``surrogate``, their shapes and gamma checked."""
    if not isinstance(sur, Mapping) or not {"value", "importance", "gamma"} <= set(sur):
        raise ValueError("'surrogate' must hold 'value', 'importance' and 'gamma'")
    try:
        value = np.asarray(sur["value"], dtype=np.float64)
        importance = np.asarray(sur["importance"], dtype=np.float64)
        gamma = float(sur["gamma"])
    except (TypeError, ValueError):
        raise ValueError("'surrogate' holds values that are not numbers") from None
    if importance.ndim != 1 or value.ndim not in (1, 2) or len(value) != len(importance) or not len(importance):
        raise ValueError(
            f"'surrogate' shapes disagree: value {value.shape}, importance {importance.shape} (one entry per unit)"
        )
    # The importances are stored normalised to sum to gamma: a gamma they do not sum to is
    # not the one they were fitted with.
    total = float(importance.sum())
    if not math.isfinite(gamma) or abs(total - gamma) > 1e-9 * max(1.0, abs(gamma), float(np.abs(importance).sum())):
        raise ValueError(f"'surrogate.gamma' is {gamma!r} but the importances sum to {total!r}")
    return value, importance, gamma


def check_stored_scores(explanation: SlalomExplanation, d: Mapping) -> None:
    """Raise unless the per-position scores ``d`` holds are those ``explanation`` gives.

    The scores in a file are for readers without this library; loading recomputes them.
    When they disagree the file was edited (or its meaning lost, e.g. a gamma that an
    unversioned file does not name): the first score that disagrees is named.
    """
    for name in STORED_SCORES:
        if d.get(name) is None:
            continue
        try:
            stored = np.asarray(d[name], dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"the stored {name!r} scores are not numbers") from None
        ours = np.asarray(explanation.scores(name), dtype=np.float64)
        if stored.shape != ours.shape or not np.allclose(
            stored, ours, rtol=_SCORE_RTOL, atol=_SCORE_ATOL, equal_nan=True
        ):
            raise ValueError(
                f"the stored {name!r} scores disagree with those the file's surrogate and 'unit_index' give: "
                "the file was edited, or it is not what this library wrote"
            )


def _unit_se(per_position: Any, unit_index: np.ndarray, n_units: int) -> np.ndarray | None:
    """Per-unit standard errors from per-position ones (every position of a unit has its unit's)."""
    if per_position is None:
        return None
    pos = np.asarray(per_position, dtype=np.float64)
    out = np.full((n_units,) + pos.shape[1:], np.nan)
    out[unit_index] = pos
    return out


def explanation_fields(d: Mapping) -> dict[str, Any]:
    """The :class:`SlalomExplanation` fields a :meth:`SlalomExplanation.to_dict` dict (or a
    saved file's) describes (the class itself builds the explanation from them:
    :meth:`SlalomExplanation.from_dict`).

    Args:
        d: the dict, of format version 1, or the unversioned ``to_dict`` of earlier
            releases (rebuilt from its unit table: exact for one explained output; a joint
            fit shown for one class keeps that class only).

    Returns:
        The constructor's keyword arguments; the explanation they make has scores equal to
        the original's exactly.

    Raises:
        ValueError: a newer or unknown format, or a dict that cannot be rebuilt (the
            message says why).

    Example:
        >>> again = SlalomExplanation(**explanation_fields(exp.to_dict()))  # doctest: +SKIP
        >>> np.array_equal(again.contribution, exp.contribution)  # doctest: +SKIP
        True
    """
    if not isinstance(d, Mapping):
        raise TypeError(f"expected a dict from SlalomExplanation.to_dict, got {type(d).__name__}")
    version = _check_version(d)
    missing = [k for k in ("tokens", "token_ids", "method") if k not in d]
    if missing:
        raise ValueError(f"not a SLALOM explanation dict: missing {missing}")
    if len(d["token_ids"]) != len(d["tokens"]):
        raise ValueError(f"'token_ids' has {len(d['token_ids'])} entries for {len(d['tokens'])} positions ('tokens')")
    if version == 0:
        unit_index, value, importance = _units_of_version_0(d)
        # Earlier releases did not write gamma, but normalised the importances to sum to it.
        gamma, class_index = float(importance.sum()), None
        value_se = _unit_se(d.get("value_se"), unit_index, len(importance))
        importance_se = _unit_se(d.get("importance_se"), unit_index, len(importance))
    else:
        value, importance, gamma = _surrogate_arrays(d.get("surrogate"))
        unit_index = _unit_index(d, len(importance))
        class_index = d.get("class_index")
        value_se, importance_se = _array(d.get("unit_value_se")), _array(d.get("unit_importance_se"))
    sur = d.get("surrogate")
    # Files written before the length law hold none: theirs is the identity.
    law = LengthLaw.from_dict(sur.get("law") if isinstance(sur, Mapping) else None)
    surrogate = SlalomSurrogate(
        np.asarray(value, dtype=np.float64), np.asarray(importance, dtype=np.float64), gamma, law
    )
    # The file holds the normalised importances: normalising again may move the last bit.
    surrogate.importance = np.asarray(importance, dtype=np.float64)
    diagnostics = Diagnostics(d.get("diagnostics") or {})
    for key in _ARRAY_DIAGNOSTICS:
        if key in diagnostics:
            diagnostics[key] = _output(diagnostics[key])
    return dict(
        tokens=list(d["tokens"]),
        token_ids=[tuple(int(i) for i in t) for t in d["token_ids"]],
        unit_index=unit_index,
        surrogate=surrogate,
        method=d["method"],
        granularity=d.get("granularity", "token"),
        target=d.get("target"),
        class_names=None if d.get("class_names") is None else list(d["class_names"]),
        model_output=_output(d.get("model_output")),
        base_value=_output(d.get("base_value", 0.0)),
        class_index=class_index,
        unit_value_se=value_se,
        unit_importance_se=importance_se,
        diagnostics=diagnostics,
        text=d.get("text"),
    )


def save_explanation(explanation: SlalomExplanation, path: str | os.PathLike) -> Path:
    """Write ``explanation`` to ``path`` as UTF-8 JSON (format version :data:`FORMAT_VERSION`).

    Args:
        explanation: the explanation.
        path: the file to write (``.json`` by convention).

    Returns:
        The path written.

    Example:
        >>> save_explanation(exp, "review.slalom.json")  # doctest: +SKIP
        PosixPath('review.slalom.json')
    """
    if not (hasattr(explanation, "to_dict") and hasattr(explanation, "surrogate")):
        raise TypeError(f"expected a SlalomExplanation, got {type(explanation).__name__}")
    path = Path(path)
    # NaN (a standard error the fit could not give) is written as JSON's NaN extension,
    # which Python's json reads back; strict JSON has no way to write it.
    text = json.dumps(explanation_dict(explanation), ensure_ascii=False)
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError as err:
        # E.g. a lone surrogate (json.loads gives one for an escaped "\ud800"). Encoded
        # before the file is touched: an existing file stays as it was.
        raise ValueError(
            f"cannot save the explanation to {path}: its text holds {text[err.start : err.end]!r}, "
            "which UTF-8 cannot encode (a lone surrogate); nothing was written"
        ) from None
    write_atomically(path, data)
    return path


def read_explanation_dict(path: str | os.PathLike) -> dict:
    """The dict saved at ``path`` (by :meth:`SlalomExplanation.save`); :func:`slalom_core.load_explanation`
    makes it an explanation again.

    Args:
        path: the JSON file.

    Returns:
        The file's dict (checked by :func:`explanation_fields` when it is read).

    Raises:
        ValueError: not a JSON file.

    Example:
        >>> read_explanation_dict("review.slalom.json")["format_version"]  # doctest: +SKIP
        1
    """
    path = Path(path)
    raw = path.read_bytes()  # a missing file: FileNotFoundError, which names it
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ValueError(
            f"{path} is not UTF-8 text (byte {err.start}: {raw[err.start : err.start + 1]!r}); "
            "SLALOM explanation files are UTF-8 JSON (Latin-1 or UTF-16 files are not read)"
        ) from None
    try:
        d = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"{path} is not a JSON file: {err}") from None
    except RecursionError:
        raise ValueError(f"{path} is not a SLALOM explanation: its JSON is nested too deeply to read") from None
    if not isinstance(d, dict):
        raise ValueError(f"{path} is not a SLALOM explanation: it holds a JSON {type(d).__name__}, not an object")
    return d


def explanation_frame(explanation: SlalomExplanation) -> pd.DataFrame:
    """One row per position: position, token, unit, every score of the table and the
    standard errors (NaN where the method gives none).

    A joint multi-class fit has one column per class for the class-dependent scores,
    named ``"value[NAME]"``; importance has one column.

    Args:
        explanation: the explanation.

    Returns:
        A ``pandas.DataFrame`` (pandas is needed).

    Example:
        >>> explanation_frame(exp)[["token", "value", "value_se"]].head()  # doctest: +SKIP
    """
    try:
        import pandas as pd
    except ImportError:
        raise ImportError("to_pandas needs pandas: pip install pandas") from None
    n = explanation.n_positions
    cols: dict[str, Any] = {
        "position": np.arange(n),
        "token": list(explanation.tokens),
        "unit": np.asarray(explanation.unit_index, dtype=np.int64),
    }
    names = explanation.class_names

    def put(key: str, x: np.ndarray) -> None:
        if x.ndim == 2:  # one column per class
            for c in range(x.shape[1]):
                cols[f"{key}[{names[c] if names is not None and c < len(names) else c}]"] = x[:, c]
        else:
            cols[key] = x

    for name in SCORES:
        score = np.asarray(explanation.scores(name), dtype=np.float64)
        put(name, score)
        if name in _STANDARD_ERRORS:
            se = getattr(explanation, _STANDARD_ERRORS[name])
            put(f"{name}_se", np.full(score.shape, np.nan) if se is None else np.asarray(se, dtype=np.float64))
    return pd.DataFrame(cols)
