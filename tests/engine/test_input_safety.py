"""Engine inputs that used to give silent wrong answers: each is now an error or handled."""

from __future__ import annotations

import re

import numpy as np
import pytest
import slalom_core
import torch
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


def test_ids_with_the_models_own_special_tokens_are_not_explained_twice(tok_dir):
    tok = bert_tokenizer(tok_dir / "safety_bert")
    model = tiny_classifier("bert", tok, initializer_range=0.2)
    text = "the movie was great but boring"
    with_specials = tok(text)["input_ids"]
    assert with_specials[0] == tok.cls_token_id and with_specials[-1] == tok.sep_token_id
    a = slalom_core.explain(model, with_specials, tokenizer=tok, method="ana")
    b = slalom_core.explain(model, text, tokenizer=tok, method="ana")
    assert a.tokens == b.tokens and "[CLS]" not in a.tokens
    np.testing.assert_allclose(a.value, b.value, atol=1e-6)


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
    assert exp.value[great] > 0.5 and exp.full_text_gap == pytest.approx(0.0, abs=0.5)


def test_huge_n_samples_fail_before_any_model_call():
    calls = []

    def f(ids, mask):
        calls.append(ids.shape)
        return torch.zeros(ids.shape[0], 2)

    with pytest.raises(ValueError, match="GiB"):
        slalom_core.explain(TorchClassifier(f), list(range(50)), n_samples=10**9, seed=0)
    assert calls == []
