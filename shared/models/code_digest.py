"""What a Python callable computes with, as a digest: "the same call" means the same code and settings.

A black box known by its name alone (``mymodule.call``) stays "the same" after its prompt,
its label list or its body is edited; an answer cache or a resumed corpus run would then
serve answers of the old call as the new one's. :func:`callable_digest` hashes what decides
the answers, as ``joblib.Memory`` does for a cached function, and more:

- a function's code: its bytecode, constants (nested functions' code included), the names
  it uses, its argument layout; not line numbers, so a comment or a blank line changes
  nothing, while any edit to what runs does (a Python upgrade, which changes bytecode,
  counts as an edit);
- its defaults and keyword defaults, and the values its closure holds;
- the globals it reads: plain data (a ``PROMPT`` string, a ``LABELS`` list, numbers,
  arrays) by value, functions of its own module by their digest, anything else by type;
- a ``functools.partial`` by its function and arguments, a bound method by its function
  and its object's public plain settings, a callable object by its ``__call__`` and public
  plain settings.

A function may declare its settings itself with a ``cache_identity`` attribute (a
JSON-able dict, e.g. endpoint, model, template and labels, as
:func:`~slalom_core.experiments.openai_chat.chat_label_logprobs` sets it): then its code and
the declaration are hashed, not its closure or defaults (they hold what only grants access,
such as an API key, which must not decide whether an answer is the same).

Everything hashed is the same in every process: no ``hash()``, no memory address; sets are
hashed in sorted order.

Example:
    >>> def call(text):
    ...     return [len(text), 0.0]
    >>> a = callable_digest(call)
    >>> def call(text):
    ...     return [len(text), 1.0]
    >>> a == callable_digest(call)
    False
"""

from __future__ import annotations

import functools
import hashlib
import json
import types
from collections.abc import Callable

import numpy as np

__all__ = ["callable_digest"]

# How deep nested functions, containers and objects are followed: enough for a call that
# uses a helper that uses a table; bounded so that a reference cycle or a huge object
# graph costs nothing.
_MAX_DEPTH = 6


def callable_digest(fn: Callable) -> str:
    """A hex digest of what ``fn`` computes with (its code, defaults, closure, the globals it reads).

    Args:
        fn: a function, lambda, ``functools.partial``, bound method or callable object.

    Returns:
        32 hex digits; equal for two callables with the same code and settings, in any
        process.

    Example:
        >>> callable_digest(lambda t: [1.0]) == callable_digest(lambda t: [2.0])
        False
    """
    h = hashlib.blake2b(digest_size=16)
    _feed_callable(h, fn, depth=0, seen=set(), home=getattr(fn, "__module__", None))
    return h.hexdigest()


def _qualname(obj: object) -> str:
    return f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', type(obj).__qualname__)}"


def _feed_callable(h, fn: object, depth: int, seen: set[int], home: str | None) -> None:
    if id(fn) in seen or depth > _MAX_DEPTH:
        h.update(f"<again {_qualname(fn)}>".encode())
        return
    seen.add(id(fn))
    if isinstance(fn, functools.partial):
        h.update(b"<partial>")
        _feed_callable(h, fn.func, depth + 1, seen, home)
        _feed_value(h, list(fn.args), depth + 1, seen, home)
        _feed_value(h, dict(fn.keywords), depth + 1, seen, home)
    elif isinstance(fn, types.MethodType):
        h.update(b"<method>")
        _feed_callable(h, fn.__func__, depth + 1, seen, home)
        _feed_settings(h, fn.__self__, depth + 1, seen, home)
    elif isinstance(fn, types.FunctionType):
        _feed_function(h, fn, depth, seen, home)
    elif isinstance(fn, type) or isinstance(fn, (types.BuiltinFunctionType, types.BuiltinMethodType)):
        h.update(f"<name {_qualname(fn)}>".encode())
    elif callable(fn):
        h.update(f"<object {_qualname(type(fn))}>".encode())
        call = vars(type(fn)).get("__call__")  # the class's own code (a subclass's call is its own)
        if isinstance(call, types.FunctionType):
            _feed_function(h, call, depth + 1, seen, home)
        _feed_settings(h, fn, depth + 1, seen, home)
    else:
        _feed_value(h, fn, depth + 1, seen, home)


