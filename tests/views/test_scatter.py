"""The value-against-importance scatter stays readable on a long text."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
from slalom_core import plots
from slalom_core.views.describe import prediction


def _boxes(ax):
    renderer = ax.figure.canvas.get_renderer()
    return [t.get_window_extent(renderer) for t in ax.texts]


def test_labels_of_a_long_text_never_overlap_and_title_names_text_and_prediction(bert_exp):
    ax = plots.plot_scatter(bert_exp, max_labels=None, colorbar=True)
    boxes = _boxes(ax)
    assert len(boxes) >= 3
    assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1 :])
    inside = ax.get_window_extent(ax.figure.canvas.get_renderer())
    assert all(inside.x0 <= b.x0 and b.x1 <= inside.x1 for b in boxes)
    title = ax.get_title()
    assert "The Movie was GREAT" in title and f"predicted {prediction(bert_exp)}" in title
    assert f"{len(boxes)} of {bert_exp.surrogate.n_units} tokens labelled" in title
    width = ax.title.get_window_extent(ax.figure.canvas.get_renderer()).width
    assert width <= ax.figure.bbox.width  # the title fits the figure
    plt.close(ax.figure)


def test_many_points_at_one_place_get_one_label(word_exp):
    # Every unit drawn at the same point: only one label fits there, the rest are left out.
    exp = type(word_exp).from_dict(word_exp.to_dict())
    exp.surrogate.value = np.zeros_like(exp.surrogate.value) + 0.5
    exp.surrogate.importance = np.zeros_like(exp.surrogate.importance)
    ax = plots.plot_scatter(exp, max_labels=None, color_by="value")
    assert 1 <= len(ax.texts) <= 8  # at most one label per free spot around the point
    boxes = _boxes(ax)
    assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1 :])
    plt.close(ax.figure)
