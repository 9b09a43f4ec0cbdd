"""The pages of a corpus report (:mod:`.report`): the index with its script, the word
summary, and the frame around each text's view.

The index is one small HTML file; its rows come in ``data/rows-NNN.js`` files loaded by
``<script src>``, which a browser reads from a plain folder (``fetch`` of a ``file://``
URL is refused). The script keeps every row in memory (about 150 bytes each) and draws one
page of the table at a time, so 25,000 texts sort and filter at once and the document
stays small.
"""

from __future__ import annotations

import html
import json
import re

__all__ = ["index_page", "rows_script", "text_page", "text_nav", "words_page", "file_name", "CSP"]

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
"""

_SCRIPT = r"""
const COLS = __COLUMNS__;
const C = Object.fromEntries(COLS.map((c, i) => [c, i]));
const rows = window.SLX_ROWS || [];
const $ = (id) => document.getElementById(id);
let view = rows, sortCol = "id", sortDir = 1, page = 0;
const PAGE = __PAGE__;
function options(sel, col) {
  const seen = [...new Set(rows.map((r) => r[C[col]]).filter((v) => v !== null))].sort();
  for (const v of seen) { const o = document.createElement("option"); o.value = o.textContent = v; sel.append(o); }
}
function cmp(a, b) {
  const x = a[C[sortCol]], y = b[C[sortCol]];
  if (x === y) return 0; if (x === null) return 1; if (y === null) return -1;
  if (typeof x === "number" && typeof y === "number") return sortDir * (x - y);
  return sortDir * String(x).localeCompare(String(y), undefined, {numeric: true});
}
function apply() {
  const pred = $("pred").value, gold = $("gold").value, status = $("status").value;
  const wrong = $("wrong").checked, q = $("q").value.toLowerCase();
  const r2min = parseFloat($("r2min").value), gapmax = parseFloat($("gapmax").value);
  view = rows.filter((r) =>
    (!pred || r[C.predicted] === pred) && (!gold || r[C.gold] === gold) &&
    (!status || (status === "truncated" ? r[C.truncated] > 0 : status === "failed" ?
      String(r[C.status]).startsWith("failed") : r[C.status] === status)) &&
    (!wrong || (r[C.gold] !== null && r[C.predicted] !== null && r[C.gold] !== r[C.predicted] &&
      r[C.gold] !== String(r[C.predicted_index]))) &&
    (isNaN(r2min) || (r[C.r2] !== null && r[C.r2] >= r2min)) &&
    (isNaN(gapmax) || (r[C.gap] !== null && r[C.gap] <= gapmax)) &&
    (!q || String(r[C.id]).toLowerCase().includes(q) || String(r[C.excerpt]).toLowerCase().includes(q)));
  view.sort(cmp); page = 0; draw();
}
function cell(tr, text, cls) { const td = tr.insertCell(); td.textContent = text; if (cls) td.className = cls; return td; }
function fmt(x) { return x === null ? "\u2014" : typeof x === "number" ? (Number.isInteger(x) ? x : x.toFixed(3)) : x; }
function draw() {
  const body = $("rows"); body.textContent = "";
  const last = Math.max(0, Math.ceil(view.length / PAGE) - 1); page = Math.min(Math.max(page, 0), last);
  for (const r of view.slice(page * PAGE, (page + 1) * PAGE)) {
    const tr = body.insertRow();
    if (String(r[C.status]).startsWith("failed")) tr.className = "failed";
    else if (r[C.status] !== "ok") tr.className = "poor";
    const td = cell(tr, "");
    if (r[C.page]) { const a = document.createElement("a"); a.href = r[C.page]; a.textContent = r[C.id]; td.append(a); }
    else td.textContent = r[C.id];
    cell(tr, fmt(r[C.predicted])); cell(tr, fmt(r[C.gold]));
    for (const c of ["output", "gap", "r2", "positions", "truncated"]) cell(tr, fmt(r[C[c]]), "num");
    cell(tr, r[C.status], "status"); cell(tr, r[C.excerpt], "excerpt");
  }
  $("count").textContent = view.length ? `texts ${page * PAGE + 1}\u2013${Math.min((page + 1) * PAGE, view.length)}` +
    ` of ${view.length} shown (${rows.length} in the run)` : `no text matches (${rows.length} in the run)`;
}
for (const th of document.querySelectorAll("th[data-col]")) th.addEventListener("click", () => {
  const col = th.dataset.col; sortDir = col === sortCol ? -sortDir : 1; sortCol = col; view.sort(cmp); page = 0; draw();
});
options($("pred"), "predicted"); options($("gold"), "gold");
for (const id of ["pred", "gold", "status", "wrong", "q", "r2min", "gapmax"]) $(id).addEventListener("input", apply);
$("prev").addEventListener("click", () => { page--; draw(); });
$("next").addEventListener("click", () => { page++; draw(); });
apply();
"""

_HEADERS = (
    ("id", "text id"),
    ("predicted", "predicted"),
    ("gold", "gold label"),
    ("output", "model output"),
    ("gap", "|gap|"),
    ("r2", "held-out R²"),
    ("positions", "positions"),
    ("truncated", "cut"),
    ("status", "status"),
    ("excerpt", "text"),
)


def _page(title: str, body: str, head: str = "") -> str:
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style>{head}</head>\n<body>\n{body}\n</body></html>\n"
    )


def rows_script(rows: list[list]) -> str:
    """One data file of the index: its rows appended to ``window.SLX_ROWS``.

    Example:
        >>> rows_script([["a", None]]).startswith("(window.SLX_ROWS")
        True
    """
    # "</" could end a script element early if the rows were ever inlined; JSON allows "<\/".
    data = json.dumps(rows, ensure_ascii=False, separators=(",", ":"), allow_nan=False).replace("</", "<\\/")
    return f"(window.SLX_ROWS = window.SLX_ROWS || []).push(...{data});\n"


def file_name(path: object) -> str:
    """The last part of a path, so that a shared report shows no folder of the machine that
    wrote it ("/home/me/data/imdb.jsonl" → "imdb.jsonl"; a Windows path too).

    Example:
        >>> file_name("/home/me/data/imdb.jsonl"), file_name(r"C:\\runs\\head"), file_name(None)
        ('imdb.jsonl', 'head', 'None')
    """
    text = str(path).rstrip("/\\")
    return re.split(r"[/\\]", text)[-1] or text


def _run_line(run) -> str:
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


def index_page(run, files: list[str], n_rows: int, columns: tuple[str, ...], *, page_size: int = 100) -> str:
    """The index: filters, a sortable table drawn ``page_size`` rows at a time, its data files.

    Example:
        >>> index_page(run, ["data/rows-000.js"], 10, INDEX_COLUMNS)  # doctest: +SKIP
    """
    heads = "".join(f'<th data-col="{c}">{html.escape(label)}</th>' for c, label in _HEADERS)
    controls = (
        '<label>predicted <select id="pred"><option value="">any</option></select></label>'
        '<label>gold label <select id="gold"><option value="">any</option></select></label>'
        '<label>status <select id="status"><option value="">any</option><option>ok</option>'
        '<option value="poor fit">poor fit (R² &lt; 0.5 or |gap| &gt; 1)</option><option>failed</option>'
        '<option value="truncated">cut to the model\'s length</option></select></label>'
        '<label><input type="checkbox" id="wrong"> predicted ≠ gold</label>'
        '<label>R² ≥ <input id="r2min" size="4" inputmode="decimal"></label>'
        '<label>|gap| ≤ <input id="gapmax" size="4" inputmode="decimal"></label>'
        '<label>search <input id="q" size="18" placeholder="id or text"></label>'
    )
    script = _SCRIPT.replace("__COLUMNS__", json.dumps(list(columns))).replace("__PAGE__", str(int(page_size)))
    body = (
        f"<h1>SLALOM corpus run: {n_rows} texts</h1>"
        f'<p class="meta">{_run_line(run)}</p>'
        '<nav><a href="words.html">word summary</a></nav>'
        '<p class="meta">Click a column to sort; a text\'s id opens its page (what each token added '
        "to the prediction; value and importance one tab away). Outputs are the model's log-odds (or centred logits) of the explained class; "
        "|gap| is what the surrogate misses on the full text.</p>"
        f'<div class="controls">{controls}</div>'
        '<div class="pager"><button id="prev">← previous</button><button id="next">next →</button>'
        '<span id="count"></span></div>'
        f'<table><thead><tr>{heads}</tr></thead><tbody id="rows"></tbody></table>'
        + "".join(f'<script src="{html.escape(f)}"></script>' for f in files)
        + f"<script>{script}</script>"
    )
    return _page("SLALOM corpus report", body)


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
        f'<p class="meta">{_run_line(run)}</p>'
        f'<p class="meta">The {len(summary)} tokens of largest mean |contribution| among those seen in at least '
        f'{min_texts} texts (not the most frequent: those are "the" and "."). Each is the mean over the texts it '
        "occurs in ± its standard error; contribution is summed over a token's occurrences in a text. Value and "
        "contribution are log-odds from each text's base value; importance is a log-weight (mean zero in each "
        "text).</p>"
        + (plot if len(summary) else "<p>No token is seen in enough texts.</p>")
        + f"<table><thead><tr>{heads}</tr></thead><tbody>{rows}</tbody></table>"
    )
    return _page("SLALOM word summary", body)
