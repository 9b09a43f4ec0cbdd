"""Causal language models as classifiers: :class:`PromptClassifier`.

A prompt template with a slot for the text turns any Hugging Face causal LM (GPT-2, BLOOM,
Llama-style, Mamba, ...) into a k-class classifier: class c's raw score is the
log-probability the LM gives to class c's label word (or word sequence) right after the
prompt. The engine explains these scores as it explains logits: centred over the classes,
i.e. for two classes the log-odds ``log p(word_1) − log p(word_0)`` of the label words.

Only the text's tokens are features. The template's tokens (and the tokenizer's BOS) stay
in place in every sample; they are the adapter's ``prefix_ids`` / ``suffix_ids``.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence

import numpy as np
import torch

from ..warn import warn_user
from .segmentation import special_token_frame
from .torch_models import TorchModel, model_max_length

__all__ = ["PromptClassifier", "PADDINGS"]

#: How samples of different lengths share a forward pass (see :class:`PromptClassifier`).
PADDINGS = ("auto", "right", "left", "none")


def _ids(tokenizer: object, text: str) -> list[int]:
    return [int(i) for i in tokenizer(text, add_special_tokens=False)["input_ids"]] if text else []


def _suffix_ids(tokenizer: object, before: str, after: str) -> tuple[int, ...]:
    """The template's part after the slot, tokenized as it reads after a text.

    Read off the whole prompt with a probe text, so that a tokenizer that starts every
    encoding with a word boundary (SentencePiece's dummy "▁") does not put one before the
    suffix; where the probe's tokens do not end where the suffix starts, the suffix is
    tokenized on its own.
    """
    if not after:
        return ()
    probe = before + "the movie"
    head, whole = _ids(tokenizer, probe), _ids(tokenizer, probe + after)
    if whole[: len(head)] == head and len(whole) > len(head):
        return tuple(whole[len(head) :])
    return tuple(_ids(tokenizer, after))


def _check_arguments(tokenizer: object, template: object, slot: str, padding: str, labels: object) -> None:
    """The constructor's arguments that can be checked before anything is tokenized."""
    if tokenizer is None or not callable(tokenizer):
        raise ValueError("PromptClassifier needs the model's Hugging Face tokenizer")
    if not isinstance(template, str) or not slot or template.count(slot) != 1:
        found = template.count(slot) if isinstance(template, str) and slot else 0
        raise ValueError(
            f"the template must contain the text slot {slot!r} exactly once (found {found}): "
            f'e.g. "Review:\\n{slot}\\nSentiment:"'
        )
    if padding not in PADDINGS:
        raise ValueError(f"unknown padding {padding!r}; choose one of {PADDINGS}")
    if isinstance(labels, str) or not isinstance(labels, (Sequence, Mapping)):
        raise TypeError("labels must be one label word per class: a list of str or a {class name: word} dict")


def _label_token_ids(tokenizer: object, words: list[str]) -> list[tuple[int, ...]]:
    """Each label word's token ids, once the words can tell the classes apart."""
    if len(words) < 2:
        raise ValueError(f"a classifier needs at least 2 label words, got {len(words)}")
    label_ids = []
    for w in words:
        if not isinstance(w, str):
            raise TypeError(f"a label word must be a str, got {type(w).__name__} {w!r}")
        ids = _ids(tokenizer, w)
        if not ids:
            raise ValueError(f"the label word {w!r} tokenizes to nothing: give a word the tokenizer knows")
        label_ids.append(tuple(ids))
    if len(set(label_ids)) < len(label_ids):
        raise ValueError(f"two label words tokenize to the same ids, so their classes cannot differ: {words}")
    pairs = [(a, b) for a in zip(words, label_ids) for b in zip(words, label_ids)]
    for (w, ids), (v, longer) in pairs:
        if len(longer) > len(ids) and longer[: len(ids)] == ids:
            # log p(longer) = log p(ids) + log p(rest | ids) <= log p(ids).
            warn_user(
                f"the label word {v!r} begins with the tokens of {w!r}, so its class can never win (its "
                "log-probability adds to the shorter word's); reword the labels so that none extends another",
                UserWarning,
            )
    return label_ids


def _check_names_differ(words: list[str]) -> None:
    """The class names are the words stripped: " good" and "good" are two classes (two
    tokens) that results, plots and tables would show under one name, so they are refused."""
    seen: dict[str, str] = {}
    for w in words:
        other = seen.setdefault(w.strip() or w, w)
        if other != w:
            raise ValueError(
                f"the label words {other!r} and {w!r} differ only in whitespace, so two classes would "
                f"share the name {w.strip()!r}: give distinct words, or name the classes with a "
                "{class name: word} dict"
            )


class PromptClassifier(TorchModel):
    """A causal LM plus a prompt template, seen as a classifier over label words.

    Args:
        model: a Hugging Face causal LM (``AutoModelForCausalLM``: GPT-2, BLOOM, Llama,
            Mistral, Mamba, ...), or any module called as ``model(input_ids=...)`` that
            returns next-token logits (B, L, V).
        tokenizer: its tokenizer. It is only read, never changed (no padding side or pad
            token is set: the adapter pads by itself).
        template: the prompt, with ``slot`` (default ``"{text}"``) exactly once where the
            text goes, e.g. ``"Review:\\n{text}\\nSentiment:"``. The answer follows the
            template's end. The part before the slot and the text are tokenized apart (so
            that the text's tokens are the same in every sample; the part after it as it
            reads after a text): put the slot after a newline, since byte-level BPE
            tokenizers (GPT-2, BLOOM) attach a space to the word after it (a warning says
            so when the slot follows a space).
        labels: one label word (or word sequence) per class, e.g. ``[" negative",
            " positive"]``, or a mapping ``{class name: label word}``. Words are tokenized
            as written (mind the leading space of byte-level BPE vocabularies). A label of
            several tokens scores the sum of their log-probabilities (one forward pass per
            class).
        padding: "auto" (default) = "right"; "right": samples are padded after their
            end and each is read at its own last position (exact for every causal model,
            attention or recurrent, since no position sees later ones; needs no attention
            mask, so Mamba works); "left": padded before, with an attention mask and
            position ids counted from the first real token (for models that take both;
            BLOOM's ALiBi reads the mask); "none": a batch only holds samples of one length
            (no padding at all; one sample per call where lengths differ).
        batch_size: samples per forward pass.
        device: run the model here (moved back afterwards).
        max_length: longest input (template, text and label tokens); default from the
            model's config / tokenizer.
        slot: the placeholder in ``template``.

    Scores: ``score`` returns, per sample, the K label log-probabilities (nats, float64).
    ``explain`` reads them as logits: its scores are log-odds of the label words (centred
    log-probabilities for K > 2), measured from the prompt with an empty text.

    Example:
        >>> clf = PromptClassifier(lm, tok, "Review:\\n{text}\\nSentiment:", [" negative", " positive"])  # doctest: +SKIP
        >>> exp = sc.explain(clf, "a wonderful, moving film", n_samples=500, seed=0)  # doctest: +SKIP
    """

    def __init__(
        self,
        model: torch.nn.Module,
        tokenizer: object,
        template: str,
        labels: Sequence[str] | Mapping[str, str],
        *,
        padding: str = "auto",
        batch_size: int = 16,
        device: torch.device | str | None = None,
        max_length: int | None = None,
        slot: str = "{text}",
    ) -> None:
        _check_arguments(tokenizer, template, slot, padding, labels)
        names = [str(k) for k in labels] if isinstance(labels, Mapping) else None
        words = list(labels.values()) if isinstance(labels, Mapping) else list(labels)
        label_ids = _label_token_ids(tokenizer, words)
        if names is None:
            _check_names_differ(words)
        self._frame_template(tokenizer, template, slot)
        self.model = self.module = model
        self.tokenizer = tokenizer
        self.template = template
        self.label_words = words
        self.label_ids = label_ids
        self.class_names = names if names is not None else [w.strip() or w for w in words]
        self.batch_size = int(batch_size)
        self.device = device
        self.padding = "right" if padding == "auto" else padding
        self.equal_length_batches = self.padding == "none"
        self._set_padding(model, tokenizer)
        self._tail = max(len(ids) for ids in label_ids)  # positions read per row
        limit = max_length if max_length is not None else model_max_length(model, tokenizer)
        # The longest label's tokens but the last are read as input too.
        self.max_length = None if limit is None else int(limit) - (self._tail - 1)
        if self.max_length is not None and self.max_length < len(self.prefix_ids) + len(self.suffix_ids):
            raise ValueError(f"the template alone is longer than the model's limit of {limit} tokens")

    def _frame_template(self, tokenizer: object, template: str, slot: str) -> None:
        """``prefix_ids`` and ``suffix_ids``: the template's tokens before and after the text."""
        before, _, after = template.partition(slot)
        pre_special, _ = special_token_frame(tokenizer)
        # BOS (Llama's <s>) belongs before the prompt; an end-of-text suffix would sit
        # between the prompt and the answer, so it is left out.
        self.prefix_ids = tuple(pre_special) + tuple(_ids(tokenizer, before))
        self.suffix_ids = _suffix_ids(tokenizer, before, after)
        if before.endswith(" ") and self.prefix_ids and not tokenizer.decode([self.prefix_ids[-1]]).strip():
            # Byte-level BPE (GPT-2, BLOOM) writes "Review: great" as "Review", ":", " great";
            # tokenized apart, the prompt would end in a lone space token the model never saw.
            warn_user(
                f"the template's text slot follows a space, which this tokenizer encodes as a token of its own "
                f"before the text (the text's first word then lacks its leading space); put the slot after a "
                f"newline instead, e.g. {before.rstrip() + chr(10) + slot!r}",
                UserWarning,
            )
        if not self.prefix_ids and not self.suffix_ids:
            bos = getattr(tokenizer, "bos_token_id", None)
            if not isinstance(bos, int):
                raise ValueError(
                    "the template has no text around the slot and the tokenizer no BOS token, so an LM "
                    "has nothing to predict the answer from for a short sample: add a prompt"
                )
            self.prefix_ids = (bos,)

    def _set_padding(self, model: torch.nn.Module, tokenizer: object) -> None:
        """The pad id, and which of the inputs that padding needs the model takes."""
        pad = getattr(tokenizer, "pad_token_id", None)
        if pad is None:
            pad = getattr(tokenizer, "eos_token_id", None)
        # Padding is never read (right: after the answer position; left: masked), so any
        # valid id will do.
        self.pad_id = int(pad) if pad is not None else 0
        params = inspect.signature(model.forward).parameters
        self._takes = {p for p in ("attention_mask", "position_ids", "use_cache", "logits_to_keep") if p in params}
        if self.padding == "left" and "attention_mask" not in self._takes:
            raise ValueError(
                f"padding='left' needs a model that takes an attention_mask; {type(model).__name__} does not "
                "(use padding='right', exact for any causal model)"
            )

    def empty_sequence(self) -> list[int] | None:
        # The prompt with an empty text: the reference point of every score.
        return []

    def n_tokens_scored(self, sequences: Sequence[Sequence[int]]) -> int:
        frame = len(self.prefix_ids) + len(self.suffix_ids)
        if self._tail == 1:
            return int(sum(len(s) + frame for s in sequences))
        # One row per class, each with its label's tokens but the last.
        return int(sum(len(s) + frame + len(ids) - 1 for s in sequences for ids in self.label_ids))

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> object:
        """The LM's raw output on full prompt rows (right-padded; ``attention_mask`` marks real tokens)."""
        return self._run(input_ids, attention_mask, input_ids.shape[1])

    def _run(self, ids: torch.Tensor, mask: torch.Tensor, keep: int) -> object:
        kwargs: dict[str, object] = {"input_ids": ids}
        if "use_cache" in self._takes:
            kwargs["use_cache"] = False
        if "logits_to_keep" in self._takes:
            kwargs["logits_to_keep"] = int(keep)
        if self.padding == "left":
            kwargs["attention_mask"] = mask
            if "position_ids" in self._takes:
                # Positions count from each row's first real token, as if it were unpadded.
                kwargs["position_ids"] = (mask.cumsum(1) - 1).clamp_min(0)
        return self.model(**kwargs)

    def _tail_logprobs(self, rows: list[list[int]], n_tail: int, device: torch.device) -> torch.Tensor:
        """Log-softmax (B, n_tail, V) at the last ``n_tail`` real positions of each row."""
        lengths = np.array([len(r) for r in rows])
        width = int(lengths.max())
        ids = np.full((len(rows), width), self.pad_id, dtype=np.int64)
        mask = np.zeros((len(rows), width), dtype=np.int64)
        for j, r in enumerate(rows):
            if self.padding == "left":
                ids[j, width - len(r) :] = r
                mask[j, width - len(r) :] = 1
            else:
                ids[j, : len(r)] = r
                mask[j, : len(r)] = 1
        # Logits are only needed from the shortest row's first read position on.
        keep = n_tail if self.padding == "left" else width - int(lengths.min()) + n_tail
        out = self._run(torch.from_numpy(ids).to(device), torch.from_numpy(mask).to(device), keep)
        logits = out.logits if hasattr(out, "logits") else out[0]
        logits = logits[:, -keep:, :]
        if self.padding == "left":
            picked = logits[:, -n_tail:, :]
        else:
            # Row j's positions len_j - n_tail .. len_j - 1, counted inside the kept window.
            start = torch.as_tensor(lengths - n_tail - (width - keep), device=logits.device)
            index = start[:, None] + torch.arange(n_tail, device=logits.device)[None, :]
            picked = logits.gather(1, index[:, :, None].expand(-1, -1, logits.shape[2]))
        return torch.log_softmax(picked.float(), dim=-1)

    def score(self, sequences: Sequence[Sequence[int]]) -> torch.Tensor:
        """Label log-probabilities (B, K), float64 on the CPU, for text token ids without the template."""
        if len(sequences) == 0:
            return torch.zeros((0, len(self.label_ids)), dtype=torch.float64)
        if self._run_device is None:
            with self.session():
                return self.score(sequences)
        device = self._run_device
        k = len(self.label_ids)
        result = torch.empty((len(sequences), k), dtype=torch.float64)
        pre, suf = list(self.prefix_ids), list(self.suffix_ids)
        single = self._tail == 1
        first = torch.tensor([ids[0] for ids in self.label_ids])
        with torch.inference_mode():
            for batch in self._batches(sequences):
                prompts = [pre + list(sequences[i]) + suf for i in batch]
                if single:
                    # All labels are one token: one forward, K entries of one distribution.
                    lp = self._tail_logprobs(prompts, 1, device)[:, 0, :]
                    result[batch] = lp[:, first.to(lp.device)].to("cpu", torch.float64)
                    continue
                for c, ids in enumerate(self.label_ids):
                    # Teacher forcing: the prompt plus the label's tokens but the last; the
                    # last len(ids) positions predict the label's tokens one after another.
                    lp = self._tail_logprobs([p + list(ids[:-1]) for p in prompts], len(ids), device)
                    target = torch.tensor(ids, device=lp.device)
                    got = lp.gather(2, target[None, :, None].expand(lp.shape[0], -1, 1))[:, :, 0]
                    result[batch, c] = got.sum(1).to("cpu", torch.float64)
        return result

    def classify(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """``f(input_ids, attention_mask) -> (B, K)`` on the text's token ids, for Captum.

        Rows hold the text's ids only (no template); padding, wherever it is, is marked 0
        in ``attention_mask``. The template is added here, so
        ``captum_slalom.SlalomAttribution(clf.classify)`` deletes only text tokens.

        Example:
            >>> ids = torch.tensor([tok("a great film", add_special_tokens=False)["input_ids"]])  # doctest: +SKIP
            >>> clf.classify(ids).shape  # doctest: +SKIP
            torch.Size([1, 2])
        """
        if input_ids.ndim != 2:
            raise ValueError(f"input_ids must be (batch, length), got shape {tuple(input_ids.shape)}")
        if attention_mask is None:
            rows = [r.tolist() for r in input_ids]
        else:
            rows = [r[m.bool()].tolist() for r, m in zip(input_ids, attention_mask)]
        return self.score(rows)
