"""SLALOM's own plots: value against importance, and shap's waterfall with the fit residual.

SHAP's plots show one number per token; SLALOM has two (paper Sec. 5.1, Fig. 4): the value
v (effect of the token alone, x axis) and the importance s (how much weight it takes from
the rest, y axis). Tokens far right/left push the prediction; tokens high up dominate it.

Both plots state the fit's residual f(x) − surrogate(x) in a note: by default it sits in the
Explanation's base value (so that bars add up to f(x)), and it must not go unnoticed there.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import shap

import slalom_core as sc
from slalom_core.plots import NEGATIVE_RGB, POSITIVE_RGB

__all__ = ["value_importance", "waterfall", "residual_note"]


def _hex(rgb: tuple[int, int, int]) -> str:
    return "#{:02x}{:02x}{:02x}".format(*rgb)


def _row(e: shap.Explanation, row: int) -> shap.Explanation:
    """A single-text Explanation: slice ``row`` out of a batch, keep a single row as is."""
    data = e.data
    single = data is not None and len(data) > 0 and isinstance(data[0], (str, np.str_))
    return e if single else e[row]


def _column(e: shap.Explanation, output: int | str | None) -> np.ndarray:
    values = np.asarray(e.values, dtype=np.float64)
    if values.ndim == 1:
        return values
    names = list(e.output_names) if e.output_names is not None else None
    if output is None:
        if values.shape[1] == 2:
            return values[:, 1]  # binary: the positive class, as SLALOM fits it
        raise ValueError(f"this explanation has {values.shape[1]} outputs: choose one with output=")
    idx = names.index(output) if isinstance(output, str) and names is not None else int(output)
    return values[:, idx]


def _pick(x: np.ndarray, output: int | str | None, names: list[str] | None) -> float:
    """One output's entry of a per-output array (a scalar stays itself)."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim == 0:
        return float(x)
    if output is None:
        if x.shape[0] == 2:
            return float(x[1])  # binary: the positive class, as SLALOM fits it
        raise ValueError(f"{x.shape[0]} outputs: choose one with output=")
    idx = names.index(output) if isinstance(output, str) and names is not None else int(output)
    return float(x[idx])


def residual_note(
    explanation: shap.Explanation | sc.SlalomExplanation,
    row: int = 0,
    output: int | str | None = None,
) -> str:
    """One line stating f(x), the surrogate's output, the residual and the reference point.

    Args:
        explanation: an *unsliced* Explanation from :class:`~shap_slalom.SlalomExplainer`
            (it carries ``model_outputs``, ``residual_values``, ``reference_values``), or an
            engine :class:`slalom_core.SlalomExplanation`.
        row: which text of a batch.
        output: class (name or index); default: the positive class of a binary model.

    Example:
        >>> residual_note(explainer(["a great movie"]), output="POSITIVE")  # doctest: +SKIP
        "f(x) = 4.11 = reference -0.20 + surrogate's share 2.86 + residual 1.45 (log-odds)"
    """
    if isinstance(explanation, sc.SlalomExplanation):
        names = explanation.class_names
        mo, ref, res = explanation.model_output, explanation.base_value, explanation.full_text_gap
    else:
        if not hasattr(explanation, "residual_values"):
            raise ValueError(
                "this Explanation has no residual_values: pass the unsliced Explanation a SlalomExplainer returned"
            )
        names = list(explanation.output_names) if explanation.output_names is not None else None
        if names is not None and np.ndim(names) > 1:
            names = list(names[row])
        mo, ref, res = (np.asarray(a)[row] for a in (explanation.model_outputs, explanation.reference_values, explanation.residual_values))
    mo, ref, res = (_pick(x, output, names) for x in (mo, ref, res))
    share = mo - res - ref
    return f"f(x) = {mo:.2f} = reference {ref:.2f} + surrogate's share {share:.2f} + residual {res:.2f} (log-odds)"


