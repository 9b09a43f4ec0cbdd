"""Pictures of a :class:`~slalom_core.SlalomExplanation`: :func:`plot_scatter` (value against
importance per unique token, the paper's Fig. 5/11) and :func:`highlight_html` (the text
coloured by any score; :func:`save_html` writes it to a page).

Only matplotlib is needed, and nothing here opens a window or picks a backend: figures
are drawn on the Axes given, or on a new pyplot figure that the caller saves or shows.

Example:
    >>> from slalom_core import plots
    >>> ax = plots.plot_scatter(exp)  # doctest: +SKIP
    >>> ax.figure.savefig("scatter.png")  # doctest: +SKIP
    >>> plots.save_html(plots.highlight_html(exp, "lin"), "tokens.html")  # doctest: +SKIP
"""

from __future__ import annotations

import html as _html
import os
from pathlib import Path

import numpy as np

from .explanation import SlalomExplanation
from .scores import check_score
from .views.colours import NEGATIVE_RGB, POSITIVE_RGB
from .views.describe import class_name, excerpt, prediction

__all__ = ["plot_scatter", "highlight_html", "save_html"]

# The library's one convention for signed scores (views.colours): red = positive, blue = negative.
# Strongest background opacity in the highlight: full opacity would hide the text.
_MAX_ALPHA = 0.8

# Marks that byte-level BPE (GPT-2, RoBERTa: "Ġ") and SentencePiece ("▁") put on a token
# that starts a new word; WordPiece instead marks continuations with "##".
_WORD_START_MARKS = ("Ġ", "▁")


def _class_column(explanation: SlalomExplanation, class_index: int | str | None) -> int | None:
    """The class column to show: None for a single-output explanation.

    For a joint multi-class explanation the default is the class the model predicts on
    the full text (the one a reader usually asks about), else class 0.
    """
    if not explanation.surrogate.multiclass:
        if class_index is not None:
            raise ValueError(
                "class_index applies only to a joint multi-class explanation; this one explains "
                "a single output (binary log-odds or one class against the rest)"
            )
        return None
    n_classes = explanation.surrogate.value.shape[1]
    names = list(explanation.class_names or [])
    if class_index is None:
        out = explanation.model_output
        if out is not None and np.ndim(out) == 1 and len(out) == n_classes:
            return int(np.argmax(out))
        return 0
    if isinstance(class_index, str):
        if class_index not in names:
            raise ValueError(f"unknown class {class_index!r}; this explanation has classes {names}")
        return names.index(class_index)
    if isinstance(class_index, bool) or not isinstance(class_index, (int, np.integer)):
        raise TypeError(f"class_index must be an int, a class name or None, got {class_index!r}")
    if not 0 <= class_index < n_classes:
        raise ValueError(f"class_index {class_index} is out of range for {n_classes} classes")
    return int(class_index)


def _class_label(explanation: SlalomExplanation, col: int | None) -> str | None:
    if col is None:
        return None
    names = explanation.class_names
    return str(names[col]) if names is not None and col < len(names) else f"class {col}"


def _position_scores(explanation: SlalomExplanation, score: str, col: int | None) -> np.ndarray:
    """(n,) scores per position for one class column (``explanation.scores`` checks the name)."""
    values = np.asarray(explanation.scores(score), dtype=np.float64)
    if values.ndim == 2:
        # importance has no class axis; the class-dependent scores do in a joint fit.
        values = values[:, 0 if col is None else col]
    return values


# Where a label may sit around its point, in points, tried in this order: upper right first
# (the usual place), then the other corners and sides.
_LABEL_SPOTS = ((4, 3), (4, -3), (-4, 3), (-4, -3), (0, 8), (0, -8), (9, 0), (-9, 0))


def _place_labels(ax, x: np.ndarray, y: np.ndarray, labels: list[str], order: list[int]) -> int:
    """Label the points of ``order`` in turn where the label overlaps no label already placed
    and stays inside the axes; a label with no free spot is left out. Returns how many were placed.

    Greedy in the order given (the most telling first), so what is left out is the least
    telling; the test is on the drawn text's box in display coordinates.
    """
    fig = ax.figure
    try:
        renderer = fig.canvas.get_renderer()
    except AttributeError:  # a canvas that cannot measure text: label without the check
        renderer = None
    ax.autoscale_view()
    inside = ax.get_window_extent(renderer) if renderer is not None else None
    placed = []
    for u in order:
        for dx, dy in _LABEL_SPOTS:
            ha = "left" if dx > 0 else "right" if dx < 0 else "center"
            va = "bottom" if dy > 0 else "top" if dy < 0 else "center"
            text = ax.annotate(
                labels[u].replace("$", r"\$"),
                (x[u], y[u]),
                xytext=(dx, dy),
                textcoords="offset points",
                fontsize=8,
                ha=ha,
                va=va,
                zorder=3,
            )
            if renderer is None:
                break
            box = text.get_window_extent(renderer).expanded(1.05, 1.1)
            fits = inside.x0 <= box.x0 and box.x1 <= inside.x1 and inside.y0 <= box.y0 and box.y1 <= inside.y1
            if fits and not any(box.overlaps(b) for b in placed):
                placed.append(box)
                break
            text.remove()
    return len(placed) if renderer is not None else len(order)


