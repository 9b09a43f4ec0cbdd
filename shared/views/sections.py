"""The parts of a page that speak the field's language: what each token did to this prediction.

- :func:`sum_line` and :func:`force_bar`: the reference point b, the tokens' additive scores
  pushing from it, the surrogate's output F(x) they add up to and the model's own output
  f(x) (as shap's text and force plots draw base value → f(x));
- :func:`top_tokens`: the tokens ranked by |score|, a repeated token once with its count;
- :func:`score_table`: every position with its contribution, value and importance and
  their standard errors, and whether the data determine the importance.

Everything is inline HTML and SVG (no script, nothing fetched), every text escaped.

Example:
    >>> html = force_bar(exp, None) + top_tokens(exp, None)  # doctest: +SKIP
"""

from __future__ import annotations

import html as _html
from typing import TYPE_CHECKING

import numpy as np

from ..scores import SCORES
from . import describe
from .colours import NEGATIVE_RGB, POSITIVE_RGB, css_rgb, diverging_rgb

if TYPE_CHECKING:
    from ..explained import Explained as SlalomExplanation  # the protocol: views look down

__all__ = [
    "CLIP_FACTOR",
    "robust_scale",
    "sum_line",
    "force_bar",
    "top_tokens",
    "SIGN_SE",
    "score_table",
    "unit_scores",
    "SECTION_STYLE",
]

#: Full colour at most this many times the second largest |score| (see :func:`robust_scale`).
CLIP_FACTOR = 3.0

SECTION_STYLE = """
.slx-sum { font-size: 0.9rem; margin: 0.4rem 0 0.1rem; }
.slx-force { width: 100%; max-width: 56rem; height: auto; display: block; margin: 0.1rem 0 0.4rem; }
.slx-force text { font: 13px system-ui, sans-serif; fill: #111; }
.slx-top { margin: 0.3rem 0 0.6rem; padding-left: 1.8rem; font-size: 0.9rem; columns: 2 18rem; }
.slx-top li { margin: 0.1rem 0; break-inside: avoid; }
.slx-top .slx-num { font-variant-numeric: tabular-nums; display: inline-block; min-width: 7.5rem; text-align: right; }
.slx-topnote { font-size: 0.8rem; color: #444; margin: 0.1rem 0; }
.slx-top li[data-sign="undetermined"] { color: #666; }
.slx-chip { border-radius: 3px; padding: 0 3px; }
.slx-table { border-collapse: collapse; font-size: 0.82rem; margin: 0.3rem 0; }
.slx-table th, .slx-table td { border-bottom: 1px solid #ddd; padding: 0.15rem 0.5rem; text-align: right; }
.slx-table th:nth-child(2), .slx-table td:nth-child(2) { text-align: left; }
.slx-table td { font-variant-numeric: tabular-nums; }
.slx-view details { margin: 0.4rem 0; font-size: 0.9rem; }
"""


def _esc(s: object) -> str:
    return _html.escape(str(s), quote=True)


def robust_scale(*rows: np.ndarray) -> float:
    """The |score| drawn at full colour, pooled over ``rows``: the largest finite |score|,
    but at most :data:`CLIP_FACTOR` (3) times the second largest, so one extreme value (a
    lin of 2,037 among numbers near 5, however often that token is repeated) does not wash
    out every other token (equal numbers count once: repeats share their score); values beyond
    are clipped (and the views ring them). 1 where every score is 0.

    Example:
        >>> robust_scale(np.array([0.5, -1.0, np.nan])), robust_scale(np.array([1.0, 2.0]), np.array([2037.0]))
        (1.0, 6.0)
    """
    pooled = np.concatenate([np.abs(np.asarray(r, dtype=np.float64)).ravel() for r in rows]) if rows else np.zeros(0)
    # Distinct numbers: a repeated token shares its score, and is one token, not several.
    pooled = np.unique(pooled[np.isfinite(pooled)])[::-1]
    if not pooled.size or pooled[0] <= 0:
        return 1.0
    if pooled.size > 1 and pooled[1] > 0:
        return float(min(pooled[0], CLIP_FACTOR * pooled[1]))
    return float(pooled[0])


