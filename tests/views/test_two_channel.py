"""The two-channel page of one explanation: its numbers, its text, its legend, its safety."""

from __future__ import annotations

import html

import numpy as np
import pytest
import slalom_core as sc
from conftest import BERT_TEXT, GPT2_TEXT, WORD_TEXT
from page_reader import read
from slalom_core.fit_quality import HELDOUT_R2_LABEL
from slalom_core.scores import SCORES, Score
from slalom_core.views import compare_html, explanation_fragment
from slalom_core.views.html import scale_of
from slalom_core.views.surface import align, layout, pieces

#: The held-out R² as a page names it (escaped: the label has an apostrophe).
R2_NAME = html.escape(HELDOUT_R2_LABEL)


def _scores_of(tokens: list[dict], name: str) -> np.ndarray:
    return np.array([float(t[f"data-{name}"]) for t in tokens])


def _close(got: np.ndarray, want: np.ndarray) -> bool:
    # Pages write 6 significant digits (the saved explanation has the exact numbers).
    return np.allclose(got, want, rtol=6e-6, atol=0)


def test_every_token_carries_every_score_of_the_table(word_exp):
    page = read(word_exp.to_html())
    assert [int(t["data-position"]) for t in page.tokens] == list(range(word_exp.n_positions))
    for name in SCORES:
        assert _close(_scores_of(page.tokens, name), word_exp.scores(name)), name
    assert _close(_scores_of(page.tokens, "value-se"), word_exp.value_se)
    assert _close(_scores_of(page.tokens, "importance-se"), word_exp.importance_se)
    # The tooltip (hover and focus) is read by CSS from these attributes: every score, and
    # the standard errors for the tokens that have them.
    sheet = word_exp.to_html().split("<style>")[1]
    with_se = next(r for r in sheet.split("\n") if "[data-value-se][data-importance-se]:hover" in r)
    assert all(f"attr(data-{name})" in with_se for name in SCORES)
    assert "attr(data-value-se)" in with_se and "attr(data-importance-se)" in with_se


def test_a_newly_registered_score_appears_without_a_change_to_the_views(word_exp, monkeypatch):
    monkeypatch.setitem(
        SCORES,
        "twice",
        Score(
            "twice",
            "2·v_i",
            "log-odds",
            additive=False,
            from_base=True,
            class0_sign=-1,
            per="token",
            compute=lambda v, s: 2 * v,
        ),
    )
    html = word_exp.to_html()
    assert _close(_scores_of(read(html).tokens, "twice"), 2 * word_exp.value)
    assert "attr(data-twice)" in html


def test_colour_is_the_chosen_score_and_importance_the_underline(word_exp):
    html = word_exp.to_html(score="contribution")
    page = read(html)
    c = word_exp.contribution
    styles = [t["style"] for t in page.tokens]
    strongest = int(np.argmax(np.abs(c)))
    red, blue = "rgb(224, 93, 94)", "rgb(87, 153, 199)"  # full tint of red and of blue
    assert (red if c[strongest] > 0 else blue) in styles[strongest]
    # The first view is the score alone; the second is the value with the importance.
    assert all("slx-flat" in t["class"] for t in page.tokens)
    channels = read(html, view="channels")
    v = word_exp.value
    strongest = int(np.argmax(np.abs(v)))
    assert (red if v[strongest] > 0 else blue) in channels.tokens[strongest]["style"]
    s, determined = word_exp.importance, word_exp.importance_determined
    assert determined.any()
    classes = [t["class"].split() for t in channels.tokens]
    top, low = (int(np.flatnonzero(determined)[f(s[determined])]) for f in (np.argmax, np.argmin))
    assert "slx-s8" in classes[top] and "slx-s0" in classes[low]
    assert ".slx-s8 { font-weight: 700; text-decoration-thickness: 4.00px" in html
    # The lowest importance is a thin underline on normal, dark text, not a greyed-out word.
    assert ".slx-s0 { font-weight: 400;" in html
    with pytest.raises(ValueError, match="second channel"):
        word_exp.to_html(score="importance")
    with pytest.raises(ValueError, match="unknown score"):
        word_exp.to_html(score="saliency")


def test_legend_states_scale_unit_and_reference_point(word_exp):
    html = word_exp.to_html(score="lin")
    top = scale_of(word_exp.lin)
    assert f"±{top:.3g}" in html
    assert SCORES["lin"].unit in html and "reference point b" in html
    assert "Underline and weight: importance" in html


def test_text_is_escaped_and_shown_whole(word_exp):
    html = word_exp.to_html()
    page = read(html)
    assert "script" not in page.tags  # the page has no script at all, the text's included
    assert page.texts == [WORD_TEXT]
    assert "&lt;script&gt;" in html and "<script>" not in html


def test_original_spelling_of_an_uncased_wordpiece_text(bert_exp):
    assert "movie" in bert_exp.tokens and "[UNK]" in bert_exp.tokens  # what the tokenizer made
    page = read(bert_exp.to_html())
    assert page.texts == [BERT_TEXT]  # every character, once, in order
    shown = [t["text"] for t in page.tokens]
    assert "Movie" in shown and "GREAT" in shown and "<" in shown and "alert" in shown
    assert len(page.tokens) == bert_exp.n_positions


