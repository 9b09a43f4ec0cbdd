"""The index of a corpus report (:mod:`.report`): filters, search, quality, its script.

The index is one small HTML file; its rows come in ``data/rows-NNN.js`` files loaded by
``<script src>``, which a browser reads from a plain folder (``fetch`` of a ``file://``
URL is refused). The script keeps every row in memory (about 200 bytes each) and draws one
page of the table at a time, so 25,000 texts sort, filter and search at once and the
document stays small. A word search loads the one ``data/words-NNN.js`` file that holds
the word (:mod:`.report_search`), by a ``<script>`` it adds to the page.
"""

from __future__ import annotations

import html
import json

from ..fit_quality import HELDOUT_R2_LABEL, HELDOUT_R2_NOTE, RULE_SUMMARY
from .card import audit_coverage
from .report_pages import html_page, run_line

__all__ = ["index_page", "quality_summary", "flag_banner"]

_SCRIPT = r"""
const COLS = __COLUMNS__, QUALITY = __QUALITY__, WORDS = __WORDS__, R2NOTE = __R2NOTE__;
const C = Object.fromEntries(COLS.map((c, i) => [c, i]));
const rows = window.SLX_ROWS || [];
const $ = (id) => document.getElementById(id);
let view = rows, sortCol = "id", sortDir = 1, page = 0, timer = null;
const PAGE = __PAGE__;
const collator = new Intl.Collator(undefined, {numeric: true});
// The word index: one file per hash bucket, loaded by a <script> the first time a word of it is asked for.
// Each file's words are a Map: a word is never looked up among an object's inherited
// properties ("constructor", "__proto__", "length" are words like any other).
const loaded = new Map(), asked = new Set();
window.SLX_WORDS = (k, entries) => { loaded.set(k, new Map(entries)); apply(); };
function wordKey(w) { return w.normalize("NFC").trim().replace(/^(?:##|\u0120|\u2581)+/, "").trim().toLowerCase(); }
function fnv1a(key) {
  let h = 0x811c9dc5;
  for (const b of new TextEncoder().encode(key)) h = Math.imul(h ^ b, 0x01000193) >>> 0;
  return h;
}
function bucket(key) {
  const k = fnv1a(key) % WORDS.files;
  if (!loaded.has(k) && !asked.has(k)) {
    asked.add(k);
    const s = document.createElement("script"); s.src = `data/words-${String(k).padStart(3, "0")}.js`;
    s.onerror = () => { loaded.set(k, new Map()); apply(); }; document.body.append(s);
  }
  return loaded.get(k);
}
// The rows that hold every word of the query (null: a word's file is still loading).
function wordRows(q) {
  let keep = null; const notes = [];
  for (const key of q.split(/\s+/).map(wordKey).filter((w) => w)) {
    const table = bucket(key); if (!table) return [null, "loading the word index\u2026"];
    const [n, ids] = table.get(key) || [0, []];
    notes.push(n > ids.length ? `\u201c${key}\u201d is in ${n} texts; the ${ids.length} where it contributes most ` +
      `(largest |contribution|) are listed` : `\u201c${key}\u201d is in ${n} text${n === 1 ? "" : "s"}`);
    const these = new Set(ids); keep = keep === null ? these : new Set([...keep].filter((i) => these.has(i)));
  }
  return [keep, notes.join("; ")];
}
function options(sel, col) {
  const seen = [...new Set(rows.map((r) => r[C[col]]).filter((v) => v !== null))].sort();
  for (const v of seen) { const o = document.createElement("option"); o.value = o.textContent = v; sel.append(o); }
}
function cmp(a, b) {
  const x = a[C[sortCol]], y = b[C[sortCol]];
  if (x === y) return 0; if (x === null) return 1; if (y === null) return -1;
  if (typeof x === "number" && typeof y === "number") return sortDir * (x - y);
  return sortDir * collator.compare(String(x), String(y));
}
function quality(r, want) {
  return !want || (want === "flagged" ? r[C.flagged] === true : want === "unflagged" ? r[C.flagged] === false :
    want === "audited" ? r[C.audited] === true : r[C.in_label_set] === true);
}
function apply() {
  const pred = $("pred").value, gold = $("gold").value, status = $("status").value, want = $("flag").value;
  const wrong = $("wrong").checked, q = $("q").value.trim(), mode = $("qmode").value, lq = q.toLowerCase();
  const r2min = parseFloat($("r2min").value), gapmax = parseFloat($("gapmax").value);
  let hits = null, note = "";
  if (q && mode === "word") [hits, note] = wordRows(q);
  $("qnote").textContent = note;
  if (q && mode === "word" && hits === null) return;
  const t0 = performance.now();
  view = [];
  rows.forEach((r, i) => {
    if ((!pred || r[C.predicted] === pred) && (!gold || r[C.gold] === gold) &&
      (!status || (status === "truncated" ? r[C.truncated] > 0 : status === "failed" ?
        String(r[C.status]).startsWith("failed") : status === "flagged" ?
        String(r[C.status]).startsWith("fit flagged") : r[C.status] === status)) &&
      (!wrong || (r[C.gold] !== null && r[C.predicted] !== null && r[C.gold] !== r[C.predicted] &&
        r[C.gold] !== String(r[C.predicted_index]))) &&
      (isNaN(r2min) || (r[C.r2] !== null && r[C.r2] >= r2min)) &&
      (isNaN(gapmax) || (r[C.gap] !== null && r[C.gap] <= gapmax)) && quality(r, want) &&
      (!q || (mode === "id" ? String(r[C.id]).toLowerCase().startsWith(lq) : mode === "word" ? hits.has(i) :
        String(r[C.excerpt]).toLowerCase().includes(lq)))) view.push(r);
  });
  // The rows are stored in id order: that sort costs nothing.
  if (!(sortCol === "id" && sortDir === 1)) view.sort(cmp);
  page = 0; draw();
  $("count").dataset.ms = (performance.now() - t0).toFixed(1);  // what filtering and drawing took
}
function later() { clearTimeout(timer); timer = setTimeout(apply, 120); }
function cell(tr, text, cls) { const td = tr.insertCell(); td.textContent = text; if (cls) td.className = cls; return td; }
function fmt(x) { return x === null ? "\u2014" : typeof x === "number" ? (Number.isInteger(x) ? x : x.toFixed(3)) : x; }
function draw() {
  const body = $("rows"); body.textContent = "";
  const last = Math.max(0, Math.ceil(view.length / PAGE) - 1); page = Math.min(Math.max(page, 0), last);
  for (const r of view.slice(page * PAGE, (page + 1) * PAGE)) {
    const tr = body.insertRow();
    if (String(r[C.status]).startsWith("failed")) tr.className = "failed";
    else if (r[C.status] !== "ok") tr.className = "poor";
    if (r[C.flagged]) tr.className += " flagged";
    const td = cell(tr, "");
    if (r[C.page]) { const a = document.createElement("a"); a.href = r[C.page]; a.textContent = r[C.id]; td.append(a); }
    else td.textContent = r[C.id];
    cell(tr, fmt(r[C.predicted])); cell(tr, fmt(r[C.gold]));
    cell(tr, fmt(r[C.output]), "num"); cell(tr, fmt(r[C.gap]), "num");
    // The held-out R² is no part of the status beside it: a negative one says so in its cell.
    const r2 = r[C.r2];
    cell(tr, fmt(r2) + (r2 !== null && r2 < 0 ? " \u00b7 below 0: no flag" : ""), "num r2").title = R2NOTE;
    for (const c of ["positions", "truncated"]) cell(tr, fmt(r[C[c]]), "num");
    cell(tr, r[C.status], "status");
    if (QUALITY.includes("flagged")) {
      const f = cell(tr, r[C.flagged] ? "\u2691 " + (r[C.flag_reason] || "flagged") : r[C.flagged] === false ? "\u2014" : "", "flag");
      if (r[C.flag_reason]) f.title = r[C.flag_reason];
    }
    if (QUALITY.includes("audited")) {
      cell(tr, r[C.audited] ? fmt(r[C.audit_rho]) : "", "num"); cell(tr, r[C.in_label_set] ? "label set" : "");
    }
    cell(tr, r[C.excerpt], "excerpt");
  }
  $("count").textContent = view.length ? `texts ${page * PAGE + 1}\u2013${Math.min((page + 1) * PAGE, view.length)}` +
    ` of ${view.length} shown (${rows.length} in the run)` : `no text matches (${rows.length} in the run)`;
}
for (const th of document.querySelectorAll("th[data-col]")) th.addEventListener("click", () => {
  const col = th.dataset.col; sortDir = col === sortCol ? -sortDir : 1; sortCol = col; view.sort(cmp); page = 0; draw();
});
options($("pred"), "predicted"); options($("gold"), "gold");
for (const id of ["pred", "gold", "status", "flag", "wrong", "r2min", "gapmax", "qmode"]) $(id).addEventListener("input", apply);
$("q").addEventListener("input", later);
$("prev").addEventListener("click", () => { page--; draw(); });
$("next").addEventListener("click", () => { page++; draw(); });
// A link may carry a search: index.html#id=17, #word=great, #text=boring, #flag=flagged.
const asked0 = new URLSearchParams(location.hash.slice(1));
for (const m of ["id", "word", "text"]) if (asked0.has(m)) { $("qmode").value = m; $("q").value = asked0.get(m); }
if (asked0.has("flag")) $("flag").value = asked0.get("flag");
apply();
"""

