"""Every output of a model at once (shared/outputs.py, SlalomExplanation.per_class): what the
adapters display per class, decided by the engine and checked against separate fits."""

from __future__ import annotations

import numpy as np
import pytest
import slalom_core as sc
import torch
from tiny_models import SlalomModel, bert_tokenizer, random_slalom, tiny_classifier

IDS = [3, 7, 11, 7, 19, 4]


def _binary(seed: int = 0) -> sc.TorchClassifier:
    """Two logits [0, F] where F is a SLALOM: class 1's log-odds are F."""
    net = SlalomModel(*random_slalom(30, seed=seed))
    return sc.TorchClassifier(lambda ids, mask: torch.cat([torch.zeros(ids.shape[0], 1), net(ids, mask)], 1))


def _labels(n_labels: int = 3) -> sc.TorchClassifier:
    """Independent per-label logits, each its own SLALOM, declared multi-label as HF does."""
    nets = [SlalomModel(*random_slalom(30, seed=10 + c)) for c in range(n_labels)]
    clf = sc.TorchClassifier(lambda ids, mask: torch.cat([n(ids, mask) for n in nets], 1))
    clf.model = torch.nn.Module()
    clf.model.config = type("Config", (), {"problem_type": "multi_label_classification"})()
    return clf


def test_binary_per_class_equals_explaining_class_zero():
    clf = _binary()
    pos = sc.explain(clf, IDS, method="ana", seed=0)
    neg = sc.explain(clf, IDS, method="ana", seed=0, target=0)
    assert pos.diagnostics.n_outputs == 2
    for name in sc.SCORE_NAMES:
        both = pos.per_class(name)
        assert both.shape == (len(IDS), 2)
        # tol: float64 rounding: the same fit, read as a column
        np.testing.assert_allclose(both[:, 1], pos.scores(name), atol=1e-12)
        # Class 0's column is what a separate fit of class 0 gives.
        # tol: float64 rounding: a binary model's class-0 log-odds are minus class 1's, the same ana fit
        np.testing.assert_allclose(both[:, 0], neg.scores(name), atol=1e-9)
        # ... and the explanation of class 0 gives the same two columns.
        # tol: float64 rounding, as above
        np.testing.assert_allclose(neg.per_class(name), both, atol=1e-9)
    ref, f_x, residual = pos.per_class_outputs()
    raw = clf.score([IDS, []]).numpy()
    # tol: float64 rounding: one subtraction of the same float64 outputs
    np.testing.assert_allclose(f_x, [raw[0, 0] - raw[0, 1], raw[0, 1] - raw[0, 0]], atol=1e-12)
    np.testing.assert_allclose(ref, [raw[1, 0] - raw[1, 1], raw[1, 1] - raw[1, 0]], atol=1e-12)
    # tol: float64 rounding of the full-text gaps of the same fits
    np.testing.assert_allclose(residual, [neg.full_text_gap, pos.full_text_gap], atol=1e-9)


def test_one_output_and_joint_fits_keep_their_columns():
    one = sc.explain(sc.TorchClassifier(SlalomModel(*random_slalom(30, seed=2))), IDS, method="ana", seed=0)
    assert one.diagnostics.n_outputs == 1
    assert one.per_class("value").shape == (len(IDS),)
    assert np.ndim(one.per_class_outputs().model_output) == 0
    net3 = SlalomModel(*random_slalom(30, n_classes=3, seed=3))
    joint = sc.explain(sc.TorchClassifier(net3), IDS, method="ana", seed=0)
    imp = joint.per_class("importance")
    assert imp.shape == (len(IDS), 3)
    for c in range(3):
        np.testing.assert_allclose(imp[:, c], joint.importance)  # shared by the classes
        # Each class's column is what target=c reports from the same joint fit.
        one_class = sc.explain(sc.TorchClassifier(net3), IDS, method="ana", seed=0, target=c)
        # tol: float64 rounding: one joint ana fit, read per class or with target=c
        np.testing.assert_allclose(joint.per_class("contribution")[:, c], one_class.contribution, atol=1e-9)
        with pytest.raises(ValueError, match="target=None"):
            one_class.per_class("value")
    ovr = sc.explain(sc.TorchClassifier(net3), IDS, method="ana", seed=0, target=1, multiclass="ovr")
    with pytest.raises(ValueError, match="one-vs-rest"):
        ovr.per_class("value")


