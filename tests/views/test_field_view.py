"""The page speaks the field's language first: what each token did to this prediction
(additive contribution, b → F(x) beside f(x), ranked tokens, a table), SLALOM's two
channels one tab away, undetermined importances neutral, one robust scale per score."""

from __future__ import annotations

import re

import numpy as np
import pytest
import slalom_core as sc
from page_reader import read, read_top
from slalom_core.views import compare_html
from slalom_core.views.colours import css_rgb, diverging_rgb
from slalom_core.views.html import scale_of


def _with_importance_se(exp: sc.SlalomExplanation, se: np.ndarray | None) -> sc.SlalomExplanation:
    d = exp.to_dict()
    d["unit_importance_se"] = None if se is None else se.tolist()
    return sc.SlalomExplanation.from_dict(d)


def test_the_first_view_colours_each_token_by_its_contribution(word_exp):
    html = word_exp.to_html()
    first = read(html)
    assert first.tokens and {t["view"] for t in first.tokens} == {"score"}
    c = word_exp.contribution
    scale = scale_of(c)
    want = [f"background-color: {css_rgb(diverging_rgb(float(x), scale=scale))}" for x in c]
    assert [t["style"] for t in first.tokens] == want
    # The value is one tab away, on its own scale, with the importance underlined.
    second = read(html, view="channels")
    v_scale = scale_of(word_exp.value)
    assert [t["style"] for t in second.tokens] == [
        f"background-color: {css_rgb(diverging_rgb(float(x), scale=v_scale))}" for x in word_exp.value
    ]
    assert html.index('data-view="score"') < html.index('data-view="channels"')
    assert "<script" not in html.lower()  # the tab is CSS alone: the page opens from a file


def test_sum_line_and_force_bar_add_up_from_b_to_the_surrogate(word_exp):
    html = word_exp.to_html()
    b, big_f = float(word_exp.base_value), float(word_exp.surrogate_output)
    c = word_exp.contribution
    assert np.isclose(b + c.sum(), big_f, rtol=0, atol=1e-9)  # float64 sums of a few numbers
    line = re.search(r'<p class="slx-sum">([^<]*)</p>', html).group(1)
    fmt = sc.views.describe.fmt
    for number in (b, big_f - b, big_f, float(word_exp.model_output)):
        assert fmt(number) in line
    svg = re.search(r'<svg class="slx-force".*?</svg>', html).group(0)
    rects = re.findall(r'<rect x="([\d.]+)" y="34" width="([\d.]+)"[^>]*><title>([^<]*)</title>', svg)
    assert len(rects) == int((c != 0).sum())
    # Widths are proportional to |contribution| (the SVG writes one decimal of 1000 units).
    widths = np.array([float(w) for _, w, _ in rects])
    sizes = np.sort(np.abs(c[c != 0]))
    per_unit = widths.sum() / sizes.sum()
    assert np.allclose(np.sort(widths), sizes * per_unit, atol=0.1)  # tol: the SVG's rounding to 0.1 of 1000 units
    # Red ends at F(x) from the left, blue starts there: the mark of F(x) is where they meet.
    f_mark = float(re.search(r'<line x1="([\d.]+)"[^>]*stroke="#000"', svg).group(1))
    red = [(float(x), float(w)) for (x, w, _), col in zip(rects, re.findall(r'fill="([^"]+)"', svg)) if "214" in col]
    if red:
        assert abs(max(x + w for x, w in red) - f_mark) < 0.2  # tol: two positions each rounded to 0.1


def test_ranked_tokens_are_distinct_tokens_by_summed_contribution(word_exp):
    html = word_exp.to_html()
    items = [(i["data-position"], i["num"].split("±")[0]) for i in read_top(html).items]
    # What the ranking must be, computed here from the per-unit sums.
    c, units = word_exp.contribution, np.asarray(word_exp.unit_index)
    sums = np.bincount(units, weights=c)
    present = np.unique(units)
    order = present[np.argsort(-np.abs(sums[present]), kind="stable")]
    assert len(items) == min(10, len(present))
    got_units = [int(units[int(pos)]) for pos, _ in items]
    # tol: exact up to float64 rounding of the same bincount sums
    assert np.allclose(np.abs(sums[got_units]), np.abs(sums[order[: len(items)]]), rtol=0, atol=1e-12)
    assert [float(x) for _, x in items] == pytest.approx(
        sums[got_units], rel=1e-2
    )  # tol: rounding to 3 significant digits


def test_table_lists_every_position_with_standard_errors(word_exp):
    html = word_exp.to_html()
    table = re.search(r'<table class="slx-table">.*?</table>', html).group(0)
    assert table.count("<tr>") == word_exp.n_positions + 1  # the header and one row per position
    assert "contribution" in table and "importance" in table and " ± " in table


