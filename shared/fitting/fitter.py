"""The :class:`Fitter` interface (a generator protocol) and the option tables fitters declare."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Generator

import numpy as np
import torch

from ..options import Interval, OneOf
from .protocol import FitGenerator, FitRequest


class Fitter(ABC):
    """A fitting algorithm, selected by name (see :data:`FITTERS`).

    :meth:`run` is a generator. It receives the text's positions as unit indices and the
    model's target on the full text (measured from the reference point), yields lists of
    samples for the model to score, is sent their (B, K) targets back, and returns a
    :class:`FitResult`. :meth:`steps` is the same generator, except that it may also yield
    :class:`FitRequest` objects, answered by :meth:`solve_batch` (the driver collects the
    requests of many texts and solves them together).

    Example:
        >>> fitter = get_fitter("fidel")
        >>> isinstance(fitter, Fitter), fitter.name
        (True, 'fidel')
    """

    name: str = ""
    #: The options the constructor takes and what each may be (see :mod:`.options`).
    OPTIONS: dict = {}
    #: The standard deviation of the prior on the importances (None: the fitter has no
    #: prior, e.g. ana). The driver records it in each explanation's diagnostics, and
    #: :attr:`SlalomExplanation.importance_determined` compares standard errors with it.
    prior_sd: float | None = None
    #: Whether one sample may hold a unit more than once, counting it twice in the
    #: surrogate. A caller that replaces absent features (a sample is then a *set*)
    #: refuses such fitters; subclasses that draw with replacement say so.
    samples_repeat_units: bool = False
    #: Whether every sample holds a few units only (no near-full-length deletions of the
    #: text): a caller may then batch far more samples per forward pass.
    samples_short: bool = False

    @property
    def importance_measured(self) -> str:
        """What the importances of this fitter measure, a key of
        :data:`~slalom_core.diagnostics.IMPORTANCE_MEASURED`: "alone" when every sample holds a
        few units (each token beside one or two others), "in context" when the samples are
        deletions of the text. A fitter whose design mixes them says so (eff, hybrid).

        Example:
            >>> get_fitter("fidel").importance_measured, get_fitter("ana").importance_measured
            ('in context', 'alone')
        """
        return "alone" if self.samples_short else "in context"

    @abstractmethod
    def run(
        self,
        rng: np.random.Generator,
        position_units: np.ndarray,
        n_units: int,
        n_samples: int,
        full_target: np.ndarray | None = None,
    ) -> FitGenerator:
        """Generator: yields sample lists, receives (B, K) targets, returns a FitResult."""

    def steps(
        self,
        rng: np.random.Generator,
        position_units: np.ndarray,
        n_units: int,
        n_samples: int,
        full_target: np.ndarray | None = None,
    ) -> Generator:
        """Like :meth:`run`, but fits may be yielded as :class:`FitRequest` (default: none are)."""
        return self.run(rng, position_units, n_units, n_samples, full_target)

    def solve_batch(
        self, requests: list[FitRequest], device: torch.device | str | None = None
    ) -> list[tuple[np.ndarray, np.ndarray, dict]]:
        """Solve the fit requests of several texts at once; ``(value, importance, info)`` each."""
        raise NotImplementedError(f"{type(self).__name__} yields no fit requests")

    def min_samples(self, n_units: int) -> int:
        """The fewest samples a fit of a text of ``n_units`` units needs."""
        return 1

    def samples_scored(self, n_units: int, n_samples: int) -> int:
        """How many design samples the fit of a text of ``n_units`` units scores when the
        call asks for ``n_samples`` (default: that many; a closed-form fitter may fix its own
        count). Callers report and budget with it instead of knowing the fitter's class.

        Example:
            >>> get_fitter("fidel").samples_scored(5, 100), get_fitter("ana").samples_scored(5, 100)
            (100, 9)
        """
        return int(n_samples)

    def planned_samples(
        self,
        rng: np.random.Generator,
        position_units: np.ndarray,
        n_units: int,
        n_samples: int,
        unit_lengths: np.ndarray | None = None,
    ) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """The samples :meth:`steps` will ask for, before any model call, for cost estimates.

        Returns ``(known, bounds)``: samples known in advance (given the same ``rng`` state
        as :meth:`steps` gets), and one upper bound (a sample at least as long) per sample
        that depends on model outputs and so cannot be known yet. ``unit_lengths`` (tokens
        per unit) lets a bound be tighter than the full text. Default: ``n_samples``
        samples, each bounded by the full text.

        Example:
            >>> known, bounds = get_fitter("fidel").planned_samples(np.random.default_rng(0), np.arange(4), 4, 10)
            >>> len(known), len(bounds)
            (10, 0)
        """
        return [], [position_units] * int(n_samples)


# Option tables (see :mod:`.options`): what each fitter's options may be, checked once,
# in the constructor, before any model call.
#: A number above zero.
POSITIVE = Interval(float, 0, None, "neither")
#: The options every sampled fitter takes (see :class:`~.sampled.SampledFitter`).
SAMPLED_OPTIONS = {
    "holdout_fraction": (Interval(float, 0, 0.5, "left"),),
    "max_iter": (Interval(int, 1, None),),
    "tol": (POSITIVE,),
    "prior_sd": (POSITIVE, OneOf("evidence", None)),
    "anchor_weight": (Interval(float, 0, 1, "left"),),
    "check_samples": (Interval(int, 0, None),),
}


def given_options(args: dict, table: dict) -> dict:
    """The constructor arguments (``locals()`` at its top) that ``table`` declares.

    Args:
        args: the constructor's ``locals()``, taken before anything else is bound.
        table: an option table (name -> what the value may be).

    Returns:
        The entries of ``args`` that ``table`` names.

    Example:
        >>> given_options({"self": None, "tol": 1e-9, "max_iter": 5}, {"tol": ()})
        {'tol': 1e-09}
    """
    return {k: v for k, v in args.items() if k in table}
