"""explain_corpus: formats, chunking/order/engine invariance, resume, failures, global picture."""

import json
import subprocess
import sys
import warnings

import numpy as np
import pandas as pd
import pytest
import slalom_core as sc
import torch
from slalom_core.corpus import (
    CorpusRun,
    CorpusSource,
    ModelLoader,
    cohort_matrix,
    compare_global_local,
    explain_corpus,
    global_slalom,
    store,
    text_seed,
    word_summary,
)
from tiny_models import SHORT_REVIEWS, SlalomModel, bert_tokenizer, signal_bert

pytest.importorskip("pyarrow")

TEXTS = list(SHORT_REVIEWS)
FAST = dict(n_samples=150, show_progress=False)


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    return signal_bert(tmp_path_factory.mktemp("bert"))


def write_jsonl(path, texts, ids=None):
    with open(path, "w") as f:
        for i, t in enumerate(texts):
            rec = {"text": t} if ids is None else {"id": ids[i], "text": t}
            f.write(json.dumps(rec) + "\n")
    return path


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_jsonl(tmp_path_factory.mktemp("corpus") / "c.jsonl", TEXTS, [f"r{i}" for i in range(len(TEXTS))])


def scores(run):
    """Scores by (id, position), the part of a run the data determine."""
    return run.positions().set_index(["id", "explained_class", "position"])[
        ["value", "importance", "lin", "contribution"]
    ]


def assert_same_scores(a, b, atol=1e-4, rtol=1e-5):
    """Two runs' scores agree. tol: the default atol 1e-4 is the fits' gradient stop (GRAD_TOL)
    over float32 forward rounding; callers pass atol=0 only where both runs made the same calls."""
    a, b = scores(a), scores(b)
    assert a.index.equals(b.index)
    # Relative too: lin = v·exp(s) reaches ±85 on the tiny random BERT, where the fit's
    # stopping tolerance alone moves it by about 1e-6 of its size.
    np.testing.assert_allclose(a.to_numpy(), b.to_numpy(), atol=atol, rtol=rtol)


# -- reading ----------------------------------------------------------------------------
def test_every_format_gives_the_same_rows(tmp_path):
    import gzip

    import pyarrow as pa
    import pyarrow.parquet as pq

    ids = [f"x{i}" for i in range(5)]
    texts = TEXTS[:5]
    write_jsonl(tmp_path / "a.jsonl", texts, ids)
    with gzip.open(tmp_path / "a.jsonl.gz", "wt") as f:
        f.write((tmp_path / "a.jsonl").read_text())
    pd.DataFrame({"id": ids, "text": texts}).to_csv(tmp_path / "a.csv", index=False)
    pq.write_table(pa.table({"id": ids, "text": texts, "other": list(range(5))}), tmp_path / "a.parquet")
    folder = tmp_path / "parts"
    folder.mkdir()
    pq.write_table(pa.table({"id": ids[:2], "text": texts[:2]}), folder / "0.parquet")
    pq.write_table(pa.table({"id": ids[2:], "text": texts[2:]}), folder / "1.parquet")
    sources = ["a.jsonl", "a.jsonl.gz", "a.csv", "a.parquet", "parts"]
    datasets = pytest.importorskip("datasets")
    datasets.Dataset.from_dict({"id": ids, "text": texts}).save_to_disk(str(tmp_path / "hf"))
    sources.append("hf")
    for name in sources:
        rows = [r for chunk in CorpusSource(tmp_path / name).scan().chunks(2) for r in chunk]
        assert [(r.id, r.text) for r in rows] == list(zip(ids, texts)), name


