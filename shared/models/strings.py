"""Black boxes on strings: :class:`StringClassifier`, which shows the model the user's own text."""

from __future__ import annotations

import dataclasses
import re
import weakref
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import torch

from .base import ModelAdapter
from .reading import OutputShapeError, score_matrix
from .segmentation import Segmentation, WhitespaceTokenizer, as_id_list, check_tokenizer

__all__ = ["StringClassifier"]


class _NotedText(str):
    """A text its adapter must give back exactly, for as long as it is in use.

    The segmentation cut from it holds it (as its ``text``); the adapter holds it weakly,
    so that an explainer that lives for many texts keeps none it no longer needs.
    """


class _PieceVocabulary:
    """The surface pieces of the texts a :class:`StringClassifier` has cut, with ids of its own.

    A piece is (token id, separator, substring): what a sample shows the model for a token
    kept. Its id is negative, so that it is never taken for a tokenizer id. A text that its
    pieces, joined, do not give back exactly (repeated whitespace, a word repeated in
    another case...) is remembered by its full id sequence, which one id given to that text
    alone (its first piece, every occurrence) makes its own.
    """

    def __init__(self) -> None:
        self.ids: dict[tuple[int, str, str], int] = {}
        self.pieces: dict[int, tuple[str, str]] = {}  # id -> (separator, substring)
        self.texts: weakref.WeakValueDictionary[tuple[int, ...], _NotedText] = weakref.WeakValueDictionary()
        self._next = -1  # the next id of its own (ids count down from -1)

    def __getstate__(self) -> dict:
        # Texts are held weakly and go with the segmentations that hold them: a copy (Ray
        # pickles the adapter for its workers) keeps the pieces and starts with no texts.
        return {"ids": self.ids, "pieces": self.pieces, "next": self._next}

    def __setstate__(self, state: dict) -> None:
        self.ids, self.pieces = state["ids"], state["pieces"]
        self.texts = weakref.WeakValueDictionary()
        self._next = state["next"]

    def new_id(self, sep: str, piece: str) -> int:
        i, self._next = self._next, self._next - 1
        self.pieces[i] = (sep, piece)
        return i

    def piece_id(self, tid: int, sep: str, piece: str) -> int:
        key = (tid, sep, piece)
        if key not in self.ids:
            self.ids[key] = self.new_id(sep, piece)
        return self.ids[key]

    def join(self, ids: Sequence[int]) -> str:
        try:
            parts = [self.pieces[i] for i in ids]
        except KeyError as err:
            raise ValueError(
                f"piece id {err.args[0]} was not given out by this adapter, or the text it was cut "
                "from is gone: score the ids of a segmentation you still hold"
            ) from None
        return parts[0][1] + "".join(sep + piece for sep, piece in parts[1:]) if parts else ""


