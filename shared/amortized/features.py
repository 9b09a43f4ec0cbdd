"""The explained model's own hidden states: one forward pass per text, every layer.

The amortized head reads what the classifier already computes on the text: the hidden
state of every content position (special tokens dropped) in every layer, next to the
model's raw output on the same pass. So a text costs one forward of the model it explains.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from ..models import HFClassifier, model_session

__all__ = ["Encoded", "encode", "check_encoder", "head_input", "default_batch_size", "CPU_BATCH", "GPU_BATCH"]


@dataclass
class Encoded:
    """One forward pass over a batch of texts.

    Attributes:
        raw: (B, K) the model's raw outputs (logits) on the texts.
        hidden: per text, a (n_i, L, D) tensor: every layer's state at each content position.
    """

    raw: torch.Tensor
    hidden: list[torch.Tensor]


def head_input(hidden: torch.Tensor) -> torch.Tensor:
    """Hidden states as the head reads them, in training and in explaining alike: rounded to
    half precision and held that way (the head computes in float32 from them).

    Half precision lets the features of every layer of a few thousand training texts fit in
    memory, and its rounding is far below the noise of the labels; explanations round the
    same way, so that the head never sees at explanation time inputs finer than the ones it
    was trained on (the two paths give the same scores for the same text).

    Example:
        >>> head_input(torch.tensor([1 / 3])).dtype
        torch.float16
    """
    return hidden.half()


def check_encoder(adapter: object) -> HFClassifier:
    """The adapter itself if the amortized head can read its hidden states, else a TypeError.

    Example:
        >>> check_encoder(object())
        Traceback (most recent call last):
        ...
        TypeError: an amortized explainer reads the hidden states of a Hugging Face sequence classifier (with its tokenizer); got object
    """
    if not isinstance(adapter, HFClassifier):
        raise TypeError(
            "an amortized explainer reads the hidden states of a Hugging Face sequence classifier "
            f"(with its tokenizer); got {type(adapter).__name__}"
        )
    if adapter.equal_length_batches:
        # Decoder classifiers pool at their last token: content positions differ per text.
        raise TypeError("an amortized explainer needs a model with a pad token (an encoder classifier)")
    return adapter


#: Texts per forward pass when none is given: on a CPU, small batches of texts sorted by length
#: are fastest (a 2-core CPU, 256 IMDB reviews in chunks of 64: 0.080 s a text in batches of 4,
#: 0.086 of 8, 0.128 of 32: less padding, and hidden states that stay in cache); a GPU wants
#: large ones (docs/amortized.md).
CPU_BATCH, GPU_BATCH = 4, 32


def default_batch_size(device: torch.device) -> int:
    """:data:`CPU_BATCH` on a CPU, :data:`GPU_BATCH` on any other device.

    Example:
        >>> default_batch_size(torch.device("cpu"))
        4
    """
    return CPU_BATCH if torch.device(device).type == "cpu" else GPU_BATCH


def encode(adapter: HFClassifier, sequences: Sequence[Sequence[int]], *, batch_size: int | None = None) -> Encoded:
    """Raw outputs and every layer's hidden states of token sequences (no special tokens).

    Args:
        adapter: the model's adapter (:func:`slalom_core.models.as_adapter`).
        sequences: each text's token ids, without special tokens; ``[]`` is the empty input.
        batch_size: texts per forward pass; None: :func:`default_batch_size` for the model's device.

    Returns:
        An :class:`Encoded`: raw (B, K) and, per text, its (n_i, L, D) hidden states (float32,
        on the CPU).

    Example:
        >>> enc = encode(check_encoder(as_adapter(model, tok)), [[2307, 3185], []])  # doctest: +SKIP
        >>> enc.hidden[0].shape  # (positions, layers, width)  # doctest: +SKIP
    """
    model = adapter.model
    pre, suf = list(adapter.prefix_ids), list(adapter.suffix_ids)
    wants_types = "token_type_ids" in inspect.signature(model.forward).parameters and "token_type_ids" in getattr(
        adapter.tokenizer, "model_input_names", []
    )
    # Every submodule's own train/eval flag comes back afterwards (dropout off meanwhile:
    # the same text must give the same scores), even after an error.
    with model_session(model) as device, torch.inference_mode():
        size = default_batch_size(device) if batch_size is None else batch_size
        return _forward(adapter, model, sequences, pre, suf, wants_types, device, size)


def _forward(adapter, model, sequences, pre, suf, wants_types, device, batch_size) -> Encoded:
    # Batches of similar length, so that short texts are not padded to a long one's length
    # (a corpus mixes 40- and 500-token texts); results go back in the input order.
    order = sorted(range(len(sequences)), key=lambda i: len(sequences[i]))
    raws: list = [None] * len(sequences)
    hidden: list = [None] * len(sequences)
    for start in range(0, len(order), batch_size):
        index = order[start : start + batch_size]
        batch = [pre + list(sequences[i]) + suf for i in index]
        width = max(len(b) for b in batch)
        ids = torch.full((len(batch), width), adapter.pad_id, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for i, b in enumerate(batch):
            ids[i, : len(b)] = torch.tensor(b, dtype=torch.long)
            mask[i, : len(b)] = 1
        kwargs = {"input_ids": ids.to(device), "attention_mask": mask.to(device), "output_hidden_states": True}
        if wants_types:
            kwargs["token_type_ids"] = torch.zeros_like(kwargs["input_ids"])
        out = model(**kwargs)
        if getattr(out, "hidden_states", None) is None:
            # Either the model's forward drops output_hidden_states (a custom module must
            # pass it to its encoder and return the states, as transformers' classifiers do),
            # or transformers' hooks that record them are missing: a model object unpickled
            # in another process (a Ray worker handed the object) answers without them.
            raise RuntimeError(
                f"{type(model).__name__} returned no hidden states for output_hidden_states=True: its forward "
                "must pass that flag to its encoder and return them as .hidden_states (as transformers' "
                "classifiers do); a model object sent to another process (as Ray sends it to its workers) "
                "loses them too: pass the model as a path or ModelLoader there"
            )
        logits = out.logits.float().cpu()
        layers = torch.stack(out.hidden_states, dim=2).float().cpu()  # (B, T, L, D)
        for row, i in enumerate(index):
            raws[i] = logits[row]
            hidden[i] = layers[row, len(pre) : len(pre) + len(sequences[i])].clone()
    return Encoded(torch.stack(raws) if raws else torch.empty(0, 0), hidden)
