"""The report at scale (issue 43): synthetic runs of thousands of texts, no file over 2 MB,
a search by id and by word that finds the right texts, the word summary of the whole run
read one chunk at a time, and an amortized pipeline's quality on the index and the pages.

The 25,000-text site runs when SLX_SCALE_TESTS=1 (about a minute and a half on a busy
2-core machine); the default suite checks 5,000 texts and that the bytes per row keep
25,000 under the limit.
"""

import dataclasses
import html
import json
import os
import re
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from browser import needs_chromium, render
from slalom_core.corpus import CorpusRun, word_summary
from slalom_core.corpus import report as report_module
from slalom_core.corpus.report import INDEX_COLUMNS, ROWS_BYTES, ROWS_PER_FILE, write_report
from slalom_core.corpus.report_search import MAX_FILE_BYTES, POSTINGS_CAP, fnv1a, word_key
from synthetic_run import NEGATIVE, POSITIVE, index_rows, synthetic_run

pytest.importorskip("pyarrow")
COL = {c: i for i, c in enumerate(INDEX_COLUMNS)}


def _words(site: Path) -> dict[str, list]:
    table = {}
    for f in sorted((site / "data").glob("words-*.js")):
        text = f.read_text(encoding="utf-8")
        table.update(dict(json.loads(text[text.index(", ") + 2 : text.rindex(");")])))
    return table


def _sizes(site: Path) -> dict[str, int]:
    return {f.relative_to(site).as_posix(): f.stat().st_size for f in site.rglob("*") if f.is_file()}


def _truth(run: CorpusRun) -> pd.DataFrame:
    """(key, id) -> |contribution summed over the text's tokens of that key|, from the whole table."""
    pos = run.positions()
    pos = pos.assign(key=pos["token"].map(word_key))
    return pos[pos["key"] != ""].groupby(["key", "id"])["contribution"].sum().abs().rename("weight").reset_index()


# -- the synthetic run ------------------------------------------------------------------


def test_a_synthetic_run_reads_like_a_run(tmp_path):
    run = synthetic_run(tmp_path / "run", 300, chunk_size=64, quality=True, failures=2)
    assert run.complete and run.n_done == 302
    texts = run.texts()
    assert len(texts) == 300 and texts["n_positions"].between(50, 400).all()
    exp = run.explanation("17")
    # Stored scores are the library's: contributions and the base value add up to the
    # surrogate's output (1e-9: float64 sums of ~400 terms).
    row = texts[texts["id"] == "17"].iloc[0]
    # tol: float64 rounding of a sum of ~400 terms
    assert abs(float(exp.contribution.sum()) + row["base_value"] - row["surrogate_output"]) < 1e-9
    quality = run.quality()
    assert list(quality.columns) == [
        "id", "in_label_set", "audited", "audit_value_spearman", "audit_importance_spearman", "ood", "poor_audit",
        "flagged", "flag_reason",
    ]  # fmt: skip
    assert (quality["flagged"] == (quality["ood"] | quality["poor_audit"])).all()
    assert not (quality["audited"] & quality["in_label_set"]).any()
    assert quality["ood"].any() and quality["poor_audit"].any()  # both reasons occur
    assert (quality["flag_reason"] != "").equals(quality["flagged"])
    assert run.manifest["auto"]["flags"]["n_flagged"] == int(quality["flagged"].sum())


def test_a_synthetic_run_of_25000_texts_is_quick_to_write(tmp_path):
    if os.environ.get("SLX_SCALE_TESTS") != "1":
        pytest.skip("set SLX_SCALE_TESTS=1 to write 25,000 texts (about 40 s on a busy 2-core machine)")
    t0 = time.perf_counter()
    run = synthetic_run(tmp_path / "run", 25_000, quality=True)
    took = time.perf_counter() - t0
    assert run.n_done == 25_000 and took < 120, took


# -- the word summary, one chunk at a time ------------------------------------------------


