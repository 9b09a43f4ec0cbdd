"""The Table 13 command (prompted causal LM on Yelp-HAT) runs end to end on a tiny local LM."""

import json

import numpy as np
import pytest
from slalom_core.experiments.benchmarks import llm_yelp_hat
from tiny_models import gpt2_tokenizer, tiny_causal_lm


@pytest.mark.filterwarnings("ignore::slalom_core.SlalomFitWarning")  # random weights
def test_llm_yelp_hat_on_a_saved_tiny_gpt2(tmp_path):
    tok = gpt2_tokenizer(tmp_path / "tok")
    folder = tmp_path / "lm"
    tiny_causal_lm("gpt2", tok).save_pretrained(folder)
    tok.save_pretrained(folder)
    rows = [
        {"text": "the movie was great and fun", "attention": [0, 0, 0, 1, 0, 1]},
        {"text": "i hated the boring plot", "attention": [0, 1, 0, 1, 0]},
    ]
    data = tmp_path / "hat.jsonl"
    data.write_text(
        "".join(
            json.dumps({"text": r["text"], "words": r["text"].split(), "human_attention": r["attention"]}) + "\n"
            for r in rows
        )
    )
    res = llm_yelp_hat.run(str(folder), data=data, texts=2, n_samples=60, min_tokens=3, max_tokens=40)
    assert res["texts"] == 2 and res["n_samples"] == 60
    assert set(res["auc"]) == {"value", "importance", "lin"}
    assert all(0.0 <= v <= 1.0 for v in res["auc"].values() if np.isfinite(v))
    assert any(np.isfinite(v) for v in res["auc"].values())
