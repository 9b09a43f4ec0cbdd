"""explain / explain_batch: bad inputs, determinism, batching, targets, results."""

import json
import pickle
from pathlib import Path

import numpy as np
import pytest
import slalom_core as sc
import torch
from slalom_core.diagnostics import CORE_FIELDS
from tiny_models import SlalomModel, bert_tokenizer, random_slalom, record_reads, tiny_classifier


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    tok = bert_tokenizer(tmp_path_factory.mktemp("bert"))
    return tiny_classifier("bert", tok), tok


@pytest.fixture(scope="module")
def slalom3():
    v, s = random_slalom(30, n_classes=3, seed=11)
    return sc.TorchClassifier(SlalomModel(v, s)), v, s


def test_empty_text_raises(bert):
    model, tok = bert
    for bad in ["", "   "]:
        with pytest.raises(ValueError, match="empty"):
            sc.explain(model, bad, tokenizer=tok)
    with pytest.raises(ValueError, match="empty"):
        sc.explain(model, [], tokenizer=tok)


def test_too_long_text_raises(bert):
    model, tok = bert
    with pytest.raises(ValueError, match="at most 64"):
        sc.explain(model, "the movie " * 40, tokenizer=tok)


def test_non_finite_output_raises():
    f = lambda ids, mask: torch.where(ids[:, :1] == 2, torch.nan, 1.0).double()
    with pytest.raises(FloatingPointError, match="non-finite"):
        sc.explain(sc.TorchClassifier(f), [1, 2, 3], method="ana", reference=0.0)


def test_bad_target_raises(slalom3, bert):
    clf, _, _ = slalom3
    with pytest.raises(ValueError, match="not a class"):
        sc.explain(clf, [1, 2, 3], method="ana", target=3)
    with pytest.raises(TypeError, match="target"):
        sc.explain(clf, [1, 2, 3], method="ana", target="POSITIVE")
    model, tok = bert
    with pytest.raises(ValueError, match="not a class"):
        sc.explain(model, "great movie", tokenizer=tok, target=2, n_samples=10)


def test_class_names_that_do_not_match_the_outputs_raise(slalom3):
    # Three outputs, two names: the columns cannot be labelled (they used to become "0".."2").
    _, v, s = slalom3
    clf = sc.TorchClassifier(SlalomModel(v, s), class_names=["neg", "pos"])
    with pytest.raises(ValueError, match="3 output.*2 class names"):
        sc.explain(clf, [1, 2, 3], method="ana")
    named = sc.explain(sc.TorchClassifier(SlalomModel(v, s), class_names=["a", "b", "c"]), [1, 2, 3], method="ana")
    assert named.class_names == ["a", "b", "c"]


def test_unknown_names_raise(bert, slalom3):
    clf, _, _ = slalom3
    exp = sc.explain(clf, [1, 2, 3], method="ana")
    with pytest.raises(ValueError, match="unknown score"):
        exp.scores("saliency")
    with pytest.raises(ValueError, match="unknown method"):
        sc.explain(clf, [1, 2], method="shap")
    with pytest.raises(ValueError, match="unknown output"):
        sc.explain(clf, [1, 2], method="ana", output="log")
    model, tok = bert
    with pytest.raises(ValueError, match="unknown granularity"):
        sc.explain(model, "great", tokenizer=tok, granularity="char")
    # A misspelt keyword of explain itself is named, with the keyword it resembles.
    for typo, meant in (("tokenizr", "tokenizer"), ("n_sample", "n_samples"), ("sample_lenght", "sample_length")):
        with pytest.raises(TypeError, match=rf"\['{typo}'\] \(did you mean '{meant}'\?\)"):
            sc.explain(model, "great", **{typo: 3})


def test_too_few_samples_raises(slalom3):
    clf, _, _ = slalom3
    with pytest.raises(ValueError, match="too few"):
        sc.explain(clf, list(range(20)), method="eff", n_samples=10)
    with pytest.raises(ValueError, match="positive int"):
        sc.explain(clf, [1, 2], n_samples=0)


