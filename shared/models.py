"""Model adapters: the engine sees every model as "token-id sequences in, scores out".

An adapter does three things, and nothing else:

1. *segment* a text into positions (tokens, or words made of sub-tokens) with the ids the
   model understands;
2. *score* a batch of token-id sequences given **without** special tokens (the adapter adds
   the ones the model expects, pads, batches, and returns raw outputs as a (B, K) tensor);
3. leave the user's model exactly as it was (train/eval mode, device, dtype, grads).

Turning raw outputs into the log-odds that SLALOM fits is the job of :mod:`.link`.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import inspect
import re
import weakref
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from .link import pipeline_output_kind, warn_user

__all__ = [
    "Segmentation",
    "ModelAdapter",
    "HFClassifier",
    "TorchClassifier",
    "StringClassifier",
    "WhitespaceTokenizer",
    "as_adapter",
    "model_session",
    "is_pipeline",
    "is_hf_tokenizer",
    "module_of",
    "score_matrix",
    "model_max_length",
    "tokenizer_of",
    "check_device",
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


def is_pipeline(model: object) -> bool:
    """True for a transformers pipeline: :func:`as_adapter` explains the ``model`` inside
    it, with its ``tokenizer``, reading its logits.

    Only a real ``transformers`` Pipeline (by its class, without importing transformers):
    a user's function that merely holds a ``.model`` and a ``.tokenizer`` may change the
    text or the outputs, and explaining the model inside it would explain something else.

    Example:
        >>> is_pipeline(torch.nn.Linear(2, 2)), is_pipeline(len)
        (False, False)
    """
    return any(c.__name__ == "Pipeline" and c.__module__.startswith("transformers.") for c in type(model).__mro__)


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


def _as_id_list(ids: object) -> list[int]:
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


class ModelAdapter(ABC):
    """Base class: a classifier seen as token-id sequences in, raw scores (B, K) out.

    Subclasses implement :meth:`score`. ``batch_size`` is the number of sequences per
    forward pass; ``max_length`` the longest input the model accepts, special tokens
    included (None = unlimited).

    Example:
        >>> import torch
        >>> class Lengths(ModelAdapter):  # scores a sequence by its length
        ...     def score(self, sequences):
        ...         return torch.tensor([[0.0, float(len(s))] for s in sequences])
        >>> Lengths().score([[1, 2], [3]]).tolist()
        [[0.0, 2.0], [0.0, 1.0]]
    """

    tokenizer: object | None = None
    prefix_ids: tuple[int, ...] = ()
    suffix_ids: tuple[int, ...] = ()
    max_length: int | None = None
    class_names: list[str] | None = None
    batch_size: int = 64
    #: The least precise floating dtype the model has returned so far (None: not called
    #: yet, or Python numbers): how closely its probabilities can sum to 1 depends on it.
    output_dtype: torch.dtype | None = None
    #: What the user said the raw outputs are, ``(kind, description)``, where the model
    #: came with such a statement (a pipeline's ``function_to_apply``); see
    #: :func:`slalom_core.link.declared_output`.
    declared_output: tuple[str, str] | None = None

    def _note_output_dtype(self, dtype: torch.dtype) -> None:
        if dtype.is_floating_point and (
            self.output_dtype is None or torch.finfo(dtype).eps > torch.finfo(self.output_dtype).eps
        ):
            self.output_dtype = dtype

    def segment(self, text_or_ids: str | Sequence[int] | torch.Tensor, granularity: str = "token") -> Segmentation:
        """Positions of a text, or of token ids given without special tokens."""
        if isinstance(text_or_ids, str):
            if self.tokenizer is None:
                raise ValueError("this model adapter has no tokenizer: pass token ids, or give tokenizer=")
            seg = segment_text(self.tokenizer, text_or_ids, granularity)
        else:
            if granularity != "token":
                raise ValueError("granularity='word' needs the text, not token ids")
            ids = self._strip_frame(_as_id_list(text_or_ids))
            if not ids:
                raise ValueError("cannot explain an empty sequence of token ids")
            self.check_ids(ids)
            tok = self.tokenizer
            tokens = tok.convert_ids_to_tokens(ids) if hasattr(tok, "convert_ids_to_tokens") else map(str, ids)
            seg = Segmentation([(i,) for i in ids], list(tokens))
        self.check_length(seg.n_tokens)
        return seg

    def score_texts(self, texts: Sequence[str]) -> torch.Tensor:
        """Raw outputs (B, K) of whole texts, each cut into tokens as :meth:`segment` cuts it.

        The way to score texts through any adapter (a text's tokens, framed by the
        adapter's special tokens, as every sample is): a text with no tokens ("" or
        whitespace) is the empty input, the default reference point. Too long a text is
        refused as :meth:`segment` refuses it.

        Example:
            >>> class Lengths(ModelAdapter):
            ...     tokenizer = WhitespaceTokenizer()
            ...     def score(self, sequences):
            ...         return torch.tensor([[0.0, float(len(s))] for s in sequences])
            >>> Lengths().score_texts(["a great film", ""]).tolist()
            [[0.0, 3.0], [0.0, 0.0]]
        """
        if isinstance(texts, str):
            raise TypeError("score_texts takes a list of texts, not a single str")
        seqs = []
        for text in texts:
            if not isinstance(text, str):
                raise TypeError(f"every text must be a str, got {type(text).__name__}")
            empty = None if text.strip() else self.empty_sequence()
            if not text.strip() and empty is None:
                raise ValueError("this model has no input without tokens: it cannot score an empty text")
            seqs.append(empty if empty is not None else [i for u in self.segment(text).unit_ids for i in u])
        return self.score(seqs)

    def relabel(self, seg: Segmentation) -> Segmentation:
        """``seg`` in the ids :meth:`score` reads. Default: the tokenizer's ids, as they are
        (a segmentation relabelled by a :class:`StringClassifier` gets its tokenizer ids back).

        Called by ``explain`` on every :class:`Segmentation` it is given; :meth:`segment`
        returns segmentations already relabelled.

        Example:
            >>> class Lengths(ModelAdapter):
            ...     def score(self, sequences):
            ...         return torch.tensor([[0.0, float(len(s))] for s in sequences])
            >>> seg = Segmentation([(-1,), (-2,)], ["Great", "film"], token_ids=[(7,), (8,)])
            >>> Lengths().relabel(seg).unit_ids
            [(7,), (8,)]
        """
        if seg.token_ids is None:
            return seg
        return dataclasses.replace(seg, unit_ids=list(seg.token_ids), token_ids=None)

    def _strip_frame(self, ids: list[int]) -> list[int]:
        # Ids straight from ``tokenizer(text)`` carry the special tokens the adapter adds
        # itself; wrapped again, [CLS]/[SEP] would be explained as content. A row of a
        # padded batch also carries padding, which would be explained as tokens: drop it
        # first, where the pad token is its own (GPT-2 pads with its end-of-text token, and
        # ``pad_token = unk_token`` is common: either may be content).
        pad = getattr(self.tokenizer, "pad_token_id", None)
        others = [getattr(self.tokenizer, f"{n}_token_id", None) for n in ("bos", "eos", "unk")]
        if isinstance(pad, int) and pad not in others:
            lo, hi = 0, len(ids)
            while lo < hi and ids[lo] == pad:
                lo += 1
            while hi > lo and ids[hi - 1] == pad:
                hi -= 1
            ids = ids[lo:hi]
        pre, suf = list(self.prefix_ids), list(self.suffix_ids)
        if pre and ids[: len(pre)] == pre:
            ids = ids[len(pre) :]
        if suf and ids[-len(suf) :] == suf:
            ids = ids[: -len(suf)]
        return ids

    def vocab_size(self) -> tuple[int, str] | None:
        """How many token ids the model reads (0 .. n-1) and what says so; None if unknown.

        Here the tokenizer's vocabulary; a torch model's input embedding overrides it.
        """
        tok = self.tokenizer
        if isinstance(tok, WhitespaceTokenizer):
            return len(tok._words), "the words its WhitespaceTokenizer has seen"
        if is_hf_tokenizer(tok):
            try:
                return len(tok), "the tokenizer's vocabulary"  # type: ignore[arg-type]
            except TypeError:  # a tokenizer-like object without a length
                return None
        return None

    def check_ids(self, ids: Sequence[int]) -> None:
        """Refuse token ids the model cannot read, before any model call: negative ids, and
        ids outside its vocabulary where that is known (an embedding lookup would fail
        with an IndexError, or an overflow, far from the cause)."""
        low = min(ids)
        if low < 0:
            raise ValueError(f"token ids must be >= 0, got {low}: give the ids the model's tokenizer produced")
        known = self.vocab_size()
        if known is not None and max(ids) >= known[0]:
            raise ValueError(
                f"token id {max(ids)} is outside the model's vocabulary ({known[0]} ids, 0..{known[0] - 1}: "
                f"{known[1]}): give the ids the model's own tokenizer produced"
            )

    def check_length(self, n_tokens: int) -> None:
        """Raise if ``n_tokens`` content tokens plus special tokens exceed the model's limit."""
        total = n_tokens + len(self.prefix_ids) + len(self.suffix_ids)
        if self.max_length is not None and total > self.max_length:
            raise ValueError(
                f"the text has {n_tokens} tokens ({total} with special tokens) but the model "
                f"accepts at most {self.max_length}; truncate or split the text"
            )

    @contextlib.contextmanager
    def session(self) -> Iterator[None]:
        """Context in which :meth:`score` may be called (eval mode, device); restores after."""
        yield

    @abstractmethod
    def score(self, sequences: Sequence[Sequence[int]]) -> torch.Tensor:
        """Raw outputs, float64 (B, K) on the CPU, for sequences without special tokens."""

    def empty_sequence(self) -> list[int] | None:
        """The content of "the input with no tokens", scored as the default reference point.

        ``[]``: the model's special tokens alone (BERT's ``[CLS] [SEP]``), or the empty string
        for a string black box. None where the model has no such input.
        """
        return []

    def n_tokens_scored(self, sequences: Sequence[Sequence[int]]) -> int:
        """Tokens the model reads for these sequences (special tokens included)."""
        extra = len(self.prefix_ids) + len(self.suffix_ids)
        return int(sum(len(s) + extra for s in sequences))

    def estimate_cost(self, known: Sequence[Sequence[int]], bounds: Sequence[Sequence[int]] = ()) -> dict[str, int]:
        """What scoring would cost, without scoring: ``calls``, ``cache_hits``, ``input_tokens``.

        ``known`` are the sequences a method will score; ``bounds`` one upper-bound sequence
        per sample that is not known before the model answers. Here every sample is one
        model evaluation; adapters with a cache (API black boxes) count what it answers.
        """
        return {
            "calls": len(known) + len(bounds),
            "cache_hits": 0,
            "input_tokens": self.n_tokens_scored(known) + self.n_tokens_scored(bounds),
        }

    def check_budget(self, estimate: Mapping[str, int], what: str) -> None:
        """Raise before the first model call if ``estimate`` (from :meth:`estimate_cost`) is over budget.

        Called by ``explain`` when :meth:`usage` is not None. Default: no budget.
        """
        return None

    def usage(self) -> dict[str, int] | None:
        """Running totals (calls, cache hits, input tokens...) for adapters that pay per call; else None."""
        return None

    @property
    def fit_device(self) -> torch.device | None:
        """Where the fits of an explain call run: the model's device while a :meth:`session`
        is open (float64 there too, so a GPU model's texts are fitted on its GPU); None (the
        CPU) otherwise, and always for a black box, whose outputs are on the CPU anyway.

        Example:
            >>> class Lengths(ModelAdapter):
            ...     def score(self, sequences):
            ...         return torch.tensor([[0.0, float(len(s))] for s in sequences])
            >>> Lengths().fit_device is None
            True
        """
        return None


