"""A corpus run exported as a dataset to share: Parquet shards that ``datasets`` reads, one row
per (text, explained class) equal to the run's explanations, a dataset card, read one chunk
at a time, written whole or not at all."""

import json
import re
import shutil
import warnings

import numpy as np
import pytest
from slalom_core.corpus import CorpusRun, explain_corpus, export_dataset
from slalom_core.corpus import export as export_module
from tiny_models import bert_tokenizer, tiny_classifier, write_jsonl

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
datasets = pytest.importorskip("datasets")

# Five texts and an empty one (it fails, and must not become a row).
TEXTS = ["the movie was great", "a boring plot and a bad actor", "great fun !", "", "i hated it", "very good movie"]
FAST = dict(n_samples=150, show_progress=False)
SCORES = ("value", "importance", "lin", "removal", "contribution")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("export")
    tok = bert_tokenizer(tmp / "tok")
    data = write_jsonl(tmp / "c.jsonl", TEXTS)
    # The runs' own warnings (a failed text, tiny models' poor fits) are not this file's subject.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        two = tiny_classifier("bert", tok, initializer_range=0.2)
        binary = explain_corpus(two, data, tmp / "r2", tok, chunk_size=2, **FAST)
        three = tiny_classifier("bert", tok, num_labels=3, initializer_range=0.2)
        joint = explain_corpus(three, data, tmp / "r3", tok, chunk_size=2, limit=3, **FAST)
    return binary, joint


def _load(out, tmp_path, monkeypatch):
    # Offline: the parquet builder is packaged with datasets, nothing is fetched.
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    return datasets.load_dataset("parquet", data_dir=str(out), cache_dir=str(tmp_path / "cache"))["train"]


def test_rows_read_back_by_datasets_are_the_runs_explanations(runs, tmp_path, monkeypatch):
    run = runs[0]
    out = export_dataset(run, tmp_path / "ds")
    ds = _load(out, tmp_path, monkeypatch)
    assert sorted(ds["id"]) == sorted(run.texts()["id"]) and "r3" not in ds["id"]  # r3 failed
    for row in ds:
        exp = run.explanation(row["id"])
        assert row["tokens"] == list(exp.tokens) and row["text"] == TEXTS[int(row["id"][1:])]
        assert row["token_ids"] == [list(ids) for ids in exp.token_ids]
        # float64 in the run's tables, float64 in the shards: Parquet keeps every bit.
        for name in SCORES:
            np.testing.assert_array_equal(row[name], getattr(exp, name), err_msg=name)
        np.testing.assert_array_equal(row["value_se"], exp.value_se)
        np.testing.assert_array_equal(row["importance_se"], exp.importance_se)
        assert row["importance_determined"] == exp.importance_determined.tolist()
        assert (row["base_value"], row["model_output"]) == (exp.base_value, exp.model_output)
        assert row["method"] == "hybrid" and row["n_samples"] == 150
        # The explained class by name, as `predicted` names classes (the run stores class 1 as "1").
        assert row["explained_class"] == "LABEL_1"
        assert row["predicted"] == ("LABEL_1" if exp.model_output >= 0 else "LABEL_0")
        # The card's promise: b + sum(contribution) is the surrogate's output (float64 summation order).
        assert row["base_value"] + sum(row["contribution"]) == pytest.approx(row["surrogate_output"], abs=1e-12)
    # The Hub's way in (the card's YAML: configs and features) gives the same dataset.
    hub = datasets.load_dataset(str(out), cache_dir=str(tmp_path / "cache2"))["train"]
    assert hub.features == ds.features and hub["id"] == ds["id"]


def test_a_joint_multiclass_run_gives_one_row_per_class(runs, tmp_path, monkeypatch):
    run = runs[1]
    ds = _load(export_dataset(run, tmp_path / "ds"), tmp_path, monkeypatch)
    names = ["LABEL_0", "LABEL_1", "LABEL_2"]
    assert len(ds) == 9 and sorted(set(ds["explained_class"])) == names
    for row in ds:
        exp = run.explanation(row["id"])  # the joint fit, every class in one explanation
        k = names.index(row["explained_class"])
        np.testing.assert_array_equal(row["value"], exp.value[:, k])
        np.testing.assert_array_equal(row["contribution"], exp.contribution[:, k])
        np.testing.assert_array_equal(row["importance"], exp.importance)
        assert row["predicted"] == names[int(np.argmax(exp.model_output))]