def _outputs(exp: SlalomExplanation, col: int | None) -> tuple[float, float, float | None]:
    """b, F(x) and f(x) of class column ``col`` (f(x) None when the model's is unknown)."""

    def pick(x):
        x = np.asarray(x, dtype=np.float64)
        return float(x[col] if x.ndim and col is not None else x.ravel()[0] if x.ndim else x)

    f = None if exp.model_output is None else pick(exp.model_output)
    return pick(exp.base_value), pick(exp.surrogate_output), f


def sum_line(exp: SlalomExplanation, col: int | None) -> str:
    """One sentence: b + Σ contributions = F(x), and the model's own f(x) beside it.

    Example:
        >>> sum_line(binary_exp, None)  # doctest: +SKIP
    """
    b, big_f, f = _outputs(exp, col)
    unit = "centred logits" if exp.surrogate.multiclass else "log-odds"
    where = "a given reference" if exp.diagnostics.reference == "given" else "the model on the empty input"
    text = (
        f"reference b = {describe.fmt(b)} ({where}) + the tokens' contributions {describe.fmt(big_f - b)} "
        f"= the surrogate's output F(x) = {describe.fmt(big_f)} {unit}"
    )
    if f is not None:
        moved = "in the same direction from b as" if (big_f - b) * (f - b) > 0 else "against"
        text += (
            f"; the model's own output f(x) = {describe.fmt(f)} (it moves {describe.fmt(f - b)} from b; the "
            f"surrogate moves {moved} it and misses {describe.fmt(f - big_f)})"
        )
        differ = describe.sides(exp, col, f, big_f)
        if differ is not None:  # said in the reader's terms: a moving direction is not a class
            text += f". Read with care: {differ}"
    return f'<p class="slx-sum">{_esc(text)}.</p>'


