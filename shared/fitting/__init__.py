"""The ways of fitting a local SLALOM (Sec. 5.2-5.3, App. D, Prop. 5.2), in torch.

Each fitter is a small state machine written as a generator: it *yields* the samples (lists
of unit-index sequences) it wants the model to score, receives the fitting targets back via
``send``, and finally *returns* a :class:`FitResult`. That keeps fitters free of any model
code, and lets :func:`slalom_core.explain_batch` run the fitters of many texts in lock-step
so that their model calls share batches. The sampled fitters' :meth:`~Fitter.steps` also
yield their fits as :class:`FitRequest` objects, so that the driver can solve the fits of
all texts in one batched optimisation (:meth:`_SampledFitter.solve_batch`) on the model's
device; :meth:`~Fitter.run` solves them inline, one text at a time.

- ``eff-slope`` (:class:`EffSlopeFitter`, the default): eff's short random sequences, as
  triples, with the importances' prior centred on a fitted slope times the tokens' |value|.
- ``hybrid`` (:class:`HybridFitter`): eff's short sequences for the values, a few deletions
  from the full text and the text itself for the importances (the same slope by default).
- ``eff``  (:class:`EffFitter`):   short random sequences, gradient descent on the MSE.
- ``fidel`` (:class:`FidelFitter`): deletions from the full text, quasi-Newton on the
  posterior (default) or alternating least squares.
- ``ana``  (:class:`AnaFitter`):   2U-1 evaluations, closed form; exact on a true SLALOM.

All fits run in float64, on the CPU and on CUDA alike: the stopping rules (an exact fit at
a relative residual of 1e-10, a gradient of 1e-4 on an objective that divides by the
residual) are below what float32 resolves, and the fits are small enough that their cost on
a GPU is kernel launches, not arithmetic, so float32 would buy little speed.

Files: :mod:`.constants` (shared numerical settings), :mod:`.protocol` (requests and
results), :mod:`.objective` (the batched objective), :mod:`.solvers` (batched L-BFGS, Adam),
:mod:`.gradient` (gradient fits), :mod:`.als` (alternating least squares), :mod:`.laplace`
(standard errors), :mod:`.fitter` (the interface and option tables), :mod:`.sampled` (the
eff/hybrid/fidel flow), and one file per method: :mod:`.hybrid`, :mod:`.eff`, :mod:`.fidel`,
:mod:`.ana`.
"""

from __future__ import annotations

from ..options import check_option_names
from ..surrogate import count_matrix, pad_sequences
from .als import _importance_gradient, fit_als
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
from .fidel import FidelFitter
from .fitter import Fitter
from .gradient import fit_gradient, fit_gradient_batch
from .hybrid import EffSlopeFitter, HybridFitter
from .laplace import laplace_standard_errors
from .objective import _Batch, _mse_and_grads, _Objective, _objective, _pack, _PosteriorObjective, _RidgeObjective
from .protocol import FitGenerator, FitRequest, FitResult
from .sampled import single_threaded_fits
from .solvers import _adam, _lbfgs, _lbfgs_direction

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
    # Internals the tests check directly (the objective and its solvers).
    "_Batch",
    "_pack",
    "_mse_and_grads",
    "_Objective",
    "_objective",
    "_RidgeObjective",
    "_PosteriorObjective",
    "_lbfgs",
    "_lbfgs_direction",
    "_adam",
    "_importance_gradient",
]


FITTERS: dict[str, type[Fitter]] = {
    "eff": EffFitter,
    "fidel": FidelFitter,
    "ana": AnaFitter,
    "hybrid": HybridFitter,
    "eff-slope": EffSlopeFitter,
}


def get_fitter(method: str | Fitter, **options) -> Fitter:
    """A fitter by name ("eff", "fidel", "ana"), configured with ``options``.

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