def test_the_run_is_read_one_chunk_at_a_time_into_shards_of_one_schema(runs, tmp_path, monkeypatch):
    run = runs[0]
    calls = []
    parts = CorpusRun.parts

    def counting(self, table, keys=None):
        calls.append((table, keys))
        return parts(self, table, keys)

    def whole(*args, **kwargs):
        raise AssertionError("the export read a whole table")

    monkeypatch.setattr(CorpusRun, "parts", counting)
    for name in ("texts", "positions", "failures"):
        monkeypatch.setattr(CorpusRun, name, whole)
    written = []
    write = export_module._Shards.write
    monkeypatch.setattr(export_module._Shards, "write", lambda self, t: (written.append(len(t)), write(self, t)))
    out = export_dataset(run, tmp_path / "ds", shard_rows=2)
    # Positions are read chunk by chunk, each by its one key; a written table is one chunk's rows.
    positions = [keys for table, keys in calls if table == "positions"]
    assert positions and all(keys is not None and len(keys) == 1 for keys in positions)
    assert len(positions) == len(set(map(tuple, positions)))  # no chunk read twice
    assert max(written) <= 2 and sum(written) == 5  # chunk_size=2: at most 2 texts per chunk
    shards = sorted((out / "data").iterdir())
    assert [p.name for p in shards] == [f"train-{i:05d}-of-00003.parquet" for i in range(3)]
    schemas = [pq.read_schema(p) for p in shards]
    assert all(s.equals(schemas[0]) for s in schemas) and [pq.read_metadata(p).num_rows for p in shards] == [2, 2, 1]


def _amortized_like(run: CorpusRun, path, *, quality: bool) -> CorpusRun:
    """A copy of ``run`` dressed as an amortized run: the manifest's head record, an OOD check
    per text in the texts table, and (``quality``) the pipeline's quality table and record."""
    shutil.copytree(run.path, path)
    manifest = json.loads((path / "manifest.json").read_text())
    manifest["amortized"] = {
        "folder": None,
        "digest": "headdigest",
        "trained_on": {"method": "hybrid", "n_samples": 150},
    }
    manifest["options"]["method"] = "amortized"
    if quality:
        stats = {"mean": 0.812, "median": 0.834, "p10": 0.523}
        manifest["auto"] = {
            "labels": {"run": "auto/labels", "n_texts": 40, "method": "hybrid", "n_samples": 600, "chosen_by": "budget"},
            "head": {"folder": "auto/head", "digest": "headdigest"},
            "audit": {"run": "auto/audit", "share": 0.4, "n_audited": 2, "n_texts": 5, "value_spearman": stats,
                      "importance_spearman": {"mean": 0.61, "median": 0.6, "p10": 0.2}, "poor_below": 0.7, "n_poor": 1},
            "flags": {"n_ood": 1, "n_poor_audit": 1, "n_flagged": 2},
        }  # fmt: skip
        ids = ["r0", "r1", "r2", "r4", "r5"]
        table = {
            "id": ids,
            "in_label_set": [False] * 5,
            "audited": [True, True, False, False, False],
            "audit_value_spearman": [0.9, 0.41, np.nan, np.nan, np.nan],
            "audit_importance_spearman": [0.8, 0.2, np.nan, np.nan, np.nan],
            "ood": [False, False, True, False, False],
            "poor_audit": [False, True, False, False, False],
            "flagged": [False, True, True, False, False],
            "flag_reason": ["", "audit: value Spearman 0.41 < 0.7", "out of distribution: its length 9", "", ""],
        }
        pq.write_table(pa.table(table), path / "quality.parquet")
    (path / "manifest.json").write_text(json.dumps(manifest))
    for part in (path / "texts").glob("part-*.parquet"):
        texts = pq.read_table(part)
        # r2 is out of distribution; r5's check is missing (null): unknown, not "in distribution".
        ood = [
            None if i == "r5" else json.dumps({"warning": "its length 9 is outside [2, 5]" if i == "r2" else None})
            for i in texts["id"].to_pylist()
        ]
        column = pa.array(ood, type=pa.string())
        pq.write_table(texts.set_column(texts.schema.get_field_index("ood"), "ood", column), part)
    return CorpusRun(path)