def test_what_the_driver_reads_is_public():
    # The fitter's prior (recorded in the diagnostics) and the device the fits run on are
    # declared attributes, not private state the driver reaches into.
    assert sc.get_fitter("eff").prior_sd == 0.25
    assert sc.get_fitter("ana").prior_sd is None
    assert sc.get_fitter("fidel", solver="als").prior_sd is None
    clf = sc.TorchClassifier(lambda ids, mask: ids.double()[:, :2])
    assert clf.fit_device is None
    with clf.session():
        assert clf.fit_device == torch.device("cpu")
    assert clf.fit_device is None
    black_box = sc.StringClassifier(lambda texts: [[0.0, 1.0]] * len(texts))
    with black_box.session():
        assert black_box.fit_device is None


def test_check_call_normalises_what_explain_uses():
    call = sc.check_call(method="ana", target=np.int64(1), seed=[np.int64(3), 4], reference=[0.5, -0.5])
    assert call.fitter.name == "ana" and call.target == 1 and type(call.target) is int
    assert call.seed == (3, 4) and all(type(s) is int for s in call.seed)
    np.testing.assert_array_equal(call.reference, [0.5, -0.5])
    assert sc.check_call().reference is None and sc.check_call().fitter.name == sc.DEFAULT_METHOD
    with pytest.raises(ValueError, match="seed has 1 entries for 2 texts"):
        sc.explain_batch(sc.TorchClassifier(lambda ids, mask: ids.double()), [[1], [2]], seed=[0], reference=0.0)


def test_plain_function_needs_wrapping():
    with pytest.raises(TypeError, match="TorchClassifier"):
        sc.explain(lambda ids, mask: ids, [1, 2])


def test_one_token_text(bert):
    model, tok = bert

    def log_odds(text: str) -> float:  # the explained output, computed here without the engine
        with torch.no_grad():
            logits = model(**tok([text], return_tensors="pt")).logits[0]
        return float(logits[1] - logits[0])

    empty = log_odds("")
    for method in ("eff", "fidel", "ana"):
        exp = sc.explain(model, "great", tokenizer=tok, method=method, n_samples=20, seed=0)
        assert exp.tokens == ["great"]
        # tol: float32 logits of the same forward pass on the empty input (rounding ~1e-8 at this size); see below
        assert exp.base_value == pytest.approx(empty, abs=1e-7)
        # One token: fidel and ana see the text itself, eff's samples are "great great";
        # v is the output on what the fitter saw, measured from the empty text, and the
        # removal score leaves the empty text. The tiny model's outputs differ by ~1e-4
        # between the two inputs, so 1e-7 tells them apart. A lone importance is not
        # identified (softmax over one unit), so it is not checked.
        seen = log_odds("great great" if method == "eff" else "great") - empty
        assert exp.value[0] == pytest.approx(seen, abs=1e-7)  # tol: float32 logits of size ~0.01, rounding ~1e-9
        # tol: float32 logits, as above
        assert exp.removal[0] == pytest.approx(seen, abs=1e-7)


def test_same_seed_same_explanation(bert):
    model, tok = bert
    a = sc.explain(model, "the plot was boring but fun", tokenizer=tok, n_samples=80, seed=3)
    b = sc.explain(model, "the plot was boring but fun", tokenizer=tok, n_samples=80, seed=3)
    c = sc.explain(model, "the plot was boring but fun", tokenizer=tok, n_samples=80, seed=4)
    # Exact: the same call run twice (same samples, same batches, same CPU).
    np.testing.assert_array_equal(a.value, b.value)
    np.testing.assert_array_equal(a.importance, b.importance)
    assert not np.allclose(a.value, c.value)
    assert a.diagnostics["seed"] == 3
    # no seed: a fresh one is drawn and recorded, so the result can be reproduced
    d = sc.explain(model, "the plot was boring", tokenizer=tok, n_samples=60)
    e = sc.explain(model, "the plot was boring", tokenizer=tok, n_samples=60, seed=d.diagnostics["seed"])
    # Exact: the same call again with the recorded seed (same samples, batches and CPU).
    np.testing.assert_array_equal(d.lin, e.lin)


