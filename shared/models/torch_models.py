"""Torch models as adapters: the public base :class:`TorchModel` and its two ready-made
subclasses, :class:`TorchClassifier` (any ``f(ids, mask)``) and :class:`HFClassifier`.
"""

from __future__ import annotations

import contextlib
import inspect
from abc import abstractmethod
from collections.abc import Callable, Iterator, Sequence

import numpy as np
import torch

from ..warn import warn_user
from .base import ModelAdapter
from .reading import OutputShapeError, score_matrix
from .segmentation import check_tokenizer, special_token_frame
from .session import input_vocab_size, model_session, module_of

__all__ = ["TorchModel", "TorchClassifier", "HFClassifier", "model_max_length"]


class TorchModel(ModelAdapter):
    """The base of adapters whose model takes padded rows of token ids: batching, padding,
    the eval-mode/device session, and the checks of what the model returns.

    Subclass it and implement :meth:`forward` (one raw call on full rows, special tokens
    included); everything else is done here. :class:`TorchClassifier` and
    :class:`HFClassifier` are two such subclasses; ``docs/architecture.md`` shows a third,
    for an ONNX Runtime session.

    Args:
        tokenizer: to explain strings (else only token ids), and for the model's
            input with no tokens where it has no special tokens.
        prefix_ids, suffix_ids: special ids wrapped around every sample.
        pad_id: the id that pads a batch (masked by the attention mask).
        max_length: longest accepted input, special tokens included (None: unlimited).
        class_names: names of the model's outputs.
        batch_size: sequences per forward call.
        device: run the model there while explaining (moved back afterwards).
        pads_safely: False if the model ignores the attention mask: a batch then holds
            sequences of one length, never padded.
        module: the ``torch.nn.Module`` to run in eval mode and move to ``device`` while
            explaining (None: nothing to set up, e.g. a compiled runtime session).
        deterministic: False if the model's outputs are random draws (see
            :attr:`ModelAdapter.deterministic`): every sample is then read, duplicates included.

    Example:
        >>> class Counts(TorchModel):  # scores a row by how often id 5 occurs in it
        ...     def forward(self, input_ids, attention_mask):
        ...         return ((input_ids == 5) & (attention_mask == 1)).sum(1, keepdim=True).double()
        >>> Counts(prefix_ids=[1]).score([[5, 5], [2]]).squeeze(1).tolist()
        [2.0, 0.0]
    """

    _run_device: torch.device | None = None
    #: Set once the model failed on a batch but ran on one sample (see :meth:`_forward_scores`).
    _one_by_one: bool = False

    def __init__(
        self,
        *,
        tokenizer: object | None = None,
        prefix_ids: Sequence[int] = (),
        suffix_ids: Sequence[int] = (),
        pad_id: int = 0,
        max_length: int | None = None,
        class_names: Sequence[str] | None = None,
        batch_size: int = 64,
        device: torch.device | str | None = None,
        pads_safely: bool = True,
        module: torch.nn.Module | None = None,
        deterministic: bool = True,
    ) -> None:
        check_tokenizer(tokenizer)
        self.deterministic = bool(deterministic)
        self.module = module
        self.prefix_ids = tuple(int(i) for i in prefix_ids)
        self.suffix_ids = tuple(int(i) for i in suffix_ids)
        self.pad_id = int(pad_id)
        self.tokenizer = tokenizer
        self.max_length = max_length
        self.class_names = list(class_names) if class_names is not None else None
        self.batch_size = int(batch_size)
        self.device = device
        self.equal_length_batches = not pads_safely

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
        except (FloatingPointError, OutputShapeError):
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


class TorchClassifier(TorchModel):
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
        deterministic: False if the callable's outputs are random draws (see
            :attr:`ModelAdapter.deterministic`). Default: True.

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
        deterministic: bool = True,
    ) -> None:
        super().__init__(
            tokenizer=tokenizer,
            prefix_ids=prefix_ids,
            suffix_ids=suffix_ids,
            pad_id=pad_id,
            max_length=max_length,
            class_names=class_names,
            batch_size=batch_size,
            device=device,
            pads_safely=pads_safely,
            module=module if module is not None else module_of(forward_func),
            deterministic=deterministic,
        )
        self.forward_func = forward_func

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> object:
        return self.forward_func(input_ids, attention_mask)


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


class HFClassifier(TorchModel):
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