class StringClassifier(ModelAdapter):
    """A black box on strings, ``f(list[str]) -> scores`` (a hosted model, a pipeline...).

    The black box sees the user's own text: the full text exactly as given, and every
    sample as the original substrings of its tokens (read from the tokenizer's offsets),
    joined with a space where the text had whitespace before them. A re-decoded text
    would differ (``"Don't"`` -> ``"don ' t"`` with an uncased tokenizer) and could flip
    the model's answer. So that two texts never share what the model sees, the unit ids
    of a text's segmentation are this adapter's own, one per surface piece ("Great" and
    "great" are two, though an uncased tokenizer gives them one id); the explanation
    still reports the tokenizer's ids. Tokenizers without offsets (slow ones) fall back
    to ``decode`` for samples; with ``tokenizer=None`` texts are split on whitespace.
    ``deterministic=False`` declares a black box whose answers are random draws (a sampling
    LLM): every sample is then sent, repeats included, instead of each distinct one once.

    Example:
        >>> f = lambda texts: [[t.count("good") - t.count("bad")] for t in texts]
        >>> clf = StringClassifier(f)
        >>> seg = clf.segment("good good bad")
        >>> clf.score([[u[0] for u in seg.unit_ids]]).item()
        1.0
    """

    def __init__(
        self,
        func: Callable[[list[str]], object],
        tokenizer: object | None = None,
        *,
        class_names: Sequence[str] | None = None,
        batch_size: int = 64,
        max_length: int | None = None,
        deterministic: bool = True,
    ) -> None:
        check_tokenizer(tokenizer)
        self.func = func
        self.deterministic = bool(deterministic)
        self.tokenizer = tokenizer if tokenizer is not None else WhitespaceTokenizer()
        self.class_names = list(class_names) if class_names is not None else None
        self.batch_size = int(batch_size)
        self.max_length = max_length
        # One object, so that the shallow copies as_adapter makes share it (and its ids).
        self._vocab = _PieceVocabulary()

    def _cut(self, text: str) -> tuple[list[int], list[tuple[int, int]]] | None:
        """The tokenizer's ids of ``text`` and each token's (start, end) in it; None without offsets."""
        if isinstance(self.tokenizer, WhitespaceTokenizer):
            return self.tokenizer.encode(text), [m.span() for m in re.finditer(r"\S+", text)]
        if not getattr(self.tokenizer, "is_fast", False):
            return None
        enc = self.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        return list(enc["input_ids"]), list(enc["offset_mapping"])

    def segment(self, text_or_ids: str | Sequence[int] | torch.Tensor, granularity: str = "token") -> Segmentation:
        """Positions of a text, in this adapter's ids (see :meth:`relabel`), or of token ids.

        Hold the returned segmentation while its ids are scored: a text whose pieces do not
        give it back exactly (repeated whitespace...) is remembered only as long as it is.

        Example:
            >>> clf = StringClassifier(lambda texts: [[float(len(t))] for t in texts])
            >>> seg = clf.segment("Great  film")
            >>> clf.decode([i for u in seg.unit_ids for i in u])
            'Great  film'
        """
        if not isinstance(text_or_ids, str):
            ids = as_id_list(text_or_ids)
            if any(i < 0 for i in ids):
                raise ValueError(
                    "negative ids are a StringClassifier's own piece ids: explain the Segmentation "
                    "that segment() returned (or the text), not its ids"
                )
            return super().segment(ids, granularity)
        seg = super().segment(text_or_ids, granularity)
        return self.relabel(dataclasses.replace(seg, text=text_or_ids))

    def relabel(self, seg: Segmentation) -> Segmentation:
        """``seg`` in the ids this adapter scores: with the text and a tokenizer that gives
        offsets (a fast one, or the :class:`WhitespaceTokenizer`), one id per surface piece of
        the text, so that what the model sees for a sample depends on this text alone; the
        tokenizer's ids move to ``token_ids``.

        Without the text the ids stay the tokenizer's, decoded for the model. Without
        offsets (slow tokenizers) they stay too, and only the full text is remembered, by
        its ids (two texts with the same ids: the later one).

        Raises:
            ValueError: the tokenizer does not cut the text into the segmentation's ids.

        Example:
            >>> clf = StringClassifier(lambda texts: [[float(len(t))] for t in texts])
            >>> tok = clf.tokenizer
            >>> seg = clf.relabel(Segmentation([(i,) for i in tok.encode("a  film")], ["a", "film"], text="a  film"))
            >>> clf.decode([i for u in seg.unit_ids for i in u])
            'a  film'
        """
        if seg.text is None:
            return super().relabel(seg)
        tids = seg.tokenizer_ids
        flat = [int(i) for u in tids for i in u]
        text = _NotedText(seg.text)
        cut = self._cut(str(text))
        if cut is None:
            self._vocab.texts[tuple(flat)] = text
            return Segmentation(list(tids), list(seg.tokens), text)
        if cut[0] != flat:
            raise ValueError(
                "the segmentation's token ids are not what the tokenizer cuts its text into: give "
                "text=None (the ids are then decoded), or segment the text with this tokenizer"
            )
        # A token's separator is its first occurrence's in this text (a token that starts
        # the text or follows whitespace starts a word): each piece then has one id, and
        # repeated tokens stay one unit, as the tokenizer's ids made them.
        pieces: list[tuple[int, str, str]] = []
        first_sep: dict[tuple[int, str], str] = {}
        end = 0
        for tid, (a, b) in zip(flat, cut[1]):
            # Byte-level tokenizers cut one character into several tokens whose offsets all
            # cover it: it is shown once, by the first of them.
            a = max(a, end)
            b = max(a, b)
            sep = first_sep.setdefault((tid, text[a:b]), " " if a > end or a == 0 else "")
            pieces.append((tid, sep, text[a:b]))
            end = b
        ids = [self._vocab.piece_id(*p) for p in pieces]
        if ids and self._vocab.join(ids) != text:
            # The pieces do not give the text back: its full sequence names it, made its own
            # by one id for this text alone, which goes when the text does.
            own = self._vocab.new_id(*pieces[0][1:])
            ids = [own if p == pieces[0] else i for p, i in zip(pieces, ids)]
            self._vocab.texts[tuple(ids)] = text
            weakref.finalize(text, self._vocab.pieces.pop, own, None).atexit = False
        it = iter(ids)
        return Segmentation([tuple(next(it) for _ in u) for u in tids], list(seg.tokens), text, token_ids=list(tids))

    def check_ids(self, ids: Sequence[int]) -> None:
        if isinstance(self.tokenizer, WhitespaceTokenizer) and max(ids) >= len(self.tokenizer._words):
            # Its ids are made up as texts are read: ids from elsewhere name no word.
            raise ValueError(
                f"token id {max(ids)} was given to a StringClassifier without a tokenizer, whose ids "
                "are made up as it reads texts: pass the text (a str), or give tokenizer= the "
                "tokenizer that produced the ids"
            )
        super().check_ids(ids)

    def decode(self, ids: Sequence[int]) -> str:
        """The text the black box sees for a sequence of ids (no special tokens): this
        adapter's piece ids (from :meth:`segment`) or the tokenizer's.

        Example:
            >>> clf = StringClassifier(lambda texts: [[float(len(t))] for t in texts])
            >>> seg = clf.segment("Good film, good plot")
            >>> clf.decode([seg.unit_ids[0][0], seg.unit_ids[2][0]])
            'Good good'
        """
        key = tuple(int(i) for i in ids)
        text = self._vocab.texts.get(key)
        if text is not None:
            return str(text)  # a plain str, exactly the text
        own = [i < 0 for i in key]
        if any(own):
            if not all(own):
                raise ValueError("a sequence mixes this adapter's piece ids (negative) with tokenizer ids")
            return self._vocab.join(key)
        if isinstance(self.tokenizer, WhitespaceTokenizer):
            return self.tokenizer.decode(key)
        return self.tokenizer.decode(list(key), skip_special_tokens=True)

    def score(self, sequences: Sequence[Sequence[int]]) -> torch.Tensor:
        return self.score_texts([self.decode(s) for s in sequences])

    def score_texts(self, texts: Sequence[str]) -> torch.Tensor:
        """The black box's raw outputs (B, K), float64, on texts as given, in batches.

        Example:
            >>> StringClassifier(lambda t: [[len(x)] for x in t]).score_texts(["ab", ""]).tolist()
            [[2.0], [0.0]]
        """
        outs = []
        for start in range(0, len(texts), self.batch_size):
            batch = [str(t) for t in texts[start : start + self.batch_size]]
            arr = _numeric(self.func(batch))
            out = score_matrix(arr if arr.dtype.kind == "f" else arr.astype(np.float64), len(batch))
            self._note_output_dtype(out.dtype)
            outs.append(out.to(torch.float64))
        if not outs:
            return torch.zeros((0, 0), dtype=torch.float64)
        return torch.cat(outs)


