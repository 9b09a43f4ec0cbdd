"""The Table 13 command (prompted causal LM on Yelp-HAT) runs end to end on a tiny local LM."""

import json
from types import SimpleNamespace

import numpy as np
import pytest
import slalom_core as sc
from slalom_core.experiments.benchmarks import llm_yelp_hat
from tiny_models import gpt2_tokenizer, tiny_causal_lm

ROWS = [
    {"text": "the movie was great and fun", "attention": [0, 0, 0, 1, 0, 1]},
    {"text": "i hated the boring plot", "attention": [0, 1, 0, 1, 0]},
]


@pytest.fixture
def saved_lm(tmp_path):
    """A tiny random GPT-2 saved to a folder, its tokenizer, and a two-review Yelp-HAT file."""
    tok = gpt2_tokenizer(tmp_path / "tok")
    folder = tmp_path / "lm"
    tiny_causal_lm("gpt2", tok).save_pretrained(folder)
    tok.save_pretrained(folder)
    data = tmp_path / "hat.jsonl"
    data.write_text(
        "".join(
            json.dumps({"text": r["text"], "words": r["text"].split(), "human_attention": r["attention"]}) + "\n"
            for r in ROWS
        )
    )
    return folder, tok, data


@pytest.mark.filterwarnings("ignore::slalom_core.SlalomFitWarning")  # random weights
def test_llm_yelp_hat_on_a_saved_tiny_gpt2(saved_lm):
    folder, _, data = saved_lm
    res = llm_yelp_hat.run(str(folder), data=data, texts=2, n_samples=60, min_tokens=3, max_tokens=40)
    assert res["texts"] == 2 and res["n_samples"] == 60
    assert set(res["auc"]) == {"value", "importance", "lin"}
    assert any(np.isfinite(v) for v in res["auc"].values())


def _attended_tokens(tok, text: str, attention: list[int]) -> dict[tuple[int, ...], np.ndarray]:
    """1 for every token inside an attended word (its leading space aside), else 0."""
    spans, pos = [], 0
    for word, label in zip(text.split(), attention):
        start = text.index(word, pos)
        pos = start + len(word)
        if label:
            spans.append((start, pos))
    enc = tok(text, add_special_tokens=False, return_offsets_mapping=True)
    labels = []
    for a, b in enc["offset_mapping"]:
        while a < b and text[a] == " ":
            a += 1
        labels.append(float(any(s <= a and b <= e for s, e in spans)))
    return {tuple(enc["input_ids"]): np.array(labels)}


def test_llm_yelp_hat_auc_of_constructed_scores(saved_lm, monkeypatch):
    # Scores built from the labels, so every AUC is known: attended tokens get the larger
    # |value| (negative, so a signed ranking would give 0), the larger signed importance
    # (smaller in magnitude, so ranking |importance| would give 0) and the smaller |lin|.
    folder, tok, data = saved_lm
    labels = {}
    for r in ROWS:
        labels.update(_attended_tokens(tok, r["text"], r["attention"]))

    def explain(model, token_ids, **_):
        y = labels[tuple(token_ids)].astype(bool)
        return SimpleNamespace(
            value=np.where(y, -2.0, 0.5), importance=np.where(y, 0.2, -0.5), lin=np.where(y, 0.1, -1.0)
        )

    monkeypatch.setattr(sc, "explain", explain)
    res = llm_yelp_hat.run(str(folder), data=data, texts=2, n_samples=60, min_tokens=3, max_tokens=40)
    assert res["texts"] == 2
    assert res["auc"] == {"value": 1.0, "importance": 1.0, "lin": 0.0}
