"""Amortized SLALOM: fit on a tiny corpus run, explain, save/load, refusals, OOD, audit."""

import json
import warnings

import numpy as np
import pytest
import slalom_core as sc
import torch
from scipy.stats import spearmanr
from slalom_core import scores
from slalom_core.amortized import AmortizedExplainer, AmortizedOODWarning
from slalom_core.corpus import explain_corpus
from tiny_models import SHORT_REVIEWS, signal_bert, tiny_classifier, write_jsonl

pytest.importorskip("pyarrow")
pytest.importorskip("safetensors")

TEXTS = list(SHORT_REVIEWS)
FAST = dict(n_samples=150, show_progress=False)


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    return signal_bert(tmp_path_factory.mktemp("bert"))


@pytest.fixture(scope="module")
def run(bert, tmp_path_factory):
    model, tok = bert
    tmp = tmp_path_factory.mktemp("amortized")
    return explain_corpus(model, write_jsonl(tmp / "c.jsonl", TEXTS), tmp / "run", tok, **FAST)


@pytest.fixture(scope="module")
def fitted(bert, run):
    model, tok = bert
    return AmortizedExplainer(model, tok, epochs=30, hidden=32).fit(run)


def test_fit_explain_save_load_round_trip(bert, run, fitted, tmp_path):
    model, tok = bert
    before = fitted.explain_batch(["the movie was great", "a bad plot"])
    folder = fitted.save(tmp_path / "head")
    assert sorted(p.name for p in folder.iterdir()) == ["config.json", "head.safetensors"]
    loaded = AmortizedExplainer.load(folder, model, tok)
    after = loaded.explain_batch(["the movie was great", "a bad plot"])
    # Exact where the file decides: the head's weights come back bit for bit.
    for name, w in fitted.head.state_dict().items():
        assert torch.equal(w, loaded.head.state_dict()[name]), name
    # The scores: one forward of the same weights on the same inputs (no fit).
    for a, b in zip(before, after):
        # tol: float32 head and encoder forward; the same call twice differs by rounding at most
        np.testing.assert_allclose(a.value, b.value, rtol=0, atol=1e-6)
        np.testing.assert_allclose(a.importance, b.importance, rtol=0, atol=1e-6)  # tol: as above
        assert a.base_value == b.base_value and a.model_output == b.model_output
    assert loaded.explain_batch([]) == []
    assert loaded.config["trained_on"]["method"] == run.manifest["options"]["method"]


def test_explanations_are_slalom_explanations_of_the_predicted_v_and_s(bert, fitted):
    model, tok = bert
    text = "the film was great , the plot was boring"
    exp = fitted.explain(text)
    assert exp.method == "amortized" and exp.diagnostics["method"] == "amortized"
    assert exp.diagnostics.importance_measured == "predicted"  # not measured for this text
    v, s = exp.value, exp.importance
    np.testing.assert_allclose(exp.lin, scores.lin(v, s))
    law = exp.surrogate.law
    np.testing.assert_allclose(exp.contribution, scores.contribution(v, s, law=law))
    np.testing.assert_allclose(exp.removal, scores.removal(v, s, law=law))
    assert exp.base_value + exp.contribution.sum() == pytest.approx(exp.surrogate_output)
    # The law: the label fits' median amplification, its pivot where the surrogate meets the
    # model on the text (the head predicts v and s; the forward pass measures the output).
    typical = fitted.config["law"]
    assert (law.exponent, law.curvature) == (typical["exponent"], typical["curvature"])
    assert typical["from_texts"] > 0 and not law.is_identity
    # tol: float64 rounding of the pivot solved from one equation
    assert exp.surrogate_output == pytest.approx(exp.model_output, abs=1e-9)
    assert sc.LengthLaw.from_diagnostics(exp.diagnostics) == law
    # The reference point and the model's output are those a per-text explanation reports.
    per_text = sc.explain(model, text, tokenizer=tok, n_samples=150)
    # tol: float32 logits of the same texts, in the per-text fit's batches
    assert exp.base_value == pytest.approx(per_text.base_value, abs=1e-5)
    assert exp.model_output == pytest.approx(per_text.model_output, abs=1e-5)
    # A repeated token is one unit: one value and one importance, centred over the units.
    the = [i for i, t in enumerate(exp.tokens) if t == "the"]
    assert len(the) == 2 and exp.value[the[0]] == exp.value[the[1]]
    first = np.unique(exp.unit_index, return_index=True)[1]
    # tol: float64 rounding: importances are centred over the units
    assert abs(exp.importance[first].sum()) < 1e-9


def test_runs_and_heads_of_another_model_are_refused(bert, run, fitted, tmp_path):
    _, tok = bert
    other = tiny_classifier("bert", tok, seed=1, initializer_range=0.2)
    with pytest.raises(ValueError, match="another model or tokenizer"):
        AmortizedExplainer(other, tok).fit(run)
    folder = fitted.save(tmp_path / "head")
    with pytest.raises(ValueError, match="trained for another model"):
        AmortizedExplainer.load(folder, other, tok)


def test_another_method_and_too_small_runs_are_refused(bert, run, tmp_path):
    model, tok = bert
    data = write_jsonl(tmp_path / "c.jsonl", TEXTS)
    eff = explain_corpus(model, data, tmp_path / "eff", tok, method="eff", **FAST)
    explainer = AmortizedExplainer(model, tok, epochs=2, hidden=8).fit(run)
    with pytest.raises(ValueError, match="its method is 'eff'"):
        explainer.fit(eff)
    small = explain_corpus(model, data, tmp_path / "small", tok, limit=3, **FAST)
    with pytest.raises(ValueError, match="too few to train on"):
        AmortizedExplainer(model, tok).fit(small)


