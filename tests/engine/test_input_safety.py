"""Engine inputs that used to give silent wrong answers: each is now an error or handled."""

from __future__ import annotations

import re

import numpy as np
import pytest
import slalom_core
import torch
from invariance import assert_same_answer
from slalom_core import StringClassifier, TorchClassifier
from tiny_models import SlalomModel, bert_tokenizer, random_slalom, tiny_classifier

VOCAB = 30


@pytest.fixture(scope="module")
def slalom_model():
    v, s = random_slalom(VOCAB, seed=1)
    return TorchClassifier(SlalomModel(v, s))


@pytest.mark.parametrize(
    "bad",
    [
        b"\x05\x06\x07",
        [True, False, True],
        [5.0, 6.0],
        torch.tensor([5.0, 6.0]),
        np.array([True, False]),
        torch.tensor([5, 6]) > 5,
    ],
    ids=["bytes", "bools", "floats", "float-tensor", "bool-array", "bool-tensor"],
)
def test_non_integer_ids_are_rejected(slalom_model, bad):
    with pytest.raises(TypeError, match="integer|ints|bytes"):
        slalom_core.explain(slalom_model, bad, n_samples=50, seed=0)


def test_integer_ids_of_any_container_are_accepted(slalom_model):
    ref = slalom_core.explain(slalom_model, [5, 6, 7], method="ana").value
    for ids in (np.array([5, 6, 7]), torch.tensor([5, 6, 7]), (5, 6, 7), [np.int64(5), 6, 7]):
        np.testing.assert_allclose(slalom_core.explain(slalom_model, ids, method="ana").value, ref)


@pytest.mark.invariance
def test_ids_with_the_models_own_special_tokens_are_not_explained_twice(tok_dir):
    tok = bert_tokenizer(tok_dir / "safety_bert")
    model = tiny_classifier("bert", tok, initializer_range=0.2)
    text = "the movie was great but boring"
    with_specials = tok(text)["input_ids"]
    assert with_specials[0] == tok.cls_token_id and with_specials[-1] == tok.sep_token_id
    a = slalom_core.explain(model, with_specials, tokenizer=tok, method="ana")
    b = slalom_core.explain(model, text, tokenizer=tok, method="ana")
    assert a.tokens == b.tokens and "[CLS]" not in a.tokens
    # ana is closed form: the float32 logits' rounding in other batches, amplified as ana's formulas do (tests/invariance.py)
    assert_same_answer(a, b)


@pytest.mark.invariance
def test_rows_of_a_padded_batch_explain_their_tokens_not_the_padding(tok_dir):
    tok = bert_tokenizer(tok_dir / "safety_bert_pad")
    model = tiny_classifier("bert", tok, initializer_range=0.2)
    texts = ["the movie was great but boring", "great"]
    batch = tok(texts, padding=True, return_tensors="pt")["input_ids"]
    assert (batch[1] == tok.pad_token_id).any()
    rows = slalom_core.explain_batch(model, batch, tokenizer=tok, method="ana")
    plain = slalom_core.explain_batch(model, texts, tokenizer=tok, method="ana")
    for a, b in zip(rows, plain):
        assert a.tokens == b.tokens and "[PAD]" not in a.tokens
        # ana is closed form: the float32 logits' rounding in other batches, amplified as ana's formulas do
        assert_same_answer(a, b)


def test_a_pad_token_that_is_also_a_real_token_is_kept(tok_dir):
    # tokenizer.pad_token = tokenizer.unk_token is a common idiom: [UNK] at either end is
    # then content, not padding.
    tok = bert_tokenizer(tok_dir / "safety_bert_unkpad")
    tok.pad_token = tok.unk_token
    model = tiny_classifier("bert", tok, initializer_range=0.2)
    film = tok.convert_tokens_to_ids("film")
    for ids in ([film, tok.unk_token_id], [tok.unk_token_id, film]):
        exp = slalom_core.explain(model, ids, tokenizer=tok, method="ana")
        assert len(exp.tokens) == 2 and "[UNK]" in exp.tokens


def test_string_black_box_sees_the_users_own_text(tok_dir):
    tok = bert_tokenizer(tok_dir / "safety_bert_str")  # uncased: decode would lower-case
    text = "The Movie was GREAT, but the plot... boring!"
    seen: list[str] = []

    def f(texts):
        seen.extend(texts)
        return [[float("GREAT" in t) - float("boring" in t)] for t in texts]

    exp = slalom_core.explain(StringClassifier(f, tok), text, n_samples=200, seed=0)
    assert text in seen  # the full text exactly as given, not re-decoded
    assert "" in seen  # the reference input
    for t in seen:
        for word in re.findall(r"\w+", t):
            assert word in text, (word, t)  # the text's own pieces, case kept
    # The model keys on the upper-case word: its token carries the positive value.
    great = exp.tokens.index("great")
    # tol: the fit's full-text gap on a real model (a sampling-limited fit), here a sanity bound
    assert exp.value[great] > 0.5 and exp.full_text_gap == pytest.approx(0.0, abs=0.5)


