"""``explain --amortized auto``: labels, head, every text, audit and flags in one call;
resumable after kill -9; the same on Ray; the flagged texts re-explained per text."""

import json
import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from slalom_core import SlalomFitWarning
from slalom_core.amortized import AmortizedFewTextsWarning, AmortizedOODWarning
from slalom_core.amortized.pipeline import check_pays, explain_corpus_amortized, label_set_size
from slalom_core.amortized.refit import refit_flagged
from slalom_core.amortized.sizes import AUDIT_SAMPLES
from slalom_core.corpus import CorpusRun, explain_corpus
from slalom_core.fit_quality import row_flags
from tiny_models import bert_tokenizer, tiny_classifier

pytest.importorskip("pyarrow")
pytest.importorskip("safetensors")

WORDS = "the movie film plot actor story was is great good fun bad boring awful loved hated best worst very not".split()
FAST = dict(n_samples=120, epochs=8, hidden=16, show_progress=False)


def corpus(path: Path, n: int, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    rows = [" ".join(rng.choice(WORDS, size=rng.integers(3, 12))) for _ in range(n)]
    # One text of tokens the label set cannot have seen: out of distribution.
    rows[-1] = "zebra quantum xylophone ukulele"
    path.write_text("".join(json.dumps({"id": f"t{i}", "text": t}) + "\n" for i, t in enumerate(rows)))
    return path


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("pipeline-model")
    tok = bert_tokenizer(tmp)
    model = tiny_classifier("bert", tok, initializer_range=0.2)
    folder = tmp / "model"
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def done(model_dir, tmp_path_factory):
    """One finished pipeline run of 40 texts: 12 labels, 20 audited (the fewest an audit fits)."""
    tmp = tmp_path_factory.mktemp("pipeline-run")
    data = corpus(tmp / "data.jsonl", 40)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # few texts, OOD: tested on their own below
        run = explain_corpus_amortized(
            str(model_dir), data, tmp / "run", label_texts=12, audit=0.25, chunk_size=8, **FAST
        )
    return run, data


def quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


def test_one_call_explains_every_text_and_audits_a_share(done):
    run, _ = done
    texts = run.texts()
    assert run.complete and texts["id"].nunique() == 40 and (texts["method"] == "amortized").all()
    q = run.quality().set_index("id")
    assert sorted(q.index) == sorted(texts["id"])
    auto = run.manifest["auto"]
    labels = CorpusRun(run.path / "auto" / "labels")
    audit = CorpusRun(run.path / "auto" / "audit")
    # The label set: 12 per-text fits, marked in the quality table; the audit: a quarter of
    # 40 is below the fewest an audit fits (20), none of them a label text.
    assert sorted(labels.texts()["id"]) == sorted(q.index[q["in_label_set"]]) and len(labels.texts()) == 12
    assert labels.manifest["options"]["method"] == "hybrid" and labels.manifest["options"]["n_samples"] == 120
    audited = sorted(q.index[q["audited"]])
    assert audited == sorted(audit.texts()["id"]) and len(audited) == 20
    # The audit's fits: at least AUDIT_SAMPLES, above the labels' cheap budget (a noisy audit
    # fit would measure its own noise, not the head).
    assert audit.manifest["options"]["n_samples"] == AUDIT_SAMPLES == auto["audit"]["n_samples"] > 120
    assert not (q["audited"] & q["in_label_set"]).any()
    assert q.loc[audited, "audit_value_spearman"].notna().all()
    assert q.loc[~q["audited"], "audit_value_spearman"].isna().all()
    # The manifest's totals are the table's.
    assert auto["audit"]["n_audited"] == 20
    assert auto["audit"]["value_spearman"]["mean"] == pytest.approx(
        q["audit_value_spearman"].mean()
    )  # tol: float64 mean
    assert auto["flags"]["n_flagged"] == int(q["flagged"].sum())
    assert auto["labels"]["n_texts"] == 12 and auto["head"]["digest"] == run.manifest["amortized"]["digest"]
    assert set(auto["stages"]) == {"labels", "head", "explain", "audit", "quality"}
    # The text of unseen tokens is flagged, with the reason.
    assert q.loc["t39", "ood"] and q.loc["t39", "flagged"]
    assert q.loc["t39", "flag_reason"].startswith("out of distribution: ")
    poor = q["audited"] & (q["audit_value_spearman"] < 0.5)
    assert (q["poor_audit"] == poor).all()
    # Flagged: out of distribution, or by the fit-quality rule (a poor audit is its "unstable").
    assert (q["flagged"] == (q["ood"] | q["poor_audit"] | (q["fit_flags"] != ""))).all()
    by_id = {i: g.to_dict("records") for i, g in texts.groupby("id")}
    for text_id, codes in q["fit_flags"].items():
        assert codes == ", ".join(f.code for f in row_flags(by_id[text_id]) if f.code != "unstable")


def test_the_audit_compares_the_heads_explanation_with_the_per_text_fit(done):
    from slalom_core.amortized.audit import agreement

    run, _ = done
    q = run.quality().set_index("id")
    audit = CorpusRun(run.path / "auto" / "audit")
    text_id = q.index[q["audited"]][0]
    rho_v, rho_s = agreement(run.explanation(text_id), audit.explanation(text_id))
    # tol: the same float64 Spearman computed again from the same stored scores
    assert q.loc[text_id, "audit_value_spearman"] == pytest.approx(rho_v, abs=1e-12)
    assert q.loc[text_id, "audit_importance_spearman"] == pytest.approx(rho_s, abs=1e-12, nan_ok=True)


def test_label_and_audit_fits_are_those_of_a_per_text_run_of_every_text(done, model_dir, tmp_path):
    run, data = done
    # The labels at the run's budget, the audit at its own (AUDIT_SAMPLES, above the labels').
    for sub, budget in (("labels", 120), ("audit", AUDIT_SAMPLES)):
        full = quiet(explain_corpus, str(model_dir), data, tmp_path / sub, n_samples=budget, show_progress=False)
        part = CorpusRun(run.path / "auto" / sub).positions().sort_values(["id", "position"])
        same = full.positions()
        same = same[same["id"].isin(part["id"])].sort_values(["id", "position"])
        assert len(part) == len(same) > 0
        # Each text is read and fitted apart from its neighbours with the seed its id gives
        # it, so a subset run repeats the full run's operations: only float64 rounding of
        # the solver may differ (tol: 1e-9, solver rounding).
        np.testing.assert_allclose(part["value"].to_numpy(), same["value"].to_numpy(), atol=1e-9)


def test_a_subset_run_explains_only_its_ids_and_a_resume_needs_the_same_ones(model_dir, tmp_path):
    data = corpus(tmp_path / "d.jsonl", 10)
    run = quiet(
        explain_corpus, str(model_dir), data, tmp_path / "s", ids=["t3", "t1"], n_samples=60, show_progress=False
    )
    assert sorted(run.texts()["id"]) == ["t1", "t3"] and run.manifest["input"]["ids"]["n"] == 2
    assert run.complete
    with pytest.raises(ValueError, match="input"):
        quiet(explain_corpus, str(model_dir), data, tmp_path / "s", ids=["t3"], n_samples=60, resume=True)
    with pytest.raises(TypeError, match="collection of str"):
        explain_corpus(str(model_dir), data, tmp_path / "x", ids="t3", n_samples=60)


def test_label_set_size_follows_the_rule():
    assert label_set_size(12700, 0.01) == (200, 127)
    assert label_set_size(12700, 0.0) == (200, 0)
    assert label_set_size(50, 0.1) == (30, 20)  # the audit keeps its 20; the labels take the rest
    assert label_set_size(12700, 0.01, 500) == (500, 127)
    with pytest.raises(ValueError, match="label_texts=60: the corpus has 50"):
        label_set_size(50, 0.0, 60)


def test_bad_options_and_a_second_call_are_refused(done, model_dir, tmp_path):
    run, data = done
    for kw, match in (
        (dict(audit=1.5), "audit must be"),
        (dict(audit=float("nan")), "audit must be"),
        (dict(label_texts=0), "label_texts must be"),
        (dict(label_texts=True), "label_texts must be"),
        (dict(n_samples=2.5), "n_samples must be"),
        (dict(label_texts=41), "the corpus has 40"),
    ):
        with pytest.raises(ValueError, match=match):
            quiet(explain_corpus_amortized, str(model_dir), data, tmp_path / "bad", **kw)
    for kw, match in ((dict(epochs=0), "epochs must be"), (dict(hidden=-1), "hidden must be")):
        # Refused before the labels' per-text fits are spent: nothing is written.
        with pytest.raises(ValueError, match=match):
            explain_corpus_amortized(str(model_dir), data, tmp_path / "head", **kw)
        assert not (tmp_path / "head").exists()
    with pytest.raises(FileExistsError, match="resume"):
        explain_corpus_amortized(str(model_dir), data, run.path, label_texts=12, audit=0.25, chunk_size=8, **FAST)
    with pytest.raises(ValueError, match="cannot resume .*options"):
        quiet(
            explain_corpus_amortized,
            str(model_dir),
            data,
            run.path,
            label_texts=12,
            audit=0.5,
            chunk_size=8,
            resume=True,
            **FAST,
        )


def test_few_labels_warn_and_unlike_texts_warn(model_dir, tmp_path):
    data = corpus(tmp_path / "d.jsonl", 24)
    with pytest.warns(AmortizedFewTextsWarning), pytest.warns(AmortizedOODWarning):
        explain_corpus_amortized(str(model_dir), data, tmp_path / "r", label_texts=8, audit=0.0, **FAST)


_CHILD = """
import sys, warnings
warnings.simplefilter("ignore")
from slalom_core.amortized.pipeline import explain_corpus_amortized
explain_corpus_amortized(sys.argv[1], sys.argv[2], sys.argv[3], label_texts=12, audit=0.25, chunk_size=2,
                         n_samples=120, epochs=8, hidden=16, show_progress=False)
"""


@pytest.mark.parametrize("stage", ["labels", "explain"])
def test_resume_after_kill_9_gives_the_same_run(done, model_dir, tmp_path, stage):
    """A pipeline killed with SIGKILL in the middle of a stage, resumed, ends as the
    uninterrupted run did: same texts, scores, quality table and audit."""
    whole, data = done
    out = tmp_path / "killed"
    # The stage's done markers: the kill comes once the stage has finished a chunk.
    watch = out / "auto" / "labels" / "done" if stage == "labels" else out / "done"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    child = subprocess.Popen([sys.executable, "-c", _CHILD, str(model_dir), str(data), str(out)], env=env)
    try:
        deadline = time.monotonic() + 300
        while not (watch.exists() and any(watch.iterdir())):
            assert child.poll() is None, "the pipeline ended before the kill"
            assert time.monotonic() < deadline
            time.sleep(0.02)
        child.send_signal(signal.SIGKILL)
        child.wait()
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == -signal.SIGKILL
    assert not (out / "quality.parquet").exists()  # it was killed before the end
    resumed = quiet(
        explain_corpus_amortized,
        str(model_dir),
        data,
        out,
        label_texts=12,
        audit=0.25,
        chunk_size=8,
        resume=True,
        **FAST,
    )
    assert resumed.complete
    # The head's digest names its label run's folder, so it differs; its scores must not.
    a, b = (r.positions().sort_values(["id", "position"]).reset_index(drop=True) for r in (whole, resumed))
    assert a["token"].tolist() == b["token"].tolist()
    # tol: float32 hidden states: the killed run's chunks of 2 batch the texts otherwise
    np.testing.assert_allclose(a["value"], b["value"], atol=1e-5)
    qa, qb = (r.quality().sort_values("id").reset_index(drop=True) for r in (whole, resumed))
    pd.testing.assert_frame_equal(
        qa.drop(columns=["audit_value_spearman", "audit_importance_spearman"]),
        qb.drop(columns=["audit_value_spearman", "audit_importance_spearman"]),
    )
    # tol: ranks of scores that agree to 1e-5 (a tie broken otherwise would move a rho by far more)
    np.testing.assert_allclose(qa["audit_value_spearman"], qb["audit_value_spearman"], atol=1e-6)


def test_refit_explains_the_flagged_texts_per_text(done, model_dir, tmp_path):
    run, _ = done
    flagged = sorted(run.quality().query("flagged")["id"])
    assert flagged  # the out-of-distribution text at least
    refit = quiet(refit_flagged, str(model_dir), run, out=tmp_path / "refit", show_progress=False)
    assert sorted(refit.texts()["id"]) == flagged
    assert refit.manifest["options"]["method"] == "hybrid" and refit.manifest["options"]["n_samples"] == 120


def test_the_command_line_runs_the_pipeline_and_refit(model_dir, tmp_path, capsys):
    from slalom_core.cli import main

    data = corpus(tmp_path / "d.jsonl", 30)
    out = tmp_path / "cli"
    args = ["explain", "--model", str(model_dir), "--data", str(data), "--out", str(out), "--amortized", "auto"]
    args += ["--label-texts", "10", "--audit", "0.2", "--n-samples", "100", "--no-progress"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(args) == 0
    said = capsys.readouterr().out
    assert "30 texts explained by a head trained on 10 per-text fits" in said
    # The audit's share as it is: 20 audited of the 30 texts (the asked 0.2 is below the fewest it fits).
    assert "audit of 20 of the 30 texts in the run (67%)" in said and f"slalom-xai refit {out}" in said
    q = CorpusRun(out).quality()
    assert q["audited"].sum() == 20 and q["in_label_set"].sum() == 10
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["refit", str(out), "--model", str(model_dir), "--no-progress"]) == 0
    assert "flagged texts explained per text" in capsys.readouterr().out
    assert sorted(CorpusRun(out / "auto" / "refit").texts()["id"]) == sorted(q.query("flagged")["id"])
    # --label-texts without auto is refused in one line.
    bad = ["explain", "--data", str(data), "--out", str(tmp_path / "x"), "--label-texts", "5"]
    assert main(bad) == 2 and "--amortized auto" in capsys.readouterr().err


def test_the_pipeline_runs_on_ray(done, model_dir, tmp_path):
    ray = pytest.importorskip("ray")
    whole, data = done
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        dist = quiet(
            explain_corpus_amortized,
            str(model_dir),
            data,
            tmp_path / "ray",
            label_texts=12,
            audit=0.25,
            chunk_size=8,
            engine="ray",
            num_workers=1,
            **FAST,
        )
    finally:
        ray.shutdown()
    assert dist.complete
    # The same label and audit sets (drawn from the seed) and the same flags.
    qa, qb = (r.quality().sort_values("id").reset_index(drop=True) for r in (whole, dist))
    assert qa[["id", "in_label_set", "audited", "ood"]].equals(qb[["id", "in_label_set", "audited", "ood"]])
    a, b = (r.positions().sort_values(["id", "position"]).reset_index(drop=True) for r in (whole, dist))
    # Labels fitted in Ray's workers: float32 forward rounding in another process (~4e-7 of
    # a score, see test_corpus), carried through the head's training; the head's outputs
    # agree within 1e-3 (tol: float32 training of a tiny head on labels that differ by ~1e-6).
    np.testing.assert_allclose(a["value"], b["value"], atol=1e-3)


# -- follow-up commands check what they re-read (issue 48) ------------------------------------


def _copy_run(done, tmp_path) -> tuple[Path, Path]:
    """The finished run and its data, copied, the copy's manifest naming the copied data."""
    import shutil

    run, data = done
    shutil.copytree(run.path, tmp_path / "run")
    shutil.copy(data, tmp_path / "data.jsonl")
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    manifest["input"]["data"] = str((tmp_path / "data.jsonl").resolve())
    (tmp_path / "run" / "manifest.json").write_text(json.dumps(manifest))
    return tmp_path / "run", tmp_path / "data.jsonl"


def test_refit_refuses_another_model_by_its_fingerprint(done, model_dir, tmp_path, capsys):
    from slalom_core.cli import main

    run, _ = done
    tok = bert_tokenizer(tmp_path / "tok")
    other = tiny_classifier("bert", tok, seed=1, initializer_range=0.2)
    with pytest.raises(ValueError, match="fingerprint"):
        refit_flagged(other, run, tok, out=tmp_path / "refit", show_progress=False)
    assert not (tmp_path / "refit").exists()
    other.save_pretrained(tmp_path / "other")
    tok.save_pretrained(tmp_path / "other")
    args = ["refit", str(run.path), "--model", str(tmp_path / "other"), "--out", str(tmp_path / "r2"), "--no-progress"]
    assert main(args) == 2
    assert "fingerprint" in capsys.readouterr().err and not (tmp_path / "r2").exists()


@pytest.mark.parametrize("edit", ["text", "appended", "removed"])
def test_refit_refuses_a_data_file_changed_since_the_run(done, model_dir, tmp_path, edit):
    path, data = _copy_run(done, tmp_path)
    lines = data.read_text().splitlines(keepends=True)
    if edit == "text":
        row = json.loads(lines[3])
        lines[3] = json.dumps({"id": row["id"], "text": "the film was great"}) + "\n"
    elif edit == "appended":
        lines.append(json.dumps({"id": "new", "text": "a very good movie"}) + "\n")
    else:
        lines = lines[1:]
    data.write_text("".join(lines))
    with pytest.raises(ValueError, match="changed since the run"):
        refit_flagged(str(model_dir), CorpusRun(path), out=tmp_path / "refit", show_progress=False)
    assert not (tmp_path / "refit").exists()


def test_a_resume_after_a_label_text_changed_retrains_the_head(model_dir, tmp_path):
    first = corpus(tmp_path / "a.jsonl", 16)
    opts = dict(label_texts=12, audit=0.0, chunk_size=4, **FAST)
    old = quiet(explain_corpus_amortized, str(model_dir), first, tmp_path / "run", **opts).manifest["amortized"]
    plan = json.loads((tmp_path / "run" / "auto" / "plan.json").read_text())
    edited = tmp_path / "a.jsonl"
    lines = edited.read_text().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if json.loads(line)["id"] == plan["label_ids"][0])
    lines[at] = json.dumps({"id": plan["label_ids"][0], "text": "the worst story , very bad and boring"}) + "\n"
    edited.write_text("".join(lines))
    fresh_data = tmp_path / "b.jsonl"
    fresh_data.write_text("".join(lines))
    with pytest.warns(UserWarning, match="head is trained again"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", AmortizedFewTextsWarning)
            warnings.simplefilter("ignore", AmortizedOODWarning)
            resumed = explain_corpus_amortized(str(model_dir), edited, tmp_path / "run", resume=True, **opts)
    fresh = quiet(explain_corpus_amortized, str(model_dir), fresh_data, tmp_path / "fresh", **opts)
    assert resumed.manifest["amortized"]["digest"] != old["digest"]  # a new head ...
    # ... which explains every text as the uninterrupted run of the edited data does.
    a, b = (r.positions().sort_values(["id", "position"]).reset_index(drop=True) for r in (resumed, fresh))
    # tol: the same head (trained on the same labels with the same seed) on the same texts,
    # its float32 outputs possibly from batches composed otherwise: float32 rounding of values
    # of size ~1 through a two-layer head (< 1e-6), with 10× room
    np.testing.assert_allclose(a["value"].to_numpy(), b["value"].to_numpy(), rtol=1e-5, atol=1e-5)
    # A second resume with nothing changed keeps the head.
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        warnings.simplefilter("ignore", AmortizedFewTextsWarning)
        warnings.simplefilter("ignore", AmortizedOODWarning)
        warnings.simplefilter("ignore", SlalomFitWarning)  # the tiny random model's per-text fits
        again = explain_corpus_amortized(str(model_dir), edited, tmp_path / "run", resume=True, **opts)
    assert again.manifest["amortized"]["digest"] == resumed.manifest["amortized"]["digest"]


def test_explain_corpus_reads_an_iterator_of_ids_once(model_dir, tmp_path):
    data = corpus(tmp_path / "d.jsonl", 10)
    opts = dict(n_samples=60, show_progress=False)
    run = quiet(explain_corpus, str(model_dir), data, tmp_path / "m", ids=map(str, ["t1", "t3"]), **opts)
    assert sorted(run.texts()["id"]) == ["t1", "t3"]
    run = quiet(explain_corpus, str(model_dir), data, tmp_path / "g", ids=(f"t{i}" for i in (2, 4, 5)), **opts)
    assert sorted(run.texts()["id"]) == ["t2", "t4", "t5"]
    with pytest.raises(ValueError, match="none of the 2 ids"):
        explain_corpus(str(model_dir), data, tmp_path / "none", ids=iter(["x", "y"]), **opts)
    with pytest.raises(TypeError, match="str ids"):
        explain_corpus(str(model_dir), data, tmp_path / "ints", ids=iter([1, 2]), **opts)


def _fails_on_deletions(model_dir: Path, keep: str, lose: str):
    """The model, refusing any row that holds the word ``keep`` without the word ``lose``:
    only a per-text fit's deletions of a text holding both do."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    model = AutoModelForSequenceClassification.from_pretrained(str(model_dir))
    tok = AutoTokenizer.from_pretrained(str(model_dir))
    a, b = tok.convert_tokens_to_ids([keep, lose])

    def check(module, args, kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        if ids is not None and ((ids == a).any(-1) & ~(ids == b).any(-1)).any():
            raise RuntimeError(f"a row with {keep!r} but not {lose!r}")

    model.register_forward_pre_hook(check, with_kwargs=True)
    return model, tok


def test_in_label_set_comes_from_the_label_fits(model_dir, tmp_path):
    from slalom_core.corpus import ModelLoader

    rng = np.random.default_rng(3)
    words = [w for w in WORDS if w not in ("loved", "hated")]
    rows = [" ".join(rng.choice(words, size=rng.integers(3, 8))) for _ in range(14)]
    rows[5] = "i loved and hated the plot"
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"id": f"t{i}", "text": t}) + "\n" for i, t in enumerate(rows)))
    model = ModelLoader(lambda: _fails_on_deletions(model_dir, "loved", "hated"), name="hooked")
    run = quiet(explain_corpus_amortized, model, data, tmp_path / "run", label_texts=14, audit=0.0, **FAST)
    labels = CorpusRun(tmp_path / "run" / "auto" / "labels")
    assert "t5" in set(labels.failures()["id"])  # its per-text fit failed ...
    q = run.quality().set_index("id")
    assert "t5" in q.index  # ... the head explained it ...
    assert not q.loc["t5", "in_label_set"]  # ... but it taught the head nothing
    assert q.drop(index="t5")["in_label_set"].all()


def test_a_corpus_too_small_to_pay_for_the_pipeline_is_refused_with_the_way_out(model_dir, tmp_path, capsys):
    from slalom_core.cli import main

    data = corpus(tmp_path / "d.jsonl", 40)
    # Default sizes: 20 labels + 20 audited of 40 texts, every text fitted per text anyway.
    with pytest.raises(ValueError, match=r"20 label texts and audit 20 per text, 40 of 40 \(more than half\)") as err:
        explain_corpus_amortized(str(model_dir), data, tmp_path / "run", **FAST)
    assert "without --amortized" in str(err.value) and "--label-texts" in str(err.value)
    assert "pays from 440 texts" in str(err.value)  # 200 labels + 20 audited ≤ half of 440
    assert not (tmp_path / "run").exists()  # refused before any fit
    args = ["explain", "--model", str(model_dir), "--data", str(data), "--out", str(tmp_path / "cli"), "--amortized"]
    assert main([*args, "auto", "--no-progress"]) == 2
    assert "without --amortized" in capsys.readouterr().err
    # Sizes chosen by hand are the user's call: a clear warning, and the run goes on.
    with pytest.warns(AmortizedFewTextsWarning, match="more than half"):
        check_pays(40, 0.25, 12)
    check_pays(12_700, 0.005, None)  # the measured setting pays: nothing said


def test_the_audit_share_is_what_the_audit_covered(done, tmp_path):
    from slalom_core.corpus.export import export_dataset
    from slalom_core.corpus.report import write_report

    run, _ = done
    audit = run.manifest["auto"]["audit"]
    # 20 audited of the 40 texts in the run, whatever share was asked (0.25, below the fewest an audit fits).
    assert (audit["n_audited"], audit["n_texts"], audit["share"], audit["share_asked"]) == (20, 40, 0.5, 0.25)
    said = "20 of the 40 texts in the run (50%)"
    index = write_report(run, tmp_path / "report", text_pages=False).read_text(encoding="utf-8")
    assert said in index
    card = (quiet(export_dataset, run, tmp_path / "export") / "README.md").read_text(encoding="utf-8")
    assert said in card and "a share of" not in card
