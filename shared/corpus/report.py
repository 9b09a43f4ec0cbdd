"""``write_report``: a corpus run as a static site that opens from a plain folder.

    OUT/index.html              the texts: sortable, filterable, searchable by id or word, paged
    OUT/data/rows-NNN.js        the index's rows, a few thousand per file (each under 1 MB)
    OUT/data/words-NNN.js       the word index (:mod:`.report_search`), loaded per word searched
    OUT/words.html, words.png   the word summary: value against importance, ± s.e.
    OUT/texts/NN/N.html         one page per explained text (:func:`slalom_core.views.to_html`)

Every link is relative and nothing is fetched from outside the folder (each page's
Content-Security-Policy allows no remote source), so the folder can be zipped, mailed
or opened from a USB stick. The run is read one chunk at a time: memory holds one
chunk's positions, not the corpus. No file of the site exceeds 2 MB, at any number of texts.

The run of an amortized pipeline (``explain --amortized auto``) shows its quality: each text
flagged or not (and why), audited (with its value Spearman) or in the label set; the audit's
summary heads the index, and a flagged text's page says why it is flagged. An amortized run
without the quality table flags the texts its out-of-distribution check flagged.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from ..files import check_owned, writing_folder
from . import report_index
from . import report_pages as pages
from .report_search import MAX_FILE_BYTES, WordIndex
from .restore import explanation_from_tables, fit_status, json_cell, predicted_class
from .stored import CorpusRun
from .summary import WordStats, plot_words, top_words

__all__ = [
    "write_report",
    "INDEX_COLUMNS",
    "ROWS_PER_FILE",
    "MARKER",
    "natural_id_key",
]

#: The fields of each index row, in order (the page's script reads them by position).
INDEX_COLUMNS = (
    "id",
    "page",
    "predicted",
    "gold",
    "output",
    "gap",
    "r2",
    "positions",
    "truncated",
    "status",
    "excerpt",
    "predicted_index",
    "flagged",
    "flag_reason",
    "audited",
    "audit_rho",
    "in_label_set",
)
#: Index rows per data file, at most (a file is also closed at :data:`ROWS_BYTES`).
ROWS_PER_FILE = 5000
#: Bytes of rows per data file, at most: a corpus of long ids and reasons stays far under 2 MB.
ROWS_BYTES = 1_000_000
#: The file that marks a folder as a report this library wrote and lists the files it wrote:
#: only a folder holding nothing else (or an empty or new one) is ever written over.
MARKER = ".slalom-report"


def natural_id_key(text_id: str) -> tuple:
    """Sort key of a text id: ids of ASCII digits by their number, every other id after
    them as a string ("2" < "10" < "a" < "²"; ``str.isdigit`` would take "²", int() not).

    Example:
        >>> sorted(["10", "b", "2", "²"], key=natural_id_key)
        ['2', '10', 'b', '²']
    """
    if re.fullmatch(r"[0-9]+", text_id):
        return (0, int(text_id), "")
    return (1, 0, text_id)


def _num(x: object, digits: int = 4) -> float | None:
    """A float for JSON (None for NaN), rounded: the index shows three digits."""
    if x is None:
        return None
    x = float(x)
    return None if math.isnan(x) else round(x, digits)


def _index_row(text_id: str, rows: list[dict], page: str | None, run: CorpusRun | None = None, quality=()) -> list:
    """A text's row of the index, from its rows of the texts table (as dicts: a DataFrame row
    costs a millisecond, 25 seconds over 25,000 texts)."""
    first = rows[0]
    gap = max(abs(float(r["full_text_gap"])) for r in rows)
    r2 = first["heldout_r2"]
    cut = int(first["truncated_positions"] or 0)
    status = fit_status(rows)
    predicted, predicted_index = predicted_class(rows, run)
    output = max(r["model_output"] for r in rows)
    text = first["text"] if isinstance(first["text"], str) else ""
    gold = first["gold_label"]
    return [
        text_id,
        page,
        predicted,
        None if gold is None or gold != gold else str(gold),
        _num(output),
        _num(gap),
        _num(r2),
        int(first["n_positions"]),
        cut,
        status,
        " ".join(text.split())[:80],
        predicted_index,
        *(quality or _NO_QUALITY),
    ]


#: (flagged, flag_reason, audited, audit_rho, in_label_set) of a text the run says nothing of.
_NO_QUALITY = (None, None, None, None, None)


def _failure_row(text_id: str, error: str, message: str) -> list:
    message = " ".join(message.split())[:80]
    return [text_id, None, None, None, None, None, None, None, 0, f"failed: {error}", message, None, *_NO_QUALITY]


def _quality_of(run: CorpusRun) -> dict[str, tuple] | None:
    """Each text's (flagged, reason, audited, audit value Spearman, in label set) from the
    pipeline's quality table; None for a run without one."""
    table = run.quality()
    if table is None:
        return None
    need = ["id", "flagged", "flag_reason", "audited", "audit_value_spearman", "in_label_set"]
    missing = [c for c in need if c not in table.columns]
    if missing:
        raise ValueError(f"{run.path / 'quality.parquet'} lacks the column(s) {missing}: rewrite it, or remove it")
    return {
        str(r.id): (
            bool(r.flagged),
            r.flag_reason if isinstance(r.flag_reason, str) and r.flag_reason else None,  # "" or null: none
            bool(r.audited),
            _num(r.audit_value_spearman, 3),
            bool(r.in_label_set),
        )
        for r in table[need].itertuples(index=False)
    }