def test_original_spelling_of_a_byte_level_bpe_text(gpt2_exp):
    assert any(t.startswith("Ġ") for t in gpt2_exp.tokens)
    page = read(gpt2_exp.to_html())
    # One block per class, each named, and every block shows the whole text.
    assert len(page.texts) == 3 and all(t == GPT2_TEXT for t in page.texts)
    html = gpt2_exp.to_html()
    assert all(f"<h3>{name}</h3>" in html for name in gpt2_exp.class_names)
    assert not any("Ġ" in t["text"] for t in page.tokens)
    one = read(gpt2_exp.to_html(class_index="LABEL_2"))
    assert _close(_scores_of(one.tokens, "value"), gpt2_exp.value[:, 2])


def test_pieces_and_alignment_without_and_with_the_text():
    assert pieces(["Ġgreat", "Ġcaf", "Ã", "©"], "token") == [("great", False), ("caf", True), ("", False), ("é", False)]
    assert pieces(["great", "##ly"], "token") == [("great", False), ("ly", False)]
    assert align("Héllo wörld", ["hello", "world"]) == [(0, 5), (6, 11)]
    # A piece is not matched to a far later occurrence ("b" at the end), so "zz" still is.
    assert align("a zz " + "x " * 40 + "b", ["a", "b", "zz"]) == [(0, 1), None, (2, 4)]
    assert layout(["a", "b"], "token") == [("a", 0), (" ", None), ("b", 1)]


def test_title_names_prediction_explained_class_and_outputs(word_exp, multi_exp):
    html = word_exp.to_html()
    assert "explained the model&#x27;s output" in html and "f(x) = " in html and R2_NAME in html
    multi = multi_exp.to_html()
    k = int(np.argmax(multi_exp.model_output))
    assert f"predicted {multi_exp.class_names[k]} (p = " in multi
    assert "explained every class (joint fit)" in multi


def test_fragment_and_notebook_repr(word_exp):
    frag = word_exp._repr_html_()
    assert frag.startswith("<style>") and "<html" not in frag
    assert explanation_fragment(word_exp, include_style=False).startswith('<div class="slx-view"')
    assert 'id="slx' in frag  # tabs work in a notebook: the fragment's controls have their own names
    page = word_exp.to_html()
    assert page.startswith("<!DOCTYPE html>") and "Content-Security-Policy" in page
    assert "http://" not in page and "https://" not in page


def test_prompted_llm_explanation_is_viewed_with_its_label_words(tmp_path):
    from tiny_models import gpt2_tokenizer, tiny_causal_lm

    tok = gpt2_tokenizer(tmp_path)
    clf = sc.PromptClassifier(tiny_causal_lm("gpt2", tok), tok, "Review:\n{text}\nSentiment:", [" bad", " good"])
    text = "a great film"
    exp = sc.explain(clf, text, n_samples=60, seed=0)
    page = read(exp.to_html())
    assert page.texts == [text] and len(page.tokens) == exp.n_positions
    assert "predicted " in exp.to_html()


def test_compare_rows_of_scores_and_of_explanations(word_exp):
    again = sc.explain(word_exp_model(), WORD_TEXT, n_samples=300, seed=1)
    html = compare_html(
        [word_exp, again],
        labels=["seed 0", "seed 1"],
        scores=["value", "removal"],
        faithfulness={"seed 1 · removal": {"deletion AOPC": 0.25}},
    )
    page = read(html)
    assert len(page.texts) == 4 and all(t == WORD_TEXT for t in page.texts)
    assert _close(_scores_of(page.tokens[-word_exp.n_positions :], "removal"), again.removal)
    assert "deletion AOPC 0.25" in html and html.count(R2_NAME) == 4
    with pytest.raises(ValueError, match="do not exist"):
        compare_html(word_exp, faithfulness={"nope": {"x": 1.0}})
    with pytest.raises(ValueError, match="different texts"):
        compare_html([word_exp, sc.explain(word_exp_model(), "the film", n_samples=50, seed=0)])


def word_exp_model():
    from conftest import slalom_model

    return slalom_model()


def test_word_granularity_shows_words_in_their_spelling(tmp_path):
    from tiny_models import bert_tokenizer, tiny_classifier

    tok = bert_tokenizer(tmp_path)
    text = "Boring  acting, GREAT film!"
    exp = sc.explain(
        tiny_classifier("bert", tok), text, tokenizer=tok, granularity="word", n_samples=80, seed=0, output="logits"
    )
    page = read(exp.to_html())
    assert page.texts == [text]
    assert [t["text"] for t in page.tokens] == ["Boring", "acting", ",", "GREAT", "film", "!"]


def test_a_binary_models_own_class_names_title_its_page(tmp_path):
    # The fit is one log-odds column; the model's id2label still names the classes.
    from tiny_models import bert_tokenizer
    from transformers import BertConfig, BertForSequenceClassification

    tok = bert_tokenizer(tmp_path / "tok")
    cfg = BertConfig(
        vocab_size=len(tok), hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=20,
        max_position_embeddings=64, num_labels=2, id2label={0: "NEG", 1: "POS"}, label2id={"NEG": 0, "POS": 1},
    )  # fmt: skip
    exp = sc.explain(BertForSequenceClassification(cfg), "a good film", tok, n_samples=60, seed=0)
    assert exp.class_names is None and exp.diagnostics.class_names == ["NEG", "POS"]
    page = exp.to_html()
    assert "POS" in page and "class 1" not in page
    again = sc.load_explanation(exp.save(tmp_path / "e.json"))
    assert again.diagnostics.class_names == ["NEG", "POS"]
