"""SLALOM-fidel: deletions from the full text, quasi-Newton fit on the posterior or ALS."""

from __future__ import annotations

import numpy as np

from ..options import Interval, OneOf, check_options
from ..sampling import deletion_neighbourhood
from ..surrogate import count_matrix, pad_sequences
from .als import fit_als
from .constants import (
    ALS_TOL,
    ANCHOR_WEIGHT,
    CHECK_SAMPLES,
    GRADIENT_ONLY_FTOL,
    HOLDOUT_FRACTION,
    MAX_DELETE_FRACTION,
    MAX_ITER,
    PRIOR_SD,
)
from .fitter import POSITIVE, SAMPLED_OPTIONS, given_options
from .gradient import fit_gradient_batch
from .protocol import FitRequest
from .sampled import SampledFitter


class FidelFitter(SampledFitter):
    """SLALOM-fidel: deletions from the full text.

    Deletion samples all contain most of the text, so along one direction values and
    importances trade off almost freely: without a prior, where a fit stops in that flat
    valley depends on rounding (batch composition, CPU). By default the same Gaussian
    prior on the importances as eff's makes the optimum unique, and a quasi-Newton solver
    on the posterior objective (:func:`fit_gradient`), stopped by its gradient, finds it.
    ``solver="als"`` is alternating least squares (:func:`~.als.fit_als`; no prior; its
    answer is one point of the valley). Measured on exact SLALOMs, the quasi-Newton fit from
    s = 0 also reaches a lower error than ALS followed by the same polish (ALS drifts along
    the valley to large importances first).

    Args:
        max_delete_fraction: at most this share of positions is deleted per sample.
        solver: "lbfgs" (default, with the prior) or "als" (the prior is not used).
        prior_sd: standard deviation of the prior on s, or "evidence" (see :class:`~.sampled.SampledFitter`).
        max_iter: solver iterations (default 500).
        tol: ALS's relative-improvement stop (None: :data:`~.constants.ALS_TOL`); only with
            ``solver="als"`` (the quasi-Newton fit stops by its gradient, so a ``tol`` there is
            refused; see the tolerance policy in :mod:`.constants`).
        holdout_fraction, anchor_weight, check_samples: see :class:`~.sampled.SampledFitter`.

    Example:
        >>> FidelFitter(max_delete_fraction=0.3).name
        'fidel'
        >>> sc.explain(model, text, tokenizer=tok, method="fidel", solver="als")  # doctest: +SKIP
    """

    name = "fidel"
    OPTIONS = {
        **SAMPLED_OPTIONS,
        "max_delete_fraction": (Interval(float, 0, 1, "right"),),
        "solver": (OneOf("lbfgs", "als"),),
        "tol": (POSITIVE, OneOf(None)),
        # A prior is checked under ALS too (which uses none), so that a typo never passes.
        "prior_sd": (POSITIVE, OneOf("evidence")),
    }

    def __init__(
        self,
        max_delete_fraction: float = MAX_DELETE_FRACTION,
        solver: str = "lbfgs",
        holdout_fraction: float = HOLDOUT_FRACTION,
        max_iter: int = MAX_ITER,
        tol: float | None = None,
        prior_sd: float | str = PRIOR_SD,
        anchor_weight: float = ANCHOR_WEIGHT,
        check_samples: int = CHECK_SAMPLES,
    ) -> None:
        check_options(self.name, self.OPTIONS, given_options(locals(), self.OPTIONS))
        if tol is not None and solver != "als":
            # The quasi-Newton fit stops by its gradient: a tol= would be accepted and ignored.
            raise ValueError(
                "method 'fidel': tol= is ALS's stopping rule; solver='lbfgs' stops by its gradient. "
                "Pass solver='als' with tol=, or leave tol out"
            )
        super().__init__(
            holdout_fraction,
            max_iter,
            ALS_TOL if tol is None else tol,
            prior_sd if solver == "lbfgs" else None,
            anchor_weight,
            check_samples,
        )
        self.max_delete_fraction = float(max_delete_fraction)
        self.solver = solver

    def design(self, rng, position_units, n_units, n_samples):
        return deletion_neighbourhood(rng, position_units, n_samples, self.max_delete_fraction)

    def solve_batch(self, requests, device=None):
        if self.solver == "lbfgs":
            # Under the prior, stopped by its gradient alone (GRADIENT_ONLY_FTOL: see the
            # tolerance policy in .constants).
            return fit_gradient_batch(
                [(*pad_sequences(r.samples), r.y, r.n_units) for r in requests],
                inits=[r.init for r in requests],
                weights=[r.weights for r in requests],
                max_iter=self.max_iter,
                tol=GRADIENT_ONLY_FTOL,
                l2_importance=0.0,
                prior_sd=self.request_priors(requests),
                objective="posterior",
                device=device,
            )
        # ALS solves one text at a time (its line searches re-solve whole linear systems).
        return [self._solve_als(r, device) for r in requests]

    def _solve_als(self, r: FitRequest, device) -> tuple[np.ndarray, np.ndarray, dict]:
        counts, y = count_matrix(r.samples, r.n_units), r.y
        if r.weights is not None:
            # ALS takes no weights: the anchor row is repeated instead (its share rounded).
            reps = np.maximum(np.round(r.weights / r.weights.min()).astype(int), 1)
            counts, y = np.repeat(counts, reps, axis=0), np.repeat(y, reps, axis=0)
        return fit_als(
            counts,
            y,
            init_importance=None if r.init is None else r.init[1],
            max_iter=self.max_iter,
            tol=self.tol,
            device=device,
        )