def _ood_quality(rows: list[dict]) -> tuple:
    """An amortized text's flag from its out-of-distribution check (the texts table's ``ood``)."""
    ood = json_cell(rows[0]["ood"], None)
    if not isinstance(ood, dict):
        return _NO_QUALITY
    why = ood.get("warning")
    return (why is not None, None if why is None else f"out of distribution: {why}", None, None, None)


def _write_words(summary, run: CorpusRun, out: Path, min_texts: int, top: int) -> None:
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    # One rule for the top tokens (top_words), shared with `slalom-xai summarize`; the
    # summary covers every text, gathered one chunk at a time with the pages.
    head = top_words(summary, top=top, min_texts=min_texts)
    if len(head) >= 1:
        fig = plot_words(head, top=top)
        fig.savefig(out / "words.png", dpi=110)
        plt.close(fig)
    (out / "words.html").write_text(pages.words_page(head, min_texts, run), encoding="utf-8")


def write_report(
    run: CorpusRun | str | Path,
    out: str | Path,
    *,
    min_texts: int = 5,
    top: int = 30,
    text_pages: bool = True,
    score: str = "contribution",
) -> Path:
    """Write the static site of a corpus run into ``out``.

    The site is written into a new folder beside ``out`` and renamed into place when it is
    whole, so an earlier report of a larger run leaves no stale page, and a failed one
    leaves the old report as it was. ``out`` must be new, empty, or a report this function
    wrote and nothing else (its marker file :data:`MARKER` lists the files it wrote): a
    folder holding any other file (a ``.git``, notes) is refused, naming them, never
    emptied.

    Args:
        run: a :class:`CorpusRun` or its folder.
        out: the site's folder (created; an earlier report there is replaced).
        min_texts: the word summary keeps tokens seen in at least this many texts.
        top: tokens in the word summary (see :func:`~slalom_core.corpus.summary.top_words`).
        text_pages: write one page per text (False: the index and word summary only,
            e.g. to look at a huge run's index first).
        score: the score coloured first on the text pages (default the additive
            contribution; the value-and-importance view is one click away on each page).

    Returns:
        The path of ``index.html``.

    Raises:
        FileExistsError: ``out`` holds files this function did not write (named), or the run.
        FileNotFoundError: a part of the run's tables is missing (named).

    Example:
        >>> write_report(CorpusRun("runs/imdb"), "runs/imdb-report")  # doctest: +SKIP
        PosixPath('runs/imdb-report/index.html')
    """
    run = run if isinstance(run, CorpusRun) else CorpusRun(run)
    out = Path(out)
    _check_out(out, run)
    note = "written by slalom-xai report; replaced by the next report if it holds nothing else"
    with writing_folder(out, MARKER, note, "slalom-xai report") as new:
        _write_site(run, new, min_texts=min_texts, top=top, text_pages=text_pages, score=score)
    return out / "index.html"


def _check_out(out: Path, run: CorpusRun) -> None:
    """Refuse an ``out`` that is not ours to replace: a file, a folder of other files, or
    one that holds the run itself."""
    if out.exists() and not out.is_dir():
        raise FileExistsError(f"{out} is a file: give a new folder for the report (--out)")
    here, data = out.resolve(), run.path.resolve()
    if here == data or here in data.parents:
        raise FileExistsError(f"{out} holds the run {run.path}: give another folder for the report (--out)")
    check_owned(out, MARKER, "slalom-xai report")