def plot_scatter(
    explanation: SlalomExplanation,
    ax: object | None = None,
    *,
    class_index: int | str | None = None,
    annotate: bool = True,
    max_labels: int | None = 20,
    color_by: str = "lin",
    colorbar: bool = False,
):
    """Value (x) against importance (y) for each unique token: the paper's Fig. 5/11.

    The title gives the start of the text, the predicted class and the class explained.
    Labels never overlap: the tokens with the largest |``color_by``| are labelled first,
    each at the first free spot around its point; a label with no free spot is left out
    (the title says how many tokens are labelled).

    Args:
        explanation: the explanation to draw.
        ax: matplotlib Axes to draw on; a new figure is made if None.
        class_index: for a joint multi-class explanation, the class (index or name) whose
            values to show; default: the class the model predicts for the text.
        annotate: write the tokens next to their points.
        max_labels: try to label at most this many points (None: all), those with the
            largest |``color_by``|: tokens with middling scores crowd the centre and carry
            little information.
        color_by: the score (any of :data:`slalom_core.SCORE_NAMES`) that colours the
            points, blue negative to red positive. Position-level scores are averaged over a
            token's occurrences (they are equal for repeats, up to Shapley sampling noise).
        colorbar: add a colour bar for ``color_by``.

    Point area grows with the number of times a token occurs in the text.

    Returns:
        The Axes. A figure made here belongs to pyplot: close it (``plt.close(ax.figure)``)
        after saving when drawing many.

    Example:
        >>> ax = plot_scatter(exp, max_labels=10)  # doctest: +SKIP
        >>> ax.figure.savefig("slalom_scatter.png", dpi=150)  # doctest: +SKIP
    """
    check_score(color_by)
    if max_labels is not None and max_labels < 0:
        raise ValueError(f"max_labels must be >= 0 or None, got {max_labels}")
    col = _class_column(explanation, class_index)
    from matplotlib.colors import LinearSegmentedColormap, Normalize

    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=(7.2, 5.4))

    sur = explanation.surrogate
    n_units = sur.n_units
    x = np.asarray(sur.value, dtype=np.float64)
    x = x[:, col] if x.ndim == 2 else x
    y = np.asarray(sur.importance, dtype=np.float64)
    unit_index = np.asarray(explanation.unit_index, dtype=np.int64)
    counts = np.maximum(np.bincount(unit_index, minlength=n_units), 1.0)  # occurrences, >= 1 to divide by
    labels = [""] * n_units
    for pos in range(len(unit_index) - 1, -1, -1):  # backwards: the first occurrence wins
        labels[unit_index[pos]] = str(explanation.tokens[pos])

    per_pos = _position_scores(explanation, color_by, col)
    c = np.bincount(unit_index, weights=per_pos, minlength=n_units) / counts
    lim = float(np.max(np.abs(c))) if c.size else 0.0
    cmap = LinearSegmentedColormap.from_list(
        "slalom_rb", [tuple(v / 255 for v in NEGATIVE_RGB), (0.85, 0.85, 0.85), tuple(v / 255 for v in POSITIVE_RGB)]
    )
    norm = Normalize(-lim if lim > 0 else -1.0, lim if lim > 0 else 1.0)

    ax.axhline(float(np.mean(y)) if y.size else 0.0, color="0.8", lw=0.8, zorder=0)
    ax.axvline(0.0, color="0.8", lw=0.8, zorder=0)
    size = 36.0 * np.sqrt(counts)
    points = ax.scatter(x, y, c=c, cmap=cmap, norm=norm, s=size, edgecolors="0.25", linewidths=0.5, zorder=2)

    cls = _class_label(explanation, col)
    ax.set_xlabel("value v (effect of the token alone)" + (f", class {cls}" if cls else ""))
    ax.set_ylabel("importance s (weight against other tokens)")
    if colorbar:  # before the labels: the bar narrows the axes the labels must fit in
        ax.figure.colorbar(points, ax=ax, label=color_by + (f" ({cls})" if cls else ""))
    placed = 0
    if annotate and n_units:
        # The most telling first: largest |score|, ties broken by first occurrence.
        order = np.argsort(-np.nan_to_num(np.abs(c)), kind="stable")
        if max_labels is not None:
            order = order[:max_labels]
        placed = _place_labels(ax, x, y, labels, order.tolist())
    pred = prediction(explanation)
    head = f"“{excerpt(explanation, 60)}”"
    line = ("predicted " + pred + " · " if pred else "") + "explained " + (cls or class_name(explanation, None))
    note = f"\n{placed} of {n_units} tokens labelled, largest |{color_by}| first" if annotate else ""
    # "$" would start matplotlib's mathtext: a text's dollars are shown as dollars.
    ax.set_title(f"{head}\n{line}{note}".replace("$", r"\$"), fontsize=9)
    return ax


