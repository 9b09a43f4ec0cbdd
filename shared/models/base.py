"""The adapter contract: :class:`ModelAdapter`, a classifier seen as token-id sequences in, raw scores out.

An adapter does three things, and nothing else:

1. *segment* a text into positions (tokens, or words made of sub-tokens) with the ids the
   model understands;
2. *score* a batch of token-id sequences given **without** special tokens (the adapter adds
   the ones the model expects, pads, batches, and returns raw outputs as a (B, K) tensor);
3. leave the user's model exactly as it was (train/eval mode, device, dtype, grads).

The hooks a paid endpoint needs (cost estimates, budgets, usage) have neutral defaults here.
Turning raw outputs into the log-odds that SLALOM fits is the job of :mod:`slalom_core.link`.
"""

from __future__ import annotations

import contextlib
import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence

import torch

from .segmentation import Segmentation, WhitespaceTokenizer, as_id_list, is_hf_tokenizer, segment_text

__all__ = ["ModelAdapter"]


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
    #: Whether one sequence always gets one output. Then an explanation reads each distinct
    #: sample once (a short text's samples repeat). False for a model whose outputs are random draws
    #: (sampling, dropout left on): every sample is then read, a fresh draw each time.
    deterministic: bool = True

    def _note_output_dtype(self, dtype: torch.dtype) -> None:
        if dtype.is_floating_point and (
            self.output_dtype is None or torch.finfo(dtype).eps > torch.finfo(self.output_dtype).eps
        ):
            self.output_dtype = dtype

    def segment(self, text_or_ids: str | Sequence[int] | torch.Tensor, granularity: str = "token") -> Segmentation:
        """Positions of a text, or of token ids given without special tokens; too long a
        text for the model is refused (:meth:`segment_within_length` cuts it instead)."""
        seg = self._positions(text_or_ids, granularity)
        self.check_length(seg.n_tokens)
        return seg

    def _positions(self, text_or_ids: str | Sequence[int] | torch.Tensor, granularity: str) -> Segmentation:
        """Positions of a text or of token ids, whatever their length."""
        if isinstance(text_or_ids, str):
            if self.tokenizer is None:
                raise ValueError("this model adapter has no tokenizer: pass token ids, or give tokenizer=")
            seg = segment_text(self.tokenizer, text_or_ids, granularity)
        else:
            if granularity != "token":
                raise ValueError("granularity='word' needs the text, not token ids")
            ids = self._strip_frame(as_id_list(text_or_ids))
            if not ids:
                raise ValueError("cannot explain an empty sequence of token ids")
            self.check_ids(ids)
            tok = self.tokenizer
            tokens = tok.convert_ids_to_tokens(ids) if hasattr(tok, "convert_ids_to_tokens") else map(str, ids)
            seg = Segmentation([(i,) for i in ids], list(tokens))
        return seg

    def segment_within_length(
        self,
        text: str | Sequence[int] | torch.Tensor | Segmentation,
        granularity: str = "token",
        *,
        truncate: bool = True,
    ) -> tuple[Segmentation, int]:
        """A text's positions cut to what the model accepts, and how many were cut off: the
        one cutting rule of every entry point that cuts (``explain(..., truncate=True)``,
        corpus runs, the command line, the amortized explainer).

        With ``truncate`` (and a ``max_length``), a text too long keeps its first positions
        that fit beside the special tokens (a word is never split); without, it is refused
        as :meth:`segment` refuses it. Token ids and a :class:`Segmentation` are cut the same
        way (a segmentation given whole comes back as it is; :meth:`relabel` it to score it).

        Example:
            >>> class Lengths(ModelAdapter):
            ...     tokenizer, max_length = WhitespaceTokenizer(), 3
            ...     def score(self, sequences):
            ...         return torch.tensor([[0.0, float(len(s))] for s in sequences])
            >>> seg, cut = Lengths().segment_within_length("a very long text")
            >>> seg.tokens, cut
            (['a', 'very', 'long'], 1)
        """
        whole = isinstance(text, Segmentation)
        if not truncate or self.max_length is None:
            if whole:
                self.check_length(text.n_tokens)
                return text, 0
            return self.segment(text, granularity), 0
        seg = text if whole else self._positions(text, granularity)
        room = self.max_length - len(self.prefix_ids) - len(self.suffix_ids)
        keep, used = 0, 0
        for unit in seg.unit_ids:
            if used + len(unit) > room:
                break
            keep, used = keep + 1, used + len(unit)
        if keep == len(seg.unit_ids):
            # The whole text: the adapter's own cut, which keeps the text (a model on strings
            # then sees its spelling, not decoded ids).
            return (text if whole else self.segment(text, granularity)), 0
        ids = None if seg.token_ids is None else seg.token_ids[:keep]
        return Segmentation(seg.unit_ids[:keep], seg.tokens[:keep], token_ids=ids), len(seg.unit_ids) - keep

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
                f"accepts at most {self.max_length}: truncate=True (--truncate on the command line) keeps its "
                "first tokens that fit, or split the text"
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
        per sample that is not known before the model answers. Here every known sequence is
        one model evaluation (the driver's plan lists each sequence it reads once: see
        :func:`~slalom_core.api.cost.planned_cost`); adapters with a cache (API black boxes)
        count what it answers.
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
