"""Tests of slalom_core.plots on explanations of a tiny model that *is* a SLALOM."""

from __future__ import annotations

import html
import re

import matplotlib

matplotlib.use("Agg")  # headless: nothing may try to open a window

import matplotlib.pyplot as plt
import numpy as np
import pytest
import slalom_core as sc
import torch
from slalom_core import plots
from slalom_core.experiments.synthetic import make_word_tokenizer
from tiny_models import SlalomModel

# Words with characters HTML must escape, and WordPiece-style continuations.
WORDS = ["the", "film", "was", "great", "awful", "<b>", "&", "play", "##ing", "dull", '"quoted"']
TEXT = 'the film was great & <b> the play ##ing was dull "quoted" the'
N_SPECIAL = 5  # make_word_tokenizer puts [PAD] [UNK] [CLS] [SEP] [MASK] first


def _slalom_model(n_classes: int = 1, seed: int = 0) -> sc.TorchClassifier:
    """A torch callable computing a SLALOM exactly: Σ softmax(s)_i v_i over the ids."""
    g = torch.Generator().manual_seed(seed)
    vocab = N_SPECIAL + len(WORDS)
    v = torch.randn(vocab, n_classes, generator=g, dtype=torch.float64) * 2
    s = torch.randn(vocab, generator=g, dtype=torch.float64)
    tok = make_word_tokenizer(WORDS, add_cls_sep=False)
    return sc.TorchClassifier(SlalomModel(v.numpy(), s.numpy()), tokenizer=tok)


@pytest.fixture(scope="module")
def binary_exp() -> sc.SlalomExplanation:
    return sc.explain(_slalom_model(), TEXT, method="ana", seed=0)


@pytest.fixture(scope="module")
def multi_exp() -> sc.SlalomExplanation:
    return sc.explain(_slalom_model(n_classes=3), TEXT, method="eff", n_samples=300, seed=0)


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


# --- scatter ---------------------------------------------------------------------------------


def test_scatter_one_point_per_unique_unit_at_value_importance(binary_exp):
    ax = plots.plot_scatter(binary_exp, max_labels=None)
    offsets = np.asarray(ax.collections[0].get_offsets())
    n_units = binary_exp.surrogate.n_units
    assert n_units < binary_exp.n_positions  # "the" and "was" repeat: units, not positions
    assert offsets.shape == (n_units, 2)
    np.testing.assert_allclose(offsets[:, 0], binary_exp.surrogate.value)
    np.testing.assert_allclose(offsets[:, 1], binary_exp.surrogate.importance)
    labels = {t.get_text() for t in ax.texts}
    assert labels == set(binary_exp.tokens)


def test_scatter_labels_the_largest_scores_first_and_never_overlapping(binary_exp):
    ax = plots.plot_scatter(binary_exp, max_labels=3)
    labels = [t.get_text() for t in ax.texts]
    assert 1 <= len(labels) <= 3 and set(labels) <= set(binary_exp.tokens)
    # Candidates are the units with the largest |lin| (the colour); the largest always gets its label.
    lin = binary_exp.surrogate.value * np.exp(binary_exp.surrogate.importance)
    table = binary_exp.unit_table()
    top = [table[u]["token"] for u in np.argsort(-np.abs(lin))[:3]]
    assert set(labels) <= set(top) and top[0] in labels
    renderer = ax.figure.canvas.get_renderer()
    boxes = [t.get_window_extent(renderer) for t in ax.texts]
    assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1 :])
    assert len(plots.plot_scatter(binary_exp, annotate=False).texts) == 0


