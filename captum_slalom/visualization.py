"""Captum's text visualisation for SLALOM scores.

Signed scores (value, lin, contribution, ...) go through Captum's own ``visualize_text``
(:func:`visualization_record`), whose legend reads Negative / Neutral / Positive. The
importance has no sign (a log-weight, mean zero over the text only by convention): it is
drawn on a sequential scale with a legend of its own (:func:`importance_record`,
:func:`importance_html`), never beside a Negative/Positive legend.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from captum.attr import visualization as _viz
from torch import Tensor

__all__ = ["visualization_record", "normalise_scores", "importance_record", "importance_html"]


def normalise_scores(scores: Tensor | np.ndarray | Sequence[float]) -> Tensor:
    """Scale scores into [-1, 1] by their largest magnitude, keeping signs and zeros.

    ``visualize_text`` clips colours to [-1, 1]; SLALOM's values and lin scores are
    log-odds and often exceed it, so they must be scaled first.

    Example:
        >>> normalise_scores([2.0, -1.0, 0.0]).tolist()
        [1.0, -0.5, 0.0]
    """
    t = torch.as_tensor(scores, dtype=torch.float64).detach().cpu().flatten()
    peak = t.abs().max() if t.numel() else torch.tensor(0.0, dtype=torch.float64)
    return (t / peak if peak > 0 else t).to(torch.get_default_dtype())


def visualization_record(
    attributions: Tensor | np.ndarray | Sequence[float],
    tokens: Sequence[str],
    *,
    pred_prob: float,
    pred_class: int | str,
    true_class: int | str,
    attr_class: int | str,
    attr_score: float | None = None,
    convergence_score: float = float("nan"),
    normalise: bool = True,
) -> _viz.VisualizationDataRecord:
    """A ``VisualizationDataRecord`` for ``captum.attr.visualization.visualize_text``.

    Args:
        attributions: one score per token (one row of ``SlalomAttribution.attribute``).
        tokens: the token strings, same length.
        pred_prob, pred_class, true_class, attr_class: shown in the table, as in Captum.
        attr_score: shown as "Attribution Score"; default: the sum of the raw scores.
        convergence_score: SLALOM has no convergence delta; NaN by default.
        normalise: scale scores into [-1, 1] (:func:`normalise_scores`) so that the
            colours are not clipped.

    Example:
        >>> from captum.attr import visualization as viz
        >>> rec = visualization_record([1.5, -0.3], ["great", "plot"], pred_prob=0.9,
        ...                            pred_class=1, true_class=1, attr_class=1)
        >>> rec.word_attributions.tolist()
        [1.0, -0.20000000298023224]
    """
    raw = torch.as_tensor(attributions, dtype=torch.float64).detach().cpu().flatten()
    if raw.numel() == 1 and len(tokens) > 1:
        raise ValueError(
            f"one score for {len(tokens)} tokens: were the scores summed over their last axis? Captum's "
            "tutorial helper summarize_attributions (attributions.sum(dim=-1)) is for an embedding layer's "
            "(1, n, hidden) attributions; SLALOM's (and Lime's) on token ids are already one score per token, "
            "shape (1, n): pass attr[0]"
        )
    if len(tokens) != raw.numel():
        raise ValueError(f"{raw.numel()} scores for {len(tokens)} tokens")
    shown = normalise_scores(raw) if normalise else raw.to(torch.get_default_dtype())
    return _viz.VisualizationDataRecord(
        shown,
        float(pred_prob),
        pred_class,  # type: ignore[arg-type]
        true_class,  # type: ignore[arg-type]
        attr_class,  # type: ignore[arg-type]
        float(raw.sum()) if attr_score is None else float(attr_score),
        list(tokens),
        convergence_score,
    )


def importance_record(
    importance: Tensor | np.ndarray | Sequence[float],
    tokens: Sequence[str],
    *,
    pred_prob: float,
    pred_class: int | str,
    attr_class: int | str,
    label: str = "SLALOM importance",
    determined: Tensor | np.ndarray | Sequence[bool] | None = None,
    features: Tensor | np.ndarray | Sequence[bool] | None = None,
) -> _viz.VisualizationDataRecord:
    """A record of the importance on a sequential scale, for :func:`importance_html`.

    Each token's shade runs from light (the text's lowest importance, 0.1) to full (its
    highest, 1.0); a token whose importance the data do not determine (``determined``
    False, e.g. from :attr:`slalom_core.SlalomExplanation.importance_determined`) and a
    position that is no feature (``features`` False: special tokens) are left white.

    Args:
        importance: one importance per token (a row of ``result.importance``).
        tokens: the token strings, same length.
        pred_prob, pred_class, attr_class: shown in the table, as in Captum.
        label: the row's name (Captum's "True Label" column).
        determined: per token, whether the data determine its importance (default: all).
        features: per token, whether it is a feature (default: every token).

    Example:
        >>> rec = importance_record([0.5, -0.5, 0.0], ["great", "plot", "[SEP]"], pred_prob=0.9, pred_class=1,
        ...                         attr_class=1, features=[True, True, False])
        >>> [round(x, 2) for x in rec.word_attributions.tolist()]
        [1.0, 0.1, 0.0]
    """
    s = torch.as_tensor(importance, dtype=torch.float64).detach().cpu().flatten()
    if len(tokens) != s.numel():
        raise ValueError(f"{s.numel()} importances for {len(tokens)} tokens")
    feat = torch.ones_like(s, dtype=torch.bool) if features is None else torch.as_tensor(features).bool().flatten()
    known = torch.ones_like(s, dtype=torch.bool) if determined is None else torch.as_tensor(determined).bool().flatten()
    if feat.numel() != s.numel() or known.numel() != s.numel():
        raise ValueError("determined and features need one entry per token")
    shown = feat & known
    level = torch.zeros_like(s)
    if shown.any():
        lo, hi = s[shown].min(), s[shown].max()
        span = (s - lo) / (hi - lo) if hi > lo else torch.full_like(s, 0.5)
        level = torch.where(shown, 0.1 + 0.9 * span.clamp(0, 1), 0.0)
    return _viz.VisualizationDataRecord(
        level.to(torch.get_default_dtype()),
        float(pred_prob),
        pred_class,  # type: ignore[arg-type]
        label,  # type: ignore[arg-type]
        attr_class,  # type: ignore[arg-type]
        float("nan"),
        list(tokens),
        float("nan"),
    )


def importance_html(records: Sequence[_viz.VisualizationDataRecord]) -> str:
    """Importance rows (from :func:`importance_record`) in Captum's table layout, under a
    legend that fits a score without sign: white to green = the text's lowest to highest
    importance, white also where the data do not determine it.

    Example:
        >>> from IPython.display import HTML; HTML(importance_html([rec]))  # doctest: +SKIP
    """
    import html

    rows = "".join(
        "<tr>"
        + _viz.format_classname(r.true_class)
        + _viz.format_classname(f"{r.pred_class} ({r.pred_prob:.2f})")
        + _viz.format_classname(r.attr_class)
        + _viz.format_word_importances(r.raw_input_ids, r.word_attributions)
        + "</tr>"
        for r in records
    )

    def green(level: float) -> str:  # Captum's shade of a positive score (format_word_importances)
        return f"hsl(120, 75%, {100 - int(50 * level)}%)"

    swatch = '<span style="display:inline-block;width:10px;height:10px;border:1px solid;background-color:{}"></span>'
    legend = (
        '<div style="border-top: 1px solid; margin-top: 5px; padding-top: 5px; display: inline-block">'
        f"<b>Legend (importance, no sign): </b>{swatch.format(green(0.1))} the text's lowest "
        f"{swatch.format(green(1.0))} its highest "
        f"{swatch.format(green(0.0))} {html.escape('not determined by the data, or no feature')}</div>"
    )
    heads = "<tr><th>Row</th><th>Predicted Label</th><th>Attribution Label</th><th>Word Importance</th></tr>"
    return f"<table width: 100%>{legend}{heads}{rows}</table>"