def test_hand_built_explanation_without_output_count_refuses():
    exp = sc.explain(_binary(), IDS, method="ana", seed=0)
    del exp.diagnostics["n_outputs"]
    with pytest.raises(ValueError, match="n_outputs"):
        exp.per_class("value")


def test_explain_outputs_fits_every_label_of_a_multilabel_model():
    clf = _labels()
    with pytest.raises(ValueError, match="target="):
        sc.explain_batch(clf, [IDS], method="ana", seed=0)  # one label at a time
    fits = sc.explain_outputs(clf, [IDS, IDS[:3]], method="ana", seed=0)
    assert all(isinstance(f, sc.LabelExplanations) and len(f) == 3 for f in fits)
    for c in range(3):
        alone = sc.explain_batch(clf, [IDS, IDS[:3]], method="ana", seed=0, target=c)
        for j in range(2):
            # tol: float64 rounding: the same closed-form ana values, alone or in a batch
            np.testing.assert_allclose(fits[j].per_class("value")[:, c], alone[j].value, atol=1e-12)
            np.testing.assert_allclose(fits[j].per_class_outputs().model_output[c], alone[j].model_output)
    # Independent labels: each has its own importances, and f(x) is each label's own logit.
    imp = fits[0].per_class("importance")
    assert not np.allclose(imp[:, 0], imp[:, 1])
    raw = clf.score([IDS]).numpy()[0]
    # tol: float64 rounding: the model's own float64 logits
    np.testing.assert_allclose(fits[0].per_class_outputs().model_output, raw, atol=1e-12)
    assert fits[0].n_positions == len(IDS)
    # A binary model is one fit, whatever the call.
    assert isinstance(sc.explain_outputs(_binary(), [IDS], method="ana", seed=0)[0], sc.SlalomExplanation)
    with pytest.raises(TypeError, match="every output"):
        sc.explain_outputs(clf, [IDS], target=1)


def test_class_outputs_follow_the_models_declaration():
    clf = _labels()
    clf.tokenizer = sc.WhitespaceTokenizer()
    text = "a b c"
    ids = clf.tokenizer.encode(text)
    y, kind, how = sc.class_outputs(clf, [text, ""])
    assert (kind, how) == ("multilabel_logits", "multilabel_logits (model config)")
    raw = clf.score([ids, []]).numpy()
    # tol: float64 rounding: the model's own float64 logits
    np.testing.assert_allclose(y.numpy(), raw, atol=1e-12)  # each label's own logit, not centred
    binary = _binary()
    binary.tokenizer = clf.tokenizer
    y2, kind2, _ = sc.class_outputs(binary, [text])
    raw2 = binary.score([ids]).numpy()[0]
    assert kind2 == "logits"
    # tol: float64 rounding: one subtraction of the model's float64 logits
    np.testing.assert_allclose(y2.numpy()[0], [raw2[0] - raw2[1], raw2[1] - raw2[0]], atol=1e-12)


def test_score_texts_scores_the_text_and_the_empty_input(tmp_path):
    tok = bert_tokenizer(tmp_path)
    model = tiny_classifier("bert", tok)
    adapter = sc.as_adapter(model, tok)
    seg = adapter.segment("the movie was good")
    got = adapter.score_texts(["the movie was good", "", "  "]).numpy()
    want = adapter.score([[i for u in seg.unit_ids for i in u], [], []]).numpy()
    # tol: float64 rounding: the same token ids scored twice
    np.testing.assert_allclose(got, want, atol=1e-12)
    with pytest.raises(ValueError, match="at most"):
        adapter.score_texts(["good " * 1000])
    with pytest.raises(TypeError, match="single str"):
        adapter.score_texts("good")