def force_bar(exp: SlalomExplanation, col: int | None, *, score: str = "contribution", labels: int = 8) -> str:
    """The additive scores as pushes from b to F(x): red ones raise the output and end at
    F(x) from the left, blue ones lower it and end there from the right (the larger nearer
    F(x)), with b, F(x) and f(x) marked on one axis. An inline SVG; each segment's
    tooltip names its token.

    Args:
        exp: the explanation.
        col: the class column (None: the one explained output).
        score: an additive score (contribution, or shapley).
        labels: segments wide enough are labelled with their token, at most this many.

    Example:
        >>> force_bar(binary_exp, None).startswith("<svg")  # doctest: +SKIP
        True
    """
    if not SCORES[score].additive:
        score = "contribution"
    c = describe.position_scores(exp, col)[score]
    b, big_f, f = _outputs(exp, col)
    # Red from F(x) − Σ up to F(x), smallest first; blue from F(x) to F(x) + |Σ down|, largest
    # first: either way the largest pushes sit next to F(x).
    up = sorted((float(x), i) for i, x in enumerate(c) if x > 0)
    down = sorted((float(x), i) for i, x in enumerate(c) if x < 0)
    up_sum, down_sum = sum(x for x, _ in up), sum(x for x, _ in down)
    ends = [b, big_f - up_sum, big_f - down_sum, big_f] + ([f] if f is not None else [])
    lo, hi = min(ends), max(ends)
    pad = 0.06 * (hi - lo) if hi > lo else 1.0
    lo, hi = lo - pad, hi + pad
    width, left = 1000.0, 10.0

    def x_of(v: float) -> float:
        return left + (v - lo) / (hi - lo) * (width - 2 * left)

    parts, labelled = [], 0
    order = sorted(range(len(c)), key=lambda i: -abs(c[i]))[:labels]
    for pieces, start, rgb in ((up, big_f - up_sum, POSITIVE_RGB), (down, big_f, NEGATIVE_RGB)):
        at = start
        for x, i in pieces:
            x0, x1 = sorted((x_of(at), x_of(at + abs(x))))
            at += abs(x)
            tip = f"{exp.tokens[i]} (position {i}): {score} {describe.fmt(x)}"
            parts.append(
                f'<rect x="{x0:.1f}" y="34" width="{max(x1 - x0, 0.5):.1f}" height="22" fill="{css_rgb(rgb)}" '
                f'stroke="#fff" stroke-width="1"><title>{_esc(tip)}</title></rect>'
            )
            if i in order and x1 - x0 > 9 * min(len(str(exp.tokens[i])), 12) and labelled < labels:
                labelled += 1
                parts.append(
                    f'<text x="{(x0 + x1) / 2:.1f}" y="50" text-anchor="middle" style="fill:#fff">'
                    f"{_esc(str(exp.tokens[i])[:12])}</text>"
                )
    marks = [(b, "b", "#555", "4 3"), (big_f, "F(x)", "#000", "")]
    if f is not None:
        marks.append((f, "f(x)", "#7a3e9d", "2 2"))
    for v, name, colour, dash in marks:
        x = x_of(v)
        # Three rows of labels (b above F(x) above the bar, f(x) below), so close ones never overlap.
        y_text, y0, y1 = {"b": (11, 14, 60), "F(x)": (28, 31, 60), "f(x)": (78, 34, 66)}[name]
        anchor = "start" if x < 0.8 * width else "end"
        parts.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{y0}" y2="{y1}" '
            f'stroke="{colour}" stroke-width="2" stroke-dasharray="{dash}"/>'
            f'<text x="{x + (4 if anchor == "start" else -4):.1f}" y="{y_text}" text-anchor="{anchor}" '
            f'style="fill:{colour}; paint-order: stroke; stroke: #fff; stroke-width: 4px">'
            f"{_esc(name)} = {_esc(describe.fmt(v))}</text>"
        )
    label = f"force plot: reference b {describe.fmt(b)}, surrogate output {describe.fmt(big_f)}"
    return (
        f'<svg class="slx-force" viewBox="0 0 {width:.0f} 84" role="img" aria-label="{_esc(label)}" '
        f">{''.join(parts)}</svg>"
    )


def unit_scores(exp: SlalomExplanation, col: int | None, score: str) -> list[tuple[str, float, int, int]]:
    """Each distinct token once: ``(token, score, count, first position)``, ranked by |score|.

    An additive score is summed over a token's repeats (what the token did in the text);
    any other is the token's own (its repeats share it).

    Example:
        >>> unit_scores(binary_exp, None, "contribution")[0]  # doctest: +SKIP
        ('wonderful', 1.47, 1, 3)
    """
    x = describe.position_scores(exp, col)[score]
    total: dict[int, float] = {}
    count: dict[int, int] = {}
    first: dict[int, int] = {}
    for pos, u in enumerate(np.asarray(exp.unit_index).tolist()):
        first.setdefault(u, pos)
        count[u] = count.get(u, 0) + 1
        v = float(x[pos])
        total[u] = total.get(u, 0.0) + v if SCORES[score].additive else v
    rows = [(str(exp.tokens[first[u]]), total[u], count[u], first[u]) for u in total]
    return sorted(rows, key=lambda r: (-abs(r[1]) if np.isfinite(r[1]) else 0.0, r[3]))


#: A ranked token's sign is "not determined" when |score| < SIGN_SE·SE: an interval of
#: about 95 % (± 2 standard errors, normal approximation) holds zero.
SIGN_SE = 2.0