def test_the_word_summary_reads_one_chunk_at_a_time_and_equals_the_whole_tables(tmp_path, monkeypatch):
    run = synthetic_run(tmp_path / "run", 400, chunk_size=50)
    whole = word_summary(run.positions(), sort_by="contribution")  # one table: one "chunk"

    def refuse(self):
        raise AssertionError("word_summary read every position at once")

    monkeypatch.setattr(CorpusRun, "positions", refuse)
    streamed = word_summary(run, sort_by="contribution")
    assert list(streamed.index) == list(whole.index) and list(streamed.columns) == list(whole.columns)
    assert (streamed["n_texts"] == whole["n_texts"]).all() and streamed["n_texts"].sum() > 10_000
    # Means and spreads combined chunk by chunk equal pandas' over the whole table up to
    # float64 rounding of sums over a few hundred texts (1e-9 relative is 10^6 ulps).
    np.testing.assert_allclose(streamed.to_numpy(float), whole.to_numpy(float), rtol=1e-9, atol=1e-12)
    # The synthetic words of known sign come out with it.
    assert (streamed.loc[list(POSITIVE), "value_mean"] > 1).all()
    assert (streamed.loc[list(NEGATIVE), "value_mean"] < -1).all()


# -- size -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    """A 5,000-text amortized pipeline's run and its site (index and word index, no pages)."""
    tmp = tmp_path_factory.mktemp("big")
    run = synthetic_run(tmp / "run", 5000, quality=True, failures=3)
    site = write_report(run, tmp / "site", text_pages=False).parent
    return run, site


def test_no_file_of_the_site_is_over_2mb_and_25000_texts_stay_under(big):
    run, site = big
    sizes = _sizes(site)
    assert max(sizes.values()) < MAX_FILE_BYTES, sorted(sizes.items(), key=lambda x: -x[1])[:3]
    rows = index_rows(site)
    assert len(rows) == 5003
    # Each rows file is cut at ROWS_BYTES (or ROWS_PER_FILE rows), whatever the number of
    # texts: at 25,000 there are more files, none larger. Their rows here are ~180 bytes.
    per_row = sum(s for f, s in sizes.items() if f.startswith("data/rows-")) / len(rows)
    assert 100 < per_row and min(ROWS_PER_FILE * per_row, ROWS_BYTES) + 1000 < MAX_FILE_BYTES
    # The word index is spread over files by the size of its postings, which a word keeps
    # to POSTINGS_CAP texts: 5x the texts cannot make a file more than 5x larger, and the
    # writer adds files until each is under the limit.
    words = {f: s for f, s in sizes.items() if f.startswith("data/words-")}
    assert max(words.values()) < MAX_FILE_BYTES / 2
    assert sizes["index.html"] < 100_000 and sizes["words.html"] < 100_000


def test_rows_files_are_cut_by_bytes(tmp_path, monkeypatch):
    monkeypatch.setattr(report_module, "ROWS_BYTES", 3_000)  # long ids or reasons reach 1 MB so
    run = synthetic_run(tmp_path / "run", 60, chunk_size=30)
    site = write_report(run, tmp_path / "site", text_pages=False).parent
    sizes = {f: s for f, s in _sizes(site).items() if f.startswith("data/rows-")}
    # A file closes before the row that would take it over (~170 bytes of row, plus the call around them).
    assert len(sizes) >= 3 and max(sizes.values()) < 3_000 + 100
    assert [r[0] for r in index_rows(site)] == [str(i) for i in range(60)]  # every row, once, in order


@pytest.mark.slow
@needs_chromium
def test_the_site_of_25000_texts(tmp_path):
    if os.environ.get("SLX_SCALE_TESTS") != "1":
        pytest.skip("set SLX_SCALE_TESTS=1 for the 25,000-text site (about 90 s on a busy 2-core machine)")
    run = synthetic_run(tmp_path / "run", 25_000, quality=True)
    t0 = time.perf_counter()
    site = write_report(run, tmp_path / "site", text_pages=False).parent
    took = time.perf_counter() - t0
    sizes = _sizes(site)
    print(f"\n25,000 texts: report {took:.1f} s, {len(sizes)} files, largest {max(sizes.values())} bytes")
    assert max(sizes.values()) < MAX_FILE_BYTES
    seen = render(site / "index.html", width=1200, height=700)
    assert "texts 1–100 of 25000 shown (25000 in the run)" in seen.dom
    seen = render_url(site / "index.html", "#word=wonderful")
    assert f"the {POSTINGS_CAP} where it contributes most" in seen and f"of {POSTINGS_CAP} shown" in seen


# -- search -----------------------------------------------------------------------------


