"""``slalom-xai report``: the static site of a corpus run, checked in a real headless browser.

Every local link resolves, nothing is requested from outside the folder, the pages are not
blank, and an index of 25,000 texts stays light (every file a few MB at most) and usable.
"""

import json
import re
from pathlib import Path
from urllib.parse import unquote

import numpy as np
import pytest
from browser import needs_chromium, png_colours, render
from node_page import needs_node, run_index
from slalom_core.corpus import CorpusRun, explain_corpus, store
from slalom_core.corpus.report import write_report
from slalom_core.corpus.rows import ChunkTables
from synthetic_run import index_rows
from tiny_models import bert_tokenizer, tiny_classifier

pytest.importorskip("pyarrow")

ROWS = [
    {"id": f"r{i}", "text": t, "label": i % 2}
    for i, t in enumerate(
        [
            "the movie was great",
            "a boring plot and a bad actor",
            "i loved the film , the story was fun",
            "the worst story , very bad",
            "great fun ! the best film",
            "not good but not awful",
        ]
    )
] + [{"id": "r6", "text": "   ", "label": 0}]  # fails: an empty text


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("report")
    tok = bert_tokenizer(tmp / "tok")
    model = tiny_classifier("bert", tok, initializer_range=0.2)
    data = tmp / "c.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    with pytest.warns(UserWarning):
        run = explain_corpus(model, data, tmp / "run", tok, n_samples=150, chunk_size=3, show_progress=False)
    return write_report(run, tmp / "site", min_texts=2).parent


def _local_links(page: Path, html: str) -> list[Path]:
    links = re.findall(r'(?:href|src)="([^"#?]+)', html)
    assert not [u for u in links if re.match(r"^[a-z]+:", u)], "a report page links outside its folder"
    return [(page.parent / unquote(u)).resolve() for u in links]


def test_every_text_has_a_row_and_every_local_link_resolves(site):
    rows = index_rows(site)
    assert [r[0] for r in rows] == [f"r{i}" for i in range(7)]
    by_id = {r[0]: r for r in rows}
    assert by_id["r6"][9].startswith("failed") and by_id["r6"][1] is None
    assert by_id["r1"][3] == "1" and by_id["r2"][3] == "0"  # gold labels from the data
    pages = [site / r[1] for r in rows if r[1]]
    assert len(pages) == 6 and all(p.exists() for p in pages)
    for page in [site / "index.html", site / "words.html", *pages]:
        for target in _local_links(page, page.read_text(encoding="utf-8")):
            assert target.exists(), f"{page.name} links to a missing {target}"


@needs_chromium
def test_the_index_in_a_browser(site):
    seen = render(site / "index.html", width=1200, height=700)
    assert seen.remote_requests == []
    assert "texts 1–7 of 7 shown (7 in the run)" in seen.dom
    # The script drew the table: each explained text's id links to its page, and resolves.
    hrefs = re.findall(r'<a href="(texts/[^"]+)"', seen.dom)
    assert len(hrefs) == 6 and all((site / h).exists() for h in hrefs)
    assert png_colours(seen.png) > 20  # text, links, rows: not a blank page


@needs_chromium
def test_a_text_page_and_the_word_summary_in_a_browser(site):
    page = site / index_rows(site)[0][1]
    seen = render(page)
    assert seen.remote_requests == [] and "data-importance" in seen.dom and "all texts" in seen.dom
    assert png_colours(seen.png) > 20
    words = render(site / "words.html")
    assert words.remote_requests == [] and "Word summary" in words.dom and png_colours(words.png) > 20


def _synthetic_run(path: Path, n: int, per_chunk: int = 5000, r2_shift: float = 0.0) -> CorpusRun:
    """A run of ``n`` texts written through the store, without a model (no positions); their
    held-out R² uniform on [−r2_shift, 1 − r2_shift)."""
    rng = np.random.default_rng(0)
    path.mkdir()
    (path / "manifest.json").write_text(
        json.dumps({"input": {"n_rows": n, "data": "synthetic"}, "options": {"method": "eff-slope"}, "model": {}})
    )
    words = "the film was a great and boring story with an awful but wonderful ending".split()
    for start in range(0, n, per_chunk):
        ids = [str(i) for i in range(start, min(start + per_chunk, n))]
        tables = ChunkTables()
        t = tables.texts
        for i in ids:
            out = float(rng.normal(0, 3))
            for name, value in dict(
                id=i, explained_class="1", gold_label=str(int(rng.random() < 0.5)), target=None, class_names=None,
                class_index=None, text=" ".join(rng.choice(words, 230)), n_positions=230, n_units=14,
                truncated_positions=int(rng.random() < 0.1) * 40, base_value=0.1, model_output=out,
                surrogate_output=out - 0.2, full_text_gap=float(rng.normal(0, 0.7)), heldout_r2=float(rng.random()) - r2_shift,
                converged=True, model_evaluations=1000, tokens_evaluated=3000, seconds=1.0, model_seconds=0.9,
                fit_seconds=0.1, method="eff-slope", n_samples=1000, seed=1, output="logits", options="{}",
                diagnostics='{"n_outputs": 2}', version="x", ood=None,
            ).items():  # fmt: skip
                t[name].append(value)
        store.write_chunk(path, ids, tables, ["-"] * len(ids))
    return CorpusRun(path)