def _feed_function(h, fn: types.FunctionType, depth: int, seen: set[int], home: str | None) -> None:
    h.update(f"<function {fn.__qualname__}>".encode())
    _feed_code(h, fn.__code__)
    declared = getattr(fn, "cache_identity", None)
    if declared is not None:
        # The function states its settings; its closure may hold a key that must not count.
        h.update(b"<declared>")
        h.update(json.dumps(declared, sort_keys=True, default=str).encode())
    else:
        _feed_value(h, fn.__defaults__, depth + 1, seen, home)
        _feed_value(h, fn.__kwdefaults__, depth + 1, seen, home)
        for cell in fn.__closure__ or ():
            try:
                content = cell.cell_contents
            except ValueError:  # an empty cell (a name not yet bound)
                content = None
            _feed_value(h, content, depth + 1, seen, home)
    # The globals it reads (names of its code and of the code nested in it).
    g = fn.__globals__
    for name in sorted(_global_names(fn.__code__)):
        if name in g:
            h.update(f"\x00global {name}=".encode())
            _feed_value(h, g[name], depth + 1, seen, home)


def _global_names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _global_names(const)
    return names


def _feed_code(h, code: types.CodeType) -> None:
    h.update(code.co_code)
    h.update(
        json.dumps(
            [code.co_argcount, code.co_kwonlyargcount, code.co_flags, list(code.co_names), list(code.co_varnames)]
        ).encode()
    )
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            _feed_code(h, const)
        else:
            h.update(_const_repr(const).encode())


def _const_repr(const: object) -> str:
    # A frozenset constant (``x in {"a", "b"}``) iterates in a per-process order.
    if isinstance(const, frozenset):
        return "frozenset(" + ",".join(sorted(_const_repr(c) for c in const)) + ")"
    if isinstance(const, tuple):
        return "(" + ",".join(_const_repr(c) for c in const) + ")"
    return f"{type(const).__name__}:{const!r}"


def _feed_settings(h, obj: object, depth: int, seen: set[int], home: str | None) -> None:
    """An object's public attributes (private ones are caches, ledgers and locks)."""
    h.update(f"<settings {_qualname(type(obj))}>".encode())
    attrs = getattr(obj, "__dict__", None)
    if not isinstance(attrs, dict) or depth > _MAX_DEPTH:
        return
    for key in sorted(k for k in attrs if isinstance(k, str) and not k.startswith("_")):
        h.update(f"\x00{key}=".encode())
        _feed_value(h, attrs[key], depth + 1, seen, home)


def _feed_value(h, value: object, depth: int, seen: set[int], home: str | None) -> None:
    """Plain data by value; functions of the call's own module by their digest; others by type."""
    if value is None or isinstance(value, (bool, int, float, complex, str, bytes)):
        h.update(f"{type(value).__name__}:{value!r}".encode())
    elif depth > _MAX_DEPTH:
        h.update(f"<deep {type(value).__qualname__}>".encode())
    elif isinstance(value, (list, tuple)):
        h.update(f"<{type(value).__name__} {len(value)}>".encode())
        for item in value:
            _feed_value(h, item, depth + 1, seen, home)
    elif isinstance(value, (set, frozenset)):
        h.update(f"<set {sorted(_const_repr(v) for v in value)}>".encode())
    elif isinstance(value, dict):
        h.update(f"<dict {len(value)}>".encode())
        for key in sorted(value, key=repr):
            h.update(repr(key).encode())
            _feed_value(h, value[key], depth + 1, seen, home)
    elif isinstance(value, np.ndarray):
        h.update(f"<array {value.dtype} {value.shape}>".encode())
        h.update(np.ascontiguousarray(value).tobytes() if value.dtype != object else repr(value.tolist()).encode())
    elif isinstance(value, types.ModuleType):
        h.update(f"<module {value.__name__}>".encode())
    elif isinstance(value, (types.FunctionType, functools.partial, types.MethodType)):
        # A helper of the call's own module counts with its code; a library's by its name
        # (a library upgrade is not an edit of the user's call).
        if getattr(value, "__module__", None) == home or isinstance(value, functools.partial):
            _feed_callable(h, value, depth + 1, seen, home)
        else:
            h.update(f"<name {_qualname(value)}>".encode())
    else:
        h.update(f"<{_qualname(type(value))}>".encode())
