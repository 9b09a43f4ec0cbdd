"""The report's word index: which texts hold a word, in ``data/words-NNN.js`` files.

A word's key is its token as the tokenizer wrote it, in NFC, lower-cased, stripped of white
space and of the tokenizer's leading piece marks ("##" of WordPiece continuations, "Ġ" of byte-level
BPE, "▁" of SentencePiece): "Great", "Ġgreat" and "▁great" share the key "great", and a word
the tokenizer split ("wonderfully" → "wonderful", "##ly") is found by its pieces. The page's
script applies the same steps to what the user types (:func:`word_key` is their one
definition here; the script's ``wordKey`` mirrors it).

Each word lists at most :data:`POSTINGS_CAP` texts, those where the word's contribution
(summed over its occurrences in the text, largest class in absolute value) is largest in
absolute value, and how many texts hold it in all. The words are spread over files by a
32-bit FNV-1a hash of the key's UTF-8 bytes, so the page loads only the file of the word
asked for (by a ``<script>`` it adds: a browser refuses ``fetch`` of a ``file://`` URL), and
every file stays far under :data:`MAX_FILE_BYTES`.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from pathlib import Path

__all__ = ["word_key", "fnv1a", "WordIndex", "POSTINGS_CAP", "MAX_FILE_BYTES"]

#: Texts listed per word: the ones where it counts most.
POSTINGS_CAP = 200
#: No file of the site may be larger (a browser opens, a mail carries each one).
MAX_FILE_BYTES = 2_000_000
#: What one word-index file aims at: half the limit leaves room for an unlucky hash.
_TARGET_BYTES = 800_000
_MARKS = re.compile(r"^(?:##|\u0120|\u2581)+")


def word_key(token: str) -> str:
    """The search key of a token (or of a word the user typed).

    Example:
        >>> [word_key(t) for t in ["Great", "##ly", "\u0120the", "\u2581Film", " "]]
        ['great', 'ly', 'the', 'film', '']
    """
    # The marks go before lower(): "Ġ" lower-cases to "ġ", which is no mark.
    return _MARKS.sub("", unicodedata.normalize("NFC", str(token)).strip()).strip().lower()


def fnv1a(key: str) -> int:
    """32-bit FNV-1a of the key's UTF-8 bytes (the page's script computes the same).

    Example:
        >>> fnv1a(""), fnv1a("a")
        (2166136261, 3826002220)
    """
    h = 0x811C9DC5
    for b in key.encode("utf-8"):
        h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    return h


class WordIndex:
    """Postings of every word, gathered one chunk of positions at a time.

    Memory holds at most :data:`POSTINGS_CAP` texts per word (and one chunk's pairs), not
    the corpus's.

    Args:
        cap: texts kept per word.

    Example:
        >>> index = WordIndex()  # doctest: +SKIP
        >>> for _, part in run.parts("positions"):  # doctest: +SKIP
        ...     index.add(part)
        >>> files = index.write(out, row_of_id)  # doctest: +SKIP
    """

    def __init__(self, cap: int = POSTINGS_CAP) -> None:
        self.cap = int(cap)
        self._kept: list = []
        self._pending = 0
        self._counts: dict[str, int] = {}

    def add(self, positions) -> None:
        """Add one chunk's positions (id, explained_class, token, contribution)."""
        if not len(positions):
            return
        import numpy as np
        import pandas as pd

        # Each distinct token's key once: a chunk holds a few thousand among its positions.
        codes, tokens = pd.factorize(positions["token"].astype(str))
        keys = np.array([word_key(t) for t in tokens], dtype=object)[codes]
        frame = positions.assign(key=keys)[["key", "id", "explained_class", "contribution"]]
        frame = frame[frame["key"] != ""]
        per_class = frame.groupby(["key", "id", "explained_class"], sort=False)["contribution"].sum().abs()
        pairs = per_class.groupby(level=["key", "id"], sort=False).max().rename("weight").reset_index()
        for key, n in pairs.groupby("key", sort=False).size().items():
            self._counts[key] = self._counts.get(key, 0) + int(n)
        self._kept.append(pairs)
        self._pending += len(pairs)
        if self._pending > 1_000_000:
            self._kept = [self._top()]
            self._pending = len(self._kept[0])

    def _top(self):
        import pandas as pd

        if not self._kept:
            return pd.DataFrame({"key": [], "id": [], "weight": []})
        pairs = pd.concat(self._kept, ignore_index=True)
        # Largest weight first; equal weights by id, so that the cut never depends on chunk order.
        pairs = pairs.sort_values(["key", "weight", "id"], ascending=[True, False, True], kind="stable")
        return pairs.groupby("key", sort=False).head(self.cap)

    def postings(self, row_of_id: dict[str, int]) -> dict[str, list]:
        """``{key: [texts holding it, [row numbers of the listed texts, best first]]}``."""
        top = self._top()
        import numpy as np

        top = top.assign(row=top["id"].map(row_of_id)).dropna(subset=["row"])
        # Sorted by key (then weight): each key's rows are one slice.
        keys, rows = top["key"].to_numpy(dtype=object), top["row"].to_numpy(dtype=np.int64)
        starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]]) if len(keys) else np.array([], dtype=np.int64)
        ends = np.r_[starts[1:], len(keys)]
        return {str(keys[a]): [self._counts[keys[a]], rows[a:b].tolist()] for a, b in zip(starts, ends)}

    def write(self, out: Path, row_of_id: dict[str, int]) -> int:
        """Write ``data/words-NNN.js`` under ``out``; returns how many files.

        Each file calls ``SLX_WORDS(file number, [[key, [n_texts, [rows]]], ...])`` (pairs,
        which the page reads into a ``Map``). Files are
        added until each is under :data:`MAX_FILE_BYTES` (a hash that crowds one file
        doubles their number).
        """
        table = self.postings(row_of_id)
        size = sum(len(k.encode("utf-8")) + 12 + 7 * len(v[1]) for k, v in table.items())
        n = max(1, math.ceil(size / _TARGET_BYTES))
        while True:
            shards: list[dict] = [{} for _ in range(n)]
            for key, entry in table.items():
                shards[fnv1a(key) % n][key] = entry
            texts = [_words_script(k, shard) for k, shard in enumerate(shards)]
            if max(len(t.encode("utf-8")) for t in texts) < MAX_FILE_BYTES or n >= 4096:
                break
            n *= 2
        (out / "data").mkdir(parents=True, exist_ok=True)
        for k, text in enumerate(texts):
            (out / "data" / f"words-{k:03d}.js").write_text(text, encoding="utf-8")
        return n


def _words_script(number: int, shard: dict) -> str:
    # [key, entry] pairs, not an object literal: in one, a "__proto__" key sets the prototype.
    data = json.dumps(list(shard.items()), ensure_ascii=False, separators=(",", ":")).replace("</", "<\\/")
    return f"SLX_WORDS({number}, {data});\n"