def test_the_word_index_lists_the_texts_that_hold_each_word(big):
    run, site = big
    rows, words = index_rows(site), _words(site)
    truth = _truth(run)
    counts = truth.groupby("key").size()
    assert set(words) == set(counts.index)
    for key in ["wonderful", "ing", ".", *[k for k in counts.index if counts[k] < 30][:20]]:
        n, listed = words[key]
        assert n == counts[key], key
        ids = [rows[i][0] for i in listed]
        mine = truth[truth["key"] == key].sort_values(["weight", "id"], ascending=[False, True])
        if n <= POSTINGS_CAP:
            assert sorted(ids) == sorted(mine["id"]), key
        else:  # the cap: the texts where the word's |contribution| is largest, largest first
            assert len(ids) == POSTINGS_CAP
            got = truth.set_index(["key", "id"]).loc[[(key, i) for i in ids], "weight"].to_numpy()
            assert (np.diff(got) <= 0).all() and got[-1] >= mine["weight"].iloc[POSTINGS_CAP]
    # Every file holds the words whose hash says so (the page looks a word up that way).
    n_files = len(list((site / "data").glob("words-*.js")))
    for f in (site / "data").glob("words-*.js"):
        k = int(re.search(r"words-(\d+)", f.name).group(1))
        text = f.read_text(encoding="utf-8")
        assert all(fnv1a(w) % n_files == k for w, _ in json.loads(text[text.index(", ") + 2 : text.rindex(");")]))


def test_word_keys_drop_piece_marks_and_case():
    assert word_key("##ing") == "ing" and word_key("\u0120Great") == "great" and word_key("\u2581Film") == "film"
    assert word_key("É") == "é" and word_key("e\u0301") == "é"  # NFC: one key for both spellings
    # FNV-1a's published test vectors (the page's script computes the same hash).
    assert fnv1a("") == 0x811C9DC5 and fnv1a("a") == 0xE40C292C and fnv1a("foobar") == 0xBF9CF968