class _OutputShapeError(ValueError):
    """The output is not one row of scores per input: the model's error, so a forward batch
    that raises it is never retried one sample at a time (see ``_TorchModel``)."""


def score_matrix(output: object, n_rows: int, *, index: Sequence[int] = ()) -> torch.Tensor:
    """A model's output as a checked (n_rows, K) float score matrix: one row per input.

    Reads what classifiers return: a tensor or array, a Hugging Face ``ModelOutput`` (or
    any object or dict with ``logits``), or a tuple/list whose first element is the
    logits. The class axis is the last one; ``index`` picks one entry of each dimension
    between the batch and the classes (a model with several heads). One score per input,
    shape (n,) or (n, 1), is one column; a batch of one squeezed to (K,) is that one row.
    The result stays on the output's device and in its autograd graph, so gradient
    methods can use it; integer and boolean outputs become float64.

    Raises:
        ValueError: the output is not one row of scores per input (a model that drops,
            squeezes or reshapes rows would otherwise shift every later sample's target).
        FloatingPointError: NaN or inf scores, which no fit can use.
        TypeError: complex scores.

    Example:
        >>> score_matrix(torch.tensor([0.5, -1.0]), 2).tolist()
        [[0.5], [-1.0]]
        >>> score_matrix({"logits": torch.zeros(3, 2, 4)}, 3, index=(1,)).shape
        torch.Size([3, 4])
    """
    if isinstance(n_rows, bool) or not isinstance(n_rows, int) or n_rows < 0:
        raise ValueError(f"n_rows must be a non-negative int, got {n_rows!r}")
    if hasattr(output, "logits"):
        output = output.logits
    elif isinstance(output, Mapping) and "logits" in output:
        output = output["logits"]
    elif isinstance(output, (tuple, list)) and output and isinstance(output[0], (torch.Tensor, np.ndarray)):
        # (logits, hidden states, ...); a plain list of numbers is one score per input.
        output = output[0]
    # A numpy view with negative strides (``scores[:, ::-1]``) is a valid answer that torch
    # cannot wrap: copy it into a plain array first.
    t = torch.as_tensor(np.ascontiguousarray(output) if isinstance(output, np.ndarray) else output)
    if t.dtype.is_complex:
        raise TypeError(f"the model returned complex scores ({t.dtype}); SLALOM needs real ones")
    if not t.dtype.is_floating_point:
        t = t.to(torch.float64)
    if index:
        if t.ndim < len(index) + 2:
            raise _OutputShapeError(
                f"index {tuple(index)} needs an output with {len(index) + 2} or more dimensions, got shape {tuple(t.shape)}"
            )
        t = t[(slice(None), *(int(i) for i in index))]
    if t.ndim == 0 and n_rows == 1:
        t = t.reshape(1, 1)
    elif t.ndim == 1:
        t = t[None, :] if n_rows == 1 and t.numel() > 1 else t[:, None]
    if t.ndim != 2:
        raise _OutputShapeError(
            f"the model returned scores of shape {tuple(t.shape)}; SLALOM needs (batch, classes), "
            "one row per input (select extra output dimensions with index=)"
        )
    if t.shape[0] != n_rows:
        raise _OutputShapeError(
            f"the model returned {t.shape[0]} rows of scores for {n_rows} inputs; expected one row per input"
        )
    finite = torch.isfinite(t).all(dim=1)
    if not bool(finite.all()):
        bad = (~finite).nonzero().flatten().tolist()
        raise FloatingPointError(
            f"the model returned non-finite scores (NaN or inf) for {len(bad)} of {n_rows} inputs, "
            f"e.g. rows {bad[:5]}; SLALOM cannot fit them"
        )
    return t


