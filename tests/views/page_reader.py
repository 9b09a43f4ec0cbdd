"""Read the views back: each token element's attributes and text, in order.

A page shows its text in two views (``div.slx-text`` with ``data-view="score"``: the score
alone, first; ``data-view="channels"``: value and importance); :func:`read` keeps one view,
by default the first the page shows.
"""

from __future__ import annotations

from html.parser import HTMLParser


class TokenReader(HTMLParser):
    """Collects every ``span.slx-tok`` with a ``data-position`` (legend samples have none),
    its attributes and its text, the text of each ``div.slx-text``, and every tag seen."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tokens: list[dict] = []
        self.texts: list[str] = []
        self.text_views: list[str | None] = []
        self.tags: list[str] = []
        self._in_token: dict | None = None
        self._depth = 0  # nesting inside the current div.slx-text
        self._view: str | None = None

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        a = dict(attrs)
        if self._depth:
            self._depth += tag == "div"
        if tag == "div" and a.get("class") == "slx-text":
            self._view = a.get("data-view")
            self.texts.append("")
            self.text_views.append(self._view)
            self._depth = 1
        if tag == "span" and "data-position" in a and self._depth:
            self._in_token = {**a, "text": "", "view": self._view}
            self.tokens.append(self._in_token)

    def handle_endtag(self, tag):
        if tag == "span":
            self._in_token = None
        if tag == "div" and self._depth:
            self._depth -= 1

    def handle_data(self, data):
        if self._in_token is not None:
            self._in_token["text"] += data
        if self._depth:
            self.texts[-1] += data


def read(page: str, view: str | None = None) -> TokenReader:
    """The page's tokens and texts of one view (default: the first the page shows)."""
    reader = TokenReader()
    reader.feed(page)
    reader.close()
    view = view if view is not None else (reader.text_views[0] if reader.text_views else None)
    reader.tokens = [t for t in reader.tokens if t["view"] == view]
    reader.texts = [t for t, v in zip(reader.texts, reader.text_views) if v == view]
    return reader


class TopReader(HTMLParser):
    """Collects the ranked tokens of ``ol.slx-top`` lists: per item its attributes
    (``data-position``, ``data-se``, ``data-sign``), the number's text, the token and the text after it."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.items: list[dict] = []
        self.notes: list[str] = []
        self._in_list = False
        self._part: str | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "ol" and a.get("class") == "slx-top":
            self._in_list = True
        elif tag == "p" and a.get("class") == "slx-topnote":
            self.notes.append("")
            self._part = "note"
        elif self._in_list and tag == "li":
            self.items.append({**a, "num": "", "token": "", "after": ""})
            self._part = "after"
        elif self._in_list and tag == "span":
            self._part = {"slx-num": "num", "slx-chip": "token"}.get(a.get("class"), self._part)

    def handle_endtag(self, tag):
        if tag == "ol":
            self._in_list = False
        if tag == "span" and self._in_list:
            self._part = "after"
        if tag in ("p", "li"):
            self._part = None

    def handle_data(self, data):
        if self._part == "note":
            self.notes[-1] += data
        elif self._part is not None and self.items:
            self.items[-1][self._part] += data


def read_top(page: str) -> TopReader:
    """The page's ranked tokens (every ``ol.slx-top``, in order) and the notes above them."""
    reader = TopReader()
    reader.feed(page)
    reader.close()
    return reader