@needs_chromium
def test_a_negative_held_out_r2_beside_ok_says_what_it_means(tmp_path):
    run = _synthetic_run(tmp_path / "run", 40, r2_shift=0.5)
    site = write_report(run, tmp_path / "site", text_pages=False).parent
    dom = render(site / "index.html", width=1400, height=700).dom
    assert "held-out R² (own design, not in the status)" in dom
    cells = re.findall(
        r'<td class="num r2" title="([^"]*)">([^<]*)</td>(?:<td[^>]*>[^<]*</td>){2}<td class="status">ok<', dom
    )
    negative = [(title, text) for title, text in cells if text.startswith("-")]
    assert negative, "the run has negative held-out R² beside ok"
    for title, text in negative:
        assert text.endswith("below 0: no flag") and "not part of the fit-quality rule" in title
    assert all(not t.startswith("-") and "below 0" not in t for _, t in cells if (_, t) not in negative)


@needs_chromium
def test_an_index_of_25000_texts_stays_light_and_usable(tmp_path):
    run = _synthetic_run(tmp_path / "run", 25_000)
    site = write_report(run, tmp_path / "site", text_pages=False).parent
    sizes = {f.relative_to(site).as_posix(): f.stat().st_size for f in site.rglob("*") if f.is_file()}
    assert max(sizes.values()) < 3_000_000, sizes  # no file heavier than a few MB
    assert sum(s for f, s in sizes.items() if f.startswith("data/")) < 6_000_000
    seen = render(site / "index.html", width=1200, height=700)
    assert seen.remote_requests == []
    assert "texts 1–100 of 25000 shown (25000 in the run)" in seen.dom
    assert seen.dom.count("<tr") == 101  # the header and one page of rows: the document stays small


def _index_ids(site: Path) -> list[str]:
    return [r[0] for r in index_rows(site)]


def test_a_report_never_writes_into_a_folder_it_did_not_write(tmp_path):
    run = _synthetic_run(tmp_path / "run", 4)
    out = tmp_path / "mine"
    out.mkdir()
    (out / "index.html").write_text("my own page", encoding="utf-8")
    with pytest.raises(FileExistsError, match="mine"):
        write_report(run, out, text_pages=False)
    assert (out / "index.html").read_text(encoding="utf-8") == "my own page"
    assert sorted(p.name for p in out.iterdir()) == ["index.html"]


def test_rewriting_our_own_report_leaves_no_stale_page(tmp_path, monkeypatch):
    from slalom_core.corpus import report

    monkeypatch.setattr(report, "ROWS_PER_FILE", 3)
    out = tmp_path / "site"
    write_report(_synthetic_run(tmp_path / "big", 10), out, text_pages=False)
    assert len(list((out / "data").glob("rows-*.js"))) == 4
    write_report(_synthetic_run(tmp_path / "small", 4), out, text_pages=False)
    assert sorted(p.name for p in (out / "data").glob("rows-*.js")) == ["rows-000.js", "rows-001.js"]
    assert _index_ids(out) == ["0", "1", "2", "3"]
    assert not [p for p in tmp_path.iterdir() if p.name not in ("big", "small", "site")]  # nothing left beside


@pytest.mark.parametrize("added", [".git/HEAD", ".gitattributes", "notes.md", "data/mine.txt"])
def test_a_report_over_a_report_keeps_the_users_files_and_names_them(tmp_path, added):
    run, other = _synthetic_run(tmp_path / "run", 4), _synthetic_run(tmp_path / "other", 3)
    out = tmp_path / "site"
    write_report(run, out, text_pages=False)
    mine = out / added
    mine.parent.mkdir(parents=True, exist_ok=True)
    mine.write_text("the user's own", encoding="utf-8")
    before = sorted(p.relative_to(out).as_posix() for p in out.rglob("*"))
    with pytest.raises(FileExistsError, match=re.escape(repr(added))):
        write_report(other, out, text_pages=False)
    assert mine.read_text(encoding="utf-8") == "the user's own"
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*")) == before  # nothing else touched
    assert _index_ids(out) == ["0", "1", "2", "3"]
    mine.unlink()
    if mine.parent != out and not any(mine.parent.iterdir()):
        mine.parent.rmdir()  # an empty folder of the user's is the user's too
    write_report(other, out, text_pages=False)  # only its own files: replaced
    assert _index_ids(out) == ["0", "1", "2"]


