"""What a Python callable computes with, as a digest, and what of it the digest cannot see.

A black box known by its name alone (``mymodule.call``) stays "the same" after its prompt,
its label list or its body is edited; an answer cache or a resumed corpus run would then
serve answers of the old call as the new one's. :func:`call_digest` hashes what decides the
answers and lists what it could not see into; an API cache serves answers only when that
list is empty (or when the call declares its identity, below).

**Seen, by value or by code** (an edit to any of them changes the digest):

- a function's code: its bytecode, exception table, constants (nested functions' code
  included), the global and attribute names it uses and its arguments' names. Not its
  docstring, its local variables' names, comments or line numbers: editing those changes
  nothing (a Python upgrade, which changes bytecode, counts as an edit);
- its defaults and keyword defaults, the values its closure holds, and the globals it reads;
- plain data: None, bools, numbers, strings, bytes, lists, tuples, dicts, sets, numpy
  arrays and scalars, enum members, compiled regular expressions (pattern and flags),
  ``string.Template`` (its template), ``types.SimpleNamespace`` and instances of the
  user's own classes (a dataclass, a ``__slots__`` object, a config object: every
  attribute, private ones included, and the class's own attributes and methods);
- code of the user's own modules (any module not installed as a library: outside the
  standard library and site-packages): functions and classes by their code, and a module
  read as ``prompts.TEMPLATE`` by the attributes the code names;
- a ``functools.partial`` by its function and arguments, a bound method by its function
  and its object (as above), a callable object by its class's ``__call__`` and its
  attributes.

**Seen by name only**: functions, classes and modules of installed libraries (a library
upgrade is not an edit of the user's call), locks and events.

**Not seen** (listed in :attr:`CallDigest.unseen`, by the name the code reads them by):
any other object, e.g. a library's client object, a pandas frame, a tensor, a file.

**Never counted**: settings that only grant or pace access (:func:`access_only`): an API
key, a token, a secret, headers, timeouts, retries and backoff, by their name (a global, a
closure variable, a default, an attribute, a keyword or a dict key so named, at any depth of
a dict, a declared identity included): never hashed, so never written anywhere. Those of
them that hold more than access (decoding settings in ``HEADERS``, a sentence in ``key``:
:func:`~slalom_core.models.access.holds_more_than_access`) are named, never their values, in
:attr:`CallDigest.left_out`: an edit there is not seen.

**Declared identity.** A callable with a ``cache_identity`` attribute (a JSON-able dict,
e.g. endpoint, model, template, labels and decoding settings, as
:func:`~slalom_core.experiments.openai_chat.chat_label_logprobs` sets it) is known by that
declaration (its access-only keys dropped at any depth) and its own code alone: its globals, closure,
defaults and object are not read, and nothing is unseen.

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

import dataclasses
import dis
import enum
import functools
import hashlib
import json
import re
import string
import sys
import sysconfig
import threading
import types
from collections.abc import Callable
from pathlib import Path

import numpy as np

from .access import ACCESS_ONLY, access_only, hidden_settings, holds_more_than_access, without_access

__all__ = ["callable_digest", "call_digest", "CallDigest", "access_only", "ACCESS_ONLY"]

# How deep nested functions, containers and objects are followed: enough for a call that
# uses a helper that uses a table; bounded so that a reference cycle or a huge object
# graph costs nothing.
_MAX_DEPTH = 12
_LIBRARIES = ("slalom_core", "captum_slalom", "shap_slalom")
_INERT = (type(threading.Lock()), type(threading.RLock()), threading.Event, threading.Condition, threading.Semaphore)
_PLAIN = (type(None), bool, int, float, complex, str, bytes)
_SKIP_CLASS_ATTRS = {"__module__", "__dict__", "__weakref__", "__doc__", "__qualname__", "__slots__", "__annotations__"}


@dataclasses.dataclass(frozen=True)
class CallDigest:
    """A callable's digest, and what it could not see.

    Attributes:
        digest: 32 hex digits; equal for two callables with the same code and settings.
        unseen: what the callable reads that the digest knows by its type alone (e.g.
            ``"global client (openai.OpenAI)"``): an edit there would not change the digest.
        declared: the callable declared its identity (``cache_identity``).
        left_out: settings left out by their access-like name that hold more than access
            (e.g. ``"global HEADERS"``, ``"declared identity['key']"``): names, never values.
    """

    digest: str
    unseen: tuple[str, ...] = ()
    declared: bool = False
    left_out: tuple[str, ...] = ()


def call_digest(fn: Callable) -> CallDigest:
    """The digest of what ``fn`` computes with, and what of it the digest cannot see.

    Args:
        fn: a function, lambda, ``functools.partial``, bound method or callable object.

    Returns:
        A :class:`CallDigest`.

    Example:
        >>> import types
        >>> settings = types.SimpleNamespace(prompt="Is it good? {}")
        >>> call_digest(lambda t: [len(settings.prompt.format(t)), 0.0]).unseen
        ()
    """
    walk = _Walk()
    declared = getattr(fn, "cache_identity", None)
    if declared is not None:
        walk.declared(declared)
        walk.code_of(fn)
        return CallDigest(walk.h.hexdigest(), (), True, tuple(dict.fromkeys(walk.left_out)))
    walk.callable(fn, 0, _qualname(fn).rsplit(".", 1)[-1])
    return CallDigest(walk.h.hexdigest(), tuple(dict.fromkeys(walk.unseen)), False, tuple(dict.fromkeys(walk.left_out)))


def callable_digest(fn: Callable) -> str:
    """A hex digest of what ``fn`` computes with (its code, defaults, closure, the globals it
    reads); :func:`call_digest` also says what it could not see.

    Returns:
        32 hex digits; equal for two callables with the same code and settings, in any
        process.

    Example:
        >>> callable_digest(lambda t: [1.0]) == callable_digest(lambda t: [2.0])
        False
    """
    return call_digest(fn).digest


def _qualname(obj: object) -> str:
    return f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', type(obj).__qualname__)}"


@functools.lru_cache(maxsize=1024)
def is_library(module: str | None) -> bool:
    """Whether the module named ``module`` is an installed library (the standard library,
    site-packages, or slalom-xai itself), not the user's own code."""
    if not module:
        return False
    top = module.split(".")[0]
    if top == "builtins" or top in _LIBRARIES or top in sys.stdlib_module_names:
        return True
    found = sys.modules.get(top)
    file = getattr(found, "__file__", None)
    if found is None or file is None:
        return False
    path = Path(file).resolve()
    roots = {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    return any(path.is_relative_to(Path(r).resolve()) for r in roots)


def _doc_const(code: types.CodeType) -> int | None:
    """The index of a docstring among ``code``'s constants: a leading str no instruction loads."""
    if not code.co_consts or not isinstance(code.co_consts[0], str):
        return None
    loads = any(i.arg == 0 and i.opcode in dis.hasconst for i in dis.get_instructions(code))
    return None if loads else 0


class _Walk:
    def __init__(self) -> None:
        self.h = hashlib.blake2b(digest_size=16)
        self.seen: set[int] = set()
        self.unseen: list[str] = []
        self.left_out: list[str] = []

    def put(self, text: str) -> None:
        self.h.update(text.encode("utf-8", "surrogatepass") + b"\x00")

    def drop(self, where: str, value: object) -> None:
        """A setting left out by its access-like name: named when it holds more than access."""
        if holds_more_than_access(value):
            self.left_out.append(where)

    def declared(self, declared: object) -> None:
        """A declared identity, its access-only entries left out at any depth (a key nested
        in ``{"client": {"api_key": ...}}`` included): never hashed."""
        self.left_out += hidden_settings(declared, "declared identity")
        self.put(f"<declared {json.dumps(without_access(declared), sort_keys=True, default=str)}>")

    def code_of(self, fn: object) -> None:
        """The code of a callable alone (a declared identity's callable)."""
        while isinstance(fn, functools.partial):
            fn = fn.func
        fn = getattr(fn, "__func__", fn)
        call = fn if isinstance(fn, types.FunctionType) else vars(type(fn)).get("__call__")
        if isinstance(call, types.FunctionType):
            self.code(call.__code__)
        else:
            self.put(f"<name {_qualname(fn)}>")

    def code(self, code: types.CodeType) -> None:
        flags = code.co_flags
        n_args = code.co_argcount + code.co_kwonlyargcount + bool(flags & 0x04) + bool(flags & 0x08)
        self.h.update(code.co_code + getattr(code, "co_exceptiontable", b""))
        self.put(
            json.dumps([code.co_argcount, code.co_kwonlyargcount, flags, code.co_names, code.co_varnames[:n_args]])
        )
        skip = _doc_const(code)
        for k, const in enumerate(code.co_consts):
            if isinstance(const, types.CodeType):
                self.code(const)
            elif k != skip:
                self.put(_const_repr(const))

    def callable(self, fn: object, depth: int, where: str) -> None:
        if isinstance(fn, functools.partial):
            self.put("<partial>")
            self.callable(fn.func, depth + 1, where)
            self.value(list(fn.args), depth + 1, f"{where} args")
            kept = {k: v for k, v in fn.keywords.items() if not access_only(k)}
            for name in sorted(set(fn.keywords) - set(kept)):
                self.drop(f"{where} keyword {name}", fn.keywords[name])
            self.value(kept, depth + 1, f"{where} keywords")
        elif isinstance(fn, types.MethodType):
            self.put("<method>")
            self.callable(fn.__func__, depth + 1, where)
            self.value(fn.__self__, depth + 1, f"{where}.__self__")
        elif isinstance(fn, types.FunctionType):
            self.function(fn, depth, where)
        elif isinstance(fn, (type, types.BuiltinFunctionType, types.BuiltinMethodType)):
            self.value(fn, depth, where)
        else:  # a callable object: its class (and so its __call__) and its attributes
            self.value(fn, depth, where)

    def function(self, fn: types.FunctionType, depth: int, where: str) -> None:
        if id(fn) in self.seen:
            self.put(f"<again {_qualname(fn)}>")
            return
        if depth > _MAX_DEPTH:
            self.too_deep(fn, where)
            return
        self.seen.add(id(fn))
        self.put(f"<function {fn.__qualname__}>")
        self.code(fn.__code__)
        declared = getattr(fn, "cache_identity", None)
        if declared is not None:  # its declaration stands for its settings
            self.declared(declared)
            return
        code = fn.__code__
        names = code.co_varnames[code.co_argcount - len(fn.__defaults__ or ()) : code.co_argcount]
        defaults = [*zip(names, fn.__defaults__ or ()), *sorted((fn.__kwdefaults__ or {}).items())]
        for name, default in defaults:
            if access_only(name):
                self.drop(f"{where} default {name}", default)
            else:
                self.put(f"default {name}")
                self.value(default, depth + 1, f"{where} default {name}")
        for name, cell in zip(code.co_freevars, fn.__closure__ or ()):
            try:
                content = cell.cell_contents
            except ValueError:  # an empty cell (a name not yet bound)
                content = None
            if access_only(name):
                self.drop(f"closure {name}", content)
            else:
                self.put("closure")
                self.value(content, depth + 1, name)
        g, names = fn.__globals__, _global_names(code)
        for name in sorted(n for n in names if n in g):
            if access_only(name):
                self.drop(f"global {name}", g[name])
                continue
            self.put(f"global {name}")
            self.value(g[name], depth + 1, name, attrs=names)

    def value(self, value: object, depth: int, where: str, attrs: set[str] = frozenset()) -> None:
        """Plain data by value, the user's code by its code, libraries by name; else unseen."""
        if isinstance(value, _PLAIN):
            self.put(f"{type(value).__name__}:{value!r}")
        elif id(value) in self.seen:
            self.put(f"<again {type(value).__qualname__}>")
        elif depth > _MAX_DEPTH:
            self.too_deep(value, where)
        elif isinstance(value, (list, tuple)):
            self.put(f"<{type(value).__name__} {len(value)}>")
            for k, item in enumerate(value):
                self.value(item, depth + 1, f"{where}[{k}]")
        elif isinstance(value, (set, frozenset)):
            self.put(f"<set {sorted(_const_repr(v) for v in value)}>")
        elif isinstance(value, dict):
            self.put(f"<dict {len(value)}>")
            for key in sorted(value, key=repr):
                if access_only(key):
                    self.drop(f"{where}[{key!r}]", value[key])
                    continue
                self.put(repr(key))
                self.value(value[key], depth + 1, f"{where}[{key!r}]")
        elif isinstance(value, np.ndarray) and value.dtype != object:
            self.put(f"<array {value.dtype} {value.shape}>")
            self.h.update(np.ascontiguousarray(value).tobytes())
        elif isinstance(value, np.generic):
            self.put(f"<{type(value).__name__} {value!r}>")
        elif isinstance(value, enum.Enum):
            self.put(f"<enum {_qualname(type(value))}.{value.name}>")
            self.value(value.value, depth + 1, where)
        elif isinstance(value, re.Pattern):
            self.put(f"<regex {value.flags}>")
            self.value(value.pattern, depth + 1, where)
        elif isinstance(value, (types.FunctionType, functools.partial, types.MethodType)):
            if isinstance(value, types.FunctionType) and is_library(getattr(value, "__module__", None)):
                self.put(f"<name {_qualname(value)}>")
            else:
                self.callable(value, depth + 1, where)
        elif isinstance(value, types.ModuleType):
            self.module(value, depth, where, attrs)
        elif isinstance(value, type):
            self.cls(value, depth, where)
        elif isinstance(value, (types.BuiltinFunctionType, types.BuiltinMethodType, *_INERT)):
            self.put(f"<name {_qualname(value)}>")
        elif isinstance(value, (string.Template, types.SimpleNamespace)) or not is_library(type(value).__module__):
            self.instance(value, depth, where)
        else:
            self.put(f"<unseen {_qualname(type(value))}>")
            self.unseen.append(f"{where} ({_qualname(type(value))})")

    def too_deep(self, value: object, where: str) -> None:
        self.put(f"<deep {_qualname(type(value))}>")
        self.unseen.append(f"{where} (nested deeper than {_MAX_DEPTH} levels)")

    def module(self, mod: types.ModuleType, depth: int, where: str, attrs: set[str]) -> None:
        self.put(f"<module {mod.__name__}>")
        if is_library(mod.__name__):
            return
        # The user's own module: the attributes the code reads of it (prompts.TEMPLATE).
        for name in sorted(n for n in attrs if n in vars(mod)):
            if access_only(name):
                self.drop(f"{where}.{name}", vars(mod)[name])
                continue
            self.put(f"attribute {name}")
            self.value(vars(mod)[name], depth + 1, f"{where}.{name}")

    def cls(self, cls: type, depth: int, where: str) -> None:
        if is_library(cls.__module__) or id(cls) in self.seen:
            self.put(f"<name {_qualname(cls)}>")
            return
        self.seen.add(id(cls))
        self.put(f"<class {_qualname(cls)}>")
        for base in cls.__mro__[1:]:
            self.value(base, depth + 1, f"{where} base")
        for name, attr in sorted(vars(cls).items()):
            dunder = name.startswith("__") and name.endswith("__")
            code = isinstance(attr, (types.FunctionType, staticmethod, classmethod, property))
            if access_only(name):
                self.drop(f"{where}.{name}", attr)
                continue
            if name in _SKIP_CLASS_ATTRS or name == "_abc_impl" or (dunder and not code):
                continue  # the class's plumbing (dataclass fields, slots' descriptors): not settings
            if isinstance(attr, (types.MemberDescriptorType, types.GetSetDescriptorType)):
                continue
            if isinstance(attr, (staticmethod, classmethod)):
                attr = attr.__func__
            elif isinstance(attr, property):
                attr = [attr.fget, attr.fset, attr.fdel]
            self.put(f"class attribute {name}")
            self.value(attr, depth + 1, f"{where}.{name}")

    def instance(self, obj: object, depth: int, where: str) -> None:
        """An object of the user's classes (or a Template, a SimpleNamespace): its class and
        every attribute, private ones and slots included."""
        self.seen.add(id(obj))
        self.value(type(obj), depth + 1, f"{where} class")
        fields = dict(getattr(obj, "__dict__", {}) or {})
        for klass in type(obj).__mro__:
            slots = vars(klass).get("__slots__", ())
            for slot in [slots] if isinstance(slots, str) else slots:
                if slot not in ("__dict__", "__weakref__") and hasattr(obj, slot):
                    fields[slot] = getattr(obj, slot)
        for name in sorted(k for k in fields if isinstance(k, str)):
            if access_only(name):
                self.drop(f"{where}.{name}", fields[name])
                continue
            self.put(f"attribute {name}")
            self.value(fields[name], depth + 1, f"{where}.{name}")


def _global_names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _global_names(const)
    return names


def _const_repr(const: object) -> str:
    # A frozenset constant (``x in {"a", "b"}``) iterates in a per-process order.
    if isinstance(const, frozenset):
        return "frozenset(" + ",".join(sorted(_const_repr(c) for c in const)) + ")"
    if isinstance(const, tuple):
        return "(" + ",".join(_const_repr(c) for c in const) + ")"
    return f"{type(const).__name__}:{const!r}"