def test_batch_shares_the_reference_call(tok_dir):
    # the invariance itself (batch = loop = other batch_size) is tested on a model with a
    # signal in test_reference_point.py; here: the bookkeeping of a batch
    tok = bert_tokenizer(tok_dir / "bert_batch")
    model = tiny_classifier("bert", tok, initializer_range=0.2)
    texts = ["the movie was great", "i hated the boring plot and the actor", "fun"]
    with record_reads(model) as reads:
        batch = sc.explain_batch(model, texts, tokenizer=tok, n_samples=50, seed=0, method="fidel")
    # Each distinct sequence is read once, and booked on the first text that asked for it:
    # the empty input ([CLS] [SEP]) on the first text.
    assert len(reads) == len(set(reads)) == sum(e.diagnostics["model_evaluations"] for e in batch)
    assert reads.count((tok.cls_token_id, tok.sep_token_id)) == 1
    assert all(e.diagnostics["n_samples"] == 50 for e in batch)
    # "fun" has one token: its samples are the empty input or itself, both read before any sample
    assert batch[2].diagnostics["model_evaluations"] == 1
    assert 1 < batch[0].diagnostics["model_evaluations"] <= 52
    assert len({e.base_value for e in batch}) == 1


def test_joint_multiclass_and_one_vs_rest(slalom3):
    clf, v, s = slalom3
    ids = [1, 5, 5, 7, 9, 12]
    joint = sc.explain(clf, ids, method="ana")
    assert joint.value.shape == (6, 3)
    assert joint.class_names == ["0", "1", "2"]
    # tol: float64 rounding of centred values summed over 3 classes
    np.testing.assert_allclose(joint.value.sum(1), 0, atol=1e-10)
    np.testing.assert_allclose(joint.surrogate_output, joint.model_output, atol=1e-8)
    ovr = sc.explain(clf, ids, method="eff", target=2, n_samples=300, seed=0)
    assert ovr.value.shape == (6,)
    assert ovr.target == 2
    assert ovr.diagnostics["heldout_r2"] > 0.9


def test_binary_target_zero_flips_sign(bert):
    model, tok = bert
    pos = sc.explain(model, "a very good film", tokenizer=tok, method="ana")
    neg = sc.explain(model, "a very good film", tokenizer=tok, method="ana", target=0)
    # tol: float32 logits of the same forward passes: target 0 flips the sign of float32 differences
    np.testing.assert_allclose(neg.value, -pos.value, atol=1e-6)  # tol: float32 logits, as above
    np.testing.assert_allclose(neg.importance, pos.importance, atol=1e-6)  # tol: float32 logits, as above


def test_diagnostics_and_dict(bert):
    model, tok = bert
    with record_reads(model) as reads:
        exp = sc.explain(model, "the movie was great fun", tokenizer=tok, method="eff", n_samples=100, seed=0)
    d = exp.diagnostics
    # 100 short samples of 5 tokens repeat (at most 5² ordered pairs and 5 single tokens):
    # each distinct one is read once, and the diagnostics count what the model read,
    # special tokens included
    assert d["n_samples"] == 100
    assert d["model_evaluations"] == len(reads) == len(set(reads)) <= 25 + 5 + 1 + 1  # + the text and the empty input
    assert d["tokens_evaluated"] == sum(len(r) for r in reads)
    assert d["model_seconds"] > 0 and d["fit_seconds"] > 0
    assert np.isfinite(d["heldout_mse"]) and d["n_heldout"] == 10
    out = json.loads(json.dumps(exp.to_dict()))
    assert out["tokens"] == exp.tokens
    assert len(exp.unit_table()) == exp.surrogate.n_units
    # The scores against the SLALOM formula, by hand: alpha = softmax of the positions'
    # importances, contribution = alpha * v; their sum is the surrogate's own forward pass
    # on the full text, and so (efficiency) is the sum of its Shapley values.
    alpha = np.exp(exp.importance) / np.exp(exp.importance).sum()
    # tol: float64 rounding of the softmax written out
    np.testing.assert_allclose(exp.contribution, alpha * exp.value, rtol=1e-12)
    full = float(exp.surrogate.predict_sequences([exp.unit_index.tolist()])[0])
    assert full != 0.0  # (this random BERT's outputs are small: compared relative to them)
    # tol: float64 rounding of a sum over the positions (Shapley values are exact here)
    assert exp.contribution.sum() == pytest.approx(full, rel=1e-9, abs=1e-15)
    assert exp.shapley().sum() == pytest.approx(full, rel=1e-9, abs=1e-15)
    for name in sc.SCORE_NAMES:
        assert exp.scores(name).shape == (5,)