@pytest.mark.parametrize("marker", ["one line", "not a list", "not text"])
def test_a_report_marked_by_an_older_version_is_never_emptied(tmp_path, marker):
    # An older release's marker (one line of text) vouched for every name a report writes:
    # the user's files under data/ and texts/ were deleted with the folder.
    from slalom_core.corpus.report import MARKER

    out = tmp_path / "site"
    write_report(_synthetic_run(tmp_path / "run", 4), out, text_pages=False)
    content = {
        "one line": b"written by slalom-xai report; the folder is replaced by the next report\n",
        "not a list": b'{"note": "a marker", "files": "index.html"}',
        "not text": b"\xff\xfe",
    }[marker]
    (out / MARKER).write_bytes(content)
    (out / "data" / "mine.csv").write_text("the user's own", encoding="utf-8")
    before = sorted(p.relative_to(out).as_posix() for p in out.rglob("*"))
    message = (
        rf"{re.escape(str(out))} holds a marker '\.slalom-report' that does not list the files.*nothing was changed"
    )
    with pytest.raises(FileExistsError, match=message):
        write_report(_synthetic_run(tmp_path / "run2", 2), out, text_pages=False)
    assert (out / "data" / "mine.csv").read_text(encoding="utf-8") == "the user's own"
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*")) == before  # nothing touched
    assert (out / MARKER).read_bytes() == content
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run", "run2", "site"]  # no temp folder left


def test_ids_sort_in_natural_order_and_a_superscript_digit_is_a_string(tmp_path):
    run = _synthetic_run(tmp_path / "run", 5)
    # Rename the ids in place: "²" passes str.isdigit() but int() refuses it.
    import pyarrow.parquet as pq

    part = next((tmp_path / "run" / "texts").glob("part-*.parquet"))
    table = pq.read_table(part).to_pandas()
    table["id"] = ["10", "²", "2", "b", "a"]
    table.to_parquet(part)
    site = write_report(run, tmp_path / "site", text_pages=False).parent
    assert _index_ids(site) == ["2", "10", "a", "b", "²"]


def test_a_run_missing_a_positions_part_names_it(site, tmp_path):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(site.parent / "run", run)
    part = sorted((run / "positions").glob("part-*.parquet"))[1]
    part.unlink()
    with pytest.raises(FileNotFoundError, match=part.name):
        write_report(CorpusRun(run), tmp_path / "site")


def test_the_index_names_classes_and_holds_no_absolute_path(site):
    rows = index_rows(site)
    # The tiny BERT's config names its classes LABEL_0 and LABEL_1: shown, not 0/1.
    assert {r[2] for r in rows if r[2] is not None} <= {"LABEL_0", "LABEL_1"}
    assert any(r[2] is not None for r in rows)
    root = str(site.parent)
    for f in site.rglob("*"):
        if f.is_file() and f.suffix in (".html", ".js"):
            assert root not in f.read_text(encoding="utf-8"), f"{f.name} holds an absolute path"
    assert "c.jsonl" in (site / "index.html").read_text(encoding="utf-8")


def test_text_pages_rank_their_tokens(site):
    page = (site / index_rows(site)[0][1]).read_text(encoding="utf-8")
    assert 'class="slx-top"' in page and "<table" in page


def test_words_page_picture_and_summarize_pick_the_same_top_tokens(site, tmp_path, monkeypatch):
    import shutil

    from slalom_core import corpus
    from slalom_core.cli.command import main
    from slalom_core.corpus import report, top_words

    run = tmp_path / "run"
    shutil.copytree(site.parent / "run", run)
    pictured = {}

    def capture(name):
        real = corpus.summary.plot_words

        def plot(summary, **kw):
            pictured[name] = list(summary.head(kw.get("top", 25)).index)
            return real(summary, **kw)

        return plot

    monkeypatch.setattr(report, "plot_words", capture("report"))
    monkeypatch.setattr(corpus, "plot_words", capture("summarize"))
    write_report(CorpusRun(run), tmp_path / "site", min_texts=2, top=4, text_pages=False)
    assert main(["summarize", str(run), "--min-texts", "2", "--top", "4"]) == 0
    want = list(top_words(CorpusRun(run), top=4, min_texts=2).index)
    assert len(want) == 4 and pictured == {"report": want, "summarize": want}
    table = (tmp_path / "site" / "words.html").read_text(encoding="utf-8")
    assert re.findall(r"<tr><td>([^<]*)</td>", table) == want
    # A token seen in fewer texts than the minimum never enters, however large its mean.
    counts = corpus.word_summary(CorpusRun(run), min_texts=1)["n_texts"]
    assert all(counts[t] >= 2 for t in want) and (counts < 2).any()


