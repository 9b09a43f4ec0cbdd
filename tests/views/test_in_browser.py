"""The pages as a real browser shows them: every token with its scores in the DOM, a
screenshot that is not blank, no request leaving the file system, no script run from the text."""

from __future__ import annotations

import numpy as np
import pytest
import slalom_core as sc
from browser import needs_chromium, png_colours, render
from page_reader import read
from slalom_core.scores import SCORES
from slalom_core.views import compare_html

pytestmark = needs_chromium


def test_the_request_detector_sees_a_page_that_loads_a_remote_url(tmp_path):
    page = tmp_path / "remote.html"
    page.write_text(
        '<!DOCTYPE html><p>remote</p><img src="https://example.com/pixel.png">'
        '<link rel="stylesheet" href="http://example.org/style.css">',
        encoding="utf-8",
    )
    seen = render(page)
    assert "https://example.com/pixel.png" in seen.remote_requests
    assert "http://example.org/style.css" in seen.remote_requests


def test_page_in_the_browser_has_every_token_with_its_scores(bert_exp, tmp_path):
    page = tmp_path / "bert.html"
    page.write_text(bert_exp.to_html(), encoding="utf-8")
    seen = render(page)
    assert seen.remote_requests == []
    dom = read(seen.dom)
    assert len(dom.tokens) == bert_exp.n_positions
    for name in SCORES:
        got = np.array([float(t[f"data-{name}"]) for t in dom.tokens])
        assert np.allclose(got, bert_exp.scores(name), rtol=6e-6, atol=0), name  # tol: rounding to 6 significant digits
    assert dom.texts == [bert_exp.text]
    # The text's "<script>alert(1)</script>" is text in the DOM, not an element.
    assert "script" not in dom.tags and "alert" in dom.texts[0]
    assert png_colours(seen.png) > 50  # coloured tokens, legend, text: far from blank


def test_xss_through_tokens_and_class_names_shows_as_text(word_exp, tmp_path):
    exp = type(word_exp).from_dict(word_exp.to_dict())
    exp.tokens[0] = '<img src="x" onerror="document.title=\'owned\'">'
    exp.text = None
    exp.diagnostics["method"] = "<b>bold</b>"
    page = tmp_path / "xss.html"
    page.write_text(exp.to_html(), encoding="utf-8")
    seen = render(page)
    dom = read(seen.dom)
    # Had the handler run, the title would be "owned"; it still starts as the page wrote it.
    assert "img" not in dom.tags and seen.dom.split("<title>")[1].startswith("SLALOM · ")
    assert dom.tokens[0]["text"].startswith("<img")
    assert seen.remote_requests == []


def test_comparison_page_in_the_browser(word_exp, multi_exp, tmp_path):
    page = tmp_path / "compare.html"
    page.write_text(compare_html(multi_exp, scores=["value", "contribution", "removal"]), encoding="utf-8")
    seen = render(page)
    dom = read(seen.dom)
    assert len(dom.texts) == 3 and seen.remote_requests == []
    assert png_colours(seen.png) > 50


@pytest.mark.slow
def test_realistic_page_of_the_packaged_minilm(tmp_path):
    from slalom_core.packaged.demo_model import default_adapter

    text = "An unexpectedly moving film: the acting is superb, though the ending drags a little."
    exp = sc.explain(default_adapter(), text, n_samples=300, seed=0)
    page = tmp_path / "minilm.html"
    page.write_text(exp.to_html(), encoding="utf-8")
    seen = render(page, width=1100, height=700)
    dom = read(seen.dom)
    assert dom.texts == [text] and len(dom.tokens) == exp.n_positions
    assert "Film" not in [t["text"] for t in dom.tokens] and "film" in [t["text"] for t in dom.tokens]
    assert seen.remote_requests == [] and png_colours(seen.png) > 100