def test_huge_n_samples_fail_before_any_model_call():
    calls = []

    def f(ids, mask):
        calls.append(ids.shape)
        return torch.zeros(ids.shape[0], 2)

    with pytest.raises(ValueError, match="GiB"):
        slalom_core.explain(TorchClassifier(f), list(range(50)), n_samples=10**9, seed=0)
    assert calls == []


def _counting_model(vocab: int = VOCAB):
    v, s = random_slalom(vocab, seed=3)
    net = SlalomModel(v, s)
    calls = []

    def f(ids, mask):
        calls.append(tuple(ids.shape))
        return net(ids, mask)

    return f, calls


def test_short_text_with_ten_million_samples_refused_before_any_model_call():
    f, calls = _counting_model()
    with pytest.raises(ValueError, match="GiB"):
        slalom_core.explain(TorchClassifier(f), [3, 5, 7], n_samples=10**7, seed=0)
    assert calls == []


@pytest.mark.parametrize(
    "options, match",
    [
        (dict(sample_length=0), "sample_length"),
        (dict(sample_length=(3, 1)), "sample_length"),
        (dict(method="fidel", max_delete_fraction=2.0), "max_delete_fraction"),
        (dict(method="fidel", max_delete_fraction=0.0), "max_delete_fraction"),
        (dict(max_iter=-5), "max_iter"),
        (dict(method="fidel", max_iter=2.5), "max_iter"),
        (dict(method="fidel", tol=1e-3), "tol"),
        (dict(tol=float("nan")), "tol"),
        (dict(learning_rate=0.0), "learning_rate"),
        (dict(l2_value=-1.0), "l2_value"),
        (dict(holdout_fraction=float("nan")), "holdout_fraction"),
        (dict(gamma=float("nan")), "gamma"),
        (dict(gamma="1"), "gamma"),
        (dict(method="ana", sample_length=2), "sample_length"),
    ],
)
def test_bad_options_refused_before_any_model_call(options, match):
    f, calls = _counting_model()
    with pytest.raises((ValueError, TypeError), match=match):
        slalom_core.explain(TorchClassifier(f), [3, 5, 7, 9], n_samples=50, seed=0, **options)
    assert calls == []


def test_fidel_tol_is_used_by_als():
    # tol= is refused where it would be ignored, and does change ALS's stopping point.
    f, _ = _counting_model()
    a = slalom_core.explain(TorchClassifier(f), [3, 5, 7, 9], method="fidel", solver="als", tol=1e-1, seed=0)
    b = slalom_core.explain(TorchClassifier(f), [3, 5, 7, 9], method="fidel", solver="als", tol=1e-12, seed=0)
    assert a.diagnostics["fit_iterations"] < b.diagnostics["fit_iterations"]


def test_numpy_integer_target_is_a_class_index():
    f, _ = _counting_model()
    clf = TorchClassifier(lambda ids, mask: torch.cat([torch.zeros(ids.shape[0], 1), f(ids, mask)], 1))
    a = slalom_core.explain(clf, [3, 5, 7], method="ana", target=np.int64(0), seed=0)
    b = slalom_core.explain(clf, [3, 5, 7], method="ana", target=0, seed=0)
    np.testing.assert_allclose(a.value, b.value)
    assert a.target == 0 and type(a.target) is int
    np.testing.assert_allclose(a.model_output, -f(torch.tensor([[3, 5, 7]]), torch.ones(1, 3)).item())
    with pytest.raises(TypeError, match="target"):
        slalom_core.explain(clf, [3, 5, 7], method="ana", target=1.0, seed=0)


@pytest.mark.parametrize("device", ["meta", "no-such-device"])
def test_device_the_model_cannot_use_leaves_it_untouched(device):
    v, s = random_slalom(VOCAB, seed=3)
    net = SlalomModel(v, s).train()
    before = {k: t.clone() for k, t in net.state_dict().items()}
    calls = []
    net.register_forward_hook(lambda *a: calls.append(1))
    with pytest.raises((ValueError, RuntimeError), match="device"):
        slalom_core.explain(TorchClassifier(net), [3, 5, 7], method="ana", seed=0, device=device)
    assert calls == []
    assert net.training
    for k, t in net.state_dict().items():
        assert t.device.type == "cpu"
        torch.testing.assert_close(t, before[k])


def test_ids_the_model_cannot_read_are_refused_before_any_model_call(tok_dir):
    tok = bert_tokenizer(tok_dir / "ids_vocab")
    model = tiny_classifier("bert", tok)
    calls = []
    model.register_forward_pre_hook(lambda *a: calls.append(1))
    size = model.get_input_embeddings().num_embeddings
    with pytest.raises(ValueError, match=r"token ids must be >= 0, got -3"):
        slalom_core.explain(model, [5, -3, 7], tokenizer=tok, n_samples=50, seed=0)
    with pytest.raises(ValueError, match=rf"token id {size + 10} is outside the model's vocabulary \({size} ids"):
        slalom_core.explain(model, [5, size + 10, 7], tokenizer=tok, n_samples=50, seed=0)
    assert not calls
    # A plain module's vocabulary is unknown before the call: its IndexError says why.
    emb = torch.nn.Embedding(30, 2)
    with pytest.raises(IndexError, match="outside the model's vocabulary"):
        slalom_core.explain(TorchClassifier(lambda i, m: emb(i).sum(1)), [5, 40, 7], n_samples=50, seed=0)