@pytest.mark.parametrize("method", ["eff", "ana"])
def test_diagnostics_are_typed_and_still_a_dict(bert, method):
    model, tok = bert
    exp = sc.explain(model, "the movie was great fun", tokenizer=tok, n_samples=100, seed=0, method=method)
    d = exp.diagnostics
    assert isinstance(d, sc.Diagnostics) and isinstance(d, dict)
    for key in d:  # every entry, core or the fitter's, is an attribute
        assert getattr(d, key) is d[key]
    # a free model, a text not cut (truncate=False)
    assert set(CORE_FIELDS) - set(d) == {"api_usage", "truncated_positions"} and d.api_usage is None
    assert set(d.extras) == set(d) - set(CORE_FIELDS) and "heldout_r2" in d.extras
    assert d.method == method and d.seed == 0 and d.full_text_gap == exp.full_text_gap
    assert type(dict(d)) is dict and dict(d) == d
    # Binary outputs: every value is a plain number or string, so it serialises as is.
    assert json.loads(json.dumps(d)) == json.loads(json.dumps(exp.to_dict()["diagnostics"]))
    back = pickle.loads(pickle.dumps(exp))
    assert type(back.diagnostics) is sc.Diagnostics and repr(back.diagnostics) == repr(d)  # (NaN != NaN)
    # What callers do with it as a dict (the SHAP adapter sets "output", for one).
    d.update(note="x")
    d["other"] = 1
    d.flag = True
    assert d.note == "x" and d.other == 1 and d["flag"] is True and "flag" in d
    del d.flag
    assert "flag" not in d and type(d.copy()) is sc.Diagnostics
    with pytest.raises(AttributeError, match="no 'no_such_entry'"):
        d.no_such_entry  # noqa: B018


def test_a_plain_dict_of_diagnostics_is_converted():
    exp = sc.SlalomExplanation(
        tokens=["a"],
        token_ids=[(1,)],
        unit_index=np.zeros(1, dtype=np.int64),
        surrogate=sc.SlalomSurrogate(np.ones(1), np.zeros(1)),
        method="eff",
        diagnostics={"prior_sd": 0.5, "heldout_r2": 0.9},
    )
    d = exp.diagnostics
    assert isinstance(d, sc.Diagnostics) and d.prior_sd == 0.5 and d.heldout_r2 == 0.9
    assert d.model_evaluations is None  # a core field not set reads None
    assert sc.SlalomExplanation(exp.tokens, exp.token_ids, exp.unit_index, exp.surrogate, "eff").diagnostics == {}


def test_repeated_tokens_share_parameters(bert):
    model, tok = bert
    exp = sc.explain(model, "the movie the plot the end", tokenizer=tok, n_samples=100, seed=0)
    the = [i for i, t in enumerate(exp.tokens) if t == "the"]
    assert len(the) == 3 and len(set(exp.unit_index[the].tolist())) == 1
    assert len(set(exp.value[the].tolist())) == 1


