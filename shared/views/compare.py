"""One view of several explanations, or several scores, of the same text.

Each row is the text in the two-channel style of :mod:`.html` (its score as diverging
colour, its explanation's importance as underline and weight), under a label, with the
row's fit diagnostics and, where given, faithfulness figures. Rows compare methods
(eff-slope against hybrid, two seeds, two sample budgets) or scores of one fit (value
against contribution against removal).

Example:
    >>> page = compare_html([exp_eff, exp_hybrid], scores=["value", "contribution"])  # doctest: +SKIP
    >>> page = compare_html(exp, scores=list(slalom_core.SCORES)[:1] + ["lin", "removal"])  # doctest: +SKIP
"""

from __future__ import annotations

import html as _html
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from ..scores import SCORES
from . import describe
from .html import check_view_score, document, scale_of, style_sheet, text_row

if TYPE_CHECKING:
    from ..explained import Explained as SlalomExplanation  # the protocol: views look down

__all__ = ["compare_html", "comparison_rows"]


def _esc(s: object) -> str:
    return _html.escape(str(s), quote=True)


def _shown_column(exp: SlalomExplanation, class_index: int | str | None) -> int | None:
    """The class column a row shows: None for one explained output; for a joint fit the
    class asked for, else the predicted one (every row then shows the same class)."""
    cols = describe.class_columns(exp)
    if cols == [None]:
        return None
    names = list(exp.class_names or [])
    if class_index is None:
        return int(np.argmax(np.asarray(exp.model_output))) if exp.model_output is not None else 0
    if isinstance(class_index, str):
        if class_index not in names:
            raise ValueError(f"unknown class {class_index!r}; the explanations have classes {names}")
        return names.index(class_index)
    if not 0 <= int(class_index) < len(cols):
        raise ValueError(f"class_index {class_index} is out of range for {len(cols)} classes")
    return int(class_index)


def _same_text(explanations: Sequence[SlalomExplanation]) -> None:
    first = explanations[0]
    for e in explanations[1:]:
        if first.text is not None and e.text is not None:
            same = first.text == e.text
        else:
            same = list(first.tokens) == list(e.tokens)
        if not same:
            raise ValueError("compare_html shows explanations of one text: these explain different texts")


def comparison_rows(
    explanations: SlalomExplanation | Sequence[SlalomExplanation],
    *,
    scores: Sequence[str] = ("contribution",),
    labels: Sequence[str] | None = None,
) -> list[tuple[SlalomExplanation, str, str]]:
    """The rows of a comparison: every explanation with every score, as ``(exp, score, label)``.

    Args:
        explanations: one explanation, or several of the same text.
        scores: the scores coloured, each a row per explanation (any of the table but importance).
        labels: one label per explanation (default its method); the score is added when
            there are several.

    Returns:
        A list of ``(explanation, score, row label)``, explanations outer, scores inner.

    Example:
        >>> [label for _, _, label in comparison_rows(exp, scores=["value", "lin"])]  # doctest: +SKIP
        ['eff-slope · value', 'eff-slope · lin']
    """
    exps = [explanations] if not isinstance(explanations, Sequence) else list(explanations)
    if not exps:
        raise ValueError("nothing to compare: give at least one explanation")
    scores = [scores] if isinstance(scores, str) else list(scores)
    if not scores:
        raise ValueError("give at least one score")
    for s in scores:
        check_view_score(s)
    if labels is not None and len(labels) != len(exps):
        raise ValueError(f"{len(labels)} labels for {len(exps)} explanations")
    _same_text(exps)
    names = list(labels) if labels is not None else [e.method for e in exps]
    return [(e, s, f"{n} · {s}") for e, n in zip(exps, names) for s in scores]


def _faithfulness_line(figures: Mapping[str, float] | None) -> str:
    if not figures:
        return ""
    parts = " · ".join(f"{_esc(k)} {float(v):.3g}" for k, v in figures.items())
    return f'<p class="slx-faith">faithfulness: {parts}</p>'


