"""The explained text in its original spelling, cut at the explanation's positions.

An explanation's ``tokens`` are the tokenizer's pieces: WordPiece marks continuations
("##ing") and may lower-case and strip accents; byte-level BPE (GPT-2, RoBERTa) spells a
leading space "Ġ", a newline "Ċ" and every non-ASCII byte as a stand-in character;
SentencePiece marks word starts with "▁". :func:`layout` undoes this: with the text
(``exp.text``) it finds each position's characters in it, so that what is shown is the
text itself; without it the pieces are decoded as well as the tokens allow.

Example:
    >>> pieces(["un", "##believ", "##able", "film"], "token")
    [('un', False), ('believ', False), ('able', False), ('film', True)]
    >>> layout(["Ġgreat", "Ġfilm"], "token", "A great film!")
    [('A ', None), ('great', 0), (' ', None), ('film', 1), ('!', None)]
"""

from __future__ import annotations

import codecs
import functools
import re
import unicodedata
from collections.abc import Sequence

__all__ = ["pieces", "align", "layout", "byte_level_decoder"]

# Byte-level BPE writes each byte as one printable character: the printable Latin-1 bytes as
# themselves, the others (controls, space, ...) as 256 + their rank among those.
_PRINTABLE = [*range(33, 127), *range(161, 173), *range(174, 256)]


def byte_level_decoder() -> dict[str, int]:
    """The byte each byte-level BPE character stands for (GPT-2's reversible byte alphabet).

    Example:
        >>> d = byte_level_decoder()
        >>> d["Ġ"], d["Ċ"], d["a"]
        (32, 10, 97)
    """
    table = {chr(b): b for b in _PRINTABLE}
    extra = 0
    for b in range(256):
        if b not in table.values():
            table[chr(256 + extra)] = b
            extra += 1
    return table


_BYTES = byte_level_decoder()
# A piece in one of these marks a byte-level vocabulary (space, newline, tab).
_BYTE_LEVEL_MARKS = ("Ġ", "Ċ", "ĉ")
_SENTENCEPIECE_MARK = "▁"


def _decode_byte_level(tokens: Sequence[str]) -> list[tuple[str, bool]]:
    # One incremental decoder over all pieces: a character split over two pieces is shown by
    # the piece that completes it, and no piece shows a replacement character for half of it.
    dec = codecs.getincrementaldecoder("utf-8")(errors="replace")
    out = []
    for t in tokens:
        if all(c in _BYTES for c in t):
            s = dec.decode(bytes(_BYTES[c] for c in t))
        else:  # an added or special token, not spelled in bytes
            s = t
        space = s.startswith(" ")
        out.append((s[1:] if space else s, space))
    return out


def pieces(tokens: Sequence[str], granularity: str) -> list[tuple[str, bool]]:
    """Each position's surface string and whether a space goes before it, from tokens alone.

    Args:
        tokens: the explanation's tokens.
        granularity: "word" (tokens are already words of the text) or "token".

    Returns:
        ``(shown, space_before)`` per position.

    Example:
        >>> pieces(["▁Great", "▁film", "!"], "token")
        [('Great', False), ('film', True), ('!', False)]
    """
    tokens = [str(t) for t in tokens]
    if granularity == "word":
        out = [(t, True) for t in tokens]
    elif any(m in t for t in tokens for m in _BYTE_LEVEL_MARKS):
        out = _decode_byte_level(tokens)
    elif any(t.startswith(_SENTENCEPIECE_MARK) for t in tokens):
        out = [(t.lstrip(_SENTENCEPIECE_MARK), t.startswith(_SENTENCEPIECE_MARK)) for t in tokens]
    else:  # WordPiece or plain words: a space before every piece but "##" continuations
        out = [(t[2:], False) if t.startswith("##") and len(t) > 2 else (t, True) for t in tokens]
    if out:
        out[0] = (out[0][0], False)
    return out


@functools.lru_cache(maxsize=1 << 16)
def _fold(s: str) -> str:
    """What an uncased, accent-stripping tokenizer makes of ``s``: compared, never shown
    (remembered: :func:`align` folds every character of every text, and most repeat)."""
    return "".join(c for c in unicodedata.normalize("NFKD", s.lower()) if not unicodedata.combining(c))


def _words(text: str, a: int, b: int) -> list[tuple[int, int]]:
    """The spans of the words and single punctuation marks in ``text[a:b]``."""
    return [(a + m.start(), a + m.end()) for m in re.finditer(r"\w+|[^\w\s]", text[a:b])]


