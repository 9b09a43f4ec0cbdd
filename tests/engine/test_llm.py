"""PromptClassifier on tiny random causal LMs (GPT-2, BLOOM, Llama-style, Mamba), offline."""

import copy

import numpy as np
import pytest
import slalom_core as sc
import torch
from tiny_models import gpt2_tokenizer, llama_style_tokenizer, tiny_causal_lm

KINDS = ("gpt2", "bloom", "llama", "mamba")
TEMPLATE = "Review:\n{text}\nSentiment:"
TEXTS = ["the movie was great", "bad", "i hated the boring plot and the actor"]


def _tokenizer(kind, tok_dir):
    return llama_style_tokenizer(tok_dir / "llama") if kind == "llama" else gpt2_tokenizer(tok_dir / "bpe")


@pytest.fixture(scope="module", params=KINDS)
def lm(request, tmp_path_factory):
    tok = _tokenizer(request.param, tmp_path_factory.mktemp("tok"))
    return request.param, tok, tiny_causal_lm(request.param, tok)


def _direct(model, clf, ids):
    """log p(label | prompt) by one unpadded forward per class, independent of the adapter."""
    row = []
    for label in clf.label_ids:
        full = list(clf.prefix_ids) + list(ids) + list(clf.suffix_ids) + list(label)
        with torch.no_grad():
            lp = model(input_ids=torch.tensor([full])).logits[0].double().log_softmax(-1)
        n = len(label)
        row.append(sum(float(lp[len(full) - n - 1 + j, label[j]]) for j in range(n)))
    return row


@pytest.mark.parametrize("padding", ["auto", "left", "none"])
@pytest.mark.parametrize("labels", [[" good", " bad"], [" very good", " bad", " awful"]])
def test_batched_scores_equal_one_unpadded_forward_per_text(lm, padding, labels):
    kind, tok, model = lm
    clf = sc.PromptClassifier(model, tok, TEMPLATE, labels, padding=padding)
    seqs = [tok(t, add_special_tokens=False)["input_ids"] for t in TEXTS]
    got = clf.score(seqs)  # one batch of three lengths (padded, or split where padding="none")
    want = torch.tensor([_direct(model, clf, s) for s in seqs], dtype=torch.float64)
    assert got.shape == (3, len(labels))
    # tol: float32 log-probabilities of a causal LM: padded batches and one-by-one reads differ by ~1e-6
    torch.testing.assert_close(got, want, atol=2e-5, rtol=1e-5)
    # the texts really change the answer: a test of a constant would pass anything
    assert (want[0] - want[2]).abs().max() > 1e-3


