"""Read the two-channel views back: each token element's attributes and text, in order."""

from __future__ import annotations

from html.parser import HTMLParser


class TokenReader(HTMLParser):
    """Collects every ``span.slx-tok`` with a ``data-position`` (legend samples have none),
    its attributes and its text, the text of each ``div.slx-text``, and every tag seen."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tokens: list[dict] = []
        self.texts: list[str] = []
        self.tags: list[str] = []
        self._in_token: dict | None = None
        self._depth = 0  # nesting inside the current div.slx-text

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        a = dict(attrs)
        if self._depth:
            self._depth += tag == "div"
        if tag == "div" and a.get("class") == "slx-text":
            self.texts.append("")
            self._depth = 1
        if tag == "span" and "data-position" in a:
            self._in_token = {**a, "text": ""}
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


def read(page: str) -> TokenReader:
    reader = TokenReader()
    reader.feed(page)
    reader.close()
    return reader
