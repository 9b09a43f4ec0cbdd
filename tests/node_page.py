"""The report index's script run in Node with a small stand-in for the DOM, for checks that
need no browser (the browser tests need chromium; Node is lighter and often present).

``run_index(site, "#word=great")`` loads ``site/index.html``'s data files and script as a
browser would (the word index's files when the script asks for them) and returns what the
page then shows: the search note, the count line and the ids of the rows drawn, or the
error the script threw.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

NODE = shutil.which("node") or shutil.which("nodejs")
needs_node = pytest.mark.skipif(NODE is None, reason="node is not installed")

_HARNESS = r"""
const fs = require("fs"), path = require("path"), vm = require("vm");
const [site, hash, raw] = process.argv.slice(-3), scripts = JSON.parse(raw);
const els = {};
function el(tag) {
  const e = {tag, value: "", checked: false, className: "", title: "", dataset: {}, kids: [], src: "", href: "",
    _text: "",
    get textContent() { return this._text; },
    set textContent(v) { this._text = String(v); this.kids = []; },
    append(c) { this.kids.push(c); if (c.tag === "script") load(c); },
    addEventListener() {},
    insertRow() { const r = el("tr"); this.kids.push(r); return r; },
    insertCell() { const c = el("td"); this.kids.push(c); return c; }};
  return e;
}
const document = {getElementById: (id) => els[id] || (els[id] = el("x")), createElement: el,
  querySelectorAll: () => [], body: el("body")};
const ctx = {document, location: {hash}, performance: {now: () => 0}, setTimeout, clearTimeout, Intl,
  TextEncoder, URLSearchParams, console};
ctx.window = ctx;
vm.createContext(ctx);
function load(s) {
  const file = path.join(site, s.src);
  if (!fs.existsSync(file)) { s.onerror && s.onerror(); return; }
  vm.runInContext(fs.readFileSync(file, "utf8"), ctx);
}
let error = null;
try {
  for (const src of scripts.files) vm.runInContext(fs.readFileSync(path.join(site, src), "utf8"), ctx);
  vm.runInContext(scripts.inline, ctx);
} catch (e) { error = String(e); }
const text = (e) => e.kids.length ? e.kids.map(text).join("") : e._text;
const ids = (els.rows ? els.rows.kids : []).map((tr) => text(tr.kids[0]));
console.log(JSON.stringify({error, note: els.qnote ? els.qnote._text : "", count: els.count ? els.count._text : "", ids}));
"""


def run_index(site: Path, fragment: str = "") -> dict:
    """What ``site/index.html`` shows when opened with ``fragment`` (e.g. "#word=great").

    Returns ``{"error", "note", "count", "ids"}``: the error the script threw (None if
    none), the search note, the count line and the ids of the rows drawn.
    """
    page = (site / "index.html").read_text(encoding="utf-8")
    files = re.findall(r'<script src="([^"]+)"></script>', page)
    inline = re.findall(r"<script>(.*?)</script>", page, flags=re.S)
    scripts = json.dumps({"files": files, "inline": inline[-1]})
    done = subprocess.run(
        [NODE, "-e", _HARNESS, str(site), fragment, scripts], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])
