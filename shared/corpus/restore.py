"""A stored text of a corpus run back as a :class:`~slalom_core.SlalomExplanation`, without the model.

The positions table holds every position's scores, standard errors and unit; the texts
table the outputs, the class axis and the fit's diagnostics (as JSON). The explanation is
rebuilt from them exactly: its per-position arrays are the stored float64 columns, not a
new fit.
"""

from __future__ import annotations

import json

import numpy as np

from ..explanation import SlalomExplanation
from ..surrogate import SlalomSurrogate

__all__ = ["explanation_from_tables", "json_cell"]


def _units(pos) -> np.ndarray:
    """Each position's unit; a run written before units were stored gets them from the
    token ids (the engine gives equal ids one unit, in order of first occurrence)."""
    if pos["unit"].notna().all():
        return pos["unit"].to_numpy(dtype=np.int64)
    seen: dict[tuple, int] = {}
    return np.array([seen.setdefault(tuple(ids), len(seen)) for ids in pos["token_ids"]], dtype=np.int64)


def _per_unit(column: np.ndarray, unit: np.ndarray, n_units: int) -> np.ndarray:
    """A per-position column as one entry per unit (positions of a unit share its score)."""
    out = np.full(n_units, np.nan)
    out[unit[::-1]] = column[::-1]  # the first position of each unit wins
    return out


def _se(column, unit: np.ndarray, n_units: int) -> np.ndarray | None:
    values = column.to_numpy(dtype=np.float64, na_value=np.nan)
    return None if np.isnan(values).all() else _per_unit(values, unit, n_units)


def json_cell(cell, default):
    """A JSON cell of a table, or ``default`` where it is null (None or NaN)."""
    return default if cell is None or (isinstance(cell, float) and np.isnan(cell)) else json.loads(cell)


def explanation_from_tables(positions, texts, *, explained_class: str | None = None) -> SlalomExplanation:
    """Rebuild one text's explanation from its rows of the positions and texts tables.

    Args:
        positions: the text's rows of the positions table (every explained class).
        texts: the text's rows of the texts table (one per explained class).
        explained_class: which class, for a run that explains several per text one by
            one (multi-label); a joint multi-class fit gives every class in one
            explanation, as ``explain`` did. Default: the only one, or all of a joint fit.

    Returns:
        A :class:`SlalomExplanation` with the stored tokens, scores, standard errors,
        outputs and diagnostics (plots and tables work; nothing is refitted).

    Example:
        >>> exp = explanation_from_tables(run.positions().query("id == 'r1'"), run.texts().query("id == 'r1'"))  # doctest: +SKIP
    """
    if not len(texts):
        raise KeyError("no explained text in these rows")
    first = texts.iloc[0]
    class_names = json_cell(first["class_names"], None)
    classes = list(texts["explained_class"])
    joint = class_names is not None and len(classes) > 1 and set(classes) == set(class_names)
    if joint and explained_class is None:
        order = [classes.index(c) for c in class_names]
    else:
        if explained_class is None and len(classes) > 1:
            raise ValueError(f"this text was explained for {classes}; pick one with explained_class=")
        pick = classes[0] if explained_class is None else explained_class
        if pick not in classes:
            raise KeyError(f"class {pick!r} was not explained for this text; it was explained for {classes}")
        order = [classes.index(pick)]
    rows = texts.iloc[order]
    parts = [positions[positions["explained_class"] == c].sort_values("position") for c in rows["explained_class"]]
    pos = parts[0]
    unit = _units(pos)
    n_units = int(unit.max()) + 1 if len(unit) else 0

    def stack(per_class: list[np.ndarray]) -> np.ndarray:
        return per_class[0] if len(per_class) == 1 else np.stack(per_class, axis=-1)

    value = stack([_per_unit(p["value"].to_numpy(np.float64), unit, n_units) for p in parts])
    importance = _per_unit(pos["importance"].to_numpy(np.float64), unit, n_units)
    value_se = [_se(p["value_se"], unit, n_units) for p in parts]
    surrogate = SlalomSurrogate(value, importance)
    # The stored importances are already normalised: re-normalising would move their last bits.
    surrogate.importance = importance
    diagnostics = json_cell(first["diagnostics"], {})
    options = json_cell(first["options"], {})

    def output(name: str) -> np.ndarray | float:
        x = rows[name].to_numpy(dtype=np.float64)
        return float(x[0]) if len(x) == 1 else x

    target = first["target"]
    class_index = first["class_index"]
    return SlalomExplanation(
        tokens=[str(t) for t in pos["token"]],
        token_ids=[tuple(int(i) for i in ids) for ids in pos["token_ids"]],
        unit_index=unit,
        surrogate=surrogate,
        method=str(first["method"]),
        granularity=str(options.get("granularity", "token")),
        target=None if target is None or target != target else int(target),
        class_names=class_names,
        model_output=output("model_output"),
        base_value=output("base_value"),
        class_index=None if class_index is None or class_index != class_index else int(class_index),
        unit_value_se=None if any(se is None for se in value_se) else stack(value_se),
        unit_importance_se=_se(pos["importance_se"], unit, n_units),
        diagnostics=diagnostics,
        # The text as the data hold it (a cut text whole: the view shows its cut-off end
        # as plain text after the explained positions).
        text=first["text"] if isinstance(first["text"], str) else None,
    )
