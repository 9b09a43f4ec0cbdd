"""Captum's text visualisation for SLALOM scores."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from captum.attr import visualization as _viz
from torch import Tensor

__all__ = ["visualization_record", "normalise_scores"]


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