_HEADERS = (
    ("id", "text id"),
    ("predicted", "predicted"),
    ("gold", "gold label"),
    ("output", "model output"),
    ("gap", "|gap|"),
    ("r2", "held-out R² (own design, not in the status)"),
    ("positions", "positions"),
    ("truncated", "cut"),
    ("status", "status"),
)
_R2_TITLE = f' title="{html.escape(HELDOUT_R2_NOTE)}"'
_QUALITY_HEADERS = {
    "flagged": (("flag_reason", "flagged (why)"),),
    "audited": (("audit_rho", "audit ρ value"), ("in_label_set", "label set")),
}


def _heads(quality: tuple[str, ...]) -> str:
    """The table's header cells (the R²'s says in its tooltip that it is no part of the status)."""
    headers = list(_HEADERS) + [h for q in quality for h in _QUALITY_HEADERS[q]] + [("excerpt", "text")]
    return "".join(
        f'<th data-col="{c}"{_R2_TITLE if c == "r2" else ""}>{html.escape(label)}</th>' for c, label in headers
    )


def index_page(
    run,
    files: list[str],
    n_rows: int,
    columns: tuple[str, ...],
    *,
    page_size: int = 100,
    quality: tuple[str, ...] = (),
    search: dict | None = None,
) -> str:
    """The index: filters, a search by id or word, a sortable table drawn ``page_size`` rows
    at a time, its data files.

    Args:
        run: the :class:`CorpusRun` (its manifest: the run line, the audit's summary).
        files: the rows' data files, relative to the index.
        n_rows: how many rows they hold.
        columns: the fields of each row, in order.
        page_size: rows drawn at a time.
        quality: the quality columns to show: "flagged" (an amortized run), "audited" (an
            amortized pipeline's run, with its quality table).
        search: ``{"files": n, "cap": k}`` of the word index (:mod:`.report_search`).

    Example:
        >>> index_page(run, ["data/rows-000.js"], 10, INDEX_COLUMNS)  # doctest: +SKIP
    """
    search = search or {"files": 0, "cap": 0}
    heads = _heads(quality)
    hide = "" if quality else ' style="display:none"'
    audit = '<option value="audited">audited</option><option value="label">in the label set</option>'
    controls = (
        '<label>predicted <select id="pred"><option value="">any</option></select></label>'
        '<label>gold label <select id="gold"><option value="">any</option></select></label>'
        '<label>status <select id="status"><option value="">any</option><option>ok</option>'
        '<option value="flagged">fit flagged (against the model, missed, undetermined, ...)</option>'
        "<option>failed</option>"
        '<option value="truncated">cut to the model\'s length</option></select></label>'
        f'<label{hide}>quality <select id="flag"><option value="">any</option><option value="flagged">flagged</option>'
        f'<option value="unflagged">not flagged</option>{audit if "audited" in quality else ""}</select></label>'
        '<label><input type="checkbox" id="wrong"> predicted ≠ gold</label>'
        '<label>held-out R² ≥ <input id="r2min" size="4" inputmode="decimal"></label>'
        '<label>|gap| ≤ <input id="gapmax" size="4" inputmode="decimal"></label>'
        '<label>search <select id="qmode"><option value="id">id starts with</option>'
        f'<option value="word"{"" if search["files"] else " disabled"}>text has the word</option>'
        '<option value="text">excerpt contains</option></select> <input id="q" size="18" placeholder="id, word or text">'
        "</label>"
    )
    script = (
        _SCRIPT.replace("__COLUMNS__", json.dumps(list(columns)))
        .replace("__PAGE__", str(int(page_size)))
        .replace("__QUALITY__", json.dumps(list(quality)))
        .replace("__WORDS__", json.dumps({"files": int(search["files"]), "cap": int(search["cap"])}))
        .replace("__R2NOTE__", json.dumps(f"{HELDOUT_R2_LABEL}: {HELDOUT_R2_NOTE}"))
    )
    body = (
        f"<h1>SLALOM corpus run: {n_rows} texts</h1>"
        f'<p class="meta">{run_line(run)}</p>'
        + quality_summary(run, quality)
        + '<nav><a href="words.html">word summary</a></nav>'
        '<p class="meta">Click a column to sort; a text\'s id opens its page (what each token added '
        "to the prediction; value and importance one tab away). Outputs are the model's log-odds (or centred logits) of the explained class; "
        f"|gap| is what the surrogate misses on the full text; held-out R² is the {HELDOUT_R2_LABEL}, "
        f"{HELDOUT_R2_NOTE}. A text's status is ok or the flags of the fit-quality rule: {RULE_SUMMARY}. "
        "Search by id (its start), by word (a token as the "
        "tokenizer cut it, any case; a word listed in many texts shows the "
        f"{int(search['cap'])} where it contributes most), or in the excerpts.</p>"
        f'<div class="controls">{controls}</div><p class="meta" id="qnote"></p>'
        '<div class="pager"><button id="prev">← previous</button><button id="next">next →</button>'
        '<span id="count"></span></div>'
        f'<table><thead><tr>{heads}</tr></thead><tbody id="rows"></tbody></table>'
        + "".join(f'<script src="{html.escape(f)}"></script>' for f in files)
        + f"<script>{script}</script>"
    )
    return html_page("SLALOM corpus report", body)


