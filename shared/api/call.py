"""The options of an explain call, checked once before any model call: :func:`check_call`.

The options are stated here once: :class:`CallOptions` (their names and defaults) and
:data:`OPTION_CHECKS` (what each may be). Every entry point's signature repeats the names
and defaults as keyword parameters (kept in step by a test), builds one ``CallOptions``
from them and hands it on; :func:`check_call` checks it once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields

import numpy as np
import torch
from typing_extensions import TypedDict

from ..fitting import FITTERS, Fitter, get_fitter
from ..link import MULTICLASS_MODES, OUTPUT_KINDS, OutputLink
from ..models import GRANULARITIES
from ..options import Interval, check_option_names, check_options

__all__ = [
    "DEFAULT_METHOD",
    "DEFAULT_N_SAMPLES",
    "FitOptions",
    "CallOptions",
    "ExplainOptions",
    "CheckedCall",
    "OPTION_CHECKS",
    "check_call",
    "check_target_type",
    "check_reference",
    "reference_vector",
    "check_seed",
    "text_seeds",
    "check_memory",
    "MAX_FIT_BYTES",
]


DEFAULT_N_SAMPLES = 1000
#: The fitting method when none is named: chosen from the cost/quality front of the designs
#: (docs/results.md §20), by explain, explain_batch, estimate_cost and both adapters alike.
DEFAULT_METHOD = "hybrid"

# show_progress: True for the engine's own tqdm bar, or a factory ``total -> bar`` so that a
# host framework (e.g. Captum) can report into its own bar. The bar needs ``update(n)`` and
# ``close()``; its total (the samples the fits ask for) is known when it is made and the
# engine never changes it.
ProgressOption = bool | Callable[[int], object]
ReferenceOption = str | float | Sequence[float] | np.ndarray


class FitOptions(TypedDict, total=False, extra_items=object):
    """The keywords of :class:`CallOptions` that the rows entry points hand on as they are
    (:func:`~slalom_core.explain_rows`, the adapters), typed for a ``**kwargs`` dict.

    A typing aid only: :class:`CallOptions` is the table (names, defaults, checks); a test
    holds these keys to its fields. Any other key is an option of the fitter.

    Example:
        >>> opts: FitOptions = {"method": "eff", "n_samples": 300, "sample_length": 3}
        >>> check_call(**opts).fitter.sample_length
        3
    """

    method: str | Fitter
    n_samples: int
    output: str
    reference: ReferenceOption
    multiclass: str
    gamma: float


class ExplainOptions(FitOptions, total=False, extra_items=object):
    """Every keyword of :func:`explain`, typed for a ``**kwargs`` dict: the fields of
    :class:`CallOptions` plus how the model is run (a typing aid, held to the table by a test).

    Example:
        >>> sorted(ExplainOptions.__optional_keys__ - FitOptions.__optional_keys__)
        ['batch_size', 'device', 'granularity', 'seed', 'show_progress', 'target', 'truncate']
    """

    target: int | str | None
    granularity: str
    seed: int | Sequence[int] | None
    truncate: bool
    batch_size: int | None
    device: torch.device | str | None
    show_progress: ProgressOption


@dataclass(frozen=True)
class CallOptions:
    """The options of an explain call, stated once: their names and defaults here, their
    checks in :data:`OPTION_CHECKS`, applied once by :func:`check_call`.

    Every entry point (:func:`explain`, :func:`explain_batch`, :func:`~slalom_core.explain_rows`,
    :func:`~slalom_core.estimate_cost`, :func:`~slalom_core.corpus.explain_corpus`, the
    amortized pipeline, the command line through them) takes these as keyword parameters
    with these defaults (``tests/engine/test_options_table.py`` holds them in step), builds
    one ``CallOptions`` and hands it on by name; a corpus run records it in its manifest.

    Attributes:
        method, n_samples, target, output, reference, multiclass, granularity, seed,
            gamma, truncate: as in :func:`explain`.
        fit_options: the fitter's own options (``sample_length``, ``prior_sd``, ...),
            checked by its table (:func:`~slalom_core.get_fitter`).

    Example:
        >>> opts = CallOptions(method="eff", n_samples=300, fit_options={"sample_length": 3})
        >>> check_call(opts).fitter.sample_length, CallOptions().n_samples
        (3, 1000)
    """

    method: str | Fitter = DEFAULT_METHOD
    n_samples: int = DEFAULT_N_SAMPLES
    target: int | str | None = None
    output: str = "auto"
    reference: ReferenceOption = "empty"
    multiclass: str = "joint"
    granularity: str = "token"
    seed: int | Sequence[int] | None = None
    gamma: float = 0.0
    truncate: bool = False
    fit_options: Mapping[str, object] = field(default_factory=dict)

    @classmethod
    def of(cls, **keywords: object) -> CallOptions:
        """From keywords as :func:`explain` takes them: the table's names are options, any
        other is the fitter's.

        Example:
            >>> CallOptions.of(method="eff", sample_length=3).fit_options
            {'sample_length': 3}
        """
        own = {f.name for f in fields(cls)} - {"fit_options"}
        return cls(
            **{k: v for k, v in keywords.items() if k in own},
            fit_options={k: v for k, v in keywords.items() if k not in own},
        )


@dataclass(frozen=True)
class CheckedCall:
    """The options of one explain call, checked and normalised (what :func:`check_call` returns).

    Attributes:
        fitter: the configured :class:`Fitter`.
        n_samples, output, multiclass, granularity, gamma: as given (checked).
        target: a plain int, a class name (made an index by :func:`explain_batch` once the
            model's names are known), or None.
        reference: None for "empty" (the empty input is scored), else the given reference
            point as a float array (0-d, or one entry per class).
        seed: None (draw one), an int for every text, or a tuple of one per text.
        truncate: cut a text longer than the model accepts to its first positions (the
            command line's rule, :meth:`~slalom_core.ModelAdapter.segment_within_length`)
            instead of refusing it.

    Example:
        >>> call = check_call(method="ana", target=1, seed=[3, 4])
        >>> call.fitter.name, call.target, call.reference, call.seed
        ('ana', 1, None, (3, 4))
    """

    fitter: Fitter
    n_samples: int
    target: int | str | None
    output: str
    reference: np.ndarray | None
    multiclass: str
    granularity: str
    seed: int | tuple[int, ...] | None
    gamma: float
    truncate: bool = False


def check_call(options: CallOptions | None = None, /, **keywords: object) -> CheckedCall:
    """Check the options of an explain call once, with no model and no text at hand.

    Every option that would fail every text is refused here, with one error naming it:
    each entry point calls this once, before it touches the model (a corpus run before it
    scans its data or loads its model, and hands the checked call to every chunk), so all
    refuse the same options with the same errors. What depends on a text (too few samples
    for its units, its length, the memory its fit needs) is checked per text, still before
    the first model call.

    Args:
        options: the call's :class:`CallOptions`.
        **keywords: instead of ``options``, the keywords of :func:`explain`
            (:meth:`CallOptions.of`).

    Example:
        >>> call = check_call(CallOptions(method="fidel", n_samples=200, reference=0.0, fit_options={"prior_sd": 0.5}))
        >>> call.fitter.name, call.fitter.prior_sd, float(call.reference)
        ('fidel', 0.5, 0.0)
        >>> check_call(n_samples=0)
        Traceback (most recent call last):
        ...
        ValueError: n_samples must be a positive int, got 0
    """
    if options is None:
        options = CallOptions.of(**keywords)
    elif keywords:
        raise TypeError(f"check_call takes CallOptions or keywords, not both (got {sorted(keywords)} too)")
    checked = {name: check(getattr(options, name)) for name, check in OPTION_CHECKS.items()}
    method = options.method
    fit_options = dict(options.fit_options)
    if isinstance(method, str) and method in FITTERS:
        # A misspelt keyword of explain itself lands here: suggest the call's names too.
        check_option_names(
            method, FITTERS[method].OPTIONS, fit_options, also=[*ExplainOptions.__optional_keys__, "tokenizer"]
        )
    return CheckedCall(fitter=get_fitter(method, **fit_options), **checked)


def check_n_samples(n_samples: object) -> int:
    """``n_samples`` as a positive int."""
    if isinstance(n_samples, bool) or not isinstance(n_samples, (int, np.integer)) or n_samples < 1:
        raise ValueError(f"n_samples must be a positive int, got {n_samples!r}")
    return n_samples


def check_truncate(truncate: object) -> bool:
    """``truncate`` as a plain bool."""
    if not isinstance(truncate, (bool, np.bool_)):
        raise TypeError(f"truncate must be True or False, got {truncate!r}")
    return bool(truncate)


def check_gamma(gamma: object) -> float:
    """``gamma``: any finite number (the declared constraint of :mod:`~slalom_core.options`)."""
    check_options("explain", {"gamma": (Interval(float, None, None),)}, {"gamma": gamma})
    return gamma


@dataclass(frozen=True)
class Choice:
    """A check that an option is one of a few names (its error lists them)."""

    name: str
    choices: tuple

    def __call__(self, value: object) -> object:
        if value not in self.choices:
            raise ValueError(f"unknown {self.name} {value!r}; choose one of {self.choices}")
        return value


#: Largest fitting state one text may need (bytes); checked before any model call.
MAX_FIT_BYTES = 4 * 2**30
# Memory a sampled fit holds per sample, measured (peak RSS growth, eff and fidel, 1e5
# samples, 3 and 20 units): ~1.0 KiB on 3 units, ~2.2 KiB on 20. Most of it is per-sample
# Python objects (the sample arrays, token-id lists, output rows), not the dense arrays, so
# a short text with 10**7 samples needs ~10 GiB although its dense state is 1 GiB.
BYTES_PER_SAMPLE = 768
BYTES_PER_SAMPLE_UNIT = 80


def check_memory(fitter: Fitter, n_samples: int, n_units: int) -> None:
    """Refuse a call whose fit of a text of ``n_units`` units would need more than
    :data:`MAX_FIT_BYTES`, before any model call (the samples the fitter scores count)."""
    scored = fitter.samples_scored(n_units, n_samples)
    need = int(scored) * (BYTES_PER_SAMPLE + BYTES_PER_SAMPLE_UNIT * max(n_units, 1))
    if need > MAX_FIT_BYTES:
        raise ValueError(
            f"n_samples={n_samples} on a text with {n_units} units needs about {need / 2**30:.1f} GiB "
            f"to fit (limit {MAX_FIT_BYTES / 2**30:.0f} GiB, slalom_core.api.MAX_FIT_BYTES); use fewer samples"
        )


def check_target_type(target: object) -> int | str | None:
    """``target`` as a plain int (numpy and 0-d tensor integers too), a class name (read
    against the model's names once it is known) or None, before any call."""
    if isinstance(target, torch.Tensor) and target.numel() == 1 and not target.dtype.is_floating_point:
        target = target.item()
    if target is None:
        return None
    if isinstance(target, str):
        if not target:
            raise ValueError("target is an empty string: give a class name, an int class index or None")
        return target
    if isinstance(target, (bool, np.bool_)) or not isinstance(target, (int, np.integer)):
        raise TypeError(f"target must be an int class index, a class name or None, got {target!r}")
    return int(target)


#: The largest |reference| the fit takes. The fit runs on (output - reference) in float64 (16
#: significant digits), so a unit's effect of order 1 keeps fewer digits the larger the
#: reference: measured on a word-count model, the values (plus the reference) at 1e6 and at
#: 1e7 agree to 8 digits, at 1e10 they are off by 10%, and near 1e308 the squares overflow
#: and the solver fails far from the cause. No float64 probability has log-odds beyond about
#: ±745, nor does a classifier's logit come near 1e6: the bound refuses only mistakes.
MAX_REFERENCE = 1e6


def check_reference(reference: ReferenceOption) -> np.ndarray | None:
    """None for "empty" (score it), else the user's reference as a float array, finite and
    within ±:data:`MAX_REFERENCE`."""
    if isinstance(reference, str):
        if reference != "empty":
            raise ValueError(f"unknown reference {reference!r}; use 'empty' or a number")
        return None
    if isinstance(reference, bool):
        raise TypeError("reference must be 'empty' or a number, not a bool")
    ref = np.asarray(reference, dtype=np.float64)
    if ref.ndim > 1 or not np.isfinite(ref).all():
        raise ValueError(f"reference must be 'empty', a finite number or one per class, got {reference!r}")
    if ref.size and np.abs(ref).max() > MAX_REFERENCE:
        raise ValueError(
            f"reference must be at most {MAX_REFERENCE:g} in absolute value (in the explained output's units: "
            f"log-odds or logits), got {reference!r}: the fit would lose the scores to rounding"
        )
    return ref


def reference_vector(ref: np.ndarray, n_cols: int, link: OutputLink) -> np.ndarray:
    if ref.ndim == 0:
        return np.full(n_cols, float(ref))
    if link.joint and ref.shape[0] == n_cols:
        # Centred logits are what is fitted: centre a per-class reference the same way.
        return ref - ref.mean()
    raise ValueError(f"reference has {ref.shape[0]} entries; the explained output has {n_cols} column(s)")


def check_seed(seed: object) -> int | tuple[int, ...] | None:
    """``seed`` as None, a plain int, or a tuple of one plain int per text; any of them >= 0."""
    if seed is None:
        return None
    many = not isinstance(seed, (int, np.integer)) and isinstance(seed, (Sequence, np.ndarray))
    for s in seed if many else [seed]:
        if isinstance(s, (bool, np.bool_)) or not isinstance(s, (int, np.integer)):
            raise TypeError(f"seed must be a non-negative int (or one per text), got {s!r}")
        if s < 0:
            raise ValueError(f"seed must be a non-negative int (or one per text), got {s!r}")
    return tuple(int(s) for s in seed) if many else int(seed)


def text_seeds(seed: int | tuple[int, ...] | None, n_texts: int, what: str = "text") -> list[int]:
    """One seed per text from a checked ``seed`` (:func:`check_seed`): ``seed`` for all, one
    of a tuple each, or (None) one draw."""
    if seed is None:
        # Drawn from torch's global generator, as Captum does, so that torch.manual_seed
        # reproduces; recorded so that any explanation can be reproduced on its own.
        return [int(torch.randint(0, 2**31 - 1, (1,)).item())] * n_texts
    if isinstance(seed, int):
        return [seed] * n_texts
    if len(seed) != n_texts:
        raise ValueError(f"seed has {len(seed)} entries for {n_texts} {what}s; give one seed, or one per {what}")
    return list(seed)


#: Every option of :class:`CallOptions` but the method and the fitter's options (checked by
#: the fitter's own table): its check, which returns the value the driver uses. Applied
#: once, in this order, by :func:`check_call` (scikit-learn's parameter constraints, in the
#: engine's words).
OPTION_CHECKS: dict[str, Callable[[object], object]] = {
    "n_samples": check_n_samples,
    "seed": check_seed,
    "target": check_target_type,
    "output": Choice("output", OUTPUT_KINDS),
    "multiclass": Choice("multiclass", MULTICLASS_MODES),
    "granularity": Choice("granularity", GRANULARITIES),
    "truncate": check_truncate,
    "reference": check_reference,
    "gamma": check_gamma,
}
