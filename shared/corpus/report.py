"""``write_report``: a corpus run as a static site that opens from a plain folder.

    OUT/index.html              the texts: sortable, filterable, paged in the browser
    OUT/data/rows-NNN.js        the index's rows, a few thousand per file
    OUT/words.html, words.png   the word summary: value against importance, ± s.e.
    OUT/texts/NN/N.html         one two-channel page per explained text

Every link is relative and nothing is fetched from outside the folder (each page's
Content-Security-Policy allows no remote source), so the folder can be zipped, mailed
or opened from a USB stick. The run is read one chunk at a time: memory holds one
chunk's positions, not the corpus.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from . import report_pages as pages
from .restore import explanation_from_tables, json_cell
from .stored import CorpusRun
from .summary import plot_words, word_summary

__all__ = ["write_report", "INDEX_COLUMNS", "ROWS_PER_FILE"]

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
)
#: Index rows per data file (each well under a megabyte for texts of any length).
ROWS_PER_FILE = 5000
#: Poor fit: the thresholds the run's own warning uses.
POOR_R2, POOR_GAP = 0.5, 1.0


def _num(x: object, digits: int = 4) -> float | None:
    """A float for JSON (None for NaN), rounded: the index shows three digits."""
    if x is None:
        return None
    x = float(x)
    return None if math.isnan(x) else round(x, digits)


def _predicted(rows) -> str | None:
    """The model's predicted class from a text's rows of the texts table (outputs are
    log-odds, or centred logits of a joint fit), as the per-text page states it."""
    first = rows.iloc[0]
    names = json_cell(first["class_names"], None)
    out = rows["model_output"].to_numpy(dtype=np.float64)
    if names is not None and len(rows) > 1 and set(rows["explained_class"]) == set(names):
        return str(rows["explained_class"].iloc[int(np.argmax(out))])
    n_outputs = json_cell(first["diagnostics"], {}).get("n_outputs")
    if len(rows) != 1 or n_outputs != 2:
        return None
    target = first["target"]
    explained = 1 if target is None or target != target else int(target)
    k = explained if out[0] >= 0 else 1 - explained
    return str(names[k]) if names is not None and k < len(names) else str(k)


def _index_row(text_id: str, rows, page: str | None) -> list:
    first = rows.iloc[0]
    gap = rows["full_text_gap"].abs().max()
    r2 = first["heldout_r2"]
    cut = int(first["truncated_positions"] or 0)
    poor = (r2 == r2 and r2 < POOR_R2) or gap > POOR_GAP or first["converged"] is False
    status = "poor fit" if poor else "ok"
    predicted = _predicted(rows)
    output = rows["model_output"].max() if len(rows) > 1 else first["model_output"]
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
    ]


def _failure_row(text_id: str, error: str, message: str) -> list:
    return [text_id, None, None, None, None, None, None, None, 0, f"failed: {error}", " ".join(message.split())[:80]]


def _write_words(run: CorpusRun, out: Path, min_texts: int, top: int) -> None:
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    summary = word_summary(run, min_texts=min_texts, sort_by="contribution")
    if len(summary) >= 1:
        fig = plot_words(summary, top=top)
        fig.savefig(out / "words.png", dpi=110)
        plt.close(fig)
    (out / "words.html").write_text(pages.words_page(summary.head(top), min_texts, run), encoding="utf-8")


def write_report(
    run: CorpusRun | str | Path,
    out: str | Path,
    *,
    min_texts: int = 5,
    top: int = 30,
    text_pages: bool = True,
    score: str = "value",
) -> Path:
    """Write the static site of a corpus run into ``out``.

    Args:
        run: a :class:`CorpusRun` or its folder.
        out: the site's folder (created; files of an earlier report are overwritten).
        min_texts: the word summary keeps tokens seen in at least this many texts.
        top: tokens in the word summary (those of largest mean |contribution|).
        text_pages: write one page per text (False: the index and word summary only,
            e.g. to look at a huge run's index first).
        score: the score coloured on the text pages (importance is the second channel).

    Returns:
        The path of ``index.html``.

    Example:
        >>> write_report(CorpusRun("runs/imdb"), "runs/imdb-report")  # doctest: +SKIP
        PosixPath('runs/imdb-report/index.html')
    """
    from ..views import to_html

    run = run if isinstance(run, CorpusRun) else CorpusRun(run)
    out = Path(out)
    (out / "data").mkdir(parents=True, exist_ok=True)
    index: list[list] = []
    n_page = 0
    for key, texts in run.parts("texts"):
        positions = next(run.parts("positions", [key]))[1] if text_pages and len(texts) else None
        for text_id, rows in texts.groupby("id", sort=False):
            page = None
            if positions is not None:
                exp = explanation_from_tables(positions[positions["id"] == text_id], rows)
                page = f"texts/{n_page // 1000:03d}/{n_page}.html"
                (out / page).parent.mkdir(parents=True, exist_ok=True)
                first = rows.iloc[0]
                body = pages.text_nav(text_id, first["gold_label"], depth=2, cut=int(first["truncated_positions"] or 0))
                frag = to_html(exp, score=score, full_page=False)
                (out / page).write_text(pages.text_page(body + frag, text_id), encoding="utf-8")
                n_page += 1
            index.append(_index_row(str(text_id), rows, page))
    for _, failed in run.parts("failures"):
        index += [_failure_row(r.id, r.error, r.message) for r in failed.itertuples()]
    # Row-number ids as numbers, other ids as strings: the order of the data for both.
    index.sort(key=lambda r: (0, int(r[0]), "") if r[0].isdigit() else (1, 0, r[0]))
    files = []
    for start in range(0, max(len(index), 1), ROWS_PER_FILE):
        name = f"data/rows-{start // ROWS_PER_FILE:03d}.js"
        (out / name).write_text(pages.rows_script(index[start : start + ROWS_PER_FILE]), encoding="utf-8")
        files.append(name)
    _write_words(run, out, min_texts, top)
    (out / "index.html").write_text(pages.index_page(run, files, len(index), INDEX_COLUMNS), encoding="utf-8")
    return out / "index.html"