def top_tokens(
    exp: SlalomExplanation, col: int | None, *, score: str = "contribution", k: int = 10, named: bool = False
) -> str:
    """The ``k`` tokens of largest |score| as a ranked list, each in its colour with its
    standard error (:func:`~.describe.score_standard_errors`; a repeated token's additive
    score sums its occurrences, and so does its error, the occurrences sharing one value and
    importance); a token whose |score| is under :data:`SIGN_SE` standard errors is marked
    "sign not determined" (``named``: the heading names the class column, for a page of several).

    Example:
        >>> 'class="slx-top"' in top_tokens(binary_exp, None)  # doctest: +SKIP
        True
    """
    rows = unit_scores(exp, col, score)
    se = describe.score_standard_errors(exp, col, score)
    scale = robust_scale(np.array([r[1] for r in rows]))
    items = []
    for token, v, n, pos in rows[:k]:
        bg = css_rgb(diverging_rgb(v, scale=scale))
        times = f" (×{n}, summed)" if n > 1 and SCORES[score].additive else f" (×{n})" if n > 1 else ""
        err, mark = "", ""
        if se is not None:
            e = float(se[pos]) * (n if SCORES[score].additive else 1)
            open_ = bool(abs(v) < SIGN_SE * e)
            err = f' data-se="{e:.6g}" data-sign="{"undetermined" if open_ else "determined"}"'
            mark = " · sign not determined" if open_ else ""
            num = f"{describe.fmt(v)} ± {e:.2g}"
        else:
            num = describe.fmt(v)
        items.append(
            f'<li data-position="{pos}"{err}><span class="slx-num">{_esc(num)}</span> '
            f'<span class="slx-chip" style="background-color: {bg}">{_esc(token)}</span>{_esc(times + mark)}</li>'
        )
    more = f" ({len(rows) - k} more in the table below)" if len(rows) > k else ""
    of = f" for {describe.class_name(exp, col)}" if named else ""
    head = f"Top {min(k, len(rows))} tokens by |{score}|{of}{more}"
    note = (
        f"± one standard error (first order, from the fit's Laplace errors); sign not determined: |{score}| under "
        f"{SIGN_SE:g} standard errors, the sign could go either way on another seed."
        if se is not None
        else f"No standard error for {score}: it is given for {', '.join(describe.SCORE_SE)}."
        if score not in describe.SCORE_SE
        else "No standard error: the fitting method gives none."
    )
    return f'<h3>{_esc(head)}</h3><p class="slx-topnote">{_esc(note)}</p><ol class="slx-top">{"".join(items)}</ol>'


def _with_se(x: float, se: float | None) -> str:
    return describe.fmt(x) if se is None else f"{describe.fmt(x)} ± {float(se):.3g}"


def score_table(exp: SlalomExplanation, cols: list[int | None], *, open_: bool = False) -> str:
    """Every position: its token, contribution, value (± SE), importance (± SE), and
    whether the data determine the importance; inside a ``<details>``.

    Example:
        >>> "<table" in score_table(binary_exp, [None])  # doctest: +SKIP
        True
    """
    per_col = [(col, describe.position_scores(exp, col), describe.position_standard_errors(exp, col)) for col in cols]
    named = len(cols) > 1
    heads = ["#", "token"]
    for col, _, _ in per_col:
        suffix = f" ({describe.class_name(exp, col)})" if named else ""
        heads += [f"contribution{suffix}", f"value{suffix}"]
    heads += ["importance", "importance determined"]
    determined = exp.importance_determined
    lines = []
    for pos in range(exp.n_positions):
        cells = [str(pos), _esc(exp.tokens[pos])]
        for _, sc, se in per_col:
            v_se = se.get("value")
            cells += [
                describe.fmt(sc["contribution"][pos]),
                _with_se(sc["value"][pos], None if v_se is None else v_se[pos]),
            ]
        s_se = per_col[0][2].get("importance")
        cells.append(_with_se(per_col[0][1]["importance"][pos], None if s_se is None else s_se[pos]))
        cells.append("yes" if determined[pos] else "no: not determined by the data")
        lines.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    head = "".join(f"<th>{_esc(h)}</th>" for h in heads)
    return (
        f"<details{' open' if open_ else ''}><summary>Every position: contribution, value, importance "
        f"(± standard error where the method gives one)</summary>"
        f'<table class="slx-table"><thead><tr>{head}</tr></thead><tbody>{"".join(lines)}</tbody></table></details>'
    )