def test_an_amortized_pipelines_run_gets_its_quality_columns_and_audit_in_the_card(runs, tmp_path, monkeypatch):
    run = _amortized_like(runs[0], tmp_path / "run", quality=True)
    out = export_dataset(run, tmp_path / "ds")
    ds = _load(out, tmp_path, monkeypatch)
    got = {r["id"]: r for r in ds}
    want = run.quality().set_index("id")
    for text_id, row in got.items():
        for name in export_module.QUALITY_COLUMNS:
            a, b = row[name], want.loc[text_id, name]
            assert a == b or (a != a and b != b), (text_id, name)  # NaN for a text not audited
    assert got["r1"]["flag_reason"].startswith("audit:") and got["r2"]["flagged"] and not got["r4"]["flagged"]
    # status: a flagged text is "flagged", whatever its fit's own status
    assert {t: r["status"] == "flagged" for t, r in got.items()} == {t: bool(r["flagged"]) for t, r in got.items()}
    card = (out / "README.md").read_text(encoding="utf-8")
    for fact in ("`amortized`", "headdigest", "2 of the 5 texts in the run (40%), never shown to the head", "| value | 0.812 | 0.834 | 0.523 |",
                 "Flagged in all: 2 texts", "40 texts of this corpus", "`hybrid` at 600"):  # fmt: skip
        assert fact in card, fact


def test_an_amortized_run_without_quality_table_gets_its_ood_check(runs, tmp_path, monkeypatch):
    run = _amortized_like(runs[0], tmp_path / "run", quality=False)
    ds = _load(export_dataset(run, tmp_path / "ds"), tmp_path, monkeypatch)
    assert "flagged" not in ds.column_names
    assert {r["id"]: r["ood"] for r in ds} == {"r0": False, "r1": False, "r2": True, "r4": False, "r5": None}
    assert [r["id"] for r in ds if r["status"] == "flagged"] == ["r2"]
    assert [r["ood_reason"] for r in ds if r["id"] == "r2"] == ["its length 9 is outside [2, 5]"]
    # A per-text run has neither column.
    assert "ood" not in _load(export_dataset(runs[0], tmp_path / "plain"), tmp_path, monkeypatch).column_names


def test_the_card_says_what_the_run_was_and_what_each_column_means(runs, tmp_path):
    run = runs[0]
    card = (export_dataset(run, tmp_path / "ds") / "README.md").read_text(encoding="utf-8")
    front, body = card.split("---\n")[1], card.split("---\n", 2)[2]
    assert "- text-classification" in front and "- explainability" in front and "path: data/train-*.parquet" in front
    assert run.manifest["model"]["digest"] in body and "BertForSequenceClassification" in body
    assert "`hybrid`" in body and "150 model evaluations per text" in body and "`LABEL_0`, `LABEL_1`" in body
    assert "5 explained (5 rows), 1 failed" in body and "## Audit" not in body
    for column in pq.read_schema(next((tmp_path / "ds" / "data").iterdir())).names:
        assert f"| `{column}` |" in body, column
    assert "b + sum(contribution) = surrogate_output" in body and "arXiv:2405.13536" in body
    assert 'load_dataset("parquet", data_dir=' in body and "Leemann, Tobias" in body
    assert str(run.path.parent) not in card  # names only: no folder of the machine that wrote it


def test_a_folder_not_written_by_the_export_is_refused_and_an_export_replaced_only_when_asked(runs, tmp_path):
    run = runs[0]
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    with pytest.raises(FileExistsError, match="did not write"):
        export_dataset(run, mine)
    with pytest.raises(FileExistsError, match="did not write"):
        export_dataset(run, mine, overwrite=True)
    assert [p.name for p in mine.iterdir()] == ["notes.txt"]
    with pytest.raises(FileExistsError, match="holds the run"):
        export_dataset(run, run.path)
    out = export_dataset(run, tmp_path / "ds", shard_rows=1)
    with pytest.raises(FileExistsError, match="earlier export"):
        export_dataset(run, out)
    export_dataset(run, out, shard_rows=10, overwrite=True)
    assert [p.name for p in (out / "data").iterdir()] == ["train-00000-of-00001.parquet"]  # no stale shard
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds", "mine"]  # no temp folder left