def test_scatter_uses_given_axes_and_saves_png(binary_exp, tmp_path):
    fig, ax = plt.subplots()
    out = plots.plot_scatter(binary_exp, ax=ax, color_by="shapley", colorbar=True)
    assert out is ax
    path = tmp_path / "scatter.png"
    fig.savefig(path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_scatter_multiclass_picks_class_column(multi_exp):
    assert multi_exp.surrogate.multiclass
    for k in range(3):
        ax = plots.plot_scatter(multi_exp, class_index=k, annotate=False)
        np.testing.assert_allclose(np.asarray(ax.collections[0].get_offsets())[:, 0], multi_exp.surrogate.value[:, k])
    # Default: the class the model predicts on the full text; names work too.
    k_pred = int(np.argmax(multi_exp.model_output))
    ax = plots.plot_scatter(multi_exp, annotate=False)
    np.testing.assert_allclose(np.asarray(ax.collections[0].get_offsets())[:, 0], multi_exp.surrogate.value[:, k_pred])
    ax = plots.plot_scatter(multi_exp, class_index=multi_exp.class_names[1], annotate=False)
    np.testing.assert_allclose(np.asarray(ax.collections[0].get_offsets())[:, 0], multi_exp.surrogate.value[:, 1])
    with pytest.raises(ValueError):
        plots.plot_scatter(multi_exp, class_index=3)
    with pytest.raises(ValueError):
        plots.plot_scatter(multi_exp, class_index="no such class")


def test_scatter_rejects_bad_arguments(binary_exp):
    with pytest.raises(ValueError, match="unknown score"):
        plots.plot_scatter(binary_exp, color_by="saliency")
    with pytest.raises(ValueError, match="class_index"):
        plots.plot_scatter(binary_exp, class_index=1)  # binary: a single output


# --- HTML highlight --------------------------------------------------------------------------

SPAN = re.compile(
    r'<span class="slalom-token" style="background-color: rgba\((\d+), (\d+), (\d+), ([\d.]+)\);[^"]*" title="([^"]*)">([^<]*)</span>'
)


def _spans(snippet: str) -> list[tuple]:
    return SPAN.findall(snippet)


@pytest.mark.parametrize("score", sc.SCORE_NAMES)
def test_highlight_one_span_per_position_coloured_by_sign(binary_exp, score):
    snippet = plots.highlight_html(binary_exp, score)
    spans = _spans(snippet)
    assert len(spans) == binary_exp.n_positions == snippet.count("<span")
    values = np.asarray(binary_exp.scores(score))
    colours = {}
    for (r, g, b, alpha, title, _), val in zip(spans, values):
        assert title == html.escape(f"{score} = {val:+.4g}")
        colours.setdefault(np.sign(val), set()).add((r, g, b))
        assert 0.0 <= float(alpha) <= 1.0
    assert len(colours.get(1.0, set())) <= 1 and len(colours.get(-1.0, set())) <= 1
    if 1.0 in colours and -1.0 in colours:
        assert colours[1.0] != colours[-1.0]
    # The largest |score| gets the strongest colour.
    alphas = np.array([float(s[3]) for s in spans])
    assert alphas[np.argmax(np.abs(values))] == pytest.approx(alphas.max())


def test_highlight_escapes_tokens_and_joins_wordpieces(binary_exp):
    snippet = plots.highlight_html(binary_exp, "lin")
    assert "<b>" not in snippet and "&lt;b&gt;" in snippet
    assert "&amp;" in snippet and "&quot;quoted&quot;" in snippet
    texts = [s[5] for s in _spans(snippet)]
    assert "##ing" not in snippet and "ing" in texts
    # "play" and its continuation "##ing" sit side by side, with no space between the spans.
    assert re.search(r">play</span><span[^>]*>ing</span>", snippet)
    assert re.search(r">the</span> <span[^>]*>film</span>", snippet)


def test_highlight_signs_differ_in_colour(binary_exp):
    lin = binary_exp.lin
    assert (lin > 0).any() and (lin < 0).any()
    spans = _spans(plots.highlight_html(binary_exp, "lin"))
    pos = {s[:3] for s, x in zip(spans, lin) if x > 0}
    neg = {s[:3] for s, x in zip(spans, lin) if x < 0}
    assert len(pos) == 1 and len(neg) == 1 and pos != neg


def test_highlight_multiclass_and_unknown_score(multi_exp, binary_exp):
    for k in range(3):
        spans = _spans(plots.highlight_html(multi_exp, "value", class_index=k))
        titles = [s[4] for s in spans]
        assert titles == [html.escape(f"value = {x:+.4g}") for x in multi_exp.value[:, k]]
    assert multi_exp.class_names[0] in plots.highlight_html(multi_exp, "lin", class_index=0)
    with pytest.raises(ValueError, match="unknown score"):
        plots.highlight_html(binary_exp, "attention")
    with pytest.raises(ValueError, match="unknown score"):
        plots.highlight_html(binary_exp, "")


def test_highlight_word_granularity_and_bpe_marks(binary_exp):
    # Word granularity: positions are words, joined by spaces.
    tok = make_word_tokenizer(WORDS, add_cls_sep=False)
    model = _slalom_model()
    exp = sc.explain(model, TEXT, tokenizer=tok, granularity="word", method="ana", seed=0)
    assert exp.granularity == "word"
    assert len(_spans(plots.highlight_html(exp))) == exp.n_positions
    # Byte-level BPE marks ("Ġ") start words and are not shown.
    bpe = sc.SlalomExplanation(
        tokens=["Hello", "Ġwor", "ld", "Ġ<", "Ċ"],
        token_ids=[(1,), (2,), (3,), (4,), (5,)],
        unit_index=np.arange(5),
        surrogate=sc.SlalomSurrogate(np.array([1.0, -1.0, 0.5, 0.0, 2.0]), np.zeros(5)),
        method="ana",
    )
    snippet = plots.highlight_html(bpe, "value")
    assert "Ġ" not in snippet and "&lt;" in snippet
    assert re.search(r">Hello</span> <span[^>]*>wor</span><span[^>]*>ld</span> <span[^>]*>&lt;</span>", snippet)
    assert len(_spans(snippet)) == 5


def test_save_html_writes_a_document(binary_exp, tmp_path):
    snippet = plots.highlight_html(binary_exp)
    path = plots.save_html(snippet, tmp_path / "exp.html")
    text = path.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>") and 'charset="utf-8"' in text and snippet in text
    # A whole document is written as is.
    doc = "<html><body>x</body></html>"
    assert plots.save_html(doc, tmp_path / "doc.html").read_text(encoding="utf-8") == doc
    with pytest.raises(TypeError):
        plots.save_html(b"bytes", tmp_path / "b.html")
