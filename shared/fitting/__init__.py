"""Fitting a local SLALOM to a model's outputs (Sec. 5.2-5.3, App. D, Prop. 5.2), in torch.

The methods, by name (:data:`FITTERS`; :func:`get_fitter` builds one with its options):

- ``hybrid`` (:class:`HybridFitter`), the default of :func:`slalom_core.explain`
  (:data:`slalom_core.api.call.DEFAULT_METHOD`): triples measure each unit alone (90 % of
  the budget); single tokens, the triples and deletions of the text carry that measurement to
  every scale (:mod:`.in_context`: values in each token's output alone and a length law, all
  measured). Recovers a true SLALOM with its defaults, and a SLALOM under a length law.
- ``eff-slope`` (:class:`EffSlopeFitter`): triples alone, the importances' prior centred on
  a fitted slope times each unit's |value| (a prior built from the values: its importances
  are not measured; kept for comparison).
- ``eff`` (:class:`EffFitter`): the paper's short random samples, gradient fit.
- ``fidel`` (:class:`FidelFitter`): deletions from the full text, quasi-Newton on the
  posterior (default) or alternating least squares.
- ``ana`` (:class:`AnaFitter`): 2U-1 evaluations, closed form; exact on a true SLALOM.

Each fitter is a small state machine written as a generator: it *yields* the samples (lists
of unit-index sequences) it wants the model to score, receives the fitting targets back via
``send``, and finally *returns* a :class:`FitResult`. That keeps fitters free of any model
code, and lets :func:`slalom_core.explain_batch` run the fitters of many texts in lock-step
so that their model calls share batches. The sampled fitters' :meth:`~Fitter.steps` also
yield their fits as :class:`FitRequest` objects, so that the driver can solve the fits of
all texts in one batched optimisation (:meth:`~Fitter.solve_batch`) on the model's device;
:meth:`~Fitter.run` solves them inline, one text at a time. A fitter declares what its
callers need to know (:attr:`~Fitter.samples_repeat_units`, :meth:`~Fitter.samples_scored`,
:meth:`~Fitter.planned_samples`, :attr:`~Fitter.prior_sd`) instead of being recognised by
its class.

All fits run in float64, on the CPU and on CUDA alike: the stopping rules (an exact fit at
a relative residual of 1e-10, a gradient of 1e-4 on an objective that divides by the
residual) are below what float32 resolves, and the fits are small enough that their cost on
a GPU is kernel launches, not arithmetic, so float32 would buy little speed.

The modules, one concern each:

- :mod:`.constants`: bounds, dtype, the tolerance policy (which stop each layer uses, and
  why) and the option defaults, each value stated once.
- :mod:`.protocol`: what a fitter yields and returns (:class:`FitRequest`, :class:`FitResult`).
- :mod:`.fitter`: the :class:`Fitter` interface and the option tables fitters share.
- :mod:`.in_context`: the default's second stage, a short-sample fit carried into the text.
- :mod:`.sampled`: the flow of the sampled fitters (design, held-out check, priors, final fit,
  standard errors), :class:`~.sampled.SampledFitter`.
- :mod:`.eff`, :mod:`.hybrid`, :mod:`.eff_slope`, :mod:`.fidel`, :mod:`.ana`: one file
  per method.
- :mod:`.objective`: the batched objective, its two kinds (ridge, posterior) and how each
  is solved.
- :mod:`.solvers`: batched, bounded L-BFGS and Adam.
- :mod:`.gradient`: the gradient fits (:func:`fit_gradient`, :func:`fit_gradient_batch`).
- :mod:`.als`: alternating least squares (:func:`fit_als`).
- :mod:`.laplace`: standard errors (:func:`laplace_standard_errors`).

A new method is a :class:`Fitter` subclass (usually a :class:`~.sampled.SampledFitter` with
its own ``design``) in its own file, registered in :data:`FITTERS`.
"""

from __future__ import annotations

from ..options import check_option_names
from ..surrogate import count_matrix, pad_sequences
from .als import fit_als
from .ana import AnaFitter
from .constants import (
    EVIDENCE_RANGE,
    EVIDENCE_ROUNDS,
    EVIDENCE_START,
    EXACT_FIT,
    FIT_DTYPE,
    GRAD_TOL,
    IMPORTANCE_BOUND,
    LBFGS_GTOL,
    LBFGS_MEMORY,
    VALUE_PRIOR_SD,
)
from .eff import EffFitter
from .eff_slope import EffSlopeFitter
from .fidel import FidelFitter
from .fitter import Fitter
from .gradient import fit_gradient, fit_gradient_batch
from .hybrid import HybridFitter
from .laplace import laplace_standard_errors
from .protocol import FitGenerator, FitRequest, FitResult
from .sampled import single_threaded_fits

__all__ = [
    "FitResult",
    "FitRequest",
    "FitGenerator",
    "Fitter",
    "EffFitter",
    "FidelFitter",
    "AnaFitter",
    "HybridFitter",
    "EffSlopeFitter",
    "FITTERS",
    "get_fitter",
    "fit_gradient",
    "fit_gradient_batch",
    "fit_als",
    "pad_sequences",
    "count_matrix",
    "laplace_standard_errors",
    "single_threaded_fits",
    "GRAD_TOL",
    "FIT_DTYPE",
    "IMPORTANCE_BOUND",
    "VALUE_PRIOR_SD",
    "EXACT_FIT",
    "LBFGS_MEMORY",
    "LBFGS_GTOL",
    "EVIDENCE_START",
    "EVIDENCE_RANGE",
    "EVIDENCE_ROUNDS",
]


FITTERS: dict[str, type[Fitter]] = {
    "eff": EffFitter,
    "fidel": FidelFitter,
    "ana": AnaFitter,
    "hybrid": HybridFitter,
    "eff-slope": EffSlopeFitter,
}


def get_fitter(method: str | Fitter, **options) -> Fitter:
    """A fitter by name (a key of :data:`FITTERS`), configured with ``options``.

    Args:
        method: a name (e.g. "eff-slope", "hybrid", "eff", "fidel", "ana"), or a
            :class:`Fitter` already configured (returned as it is).
        options: the fitter's constructor options (see its class).

    Returns:
        The configured fitter.

    Example:
        >>> get_fitter("eff", sample_length=3).sample_length
        3
    """
    if isinstance(method, Fitter):
        if options:
            raise ValueError("options cannot be combined with a Fitter instance")
        return method
    if method not in FITTERS:
        raise ValueError(f"unknown method {method!r}; choose one of {sorted(FITTERS)}")
    # Names first (a constructor would raise Python's own TypeError); values in __init__.
    check_option_names(method, FITTERS[method].OPTIONS, options)
    return FITTERS[method](**options)