def input_vocab_size(module: torch.nn.Module | None) -> int | None:
    """The number of rows of a model's input embedding (Hugging Face's
    ``get_input_embeddings``); None for other modules, whose ids nothing here can bound."""
    get = getattr(module, "get_input_embeddings", None)
    if get is None:
        return None
    try:
        emb = get()
    except Exception:  # NotImplementedError for models without one: unknown, not an error
        return None
    n = getattr(emb, "num_embeddings", None)
    return int(n) if isinstance(n, int) else None


def module_of(func: object) -> torch.nn.Module | None:
    """The ``nn.Module`` behind a callable: itself, or the owner of a bound method.

    Example:
        >>> import torch
        >>> lin = torch.nn.Linear(2, 2)
        >>> module_of(lin.forward) is lin, module_of(len) is None
        (True, True)
    """
    if isinstance(func, torch.nn.Module):
        return func
    owner = getattr(func, "__self__", None)
    return owner if isinstance(owner, torch.nn.Module) else None


def check_device(device: torch.device | str) -> torch.device:
    """``device`` as a ``torch.device`` a model can be moved to and back from.

    Checked before the model is touched: the meta device holds no weights, so a model
    moved there could never be moved back.

    Example:
        >>> check_device("cpu")
        device(type='cpu')
    """
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as err:
        raise ValueError(f"device={device!r} is not a torch device ({err})") from None
    if dev.type == "meta":
        raise ValueError("device='meta' holds no weights: a model moved there could not be moved back")
    return dev