def compare_html(
    explanations: SlalomExplanation | Sequence[SlalomExplanation],
    *,
    scores: Sequence[str] = ("contribution",),
    labels: Sequence[str] | None = None,
    faithfulness: Sequence[Mapping[str, float] | None] | Mapping[str, Mapping[str, float]] | None = None,
    class_index: int | str | None = None,
    full_page: bool = True,
) -> str:
    """Stacked rows of one text, one per explanation and score, in the two-channel style.

    Rows of one score share one symmetric colour scale, pooled over them (the largest
    |score|, at most three times the second largest, so that one extreme value does not whiten
    every other row; a token beyond it is clipped and ringed), so equal colours mean equal
    numbers down the page. Each row has its explanation's importance as underline and
    weight (neutral where the data do not determine it), the fit's diagnostics and the
    faithfulness figures given for it.

    Args:
        explanations: one explanation, or several of the same text (methods, seeds, budgets).
        scores: the scores coloured; each explanation gets one row per score.
        labels: a label per explanation (default: its method).
        faithfulness: per row, a ``{metric: number}`` (e.g. deletion AOPC), as a list in
            row order or a dict keyed by row label (``"label · score"``); None: no figures.
        class_index: for joint multi-class fits, the class shown (default: the predicted).
        full_page: a whole offline page (True) or a fragment.

    Returns:
        The HTML as a str.

    Example:
        >>> html = compare_html([a, b], labels=["eff-slope", "hybrid"], faithfulness=[{"AOPC": 0.8}, None])  # doctest: +SKIP
    """
    rows = comparison_rows(explanations, scores=scores, labels=labels)
    if faithfulness is None:
        figures: list[Mapping[str, float] | None] = [None] * len(rows)
    elif isinstance(faithfulness, Mapping):
        unknown = set(faithfulness) - {label for _, _, label in rows}
        if unknown:
            raise ValueError(f"faithfulness names rows that do not exist: {sorted(unknown)}")
        figures = [faithfulness.get(label) for _, _, label in rows]
    else:
        figures = list(faithfulness)
        if len(figures) != len(rows):
            raise ValueError(f"{len(figures)} faithfulness entries for {len(rows)} rows")
    first = rows[0][0]
    pred = describe.prediction(first)
    title = f"Comparison · {describe.excerpt(first, 60)}" + (f" · predicted {pred}" if pred else "")
    cols = [_shown_column(exp, class_index) for exp, _, _ in rows]
    scales = {
        score: scale_of(*(describe.position_scores(e, c)[score] for (e, s, _), c in zip(rows, cols) if s == score))
        for score in dict.fromkeys(s for _, s, _ in rows)
    }
    body = [
        f"<h2>{_esc(title)}</h2>",
        '<p class="slx-meta">Colour: the row\'s score, red positive, blue negative, white 0, symmetric '
        "around 0; one scale per score for every row ("
        + _esc(", ".join(f"{k} ±{v:.3g}" for k, v in scales.items()))
        + "): full colour at the largest |score| of the rows, at most three times the second largest; a ringed token "
        "lies beyond (clipped). Underline and weight: the row's importance s, thin for the text's lowest, thick "
        "and bold for its highest; no underline where the data do not determine it. Hover or focus a token for "
        "every score with its standard error.</p>",
    ]
    for (exp, score, label), figs, col in zip(rows, figures, cols):
        scale = scales[score]
        cls = f" · class {describe.class_name(exp, col)}" if col is not None else ""
        body.append(
            f'<section class="slx-row" data-label="{_esc(label)}" data-score="{_esc(score)}">'
            f'<div class="slx-row-label">{_esc(label)}{_esc(cls)}</div>'
            f'<p class="slx-fit">{_esc(describe.fit_line(exp))} · colour ±{scale:.3g} '
            f"({_esc(SCORES[score].unit)})</p>"
            f"{_faithfulness_line(figs)}{text_row(exp, score=score, col=col, scale=scale)}</section>"
        )
    view = f'<div class="slx-view slx-compare">{"".join(body)}</div>'
    if full_page:
        return document(view, title=title)
    return f"<style>{style_sheet()}</style>{view}"
