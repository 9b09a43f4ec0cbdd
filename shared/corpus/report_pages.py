"""The pages of a corpus report (:mod:`.report`): the frame of every page, the index's data
files, the word summary, and the frame around each text's view (the index itself:
:mod:`.report_index`).
"""

from __future__ import annotations

import html
import json
import re

__all__ = [
    "rows_script",
    "row_json",
    "text_page",
    "text_nav",
    "words_page",
    "file_name",
    "html_page",
    "run_line",
    "CSP",
]

#: Scripts and images of the report's own folder only; nothing else may be fetched.
CSP = (
    "default-src 'none'; script-src 'unsafe-inline' file: 'self'; style-src 'unsafe-inline'; img-src file: 'self' data:"
)

_STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #111; margin: 1rem 1.5rem; }
h1 { font-size: 1.3rem; margin: 0 0 0.3rem; } .meta { color: #444; font-size: 0.85rem; margin: 0.2rem 0; }
nav a { margin-right: 1rem; } .controls { display: flex; flex-wrap: wrap; gap: 0.5rem 1rem; margin: 0.7rem 0;
  font-size: 0.85rem; align-items: center; }
table { border-collapse: collapse; font-size: 0.82rem; width: 100%; }
th, td { border-bottom: 1px solid #ddd; padding: 0.2rem 0.4rem; text-align: left; vertical-align: top; }
th { background: #f3f3f3; cursor: pointer; user-select: none; white-space: nowrap; position: sticky; top: 0; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tr.failed td { color: #a00; } tr.poor td.status { color: #a60; } td.status { white-space: nowrap; } td.excerpt { color: #333; max-width: 40rem; }
.pager { margin: 0.6rem 0; font-size: 0.85rem; } .pager button { margin-right: 0.4rem; }
tr.flagged td.flag { color: #a00; } td.flag { max-width: 16rem; } .quality { background: #fff8e6; border: 1px solid #e8d28a;
  padding: 0.4rem 0.7rem; font-size: 0.85rem; margin: 0.5rem 0; } #qnote { color: #444; }
code { background: #f3f3f3; padding: 0 0.2rem; }
"""


def html_page(title: str, body: str, head: str = "") -> str:
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style>{head}</head>\n<body>\n{body}\n</body></html>\n"
    )


def row_json(row: list) -> str:
    """One index row as the data files hold it.

    Example:
        >>> row_json(["a", None, "</script>"])
        '["a",null,"<\\\\/script>"]'
    """
    # "</" could end a script element early if the rows were ever inlined; JSON allows "<\/".
    return json.dumps(row, ensure_ascii=False, separators=(",", ":"), allow_nan=False).replace("</", "<\\/")


def rows_script(rows: list[list]) -> str:
    """One data file of the index: its rows appended to ``window.SLX_ROWS``.

    Example:
        >>> rows_script([["a", None]]).startswith("(window.SLX_ROWS")
        True
    """
    return f"(window.SLX_ROWS = window.SLX_ROWS || []).push(...[{','.join(row_json(r) for r in rows)}]);\n"


def file_name(path: object) -> str:
    """The last part of a path, so that a shared report shows no folder of the machine that
    wrote it ("/home/me/data/imdb.jsonl" → "imdb.jsonl"; a Windows path too).

    Example:
        >>> file_name("/home/me/data/imdb.jsonl"), file_name(r"C:\\runs\\head"), file_name(None)
        ('imdb.jsonl', 'head', 'None')
    """
    text = str(path).rstrip("/\\")
    return re.split(r"[/\\]", text)[-1] or text


def run_line(run) -> str:
    m = run.manifest
    model, opts = m.get("model") or {}, m.get("options") or {}
    name = model.get("name") if isinstance(model, dict) else model
    cls = model.get("class", "") if isinstance(model, dict) else ""
    how = f"{opts.get('n_samples')} samples, seed {opts.get('seed')}"
    if m.get("amortized"):  # an amortized run draws no samples: what its head learned from
        trained = m["amortized"].get("trained_on") or {}
        folder = m["amortized"].get("folder")
        head = file_name(folder) if folder else "(not saved)"
        how = f"head {head}, learned from {trained.get('method')} at {trained.get('n_samples')} samples"
    # Names only: a model or data path would show the folders of the machine that wrote the run.
    return (
        f"model {html.escape(file_name(name))} ({html.escape(str(cls))}) · method "
        f"{html.escape(str(opts.get('method')))}, {html.escape(how)} · data "
        f"{html.escape(file_name(m.get('input', {}).get('data')))}"
    )


def text_nav(text_id: str, gold: object, *, depth: int, cut: int = 0) -> str:
    """The line above a text's view: back to the index, the id, the gold label, the cut."""
    up = "../" * depth
    gold_text = "" if gold is None or gold != gold else f" · gold label {html.escape(str(gold))}"
    if cut:
        gold_text += f" · cut to the model's length: the last {int(cut)} positions were not explained (plain text)"
    return (
        f'<nav style="font: 0.9rem system-ui, sans-serif; margin: 0.5rem 1rem">'
        f'<a href="{up}index.html">← all texts</a> <a href="{up}words.html">word summary</a> '
        f"· text {html.escape(str(text_id))}{gold_text}</nav>"
    )


def text_page(body: str, text_id: str) -> str:
    """A text's page: the views' own document (its style sheet and request-free CSP)."""
    from ..views import document

    return document(body, title=f"SLALOM · text {text_id}")


def words_page(summary, min_texts: int, run) -> str:
    """The word summary: the plot (``words.png``) and its table, tokens by mean |contribution|."""
    rows = "".join(
        f"<tr><td>{html.escape(str(tok))}</td><td class=num>{int(r['n_texts'])}</td>"
        + "".join(
            f"<td class=num>{r[f'{s}_mean']:+.3f} ± {0 if r[f'{s}_se'] != r[f'{s}_se'] else r[f'{s}_se']:.3f}</td>"
            for s in ("contribution", "value", "importance", "lin")
        )
        + "</tr>"
        for tok, r in summary.iterrows()
    )
    heads = "".join(
        f"<th>{h}</th>" for h in ("token", "texts", "contribution", "value", "importance", "lin = v·exp(s)")
    )
    plot = '<p><img src="words.png" alt="value against importance per token" style="max-width:100%"></p>'
    body = (
        '<nav><a href="index.html">← all texts</a></nav><h1>Word summary</h1>'
        f'<p class="meta">{run_line(run)}</p>'
        f'<p class="meta">The {len(summary)} tokens of largest mean |contribution| among those seen in at least '
        f'{min_texts} texts (not the most frequent: those are "the" and "."). Each is the mean over the texts it '
        "occurs in ± its standard error; contribution is summed over a token's occurrences in a text. Value and "
        "contribution are log-odds from each text's base value; importance is a log-weight (mean zero in each "
        "text).</p>"
        + (plot if len(summary) else "<p>No token is seen in enough texts.</p>")
        + f"<table><thead><tr>{heads}</tr></thead><tbody>{rows}</tbody></table>"
    )
    return html_page("SLALOM word summary", body)
