"""Names that are code somewhere: a run whose class names (a downloaded model's
``id2label``), model name and data file name are HTML, Markdown links and headings, and a
reader of HTML that lists what of it would run or navigate.

    >>> run = hostile_run(tmp_path)  # doctest: +SKIP
    >>> live_markup(page_html)  # doctest: +SKIP
    []
"""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

#: Each must stay text wherever it is written.
HOSTILE = (
    "<script>alert(1)</script>",
    '<img src=x onerror="alert(2)">',
    "[click](javascript:alert(3))",
    "x\n# Injected heading",
)
#: The model's name in the manifest (a Hub id or path is a user's string too).
MODEL_NAME = '<img src=m onerror="alert(4)">[m](javascript:alert(5))'
#: The data file's name (a file name may hold any of these but "/", a newline included).
DATA_NAME = 'd <img src=d onerror="alert(6)"> [d](javascript:alert(7))\n## Injected <u>data.jsonl'


def hostile_run(tmp: Path, texts: tuple[str, ...] = ("a great film", "a bad plot", "great fun")):
    """A finished corpus run of four classes named :data:`HOSTILE`, with a model named
    :data:`MODEL_NAME` and data in a file named :data:`DATA_NAME`."""
    import warnings

    import slalom_core as sc
    from slalom_core.corpus import ModelLoader, explain_corpus

    def f(batch):
        return [[0.0, float(t.count("great")), -float(t.count("bad")), 0.1 * len(t.split())] for t in batch]

    clf = sc.StringClassifier(f, class_names=list(HOSTILE))
    tmp.mkdir(parents=True, exist_ok=True)
    data = tmp / DATA_NAME
    data.write_text("".join(json.dumps({"text": t, "label": HOSTILE[i % 4]}) + "\n" for i, t in enumerate(texts)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return explain_corpus(
            ModelLoader(lambda: (clf, None), name=MODEL_NAME), data, tmp / "run", n_samples=40, show_progress=False
        )


class _Markup(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[str] = []
        self._script = False

    def handle_starttag(self, tag, attrs):
        if tag in ("iframe", "object", "embed") or (tag == "img" and dict(attrs).get("src") != "words.png"):
            self.found.append(f"<{tag}>")
        if tag == "script":
            src = dict(attrs).get("src")
            if src is not None and not src.startswith(("data/", "../data/", "../../data/")):
                self.found.append(f"<script src={src!r}>")
            self._script = True
        for name, value in attrs:
            if name.startswith("on"):
                self.found.append(f"{tag} {name}=")
            if name in ("href", "src") and (value or "").strip().lower().startswith("javascript:"):
                self.found.append(f"{tag} {name}={value}")

    def handle_endtag(self, tag):
        if tag == "script":
            self._script = False

    def handle_data(self, data):
        if self._script and "alert(" in data:
            self.found.append("a script holding alert(")


def live_markup(html: str) -> list[str]:
    """What of ``html`` would run or navigate that the library did not write: img tags
    (other than the word summary's picture) and other embeddings, event attributes,
    ``javascript:`` links, scripts other than the page's own."""
    parser = _Markup()
    parser.feed(html)
    return parser.found
