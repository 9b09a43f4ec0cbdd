"""A corpus run's tables: gold label and text kept, the explained class named, older runs
read, and a stored text rebuilt as the explanation the run computed, without the model."""

import json
import warnings

import numpy as np
import pytest
import slalom_core as sc
from slalom_core.corpus import CorpusRun, explain_corpus, text_seed
from tiny_models import bert_tokenizer, signal_bert, tiny_classifier

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

ROWS = [
    {"id": "a", "text": "the movie was great", "label": 1},
    {"id": "b", "text": "a boring plot and a bad actor , the film was bad", "label": 0},
    {"id": "c", "text": "great fun ! the best film", "label": 1},
]
FAST = dict(n_samples=150, show_progress=False)


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    return signal_bert(tmp_path_factory.mktemp("bert"))


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    path = tmp_path_factory.mktemp("data") / "c.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    return path


@pytest.fixture(scope="module")
def run(bert, data, tmp_path_factory):
    model, tok = bert
    # One text per chunk: each text is then explained by an explain_batch call of its own,
    # as a direct explain() of it is.
    return explain_corpus(model, data, tmp_path_factory.mktemp("run") / "r", tok, chunk_size=1, **FAST)


def test_gold_label_text_and_explained_class_have_their_own_columns(run):
    texts = run.texts().set_index("id")
    assert texts["gold_label"].to_dict() == {"a": "1", "b": "0", "c": "1"}
    assert texts["text"].to_dict() == {r["id"]: r["text"] for r in ROWS}
    assert set(texts["explained_class"]) == {"1"} and "label" not in texts.columns
    assert run.manifest["input"]["label_column"] == "label"
    assert run.manifest["model"]["class"].endswith("BertForSequenceClassification")


def test_a_run_without_labels_has_none(bert, tmp_path):
    model, tok = bert
    path = tmp_path / "c.jsonl"
    path.write_text(json.dumps({"text": "great fun"}) + "\n")
    texts = explain_corpus(model, path, tmp_path / "r", tok, **FAST).texts()
    assert texts["gold_label"].isna().all() and texts["text"].tolist() == ["great fun"]


def test_a_run_written_before_the_renames_reads_in_todays_columns(run, tmp_path):
    import shutil

    old = tmp_path / "old"
    shutil.copytree(run.path, old)
    for name, dropped in (("positions", ["unit"]), ("texts", ["gold_label", "text", "diagnostics", "target"])):
        for part in (old / name).glob("part-*.parquet"):
            table = pq.read_table(part).drop_columns(dropped)
            table = table.rename_columns(["label" if c == "explained_class" else c for c in table.column_names])
            pq.write_table(table, part)
    texts, positions = CorpusRun(old).texts(), CorpusRun(old).positions()
    assert list(texts["explained_class"]) == list(run.texts()["explained_class"])
    assert texts["gold_label"].isna().all() and positions["unit"].isna().all()
    # Units come back from the token ids, so the explanation still rebuilds.
    np.testing.assert_array_equal(CorpusRun(old).explanation("b").lin, run.explanation("b").lin)


@pytest.mark.parametrize("text_id", ["a", "b"])
def test_a_stored_text_is_the_explanation_the_run_computed(bert, run, text_id):
    model, tok = bert
    text = next(r["text"] for r in ROWS if r["id"] == text_id)
    direct = sc.explain(model, text, tokenizer=tok, n_samples=150, seed=text_seed(0, text_id))
    stored = run.explanation(text_id)
    assert stored.tokens == direct.tokens and stored.token_ids == direct.token_ids and stored.text == direct.text
    np.testing.assert_array_equal(stored.unit_index, direct.unit_index)
    for name in ("value", "importance", "lin", "removal", "contribution", "value_se", "importance_se"):
        np.testing.assert_array_equal(getattr(stored, name), getattr(direct, name), err_msg=name)
    for name in ("base_value", "model_output", "surrogate_output", "full_text_gap"):
        assert getattr(stored, name) == getattr(direct, name), name
    assert stored.method == direct.method
    assert stored.diagnostics["heldout_r2"] == direct.diagnostics["heldout_r2"]
    assert stored.diagnostics.seed == text_seed(0, text_id)


