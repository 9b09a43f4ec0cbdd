"""A model's fingerprint: what it computes with, hashed (a corpus run records it to refuse
another model on ``resume``; an amortized head records its model's).

:func:`model_fingerprint` identifies the model by content: a torch model by its weights
(names, shapes, dtypes, bytes) and config, a tokenizer by its vocabulary and settings, any
other black box by its class and the repr of its public settings, a function among them by
its code and settings (:func:`~.code_digest.callable_digest`, beside it: resuming after
editing a call function's body, prompt or labels is refused, as the API cache refuses its
answers).

Everything hashed must be the same in every process: nothing here uses ``hash()`` or a
repr that holds a memory address.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable

from .code_digest import callable_digest

__all__ = ["model_fingerprint", "stable_str"]

# Config entries that name where or with which library version a model was saved, not
# what it computes: a model loaded from its folder equals the same model in memory.
_CONFIG_NOISE = {"_name_or_path", "transformers_version", "_commit_hash", "_attn_implementation_autoset"}
# Tokenizer settings that are file paths (the same vocabulary may live anywhere).
_TOKENIZER_NOISE = ("name_or_path", "file", "path", "cache_dir", "_commit_hash")


def model_fingerprint(model: object, tokenizer: object | None = None, name: str | None = None) -> dict:
    """``{"name", "class", "digest"}`` of a loaded model and its tokenizer.

    ``name`` is what the user passed (a Hub id or a path), recorded for the message of a
    refused resume; the digest alone decides whether two models are the same.

    Example:
        >>> from slalom_core import StringClassifier
        >>> a = model_fingerprint(StringClassifier(len, class_names=["a", "b"]))
        >>> b = model_fingerprint(StringClassifier(len, class_names=["b", "a"]))
        >>> a["digest"] == b["digest"]
        False
    """
    h = hashlib.blake2b(digest_size=16)
    _feed(h, model, depth=0)
    h.update(b"\x00tokenizer\x00")
    _feed(h, tokenizer, depth=0)
    cls = type(model)
    return {
        "name": str(name) if name is not None else cls.__name__,
        "class": f"{cls.__module__}.{cls.__qualname__}",
        "digest": h.hexdigest(),
    }


def stable_str(value: object) -> str:
    """``str(value)``, but a default repr (which holds a memory address) as its class's name.

    Example:
        >>> stable_str(3), stable_str(object())
        ('3', 'object')
    """
    text = str(value)
    # A default repr ("<foo.Bar object at 0x7f...>") changes with every process.
    return type(value).__qualname__ if " at 0x" in text else text


def _qualname(fn: Callable) -> str:
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', type(fn).__qualname__)}"


def _feed(h, obj: object, depth: int) -> None:
    """Hash what ``obj`` computes with; how deep settings are followed is bounded."""
    h.update(f"<{type(obj).__module__}.{type(obj).__qualname__}>".encode())
    if obj is None or isinstance(obj, (bool, int, float, str)):
        h.update(json.dumps(obj).encode())
        return
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency
        torch = None
    if torch is not None and isinstance(obj, torch.nn.Module):
        _feed_torch(h, obj, torch)
        return
    if hasattr(obj, "get_vocab") and callable(obj.get_vocab):  # a tokenizer
        _feed_tokenizer(h, obj)
        return
    if isinstance(obj, (list, tuple)):
        for item in obj:
            _feed(h, item, depth + 1)
        return
    if isinstance(obj, dict):
        for key in sorted(obj, key=str):
            h.update(str(key).encode())
            _feed(h, obj[key], depth + 1)
        return
    if hasattr(obj, "func") and hasattr(obj, "args") and hasattr(obj, "keywords"):  # functools.partial
        h.update(_qualname(obj.func).encode())
        h.update(callable_digest(obj).encode())
        return
    if hasattr(obj, "__self__") and hasattr(obj, "__func__"):  # a bound method: its function (its object is fed)
        h.update(_qualname(obj.__func__).encode())
        if hasattr(obj.__func__, "__code__"):
            h.update(callable_digest(obj.__func__).encode())
        return
    if hasattr(obj, "__code__"):
        # A function by its name and its code and settings (two lambdas differ by their code).
        h.update(_qualname(obj).encode())
        h.update(callable_digest(obj).encode())
        return
    if isinstance(obj, type) or (callable(obj) and not hasattr(obj, "__dict__")):
        h.update(_qualname(obj).encode())
        return
    settings = getattr(obj, "__dict__", None)
    if settings is None or depth > 3:
        h.update(stable_str(obj).encode())
        return
    # Public settings only: private ones are caches, ledgers and locks (an API cache's
    # answers must not change the fingerprint of its classifier).
    skip = set(getattr(type(obj), "budget_settings", ()))
    for key in sorted(k for k in settings if not k.startswith("_") and k not in skip):
        h.update(f"\x00{key}=".encode())
        _feed(h, settings[key], depth + 1)


def _feed_torch(h, module, torch) -> None:
    config = getattr(module, "config", None)
    if config is not None and hasattr(config, "to_dict"):
        cfg = {k: v for k, v in config.to_dict().items() if k not in _CONFIG_NOISE}
        h.update(json.dumps(cfg, sort_keys=True, default=stable_str).encode())
    for key, tensor in module.state_dict().items():
        t = tensor.detach()
        h.update(f"\x00{key}:{t.dtype}:{tuple(t.shape)}".encode())
        # The raw bytes (bfloat16 has no numpy dtype): one tensor on the CPU at a time.
        flat = t.to("cpu").contiguous().reshape(-1)
        h.update(flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b"")


def _feed_tokenizer(h, tok) -> None:
    vocab = tok.get_vocab()
    h.update(json.dumps(sorted(vocab.items(), key=lambda kv: (kv[1], kv[0]))).encode())
    kwargs = getattr(tok, "init_kwargs", {}) or {}
    kept = {k: v for k, v in kwargs.items() if not any(n in k for n in _TOKENIZER_NOISE)}
    h.update(json.dumps(kept, sort_keys=True, default=stable_str).encode())