def test_bad_texts_get_the_per_text_errors(bert, fitted):
    model, tok = bert
    long = " ".join(["movie"] * 80)
    for bad, options in (("", {}), (long, {"truncate": False})):
        with pytest.raises(ValueError) as per_text:
            sc.explain(model, bad, tokenizer=tok, n_samples=150)
        with pytest.raises(ValueError) as amortized:
            fitted.explain_batch([bad], **options)
        assert str(amortized.value).startswith(str(per_text.value))


def test_long_texts_are_cut_by_the_one_rule_of_every_entry_point(bert, fitted):
    """explain_batch cuts a text too long as a corpus run (and `explain --amortized`) cuts it."""
    model, tok = bert
    long = " ".join(["movie"] * 80)
    adapter = fitted.adapter
    seg, n_cut = adapter.segment_within_length(long)
    assert n_cut > 0 and len(seg.unit_ids) + len(adapter.prefix_ids) + len(adapter.suffix_ids) == adapter.max_length
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AmortizedOODWarning)
        exp = fitted.explain(long)
    assert exp.tokens == seg.tokens and exp.diagnostics["truncated_positions"] == n_cut


def test_texts_unlike_the_training_texts_are_flagged(fitted):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        usual = fitted.explain("the plot was great")
    assert usual.diagnostics["ood"]["warning"] is None
    with pytest.warns(AmortizedOODWarning, match="2 of 2 texts"):
        long, unseen = fitted.explain_batch(["the movie was great and the plot was fun " * 3, "films boringly"])
    assert "outside the training texts' range" in long.diagnostics["ood"]["warning"]
    assert "never occur in the training texts" in unseen.diagnostics["ood"]["warning"]
    assert unseen.diagnostics["ood"]["unseen_share"] == pytest.approx(0.5)


def test_audit_reports_agreement_with_per_text_fits(bert, fitted):
    texts = ["the movie was great", "a boring plot and a bad actor", "i hated the awful film", "very good fun"]
    exps = fitted.explain_batch(texts, audit=0.5, audit_samples=150, audit_seed=3)
    report = fitted.last_audit
    assert len(report.indices) == 2 and report.n_samples == 150
    audited = [i for i, e in enumerate(exps) if "audit" in e.diagnostics]
    assert audited == report.indices
    model, tok = bert
    fits = sc.explain_batch(model, [texts[i] for i in audited], tokenizer=tok, n_samples=150, seed=3)
    for i, fit, rho_v in zip(audited, fits, report.value_spearman):
        first = np.unique(exps[i].unit_index, return_index=True)[1]
        assert rho_v == pytest.approx(spearmanr(exps[i].value[first], fit.value[first])[0])
    assert report.summary()["value_spearman"] == pytest.approx(np.mean(report.value_spearman))


def test_command_line_trains_then_explains_a_corpus(bert, run, tmp_path):
    import argparse

    from slalom_core.cli.amortize import add_parser

    parser = argparse.ArgumentParser(prog="slalom-xai")
    add_parser(parser.add_subparsers(dest="command", required=True), load_pair=lambda spec: bert)
    args = parser.parse_args(
        ["amortize", str(run.path), "--model", "tiny", "--out", str(tmp_path / "h"), "--epochs", "3"]
    )
    assert args.func(args) == 0
    data = write_jsonl(tmp_path / "d.jsonl", ["the movie was great", "", "a bad plot"])
    out = tmp_path / "out.jsonl"
    cmd = ["explain-amortized", "--amortized", str(tmp_path / "h"), "--model", "tiny", "--data", str(data)]
    args = parser.parse_args([*cmd, "--out", str(out), "--audit", "0.5"])
    assert args.func(args) == 0
    rows = {r["id"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert rows["r1"]["error"] == "ValueError" and "empty" in rows["r1"]["message"]
    assert rows["r0"]["tokens"] == ["the", "movie", "was", "great"]
    # tol: rounding: the JSON record keeps 6 decimals of each score
    assert sum(rows["r2"]["contribution"]) + rows["r2"]["base_value"] == pytest.approx(
        fitted_output(rows["r2"]), abs=1e-5
    )
    assert sum("audit" in r for r in rows.values()) == 1


def fitted_output(rec):
    """The surrogate's output from a record's value, importance and length law: the same
    formula as the engine's."""
    law = sc.LengthLaw.from_dict(rec["length_law"])
    v, s = np.array(rec["value"]), np.array(rec["importance"])
    return rec["base_value"] + float(scores.contribution(v, s, law=law).sum())


def test_explaining_leaves_every_submodule_mode_and_keeps_batch_order(bert, fitted):
    """Texts of different lengths are batched by length, answered in the order given; the
    model's modes come back submodule by submodule (one layer kept in eval mode stays so)."""
    model, _ = bert
    model.train()
    frozen = next(m for m in model.modules() if isinstance(m, torch.nn.Dropout))
    frozen.eval()
    modes = [m.training for m in model.modules()]
    texts = ["the film was great , the plot was boring and the actor was bad", "a bad plot", "great fun"]
    try:
        batch = fitted.explain_batch(texts)
        assert [m.training for m in model.modules()] == modes
    finally:
        model.eval()
    for text, exp in zip(texts, batch):
        alone = fitted.explain(text)
        assert exp.tokens == alone.tokens
        # tol: float32 attention: a text padded in a batch sums in another order; the head's fp16 inputs may round the other way
        np.testing.assert_allclose(exp.value, alone.value, atol=1e-4)