def test_score_table_matches_the_engine_and_the_docs():
    # The table's class-0 sign is what explaining class 0 of a binary model gives.
    v, s = random_slalom(30, seed=6)
    net = SlalomModel(v, s)
    clf = sc.TorchClassifier(lambda ids, mask: torch.cat([torch.zeros(ids.shape[0], 1), net(ids, mask)], 1))
    pos = sc.explain(clf, [3, 7, 11, 7, 19], method="ana", seed=0, target=1)
    neg = sc.explain(clf, [3, 7, 11, 7, 19], method="ana", seed=0, target=0)
    for name, score in sc.SCORES.items():
        assert np.abs(pos.scores(name)).max() > 1e-3
        # tol: float64 rounding: class 0's scores are the same closed forms with a sign
        np.testing.assert_allclose(neg.scores(name), score.class0_sign * pos.scores(name), atol=1e-9)
        # additive scores add up, with the reference point, to the surrogate's output
        total = pos.base_value + pos.scores(name).sum()
        full = pos.base_value + float(pos.surrogate.predict_sequences([pos.unit_index.tolist()])[0])
        # tol: float64 rounding: an additive score sums exactly to the surrogate's output, a non-additive one misses by far more
        assert (abs(total - full) < 1e-9) == score.additive
    readme = (Path(__file__).resolve().parents[2] / "docs" / "guide.md").read_text()  # the scores table
    for score in sc.SCORES.values():
        assert f"| `{score.name}` | {score.formula} | {score.unit} |" in readme


def test_every_model_second_is_booked_on_a_text(slalom3, monkeypatch):
    # A model clock that advances one second per token scored: the texts' model_seconds
    # must add up to every second the model ran, the empty input's (the reference point,
    # scored once per call) included.
    clf, _, _ = slalom3
    clock = {"now": 0.0}

    class Clocked(sc.ModelAdapter):
        prefix_ids = (0,)  # a frame token read with every sequence, the empty input's too

        def score(self, sequences):
            clock["now"] += self.n_tokens_scored(sequences)
            return clf.score(sequences)

    monkeypatch.setattr(sc.api.driver.time, "perf_counter", lambda: clock["now"])
    exps = sc.explain_batch(Clocked(), [[1, 2, 3], [4, 5, 6, 7]], method="eff", n_samples=50, seed=0)
    assert sum(e.diagnostics.tokens_evaluated for e in exps) == clock["now"]
    assert sum(e.diagnostics.model_seconds for e in exps) == pytest.approx(clock["now"])


def test_target_by_the_models_class_name(slalom3, bert):
    """target= takes a class name where the model names its classes (config.id2label for a
    Hugging Face model); an unknown name is refused with the model's names."""
    _, v, s = slalom3
    named = sc.TorchClassifier(SlalomModel(v, s), class_names=["NEGATIVE", "NEUTRAL", "POSITIVE"])
    by_name = sc.explain(named, [1, 2, 3], method="ana", target="POSITIVE")
    by_index = sc.explain(named, [1, 2, 3], method="ana", target=2)
    assert by_name.target == 2
    np.testing.assert_array_equal(by_name.value, by_index.value)  # exact: the same call once the name is read
    with pytest.raises(ValueError, match=r"'GOOD' is not a class of this model.*'NEGATIVE', 'NEUTRAL', 'POSITIVE'"):
        sc.explain(named, [1, 2, 3], method="ana", target="GOOD")
    model, tok = bert  # a transformers model: names from config.id2label
    name = model.config.id2label[0]
    by_name = sc.explain(model, "a very good film", tokenizer=tok, method="ana", target=name)
    by_index = sc.explain(model, "a very good film", tokenizer=tok, method="ana", target=0)
    np.testing.assert_array_equal(by_name.value, by_index.value)  # exact: the same call once the name is read


def test_a_list_of_texts_to_explain_points_to_explain_batch(bert):
    model, tok = bert
    with pytest.raises(TypeError, match=r"explain_batch\(model, texts"):
        sc.explain(model, ["a text", "another"], tokenizer=tok)