@contextlib.contextmanager
def model_session(
    module: torch.nn.Module | None,
    device: torch.device | str | None = None,
    *,
    equal_length_batches: bool = False,
) -> Iterator[torch.device]:
    """Run ``module`` as deployed (eval mode, on ``device``) and give it back unchanged.

    Yields the device inputs go to. On exit, even after an error, every submodule gets its
    own train/eval flag back (not just the top one: frozen parts kept in eval mode or
    MC-dropout layers left in train mode stay as they were) and a moved model returns to
    its device. With ``equal_length_batches`` a Hugging Face decoder classifier without
    ``config.pad_token_id`` (GPT-2) is allowed batches of one length (restored on exit).

    Example:
        >>> m = torch.nn.Sequential(torch.nn.Dropout(0.5)).train()
        >>> with model_session(m):
        ...     m.training
        False
        >>> m.training
        True
    """
    if module is None:
        yield torch.device(device or "cpu")
        return
    modes = [(m, m.training) for m in module.modules()]
    tensors = [*module.parameters(), *module.buffers()]
    devices = {t.device for t in tensors}
    old_device = next(iter(devices)) if len(devices) == 1 else None
    if len(devices) > 1 and device is not None:
        # Moving a model spread over several devices onto one and back would not restore
        # its placement.
        raise ValueError(
            f"the model is spread over {sorted(str(d) for d in devices)}; device= would move all of it: "
            "leave device=None to run it where it is"
        )
    target = check_device(device) if device is not None else old_device
    cfg = getattr(module, "config", None)
    patch_pad = equal_length_batches and cfg is not None and hasattr(cfg, "pad_token_id") and cfg.pad_token_id is None
    moved = False
    try:
        module.eval()
        if target is not None and old_device is not None and target != old_device:
            moved = True
            module.to(target)
        if patch_pad:
            # HF decoder classifiers refuse batches > 1 without config.pad_token_id, even
            # unpadded ones. Batches of one length never pad, so an id that never occurs
            # (-1) makes the model pool at the true last token.
            cfg.pad_token_id = -1
        # Inputs go where the first parameter is (the CPU for a model without any).
        yield target or (tensors[0].device if tensors else torch.device("cpu"))
    finally:
        if patch_pad:
            cfg.pad_token_id = None
        if moved:
            module.to(old_device)
        for m, flag in modes:
            m.training = flag


