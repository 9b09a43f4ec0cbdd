"""SLALOM's own plot: value against importance, one point per unique token.

SHAP's plots show one number per token; SLALOM has two (paper Sec. 5.1, Fig. 4): the value
v (effect of the token alone, x axis) and the importance s (how much weight it takes from
the rest, y axis). Tokens far right/left push the prediction; tokens high up dominate it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import shap

import slalom_core as sc

__all__ = ["value_importance"]


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
        title: axes title.

    Returns:
        The matplotlib Axes.

    Example:
        >>> ex = explainer.explain_scores(["a great movie"], scores=("value", "importance"))  # doctest: +SKIP
        >>> ax = value_importance(ex, output="POSITIVE")  # doctest: +SKIP
    """
    import matplotlib.pyplot as plt

    if isinstance(scores, sc.SlalomExplanation):
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
    colors = np.where(val >= 0, "#d62728", "#1f77b4")  # SHAP's red = pushes the output up
    ax.scatter(val, imp, c=colors, s=28, alpha=0.85, edgecolors="none")
    order = np.argsort(-np.abs(val) * np.exp(imp))[:max_labels]
    for i in order:
        ax.annotate(str(tokens[i]).strip(), (val[i], imp[i]), xytext=(3, 3), textcoords="offset points", fontsize=8)
    ax.axvline(0.0, color="grey", lw=0.8, ls=":")
    ax.set_xlabel("SLALOM value v (effect of the token alone, log-odds)")
    ax.set_ylabel("SLALOM importance s (weight, mean zero)")
    if title:
        ax.set_title(title)
    if show:
        plt.show()
    return ax