def _stat(d: object) -> str:
    if not isinstance(d, dict) or d.get("mean") is None:
        return "—"
    return f"mean {d['mean']:.2f} (median {d.get('median', float('nan')):.2f}, 10th percentile {d.get('p10', float('nan')):.2f})"


def quality_summary(run, quality: tuple[str, ...]) -> str:
    """The box atop the index of an amortized run: the audit's numbers, the flags, how to refit.

    Example:
        >>> quality_summary(run, ("flagged", "audited"))  # doctest: +SKIP
    """
    if not quality:
        return ""
    auto = run.manifest.get("auto") if isinstance(run.manifest.get("auto"), dict) else {}
    lines = []
    labels, audit, flags = auto.get("labels") or {}, auto.get("audit") or {}, auto.get("flags") or {}
    if labels:
        lines.append(
            f"Amortized pipeline: its head learned from {labels.get('n_texts')} texts explained per text "
            f"({html.escape(str(labels.get('method')))}, {labels.get('n_samples')} samples)."
        )
    if audit:
        lines.append(
            f"Audit: {html.escape(audit_coverage(audit, (run.manifest.get('input') or {}).get('n_rows')))}, outside "
            "the label set, explained per text as well; Spearman of the head's scores against those fits: value "
            f"{_stat(audit.get('value_spearman'))}; importance {_stat(audit.get('importance_spearman'))}. "
            f"{audit.get('n_poor')} audited texts have a value Spearman below {audit.get('poor_below')}."
        )
    if flags:
        lines.append(
            f"Flagged: {flags.get('n_flagged')} texts ({flags.get('n_ood')} out of distribution, "
            f"{flags.get('n_poor_audit')} poor in the audit, {flags.get('n_fit_flags', 0)} by the fit-quality rule: "
            "the head's explanation moves against the model or misses its output): filter the table by quality."
        )
    else:
        lines.append("Texts the head's out-of-distribution check flagged are marked ⚑ (filter by quality).")
    lines.append(
        f"Re-explain the flagged texts per text: <code>slalom-xai refit {html.escape(run.path.name)}</code> "
        "(give the run's folder)."
    )
    return '<div class="quality">' + "<br>".join(lines) + "</div>"


def flag_banner(reason: str | None, run_name: str) -> str:
    """The banner atop a flagged text's page: why its amortized scores are not to be trusted.

    Example:
        >>> "out of distribution" in flag_banner("out of distribution: too long", "runs")
        True
    """
    return (
        '<div class="slx-flag" role="alert" style="font: 0.9rem system-ui, sans-serif; margin: 0.5rem 1rem; '
        'padding: 0.4rem 0.7rem; background: #fdecea; border: 1px solid #e0a39d; color: #611">'
        f"⚑ Flagged: {html.escape(reason or 'flagged by the amortized pipeline')}. These scores are the amortized "
        f"head's; re-explain this text per text with <code>slalom-xai refit {html.escape(run_name)}</code>.</div>"
    )