def test_a_report_never_replaces_the_folder_that_holds_its_run(tmp_path):
    from slalom_core.corpus.report import MARKER

    out = tmp_path / "site"
    out.mkdir()
    (out / MARKER).write_text("", encoding="utf-8")  # even a folder marked as a report
    run = _synthetic_run(out / "run", 3)
    for target in (out, out / "run"):
        with pytest.raises(FileExistsError, match="holds the run"):
            write_report(run, target, text_pages=False)
    assert (out / "run" / "manifest.json").exists()


# -- names that are code somewhere (issue 48) --------------------------------------------------


def _words_run(path: Path, texts: list[str]) -> CorpusRun:
    import slalom_core as sc

    def f(texts):
        return [[0.0, float(t.count("great")) - t.count("constructor")] for t in texts]

    path.mkdir(parents=True)
    data = path / "words.jsonl"
    data.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    return explain_corpus(sc.StringClassifier(f), data, path / "run", n_samples=40, show_progress=False)


@needs_node
@pytest.mark.parametrize(
    "texts, searches",
    [
        # Words no text holds, named like a property every object has.
        (["a great film", "great fun"], [("constructor", []), ("__proto__", []), ("great", ["0", "1"])]),
        # The index holds "__proto__" (an object literal would make its entry every object's prototype).
        (
            ["a great film", "the __proto__ of a constructor", "hasOwnProperty is great"],
            [
                ("__proto__", ["1"]),
                ("constructor", ["1"]),
                ("hasOwnProperty", ["2"]),
                ("length", []),
                ("push", []),
                ("valueOf", []),
                ("__proto__ great", []),
            ],
        ),
    ],
)
def test_the_word_search_finds_words_named_like_the_prototypes_properties(tmp_path, texts, searches):
    site = write_report(_words_run(tmp_path / "w", texts), tmp_path / "site", text_pages=False).parent
    for word, ids in searches:
        shown = run_index(site, "#word=" + word)
        assert shown["error"] is None, (word, shown["error"])
        assert shown["ids"] == ids, word
        if " " not in word:
            assert f"\u201c{word.lower()}\u201d is in {len(ids)} text" in shown["note"], word


def test_names_from_the_model_and_the_data_stay_text_in_every_page(tmp_path):
    from hostile_names import HOSTILE, hostile_run, live_markup

    run = hostile_run(tmp_path / "h")
    assert len(run.texts()) >= 3
    site = write_report(run, tmp_path / "site", min_texts=1).parent
    pages = sorted(site.rglob("*.html"))
    assert len(pages) >= 5  # the index, the word summary, the text pages
    for page in pages:
        html = page.read_text(encoding="utf-8")
        assert live_markup(html) == [], page.name
        assert "Injected <u>" not in html and "<script>alert" not in html, page.name
    # The names are there, as text.
    index = (site / "index.html").read_text(encoding="utf-8")
    assert "&lt;img src=m onerror=" in index
    rows = "".join(p.read_text(encoding="utf-8") for p in (site / "data").glob("rows-*.js"))
    assert HOSTILE[0].replace("</", "<\\/") in rows  # data for textContent, never markup


def _all_failed_run(path: Path) -> CorpusRun:
    import warnings

    import slalom_core as sc

    path.mkdir(parents=True)
    data = path / "d.jsonl"
    data.write_text("".join(json.dumps({"text": t}) + "\n" for t in ["", "   ", "\t"]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # every text fails: said by the run, not this test's subject
        return explain_corpus(
            sc.StringClassifier(lambda b: [[0.0, 1.0] for _ in b]),
            data,
            path / "run",
            n_samples=40,
            show_progress=False,
        )


def test_summarize_and_report_of_a_run_whose_every_text_failed(tmp_path, capsys):
    import pandas as pd
    from slalom_core.cli.command import main
    from slalom_core.corpus import plot_words, word_summary

    run = _all_failed_run(tmp_path / "f")
    assert len(run.texts()) == 0 and len(run.failures()) == 3
    summary = word_summary(run)
    assert len(summary) == 0 and summary["value_mean"].dtype == "float64" and summary["n_texts"].dtype == "int64"
    with pytest.raises(ValueError, match="nothing to plot"):
        plot_words(summary)
    assert main(["summarize", str(run.path)]) == 0
    said = capsys.readouterr()
    assert "no text of the run was explained (3 failed" in said.out and said.err == ""
    assert len(pd.read_csv(run.path / "words.csv")) == 0 and not (run.path / "words.png").exists()
    # Explained texts, but no token in --min-texts of them: said too, not a crash.
    assert main(["summarize", str(_synthetic_run(tmp_path / "few", 2).path), "--min-texts", "5"]) == 0
    assert "no token occurs in at least 5 of its 2 explained texts" in capsys.readouterr().out
    index = write_report(run, tmp_path / "site")
    assert "3 texts" in index.read_text(encoding="utf-8")
