"""Output units: what the engine reads the model's outputs as (``output=``), and detection.

Every model here is a SLALOM (or a tiny random transformer) whose log-odds are known, so the
tests check the units of what is explained, not only that something runs.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import slalom_core as sc
import torch
from tiny_models import SlalomModel, bert_tokenizer, random_slalom, tiny_classifier

IDS = [3, 7, 11, 7, 19, 4]


def _logit_model(n_classes: int, seed: int = 0):
    v, s = random_slalom(30, n_classes=n_classes, seed=seed)
    return SlalomModel(v, s)


def _explain(f, ids=IDS, **kw):
    kw.setdefault("method", "ana")
    return sc.explain(sc.TorchClassifier(f), ids, seed=0, **kw)


# tol: the caller's tolerance: two readings of the same float64 outputs, fitted by the same solver (default 1e-6 for its stop)
def _same_scores(a: sc.SlalomExplanation, b: sc.SlalomExplanation, atol: float = 1e-6) -> None:
    np.testing.assert_allclose(a.value, b.value, atol=atol)
    np.testing.assert_allclose(a.importance, b.importance, atol=atol)
    np.testing.assert_allclose(a.model_output, b.model_output, atol=atol)
    np.testing.assert_allclose(a.base_value, b.base_value, atol=atol)


@pytest.mark.parametrize("n_classes", [1, 3])
@pytest.mark.parametrize("method", ["ana", "eff"])
def test_softmax_probabilities_detected_and_explained_as_logits(n_classes, method):
    m = _logit_model(n_classes, seed=4)
    if n_classes == 1:
        # A binary softmax model: logits [0, F], probabilities [1 - sigmoid(F), sigmoid(F)].
        logits = lambda ids, mask: torch.cat([torch.zeros_like(m(ids, mask)), m(ids, mask)], 1)
    else:
        logits = m
    probs = lambda ids, mask: torch.softmax(logits(ids, mask), dim=1)
    kw = dict(method=method, n_samples=200) if method == "eff" else {}
    with warnings.catch_warnings():
        warnings.simplefilter("error", sc.SlalomOutputWarning)
        ref = _explain(logits, **kw)
    with pytest.warns(sc.SlalomOutputWarning, match="look like probabilities.*output='logits'"):
        got = _explain(probs, **kw)
    assert ref.diagnostics["output"] == "logits (detected)"
    assert got.diagnostics["output"] == "probs (detected)"
    _same_scores(got, ref)
    if n_classes == 1:
        # The log-odds F, not p1 - p0 (which is bounded by 1).
        ids = torch.tensor([IDS])
        f = float(m(ids, torch.ones_like(ids)))
        # tol: float64 rounding: the model's own float64 log-odds
        assert got.model_output == pytest.approx(f, abs=1e-9)
    # Saying what the outputs are silences the warning and gives the same explanation.
    with warnings.catch_warnings():
        warnings.simplefilter("error", sc.SlalomOutputWarning)
        explicit = _explain(probs, output="probs", **kw)
    assert explicit.diagnostics["output"] == "probs"
    _same_scores(explicit, ref)


def test_detection_is_made_once_per_batch_call():
    m = _logit_model(3, seed=5)
    probs = sc.TorchClassifier(lambda ids, mask: torch.softmax(m(ids, mask), dim=1))
    texts = [IDS, [1, 2, 3], [20, 21], [5]]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        exps = sc.explain_batch(probs, texts, method="ana", seed=0)
    assert sum(issubclass(w.category, sc.SlalomOutputWarning) for w in caught) == 1
    assert {e.diagnostics["output"] for e in exps} == {"probs (detected)"}
    singles = [sc.explain(sc.TorchClassifier(m), t, method="ana", seed=0, output="logits") for t in texts]
    for e, s in zip(exps, singles):
        _same_scores(e, s)


def test_probs_option_rejects_non_probabilities():
    m = _logit_model(3, seed=1)
    with pytest.raises(ValueError, match="not probabilities.*output='logits'"):
        _explain(m, output="probs")  # centred logits are negative somewhere
    # In [0, 1] but rows that do not sum to 1: independent labels, not class probabilities.
    sig = lambda ids, mask: torch.sigmoid(m(ids, mask))
    with pytest.raises(ValueError, match="sums to .*multilabel_probs"):
        _explain(sig, output="probs")
    with pytest.raises(ValueError, match="not probabilities"):
        _explain(lambda ids, mask: 1.0 + torch.sigmoid(m(ids, mask)), output="multilabel_probs", target=0)
    with pytest.raises(ValueError, match="unknown output"):
        _explain(m, output="log_probs")
    with pytest.raises(ValueError, match="resolve"):
        sc.OutputLink(2, "auto")


def test_single_sigmoid_probability():
    m = _logit_model(1, seed=2)
    sig = lambda ids, mask: torch.sigmoid(m(ids, mask))
    ref = _explain(m, output="logits")
    got = _explain(sig, output="probs")
    _same_scores(got, ref)  # logit(p) is the model's log-odds
    # One output per example is the explained output: target 0 names it (no sign flip,
    # as Captum's target=0 on one column), and there is no other target.
    zero = _explain(sig, output="probs", target=0)
    _same_scores(zero, got)
    with pytest.raises(ValueError, match="target 1 does not exist: the model returns one score per example"):
        _explain(sig, output="probs", target=1)
    # Under "auto" one output per example is a logit, as documented; since every output
    # lies in [0, 1] the engine says how it read them and how to change it.
    with pytest.warns(sc.SlalomOutputWarning, match="read as logits.*output='probs'"):
        auto = _explain(sig)
    assert auto.diagnostics["output"] == "logits (detected)"
    ids = torch.tensor([IDS])
    # tol: float64 rounding: the model's own float64 output
    assert auto.model_output == pytest.approx(float(sig(ids, torch.ones_like(ids))), abs=1e-12)
    with pytest.raises(ValueError, match="not probabilities"):
        _explain(lambda ids, mask: 2.0 + m(ids, mask), output="probs")


def test_multilabel_logits_explain_the_raw_column():
    # Three independent labels; label 2's log-odds is its own logit, with no softmax centring.
    base = _logit_model(3, seed=3)
    # Labels are independent: their logits need not be centred (SlalomModel's are).
    m = lambda ids, mask: base(ids, mask) + torch.tensor([[0.5, -1.0, 2.0]], dtype=torch.float64)
    single = lambda ids, mask: m(ids, mask)[:, 2:3]
    ref = _explain(single, output="logits")
    got = _explain(m, output="multilabel_logits", target=2)
    assert got.diagnostics["output"] == "multilabel_logits"
    _same_scores(got, ref)
    centred = _explain(m, output="logits", target=2)
    assert abs(centred.model_output - got.model_output) > 1e-3  # the joint fit is a different quantity
    ids = torch.tensor([IDS])
    # tol: float64 rounding: the model's own float64 logit
    assert got.model_output == pytest.approx(float(m(ids, torch.ones_like(ids))[0, 2]), abs=1e-9)
    # Per-label probabilities: logit(p) of the label gives the same explanation.
    sig = lambda ids, mask: torch.sigmoid(m(ids, mask))
    _same_scores(_explain(sig, output="multilabel_probs", target=2), ref)
    with pytest.raises(ValueError, match="one\\s+label at a time: give target"):
        _explain(m, output="multilabel_logits")
    # Under "auto", sigmoid outputs in [0, 1] whose rows do not sum to 1 are not guessed silently.
    with pytest.warns(sc.SlalomOutputWarning, match="multilabel_probs"):
        _explain(sig, target=2)


def test_multilabel_model_config_is_read_under_auto(tmp_path):
    tok = bert_tokenizer(tmp_path)
    model = tiny_classifier("bert", tok, num_labels=3, seed=2, initializer_range=0.2)
    text = "the movie was great but the plot was boring"
    ids = tok(text, return_tensors="pt")
    raw = model(**ids).logits[0].detach().double()
    model.config.problem_type = "multi_label_classification"
    with warnings.catch_warnings():
        warnings.simplefilter("error", sc.SlalomOutputWarning)
        got = sc.explain(model, text, tokenizer=tok, target=1, n_samples=60, seed=0)
    assert got.diagnostics["output"] == "multilabel_logits (model config)"
    # tol: float32 logits of the same forward pass, widened
    assert got.model_output == pytest.approx(float(raw[1]), abs=1e-5)
    with pytest.raises(ValueError, match="give target"):
        sc.explain(model, text, tokenizer=tok, n_samples=60, seed=0)
    # The user's word beats the config.
    joint = sc.explain(model, text, tokenizer=tok, target=1, n_samples=60, seed=0, output="logits")
    # tol: float32 logits of the same forward pass, centred in float64
    assert joint.model_output == pytest.approx(float(raw[1] - raw.mean()), abs=1e-5)


@pytest.mark.parametrize("num_labels", [2, 3])
def test_logit_models_are_not_mistaken_for_probabilities(tmp_path, num_labels):
    tok = bert_tokenizer(tmp_path)
    texts = ["the movie was great", "i hated the boring plot", "a very good film , not bad", "awful"]
    with warnings.catch_warnings():
        warnings.simplefilter("error", sc.SlalomOutputWarning)
        warnings.simplefilter("ignore", sc.SlalomFitWarning)  # 40 samples: rough fits, units are the point
        for seed in range(3):
            model = tiny_classifier("bert", tok, num_labels=num_labels, seed=seed, initializer_range=0.2)
            exps = sc.explain_batch(model, texts, tokenizer=tok, n_samples=40, seed=0, method="eff")
            assert {e.diagnostics["output"] for e in exps} == {"logits (detected)"}
        # Log-probabilities are logits up to a constant per row: read as logits.
        m = _logit_model(3, seed=6)
        logp = _explain(lambda ids, mask: torch.log_softmax(m(ids, mask), dim=1))
    assert logp.diagnostics["output"] == "logits (detected)"
    _same_scores(logp, _explain(m))


def test_resolve_output_rules():
    rows = torch.tensor([[0.25, 0.75], [0.5, 0.5]], dtype=torch.float64)
    assert sc.resolve_output("auto", rows)[:2] == ("probs", "probs (detected)")
    off = rows + torch.tensor([[0.0, 1e-3], [0.0, 0.0]], dtype=torch.float64)  # one row sums to 1.001
    kind, how, note = sc.resolve_output("auto", off)
    assert kind == "logits" and "multilabel_probs" in note
    assert sc.resolve_output("auto", torch.tensor([[0.3], [0.9]]))[0] == "logits"  # one output: a logit
    assert sc.resolve_output("auto", torch.tensor([[-0.5, 1.5]]))[2] is None
    assert sc.resolve_output("logits", rows) == ("logits", "logits", None)
    assert sc.resolve_output("auto", rows, declared="multilabel_logits")[1] == "multilabel_logits (model config)"


def test_per_class_outputs_every_class_in_the_explained_units():
    z = torch.tensor([[0.3, -1.2], [2.0, 0.5]], dtype=torch.float64)
    f = z[:, 1] - z[:, 0]
    # Binary: one fitted F = log p1/p0 gives both classes, class 0's log-odds being -F,
    # from logits and from the softmax probabilities alike, whatever target says.
    for link in (sc.OutputLink(2), sc.OutputLink(2, target=0)):
        torch.testing.assert_close(link.per_class(z), torch.stack([-f, f], dim=1))
    p = torch.softmax(z, 1)
    torch.testing.assert_close(sc.OutputLink(2, "probs").per_class(p), torch.log(p / (1 - p)))
    # k > 2: the joint fit's centred logits, every column, even with a target.
    three = torch.tensor([[1.0, 2.0, 6.0]], dtype=torch.float64)
    expected = three - three.mean()
    torch.testing.assert_close(sc.OutputLink(3, target=2).per_class(three), expected)
    torch.testing.assert_close(sc.OutputLink(3, "probs").per_class(torch.softmax(three, 1)), expected)
    # Multi-label: each label's own log-odds, with no sign pairing even for two labels.
    torch.testing.assert_close(sc.OutputLink(2, "multilabel_logits", target=0).per_class(z), z)
    torch.testing.assert_close(sc.OutputLink(2, "multilabel_probs").per_class(torch.sigmoid(z)), z)
    # One output: that logit, one column.
    assert sc.OutputLink(1).per_class(z[:, :1]).tolist() == z[:, 0].tolist()
    with pytest.raises(ValueError, match="ovr"):
        sc.OutputLink(3, target=1, multiclass="ovr").per_class(three)
    with pytest.raises(FloatingPointError):
        sc.OutputLink(2).per_class(torch.tensor([[0.0, float("nan")]]))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_softmax_is_read_as_probabilities(dtype):
    # A half-precision softmax sums to 1 only within its rounding (~1e-3 for float16): it
    # must still be read as probabilities (log-odds explained), not as logits (p1 - p0).
    m = _logit_model(3, seed=4)
    probs = lambda ids, mask: torch.softmax(m(ids, mask).to(dtype), dim=1)
    # The rows the engine sees first (the full text, the empty input) and the singles:
    # some miss 1 by more than the float32 tolerance.
    rows = [IDS] + [[i] for i in IDS]
    sums = torch.cat([probs(torch.tensor([r]), torch.ones(1, len(r))).double().sum(1) for r in rows])
    assert float((sums - 1).abs().max()) > sc.link.PROB_SUM_TOL
    with pytest.warns(sc.SlalomOutputWarning, match="look like probabilities"):
        got = _explain(probs)
    assert got.diagnostics["output"] == "probs (detected)" and got.diagnostics["output_kind"] == "probs"
    ref = _explain(lambda ids, mask: torch.log(probs(ids, mask).double()), output="logits")
    _same_scores(got, ref, atol=1e-9)
    # An explicit output="probs" accepts the same rounding.
    _same_scores(_explain(probs, output="probs"), ref, atol=1e-9)


def test_rows_near_one_read_as_logits_suggest_output_probs():
    # Rows that sum to 1 only roughly are read as logits; the warning names output='probs'
    # (the class-probability reading), not only the multi-label one.
    m = _logit_model(3, seed=4)
    rough = lambda ids, mask: torch.softmax(m(ids, mask), dim=1) * 1.004
    with pytest.warns(sc.SlalomOutputWarning, match="output='probs'"):
        _explain(rough)
