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
releases: it is rebuilt from its unit table where that is exact, and refused with the
reason where it is not. A newer version is refused with a message to upgrade.

Example:
    >>> exp.save("review.slalom.json")  # doctest: +SKIP
    >>> again = slalom_core.load_explanation("review.slalom.json")  # doctest: +SKIP
    >>> np.array_equal(again.lin, exp.lin)  # doctest: +SKIP
    True
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .diagnostics import Diagnostics
from .scores import SCORES
from .surrogate import SlalomSurrogate

if TYPE_CHECKING:
    import pandas as pd

    from .explained import Explained as SlalomExplanation  # the protocol: saving looks down

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "save_explanation",
    "read_explanation_dict",
    "explanation_fields",
    "explanation_frame",
]

FORMAT = "slalom-explanation"
FORMAT_VERSION = 1
# The scores that have a standard error, and the attribute holding it per position.
_STANDARD_ERRORS = {"value": "value_se", "importance": "importance_se"}
# Diagnostics entries that explain_batch stores as arrays (one per class); JSON makes lists of them.
_ARRAY_DIAGNOSTICS = ("model_output", "surrogate_output", "full_text_gap")


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
    if version == 0:
        unit_index, value, importance = _units_of_version_0(d)
        gamma, class_index = 0.0, None
        value_se = _unit_se(d.get("value_se"), unit_index, len(importance))
        importance_se = _unit_se(d.get("importance_se"), unit_index, len(importance))
    else:
        sur = d["surrogate"]
        unit_index = np.asarray(d["unit_index"], dtype=np.int64)
        value, importance, gamma = sur["value"], sur["importance"], float(sur["gamma"])
        class_index = d.get("class_index")
        value_se, importance_se = _array(d.get("unit_value_se")), _array(d.get("unit_importance_se"))
    surrogate = SlalomSurrogate(np.asarray(value, dtype=np.float64), np.asarray(importance, dtype=np.float64), gamma)
    if version >= 1:
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
    path.write_text(json.dumps(explanation.to_dict(), ensure_ascii=False), encoding="utf-8")
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
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ValueError(f"{path} is not a JSON file: {err}") from None
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