def test_template_tokens_are_kept_and_bos_added(tok_dir):
    tok = llama_style_tokenizer(tok_dir / "llama_bos")
    clf = sc.PromptClassifier(tiny_causal_lm("llama", tok), tok, TEMPLATE, [" good", " bad"])
    assert clf.prefix_ids[0] == tok.bos_token_id
    assert clf.prefix_ids[1:] == tuple(tok("Review:\n", add_special_tokens=False)["input_ids"])
    assert clf.suffix_ids == tuple(tok("\nSentiment:", add_special_tokens=False)["input_ids"])
    seg = clf.segment("the movie was great")
    assert [u[0] for u in seg.unit_ids] == tok("the movie was great", add_special_tokens=False)["input_ids"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.filterwarnings("ignore::slalom_core.SlalomFitWarning")  # random weights
def test_explain_is_log_odds_of_label_words_and_deterministic(kind, tok_dir):
    tok = _tokenizer(kind, tok_dir)
    model = tiny_causal_lm(kind, tok)
    modes = [m.training for m in model.modules()]
    clf = sc.PromptClassifier(model, tok, TEMPLATE, [" bad", " good"])
    text = "the movie was great"
    a = sc.explain(clf, text, method="eff", n_samples=150, seed=3)
    b = sc.explain(clf, text, method="eff", n_samples=150, seed=3)
    np.testing.assert_array_equal(a.value, b.value)
    np.testing.assert_array_equal(a.importance, b.importance)
    assert clf.class_names == ["bad", "good"]  # label words, stripped
    # the explained output: log p(" good") - log p(" bad") after the prompt, and the
    # reference point is the same for the prompt with no text
    ids = tok(text, add_special_tokens=False)["input_ids"]
    lp = _direct(model, clf, ids)
    # tol: float32 log-probabilities of the causal LM, read in another batch
    assert a.model_output == pytest.approx(lp[1] - lp[0], abs=1e-4)
    lp0 = _direct(model, clf, [])
    # tol: float32 log-probabilities of the causal LM, read in another batch
    assert a.base_value == pytest.approx(lp0[1] - lp0[0], abs=1e-4)
    assert a.diagnostics["output"].startswith("logits")
    # only the text's tokens are features
    assert len(a.tokens) == len(ids)
    assert [m.training for m in model.modules()] == modes


def test_suffix_read_as_it_follows_a_text_and_a_slot_after_a_space_warned(tok_dir):
    from slalom_core.models.prompted import _suffix_ids

    class DummyPrefix:
        """Characters as ids, with a word-boundary id 0 before every encoding (SentencePiece-like)."""

        def __call__(self, text, add_special_tokens=False):
            return {"input_ids": [0] + [ord(c) for c in text] if text else []}

    alone = DummyPrefix()("\nSentiment:")["input_ids"]
    assert alone[0] == 0
    assert _suffix_ids(DummyPrefix(), "Review:\n", "\nSentiment:") == tuple(alone[1:])  # no boundary mid-prompt
    tok = gpt2_tokenizer(tok_dir / "space")
    with pytest.warns(UserWarning, match="follows a space"):
        sc.PromptClassifier(tiny_causal_lm("gpt2", tok), tok, "Review: {text}\nSentiment:", [" good", " bad"])


def test_fidel_and_multiclass_on_bloom(tok_dir):
    tok = gpt2_tokenizer(tok_dir / "bloom")
    clf = sc.PromptClassifier(
        tiny_causal_lm("bloom", tok), tok, TEMPLATE, {"neg": " bad", "neu": " the", "pos": " very good"}
    )
    exp = sc.explain(clf, "i hated the boring plot", method="fidel", n_samples=80, seed=0)
    n = len(tok("i hated the boring plot", add_special_tokens=False)["input_ids"])
    assert exp.value.shape == (n, 3) and exp.class_names == ["neg", "neu", "pos"]
    # tol: float64 rounding of centred values summed over 3 classes
    np.testing.assert_allclose(exp.value.sum(axis=1), 0.0, atol=1e-8)  # centred over classes


@pytest.mark.filterwarnings("ignore::slalom_core.SlalomFitWarning")
def test_model_and_tokenizer_left_unchanged_even_on_error(tok_dir):
    tok = gpt2_tokenizer(tok_dir / "unchanged")
    model = tiny_causal_lm("gpt2", tok).train()
    model.transformer.h[0].attn.eval()
    modes = [m.training for m in model.modules()]
    side, pad = tok.padding_side, tok.pad_token_id
    clf = sc.PromptClassifier(model, tok, TEMPLATE, [" good", " bad"], padding="left")
    sc.explain(clf, "the movie was great", n_samples=60, seed=0)
    with pytest.raises(IndexError):
        clf.score([[5] * 500])  # longer than n_positions: the model itself fails inside the session
    with pytest.raises(ValueError, match="at most"):
        clf.segment(" ".join(["movie"] * 200))  # explain refuses such a text before any call
    assert [m.training for m in model.modules()] == modes
    assert (tok.padding_side, tok.pad_token_id) == (side, pad)
    assert all(p.requires_grad for p in model.parameters())


def test_bad_templates_and_labels_are_refused(tok_dir):
    tok = gpt2_tokenizer(tok_dir / "bad")
    model = tiny_causal_lm("gpt2", tok)
    with pytest.raises(ValueError, match="slot"):
        sc.PromptClassifier(model, tok, "Review:\nSentiment:", [" good", " bad"])
    with pytest.raises(ValueError, match="exactly once"):
        sc.PromptClassifier(model, tok, "{text} {text}", [" good", " bad"])
    with pytest.raises(ValueError, match="tokenizes to nothing"):
        sc.PromptClassifier(model, tok, TEMPLATE, [" good", ""])
    with pytest.raises(ValueError, match="same ids"):
        sc.PromptClassifier(model, tok, TEMPLATE, [" good", " good"])
    with pytest.raises(ValueError, match="at least 2"):
        sc.PromptClassifier(model, tok, TEMPLATE, [" good"])
    # Two tokens, one name: refused, unless the classes are named.
    with pytest.raises(ValueError, match="' good' and 'good' differ only in whitespace.*share the name 'good'"):
        sc.PromptClassifier(model, tok, TEMPLATE, [" good", "good"])
    named = sc.PromptClassifier(model, tok, TEMPLATE, {"spaced": " good", "bare": "good"})
    assert named.class_names == ["spaced", "bare"]
    with pytest.raises(TypeError, match="one label word per class"):
        sc.PromptClassifier(model, tok, TEMPLATE, " good")
    with pytest.raises(ValueError, match="padding"):
        sc.PromptClassifier(model, tok, TEMPLATE, [" good", " bad"], padding="middle")
    # a bare slot reads the text after the BOS token; without one there is nothing to read
    assert sc.PromptClassifier(model, tok, "{text}", [" good", " bad"]).prefix_ids == (tok.bos_token_id,)
    no_bos = copy.deepcopy(tok)
    no_bos.bos_token = None
    with pytest.raises(ValueError, match="nothing to predict"):
        sc.PromptClassifier(model, no_bos, "{text}", [" good", " bad"])


@pytest.mark.filterwarnings("ignore::slalom_core.SlalomFitWarning")
def test_captum_path_deletes_only_text_tokens(tok_dir):
    from captum_slalom import SlalomAttribution

    tok = gpt2_tokenizer(tok_dir / "captum")
    model = tiny_causal_lm("gpt2", tok)
    clf = sc.PromptClassifier(model, tok, TEMPLATE, [" bad", " good"])
    seen = []
    score = clf.score

    def spy(seqs):
        seen.extend(len(s) for s in seqs)
        return score(seqs)

    clf.score = spy
    ids = torch.tensor([tok("the movie was great", add_special_tokens=False)["input_ids"]])
    attr = SlalomAttribution(clf.classify).attribute(ids, target=1, n_samples=120, seed=0)
    assert attr.shape == ids.shape and torch.isfinite(attr).all()
    assert max(seen) <= ids.shape[1]  # the template is added inside, never deleted
    engine = sc.explain(clf, ids[0], n_samples=120, seed=0)
    # tol: float32: Captum's attributions are float32 and its forward batches differ; the fit passes that on
    torch.testing.assert_close(attr[0].double(), torch.as_tensor(engine.contribution), atol=1e-3, rtol=1e-3)


@pytest.mark.filterwarnings("ignore::slalom_core.SlalomFitWarning")
def test_shap_path_explains_a_prompted_lm(tok_dir):
    import shap_slalom

    tok = gpt2_tokenizer(tok_dir / "shap")
    clf = sc.PromptClassifier(tiny_causal_lm("mamba", tok), tok, TEMPLATE, [" bad", " good"])
    sv = shap_slalom.SlalomExplainer(clf, n_samples=120, seed=0)(["the movie was great"])
    assert list(sv.output_names) == ["bad", "good"]
    with torch.no_grad():
        lp = clf.score([tok("the movie was great", add_special_tokens=False)["input_ids"]])[0]
    total = sv.base_values[0, 1] + sv.values[0][:, 1].sum() + sv.residual_values[0, 1]
    # reference point + contributions (the surrogate's F(x)) + the residual: f(x), the
    # log-odds of " good" against " bad"
    # tol: float32 log-probabilities of the causal LM, read in another batch
    assert total == pytest.approx(float(lp[1] - lp[0]), abs=1e-4)


def test_an_lm_whose_weights_are_on_meta_is_named(tok_dir):
    tok = gpt2_tokenizer(tok_dir / "meta")
    clf = sc.PromptClassifier(tiny_causal_lm("gpt2", tok).to("meta"), tok, TEMPLATE, [" good", " bad"])
    with pytest.raises(ValueError, match=r"GPT2LMHeadModel's weights are on the meta device.*load the weights first"):
        sc.explain(clf, "the movie was great", n_samples=50, seed=0)


def test_a_label_that_extends_another_is_warned(tok_dir):
    tok = gpt2_tokenizer(tok_dir / "extends")
    model = tiny_causal_lm("gpt2", tok)
    with pytest.warns(UserWarning, match="' very good' begins with the tokens of ' very'.*can never win"):
        sc.PromptClassifier(model, tok, TEMPLATE, [" very", " very good", " bad"])
