"""Cutting a text into the positions SLALOM explains: :class:`Segmentation`, tokenizers.

A position is a token (or, at word granularity, a word made of sub-tokens) with the ids
the model reads. Nothing here calls a model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

__all__ = [
    "GRANULARITIES",
    "Segmentation",
    "check_segmentation",
    "WhitespaceTokenizer",
    "is_hf_tokenizer",
    "check_tokenizer",
    "segment_text",
    "as_id_list",
    "special_token_frame",
    "tokenizer_of",
]


GRANULARITIES = ("token", "word")


@dataclass
class Segmentation:
    """A text cut into the positions SLALOM explains.

    Attributes:
        unit_ids: per position, the token ids that make it up (one id at token
            granularity, a word's sub-tokens at word granularity).
        tokens: per position, a display string.
        text: the text these positions were cut from, if known: a model on strings then
            sees its original substrings (see :class:`StringClassifier`), not decoded ids.
        token_ids: per position, the tokenizer's ids, where ``unit_ids`` are an adapter's
            own (a :class:`StringClassifier` names each surface piece of a text, so that
            "Great" and "great" are told apart); None: ``unit_ids`` are the tokenizer's.
            Explanations report these (:attr:`tokenizer_ids`).

    Example:
        >>> seg = Segmentation(unit_ids=[(7,), (8, 9)], tokens=["great", "film"])
        >>> seg.n_tokens, seg.tokenizer_ids
        (3, [(7,), (8, 9)])
    """

    unit_ids: list[tuple[int, ...]]
    tokens: list[str]
    text: str | None = None
    token_ids: list[tuple[int, ...]] | None = None

    def __post_init__(self) -> None:
        if self.token_ids is not None and [len(u) for u in self.token_ids] != [len(u) for u in self.unit_ids]:
            raise ValueError("token_ids must have one id per id of unit_ids, position by position")

    @property
    def tokenizer_ids(self) -> list[tuple[int, ...]]:
        """Per position, the tokenizer's ids (``token_ids`` where given, else ``unit_ids``)."""
        return self.unit_ids if self.token_ids is None else self.token_ids

    @property
    def n_tokens(self) -> int:
        return sum(len(u) for u in self.unit_ids)


def check_segmentation(seg: Segmentation) -> None:
    """Refuse a hand-made :class:`Segmentation` the fitters would misread, before any model call.

    Args:
        seg: the segmentation handed to ``explain``.

    Returns:
        None; a TypeError or ValueError names the first malformed position.

    Example:
        >>> check_segmentation(Segmentation([[7], [8]], ["great", "film"]))
        Traceback (most recent call last):
        ...
        TypeError: Segmentation.unit_ids[0] must be a tuple of int token ids, got list [7]
    """
    units, tokens = seg.unit_ids, seg.tokens
    if isinstance(tokens, str) or not isinstance(tokens, Sequence):
        raise TypeError(f"Segmentation.tokens must be a list of strings, one per position, got {type(tokens).__name__}")
    if not isinstance(units, Sequence) or not units:
        raise ValueError("the Segmentation has no positions: there is nothing to explain")
    for k, unit in enumerate(units):
        if not isinstance(unit, tuple):
            raise TypeError(
                f"Segmentation.unit_ids[{k}] must be a tuple of int token ids, got {type(unit).__name__} {unit!r}"
            )
        if not unit:
            raise ValueError(f"Segmentation.unit_ids[{k}] is empty: every position needs at least one token id")
        bad = [i for i in unit if isinstance(i, (bool, np.bool_)) or not isinstance(i, (int, np.integer))]
        if bad:
            raise TypeError(f"Segmentation.unit_ids[{k}] must hold ints, got {type(bad[0]).__name__} {bad[0]!r}")
    if len(tokens) != len(units):
        raise ValueError(
            f"the Segmentation has {len(units)} unit_ids but {len(tokens)} tokens: give one display string per position"
        )


class WhitespaceTokenizer:
    """A tokenizer for string black boxes: words split on whitespace, ids made up on the fly.

    The vocabulary grows as texts are seen, so ids are only meaningful for this instance;
    that is all a string model needs (ids go back to words by :meth:`decode`).

    Example:
        >>> tok = WhitespaceTokenizer()
        >>> tok.decode(tok.encode("good  movie"))
        'good movie'
    """

    def __init__(self) -> None:
        self._ids: dict[str, int] = {}
        self._words: list[str] = []

    def encode(self, text: str) -> list[int]:
        out = []
        for word in text.split():
            if word not in self._ids:
                self._ids[word] = len(self._words)
                self._words.append(word)
            out.append(self._ids[word])
        return out

    def decode(self, ids: Sequence[int]) -> str:
        return " ".join(self._words[int(i)] for i in ids)

    def convert_ids_to_tokens(self, ids: Sequence[int]) -> list[str]:
        return [self._words[int(i)] for i in ids]


def is_hf_tokenizer(tokenizer: object) -> bool:
    """True for a Hugging Face tokenizer (or one that works like it): callable on a text,
    with ``convert_ids_to_tokens``.

    Example:
        >>> is_hf_tokenizer(WhitespaceTokenizer())  # ids made up on the fly, not callable
        False
    """
    return hasattr(tokenizer, "convert_ids_to_tokens") and callable(tokenizer)


def check_tokenizer(tokenizer: object) -> None:
    """Refuse what cannot be a tokenizer (a dict, a model name...) where it is given.

    Anything callable or with ``convert_ids_to_tokens`` passes (the adapters read no more
    of it); otherwise the first use would fail far from the cause ("'dict' object is not
    callable").

    Example:
        >>> check_tokenizer({})
        Traceback (most recent call last):
        ...
        TypeError: tokenizer must be a tokenizer (e.g. AutoTokenizer.from_pretrained(name)) or None, got a dict
    """
    if tokenizer is None or isinstance(tokenizer, WhitespaceTokenizer):
        return
    if callable(tokenizer) or hasattr(tokenizer, "convert_ids_to_tokens"):
        return
    hint = f" ({tokenizer!r} looks like a name: load it first)" if isinstance(tokenizer, str) else ""
    raise TypeError(
        "tokenizer must be a tokenizer (e.g. AutoTokenizer.from_pretrained(name)) or None, "
        f"got a {type(tokenizer).__name__}{hint}"
    )


def segment_text(tokenizer: object, text: str, granularity: str = "token") -> Segmentation:
    """Cut ``text`` into positions with ``tokenizer`` (no special tokens).

    At ``granularity="word"`` the sub-tokens of one word form one position; this needs a
    fast Hugging Face tokenizer (for ``word_ids``) or the :class:`WhitespaceTokenizer`.

    Example:
        >>> seg = segment_text(WhitespaceTokenizer(), "a great film", granularity="word")
        >>> seg.tokens, len(seg.unit_ids)
        (['a', 'great', 'film'], 3)
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    if granularity not in GRANULARITIES:
        raise ValueError(f"unknown granularity {granularity!r}; choose one of {GRANULARITIES}")
    if not text.strip():
        raise ValueError("cannot explain an empty text")
    if isinstance(tokenizer, WhitespaceTokenizer):
        ids = tokenizer.encode(text)
        return Segmentation([(i,) for i in ids], text.split())
    if not is_hf_tokenizer(tokenizer):
        raise TypeError("a Hugging Face tokenizer (or WhitespaceTokenizer) is needed to segment text")
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=bool(getattr(tokenizer, "is_fast", False)))
    ids = list(enc["input_ids"])
    if not ids:
        raise ValueError(f"the tokenizer produced no tokens for {text!r}")
    if granularity == "token":
        return Segmentation([(i,) for i in ids], list(tokenizer.convert_ids_to_tokens(ids)))
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError("granularity='word' needs a fast tokenizer (word_ids); use token granularity")
    word_ids = enc.word_ids()
    offsets = enc["offset_mapping"]
    units: list[list[int]] = []
    spans: list[list[int]] = []
    last = object()
    for tid, wid, (start, end) in zip(ids, word_ids, offsets):
        # Tokens without a word id (rare: added tokens) form a word of their own.
        if wid is None or wid != last:
            units.append([])
            spans.append([start, end])
        units[-1].append(tid)
        spans[-1][1] = end
        last = wid
    return Segmentation([tuple(u) for u in units], [text[a:b] for a, b in spans])


def as_id_list(ids: object) -> list[int]:
    """Token ids as plain ints; anything that is not integer ids is an error, not a guess.

    bytes iterate as small ints and bools/floats convert to ints silently, so each would
    otherwise be explained as a made-up token sequence.
    """
    if isinstance(ids, (bytes, bytearray, memoryview)):
        raise TypeError("token ids must be integers, got bytes: decode the text and pass a str")
    if isinstance(ids, (torch.Tensor, np.ndarray)):
        dtype = ids.dtype
        is_int = (
            (not dtype.is_floating_point and not dtype.is_complex and dtype != torch.bool)
            if isinstance(ids, torch.Tensor)
            else np.issubdtype(dtype, np.integer)
        )
        if not is_int:
            raise TypeError(f"token ids must be integers, got dtype {dtype}")
        if ids.ndim != 1:
            raise ValueError(f"token ids must be 1-D, got shape {tuple(ids.shape)}")
        return [int(i) for i in ids.tolist()]
    if not isinstance(ids, Sequence):
        raise TypeError(f"expected a text (str) or a sequence of token ids, got {type(ids).__name__}")
    bad = [i for i in ids if isinstance(i, (bool, np.bool_)) or not isinstance(i, (int, np.integer))]
    if bad:
        raise TypeError(f"token ids must be ints, got {type(bad[0]).__name__} {bad[0]!r}")
    return [int(i) for i in ids]


def special_token_frame(tokenizer: object) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The special ids a tokenizer puts before and after a single text.

    Read off the tokenizer itself (never hard-coded): BERT gives ([CLS], [SEP]), RoBERTa
    (<s>, </s>), GPT-2 nothing.
    """
    probe = "hello"
    plain = list(tokenizer(probe, add_special_tokens=False)["input_ids"])
    full = list(tokenizer(probe, add_special_tokens=True)["input_ids"])
    for k in range(len(full) - len(plain) + 1):
        if full[k : k + len(plain)] == plain:
            return tuple(full[:k]), tuple(full[k + len(plain) :])
    raise ValueError("could not locate the text among the tokenizer's special tokens")


def tokenizer_of(model: object) -> object | None:
    """The tokenizer saved with a Hugging Face model, when it can be found without a download.

    A model loaded with ``from_pretrained`` records where it came from
    (``config.name_or_path``); its tokenizer is read from there, from local files only.
    None for anything else (a plain module, a function, a model built from a config).

    Example:
        >>> tokenizer_of(torch.nn.Linear(2, 2)) is None
        True
    """
    path = getattr(getattr(model, "config", None), "name_or_path", None)
    if not isinstance(path, str) or not path:
        return None
    try:
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(path, local_files_only=True)
    except Exception:  # no tokenizer saved there, or not in the local cache: none found
        return None