class _TorchModel(ModelAdapter):
    """Batching, padding and the eval-mode/device session shared by torch-based adapters."""

    module: torch.nn.Module | None
    device: torch.device | str | None
    _run_device: torch.device | None = None
    pad_id: int
    equal_length_batches: bool
    #: Set once the model failed on a batch but ran on one sample (see :meth:`_forward_scores`).
    _one_by_one: bool = False

    @contextlib.contextmanager
    def session(self) -> Iterator[None]:
        with model_session(self.module, self.device, equal_length_batches=self.equal_length_batches) as device:
            self._run_device = device
            try:
                yield
            finally:
                self._run_device = None

    @property
    def fit_device(self) -> torch.device | None:
        return self._run_device

    def vocab_size(self) -> tuple[int, str] | None:
        n = input_vocab_size(self.module)
        return (n, "the model's input embedding") if n is not None else super().vocab_size()

    def empty_sequence(self) -> list[int] | None:
        if self.prefix_ids or self.suffix_ids:
            return []
        # A model whose inputs carry no special tokens (GPT-2) cannot read zero tokens:
        # its begin/end-of-text token is the input that carries no content. Otherwise the
        # model is asked for zero tokens (if it fails, the error asks for a reference).
        for name in ("bos_token_id", "eos_token_id"):
            tid = getattr(self.tokenizer, name, None)
            if isinstance(tid, int):
                return [tid]
        return []

    def _batches(self, sequences: Sequence[Sequence[int]]) -> list[list[int]]:
        """Index batches, sorted by length so that padding is minimal.

        With ``equal_length_batches`` (models that cannot mask padding, e.g. GPT-2 without a
        pad token) a batch only ever holds sequences of one length: no padding at all.
        """
        order = sorted(range(len(sequences)), key=lambda i: len(sequences[i]))
        batches: list[list[int]] = []
        real = 0  # tokens in the current batch before padding
        for i in order:
            n = len(sequences[i]) + len(self.prefix_ids) + len(self.suffix_ids)
            if batches and len(batches[-1]) < self.batch_size:
                if self.equal_length_batches:
                    fits = len(sequences[batches[-1][0]]) == len(sequences[i])
                else:
                    # Sorted by length, the newcomer sets the padded width: start a new
                    # batch rather than pad more than half of it (one full text among
                    # 2-token samples once made a batch 60x more expensive).
                    fits = n * (len(batches[-1]) + 1) <= 1.5 * (real + n)
                if fits:
                    batches[-1].append(i)
                    real += n
                    continue
            batches.append([i])
            real = n
        return batches

    @abstractmethod
    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> object:
        """One raw call of the wrapped model on full rows (special tokens included).

        No batching, padding, gradient switch or output conversion: the model's own output
        (e.g. a ``SequenceClassifierOutput``) comes back, differentiable. Evaluation code
        uses it to run gradient baselines through exactly the call the engine makes
        (token-type ids included), inside :meth:`session`.

        Example:
            >>> with clf.session():  # doctest: +SKIP
            ...     logits = clf.forward(ids, torch.ones_like(ids)).logits
        """

    def _forward_scores(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """:meth:`forward` on one batch as a checked (B, K) score matrix.

        A model that fails on a batch but runs on a single sample (a GPT-2 classifier
        without a pad token behind a closure refuses every batch > 1) is then called one
        sample at a time, with a warning, so that the default batch size works on every
        architecture; if one sample fails too, the batch's error is raised. NaN scores, or
        not one row of scores per input, are the model's answer, not a batching problem:
        they raise at once.
        """
        n = ids.shape[0]
        if self._one_by_one and n > 1:
            return torch.cat([self._one_sample(ids, mask, r) for r in range(n)])
        try:
            return score_matrix(self.forward(ids, mask), n).detach()
        except (FloatingPointError, _OutputShapeError):
            raise
        except Exception as err:
            if n == 1:
                raise
            try:
                first = self._one_sample(ids, mask, 0)
            except Exception:
                raise err from None
            warn_user(
                f"the model failed on a batch of {n} samples ({type(err).__name__}: {err}) but runs on one: "
                "evaluating one sample per call from here on (as with a batch size of 1)",
                UserWarning,
            )
            self._one_by_one = True
            return torch.cat([first, *(self._one_sample(ids, mask, r) for r in range(1, n))])

    def _one_sample(self, ids: torch.Tensor, mask: torch.Tensor, r: int) -> torch.Tensor:
        # Row r alone, without the right-padding its batch gave it: a model that cannot take
        # batches is likely blind to padding too (GPT-2 reads its last position).
        width = int(mask[r].sum()) or ids.shape[1]
        return self._forward_scores(ids[r : r + 1, :width], mask[r : r + 1, :width])

    def score(self, sequences: Sequence[Sequence[int]]) -> torch.Tensor:
        if len(sequences) == 0:
            return torch.zeros((0, 0), dtype=torch.float64)
        if self._run_device is None:
            # Called on its own (not from explain): set up and restore the model here.
            with self.session():
                return self.score(sequences)
        device = self._run_device
        results: list[torch.Tensor | None] = [None] * len(sequences)
        pre, suf = list(self.prefix_ids), list(self.suffix_ids)
        for batch in self._batches(sequences):
            rows = [pre + list(sequences[i]) + suf for i in batch]
            width = max(len(r) for r in rows)
            # Filled in numpy and converted once: per-row torch.tensor calls cost more
            # than a forward pass of a short batch.
            ids_np = np.full((len(rows), width), self.pad_id, dtype=np.int64)
            mask_np = np.zeros((len(rows), width), dtype=np.int64)
            for j, r in enumerate(rows):
                ids_np[j, : len(r)] = r
                mask_np[j, : len(r)] = 1
            ids, mask = torch.from_numpy(ids_np), torch.from_numpy(mask_np)
            with torch.inference_mode():
                try:
                    out = self._forward_scores(ids.to(device), mask.to(device))
                except IndexError as err:
                    # A plain module's vocabulary is not known before the call (see
                    # check_ids); an embedding lookup past its end fails here.
                    raise IndexError(
                        f"the model failed with IndexError ({err}) on token ids {int(ids.min())}..{int(ids.max())}: "
                        "ids outside the model's vocabulary (its embedding) are the usual cause; give the ids "
                        "the model's own tokenizer produced"
                    ) from err
                self._note_output_dtype(out.dtype)
                out = out.to("cpu", torch.float64)
            for j, i in enumerate(batch):
                results[i] = out[j]
        return torch.stack(results)  # type: ignore[arg-type]


class TorchClassifier(_TorchModel):
    """Any torch callable ``f(input_ids, attention_mask) -> logits``.

    Args:
        forward_func: the callable (an ``nn.Module`` is put in eval mode while explaining
            and restored afterwards). It may return a tensor, a tuple whose first element
            is the logits, or an object with ``.logits``.
        prefix_ids / suffix_ids: special token ids wrapped around every sample
            (default: none).
        pad_id: id used to pad batches (padding is masked by ``attention_mask``).
        tokenizer: optional, to explain strings instead of token ids.
        max_length: longest accepted input, special tokens included.
        pads_safely: False if the callable ignores ``attention_mask``; batches then hold
            sequences of one length only.
        module: the ``nn.Module`` to run in eval mode (and move to ``device``) while
            explaining. Default: ``forward_func`` itself if it is a module, or the module
            a bound method such as ``model.forward`` belongs to.

    Example:
        >>> f = lambda ids, mask: (ids == 5).float().sum(1, keepdim=True)
        >>> TorchClassifier(f).score([[5, 5], [1]]).squeeze(1).tolist()
        [2.0, 0.0]
    """

    def __init__(
        self,
        forward_func: Callable[..., object],
        *,
        prefix_ids: Sequence[int] = (),
        suffix_ids: Sequence[int] = (),
        pad_id: int = 0,
        tokenizer: object | None = None,
        max_length: int | None = None,
        class_names: Sequence[str] | None = None,
        batch_size: int = 64,
        device: torch.device | str | None = None,
        pads_safely: bool = True,
        module: torch.nn.Module | None = None,
    ) -> None:
        check_tokenizer(tokenizer)
        self.forward_func = forward_func
        self.module = module if module is not None else module_of(forward_func)
        self.prefix_ids = tuple(int(i) for i in prefix_ids)
        self.suffix_ids = tuple(int(i) for i in suffix_ids)
        self.pad_id = int(pad_id)
        self.tokenizer = tokenizer
        self.max_length = max_length
        self.class_names = list(class_names) if class_names is not None else None
        self.batch_size = int(batch_size)
        self.device = device
        self.equal_length_batches = not pads_safely

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> object:
        return self.forward_func(input_ids, attention_mask)


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


def model_max_length(model: torch.nn.Module | None, tokenizer: object | None) -> int | None:
    """The longest input (special tokens included) the model or its tokenizer declares; None if neither does.

    Example:
        >>> from types import SimpleNamespace
        >>> model_max_length(SimpleNamespace(config=SimpleNamespace(max_position_embeddings=512)), None)
        512
    """
    limits = []
    tok_max = getattr(tokenizer, "model_max_length", None)
    if isinstance(tok_max, int) and tok_max < 1_000_000:  # HF uses ~1e30 for "unknown"
        limits.append(tok_max)
    cfg = getattr(model, "config", None)
    for attr in ("max_position_embeddings", "n_positions"):
        val = getattr(cfg, attr, None)
        if isinstance(val, int) and val > 0:
            # RoBERTa reserves padding_idx + 1 positions at the start of its table.
            offset = (
                (getattr(cfg, "pad_token_id", 0) or 0) + 1
                if getattr(cfg, "model_type", "") in ("roberta", "xlm-roberta", "camembert")
                else 0
            )
            limits.append(val - offset)
            break
    return min(limits) if limits else None


class HFClassifier(_TorchModel):
    """A Hugging Face sequence classifier with its tokenizer.

    Special tokens come from the tokenizer; padding uses the tokenizer's (or config's) pad
    id. A model whose config has no ``pad_token_id`` (GPT-2 out of the box) cannot find the
    last real token in a padded batch, so its batches hold sequences of one length only.

    Example:
        >>> adapter = HFClassifier(model, tokenizer)  # doctest: +SKIP
        >>> adapter.score([[2307, 3185]])  # "great movie" -> (1, num_labels) logits  # doctest: +SKIP
    """

    def __init__(
        self,
        model: torch.nn.Module,
        tokenizer: object,
        *,
        batch_size: int = 64,
        device: torch.device | str | None = None,
        max_length: int | None = None,
    ) -> None:
        if tokenizer is None:
            raise ValueError("a Hugging Face model needs its tokenizer: pass tokenizer=")
        check_tokenizer(tokenizer)
        self.model = self.module = model
        self.tokenizer = tokenizer
        self.prefix_ids, self.suffix_ids = special_token_frame(tokenizer)
        cfg = getattr(model, "config", None)
        cfg_pad = getattr(cfg, "pad_token_id", None)
        tok_pad = getattr(tokenizer, "pad_token_id", None)
        # Decoder classifiers (GPT-2) pool at the last token that is not config.pad_token_id:
        # pad with exactly that id, and where the config has none, never pad at all.
        self.equal_length_batches = cfg_pad is None
        self.pad_id = int(cfg_pad if cfg_pad is not None else (tok_pad if tok_pad is not None else 0))
        self.max_length = max_length if max_length is not None else model_max_length(model, tokenizer)
        id2label = getattr(cfg, "id2label", None)
        n = getattr(cfg, "num_labels", None)
        self.class_names = [str(id2label[i]) for i in range(n)] if id2label and n and len(id2label) == n else None
        self.batch_size = int(batch_size)
        self.device = device
        params = inspect.signature(model.forward).parameters
        self._wants_token_types = "token_type_ids" in params and "token_type_ids" in getattr(
            tokenizer, "model_input_names", []
        )

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> object:
        kwargs = {"input_ids": input_ids, "attention_mask": attention_mask}
        if self._wants_token_types:
            # A single text is segment 0 throughout.
            kwargs["token_type_ids"] = torch.zeros_like(input_ids)
        return self.model(**kwargs)


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
    ) -> None:
        check_tokenizer(tokenizer)
        self.func = func
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
            ids = _as_id_list(text_or_ids)
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
    except ValueError:  # ragged rows: score_matrix's shape check cannot see them otherwise
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


