"""The paper experiments (slalom_core.experiments.paper): building blocks, toy-size runs, and the
Table 6 ordering (SLALOM describes a transformer better than a linear model or a GAM)."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np
import pytest
import slalom_core as sc
import torch
from slalom_core.experiments import paper as P
from slalom_core.experiments import synthetic as syn

TOY_TRAIN = dict(epochs=1, samples_per_epoch=60, batch_size=20)


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _rows(path: Path) -> list[dict]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


# --- models ------------------------------------------------------------------------------
@pytest.mark.parametrize("arch", P.ARCHITECTURES + ("mlp",))
def test_build_classifier_forward(arch):
    spec = P.ModelSpec(arch=arch, n_layers=1, hidden_size=16, n_heads=2, intermediate_size=32)
    model, tok = P.build_classifier(spec, syn.LINEAR_WORDS, seed=0)
    clf = P.SyntheticClassifier(spec, model, tok, syn.LINEAR_WORDS)
    seqs = [np.array([6, 6, 0]), np.array([9]), np.arange(10).repeat(3)]  # lengths up to 30
    out = clf.log_odds(seqs)
    assert out.shape == (3,) and np.all(np.isfinite(out))
    if arch == "mlp":
        assert tok is None
        return
    enc = clf.encode([np.array([6])])
    if arch == "gpt2":
        assert enc["input_ids"].tolist() == [[tok.convert_tokens_to_ids("perfect")]]
        assert model.config.pad_token_id == tok.pad_token_id
    else:
        assert enc["input_ids"].tolist() == [[tok.cls_token_id, tok.convert_tokens_to_ids("perfect"), tok.sep_token_id]]
    # padding must not change a sequence's log-odds (batching is transparent)
    alone = clf.log_odds([seqs[1]])
    # tol: float32 forward passes: padding changes the reduction order (~1e-6 on logits)
    assert alone[0] == pytest.approx(out[1], abs=1e-4)


def test_train_classifier_runs_and_caches():
    spec = P.ModelSpec(arch="distilbert", hidden_size=16, n_heads=2, intermediate_size=32)
    sampler = lambda n, rng: syn.sample_linear_dataset(n, rng)  # noqa: E731
    a = P.train_classifier(spec, sampler, seed=3, cache_key=("test-cache",), **TOY_TRAIN)
    b = P.train_classifier(spec, sampler, seed=3, cache_key=("test-cache",), **TOY_TRAIN)
    assert a is b
    assert len(a.train_loss) == 1 and np.isfinite(a.train_loss[0]) and not a.model.training
    c = P.train_classifier(spec, sampler, seed=3, soft_labels=True, **TOY_TRAIN)
    assert c is not a and np.isfinite(c.train_loss[0])


def test_training_is_seeded():
    spec = P.ModelSpec(arch="bert", hidden_size=16, n_heads=2, intermediate_size=32)
    sampler = lambda n, rng: syn.sample_linear_dataset(n, rng)  # noqa: E731
    a = P.train_classifier(spec, sampler, seed=1, **TOY_TRAIN)
    b = P.train_classifier(spec, sampler, seed=1, **TOY_TRAIN)
    seqs = syn.sample_linear_dataset(5, seed=0).sequences
    # tol: float32 training replayed with the same seed; threaded CPU kernels may sum in other orders
    assert np.allclose(a.log_odds(seqs), b.log_odds(seqs), atol=1e-6)


# --- surrogate fits recover a true SLALOM --------------------------------------------------
@pytest.fixture(scope="module")
def true_slalom():
    return syn.make_slalom_vocabulary(8, seed=4)


def test_fit_global_slalom_recovers_ground_truth(true_slalom):
    data = syn.sample_slalom_dataset(1500, seed=2, vocab=true_slalom, max_len=10)
    sur = P.fit_global_slalom(data.sequences, data.log_odds, len(true_slalom))
    # tol: the solver's stop on 1,500 samples of an exact SLALOM: values identified to ~1e-4, importances (softmax weights) more loosely
    assert np.allclose(sur.value, true_slalom.value, atol=1e-3)
    assert np.allclose(sur.importance, true_slalom.importance, atol=1e-2)
    assert np.mean((sur.predict(data.counts()) - data.log_odds) ** 2) < 1e-8


def test_engine_ana_and_eff_recover_ground_truth(true_slalom):
    queries = []

    def score(seqs):
        queries.append(len(seqs))
        return true_slalom.log_odds(seqs)

    ana = P.fit_slalom_ana(score, len(true_slalom))
    assert sum(queries) == 2 * len(true_slalom) - 1
    # tol: float64 rounding: ana reads an exact SLALOM's values directly, and its importances through logs of ratios (1e-6)
    assert np.allclose(ana.value, true_slalom.value, atol=1e-9)
    assert np.allclose(ana.importance, true_slalom.importance, atol=1e-6)
    eff, diag = P.fit_with_engine("eff", true_slalom.log_odds, len(true_slalom), 400, seed=0)
    assert diag["model_queries"] == 400
    # the engine's eff fit carries a small ridge (meant for tiny local budgets): close, not exact
    assert np.allclose(eff.value, true_slalom.value, atol=0.05)
    assert np.allclose(eff.importance, true_slalom.importance, atol=0.25)
    assert np.corrcoef(eff.importance, true_slalom.importance)[0, 1] > 0.99


def test_linear_and_gam_surrogates_on_linear_truth():
    data = syn.sample_linear_dataset(2000, seed=0)
    lin = P.fit_linear_surrogate(data.counts(), data.log_odds)
    # tol: float64 rounding of a least-squares solve on an exactly linear truth
    assert np.allclose(lin.coef_, syn.LINEAR_WEIGHTS, atol=1e-8)
    onehot = data.position_onehot(30)
    # almost no penalty: position-wise weights reproduce the linear truth
    exact = P.fit_gam_surrogate(onehot, data.log_odds, alpha=1e-5)
    assert np.mean((exact.predict(onehot) - data.log_odds) ** 2) < 1e-3
    # the paper's λ = 0.01 shrinks the 300 sparse features noticeably, but keeps the signal
    gam = P.fit_gam_surrogate(onehot, data.log_odds)
    r2 = 1 - np.mean((gam.predict(onehot) - data.log_odds) ** 2) / np.var(data.log_odds)
    assert 0.7 < r2 < 1.0
    coef = gam.coef_.reshape(30, 10)[:15]  # positions that almost every sample reaches
    assert np.all(coef[:, syn.LINEAR_WORDS.index("perfect")] > 0) and np.all(
        coef[:, syn.LINEAR_WORDS.index("worst")] < 0
    )


# --- each experiment end to end at toy size -------------------------------------------------
TOY_MODEL = dict(hidden_size=16, n_heads=2, **TOY_TRAIN)


def test_run_fig3_toy(tmp_path):
    res = P.run_fig3(tmp_path, archs=("mlp", "gpt2"), layers=(1,), k_max=5, **TOY_MODEL)
    for name in ("fig3.png", "fig3.csv", "fig3.md"):
        assert (tmp_path / name).stat().st_size > 0
    rows = _rows(tmp_path / "fig3.csv")
    assert [int(r["k"]) for r in rows] == [1, 2, 3, 4, 5]
    assert [float(r["linear_truth"]) for r in rows] == pytest.approx([1.5, 3.0, 4.5, 6.0, 7.5])
    assert set(res["models"]) == {"ReLU net (counts) (L=1)", "GPT-2 (L=1)"}
    assert all(len(v) == 5 for v in res["models"].values())
    assert res["linear"] == pytest.approx([1.5, 3.0, 4.5, 6.0, 7.5])


def test_run_fig4ab_toy(tmp_path):
    res = P.run_fig4ab(tmp_path, archs=("distilbert",), layers=(1,), n_fit=200, n_test=50, k_max=5, **TOY_MODEL)
    for name in ("table6.csv", "table6.md", "fig4ab_scatter.png", "fig4ab_lines.png"):
        assert (tmp_path / name).stat().st_size > 0
    rows = _rows(tmp_path / "table6.csv")
    assert len(rows) == 1 and rows[0]["arch"] == "distilbert"
    mse = res["mse"]["DistilBERT (L=1)"]
    assert set(mse) == {"linear", "gam", "slalom"} and all(np.isfinite(v) and v >= 0 for v in mse.values())
    assert "| DistilBERT (L=1) |" in (tmp_path / "table6.md").read_text()


def test_run_fig4cd_toy(tmp_path):
    res = P.run_fig4cd(tmp_path, archs=("gpt2",), layers=(1,), n_words=6, max_len=8, n_fit=200, n_test=30, **TOY_MODEL)
    for name in ("table7.csv", "table7.md", "table8.csv", "table8.md", "fig4cd.png"):
        assert (tmp_path / name).stat().st_size > 0
    r = res["results"]["GPT-2 (L=1)"]
    for key in ("logit_mse", "param_mse", "value_mse", "importance_mse", "logit_mse_truth", "model_vs_truth"):
        assert np.isfinite(r[key]) and r[key] >= 0
    rows = _rows(tmp_path / "table8.csv")
    assert set(rows[0]) == {"arch", "layers", "run", "param_mse", "value_mse", "importance_mse", "importance_spearman"}
    # the table holds the runs the summary averages
    for key in ("value_mse", "importance_mse", "importance_spearman"):
        # tol: rounding: the CSV keeps 6 digits
        assert np.mean([float(row[key]) for row in rows]) == pytest.approx(
            r[key], rel=1e-5, abs=1e-6
        )  # the CSV keeps 6 digits


def test_run_fig9_toy(tmp_path):
    res = P.run_fig9(
        tmp_path,
        arch="bert",
        n_layers=1,
        vocab_sizes=(3, 5),
        lengths=(2, 4),
        base_vocab=3,
        base_length=3,
        n_samples=100,
        n_test=30,
        **TOY_MODEL,
    )
    for name in ("fig9.csv", "fig9.md", "fig9.png"):
        assert (tmp_path / name).stat().st_size > 0
    rows = _rows(tmp_path / "fig9.csv")
    assert len(rows) == 4 * 3  # 4 settings x (ana, eff, sgd)
    assert {r["method"] for r in rows} == {"ana", "eff", "sgd"}
    assert "vocab:5:3:ana" in res["results"] and "length:3:4:sgd" in res["results"]


def test_experiment_registry():
    assert set(P.EXPERIMENTS) == {"fig3", "fig4ab", "fig4cd", "fig9"}
    import inspect

    for fn in P.EXPERIMENTS.values():
        params = inspect.signature(fn).parameters
        assert list(params)[0] == "out_dir" and params["seed"].kind is inspect.Parameter.KEYWORD_ONLY


# --- the paper's claim (Table 6) on a small trained transformer ------------------------------
def test_slalom_fits_transformer_better_than_linear_and_gam(tmp_path):
    """A 1-layer BERT trained on the linear data set: SLALOM has the lowest held-out MSE.

    Measured at this size for seeds 0-3: SLALOM 0.13-0.22, linear 0.27-0.48, GAM 0.53-0.69.
    """
    res = P.run_fig4ab(
        tmp_path,
        seed=0,
        archs=("bert",),
        layers=(1,),
        epochs=2,
        samples_per_epoch=2500,
        n_fit=3000,
        n_test=1000,
        k_max=5,
    )
    mse = res["mse"]["BERT (L=1)"]
    assert mse["slalom"] < mse["linear"] < mse["gam"]
    assert mse["slalom"] < 0.8 * mse["linear"]
    assert res["slalom_best"]


# --- Table 12 (App. F.7): deletion AOPC against n_samples ------------------------------------
REVIEWS = [
    {"id": "a", "label": 1, "text": "the movie was great and the plot was fun , i loved it !"},
    {"id": "b", "label": 0, "text": "a boring film . the actor was awful and the story was very bad"},
    {"id": "c", "label": 1, "text": "not bad at all"},  # too short for the window below
]


@pytest.fixture
def tiny_bert(tmp_path):
    from tiny_models import bert_tokenizer, tiny_classifier

    tok = bert_tokenizer(tmp_path / "tok")
    return tiny_classifier("bert", tok, seed=0), tok


@pytest.fixture
def reviews_file(tmp_path):
    import json

    path = tmp_path / "reviews.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in REVIEWS))
    return path


def test_run_table12_toy(tmp_path, tiny_bert, reviews_file):
    out = tmp_path / "t12"
    res = P.run_table12(
        out, model=tiny_bert, data=reviews_file, n_texts=3, n_samples_grid=(60, 30), min_tokens=8, max_tokens=20
    )
    assert "skipped" not in res
    for name in ("table12.png", "table12.csv", "table12.md"):
        assert (out / name).stat().st_size > 0
    assert res["n_texts"] == 2  # the 4-token review is outside the window
    assert list(res["results"]) == ["30", "60"]
    rows = _rows(out / "table12.csv")
    # Each figure recomputed here from the model alone: the predicted class's probability
    # after deleting the top ceil(b·n) tokens by lin (turned towards that class), averaged
    # over ERASER's bins, per text, then over texts. The tiny model's AOPCs are ~1e-5 and
    # its float32 outputs shift by ~1e-8 between padded batches and single rows, hence 2 %.
    model, tok = tiny_bert

    def prob(ids: list[int]) -> np.ndarray:
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([[tok.cls_token_id, *ids, tok.sep_token_id]])).logits[0]
        return torch.softmax(logits.double(), -1).numpy()

    for n in (30, 60):
        per_text = []
        for review in REVIEWS[:2]:
            ids = tok(review["text"], add_special_tokens=False)["input_ids"]
            p_full = prob(ids)
            target = int(np.argmax(p_full))
            exp = sc.explain(sc.HFClassifier(model, tok), ids, method="eff", n_samples=n, seed=0)
            order = np.argsort(-(1.0 if target == 1 else -1.0) * np.asarray(exp.lin), kind="stable")
            drops = []
            for b in (0.01, 0.05, 0.10, 0.20, 0.50):
                top = set(order[: max(1, math.ceil(b * len(ids) - 1e-9))].tolist())
                drops.append(p_full[target] - prob([t for i, t in enumerate(ids) if i not in top])[target])
            per_text.append(float(np.mean(drops)))
            row = next(r for r in rows if r["id"] == review["id"] and r["n_samples"] == str(n))
            # tol: the harness reads probabilities from float32 padded batches, this check one text at a time; 2 % of the AOPC
            assert float(row["deletion_aopc"]) == pytest.approx(per_text[-1], rel=0.02)
        # tol: as above, for the mean over texts (float32 padded batches)
        assert res["results"][str(n)]["deletion_aopc"] == pytest.approx(np.mean(per_text), rel=0.02)
        assert res["results"][str(n)]["seconds"] > 0
    assert len(rows) == 2 * 3  # per text: random ranking + two budgets
    assert {r["method"] for r in rows} == {"random", "slalom-eff"}
    assert {r["id"] for r in rows} == {"a", "b"}
    md = (out / "table12.md").read_text()
    assert "SLALOM-eff lin, 30 samples" in md and "random ranking" in md

    # the same classifier saved to a local folder gives the same numbers
    folder = tmp_path / "clf"
    tiny_bert[0].save_pretrained(folder)
    tiny_bert[1].save_pretrained(folder)
    again = P.run_table12(
        tmp_path / "t12b",
        model=str(folder),
        data=reviews_file,
        n_texts=3,
        n_samples_grid=(30, 60),
        min_tokens=8,
        max_tokens=20,
    )
    for n in ("30", "60"):
        # tol: float32 forward passes: a model reloaded from its folder, the same weights (rounding ~1e-7 on probabilities)
        assert again["results"][n]["deletion_aopc"] == pytest.approx(res["results"][n]["deletion_aopc"], abs=1e-6)


def test_run_table12_skips_without_data(tmp_path, tiny_bert):
    res = P.run_table12(tmp_path / "t12", model=tiny_bert, data=tmp_path / "missing.jsonl")
    assert "skipped" in res and "missing.jsonl" in res["skipped"] and res["files"] == []
    assert not (tmp_path / "t12").exists()
    res = P.run_table12(tmp_path / "t12", model=str(tmp_path / "no-model"), data=__file__)
    assert "skipped" in res and "no-model" in res["skipped"]


def test_table12_default_data_path(tmp_path, monkeypatch, tiny_bert):
    # Without a data folder the default data is reported missing by name, nothing written.
    monkeypatch.setenv("SLALOM_DATA", str(tmp_path / "nowhere"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(P.table12, "data_dir", lambda: None)
    res = P.run_table12(tmp_path / "t12", model=tiny_bert)
    assert "imdb_test.jsonl" in res["skipped"] and res["files"] == []