@pytest.mark.invariance
def test_a_texts_scores_do_not_depend_on_its_neighbours_on_the_packaged_model():
    # The packaged MiniLM, the default method: explained together (one chunk) or alone
    # (chunks of 1), each text with its own seed as a corpus run gives it. The default fit
    # leaves the value of a unit of low importance nearly free (a long, flat valley); a
    # text whose samples were read in batches shaped by its neighbours (padding, batch
    # size: float32 differences of ~1e-7 in the forward) or solved in one batch with them
    # (padding changes the float64 rounding) stopped elsewhere in it: up to 1.7e-2 apart.
    # Now a text's samples are read in batches of its own and its fit solved alone: the
    # same operations in the same order, so the scores agree to the last bits (1e-12 leaves
    # room for nothing else).
    from slalom_core.packaged.demo_model import load_default_model
    from tiny_models import SHORT_REVIEWS

    model, tok = load_default_model()
    texts = list(SHORT_REVIEWS[:4])
    seeds = [11 + i for i in range(len(texts))]
    together = sc.explain_batch(model, texts, tokenizer=tok, seed=seeds, n_samples=300)
    alone = [sc.explain_batch(model, [t], tokenizer=tok, seed=[s], n_samples=300)[0] for t, s in zip(texts, seeds)]
    for a, b in zip(together, alone):
        for name in ("value", "importance", "contribution"):
            # tol: the same float64 operations in the same order: only the last bits may differ
            np.testing.assert_allclose(a.scores(name), b.scores(name), rtol=0, atol=1e-12, err_msg=name)


# -- long texts: one cutting rule ---------------------------------------------------------
def test_truncate_cuts_a_long_text_as_the_command_line_does(bert, tmp_path):
    from slalom_core.corpus import explain_corpus

    model, tok = bert
    long_text = " ".join(["the movie was great but the plot was boring"] * 9)  # 81 tokens; the model takes 64
    kw = dict(tokenizer=tok, method="eff", n_samples=120, seed=0)
    # Default: refused, and the error names the option that cuts.
    with pytest.raises(ValueError, match=r"accepts at most 64: truncate=True .* keeps its first tokens"):
        sc.explain(model, long_text, **kw)
    with pytest.raises(ValueError, match="truncate=True"):
        sc.explain_batch(model, ["fun", long_text], **kw)
    with pytest.raises(TypeError, match="truncate must be True or False"):
        sc.explain(model, "fun", truncate="yes", **kw)
    exp = sc.explain(model, long_text, truncate=True, **kw)
    # The command line's rule (ModelAdapter.segment_within_length): the first 62 tokens
    # beside [CLS] and [SEP], the rest counted.
    seg, n_cut = sc.HFClassifier(model, tok).segment_within_length(long_text)
    assert exp.tokens == seg.tokens and len(exp.tokens) == 62
    assert exp.diagnostics.truncated_positions == n_cut == 81 - 62
    # The same scores as the cut text explained as it is.
    cut_text = tok.convert_tokens_to_string(seg.tokens)
    same = sc.explain(model, cut_text, **kw)
    np.testing.assert_array_equal(exp.value, same.value)
    batch = sc.explain_batch(model, ["fun", long_text], truncate=True, **kw)
    assert [e.diagnostics.truncated_positions for e in batch] == [0, n_cut]
    assert "truncated_positions" not in same.diagnostics  # a call that does not cut says nothing
    assert sc.estimate_cost(model, long_text, tokenizer=tok, method="eff", n_samples=120, truncate=True)["calls"] > 0
    # A corpus run (what `slalom-xai explain` runs) cuts it to the same positions.
    data = tmp_path / "long.jsonl"
    data.write_text(json.dumps({"id": "long", "text": long_text}) + "\n")
    with pytest.warns(UserWarning, match="cut"):
        run = explain_corpus(model, data, tmp_path / "run", tok, method="eff", n_samples=120, seed=0)
    assert run.positions()["token"].tolist() == exp.tokens
    assert int(run.texts()["truncated_positions"].iloc[0]) == n_cut