def test_ids_from_row_numbers_limit_and_missing_columns(tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", TEXTS[:4])
    src = CorpusSource(path, limit=3).scan()
    assert src.resolved_id_column is None and src.n_rows == 3
    assert [r.id for c in src.chunks(2) for r in c] == ["0", "1", "2"]
    with pytest.raises(ValueError, match="no text column 'review'"):
        CorpusSource(path, text_column="review").scan()
    with pytest.raises(ValueError, match="no id column 'key'"):
        CorpusSource(path, id_column="key").scan()
    with pytest.raises(FileNotFoundError):
        CorpusSource(tmp_path / "nope.jsonl")
    (tmp_path / "bad.jsonl").write_text('{"text": "ok"}\n{"text": \n')
    with pytest.raises(ValueError, match="line 2: not valid JSON"):
        CorpusSource(tmp_path / "bad.jsonl").scan()


def test_a_byte_order_mark_does_not_hide_the_id_column(tmp_path):
    # Excel and Notepad save "UTF-8" with a BOM: the header must still read "id".
    (tmp_path / "a.csv").write_text("id,text\nx1,a film\nx2,a plot\n", encoding="utf-8-sig")
    (tmp_path / "a.jsonl").write_text('{"id": "x1", "text": "a film"}\n{"id": "x2", "text": "a plot"}\n', "utf-8-sig")
    for name in ("a.csv", "a.jsonl"):
        src = CorpusSource(tmp_path / name).scan()
        assert src.resolved_id_column == "id", name
        assert [(r.id, r.text) for c in src.chunks(5) for r in c] == [("x1", "a film"), ("x2", "a plot")], name


def test_a_byte_that_is_not_utf8_is_named_by_file_and_line(tmp_path):
    (tmp_path / "a.jsonl").write_bytes(b'{"id": "x1", "text": "a film"}\n{"id": "x2", "text": "caf\xe9 plot"}\n')
    (tmp_path / "b.csv").write_bytes(b"id,text\nx1,a film\nx2,caf\xe9 plot\n")
    for name, line in (("a.jsonl", 2), ("b.csv", 3)):
        with pytest.raises(ValueError, match=rf"^{name}, line {line}: not UTF-8 \(byte 0xe9"):
            CorpusSource(tmp_path / name).scan()


def test_a_pretty_printed_json_array_is_read_as_one(tmp_path):
    records = [{"id": "x1", "text": "a film"}, {"id": 2, "text": "a plot"}]
    (tmp_path / "a.json").write_text(json.dumps(records, indent=2), encoding="utf-8-sig")
    src = CorpusSource(tmp_path / "a.json").scan()
    assert src.resolved_id_column == "id"
    assert [(r.id, r.text) for c in src.chunks(5) for r in c] == [("x1", "a film"), ("2", "a plot")]
    (tmp_path / "b.json").write_text('[\n  {"id": "x1", "text": "a film"},\n  "oops"\n]')
    with pytest.raises(ValueError, match="b.json: element 1 of its JSON array is not an object"):
        CorpusSource(tmp_path / "b.json").scan()
    (tmp_path / "c.json").write_text('[\n  {"id": "x1", "text": "a film"},\n')
    with pytest.raises(ValueError, match="c.json, line 3: starts with '\\[' but is not one JSON array"):
        CorpusSource(tmp_path / "c.json").scan()


def test_a_truncated_manifest_is_named(bert, corpus, tmp_path):
    model, tok = bert
    out = tmp_path / "run"
    explain_corpus(model, corpus, out, tokenizer=tok, limit=2, seed=0, **FAST)
    text = (out / "manifest.json").read_text()
    (out / "manifest.json").write_text(text[: len(text) // 2])
    with pytest.raises(ValueError, match=r"manifest.json' is not a valid manifest \(.*truncated\?\)"):
        CorpusRun(out)
    for seed in (None, 0):  # the seed of a resumed run is read from it too
        with pytest.raises(ValueError, match="manifest.json' is not a valid manifest"):
            explain_corpus(model, corpus, out, tokenizer=tok, limit=2, seed=seed, resume=True, **FAST)


def test_ids_are_read_as_written(tmp_path):
    (tmp_path / "a.csv").write_text("id,text\n007,a film\n7,a plot\n")
    lines = ['{"id": 1, "text": "a"}', '{"id": 1.0, "text": "b"}', '{"id": 1e3, "text": "c"}', '{"id": "x", "text": 5}']
    (tmp_path / "a.jsonl").write_text("\n".join(lines) + "\n")
    assert [r.id for c in CorpusSource(tmp_path / "a.csv").scan().chunks(5) for r in c] == ["007", "7"]
    rows = [r for c in CorpusSource(tmp_path / "a.jsonl").scan().chunks(5) for r in c]
    assert [r.id for r in rows] == ["1", "1.0", "1e3", "x"]
    assert rows[3].text == 5 and type(rows[3].text) is int  # only the id keeps its literal


def test_chunk_keys_do_not_collide_on_ids_with_newlines(bert, tmp_path):
    assert store.chunk_key(["a\nb"]) != store.chunk_key(["a", "b"])
    model, tok = bert
    # Chunks ["a", "b"] and ["a\nb"]: with the ids joined by newlines both were key hash("a\nb").
    path = write_jsonl(tmp_path / "c.jsonl", TEXTS[:3], ids=["a", "b", "a\nb"])
    run = explain_corpus(model, path, tmp_path / "out", tok, chunk_size=2, **FAST)
    assert run.complete and sorted(run.texts()["id"].unique()) == ["a", "a\nb", "b"]


def test_text_seed_is_stable_across_processes():
    here = [text_seed(3, "review-17"), text_seed(3, "review-18"), text_seed(4, "review-17")]
    assert len(set(here)) == 3
    code = "from slalom_core.corpus import text_seed; print(text_seed(3, 'review-17'))"
    # A fresh interpreter has another hash() salt: a seed built on hash() would differ.
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert int(other.stdout) == here[0]


def test_explain_batch_takes_one_seed_per_text(bert):
    model, tok = bert
    texts = TEXTS[:3]
    seeds = [text_seed(0, str(i)) for i in range(3)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        batch = sc.explain_batch(model, texts, tokenizer=tok, n_samples=150, seed=seeds)
        for text, s, exp in zip(texts, seeds, batch):
            alone = sc.explain(model, text, tokenizer=tok, n_samples=150, seed=s)
            assert exp.diagnostics["seed"] == s
            # tol: float32 outputs of a tiny BERT in other batches (~1e-7), passed on through the fit
            np.testing.assert_allclose(exp.value, alone.value, atol=1e-5)
    with pytest.raises(ValueError, match="one seed, or one per text"):
        sc.explain_batch(model, texts, tokenizer=tok, seed=[1, 2])


# -- invariance ---------------------------------------------------------------------------
def test_scores_do_not_depend_on_chunking_or_order(bert, corpus, tmp_path):
    model, tok = bert
    a = explain_corpus(model, corpus, tmp_path / "a", tok, chunk_size=4, **FAST)
    b = explain_corpus(model, corpus, tmp_path / "b", tok, chunk_size=1, **FAST)
    lines = corpus.read_text().splitlines()
    shuffled = write_jsonl(tmp_path / "rev.jsonl", [json.loads(x)["text"] for x in lines[::-1]])
    ids = [json.loads(x)["id"] for x in lines[::-1]]
    write_jsonl(shuffled, [json.loads(x)["text"] for x in lines[::-1]], ids)
    c = explain_corpus(model, shuffled, tmp_path / "c", tok, chunk_size=3, **FAST)
    assert a.complete and len(a.texts()) == len(TEXTS)
    assert_same_scores(a, b)
    assert_same_scores(a, c)
    # The text's own model output does not depend on what shares its batch beyond float noise.
    # tol: float32 outputs of a tiny BERT in other batches (~1e-7)
    np.testing.assert_allclose(a.texts()["model_output"], c.texts()["model_output"], atol=1e-5)
    assert (a.texts()["seed"].to_numpy() == [text_seed(0, i) for i in a.texts()["id"]]).all()


def test_ray_engine_matches_local(bert, corpus, tmp_path):
    ray = pytest.importorskip("ray")
    model, tok = bert
    local = explain_corpus(model, corpus, tmp_path / "local", tok, chunk_size=4, **FAST)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        dist = explain_corpus(model, corpus, tmp_path / "ray", tok, chunk_size=3, engine="ray", num_workers=2, **FAST)
    finally:
        ray.shutdown()
    assert dist.complete
    # Chunks of 4 locally, of 3 on Ray's workers: each text is read and solved apart from its
    # chunk, so what remains is the forward's float32 rounding in another process (its own
    # thread count): ~4e-7 of a score's size, well inside rtol 1e-5.
    assert_same_scores(local, dist)
    cols = ["id", "explained_class", "gold_label", "text", "n_positions", "method", "seed", "options"]
    pd.testing.assert_frame_equal(local.texts()[cols], dist.texts()[cols])


def test_ray_needs_an_id_column(bert, tmp_path):
    model, tok = bert
    path = write_jsonl(tmp_path / "noid.jsonl", TEXTS[:2])
    with pytest.raises(ValueError, match="needs an id column"):
        explain_corpus(model, path, tmp_path / "out", tok, engine="ray", **FAST)
    assert not (tmp_path / "out").exists()


def test_ray_reads_ids_as_written_on_a_ray_instance_of_its_own_bound_to_loopback(bert, tmp_path):
    ray = pytest.importorskip("ray")
    if ray.is_initialized():
        ray.shutdown()
    model, tok = bert
    # "007" and "7" are two ids (Arrow's type inference made both 7); 1 and 2.5 in one JSON
    # column stay "1" and "2.5" (Arrow made them 1.0 and 2.5). The CSV has a byte-order mark.
    (tmp_path / "c.csv").write_text("id,text\n007,a good film\n7,a bad plot\n", encoding="utf-8-sig")
    lines = ['{"id": 1, "text": "a good film"}', '{"id": 2.5, "text": "a bad plot"}']
    (tmp_path / "c.jsonl").write_text("\n".join(lines) + "\n")
    try:
        for name, ids in (("c.csv", ["007", "7"]), ("c.jsonl", ["1", "2.5"])):
            local = explain_corpus(model, tmp_path / name, tmp_path / f"local-{name}", tok, **FAST)
            dist = explain_corpus(
                model, tmp_path / name, tmp_path / f"ray-{name}", tok, engine="ray", num_workers=1, **FAST
            )
            assert dist.complete and sorted(dist.texts()["id"].unique()) == ids, name
            assert_same_scores(local, dist)
        # The engine started this instance itself: its servers listen on loopback only.
        gcs = ray.get_runtime_context().gcs_address
        assert gcs.startswith("127.0.0.1:"), gcs
    finally:
        ray.shutdown()


# -- resume ------------------------------------------------------------------------------
def test_resume_after_a_crash_gives_the_same_files(bert, corpus, tmp_path, monkeypatch):
    model, tok = bert
    whole = explain_corpus(model, corpus, tmp_path / "whole", tok, chunk_size=3, **FAST)

    real_write = store.write_chunk
    calls = {"n": 0}

    def crash_on_third(out, ids, tables, digests):
        calls["n"] += 1
        if calls["n"] == 3:
            # Killed between the parts and the marker: an orphan part is left behind.
            (out / "positions").mkdir(exist_ok=True)
            (out / "positions" / f"part-{store.chunk_key(ids)}.parquet").write_bytes(b"half a file")
            raise KeyboardInterrupt
        return real_write(out, ids, tables, digests)

    monkeypatch.setattr(store, "write_chunk", crash_on_third)
    with pytest.raises(KeyboardInterrupt):
        explain_corpus(model, corpus, tmp_path / "cut", tok, chunk_size=3, **FAST)
    monkeypatch.setattr(store, "write_chunk", real_write)
    assert CorpusRun(tmp_path / "cut").n_done == 6
    with pytest.raises(FileExistsError, match="resume"):
        explain_corpus(model, corpus, tmp_path / "cut", tok, chunk_size=3, **FAST)
    with pytest.raises(ValueError, match="options differ"):
        explain_corpus(model, corpus, tmp_path / "cut", tok, chunk_size=3, resume=True, n_samples=151)
    resumed = explain_corpus(model, corpus, tmp_path / "cut", tok, chunk_size=3, resume=True, **FAST)
    assert resumed.complete
    for name in store.TABLES:
        assert sorted(p.name for p in (tmp_path / "whole" / name).iterdir()) == sorted(
            p.name for p in (tmp_path / "cut" / name).iterdir()
        )
    # Wall-clock times (also in the diagnostics): what a re-run may change.
    drop = ["seconds", "model_seconds", "fit_seconds", "diagnostics"]
    pd.testing.assert_frame_equal(whole.texts().drop(columns=drop), resumed.texts().drop(columns=drop))
    pd.testing.assert_frame_equal(whole.positions(), resumed.positions())


def test_resume_refuses_another_model(bert, corpus, tmp_path):
    import copy

    model, tok = bert
    explain_corpus(model, corpus, tmp_path / "r", tok, chunk_size=2, limit=4, **FAST)
    other = copy.deepcopy(model)
    with torch.no_grad():
        next(other.parameters()).add_(0.01)  # same class, config and tokenizer: other weights
    with pytest.raises(ValueError, match=r"explained with the model .*new output path"):
        explain_corpus(other, corpus, tmp_path / "r", tok, chunk_size=2, limit=4, resume=True, **FAST)
    # The same model (a copy, or a loader of it) resumes.
    same = ModelLoader(lambda: (copy.deepcopy(model), tok))
    assert explain_corpus(same, corpus, tmp_path / "r", chunk_size=2, limit=4, resume=True, **FAST).complete
    # A black box without weights is told apart by its settings.
    path = write_jsonl(tmp_path / "s.jsonl", ["Great movie"], ids=["a"])
    kw = dict(method="ana", output="logits", show_progress=False)
    explain_corpus(sc.StringClassifier(_case_sensitive, tok, class_names=["neg", "pos"]), path, tmp_path / "s", **kw)
    with pytest.raises(ValueError, match="explained with the model"):
        swapped = sc.StringClassifier(_case_sensitive, tok, class_names=["pos", "neg"])
        explain_corpus(swapped, path, tmp_path / "s", resume=True, **kw)


def test_resume_explains_again_the_chunks_whose_texts_changed(bert, tmp_path):
    model, tok = bert
    path = write_jsonl(tmp_path / "c.jsonl", TEXTS[:4], ids=["a", "b", "c", "d"])
    first = explain_corpus(model, path, tmp_path / "r", tok, chunk_size=2, **FAST)
    edited = TEXTS[:2] + ["great fun !", TEXTS[3]]  # same rows, same ids, c's text edited
    write_jsonl(path, edited, ids=["a", "b", "c", "d"])
    with pytest.warns(UserWarning, match=r"data changed .*1 finished chunks \(2 texts: 'c', 'd'\)"):
        resumed = explain_corpus(model, path, tmp_path / "r", tok, chunk_size=2, resume=True, **FAST)
    assert resumed.complete
    tokens = resumed.positions().query("id == 'c'")["token"].unique().tolist()
    assert tokens == ["great", "fun", "!"]
    fresh = explain_corpus(model, path, tmp_path / "fresh", tok, chunk_size=2, **FAST)
    assert_same_scores(fresh, resumed)
    # Unchanged chunks were kept, not redone.
    pd.testing.assert_frame_equal(
        first.texts().query("id in ['a', 'b']").reset_index(drop=True),
        resumed.texts().query("id in ['a', 'b']").reset_index(drop=True),
    )


# -- failures ----------------------------------------------------------------------------
def test_every_row_is_explained_or_failed(bert, tmp_path):
    model, tok = bert
    long_text = " ".join(["good"] * 80)  # the tiny BERT takes 64 positions
    rows = [
        {"id": "ok", "text": "the movie was great"},
        {"id": "empty", "text": "   "},
        {"id": "number", "text": 5},
        {"id": "none", "text": None},
        {"id": "long", "text": long_text},
        {"id": "dup", "text": "a film"},
        {"id": "dup", "text": "another film"},
    ]
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    with pytest.warns(UserWarning, match="6 of 7 texts could not be explained"):
        run = explain_corpus(model, path, tmp_path / "out", tok, chunk_size=2, truncate=False, **FAST)
    fails = run.failures().set_index("id")
    assert set(run.texts()["id"]) == {"ok"}
    assert sorted(fails.index) == ["dup", "dup", "empty", "long", "none", "number"]
    assert fails.loc["empty", "error"] == "ValueError"
    assert fails.loc["number", "error"] == "TypeError" and "int" in fails.loc["number", "message"]
    assert "accepts at most" in fails.loc["long", "message"] and "truncate" in fails.loc["long", "message"]
    assert (fails.loc["dup", "error"] == "DuplicateIdError").all()
    assert run.complete

    # The default cuts the long text and says so, once for the run and per text.
    with pytest.warns(UserWarning, match="1 texts were longer than the model accepts and were cut"):
        cut = explain_corpus(model, path, tmp_path / "cut", tok, limit=5, **FAST)
    texts = cut.texts().set_index("id")
    assert texts.loc["long", "n_positions"] == 62 and texts.loc["long", "truncated_positions"] == 18
    assert texts.loc["long", "text"] == long_text and texts.loc["ok", "truncated_positions"] == 0


def _leaky_gateway(texts):
    raise RuntimeError('HTTP 401: {"headers": {"Authorization": "Bearer sk-live-abcdefghijklmnop1234"}}')


def test_failures_table_redacts_credentials_quoted_in_errors(bert, tmp_path):
    _, tok = bert
    path = write_jsonl(tmp_path / "c.jsonl", ["a film"], ids=["a"])
    with pytest.warns(UserWarning, match="1 of 1 texts could not be explained"):
        run = explain_corpus(sc.StringClassifier(_leaky_gateway, tok), path, tmp_path / "out", show_progress=False)
    message = run.failures()["message"].iloc[0]
    assert "Bearer [redacted]" in message and "abcdefghijklmnop" not in message


class Exploding(torch.nn.Module):
    def forward(self, input_ids, attention_mask):
        raise AssertionError("the model must not be called")


def test_bad_options_and_paths_fail_before_any_model_call(bert, corpus, tmp_path):
    _, tok = bert
    model = sc.TorchClassifier(Exploding(), tokenizer=tok)
    out = tmp_path / "out"
    cases = [
        (dict(text_column="review"), ValueError, "no text column"),
        (dict(method="nope"), ValueError, "unknown"),
        (dict(n_samples=0), ValueError, "n_samples"),
        (dict(chunk_size=0), ValueError, "chunk_size"),
        (dict(seed=-1), ValueError, "seed"),
        (dict(engine="spark"), ValueError, "unknown engine"),
        (dict(output="logodds"), ValueError, "unknown output"),
        (dict(reference="zero"), ValueError, "reference"),
    ]
    for kwargs, err, match in cases:
        with pytest.raises(err, match=match):
            explain_corpus(model, corpus, out, show_progress=False, **kwargs)
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="nothing was overwritten"):
        explain_corpus(model, corpus, out, show_progress=False)
    with pytest.raises(FileExistsError, match="holds no corpus run"):
        explain_corpus(model, corpus, out, show_progress=False, resume=True)
    assert [p.name for p in out.iterdir()] == ["keep.txt"]


# Options every chunk's explain_batch call would refuse: one engine check (check_call)
# refuses them, with the same error, in explain_batch and in a corpus run.
BAD_CALL_OPTIONS = [
    dict(n_samples=0),
    dict(n_samples=2.5),
    dict(seed=-1),
    dict(seed="s"),
    dict(target=True),
    dict(output="logodds"),
    dict(multiclass="both"),
    dict(granularity="char"),
    dict(reference="zero"),
    dict(reference=[[0.0]]),
    dict(method="nope"),
    dict(prior_sd=-1.0),
    dict(method="ana", solver="adam"),
]


@pytest.mark.parametrize("kwargs", BAD_CALL_OPTIONS, ids=lambda kw: ",".join(f"{k}={v}" for k, v in kw.items()))
def test_corpus_and_explain_batch_refuse_the_same_options_before_any_model_call(bert, tmp_path, kwargs):
    _, tok = bert
    with pytest.raises((ValueError, TypeError)) as direct:
        sc.explain_batch(sc.TorchClassifier(Exploding(), tokenizer=tok), ["great fun"], **kwargs)

    def no_load():
        raise AssertionError("the model must not be loaded")

    # A data path that does not exist: the options are refused before the data scan too.
    missing, out = tmp_path / "missing.jsonl", tmp_path / "out"
    with pytest.raises((ValueError, TypeError)) as corpus:
        explain_corpus(ModelLoader(no_load), missing, out, show_progress=False, **kwargs)
    assert (type(corpus.value), str(corpus.value)) == (type(direct.value), str(direct.value))
    assert not out.exists()
    with pytest.raises((ValueError, TypeError)) as checked:
        sc.check_call(**kwargs)
    assert str(checked.value) == str(direct.value)


def test_corpus_with_good_options_goes_on_to_the_data(tmp_path):
    # The control for the test above: with nothing wrong, the first error is the data's.
    with pytest.raises(FileNotFoundError):
        explain_corpus(ModelLoader(lambda: 1 / 0), tmp_path / "missing.jsonl", tmp_path / "out", show_progress=False)


def test_a_run_checks_its_options_once_for_every_chunk(bert, tmp_path, monkeypatch):
    import slalom_core.api.driver as driver
    import slalom_core.corpus.checks as checks
    import slalom_core.corpus.rows as rows

    model, tok = bert
    checked = []
    real = sc.check_call
    for module in (checks, rows, driver):  # every place a corpus run could check them
        monkeypatch.setattr(module, "check_call", lambda opts: checked.append(opts) or real(opts))
    data = write_jsonl(tmp_path / "c.jsonl", TEXTS[:5], [f"r{i}" for i in range(5)])
    run = explain_corpus(model, data, tmp_path / "out", tok, chunk_size=2, method="eff", sample_length=2, **FAST)
    assert run.texts()["id"].nunique() == 5 and len(store.markers(run.path)) == 3  # three chunks
    assert checked == [
        sc.CallOptions(method="eff", n_samples=150, seed=0, truncate=True, fit_options={"sample_length": 2})
    ]


def test_corpus_takes_one_seed(corpus, tmp_path):
    with pytest.raises(TypeError, match="one seed"):
        explain_corpus(ModelLoader(lambda: 1 / 0), corpus, tmp_path / "out", seed=[1, 2], show_progress=False)


def test_cli_explain_and_its_one_line_errors(tmp_path, capsys):
    from slalom_core.cli import main

    path = write_jsonl(tmp_path / "c.jsonl", ["a wonderful film", "dull"], ["a", "b"])
    code = main(["explain", "--data", str(path), "--out", str(tmp_path / "r"), "--n-samples", "60", "--no-progress"])
    assert code == 0 and "2 texts explained, 0 failed, of 2 rows" in capsys.readouterr().out
    code = main(["explain", "--data", str(path), "--out", str(tmp_path / "s"), "--text-column", "review"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "no text column 'review'" in err


# -- the global picture --------------------------------------------------------------------
def hand_positions():
    # Two texts; "good" twice in t1 (one observation for t1), once in t2.
    rows = [
        ("t1", 0, "good", 1.0, 0.5, 2.0, 0.3),
        ("t1", 1, "film", -1.0, -0.5, -0.6, -0.2),
        ("t1", 2, "good", 1.0, 0.5, 2.0, 0.3),
        ("t2", 0, "good", 3.0, -0.5, 1.5, 1.0),
        ("t2", 1, "bad", -2.0, 0.5, -3.0, -1.2),
    ]
    df = pd.DataFrame(rows, columns=["id", "position", "token", "value", "importance", "lin", "contribution"])
    df["label"] = "1"  # the name an older run's table gave the explained class
    return df


def test_word_summary_against_a_hand_computed_case():
    summary = word_summary(hand_positions())
    good = summary.loc["good"]
    assert good["n_texts"] == 2 and good["n_occurrences"] == 3
    assert good["value_mean"] == pytest.approx(2.0) and good["value_sd"] == pytest.approx(np.sqrt(2.0))
    assert good["value_se"] == pytest.approx(1.0)
    assert good["lin_mean"] == pytest.approx(1.75) and good["importance_mean"] == pytest.approx(0.0)
    assert np.isnan(summary.loc["film", "value_se"])
    assert list(summary.index) == ["bad", "good", "film"]  # by |mean lin|: 3, 1.75, 0.6
    assert list(word_summary(hand_positions(), min_texts=2).index) == ["good"]


def test_cohort_matrix_and_shap_cohort(bert, corpus, tmp_path):
    model, tok = bert
    run = explain_corpus(model, corpus, tmp_path / "r", tok, **FAST)
    ids, tokens, values, counts, base = cohort_matrix(run, score="contribution", top=500, min_texts=1)
    pos = run.positions()
    # With every token of the corpus as a column, a text's contributions add up to its
    # surrogate output minus its base value, as the texts table says.
    texts = run.texts().set_index("id").loc[ids]
    # tol: float64 rounding of sums over a text's positions
    np.testing.assert_allclose(values.sum(axis=1), texts["surrogate_output"] - texts["base_value"], atol=1e-9)
    assert counts.sum() == len(pos)
    shap = pytest.importorskip("shap")
    import shap_slalom

    sv = shap_slalom.corpus_explanation(run, top=5, min_texts=2)
    assert isinstance(sv, shap.Explanation) and sv.values.shape == (len(TEXTS), 5)
    # Tokens by mean |contribution| over the texts they occur in (at least 2), not by frequency.
    summary = word_summary(run, min_texts=2, sort_by="contribution")
    per_text = pos.groupby(["id", "token"])["contribution"].sum().abs().groupby(level="token").mean()
    assert sv.feature_names == list(per_text.loc[summary.index].sort_values(ascending=False).index[:5])
    assert "SHAP" not in shap_slalom.plots.bar(sv).get_xlabel()
    assert shap_slalom.plots.beeswarm(sv).get_xlabel().startswith("contribution")


def test_global_slalom_recovers_a_true_slalom(tmp_path):
    tok = bert_tokenizer(tmp_path / "tok")
    rng = np.random.default_rng(5)
    n = len(tok)
    value, importance = rng.normal(0, 1.5, n), rng.normal(0, 1.0, n)
    special = list(tok.all_special_ids)
    # [CLS]/[SEP] weigh nothing and are worth nothing: the model is a SLALOM over the words.
    value[special], importance[special] = 0.0, -30.0
    model = sc.TorchClassifier(SlalomModel(value, importance), tokenizer=tok)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = explain_corpus(model, write_jsonl(tmp_path / "c.jsonl", TEXTS), tmp_path / "r", **FAST)
        g = global_slalom(model, run, top=15, min_texts=2, n_samples=3000, l2_importance=0.0, l2_value=0.0)
    ids = [tok.convert_tokens_to_ids(t) for t in g.index]
    # tol: the solver's stop on 3,000 samples of an exact SLALOM without ridge: values to ~1e-3, importances (softmax weights) to ~1e-2
    np.testing.assert_allclose(g["value"], value[ids], atol=2e-3)  # values ~ N(0, 1.5²)
    true_s = importance[ids] - importance[ids].mean()
    # tol: the solver's stop, as above: importances (softmax weights) to ~1e-2
    np.testing.assert_allclose(g["importance"], true_s, atol=1e-2)
    rho = compare_global_local(g, run)
    assert rho["n_tokens"] == len(g) and rho["value"] > 0.9


def test_plot_words_draws_both_panels(bert, corpus, tmp_path):
    from slalom_core.corpus import plot_words

    summary = word_summary(hand_positions())
    fig = plot_words(summary, top=3)
    assert len(fig.axes) == 2 and fig.axes[1].get_yticklabels()[0].get_text() in {"bad", "film", "good"}


def test_plot_words_keeps_every_title_and_label_inside_the_figure():
    from slalom_core.corpus import plot_words

    fig = plot_words(word_summary(hand_positions()), top=3)
    fig.canvas.draw()
    renderer, box = fig.canvas.get_renderer(), fig.bbox
    for ax in fig.axes:
        for text in (ax.title, ax.xaxis.label, ax.yaxis.label):
            extent = text.get_window_extent(renderer)
            # tol: one pixel of the renderer's rounding
            assert extent.x0 >= box.x0 - 1 and extent.x1 <= box.x1 + 1, (text.get_text(), extent, box)


def test_seed_none_follows_torch_manual_seed_and_resume_keeps_it(bert, corpus, tmp_path):
    model, tok = bert
    runs = []
    for name in ("a", "b"):
        torch.manual_seed(7)
        runs.append(explain_corpus(model, corpus, tmp_path / name, tok, seed=None, limit=3, **FAST))
    seeds = [r.manifest["options"]["seed"] for r in runs]
    assert seeds[0] == seeds[1]
    assert_same_scores(*runs, atol=0)
    torch.manual_seed(8)
    again = explain_corpus(model, corpus, tmp_path / "a", tok, seed=None, limit=3, resume=True, **FAST)
    assert again.manifest["options"]["seed"] == seeds[0]


def test_a_local_path_and_a_loader_load_the_model_where_it_runs(bert, corpus, tmp_path):
    from functools import partial

    from slalom_core.corpus import ModelLoader

    model, tok = bert
    model.save_pretrained(tmp_path / "m")
    tok.save_pretrained(tmp_path / "m")
    by_object = explain_corpus(model, corpus, tmp_path / "a", tok, limit=4, **FAST)
    by_path = explain_corpus(str(tmp_path / "m"), corpus, tmp_path / "b", limit=4, **FAST)
    loader = ModelLoader(partial(lambda m, t: (m, t), model, tok))
    by_loader = explain_corpus(loader, corpus, tmp_path / "c", limit=4, **FAST)
    assert_same_scores(by_object, by_path, atol=1e-6)
    assert_same_scores(by_object, by_loader, atol=0)


def _case_sensitive(texts):
    return [[0.0, 1.0 if "Great" in t else -1.0] for t in texts]


@pytest.mark.parametrize("truncate", [False, True])
def test_a_string_model_sees_each_texts_own_spelling_in_a_corpus_run(bert, tmp_path, truncate):
    _, tok = bert  # uncased: decoded ids would read "great"
    path = write_jsonl(tmp_path / "c.jsonl", ["Great movie", "great movie"], ids=["a", "b"])
    clf = sc.StringClassifier(_case_sensitive, tok, max_length=64)
    run = explain_corpus(
        clf, path, tmp_path / "out", truncate=truncate, method="ana", output="logits", show_progress=False
    )
    assert run.texts().set_index("id")["model_output"].to_dict() == {"a": 1.0, "b": -1.0}


def test_ray_refuses_a_json_array_before_reading(tmp_path):
    pytest.importorskip("ray")
    from slalom_core.corpus.ray_engine import _read

    (tmp_path / "a.json").write_text(json.dumps([{"id": "x1", "text": "a film"}], indent=2))
    src = CorpusSource(tmp_path / "a.json").scan()
    with pytest.raises(ValueError, match="a.json is a JSON array, not JSON lines: the Ray engine"):
        _read(src)  # before any Ray call: nothing is started


# -- what a run trusts on disk -------------------------------------------------------------
def test_a_model_folder_that_does_not_exist_is_named(corpus, tmp_path, monkeypatch, capsys):
    from slalom_core.cli import main

    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError, match=r"no model folder at .*no_such_dir; give a Hub id or an existing"):
        explain_corpus("./no_such_dir", corpus, tmp_path / "out", **FAST)
    code = main(["explain", "--model", "./no_such_dir", "--data", str(corpus), "--out", str(tmp_path / "cli")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and f"no model folder at {tmp_path / 'no_such_dir'}" in err
    assert not (tmp_path / "out").exists() and not (tmp_path / "cli").exists()


def test_a_saved_dataset_dict_asks_for_its_split(tmp_path):
    datasets = pytest.importorskip("datasets")
    split = datasets.Dataset.from_dict({"id": ["a", "b"], "text": ["a good film", "a bad plot"]})
    datasets.DatasetDict({"train": split, "test": split}).save_to_disk(str(tmp_path / "dd"))
    with pytest.raises(ValueError, match=r"a saved DatasetDict with splits \['test', 'train'\]: .*dd/train"):
        CorpusSource(tmp_path / "dd").scan()
    assert CorpusSource(tmp_path / "dd" / "train").scan().n_rows == 2


def _waiting_model(started, release):
    def f(texts):
        started.set()
        release.wait(30)
        return [[0.0, float(t.count("good"))] for t in texts]

    return sc.StringClassifier(f)


def test_a_second_run_on_an_output_in_use_is_refused(bert, corpus, tmp_path):
    import threading

    started, release = threading.Event(), threading.Event()
    out = tmp_path / "run"
    result = {}
    kw = dict(limit=3, method="ana", output="logits", show_progress=False)
    first = threading.Thread(
        target=lambda: result.setdefault("run", explain_corpus(_waiting_model(started, release), corpus, out, **kw))
    )
    first.start()
    try:
        assert started.wait(30)
        for resume in (False, True):
            with pytest.raises(FileExistsError, match="in use by another run"):
                explain_corpus(_waiting_model(threading.Event(), threading.Event()), corpus, out, resume=resume, **kw)
    finally:
        release.set()
        first.join(60)
    assert result["run"].complete and result["run"].n_done == 3


def test_a_folder_holding_no_finished_chunk_does_not_block_the_next_command(bert, corpus, tmp_path, monkeypatch):
    model, tok = bert
    out = tmp_path / "tmp_only"
    out.mkdir()
    (out / "manifest.json.tmp").write_text('{"version": ')  # killed while writing its manifest
    assert explain_corpus(model, corpus, out, tok, limit=2, **FAST).complete

    def killed(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(store, "write_chunk", killed)  # killed before its first chunk was written
    with pytest.raises(KeyboardInterrupt):
        explain_corpus(model, corpus, tmp_path / "nothing_done", tok, limit=2, **FAST)
    monkeypatch.undo()
    run = explain_corpus(model, corpus, tmp_path / "nothing_done", tok, limit=2, n_samples=151, show_progress=False)
    assert run.complete and run.manifest["options"]["n_samples"] == 151


def test_a_deleted_part_makes_the_run_incomplete_and_resume_redoes_it(bert, corpus, tmp_path):
    model, tok = bert
    out = tmp_path / "run"
    whole = explain_corpus(model, corpus, out, tok, chunk_size=4, **FAST)
    n_texts = len(whole.texts())
    next((out / "texts").glob("part-*.parquet")).unlink()
    assert not CorpusRun(out).complete
    resumed = explain_corpus(model, corpus, out, tok, chunk_size=4, resume=True, **FAST)
    assert resumed.complete and len(resumed.texts()) == n_texts


def _api(max_calls):
    return sc.APIClassifier(lambda t: [0.0, t.count("good") - t.count("bad")], max_calls=max_calls)


def test_texts_stopped_by_the_budget_are_retried_by_a_resume_with_a_new_budget(tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", ["a good film", "a bad plot", "good good fun", "a dull bad film"])
    kw = dict(chunk_size=2, method="ana", output="logits", show_progress=False, seed=0)
    with pytest.warns(UserWarning, match="could not be explained"):
        run = explain_corpus(_api(12), path, tmp_path / "r", **kw)
    budget_failed = set(run.failures()["id"])
    assert budget_failed and set(run.failures()["error"]) == {"BudgetExceededError"}
    resumed = explain_corpus(_api(None), path, tmp_path / "r", resume=True, **kw)
    assert resumed.complete and len(resumed.failures()) == 0
    assert sorted(resumed.texts()["id"]) == ["0", "1", "2", "3"]
    whole = explain_corpus(_api(None), path, tmp_path / "whole", **kw)
    assert_same_scores(whole, resumed, atol=0)


def test_an_id_beyond_int64_is_read_and_sorted_as_written(tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", ["a good film", "a bad plot", "good"], ids=[10**20, 2, 30])
    run = explain_corpus(_api(None), path, tmp_path / "r", method="ana", output="logits", show_progress=False)
    assert list(run.texts()["id"]) == ["2", "30", "100000000000000000000"]


def test_ray_runs_an_api_classifier_and_refuses_its_budget(tmp_path):
    ray = pytest.importorskip("ray")
    path = write_jsonl(tmp_path / "c.jsonl", ["a good film", "a bad plot"], ids=[10**20, 2])
    kw = dict(method="ana", output="logits", show_progress=False, seed=0)
    local = explain_corpus(_api(None), path, tmp_path / "local", **kw)
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        dist = explain_corpus(_api(None), path, tmp_path / "ray", engine="ray", num_workers=1, **kw)
        with pytest.raises(ValueError, match=r"max_calls=100\).*each Ray worker.*engine='local'"):
            explain_corpus(_api(100), path, tmp_path / "budget", engine="ray", num_workers=1, **kw)
    finally:
        ray.shutdown()
    assert dist.complete and list(dist.texts()["id"]) == ["2", "100000000000000000000"]
    assert_same_scores(local, dist, atol=0)


def test_resume_refuses_an_edited_call_function(tmp_path):
    # Known by name only, an edited prompt (a global the call reads) resumed the run: its
    # rows then held answers of two prompts.
    def user_call(prompt: str):
        namespace = {"__name__": "user_prompts", "PROMPT": prompt}
        exec("def call(text):\n    return [0.0, float(len(PROMPT.format(text=text)) % 5)]\n", namespace)
        return namespace["call"]

    path = write_jsonl(tmp_path / "c.jsonl", ["a good film", "a bad plot", "good good fun"])
    kw = dict(chunk_size=1, method="ana", output="logits", show_progress=False, seed=0)
    explain_corpus(sc.APIClassifier(user_call("Review: {text}")), path, tmp_path / "r", **kw)
    with pytest.raises(ValueError, match=r"explained with the model .*code"):
        explain_corpus(sc.APIClassifier(user_call("Film review: {text}")), path, tmp_path / "r", resume=True, **kw)
    # The same call, defined again, resumes.
    assert explain_corpus(
        sc.APIClassifier(user_call("Review: {text}")), path, tmp_path / "r", resume=True, **kw
    ).complete


def test_global_fit_uses_the_runs_own_model_or_refuses_another(bert, corpus, tmp_path, capsys):
    import copy

    from slalom_core.cli.command import main

    model, tok = bert
    run = explain_corpus(model, corpus, tmp_path / "r", tok, limit=4, **FAST)
    other = copy.deepcopy(model)
    with torch.no_grad():
        next(other.parameters()).add_(0.01)
    with pytest.raises(ValueError, match="explained with the model"):
        global_slalom(other, run, tok, top=5, min_texts=1, n_samples=40)
    assert len(global_slalom(copy.deepcopy(model), run, tok, top=5, min_texts=1, n_samples=40)) >= 2
    # The command line: the run was made in Python with a model in memory, so --model
    # (the demo model by default) is another model: refused, exit status 2, no file written.
    status = main(["summarize", str(run.path), "--global-fit", "--min-texts", "1"])
    assert status == 2 and "explained with the model" in capsys.readouterr().err
    assert not (run.path / "global_slalom.csv").exists()


def test_summarize_global_fit_loads_the_model_the_run_names(bert, corpus, tmp_path, capsys):
    from slalom_core.cli.command import main

    model, tok = bert
    folder = tmp_path / "model"
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    out = tmp_path / "r"
    argv = ["explain", "--model", str(folder), "--data", str(corpus), "--out", str(out), "--limit", "3"]
    assert main([*argv, "--n-samples", "60", "--no-progress"]) == 0
    # No --model: the run's own model (its folder, from the manifest), not the demo model.
    assert main(["summarize", str(out), "--global-fit", "--min-texts", "1", "--top", "4"]) == 0
    assert (out / "global_slalom.csv").exists()
    capsys.readouterr()
    assert main(["summarize", str(out), "--global-fit", "--min-texts", "1", "--model", "default"]) == 2
    assert "explained with the model" in capsys.readouterr().err


@pytest.mark.parametrize(
    "extra, says",
    [
        (["--target", "7"], "target"),  # a binary model has classes 0 and 1
        (["--device", "cuda:7"], "device"),  # no such GPU here (none at all on a CPU machine)
    ],
)
def test_an_option_that_fails_every_text_is_refused_up_front(bert, corpus, tmp_path, capsys, extra, says):
    from slalom_core.cli.command import main

    model, tok = bert
    folder = tmp_path / "model"
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    capsys.readouterr()  # the saving's own progress bar
    argv = ["explain", "--model", str(folder), "--data", str(corpus), "--out", str(tmp_path / "r"), "--limit", "2"]
    status = main([*argv, "--n-samples", "40", "--no-progress", *extra])
    err = capsys.readouterr().err
    assert status != 0 and says in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "r").exists()


def test_a_run_whose_every_text_failed_exits_non_zero(bert, corpus, tmp_path, capsys, monkeypatch):
    from slalom_core.cli import corpus as cli_corpus
    from slalom_core.cli.command import main

    model, tok = bert
    folder = tmp_path / "model"
    model.save_pretrained(folder)
    tok.save_pretrained(folder)

    load_pair = cli_corpus.load_pair

    def broken(spec):  # loads, then fails on every forward (a fault no check foresees)
        m, t = load_pair(spec)
        m.forward = lambda *a, **k: (_ for _ in ()).throw(RuntimeError("the GPU fell off the bus"))
        return m, t

    monkeypatch.setattr(cli_corpus, "load_pair", broken)
    argv = ["explain", "--model", str(folder), "--data", str(corpus), "--out", str(tmp_path / "r"), "--limit", "2"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        status = main([*argv, "--n-samples", "40", "--no-progress"])
    assert status == 1 and "every text failed" in capsys.readouterr().err


def test_the_progress_bar_counts_texts_as_their_fits_go(bert, tmp_path, monkeypatch):
    """A run of 6 texts in one chunk (64 by default) shows texts done while the chunk's fits
    read the model, not 0/6 until the whole chunk is written."""
    from slalom_core.corpus import run as run_module

    model, tok = bert
    seen: list[int] = []

    class Bar:
        def __init__(self, *args, **kwargs):
            self.n = 0

        def update(self, k):
            self.n += k
            seen.append(self.n)

        def close(self):
            pass

    monkeypatch.setattr(run_module, "_bar", lambda show, total, done, desc, file=None: Bar())
    path = write_jsonl(tmp_path / "six.jsonl", list(SHORT_REVIEWS[:6]))
    explain_corpus(model, path, tmp_path / "out", tok, n_samples=150, show_progress=True)
    assert seen[-1] == 6 and seen == sorted(seen)
    assert len(seen) > 2 and seen[0] < 6  # moved before the chunk was written
