"""Declared option constraints, checked once before any model call.

Each fitter declares what its options may be (in the manner of scikit-learn's parameter
constraints): a table ``name -> allowed forms``. :func:`check_options` checks given
values against such a table and raises one clear error, naming the option and what it
accepts, before the first model call; an option outside the table is an error too, so a
misspelt option is never accepted and ignored.

Example:
    >>> table = {"max_iter": (Interval(int, 1, None),), "solver": (OneOf("lbfgs", "adam"),)}
    >>> check_options("eff", table, {"max_iter": 10, "solver": "adam"})
    >>> check_options("eff", table, {"max_iter": -5})
    Traceback (most recent call last):
    ...
    ValueError: method 'eff': max_iter=-5 is invalid; it must be an int >= 1
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from numbers import Integral, Real

import numpy as np

__all__ = ["Interval", "OneOf", "IntPair", "Constraint", "check_options", "check_option_names"]


@dataclass(frozen=True)
class Interval:
    """A finite number of ``kind`` (int or float) between ``low`` and ``high`` (None: open).

    ``closed`` says which ends belong to the interval: "both", "left", "right", "neither".
    A float interval takes ints too; bools are never numbers here.
    """

    kind: type
    low: float | None
    high: float | None
    closed: str = "both"

    def accepts(self, value: object) -> bool:
        if isinstance(value, (bool, np.bool_)):
            return False
        if not isinstance(value, Integral if self.kind is int else Real):
            return False
        x = float(value)
        if not math.isfinite(x):
            return False
        lo_ok = self.low is None or (x >= self.low if self.closed in ("both", "left") else x > self.low)
        hi_ok = self.high is None or (x <= self.high if self.closed in ("both", "right") else x < self.high)
        return lo_ok and hi_ok

    def describe(self) -> str:
        what = "an int" if self.kind is int else "a finite number"
        left = ">=" if self.closed in ("both", "left") else ">"
        right = "<=" if self.closed in ("both", "right") else "<"
        if self.low is not None and self.high is not None:
            lb = "[" if left == ">=" else "("
            rb = "]" if right == "<=" else ")"
            return f"{what} in {lb}{self.low:g}, {self.high:g}{rb}"
        if self.low is not None:
            return f"{what} {left} {self.low:g}"
        if self.high is not None:
            return f"{what} {right} {self.high:g}"
        return what


@dataclass(frozen=True)
class OneOf:
    """One of a few fixed values (strings, None, True/False)."""

    choices: tuple

    def __init__(self, *choices: object) -> None:
        object.__setattr__(self, "choices", choices)

    def accepts(self, value: object) -> bool:
        # ``is`` for None/bools so that 0 is not taken for False; == for strings.
        return any(value is c if c is None or isinstance(c, bool) else value == c for c in self.choices)

    def describe(self) -> str:
        return "one of " + ", ".join(repr(c) for c in self.choices)


@dataclass(frozen=True)
class IntPair:
    """A range ``(lo, hi)`` of ints with ``low <= lo <= hi``."""

    low: int

    def accepts(self, value: object) -> bool:
        if not isinstance(value, tuple) or len(value) != 2:
            return False
        if not all(Interval(int, self.low, None).accepts(v) for v in value):
            return False
        return value[0] <= value[1]

    def describe(self) -> str:
        return f"a pair (lo, hi) of ints with {self.low} <= lo <= hi"


Constraint = Interval | OneOf | IntPair


def check_options(owner: str, table: Mapping[str, Sequence[Constraint]], given: Mapping[str, object]) -> None:
    """Raise if an option of ``given`` is not in ``table`` or fits none of its constraints.

    ``owner`` names what takes the options in the message (e.g. "method 'eff'"). Unknown
    names raise a TypeError, bad values a ValueError.
    """
    check_option_names(owner, table, given)
    label = _label(owner)
    for name, value in given.items():
        allowed = table[name]
        if not any(c.accepts(value) for c in allowed):
            raise ValueError(
                f"{label}: {name}={value!r} is invalid; it must be " + " or ".join(c.describe() for c in allowed)
            )


def check_option_names(owner: str, table: Mapping[str, object], names: object, also: Iterable[str] = ()) -> None:
    """Raise a TypeError naming every option of ``names`` that ``table`` does not declare.

    A name close to a declared one, or to one of ``also`` (options the caller takes
    elsewhere, e.g. ``explain``'s own keywords), is suggested: a typo should say so.

    Example:
        >>> check_option_names("ana", {}, ["sample_length"])
        Traceback (most recent call last):
        ...
        TypeError: method 'ana': invalid option(s) ['sample_length']; it takes none
        >>> check_option_names("eff", {"sample_length": ()}, ["n_sample"], also=["n_samples"])
        Traceback (most recent call last):
        ...
        TypeError: method 'eff': invalid option(s) ['n_sample'] (did you mean 'n_samples'?); it takes ['sample_length']
    """
    unknown = sorted(set(names) - set(table))
    if unknown:
        takes = sorted(table) if table else "none"
        known = sorted(set(table) | set(also))
        close = [m[0] for u in unknown if (m := difflib.get_close_matches(u, known, n=1, cutoff=0.75))]
        hint = f" (did you mean {', '.join(repr(c) for c in close)}?)" if close else ""
        raise TypeError(f"{_label(owner)}: invalid option(s) {unknown}{hint}; it takes {takes}")


def _label(owner: str) -> str:
    return owner if " " in owner else f"method {owner!r}"