def align(text: str, shown: Sequence[str]) -> list[tuple[int, int] | None]:
    """Each piece's (start, end) in ``text``, in order; None for a piece not found there.

    Pieces are matched left to right after case and accent folding, skipping whitespace.
    Pieces not found ([UNK], a special token) wait for the next piece that is; the text
    skipped up to it is theirs when it holds one word or punctuation mark per piece, as a
    WordPiece tokenizer makes one [UNK] of each; otherwise they stay None.

    Args:
        text: the text the pieces were cut from.
        shown: each position's surface string (:func:`pieces`).

    Returns:
        One ``(start, end)`` or None per piece; spans never overlap and are increasing.

    Example:
        >>> align("Don't panic", ["don", "'", "t", "panic"])
        [(0, 3), (3, 4), (4, 5), (6, 11)]
        >>> align("a <b> c", ["a", "[UNK]", "[UNK]", "[UNK]", "c"])
        [(0, 1), (2, 3), (3, 4), (4, 5), (6, 7)]
        >>> align("Wait…", ["wait", ".", ".", "."])
        [(0, 4), (4, 5), (5, 5), (5, 5)]
    """
    folded, where = [], []
    for i, c in enumerate(text):
        f = _fold(c)
        folded.append(f)
        where.extend([i] * len(f))
    flat = "".join(folded)

    def orig(k: int) -> int:  # the text's index of folded position k
        return where[k] if k < len(where) else len(text)

    out: list[tuple[int, int] | None] = []
    cursor = 0  # in the folded text
    pending: list[int] = []  # pieces not found since the last one that was

    def settle(upto: int) -> None:
        # The pending pieces take the words skipped up to folded position ``upto``.
        spans = _words(text, orig(cursor), orig(upto))
        if pending and len(spans) == len(pending):
            for i, span in zip(pending, spans):
                out[i] = span
        pending.clear()

    for piece in shown:
        key = _fold(piece.strip())
        if not key:
            # A whitespace piece (byte-level "Ġ", "Ċ") is the whitespace right at the cursor.
            found = bool(piece) and flat.startswith(piece, cursor)
            out.append((orig(cursor), where[cursor + len(piece) - 1] + 1) if found else None)
            cursor += len(piece) if found else 0
            continue
        at = flat.find(key, cursor)
        skipped = flat[cursor:at] if at >= 0 else ""
        # Only whitespace, a few dropped characters, or the words of the pieces still waiting
        # may lie between two pieces: a match farther on is a later occurrence, not this one.
        room = 8 + 2 * len(key) + 40 * len(pending)
        if at < 0 or (skipped.strip() and len(skipped) > room):
            pending.append(len(out))
            out.append(None)
            continue
        settle(at)
        end = at + len(key)
        # One character can fold into several ("…" into "..."), each matched by its own
        # piece: the first piece shows it, the others get an empty span after it.
        last = next((s[1] for s in reversed(out) if s is not None), 0)
        out.append((max(where[at], last), max(where[end - 1] + 1, last)))
        cursor = end
    settle(len(flat))
    return out


def layout(tokens: Sequence[str], granularity: str, text: str | None = None) -> list[tuple[str, int | None]]:
    """The text to show as a list of ``(string, position)``: a position's own characters,
    or (position None) what lies between positions.

    With ``text`` every character of it appears exactly once, in order, and each position
    shows its original spelling; a position not found in the text shows its decoded piece.
    Without it, positions show their decoded pieces, with a space where a word starts.

    Args:
        tokens: the explanation's tokens.
        granularity: "token" or "word".
        text: the explained text, if known.

    Returns:
        A list of ``(string, position or None)``; each position appears exactly once. A
        position's string is empty when it has no character of its own (a byte-level piece
        holding part of a character that the next piece completes).

    Example:
        >>> layout(["the", "cafe"], "token", "The  Café")
        [('The', 0), ('  ', None), ('Café', 1)]
    """
    shown = pieces(tokens, granularity)
    out: list[tuple[str, int | None]] = []
    if text is None:
        for pos, (s, space) in enumerate(shown):
            if space:
                out.append((" ", None))
            out.append((s, pos))
        return out
    # A bare space piece ("Ġ" alone) is looked up as the space it stands for.
    spans = align(text, [s or (" " if space else "") for s, space in shown])
    done = 0
    for pos, span in enumerate(spans):
        if span is None:
            out.append((shown[pos][0], pos))
            continue
        a, b = span
        if a > done:
            out.append((text[done:a], None))
        out.append((text[a:b], pos))
        done = b
    if done < len(text):
        out.append((text[done:], None))
    return out