def render_url(page: Path, fragment: str) -> str:
    """The DOM of ``page`` opened with a URL fragment (the index reads its search from it)."""
    import subprocess
    import tempfile

    from browser import CHROMIUM, FLAGS

    with tempfile.TemporaryDirectory(prefix="slx-chromium-") as tmp:
        cmd = [CHROMIUM, *FLAGS, f"--user-data-dir={tmp}", "--dump-dom", page.resolve().as_uri() + fragment]
        done = subprocess.run(cmd, capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    return done.stdout.decode("utf-8")


def _shown_ids(dom: str) -> list[str]:
    return re.findall(r'<tr[^>]*><td>(?:<a href="[^"]*">)?([^<]*)<', dom.split('id="rows"', 1)[1])


@needs_chromium
def test_search_by_id_and_by_word_in_a_browser(big):
    run, site = big
    rows = index_rows(site)
    dom = render_url(site / "index.html", "#id=123")
    want = [r[0] for r in rows if r[0].startswith("123")]
    assert f"of {len(want)} shown (5003 in the run)" in dom and _shown_ids(dom) == want
    # A rare word: every text that holds it; any case, and a continuation piece by its letters.
    truth = _truth(run)
    counts = truth.groupby("key").size()
    rare = next(k for k in counts.index if 3 <= counts[k] <= 50 and k.isalpha())
    dom = render_url(site / "index.html", "#word=" + rare.upper())
    want = sorted(truth.loc[truth["key"] == rare, "id"], key=int)
    assert f"of {len(want)} shown" in dom and _shown_ids(dom) == want
    assert f"“{rare}” is in {len(want)} texts" in dom
    dom = render_url(site / "index.html", "#word=%23%23ness")  # "##ness" as typed finds "ness" too
    assert f"the {POSTINGS_CAP} where it contributes most" in dom and f"of {POSTINGS_CAP} shown" in dom
    # Two words: the texts holding both (among the listed ones).
    dom = render_url(site / "index.html", f"#word=wonderful%20{rare}")
    both = set(truth.loc[truth["key"] == rare, "id"]) & {rows[i][0] for i in _words(site)["wonderful"][1]}
    assert f"of {len(both)} shown" in dom or (not both and "no text matches" in dom)
    # A word no text holds.
    dom = render_url(site / "index.html", "#word=zzzqqq")
    assert "no text matches" in dom and "“zzzqqq” is in 0 texts" in dom
    ms = float(re.search(r'id="count" data-ms="([\d.]+)"', dom).group(1))
    print(f"\nfilter and draw over 5,003 rows: {ms} ms")


# -- quality ----------------------------------------------------------------------------


def test_the_index_shows_the_pipelines_quality(big):
    run, site = big
    quality = run.quality().set_index("id")
    rows = {r[0]: r for r in index_rows(site)}
    for text_id, q in quality.iterrows():
        r = rows[text_id]
        assert r[COL["flagged"]] is bool(q["flagged"]) and r[COL["audited"]] is bool(q["audited"])
        assert r[COL["in_label_set"]] is bool(q["in_label_set"])
        assert (r[COL["flag_reason"]] or "") == q["flag_reason"]
        if q["audited"]:  # rounded to three digits for the table
            # tol: half a unit of the third digit the index rounds to
            assert abs(r[COL["audit_rho"]] - q["audit_value_spearman"]) <= 5e-4
    assert rows["fail-0"][COL["flagged"]] is None  # a failed text has no quality
    page = (site / "index.html").read_text(encoding="utf-8")
    audit = run.manifest["auto"]["audit"]
    said = f"Audit: {audit['n_audited']} of the {audit['n_texts']} texts in the run"  # what the audit covered
    assert said in page and f"value mean {audit['value_spearman']['mean']:.2f}" in page
    assert f"Flagged: {run.manifest['auto']['flags']['n_flagged']} texts" in page
    assert "slalom-xai refit run" in page and ">flagged (why)</th>" in page and ">audit ρ value</th>" in page


@needs_chromium
def test_the_quality_filter_in_a_browser(big):
    run, site = big
    n = int(run.quality()["flagged"].sum())
    dom = render_url(site / "index.html", "#flag=flagged")
    assert f"of {n} shown" in dom and 'class="flag" title="' in dom
    audited = int(run.quality()["audited"].sum())
    assert f"of {audited} shown" in render_url(site / "index.html", "#flag=audited")


def test_flagged_pages_carry_a_banner_and_an_ordinary_run_no_quality(tmp_path):
    run = synthetic_run(tmp_path / "auto", 40, chunk_size=20, quality=True)
    t0 = time.perf_counter()
    site = write_report(run, tmp_path / "site").parent
    per_page = (time.perf_counter() - t0) / 40
    print(f"\n{per_page * 1000:.0f} ms per text page (with the index; a busy 2-core machine)")
    quality = run.quality().set_index("id")
    rows = index_rows(site)
    flagged = [r for r in rows if r[COL["flagged"]]]
    assert flagged and len(flagged) < len(rows)
    for r in rows:
        page = (site / r[COL["page"]]).read_text(encoding="utf-8")
        if r[COL["flagged"]]:
            assert "⚑ Flagged: " in page and html.escape(quality.loc[r[0], "flag_reason"]) in page
        else:
            assert "⚑ Flagged" not in page
    # An amortized run without the quality table: the OOD check flags.
    plain = synthetic_run(tmp_path / "amortized", 60, chunk_size=30, amortized=True)
    site = write_report(plain, tmp_path / "site2", text_pages=False).parent
    ood = {t: json.loads(o)["warning"] for t, o in zip(plain.texts()["id"], plain.texts()["ood"])}
    rows = index_rows(site)
    assert any(ood.values()) and not all(ood.values())
    for r in rows:
        assert r[COL["flagged"]] is (ood[r[0]] is not None)
        assert r[COL["flag_reason"]] == (None if ood[r[0]] is None else f"out of distribution: {ood[r[0]]}")
        assert r[COL["audited"]] is None
    page = (site / "index.html").read_text(encoding="utf-8")
    assert ">flagged (why)</th>" in page and ">audit ρ value</th>" not in page
    # An ordinary run: no quality at all.
    site = write_report(synthetic_run(tmp_path / "plain", 30), tmp_path / "site3", text_pages=False).parent
    assert all(r[COL["flagged"]] is None for r in index_rows(site))
    page = (site / "index.html").read_text(encoding="utf-8")
    assert "flagged (why)" not in page and "refit" not in page


# -- pages ------------------------------------------------------------------------------


def test_a_page_computes_each_score_once(tmp_path, monkeypatch):
    from slalom_core import scores
    from slalom_core.views import describe, to_html

    run = synthetic_run(tmp_path / "run", 3)
    exp = run.explanation("1")
    calls = []
    real = scores.SCORES["shapley"].compute

    def counted(v, s, **law):
        calls.append(1)
        return real(v, s, **law)

    monkeypatch.setitem(scores.SCORES, "shapley", dataclasses.replace(scores.SCORES["shapley"], compute=counted))
    to_html(exp)
    assert len(calls) == 1  # seven before: one per section of the page
    with describe.scores_once():
        a = describe.position_scores(exp, None)
        assert describe.position_scores(exp, None)["value"] is a["value"]
        with pytest.raises(ValueError):
            a["value"][0] = 1.0  # read-only: no section changes another's numbers
    assert describe.position_scores(exp, None)["value"] is not a["value"]  # forgotten after the block