def test_importance_determined_is_se_below_08_prior_sd(word_exp):
    sd = word_exp.diagnostics.prior_sd
    n_units = word_exp.surrogate.n_units
    se = np.where(np.arange(n_units) % 2 == 0, 0.79 * sd, 0.81 * sd)
    exp = _with_importance_se(word_exp, se)
    # the other way to be determined: two standard errors from the text's mean importance
    s = exp.surrogate.importance
    apart = np.abs(s - s.mean()) >= 2 * se
    want = (np.arange(n_units) % 2 == 0) | apart
    assert np.array_equal(exp.importance_determined, want[np.asarray(exp.unit_index)])
    assert not want.all()  # some token is left undetermined, so the drawing below is tested
    html = exp.to_html()
    channels = read(html, view="channels")
    for t, ok in zip(channels.tokens, exp.importance_determined):
        assert ("slx-sn" in t["class"]) == (not ok)
        assert ("data-note" in t) == (not ok)
    assert "not determined by the data" in channels.tokens[int(np.argmin(exp.importance_determined))]["data-note"]
    # The tooltip states the rule in the words of the docs (slalom_core.fit_quality.DETERMINED_RULE).
    note = channels.tokens[int(np.argmin(exp.importance_determined))]["data-note"]
    assert sc.fit_quality.DETERMINED_RULE in note
    assert "no: not determined by the data" in html  # the table says it too
    # Without standard errors (ana) nothing says the data determine them: all neutral.
    none = _with_importance_se(word_exp, None)
    assert none.importance_determined.dtype == bool and not none.importance_determined.any()
    assert all("slx-sn" in t["class"] for t in read(none.to_html(), view="channels").tokens)


def test_compare_uses_one_scale_per_score_robust_to_one_extreme(word_exp):
    d = word_exp.to_dict()
    d["surrogate"]["value"] = list(d["surrogate"]["value"])
    extreme_unit = int(word_exp.unit_index[0])
    d["surrogate"]["value"][extreme_unit] = 5000.0
    for name in ("value", "importance", "lin", "removal", "contribution"):
        d.pop(name, None)  # stored scores are checked against the surrogate on loading
    wild = sc.SlalomExplanation.from_dict(d)
    html = compare_html([word_exp, wild], labels=["fit", "wild"], scores=["lin"])
    rows = read(html, view="channels")
    n = word_exp.n_positions
    tame, other = rows.tokens[:n], rows.tokens[n:]
    scale = scale_of(word_exp.lin, wild.lin)
    assert scale < 0.01 * np.abs(wild.lin).max()  # the one extreme sets no scale
    assert html.count(f"colour ±{scale:.3g}") == 2  # the same scale stated on both rows
    # The tame row keeps its colours: its largest |lin| is drawn strongly, not washed out.
    strongest = int(np.argmax(np.abs(word_exp.lin)))
    want = css_rgb(diverging_rgb(float(word_exp.lin[strongest]), scale=scale))
    assert want != "rgb(255, 255, 255)" and want in tame[strongest]["style"]
    assert "slx-clip" in other[0]["class"] and not any("slx-clip" in t["class"] for t in tame)


def _with_se(exp, value_se: float, importance_se: float):
    """The same explanation with every unit's standard errors set (to read the marks against)."""
    import dataclasses

    n_units = len(exp.surrogate.importance)
    return dataclasses.replace(
        exp,
        unit_value_se=np.full(exp.surrogate.value.shape, value_se),
        unit_importance_se=np.full(n_units, importance_se),
    )


def test_top_tokens_carry_their_standard_errors_and_undetermined_signs(word_exp):
    top = read_top(word_exp.to_html())
    assert top.items and all("±" in i["num"] and "data-se" in i for i in top.items)
    assert "standard error" in top.notes[0] and "sign not determined" in top.notes[0]
    c, units = word_exp.contribution, np.asarray(word_exp.unit_index)
    se = sc.views.describe.score_standard_errors(word_exp, None, "contribution")
    for item in top.items:
        pos = int(item["data-position"])
        n = int((units == units[pos]).sum())
        total = float(c[units == units[pos]].sum())
        assert float(item["data-se"]) == pytest.approx(n * se[pos], rel=1e-5)  # tol: 6 significant digits written
        # The stated rule: |contribution| under two standard errors leaves the sign open.
        open_ = abs(total) < 2 * n * se[pos]
        assert (item["data-sign"] == "undetermined") == open_
        assert ("sign not determined" in item["after"]) == open_
    # Errors far larger than every score: no sign is determined; far smaller: every one is.
    assert all(i["data-sign"] == "undetermined" for i in read_top(_with_se(word_exp, 1e3, 1e3).to_html()).items)
    assert all(i["data-sign"] == "determined" for i in read_top(_with_se(word_exp, 1e-9, 1e-9).to_html()).items)


def test_contribution_standard_error_is_first_order_in_value_and_importance(word_exp):
    # With the importances known exactly, c_u = α_u·v_u is linear in v_u: its SE is α_u·SE_v.
    exp = _with_se(word_exp, 0.3, 0.0)
    se = sc.views.describe.score_standard_errors(exp, None, "contribution")
    alpha = sc.scores.attention(exp.importance)
    np.testing.assert_allclose(se, alpha * 0.3, rtol=1e-12)  # tol: the same float64 products
    # A finite-difference check of the importance term: ∂c_u/∂s_u by moving s_u by h.
    exp = _with_se(word_exp, 0.0, 1.0)
    se = sc.views.describe.score_standard_errors(exp, None, "contribution")
    u, h = int(np.asarray(exp.unit_index)[0]), 1e-6
    s = exp.surrogate.importance.copy()
    s[u] += h
    moved = sc.scores.contribution(exp.value, s[np.asarray(exp.unit_index)])
    at = np.asarray(exp.unit_index) == u
    slope = (moved[at] - exp.contribution[at]) / h
    np.testing.assert_allclose(se[at], np.abs(slope), rtol=1e-4)  # tol: forward difference, O(h) error


def test_a_method_without_standard_errors_says_so_beside_its_ranking():
    from conftest import WORD_TEXT, slalom_model

    exp = sc.explain(slalom_model(), WORD_TEXT, method="ana")
    top = read_top(exp.to_html())
    assert "the fitting method gives none" in top.notes[0] and not any("data-se" in i for i in top.items)