def waterfall(
    explanation: shap.Explanation,
    row: int = 0,
    output: int | str | None = None,
    *,
    max_display: int = 10,
    show: bool = False,
) -> Any:
    """``shap.plots.waterfall`` of one text, with the fit's residual stated under its title.

    shap's waterfall starts at the base value and ends at f(x). With the default
    ``additivity="model"`` that base value is the reference point plus the residual
    f(x) − surrogate(x); the note below names both, so that the residual is not mistaken
    for part of the reference.

    Args:
        explanation: the unsliced Explanation from :class:`~shap_slalom.SlalomExplainer`.
        row: which text.
        output: class (name or index); default: the positive class of a binary model.
        max_display: as in shap.
        show: call ``plt.show()``.

    Returns:
        The matplotlib Axes.

    Example:
        >>> ax = waterfall(explainer(["a great movie"]), output="POSITIVE")  # doctest: +SKIP
    """
    import matplotlib.pyplot as plt

    note = residual_note(explanation, row, output)
    if getattr(explanation, "additivity", "model") == "model":
        note += "\nbase value = reference + residual, so the bars end at f(x)"
    one = explanation[row]
    if np.ndim(one.values) == 2:
        names = list(one.output_names) if one.output_names is not None else None
        if output is None:
            if one.values.shape[1] != 2:
                raise ValueError(f"this explanation has {one.values.shape[1]} outputs: choose one with output=")
            output = 1
        idx = names.index(output) if isinstance(output, str) and names is not None else int(output)
        one = one[:, idx]
    shap.plots.waterfall(one, max_display=max_display, show=False)
    ax = plt.gca()
    ax.set_title(note, fontsize=9)
    if show:
        plt.show()
    return ax


def value_importance(
    scores: Mapping[str, shap.Explanation] | sc.SlalomExplanation,
    row: int = 0,
    output: int | str | None = None,
    *,
    ax: Any = None,
    max_labels: int = 40,
    show: bool = False,
    title: str | None = None,
) -> Any:
    """Scatter of SLALOM value (x) against importance (y), one labelled point per unique token.

    Args:
        scores: the dict from :meth:`SlalomExplainer.explain_scores` (needs "value" and
            "importance"), or an engine :class:`slalom_core.SlalomExplanation`.
        row: which text of a batch.
        output: class (name or index) for multi-output explanations; default: the positive
            class of a binary model.
        ax: a matplotlib Axes to draw into (default: a new figure).
        max_labels: label at most this many points (the largest |value|·exp(importance)).
        show: call ``plt.show()``.
        title: axes title; a second line states f(x), the surrogate's output and the
            residual (see :func:`residual_note`).

    Returns:
        The matplotlib Axes.

    Example:
        >>> ex = explainer.explain_scores(["a great movie"], scores=("value", "importance"))  # doctest: +SKIP
        >>> ax = value_importance(ex, output="POSITIVE")  # doctest: +SKIP
    """
    import matplotlib.pyplot as plt

    if isinstance(scores, sc.SlalomExplanation):
        note = residual_note(scores, output=output)
        rows = scores.unit_table()
        tokens = [r["token"] for r in rows]
        imp = np.array([r["importance"] for r in rows], dtype=np.float64)
        val = np.array([r["value"] for r in rows], dtype=np.float64)
        if val.ndim == 2:
            names = scores.class_names or []
            if output is None:
                raise ValueError("a multi-class fit: choose a class with output=")
            val = val[:, names.index(output) if isinstance(output, str) else int(output)]
    else:
        missing = {"value", "importance"} - set(scores)
        if missing:
            raise ValueError(f"the scores dict lacks {sorted(missing)}: use explain_scores(..., scores=('value', 'importance'))")
        note = residual_note(scores["value"], row, output) if hasattr(scores["value"], "residual_values") else None
        ev, ei = _row(scores["value"], row), _row(scores["importance"], row)
        v_all, s_all = _column(ev, output), _column(ei, output)
        data = [str(d) for d in ev.data]
        # value and importance belong to a token, not a position: one point per token;
        # special tokens ('' in shap's Text masker) carry no score.
        seen: dict[str, int] = {}
        for i, d in enumerate(data):
            key = d.strip()
            if key and key not in seen:
                seen[key] = i
        tokens = list(seen)
        val = v_all[list(seen.values())]
        imp = s_all[list(seen.values())]

    if ax is None:
        _, ax = plt.subplots(figsize=(6, 4.5))
    # The library's one convention (SHAP's): red pushes the output up, blue down.
    colors = np.where(val >= 0, _hex(POSITIVE_RGB), _hex(NEGATIVE_RGB))
    ax.scatter(val, imp, c=colors, s=28, alpha=0.85, edgecolors="none")
    order = np.argsort(-np.abs(val) * np.exp(imp))[:max_labels]
    for i in order:
        ax.annotate(str(tokens[i]).strip(), (val[i], imp[i]), xytext=(3, 3), textcoords="offset points", fontsize=8)
    ax.axvline(0.0, color="grey", lw=0.8, ls=":")
    ax.set_xlabel("SLALOM value v (effect of the token alone, log-odds)")
    ax.set_ylabel("SLALOM importance s (weight, mean zero)")
    # The residual is part of what this fit does (not) explain: say it beside the plot.
    if title or note:
        ax.set_title("\n".join(t for t in (title, note) if t), **({"fontsize": 9} if note else {}))
    if show:
        plt.show()
    return ax