@pytest.mark.parametrize(
    "answer, match",
    [
        (lambda t: ["POS" for _ in t], r"labels \(strings\), e.g. 'POS'"),
        (lambda t: [{"label": "POS", "score": 0.9} for _ in t], "dicts"),
    ],
    ids=["labels", "dicts"],
)
def test_string_model_answering_labels_or_dicts_is_named(answer, match):
    with pytest.raises(TypeError, match=rf"the string model returned {match}.*one score per class"):
        slalom_core.explain(StringClassifier(answer), "a good film", n_samples=50, seed=0)


def test_token_ids_given_to_a_string_model_without_a_tokenizer_are_refused():
    clf = StringClassifier(lambda t: [[float(len(x)), 0.0] for x in t])
    with pytest.raises(ValueError, match="StringClassifier without a tokenizer.*pass the text"):
        slalom_core.explain(clf, [5, 6, 7], n_samples=50, seed=0)


@pytest.mark.parametrize("bad", [{}, "bert-base-uncased", 3])
def test_something_that_is_no_tokenizer_is_refused_where_given(tok_dir, bad):
    model = tiny_classifier("bert", bert_tokenizer(tok_dir / "no_tok"))
    with pytest.raises(TypeError, match="tokenizer must be a tokenizer"):
        slalom_core.explain(model, "a good film", tokenizer=bad, n_samples=50, seed=0)
    with pytest.raises(TypeError, match="tokenizer must be a tokenizer"):
        StringClassifier(lambda t: [[0.0]] * len(t), tokenizer=bad)


@pytest.mark.parametrize("method", ["hybrid", "ana"])
def test_outputs_too_large_to_be_logits_are_named_not_a_linalg_failure(method):
    clf = StringClassifier(lambda t: [[1e300 * len(x), -1e300] for x in t])
    with pytest.raises(FloatingPointError, match="too large to be logits"):
        slalom_core.explain(clf, "a good film", n_samples=50, seed=0, method=method)
    # Large but usable scores still fit.
    clf = StringClassifier(lambda t: [[1e6 * len(x), 0.0] for x in t])
    assert np.isfinite(slalom_core.explain(clf, "a good film", n_samples=50, seed=0, method=method).value).all()


@pytest.mark.parametrize(
    "seg, match",
    [
        (slalom_core.Segmentation([[5], [6]], ["a", "b"]), r"unit_ids\[0\] must be a tuple"),
        (slalom_core.Segmentation([5, 6], ["a", "b"]), r"unit_ids\[0\] must be a tuple"),
        (slalom_core.Segmentation([(5,), ("x",)], ["a", "b"]), r"unit_ids\[1\] .*ints, got str 'x'"),
        (slalom_core.Segmentation([(5.0,), (6,)], ["a", "b"]), r"unit_ids\[0\] .*ints, got float"),
        (slalom_core.Segmentation([(5,), ()], ["a", "b"]), r"unit_ids\[1\] is empty"),
        (slalom_core.Segmentation([(5,), (6,)], ["a"]), "2 unit_ids but 1 tokens"),
        (slalom_core.Segmentation([(5,), (6,)], "ab"), "tokens must be a list"),
        (slalom_core.Segmentation([], []), "no positions"),
    ],
    ids=["lists", "bare-ints", "str-id", "float-id", "empty-unit", "short-tokens", "str-tokens", "empty"],
)
def test_a_malformed_segmentation_is_refused_before_any_model_call(seg, match):
    f, calls = _counting_model()
    with pytest.raises((TypeError, ValueError), match=match):
        slalom_core.explain(TorchClassifier(f), seg, n_samples=50, seed=0)
    assert calls == []


def test_a_model_whose_weights_are_on_meta_is_named_before_any_call(tok_dir):
    tok = bert_tokenizer(tok_dir / "meta_bert")
    net = SlalomModel(*random_slalom(VOCAB, seed=3)).to("meta")
    for model, kw in [(tiny_classifier("bert", tok).to("meta"), dict(tokenizer=tok)), (TorchClassifier(net), {})]:
        with pytest.raises(ValueError, match=r"weights are on the meta device.*load the weights first"):
            slalom_core.explain(model, [5, 6, 7], n_samples=50, seed=0, **kw)


def test_a_forward_that_returns_extra_rows_is_named_not_the_models_reshape_error(tmp_path):
    # A BERT that cannot read zero tokens, behind a forward that returns twice the rows: the
    # empty input's batch failed first (BERT's reshape error) and hid the clear one.
    tok = bert_tokenizer(tmp_path)
    model = tiny_classifier("bert", tok)
    clf = TorchClassifier(
        lambda ids, mask: torch.cat([model(input_ids=ids, attention_mask=mask).logits] * 2), tokenizer=tok
    )
    with pytest.raises(slalom_core.models.OutputShapeError, match="rows of scores for"):
        slalom_core.explain(clf, "a good film with a bad plot", n_samples=40, seed=0)