def test_a_stored_explanation_plots_and_a_missing_one_says_why(run, tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    from slalom_core import plots

    ax = plots.plot_scatter(run.explanation("c"))
    assert len(ax.collections) >= 1
    with pytest.raises(KeyError, match="the run holds no text 'zz'"):
        run.explanation("zz")


def test_a_joint_three_class_fit_comes_back_with_every_class(data, tmp_path):
    tok = bert_tokenizer(tmp_path / "tok")
    model = tiny_classifier("bert", tok, num_labels=3, initializer_range=0.2)
    run = explain_corpus(model, data, tmp_path / "r", tok, chunk_size=1, limit=1, **FAST)
    assert len(run.texts()) == 3  # one row per explained class
    direct = sc.explain(model, ROWS[0]["text"], tokenizer=tok, n_samples=150, seed=text_seed(0, "a"))
    stored = run.explanation("a")
    assert stored.class_names == [str(c) for c in direct.class_names]
    for name in ("value", "lin", "contribution", "value_se"):
        np.testing.assert_array_equal(getattr(stored, name), getattr(direct, name), err_msg=name)
    np.testing.assert_array_equal(stored.model_output, direct.model_output)


def test_cli_help_shows_defaults_and_warnings_are_one_line(data, tmp_path, capsys):
    from slalom_core.cli import main

    with pytest.raises(SystemExit):
        main(["explain", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "(default: 1000)" in help_text and "(default: 64)" in help_text and "(default: None)" not in help_text
    assert "--target" in help_text and "--no-truncate" in help_text
    # The run below stops its fits after two iterations: the run's fit warning (the fit-quality
    # rule's "did not converge") comes as one line, without a source line.
    with warnings.catch_warnings():
        warnings.simplefilter("always")  # whatever filters the test session runs under
        code = main(["explain", "--data", str(data), "--out", str(tmp_path / "r"), "--n-samples", "60",
                     "--method", "eff", "--option", "max_iter=2", "--no-progress"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 0 and "slalom-xai: SlalomFitWarning: SLALOM fits of 3 texts" in err
    assert "3 the fit did not converge" in err
    assert all(line.startswith("slalom-xai: ") for line in err.strip().splitlines()) and "main()" not in err


def test_cli_target_and_model_name(data, tmp_path, capsys):
    from slalom_core.cli import main

    code = main(["explain", "--data", str(data), "--out", str(tmp_path / "r"), "--n-samples", "60", "--target", "0",
                 "--no-progress"])  # fmt: skip
    assert code == 0
    run = CorpusRun(tmp_path / "r")
    assert set(run.texts()["explained_class"]) == {"0"} and set(run.texts()["target"]) == {0}
    assert run.manifest["model"]["name"] == "minilm-imdb" and "MiniLM" in run.manifest["model"]["class"]


def test_an_export_writes_the_runs_tables_in_another_format(run, tmp_path):
    import pandas as pd
    from slalom_core.corpus import export_run

    written = export_run(run, tmp_path / "csv", "csv", tables=["texts", "failures"])
    assert written and all(p.suffix == ".csv" for p in written)
    texts = pd.concat(pd.read_csv(p, dtype={"id": str}) for p in written if p.parent.name == "texts")
    want = run.texts()
    assert sorted(texts["id"]) == sorted(want["id"])
    # CSV writes floats with repr's 17 significant digits: they read back exactly.
    got = texts.set_index("id")["model_output"].sort_index()
    np.testing.assert_array_equal(got.to_numpy(), want.set_index("id")["model_output"].sort_index().to_numpy())
    lines = export_run(run.path, tmp_path / "jsonl", "jsonl", tables=["positions"])
    rows = [json.loads(line) for p in lines for line in p.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == len(run.positions()) and {"token", "value", "importance"} <= set(rows[0])
    with pytest.raises(FileExistsError):
        export_run(run, tmp_path / "csv")
    with pytest.raises(ValueError, match="unknown export format"):
        export_run(run, tmp_path / "x", "xml")