def _write_site(run: CorpusRun, out: Path, *, min_texts: int, top: int, text_pages: bool, score: str) -> None:
    from ..views import to_html

    (out / "data").mkdir(parents=True, exist_ok=True)
    quality = _quality_of(run)
    amortized = (run.manifest.get("options") or {}).get("method") == "amortized" or bool(run.manifest.get("amortized"))
    words, index_words = WordStats(), WordIndex()
    index: list[list] = []
    n_page = 0
    for key, texts in run.parts("texts"):
        positions = None
        if len(texts):
            # Text pages need every chunk's positions; the index alone does without a lost part.
            lost = ", or write the report with --no-text-pages"
            positions = (
                run.part("positions", key, lost) if text_pages else next(run.parts("positions", [key]), (0, None))[1]
            )
        if positions is not None:
            words.add(positions)
            index_words.add(positions)
        # One groupby per chunk: filtering the chunk's positions per text was quadratic in its size.
        by_id = dict(tuple(positions.groupby("id", sort=False))) if text_pages and positions is not None else {}
        records = texts.to_dict("records")
        where: dict[str, list[int]] = {}
        for i, r in enumerate(records):
            where.setdefault(str(r["id"]), []).append(i)
        for text_id, at in where.items():
            recs = [records[i] for i in at]
            q = quality.get(text_id, _NO_QUALITY) if quality is not None else _ood_quality(recs) if amortized else ()
            page = None
            if text_pages:
                rows = texts.iloc[at]
                exp = explanation_from_tables(by_id.get(text_id, positions.iloc[:0]), rows)
                page = f"texts/{n_page // 1000:03d}/{n_page}.html"
                (out / page).parent.mkdir(parents=True, exist_ok=True)
                first = recs[0]
                body = pages.text_nav(text_id, first["gold_label"], depth=2, cut=int(first["truncated_positions"] or 0))
                if q and q[0]:
                    body += report_index.flag_banner(q[1], run.path.name)
                frag = to_html(exp, score=score, full_page=False)
                (out / page).write_text(pages.text_page(body + frag, text_id), encoding="utf-8")
                n_page += 1
            index.append(_index_row(text_id, recs, page, run, q))
    for _, failed in run.parts("failures"):
        index += [_failure_row(r.id, r.error, r.message) for r in failed.itertuples()]
    index.sort(key=lambda r: natural_id_key(r[0]))
    files = [f"data/rows-{k:03d}.js" for k in range(len(_write_rows(out, index)))]
    n_words = index_words.write(out, {r[0]: i for i, r in enumerate(index)})
    _write_words(words.summary(min_texts=1, sort_by="contribution"), run, out, min_texts, top)
    shown = ("flagged", "audited") if quality is not None else ("flagged",) if amortized else ()
    search = {"files": n_words, "cap": index_words.cap}
    page = report_index.index_page(run, files, len(index), INDEX_COLUMNS, quality=shown, search=search)
    (out / "index.html").write_text(page, encoding="utf-8")


def _write_rows(out: Path, index: list[list]) -> list[int]:
    """The index's rows in ``data/rows-NNN.js`` files of at most :data:`ROWS_PER_FILE` rows
    and :data:`ROWS_BYTES` bytes; returns the rows of each file."""
    counts: list[int] = []
    batch: list[list] = []
    size = 0

    def flush() -> None:
        name = out / "data" / f"rows-{len(counts):03d}.js"
        name.write_text(pages.rows_script(batch), encoding="utf-8")
        if name.stat().st_size >= MAX_FILE_BYTES:  # one row alone over the limit: an id of megabytes
            raise ValueError(f"a row of the report's index is over {MAX_FILE_BYTES} bytes (id {batch[0][0][:40]!r}...)")
        counts.append(len(batch))

    for row in index:
        n = len(pages.row_json(row).encode("utf-8")) + 1
        if batch and (len(batch) >= ROWS_PER_FILE or size + n > ROWS_BYTES):
            flush()
            batch, size = [], 0
        batch.append(row)
        size += n
    if batch or not counts:
        flush()
    return counts