def as_adapter(
    model: object,
    tokenizer: object | None = None,
    *,
    batch_size: int | None = None,
    device: torch.device | str | None = None,
) -> ModelAdapter:
    """Wrap ``model`` in the adapter that fits it.

    - a :class:`ModelAdapter`: used as is (``batch_size``/``device`` override its own);
    - a transformers pipeline: its model and tokenizer;
    - a transformers ``PreTrainedModel``: :class:`HFClassifier` (needs ``tokenizer``);
    - any other ``torch.nn.Module``: :class:`TorchClassifier`, called as ``f(ids, mask)``.

    Plain functions are ambiguous (token ids or strings?): wrap them yourself in
    :class:`TorchClassifier` or :class:`StringClassifier`.

    Example:
        >>> import torch
        >>> net = torch.nn.Sequential(torch.nn.Embedding(10, 4), torch.nn.Flatten(), torch.nn.LazyLinear(2))
        >>> type(as_adapter(net)).__name__
        'TorchClassifier'
    """
    check_tokenizer(tokenizer)
    if isinstance(model, ModelAdapter):
        # A shallow copy: overriding batch_size/device must not change the caller's object.
        adapter = copy.copy(model)
    elif is_pipeline(model):
        adapter = HFClassifier(model.model, tokenizer or model.tokenizer)
        # The logits are read, not what the pipeline makes of them: its function_to_apply
        # still says what they are (independent labels or classes).
        adapter.declared_output = pipeline_output_kind(model)
    elif isinstance(model, torch.nn.Module) and hasattr(model, "config") and hasattr(model, "can_generate"):
        adapter = HFClassifier(model, tokenizer)
    elif isinstance(model, torch.nn.Module):
        adapter = TorchClassifier(model, tokenizer=tokenizer)
    else:
        raise TypeError(
            f"cannot explain a {type(model).__name__}: pass a Hugging Face model (with tokenizer=), "
            "a torch.nn.Module, or wrap a function in slalom_core.TorchClassifier (token ids -> logits) "
            "or slalom_core.StringClassifier (list[str] -> scores)"
        )
    if batch_size is not None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        adapter.batch_size = int(batch_size)
    if device is not None:
        if not hasattr(adapter, "device"):
            raise ValueError(f"{type(adapter).__name__} does not run on a torch device")
        adapter.device = check_device(device)
    return adapter
