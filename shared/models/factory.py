"""Which adapter fits a model: :func:`as_adapter`."""

from __future__ import annotations

import copy

import torch

from ..link import pipeline_output_kind
from .base import ModelAdapter
from .segmentation import check_tokenizer
from .session import check_device
from .torch_models import HFClassifier, TorchClassifier

__all__ = ["as_adapter", "is_pipeline"]


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