def _display_tokens(explanation: SlalomExplanation) -> list[tuple[str, bool]]:
    """(text to show, space before it?) per position, undoing the tokenizer's word marks."""
    tokens = [str(t) for t in explanation.tokens]
    if explanation.granularity == "word":
        return [(t, i > 0) for i, t in enumerate(tokens)]
    if any(t.startswith(_WORD_START_MARKS) for t in tokens):
        out = []
        for i, t in enumerate(tokens):
            starts = t.startswith(_WORD_START_MARKS)
            shown = t[1:] if starts else t
            shown = shown.replace("Ċ", "↵")  # byte-level BPE's newline
            # A bare mark (a lone space token) keeps a visible, hoverable width.
            out.append((shown or "\u00a0", i > 0 and starts))
        return out
    # WordPiece (BERT) or plain words: a space before every token but "##" continuations.
    out = []
    for i, t in enumerate(tokens):
        cont = t.startswith("##") and len(t) > 2
        out.append((t[2:] if cont else t, i > 0 and not cont))
    return out


def _rgba(x: float, scale: float) -> str:
    rgb = POSITIVE_RGB if x > 0 else NEGATIVE_RGB
    alpha = 0.0 if scale <= 0 or not np.isfinite(x) else _MAX_ALPHA * min(abs(x) / scale, 1.0)
    return f"rgba({rgb[0]}, {rgb[1]}, {rgb[2]}, {alpha:.3f})"


def highlight_html(
    explanation: SlalomExplanation,
    score: str = "lin",
    *,
    class_index: int | str | None = None,
) -> str:
    """The text as HTML, each position's token coloured by ``score``.

    Colours: red for positive, blue for negative scores, opacity proportional to
    ``|score| / max |score|`` over the text. Each position is one ``<span>`` whose title
    (hover text) gives the number; tokens are HTML-escaped. WordPiece continuations
    ("##ing") are joined to the previous token without a space and shown without "##";
    byte-level BPE ("Ġ") and SentencePiece ("▁") word marks become spaces. The snippet uses
    inline styles only, so it can be pasted into any page or notebook cell.

    Args:
        explanation: the explanation to show.
        score: any of :data:`slalom_core.SCORE_NAMES` ("lin" by default).
        class_index: for a joint multi-class explanation, the class (index or name); default:
            the class the model predicts for the text.

    Returns:
        An HTML ``<div>`` (a fragment, not a whole document; see :func:`save_html`).

    Example:
        >>> snippet = highlight_html(exp, "importance")  # doctest: +SKIP
        >>> from IPython.display import HTML; HTML(snippet)  # doctest: +SKIP
    """
    check_score(score)
    col = _class_column(explanation, class_index)
    values = _position_scores(explanation, score, col)
    finite = values[np.isfinite(values)]
    scale = float(np.max(np.abs(finite))) if finite.size else 0.0
    cls = _class_label(explanation, col)

    parts = []
    for (shown, space), val in zip(_display_tokens(explanation), values.tolist()):
        if space:
            parts.append(" ")  # outside the spans: one span per position, nothing else
        title = f"{score} = {val:+.4g}"
        parts.append(
            f'<span class="slalom-token" style="background-color: {_rgba(val, scale)}; '
            f'padding: 0 1px; border-radius: 3px;" title="{_html.escape(title, quote=True)}">'
            f"{_html.escape(shown, quote=True)}</span>"
        )
    caption = f"SLALOM {score}" + (f" for class {cls}" if cls else "")
    caption += f" · red positive, blue negative · max |{score}| = {scale:.4g}"
    return (
        '<div class="slalom-highlight" style="font-family: sans-serif; line-height: 1.9; '
        'color: #111; background: #fff; padding: 4px;">'
        f'<div class="slalom-caption" style="font-size: 0.8em; color: #555;">{_html.escape(caption)}</div>'
        f'<div class="slalom-text">{"".join(parts)}</div>'
        "</div>"
    )


def save_html(html: str, path: str | os.PathLike) -> Path:
    """Write ``html`` to ``path`` as a UTF-8 page (a fragment is wrapped in a document).

    Returns:
        The path written.

    Example:
        >>> save_html(highlight_html(exp), "explanation.html")  # doctest: +SKIP
        PosixPath('explanation.html')
    """
    if not isinstance(html, str):
        raise TypeError(f"html must be a str, got {type(html).__name__}")
    path = Path(path)
    head = html.lstrip()[:15].lower()
    if not (head.startswith("<!doctype") or head.startswith("<html")):
        html = (
            '<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>SLALOM explanation</title></head>\n'
            f"<body>\n{html}\n</body></html>\n"
        )
    path.write_text(html, encoding="utf-8")
    return path
