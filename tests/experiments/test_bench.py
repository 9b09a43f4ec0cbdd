"""The comparative benchmark (``slalom_core.experiments.bench``) end to end on a tiny random BERT.

The model is built from a config (hidden size 32, one layer), its tokenizer from a small
vocabulary file, and both are saved with ``save_pretrained`` so that the runner loads them by
path as a user's model would be. The vocabulary puts [CLS] at 101 and [SEP] at 102, the ids
the reference implementation hard-codes, so the reference can run on it when installed.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys

import numpy as np
import pytest
from slalom_core.experiments import bench
from slalom_core.experiments.bench import BenchConfig, run_benchmark
from slalom_core.experiments.bench_cli import main as bench_main
from slalom_core.experiments.bench_cli import register

WORDS = (
    "the a movie film was is great good bad awful boring fun plot actor i it and but not very "
    "loved hated best worst story , . !"
).split()
TEXTS = [
    ("the movie was great , i loved it", 1),
    ("boring plot and awful actor , i hated it", 0),
    ("a very good film but the story is bad", 1),
    ("worst movie , not fun !", 0),
    ("best film , great fun and very good story", 1),
]
SENTIMENT = {"great", "loved", "boring", "awful", "hated", "good", "bad", "worst", "best", "fun"}
FAST_METHODS = (
    "slalom-eff",
    "slalom-fidel",
    "slalom-ana",
    "lime",
    "kernelshap",
    "partition",
    "lig",
    "ixg",
    "saliency",
    "random",
)


@pytest.fixture(scope="module")
def bench_files(tmp_path_factory):
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    root = tmp_path_factory.mktemp("bench")
    # [PAD]=0, [UNK]=1, fillers up to 100, [CLS]=101, [SEP]=102, [MASK]=103, then words.
    vocab = ["[PAD]", "[UNK]"] + [f"[unused{i}]" for i in range(99)] + ["[CLS]", "[SEP]", "[MASK]", *WORDS]
    vocab_file = root / "vocab.txt"
    vocab_file.write_text("\n".join(vocab) + "\n")
    tok = BertTokenizerFast(vocab=str(vocab_file), do_lower_case=True)
    if len(tok) < len(vocab):  # transformers 4.x spells the argument vocab_file
        tok = BertTokenizerFast(vocab_file=str(vocab_file), do_lower_case=True)
    assert tok.cls_token_id == 101 and tok.sep_token_id == 102
    torch.manual_seed(0)
    cfg = BertConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=37,
        num_labels=2,
        max_position_embeddings=64,
        initializer_range=0.5,
    )
    model = BertForSequenceClassification(cfg).eval()
    model_dir = root / "model"
    model.save_pretrained(model_dir)
    tok.save_pretrained(model_dir)

    data = root / "data.jsonl"
    with data.open("w") as fh:
        for i, (text, label) in enumerate(TEXTS):
            words = text.split()
            row = {
                "id": f"t{i}",
                "text": text,
                "label": label,
                "words": words,
                "human_attention": [int(w in SENTIMENT) for w in words],
            }
            fh.write(json.dumps(row) + "\n")
    return {"model": str(model_dir), "data": str(data), "root": root}


def _config(files, out, **kw) -> BenchConfig:
    base = dict(
        model=files["model"],
        data=files["data"],
        out=str(out),
        n=5,
        n_samples=24,
        batch_size=16,
        lig_steps=4,
        progress=False,
    )
    base.update(kw)
    return BenchConfig(**base)


def _rows(info_key: str) -> list[str]:
    info = bench.METHODS[info_key]
    return [info.row_name(s) for s in info.scores]


@pytest.mark.slow
def test_runner_end_to_end(bench_files, tmp_path):
    out = tmp_path / "out"
    res = run_benchmark(_config(bench_files, out, methods=FAST_METHODS, nb_train=bench_files["data"]))
    expected = [r for m in FAST_METHODS for r in _rows(m)]
    assert [r["method"] for r in res.summary] == expected
    assert not res.errors and not res.skipped
    assert len(res.instances) == 5 and all(i.attention is not None for i in res.instances)
    # every (row, text) pair scored, with finite faithfulness and runtime
    assert len(res.results) == 5 * len(expected)
    for r in res.results:
        assert np.isfinite(r.metrics["comprehensiveness"]) and np.isfinite(r.metrics["sufficiency"])
    by = {r["method"]: r for r in res.summary}
    # human attention and NB columns are filled (the file has both)
    assert np.isfinite(by["slalom-eff/importance"]["hat_auc_mean"])
    assert np.isfinite(by["captum-lime"]["nb_spearman_mean"])
    # equal budgets: sampling methods drew n_samples samples; SLALOM reads each distinct one
    # once (these texts are short, so some repeat), + the full text and the empty input
    assert 12 < by["slalom-eff/lin"]["model_evaluations_median"] <= 26
    assert by["captum-lime"]["model_evaluations_median"] >= 24
    assert by["random"]["model_evaluations_median"] == 0

    for name in (
        "results.csv",
        "results.md",
        "results.json",
        "instances.csv",
        "deletion_curves.png",
        "insertion_curves.png",
        "time_vs_aopc.png",
    ):
        assert (out / name).is_file() and (out / name).stat().st_size > 0, name
    for png in ("deletion_curves.png", "insertion_curves.png", "time_vs_aopc.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with (out / "results.csv").open() as fh:
        csv_rows = list(csv.DictReader(fh))
    assert [r["method"] for r in csv_rows] == expected
    assert {"comprehensiveness_mean", "comprehensiveness_se", "seconds_median", "model_evaluations_median"} <= set(
        csv_rows[0]
    )
    md = (out / "results.md").read_text()
    for row in expected:
        assert f"| {row} |" in md
    assert "HAT ROC-AUC" in md and "NB Spearman" in md and "±" in md
    saved = json.loads((out / "results.json").read_text())
    assert saved["info"]["removal"]["strategy"] == "delete"
    assert set(saved["curves"]["captum-lime"]) == {"deletion", "insertion"}
    with (out / "instances.csv").open() as fh:
        assert len(list(csv.DictReader(fh))) == 5 * len(expected)


def test_batching_options_do_not_change_results(bench_files, tmp_path):
    # explain_batch over 3 texts, and another batch size, give the per-text results.
    runs = [
        run_benchmark(_config(bench_files, tmp_path, methods=("slalom-eff",), n=3, **kw), write=False)
        for kw in ({}, {"slalom_batch": 3}, {"slalom_batch_size": 8})
    ]
    base = [r.metrics["comprehensiveness"] for r in runs[0].results]
    for other in runs[1:]:
        # tol: float32 forward passes in other batch sizes (~1e-7 on probabilities), summed into the metric
        np.testing.assert_allclose([r.metrics["comprehensiveness"] for r in other.results], base, atol=1e-6)


def test_replace_strategy_recorded(bench_files, tmp_path):
    res = run_benchmark(_config(bench_files, tmp_path, methods=("lime", "random"), n=2, removal="mask"), write=False)
    assert res.info["removal"] == {"strategy": "replace", "replacement_id": 103, "name": "mask"}
    assert not res.errors


def test_reference_skipped_when_missing(bench_files, tmp_path, monkeypatch):
    # A None entry in sys.modules makes ``import slalom_explanations`` raise ImportError.
    monkeypatch.setitem(sys.modules, "slalom_explanations", None)
    res = run_benchmark(_config(bench_files, tmp_path, methods=("reference", "random"), n=2))
    assert "reference" in res.skipped and "not installed" in res.skipped["reference"]
    assert [r["method"] for r in res.summary] == ["random"]
    md = (tmp_path / "results.md").read_text()
    assert "Skipped" in md and "slalom-explanations" in md


def test_reference_runs_when_installed(bench_files, tmp_path):
    pytest.importorskip("slalom_explanations")
    res = run_benchmark(_config(bench_files, tmp_path, methods=("reference",), n=2), write=False)
    assert not res.skipped and not res.errors
    assert [r["method"] for r in res.summary] == _rows("reference")


def test_selection_window_and_seed(bench_files):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(bench_files["model"])
    rows = bench.read_jsonl(bench_files["data"])
    sel = bench.select_instances(rows, tok, n=2, min_tokens=8, max_tokens=9, seed=3)
    assert len(sel) == 2 and all(8 <= i.n_tokens <= 9 for i in sel)
    assert [i.id for i in sel] == [
        i.id for i in bench.select_instances(rows, tok, n=2, min_tokens=8, max_tokens=9, seed=3)
    ]
    # word -> token labels: "loved" is attended, "the" is not
    first = bench.select_instances(rows, tok, n=5, seed=0)[0]
    labels = dict(zip(first.tokens, first.attention))
    assert labels["loved"] == 1 and labels["the"] == 0


def test_every_baseline_explains_the_engines_log_odds(bench_files, tmp_path):
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    tok = AutoTokenizer.from_pretrained(bench_files["model"])
    logits = torch.tensor([[0.3, -1.2, 2.0], [1.0, 0.5, -0.5]], dtype=torch.float64)
    for n_classes in (2, 3):
        torch.manual_seed(0)
        cfg = BertConfig(
            vocab_size=len(tok),
            hidden_size=8,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=8,
            num_labels=n_classes,
            max_position_embeddings=64,
        )
        ctx = bench.BenchContext(_config(bench_files, tmp_path), BertForSequenceClassification(cfg).eval(), tok)
        z = logits[:, :n_classes]
        for target in range(n_classes):
            got = ctx.explained_from_logits(z, target)
            if n_classes == 2:  # class 1's log-odds; the predicted class only flips the sign later
                expected = z[:, 1] - z[:, 0]
            else:  # one-vs-rest: log p_t / (1 - p_t)
                p = torch.softmax(z, 1)[:, target]
                expected = torch.log(p / (1 - p))
            torch.testing.assert_close(got, expected)


def test_config_validation():
    with pytest.raises(ValueError, match="unknown method"):
        BenchConfig(data="x", methods=("nope",)).validate()
    with pytest.raises(ValueError, match="removal"):
        BenchConfig(data="x", removal="blank").validate()


def test_cli(bench_files, tmp_path, capsys):
    import argparse

    parser = argparse.ArgumentParser(prog="slalom-xai")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(
        [
            "bench",
            "--model",
            bench_files["model"],
            "--data",
            bench_files["data"],
            "--out",
            str(tmp_path),
            "--methods",
            "slalom-eff,random",
            "--n",
            "2",
            "--n-samples",
            "20",
            "--bins",
            "0.1,0.5",
            "--no-progress",
            "--slalom-option",
            "sample_length=3",
        ]
    )
    assert args.func(args) == 0
    assert "| slalom-eff/lin |" in capsys.readouterr().out
    saved = json.loads((tmp_path / "results.json").read_text())["config"]
    assert saved["bins"] == [0.1, 0.5] and saved["slalom_options"] == {"sample_length": 3}
    assert bench_main(["--data", bench_files["data"], "--methods", "bogus"]) == 2


def test_engine_import_stays_free_of_captum_and_shap():
    code = "import sys, slalom_core, slalom_core.experiments.bench, slalom_core.experiments.bench_cli; print('captum' in sys.modules, 'shap' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "False"]


def test_slalom_options_no_method_takes_are_refused():
    # An option no SLALOM fitter run takes was dropped but recorded as used in results.json.
    with pytest.raises(ValueError, match=r"\['foo'\].*none of the SLALOM methods"):
        BenchConfig(data="x", methods=("slalom-eff",), slalom_options={"foo": 1}).validate()
    with pytest.raises(ValueError, match="no SLALOM method"):
        BenchConfig(data="x", methods=("random",), slalom_options={"sample_length": 3}).validate()
    with pytest.raises(ValueError, match="sample_length=0"):
        BenchConfig(data="x", methods=("slalom-eff",), slalom_options={"sample_length": 0}).validate()
    # An option of one of the fitters run is fine (fidel's max_delete_fraction with eff).
    BenchConfig(
        data="x", methods=("slalom-eff", "slalom-fidel"), slalom_options={"max_delete_fraction": 0.3}
    ).validate()


def test_cli_option_no_method_takes_is_an_error(bench_files, tmp_path, capsys):
    argv = ["--data", bench_files["data"], "--methods", "slalom-eff", "--slalom-option", "foo=1"]
    assert bench_main([*argv, "--out", str(tmp_path)]) == 2
    assert "foo" in capsys.readouterr().err
    assert not (tmp_path / "results.json").exists()


def test_run_benchmark_gives_a_train_mode_model_back(bench_files, tmp_path):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    model = AutoModelForSequenceClassification.from_pretrained(bench_files["model"]).train()
    tok = AutoTokenizer.from_pretrained(bench_files["model"])
    modes = [m.training for m in model.modules()]
    run_benchmark(_config(bench_files, tmp_path, n=2, methods=("random",)), model=model, tokenizer=tok, write=False)
    assert [m.training for m in model.modules()] == modes and model.training


def test_cli_runtime_error_is_one_line(tmp_path, capsys):
    from slalom_core.cli import main

    missing = tmp_path / "no_such.jsonl"
    status = main(["bench", "--data", str(missing), "--methods", "random", "--out", str(tmp_path), "--no-progress"])
    err = capsys.readouterr().err
    assert status == 1
    errors = [line for line in err.splitlines() if "error:" in line]
    assert len(errors) == 1 and "no_such.jsonl" in errors[0] and "Traceback" not in err


def test_cli_puts_shapiq_approximators_beside_slalom_at_the_same_budget(bench_files, tmp_path, capsys):
    pytest.importorskip("shapiq")
    budget = 20
    argv = ["--model", bench_files["model"], "--data", bench_files["data"], "--out", str(tmp_path)]
    argv += ["--methods", "slalom-eff,kernelshapiq,svarmiq", "--n", "2", "--n-samples", str(budget), "--no-progress"]
    assert bench_main(argv) == 0
    printed = capsys.readouterr().out
    assert "| shapiq-kernelshapiq |" in printed and "| shapiq-svarmiq |" in printed
    with (tmp_path / "instances.csv").open() as fh:
        rows = [r for r in csv.DictReader(fh) if r["method"].startswith("shapiq-")]
    saved = json.loads((tmp_path / "results.json").read_text())
    assert not saved["errors"] and not saved["skipped"]
    assert sorted(r["method"] for r in rows) == ["shapiq-kernelshapiq"] * 2 + ["shapiq-svarmiq"] * 2
    for r in rows:
        # These texts have 5-10 tokens, so 2^n > 20: the budget binds, and every coalition is one model row.
        assert 2 <= float(r["model_evaluations"]) <= budget
        # A non-finite score would leave the metrics nan (bench's _evaluate): finite means finite scores.
        assert np.isfinite(float(r["comprehensiveness"])) and np.isfinite(float(r["sufficiency"]))


def test_shapiq_baseline_is_the_shapley_value_of_the_models_deletion_game(bench_files, tmp_path):
    # With a budget of all 2^n coalitions KernelSHAP-IQ is exact: its order-1 SII values must be
    # the Shapley values of the bench's own game (log-odds of the text with absent tokens deleted),
    # computed here from the definition, independently of shapiq.
    pytest.importorskip("shapiq")
    import itertools
    import math

    from slalom_core.experiments.baselines import RUNNERS

    res = run_benchmark(_config(bench_files, tmp_path, methods=("random",), n=5), write=False)
    inst = min(res.instances, key=lambda i: i.n_tokens)
    n = inst.n_tokens
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    model = AutoModelForSequenceClassification.from_pretrained(bench_files["model"]).eval()
    ctx = bench.BenchContext(
        _config(bench_files, tmp_path, n_samples=2**n), model, AutoTokenizer.from_pretrained(bench_files["model"])
    )
    ctx.evaluations = 0
    scores, _ = RUNNERS["kernelshapiq"](ctx, inst)
    assert ctx.evaluations <= 2**n
    subsets = [s for k in range(n + 1) for s in itertools.combinations(range(n), k)]
    value = dict(zip(subsets, ctx.log_odds([[inst.token_ids[j] for j in s] for s in subsets], inst)))
    shapley = np.zeros(n)
    for s in subsets:
        for i in set(range(n)) - set(s):
            w = math.factorial(len(s)) * math.factorial(n - len(s) - 1) / math.factorial(n)
            shapley[i] += w * (value[tuple(sorted((*s, i)))] - value[s])
    # tol: shapiq's exact regression solves a least-squares system in float64 (~1e-10 here);
    # the game values are the same float32 model outputs on both sides
    np.testing.assert_allclose(scores["attribution"], shapley, atol=1e-6)


def test_shapiq_game_removes_tokens_the_runs_way():
    from slalom_core.experiments.shapiq_games import approximate, deletion_game

    seen = []

    def score(rows):
        seen.extend(rows)
        return np.array([float(sum(r)) for r in rows])

    masks = np.array([[True, False, True], [False, False, False]])
    np.testing.assert_array_equal(deletion_game(score, [5, 6, 7])(masks), [12.0, 0.0])
    np.testing.assert_array_equal(deletion_game(score, [5, 6, 7], replacement_id=1)(masks), [13.0, 3.0])
    assert seen == [[5, 7], [], [5, 1, 7], [1, 1, 1]]
    with pytest.raises(ValueError, match="unknown shapiq approximator"):
        approximate("permutation", deletion_game(score, [5]), 1, 10)


def test_shapiq_baselines_skipped_when_missing(bench_files, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "shapiq", None)
    res = run_benchmark(_config(bench_files, tmp_path, methods=("kernelshapiq", "random"), n=2), write=False)
    assert "kernelshapiq" in res.skipped and "slalom-xai[shapiq]" in res.skipped["kernelshapiq"]
    assert [r["method"] for r in res.summary] == ["random"]
