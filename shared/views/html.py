"""The view of one explanation: a self-contained HTML page or fragment.

What a reader sees first is what each token did to this prediction, in the field's usual
terms (Captum's and SHAP's text plots): the sum from the reference point b through the
tokens' additive ``contribution`` to the surrogate's output F(x), beside the model's own
f(x), as a sentence and a force bar; the text coloured by contribution (red raises the
explained output, blue lowers it, white 0, one symmetric scale); the top tokens ranked; a
table of every position (see :mod:`.sections`).

SLALOM's two channels are one click away on the same page (a tab drawn by CSS alone):

- the value v as the background colour, on the same kind of diverging scale;
- the importance s as underline thickness and font weight, on a sequential scale from the
  text's smallest to its largest importance. An importance the data do not determine
  (:attr:`~slalom_core.SlalomExplanation.importance_determined`) is drawn neutral (no
  underline, normal weight) and its tooltip says so.

Colour scales are full at the largest |score| but at most three times the second largest (one
extreme value does not wash out the rest); a token beyond is clipped and ringed.

Hover or keyboard focus (every token is a tab stop) shows every score of the score table
with its standard error where the method gives one. Every token element carries the
numbers as data attributes (``data-value``, ``data-importance``, ``data-lin``, ... and
``data-value-se``, ``data-importance-se``) to 6 significant digits, so tools can read them
back (the tooltip is drawn by CSS from them; exact numbers: :meth:`SlalomExplanation.save`).
Pages load nothing: inline CSS and SVG, no script, no external URL, and a
Content-Security-Policy that forbids any request; all text is escaped.

Example:
    >>> page = to_html(exp)  # doctest: +SKIP
    >>> Path("explanation.html").write_text(page, encoding="utf-8")  # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import html as _html
from typing import TYPE_CHECKING

import numpy as np

from ..fit_quality import DETERMINED_RULE, fit_flags
from ..scores import SCORES, check_score
from . import describe, sections
from .colours import MAX_MIX, css_rgb, diverging_rgb, sequential_level
from .surface import layout

if TYPE_CHECKING:
    from ..explained import Explained as SlalomExplanation  # the protocol: views look down

__all__ = [
    "STYLE",
    "CSP",
    "to_html",
    "explanation_fragment",
    "text_row",
    "legend",
    "document",
    "check_view_score",
    "scale_of",
    "style_sheet",
    "IMPORTANCE_STEPS",
]

#: Nothing may be fetched: no script, no font, no image but inline data, no connection.
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"

_FULL_POS = css_rgb(diverging_rgb(1.0, scale=1.0))
_FULL_NEG = css_rgb(diverging_rgb(-1.0, scale=1.0))

_BASE_STYLE = f"""
.slx-view {{ font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #111;
  background: #fff; max-width: 60rem; padding: 0.5rem 1rem; }}
.slx-view h2 {{ font-size: 1.15rem; margin: 0.3rem 0; }}
.slx-view h3 {{ font-size: 1rem; margin: 0.8rem 0 0.2rem; }}
.slx-check {{ font-size: 0.85rem; margin: 0.15rem 0; color: #333; }}
.slx-flagged {{ color: #611; background: #fdecea; border: 1px solid #e0a39d; padding: 0.2rem 0.5rem; }}
.slx-meta, .slx-fit, .slx-faith {{ font-size: 0.85rem; color: #333; margin: 0.15rem 0; }}
.slx-legend {{ display: flex; flex-wrap: wrap; gap: 0.6rem 2rem; font-size: 0.8rem; color: #333;
  margin: 0.5rem 0; }}
.slx-legend figure {{ margin: 0; }}
.slx-legend figcaption {{ max-width: 26rem; margin-top: 0.3rem; }}
.slx-bar {{ width: 14rem; height: 0.8rem; border: 1px solid #999;
  background: linear-gradient(to right, {_FULL_NEG}, #fff, {_FULL_POS}); }}
.slx-ticks {{ display: flex; justify-content: space-between; width: 14.2rem; }}
.slx-text {{ font-size: 1.05rem; line-height: 2.1; white-space: pre-wrap; overflow-wrap: anywhere; }}
.slx-tok {{ position: relative; border-radius: 3px; padding: 0 1px; text-decoration-line: underline;
  text-underline-offset: 0.28em; text-decoration-skip-ink: none; cursor: default; }}
.slx-empty::before {{ content: "\\00b7"; color: #777; }}
.slx-tok:focus {{ outline: 2px solid #000; outline-offset: 1px; }}
.slx-tok[data-position]:hover::after, .slx-tok[data-position]:focus::after {{ position: absolute; left: 0;
  top: 1.9em; z-index: 10; white-space: pre; background: #fff; color: #111; border: 1px solid #777;
  border-radius: 4px; padding: 0.3rem 0.5rem; font: 400 0.8rem/1.4 ui-monospace, Menlo, Consolas, monospace;
  box-shadow: 0 2px 6px rgba(0,0,0,0.25); pointer-events: none; }}
.slx-row {{ border-top: 1px solid #ddd; padding: 0.3rem 0; }}
.slx-row-label {{ font-weight: 600; font-size: 0.9rem; }}
.slx-flat, .slx-sn {{ text-decoration-line: none; font-weight: 400; }}
.slx-clip {{ box-shadow: 0 0 0 1.5px #222; }}
.slx-tab {{ position: absolute; opacity: 0; pointer-events: none; }}
.slx-tab + label {{ display: inline-block; padding: 0.25rem 0.7rem; margin: 0.5rem 0.2rem 0 0; border: 1px solid #999;
  border-bottom: none; border-radius: 5px 5px 0 0; font-size: 0.85rem; cursor: pointer; background: #f3f3f3; }}
.slx-tab:checked + label {{ background: #fff; font-weight: 600; }}
.slx-tab:focus-visible + label {{ outline: 2px solid #000; }}
.slx-panel {{ border-top: 1px solid #999; padding-top: 0.2rem; }}
.slx-panel-b, .slx-tab-b:checked ~ .slx-panel-a {{ display: none; }}
.slx-tab-b:checked ~ .slx-panel-b {{ display: block; }}
"""
#: Steps of the importance scale (classes ``slx-s0`` .. ``slx-s8``): a class per token, not
#: three inline properties, keeps long texts' pages small.
IMPORTANCE_STEPS = 9


def _importance_rule(q: float) -> str:
    # Four weights: most system fonts have only a few, and the browser picks the nearest.
    # The lowest is the normal weight with dark text: a low importance is a thin underline,
    # never a greyed-out ("ignored") word.
    weight = (400, 400, 600, 700)[min(int(q * 4), 3)]
    return (
        f"font-weight: {weight}; text-decoration-thickness: {0.75 + 3.25 * q:.2f}px; "
        f"text-decoration-color: rgba(0, 0, 0, {0.45 + 0.55 * q:.2f});"
    )


def _tooltip_rule(with_se: bool) -> str:
    """The hover and focus text, read from the token's data attributes by CSS: every score
    of the table (so one registered later shows too), with its standard error where given."""
    parts = ['attr(data-token) " · position " attr(data-position)']
    for name in SCORES:
        part = f'"\\A {name:<13}" attr(data-{name})'
        if with_se and name in describe.STANDARD_ERRORS:
            part += f' " ± " attr(data-{name}-se) " (SE)"'
        parts.append(part)
    parts.append("attr(data-note)")  # "importance not determined by the data", where it is not
    has_se = "".join(f"[data-{n}-se]" for n in describe.STANDARD_ERRORS)
    sel = f"[data-position]{has_se}" if with_se else f"[data-position]:not({has_se.split(']')[0]}])"
    return f".slx-tok{sel}:hover::after, .slx-tok{sel}:focus::after {{ content: {' '.join(parts)}; }}"


def style_sheet() -> str:
    """The views' style sheet, read from the score table now (every class starts with ``slx-``).

    Example:
        >>> ".slx-s8" in style_sheet() and "attr(data-importance)" in style_sheet()
        True
    """
    steps = "\n".join(
        f".slx-s{k} {{ {_importance_rule(k / (IMPORTANCE_STEPS - 1))} }}" for k in range(IMPORTANCE_STEPS)
    )
    return f"{_BASE_STYLE}{sections.SECTION_STYLE}{steps}\n{_tooltip_rule(True)}\n{_tooltip_rule(False)}\n"


#: The style sheet as the score table stands at import (:func:`style_sheet` reads it anew).
STYLE = style_sheet()


def _esc(s: object) -> str:
    return _html.escape(str(s), quote=True)


def _num(x: float, signed: bool = True) -> str:
    """A number for a data attribute and the tooltip: 6 significant digits (exact numbers
    are in the saved explanation, :meth:`SlalomExplanation.save`)."""
    return f"{float(x):+.6g}" if signed else f"{float(x):.6g}"


def check_view_score(score: str) -> str:
    """``score`` if it can be the colour channel: a score of the table other than importance.

    Importance has no sign and no zero of its own; it is the view's second channel.

    Example:
        >>> check_view_score("lin")
        'lin'
    """
    check_score(score)
    if score == "importance":
        raise ValueError(
            "importance is the view's second channel (underline and weight) and has no sign to colour: "
            f"choose a signed score for score=, one of {tuple(n for n in SCORES if n != 'importance')}"
        )
    return score


def _step(q: float) -> int:
    """The importance class of a level q in [0, 1]."""
    return min(int(round(q * (IMPORTANCE_STEPS - 1))), IMPORTANCE_STEPS - 1)


def scale_of(*values: np.ndarray) -> float:
    """The symmetric colour scale of one or more rows of a score, pooled: the largest finite
    |score|, at most three times the second largest (1 if all are 0); see
    :func:`.sections.robust_scale`.

    Example:
        >>> scale_of(np.array([0.5, -1.0, np.nan])), scale_of(np.array([1.0, 3.0]), np.array([2037.0]))
        (1.0, 9.0)
    """
    return sections.robust_scale(*values)


#: The tooltip of an undetermined importance: the rule in the words the docs use.
_NOT_DETERMINED = f"\nimportance not determined by the data ({DETERMINED_RULE}; this one is not): drawn neutral"

#: A colour scale never spans less than this share of the model's move from the reference
#: point (nor less than this many log-odds): scores below it are float rounding, not signal.
NOISE_SHARE = 1e-3


def noise_floor(exp: SlalomExplanation) -> float:
    """The smallest colour scale of ``exp``'s page: :data:`NOISE_SHARE` of the model's move
    from the reference point (at least :data:`NOISE_SHARE` log-odds).

    Example:
        >>> noise_floor(exp)  # doctest: +SKIP
        0.006
    """
    move = np.asarray(exp.model_output, dtype=float) - np.asarray(exp.base_value, dtype=float)
    return NOISE_SHARE * max(1.0, float(np.max(np.abs(move))) if move.size else 1.0)


_NO_SE = "\nimportance not determined by the data (this method gives no standard error): drawn neutral"


def text_row(
    exp: SlalomExplanation,
    *,
    score: str = "value",
    col: int | None = None,
    scale: float | None = None,
    channels: bool = True,
) -> str:
    """The text as HTML token elements, one class column: a ``<div>``.

    Args:
        exp: the explanation.
        score: the score coloured (any of the table but importance).
        col: the class column of a joint multi-class fit (see
            :func:`~.describe.class_columns`), None otherwise.
        scale: the |score| drawn at full colour (larger ones are clipped and ringed);
            default: the row's own (:func:`scale_of`).
        channels: also draw the importance as underline and weight (SLALOM's second
            channel; an importance the data do not determine neutral); False: colour only.

    Returns:
        ``<div class="slx-text">…</div>``: one ``span.slx-tok`` per position, in order.

    Example:
        >>> text_row(binary_exp, score="lin")  # doctest: +SKIP
    """
    check_view_score(score)
    scores = describe.position_scores(exp, col)
    ses = describe.position_standard_errors(exp, col)
    colour = scores[score]
    scale = scale_of(colour) if scale is None else float(scale)
    s = scores["importance"]
    determined = exp.importance_determined
    shown_s = s[determined] if determined.any() else s
    lo, hi = (float(np.min(shown_s)), float(np.max(shown_s))) if shown_s.size else (0.0, 0.0)
    parts = []
    for shown, pos in layout(exp.tokens, exp.granularity, exp.text):
        if pos is None:
            parts.append(_esc(shown))
            continue
        token = str(exp.tokens[pos])
        data = [f'data-position="{pos}"', f'data-token="{_esc(token)}"']
        data += [f'data-{name}="{_num(vals[pos])}"' for name, vals in scores.items()]
        data += [f'data-{name}-se="{_num(vals[pos], signed=False)}"' for name, vals in ses.items()]
        if not determined[pos]:
            data.append(f'data-note="{_esc(_NOT_DETERMINED if exp.importance_se is not None else _NO_SE)}"')
        x = float(colour[pos])
        style = f"background-color: {css_rgb(diverging_rgb(x, scale=scale))}"
        if not channels:
            cls = "slx-tok slx-flat"
        elif determined[pos]:
            cls = f"slx-tok slx-s{_step(sequential_level(float(s[pos]), low=lo, high=hi))}"
        else:
            cls = "slx-tok slx-sn"
        cls += " slx-clip" if np.isfinite(x) and abs(x) > scale * (1 + 1e-12) else ""
        # A piece with no character of its own is drawn by CSS (not text), so the page's
        # text stays the explained text exactly.
        cls += " slx-empty" if not shown else ""
        parts.append(f'<span class="{cls}" tabindex="0" {" ".join(data)} style="{style}">{_esc(shown)}</span>')
    view = "channels" if channels else "score"
    return f'<div class="slx-text" data-view="{view}" data-score="{_esc(score)}">{"".join(parts)}</div>'


def _reference_note(exp: SlalomExplanation, score: str, col: int | None) -> str:
    if not SCORES[score].from_base:
        return "0 = no change in the output"
    base = np.asarray(exp.base_value, dtype=np.float64)
    if base.ndim and col is not None:
        base = base[col]
    if base.ndim:
        return "0 = each class's reference point b (above), the model's output on the empty input"
    where = "a given reference" if exp.diagnostics.reference == "given" else "the model's output on the empty input"
    return f"0 = the reference point b = {describe.fmt(base)}, {where}"


def legend(exp: SlalomExplanation, *, score: str, scale: float, col: int | None = None, channels: bool = True) -> str:
    """The legends: the colour scale of ``score`` (unit, reference point, ±scale) and, with
    ``channels``, the importance scale (the text's smallest to largest determined s, and
    the neutral look of an undetermined one).

    Example:
        >>> legend(binary_exp, score="value", scale=1.5)  # doctest: +SKIP
    """
    info = SCORES[score]
    shade = f"{int(100 * MAX_MIX)}%"
    what = "what the token added to this prediction" if info.additive else "the token's own score"
    out = (
        '<div class="slx-legend">'
        '<figure><div class="slx-bar" role="img" aria-label="colour scale"></div>'
        f'<div class="slx-ticks"><span>{describe.fmt(-scale)}</span><span>0</span>'
        f"<span>{describe.fmt(scale)}</span></div>"
        f"<figcaption><b>Colour: {_esc(score)}</b> ({_esc(info.formula)}; {what}), in {_esc(info.unit)}; "
        f"{_esc(_reference_note(exp, score, col))}. Red = raises the explained output, blue = lowers it; "
        f"symmetric scale, full colour ({shade} tint) at ±{describe.fmt(scale).lstrip('+')}; a ringed token "
        "lies beyond it (clipped).</figcaption></figure>"
    )
    if not channels:
        return out + "</div>"
    determined = exp.importance_determined
    s = exp.importance[determined] if determined.any() else exp.importance
    lo, hi = (float(np.min(s)), float(np.max(s))) if s.size else (0.0, 0.0)
    samples = "".join(
        f'<span class="slx-tok slx-s{_step(q)}">{label}</span> s = {describe.fmt(v)}&emsp;'
        for q, v, label in ((0.0, lo, "lowest"), (0.5, (lo + hi) / 2, "middle"), (1.0, hi, "highest"))
    )
    if not determined.any():
        samples = ""  # no scale to show: every importance is drawn neutral
    samples += '<span class="slx-tok slx-sn">neutral</span> not determined'
    n_open = int((~determined).sum())
    why = DETERMINED_RULE if exp.importance_se is not None else "this method gives no standard errors"
    note = describe.importance_note(exp)
    return out + (
        f"<figure><div>{samples}</div><figcaption><b>Underline and weight: importance</b> s "
        f"({_esc(SCORES['importance'].formula)}, {_esc(SCORES['importance'].unit)}): how much weight the "
        "token takes from the others; sequential, from the text's lowest to its highest determined s. "
        f"No underline: the data do not determine it ({_esc(why)}; {n_open} of "
        f"{exp.n_positions} positions).{' <b>' + _esc(note) + '</b>' if note else ''}</figcaption></figure></div>"
    )


def _heading(exp: SlalomExplanation, score: str) -> str:
    cols = describe.class_columns(exp)
    explained = "every class (joint fit)" if cols != [None] else describe.class_name(exp, None)
    pred = describe.prediction(exp)
    title = "SLALOM explanation" + (f" · predicted {pred}" if pred else "") + f" · explained {explained}"
    out = f"<h2>{_esc(title)}</h2>"
    meta = [f"model output f(x) = {describe.fmt(exp.model_output)}"] if exp.model_output is not None else []
    meta.append(f"surrogate {describe.fmt(exp.surrogate_output)}")
    unit = "centred logits" if exp.surrogate.multiclass else "log-odds"
    meta.append(f"reference b = {describe.fmt(exp.base_value)} ({unit})")
    out += f'<p class="slx-meta">{_esc(" · ".join(meta))}</p>'
    out += f'<p class="slx-fit">{_esc(describe.fit_line(exp))}</p>'
    flagged = " slx-flagged" if fit_flags(exp) else ""
    out += f'<p class="slx-check{flagged}" role="note">{_esc(describe.flag_line(exp))}</p>'
    return out


def _uid(exp: SlalomExplanation, score: str, cols: list[int | None]) -> str:
    """A name for the fragment's tab controls, from its content: two fragments on one page
    (a notebook) keep their own tabs, and the same explanation always makes the same page."""
    h = hashlib.sha1(f"{score}|{cols}|{exp.text}|{list(exp.tokens)}".encode("utf-8", "replace"))
    h.update(np.ascontiguousarray(exp.contribution, dtype=np.float64).tobytes())
    return "slx" + h.hexdigest()[:10]


def explanation_fragment(
    exp: SlalomExplanation,
    *,
    score: str = "contribution",
    class_index: int | str | None = None,
    include_style: bool = True,
    top: int = 10,
) -> str:
    """One text's view as an HTML fragment (a ``<div>``), for a notebook or a page.

    First what each token did to this prediction: the sum b → F(x) beside f(x), the force
    bar, the text coloured by ``score``, the ``top`` tokens; SLALOM's two channels (value
    colour, importance underline) in a second tab; a table of every position last.

    Args:
        exp: the explanation.
        score: the score coloured first (default the additive contribution); any of the
            score table but importance.
        class_index: for a joint multi-class fit, one class (index or name) to show; default
            every class, each under its name.
        include_style: put the style sheet (:func:`style_sheet`) in the fragment; a page that shows
            many fragments includes it once.
        top: tokens in the ranked list.

    Returns:
        ``<div class="slx-view">…</div>`` (with a ``<style>`` first when ``include_style``).

    Example:
        >>> from IPython.display import HTML; HTML(explanation_fragment(exp))  # doctest: +SKIP
    """
    check_view_score(score)
    with describe.scores_once():  # every section reads the same scores: computed once
        return _fragment(exp, score=score, class_index=class_index, include_style=include_style, top=top)


def _fragment(
    exp: SlalomExplanation, *, score: str, class_index: int | str | None, include_style: bool, top: int
) -> str:
    cols = describe.class_columns(exp)
    if class_index is not None:
        cols = [_pick_class(exp, class_index)]
    one = cols[0] if len(cols) == 1 else None
    # One scale per score for every class, so equal colours mean equal numbers across the blocks;
    # never finer than the noise floor, so that rounding noise is not drawn as a colour.
    floor = noise_floor(exp)
    scale = max(scale_of(*(describe.position_scores(exp, col)[score] for col in cols)), floor)
    v_scale = max(scale_of(*(describe.position_scores(exp, col)["value"] for col in cols)), floor)
    uid = _uid(exp, score, cols)
    first, second = (
        [legend(exp, score=score, scale=scale, col=one, channels=False)],
        [legend(exp, score="value", scale=v_scale, col=one)],
    )
    summary = []
    for col in cols:
        name = f"<h3>{_esc(describe.class_name(exp, col))}</h3>" if col is not None else ""
        summary += [name, sections.sum_line(exp, col), sections.force_bar(exp, col, score=score)]
        first += [name, text_row(exp, score=score, col=col, scale=scale, channels=False)]
        second += [name, text_row(exp, score="value", col=col, scale=v_scale)]
    ranked = [sections.top_tokens(exp, col, score=score, k=top, named=len(cols) > 1) for col in cols]
    tabs = (
        f'<input type="radio" class="slx-tab slx-tab-a" name="{uid}" id="{uid}-a" checked>'
        f'<label for="{uid}-a">What each token did: {_esc(score)}</label>'
        f'<input type="radio" class="slx-tab slx-tab-b" name="{uid}" id="{uid}-b">'
        f'<label for="{uid}-b">SLALOM\'s two channels: value and importance</label>'
        f'<div class="slx-panel slx-panel-a">{"".join(first)}</div>'
        f'<div class="slx-panel slx-panel-b">{"".join(second)}</div>'
    )
    body = [_heading(exp, score), *summary, f'<div class="slx-tabs">{tabs}</div>', *ranked]
    body.append(sections.score_table(exp, cols))
    style = f"<style>{style_sheet()}</style>" if include_style else ""
    return f'{style}<div class="slx-view" data-score="{_esc(score)}">{"".join(body)}</div>'


def _pick_class(exp: SlalomExplanation, class_index: int | str) -> int:
    if not exp.surrogate.multiclass or exp.class_index is not None:
        raise ValueError("class_index applies only to a joint multi-class explanation (explained without target)")
    names = list(exp.class_names or [])
    k = exp.surrogate.value.shape[1]
    if isinstance(class_index, str):
        if class_index not in names:
            raise ValueError(f"unknown class {class_index!r}; this explanation has classes {names}")
        return names.index(class_index)
    if isinstance(class_index, bool) or not isinstance(class_index, (int, np.integer)) or not 0 <= class_index < k:
        raise ValueError(f"class_index must be a class name or an int in [0, {k}), got {class_index!r}")
    return int(class_index)


def document(body: str, *, title: str) -> str:
    """A whole page around ``body``: UTF-8, the style sheet, a CSP that forbids any request.

    Example:
        >>> document("<p>hi</p>", title="t").startswith("<!DOCTYPE html>")
        True
    """
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_esc(title)}</title><style>{style_sheet()}</style></head>\n<body>\n{body}\n</body></html>\n"
    )


def to_html(
    exp: SlalomExplanation, *, score: str = "contribution", class_index: int | str | None = None, full_page: bool = True
) -> str:
    """The view of ``exp`` (see :func:`explanation_fragment`): a whole offline page, or a fragment.

    Args:
        exp: the explanation.
        score: the score coloured first (default the additive contribution; the value
            and importance are one tab away).
        class_index: for a joint multi-class fit, one class to show (default every class).
        full_page: a whole document (True) or a fragment as :func:`explanation_fragment`.

    Returns:
        The HTML as a str.

    Example:
        >>> Path("view.html").write_text(to_html(exp, score="lin"), encoding="utf-8")  # doctest: +SKIP
    """
    frag = explanation_fragment(exp, score=score, class_index=class_index, include_style=not full_page)
    if not full_page:
        return frag
    pred = describe.prediction(exp)
    title = f"SLALOM · {describe.excerpt(exp, 60)}" + (f" · {pred}" if pred else "")
    return document(frag, title=title)