@pytest.mark.parametrize("added", [".git/config", ".gitattributes", "notes.md", "data/extra.parquet"])
def test_export_overwrite_keeps_the_users_files_and_names_them(runs, tmp_path, capsys, added):
    from slalom_core.cli import main

    run = runs[0]
    out = export_dataset(run, tmp_path / "ds", shard_rows=1)
    mine = out / added
    mine.parent.mkdir(parents=True, exist_ok=True)
    mine.write_text("the user's own", encoding="utf-8")
    before = sorted(p.relative_to(out).as_posix() for p in out.rglob("*"))
    with pytest.raises(FileExistsError, match=repr(added)):
        export_dataset(run, out, shard_rows=10, overwrite=True)
    assert main(["export", str(run.path), "--out", str(out), "--overwrite"]) == 2
    assert repr(added) in capsys.readouterr().err
    assert mine.read_text(encoding="utf-8") == "the user's own"
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*")) == before
    mine.unlink()
    if mine.parent != out and not any(mine.parent.iterdir()):
        mine.parent.rmdir()  # an empty folder of the user's is the user's too
    export_dataset(run, out, shard_rows=10, overwrite=True)
    assert [p.name for p in (out / "data").iterdir()] == ["train-00000-of-00001.parquet"]


def test_export_overwrite_never_empties_an_export_marked_by_an_older_version(runs, tmp_path, capsys):
    # The previous release's marker was one line of text: export --overwrite took it to vouch
    # for data/ and deleted the user's files there, exit 0, no word.
    from slalom_core.cli import main

    run = runs[0]
    out = export_dataset(run, tmp_path / "ds", shard_rows=1)
    (out / export_module.DATASET_MARKER).write_text("written by slalom-xai export\n", encoding="utf-8")
    mine = out / "data" / "notes.txt"
    mine.write_text("the user's own", encoding="utf-8")
    before = {p.relative_to(out).as_posix(): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    with pytest.raises(FileExistsError, match=r"does not list the files in it .*older slalom-xai"):
        export_dataset(run, out, shard_rows=10, overwrite=True)
    assert main(["export", str(run.path), "--out", str(out), "--overwrite"]) == 2
    err = capsys.readouterr().err
    assert str(out) in err and "nothing was changed" in err and "give a new folder (--out)" in err
    assert {p.relative_to(out).as_posix(): p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds"]  # no temp folder left


def test_a_killed_export_leaves_no_dataset_and_the_earlier_one_as_it_was(runs, tmp_path, monkeypatch):
    run = runs[0]
    rows = export_module._text_rows
    seen = []

    def dies(*args, **kwargs):
        seen.append(1)
        if len(seen) == 4:  # after a shard was written (shard_rows=1)
            raise KeyboardInterrupt
        return rows(*args, **kwargs)

    monkeypatch.setattr(export_module, "_text_rows", dies)
    with pytest.raises(KeyboardInterrupt):
        export_dataset(run, tmp_path / "ds", shard_rows=1)
    assert list(tmp_path.iterdir()) == []
    monkeypatch.setattr(export_module, "_text_rows", rows)
    out = export_dataset(run, tmp_path / "ds", shard_rows=1)
    before = sorted(p.name for p in (out / "data").iterdir())
    seen.clear()
    monkeypatch.setattr(export_module, "_text_rows", dies)
    with pytest.raises(KeyboardInterrupt):
        export_dataset(run, out, shard_rows=10, overwrite=True)
    assert sorted(p.name for p in (out / "data").iterdir()) == before and len(before) == 5
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds"]


def test_cli_export_parquet_and_csv_and_its_one_line_errors(runs, tmp_path, capsys):
    from slalom_core.cli import main

    run = runs[0]
    assert main(["export", str(run.path), "--out", str(tmp_path / "ds")]) == 0
    assert "load_dataset('parquet'" in capsys.readouterr().out
    assert len(pq.read_table(tmp_path / "ds" / "data")) == 5 and (tmp_path / "ds" / "README.md").is_file()
    assert main(["export", str(run.path), "--out", str(tmp_path / "ds")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("slalom-xai export: error:") and err.count("\n") == 1 and "--overwrite" in err
    assert main(["export", str(run.path), "--out", str(tmp_path / "ds"), "--overwrite"]) == 0
    assert main(["export", str(run.path), "--out", str(tmp_path / "csv"), "--format", "csv"]) == 0
    assert {p.suffix for p in (tmp_path / "csv" / "texts").iterdir()} == {".csv"}


def test_the_card_writes_names_from_the_model_and_the_data_as_text(tmp_path):
    import html as html_lib

    import yaml
    from hostile_names import DATA_NAME, HOSTILE, MODEL_NAME, hostile_run, live_markup

    markdown_it = pytest.importorskip("markdown_it")
    run = hostile_run(tmp_path / "h")
    card = (export_dataset(run, tmp_path / "ds") / "README.md").read_text(encoding="utf-8")
    _, front, body = card.split("---\n", 2)
    meta = yaml.safe_load(front)  # the front matter is still the Hub's YAML
    assert meta["configs"][0]["data_files"][0]["path"] == "data/train-*.parquet"
    assert "\n" not in meta["pretty_name"] and "Injected" in meta["pretty_name"]
    # Rendered as the Hub and GitHub render Markdown (raw HTML allowed).
    html = markdown_it.MarkdownIt("commonmark", {"html": True}).render(body)
    assert live_markup(html) == []
    assert "<u>" not in html and "<script>" not in html and "<a " not in html
    heads = re.findall(r"<h(\d)>(.*?)</h\1>", html, flags=re.S)
    # The title, then the run, columns, load, citation: no heading injected by a name.
    assert [level for level, _ in heads] == ["1", "2", "2", "2", "2"], heads
    # The names are there, as text (a newline read as a space).
    text = " ".join(html_lib.unescape(re.sub(r"<[^>]+>", "", html)).split())
    for name in (*HOSTILE, MODEL_NAME, DATA_NAME):
        assert " ".join(name.split()) in text, name


def test_an_export_of_a_run_with_no_explained_text_is_refused(tmp_path, capsys):
    import slalom_core as sc
    from slalom_core.cli import main

    data = write_jsonl(tmp_path / "c.jsonl", ["", "  "])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = explain_corpus(sc.StringClassifier(lambda b: [[0.0, 1.0] for _ in b]), data, tmp_path / "r", **FAST)
    with pytest.raises(ValueError, match="no explained text"):
        export_dataset(run, tmp_path / "ds")
    assert main(["export", str(run.path), "--out", str(tmp_path / "ds")]) == 2
    assert "no explained text (2 failed" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.jsonl", "r"]  # nothing written, no temp folder


def test_each_row_has_the_reports_status(runs, tmp_path, monkeypatch):
    from slalom_core.corpus.restore import fit_status
    from slalom_core.fit_quality import row_flags

    run = runs[0]
    ds = _load(export_dataset(run, tmp_path / "ds"), tmp_path, monkeypatch)
    texts = run.texts().set_index("id")
    for row in ds:
        flags = row_flags(texts.loc[[row["id"]]].reset_index().to_dict("records"))
        assert row["status"] == ("ok" if not flags else f"fit flagged ({', '.join(f.code for f in flags)})")
    # the same status as the report's index gives each text (one rule)
    assert [fit_status(texts.loc[[i]].reset_index()) for i in ds["id"]] == ds["status"]


def test_the_cards_full_text_gap_has_the_datas_sign(runs, tmp_path, monkeypatch):
    out = export_dataset(runs[0], tmp_path / "ds")
    ds = _load(out, tmp_path, monkeypatch)
    card = (out / "README.md").read_text(encoding="utf-8")
    line = next(x for x in card.splitlines() if x.startswith("| `full_text_gap` |"))
    assert "f(x) - F(x) = model_output - surrogate_output" in line and "F(x) - f(x)" not in line
    gaps = np.array(ds["full_text_gap"])
    assert np.abs(gaps).max() > 1e-3  # inexact fits: the sign is seen
    # the card's formula on the data: f(x) is model_output, F(x) surrogate_output
    np.testing.assert_array_equal(gaps, np.array(ds["model_output"]) - np.array(ds["surrogate_output"]))
