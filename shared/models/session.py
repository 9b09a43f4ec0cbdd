"""A torch model run as deployed and given back unchanged: :func:`model_session`, devices, modules."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

__all__ = ["input_vocab_size", "module_of", "check_device", "model_session"]


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
    # Weights on meta are shapes without values (an empty model); accelerate's offloading
    # keeps them there too, but its hooks load them for each forward, so those run.
    if torch.device("meta") in devices and not any(hasattr(m, "_hf_hook") for m in module.modules()):
        raise ValueError(
            f"the {type(module).__name__}'s weights are on the meta device (shapes without values, e.g. a model "
            "built under init_empty_weights or moved .to('meta')): load the weights first (from_pretrained, or "
            "to_empty() and load_state_dict())"
        )
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
