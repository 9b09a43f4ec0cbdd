"""A stored text of a corpus run back as a :class:`~slalom_core.SlalomExplanation`, without the model.

The positions table holds every position's scores, standard errors and unit; the texts
table the outputs, the class axis and the fit's diagnostics (as JSON). The explanation is
rebuilt from them exactly: its per-position arrays are the stored float64 columns, not a
new fit.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from ..explanation import SlalomExplanation
from ..fit_quality import row_flags
from ..surrogate import LengthLaw, SlalomSurrogate

__all__ = ["explanation_from_tables", "json_cell", "class_names_of", "predicted_class", "fit_status"]


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
    diagnostics = json_cell(first["diagnostics"], {})
    # The fit's length law is in its diagnostics (the identity for a fit that has none).
    surrogate = SlalomSurrogate(value, importance, law=LengthLaw.from_diagnostics(diagnostics))
    # The stored importances are already normalised: re-normalising would move their last bits.
    surrogate.importance = importance
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


# -- what a text's rows of the texts table say (the report's and the dataset export's one rule) --


def class_names_of(rows, run: Any = None) -> list | None:
    """The class names a text's rows of the texts table know: a joint fit's own, else the
    model's (recorded in each fit's diagnostics, or in the manifest of ``run``, a
    :class:`~slalom_core.corpus.CorpusRun`).

    Example:
        >>> class_names_of([{"class_names": '["neg", "pos"]', "diagnostics": "{}"}])
        ['neg', 'pos']
    """
    first = rows.iloc[0] if hasattr(rows, "iloc") else rows[0]
    names = json_cell(first["class_names"], None)
    if names is None:
        names = json_cell(first["diagnostics"], {}).get("class_names")
    if names is None and run is not None:
        model = run.manifest.get("model")
        names = model.get("class_names") if isinstance(model, dict) else None
    return names


def _predicted(rows: list[dict], run: Any = None) -> tuple[str | None, int | None]:
    """The model's predicted class from a text's rows of the texts table (outputs are
    log-odds, or centred logits of a joint fit): its name where the model names its
    classes (else "class k"), and its index k (None when the rows do not tell)."""
    first = rows[0]
    names = class_names_of(rows, run)
    out = np.array([r["model_output"] for r in rows], dtype=np.float64)
    classes = [r["explained_class"] for r in rows]
    if names is not None and len(rows) > 1 and set(classes) == {str(n) for n in names}:
        name = str(classes[int(np.argmax(out))])
        return name, [str(n) for n in names].index(name)
    n_outputs = json_cell(first["diagnostics"], {}).get("n_outputs")
    if len(rows) != 1 or n_outputs != 2:
        return None, None
    target = first["target"]
    explained = 1 if target is None or target != target else int(target)
    k = explained if out[0] >= 0 else 1 - explained
    return (str(names[k]) if names is not None and k < len(names) else f"class {k}"), k


def predicted_class(rows, run: Any = None) -> tuple[str | None, int | None]:
    """The model's predicted class of one text from its rows of the texts table: ``(name,
    index)``, or ``(None, None)`` where the rows do not tell (the report's and the dataset
    export's one rule).

    Example:
        >>> predicted_class(run.texts().query("id == 'r1'"), run)  # doctest: +SKIP
        ('POSITIVE', 1)
    """
    if hasattr(rows, "to_dict"):  # a DataFrame: the rule reads plain records
        rows = rows.to_dict("records")
    return _predicted(rows, run)


def fit_status(rows) -> str:
    """A text's fit status from its rows of the texts table: "ok", or "fit flagged (codes)"
    under the one fit-quality rule (:func:`~slalom_core.fit_quality.row_flags`), the report's
    and the dataset export's alike.

    Example:
        >>> fit_status([{"full_text_gap": 0.2, "heldout_r2": 0.9, "converged": True}])  # doctest: +SKIP
        'ok'
    """
    if hasattr(rows, "to_dict"):  # a DataFrame: the rule reads plain records
        rows = rows.to_dict("records")
    flags = row_flags(rows)
    return f"fit flagged ({', '.join(f.code for f in flags)})" if flags else "ok"