def _numeric(answer: object) -> np.ndarray:
    """A string model's answer as numbers; labels or dicts are refused, naming what came back.

    A pipeline called plainly answers ``[{"label": ..., "score": ...}]`` and a
    ``predict`` answers labels: neither is a score per class, and numpy's own error
    ("could not convert string to float") does not say which model output was wrong.
    """
    try:
        arr = np.asarray(answer)
    except ValueError:  # ragged rows: numpy's message does not say which answer was wrong
        rows = answer if isinstance(answer, (Sequence, np.ndarray)) else []
        widths = sorted({len(r) for r in rows if hasattr(r, "__len__") and not isinstance(r, str)})
        if len(widths) > 1:
            raise OutputShapeError(
                f"the string model returned rows of different lengths ({widths}): it must return the same "
                "number of scores, one per class, for every text"
            ) from None
        arr = np.asarray(answer, dtype=object)
    if arr.dtype.kind in "biuf":
        return arr
    if arr.dtype.kind != "c":  # complex scores are score_matrix's to refuse
        try:
            return arr.astype(np.float64)
        except (TypeError, ValueError):
            pass
        flat = arr.ravel()
        odd = next((x for x in flat if not isinstance(x, (int, float, np.number))), flat[0] if flat.size else answer)
        odd = odd.item() if isinstance(odd, np.generic) else odd  # 'POS', not np.str_('POS')
        what = (
            "labels (strings)"
            if isinstance(odd, (str, np.str_))
            else "dicts"
            if isinstance(odd, Mapping)
            else type(odd).__name__ + " objects"
        )
        raise TypeError(
            f"the string model returned {what}, e.g. {odd!r}, not numbers: it must return one score per "
            "class for each text, e.g. [[p_neg, p_pos], ...] (a pipeline: call it with top_k=None and "
            "take each dict's 'score' in label order)"
        )
    return arr