def test_pipeline_function_to_apply_says_what_the_logits_are(tmp_path):
    transformers = pytest.importorskip("transformers")
    tok = bert_tokenizer(tmp_path)
    model = tiny_classifier("bert", tok, num_labels=3)
    sig = transformers.pipeline("text-classification", model=model, tokenizer=tok, function_to_apply="sigmoid")
    adapter = sc.as_adapter(sig)
    assert sc.declared_output(adapter) == (
        "multilabel_logits",
        "multilabel_logits (pipeline function_to_apply='sigmoid')",
    )
    # The engine honours it: independent labels are explained one at a time.
    with pytest.raises(ValueError, match="target="):
        sc.explain(sig, "the movie", n_samples=50, seed=0)
    exp = sc.explain(sig, "the movie", n_samples=50, seed=0, target=2)
    assert exp.diagnostics.output == "multilabel_logits (pipeline function_to_apply='sigmoid')"
    plain = transformers.pipeline("text-classification", model=model, tokenizer=tok)
    assert sc.declared_output(sc.as_adapter(plain)) is None


def test_fit_summary_rows():
    pytest.importorskip("pandas")
    one = sc.explain(_binary(), IDS, method="ana", seed=0)
    labels = sc.explain_outputs(_labels(), [IDS], method="ana", seed=0)[0]
    table = sc.fit_summary([one, None, labels])
    assert list(table["tokens"]) == [len(IDS), 0, len(IDS)]
    # The surrogate's output from its own forward pass, not from the explanation's sum.
    surrogate = one.base_value + float(one.surrogate.predict_sequences([one.unit_index.tolist()])[0])
    f_x = float(np.diff(_binary().score([IDS]).numpy()[0])[0])
    # tol: float64 rounding: the model's own float64 outputs, differenced once
    assert table["model_output"][0] == pytest.approx(f_x, abs=1e-12)
    assert table["residual"][0] == pytest.approx(f_x - surrogate, abs=1e-9)
    assert table["model_output"][1] is None and table["model_evaluations"][1] == 0
    assert len(table["residual"][2]) == 3
    assert table["model_evaluations"][2] == sum(f.diagnostics.model_evaluations for f in labels)


def test_text_batch_reads_the_texts_not_the_container():
    pd = pytest.importorskip("pandas")
    assert sc.text_batch(pd.DataFrame({"review": ["great", "dull"]})) == ["great", "dull"]
    assert sc.text_batch(pd.Series(["great"])) == ["great"]
    assert sc.text_batch({"text": "great"}) == ["great"]
    assert sc.text_batch(np.array(["a", "b"])) == ["a", "b"]
    with pytest.raises(ValueError, match="exactly one column"):
        sc.text_batch(pd.DataFrame({"a": ["x"], "b": ["y"]}))
    with pytest.raises(ValueError, match="one text per row"):
        sc.text_batch(np.array([["a", "b"]]))
    with pytest.raises(TypeError, match="'text' entry"):
        sc.text_batch({"review": ["great"]})
    with pytest.raises(TypeError, match="string"):
        sc.text_batch(["great", None])
    assert sc.text_batch([[1, 2], [3]], only_str=False) == [[1, 2], [3]]
    # explain_batch explains a DataFrame's texts (it used to explain its column name).
    f = sc.StringClassifier(lambda texts: [[0.0, float(len(t))] for t in texts])
    exps = sc.explain_batch(f, pd.DataFrame({"review": ["a great film", "dull"]}), method="ana", seed=0)
    assert [e.tokens for e in exps] == [["a", "great", "film"], ["dull"]]
    exps = sc.explain_batch(f, {"text": ["a great film"]}, method="ana", seed=0)
    assert exps[0].tokens == ["a", "great", "film"]


def test_every_label_of_a_multilabel_fit_is_one_row_of_its_page():
    clf = _labels()
    clf.class_names = ["toxic", "funny", "long"]
    fits = sc.explain_outputs(clf, [IDS], method="ana", seed=0)[0]
    page = fits.to_html()
    for name in clf.class_names:
        assert name in page
    # One row per label, each with the label's own values as data attributes.
    assert page.count('data-value="') == 3 * len(IDS)
    assert fits._repr_html_().count('data-value="') == 3 * len(IDS)
