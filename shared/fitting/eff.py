"""SLALOM-eff: short random samples, gradient fit."""

from __future__ import annotations

import numpy as np

from ..options import Interval, IntPair, OneOf, check_options
from ..sampling import balanced_sequences, deletion_neighbourhood, short_sequences
from ..surrogate import pad_sequences
from .constants import (
    ANCHOR_WEIGHT,
    CHECK_SAMPLES,
    EFF_TOL,
    HOLDOUT_FRACTION,
    L2_IMPORTANCE,
    LEARNING_RATE,
    MAX_ITER,
    PRIOR_SD,
    RIDGE_WEIGHT,
    SAMPLE_LENGTH,
    SOLVER,
)
from .fitter import POSITIVE, SAMPLED_OPTIONS, given_options
from .gradient import fit_gradient_batch
from .sampled import SampledFitter

_EFF_DESIGNS = {"random": short_sequences, "balanced": balanced_sequences}


class EffFitter(SampledFitter):
    """SLALOM-eff (App. D, Algorithm 1): short random sequences, gradient descent.

    Args:
        sample_length: units per sample (the paper uses 2), or a range ``(lo, hi)``: each
            sample's length drawn uniformly from lo … hi (App. D: "1–3").
        design: "random" (the paper's: units drawn uniformly with replacement) or
            "balanced" (every unit in the same number of samples, ±1; see
            :func:`~slalom_core.sampling.balanced_sequences`).
        singletons: spend the first U samples on each unit alone. A one-unit sample is
            the shortest forward pass there is and measures the unit's value directly
            (G([u]) = v_u under the surrogate), leaving the rest of the budget to pin down
            the importances.
        deletion_share: share of the budget spent on deletion samples of the full text
            (SLALOM-fidel's design) instead of short samples: a design across lengths.
        solver: "lbfgs" (default) or "adam", see :func:`fit_gradient`.
        l2_importance: "auto" (default): a Gaussian prior on s with standard deviation
            ``prior_sd`` and the noise variance profiled out (see :func:`fit_gradient`); its
            pull on s grows with the residual noise and fades as samples accumulate. Or a
            number: a fixed ridge weight on s (0 disables it). Short
            samples identify s only weakly and a nearly unregularised fit overfits them (see
            docs/results.md, Table C, for the held-out R² and AOPC of both).
        prior_sd: the prior's standard deviation of s, for ``l2_importance="auto"``, or
            "evidence" to choose it per text from the data (see :class:`~.sampled.SampledFitter`).
        l2_value: ridge weight on v, see :func:`fit_gradient`.
        tol: relative improvement (in units of the targets' variance) at which to stop
            (see the tolerance policy in :mod:`.constants`).
        holdout_fraction, anchor_weight, check_samples: see :class:`~.sampled.SampledFitter`.

    Example:
        >>> fitter = EffFitter(sample_length=(1, 3), singletons=True)
        >>> fitter.name, fitter.min_samples(10)
        ('eff', 11)
        >>> sc.explain(model, text, tokenizer=tok, method=fitter)  # doctest: +SKIP
    """

    name = "eff"
    #: Draw each short sample's units without replacement (a sample is then a set).
    distinct_units = False
    OPTIONS = {
        **SAMPLED_OPTIONS,
        "sample_length": (Interval(int, 1, None), IntPair(1)),
        "design": (OneOf(*_EFF_DESIGNS),),
        "singletons": (OneOf(True, False),),
        "deletion_share": (Interval(float, 0, 1, "left"),),
        "solver": (OneOf("lbfgs", "adam"),),
        "learning_rate": (POSITIVE,),
        "l2_importance": (Interval(float, 0, None), OneOf("auto")),
        # No None here: without a prior, a number l2_importance is the ridge instead.
        "prior_sd": (POSITIVE, OneOf("evidence")),
        "l2_value": (Interval(float, 0, None),),
    }

    def __init__(
        self,
        sample_length: int | tuple[int, int] = SAMPLE_LENGTH,
        design: str = "random",
        singletons: bool = False,
        deletion_share: float = 0.0,
        solver: str = SOLVER,
        holdout_fraction: float = HOLDOUT_FRACTION,
        max_iter: int = MAX_ITER,
        tol: float = EFF_TOL,
        learning_rate: float = LEARNING_RATE,
        l2_importance: float | str = L2_IMPORTANCE,
        prior_sd: float | str = PRIOR_SD,
        l2_value: float = RIDGE_WEIGHT,
        anchor_weight: float = ANCHOR_WEIGHT,
        check_samples: int = CHECK_SAMPLES,
    ) -> None:
        check_options(self.name, self.OPTIONS, given_options(locals(), self.OPTIONS))
        # "auto": the posterior objective, under the prior on the importances; a number: the
        # ridge objective with that weight on the importances, and no prior.
        self.objective = "posterior" if l2_importance == "auto" else "ridge"
        super().__init__(
            holdout_fraction,
            max_iter,
            tol,
            prior_sd if self.objective == "posterior" else None,
            anchor_weight,
            check_samples,
        )
        self.sample_length = sample_length if isinstance(sample_length, tuple) else int(sample_length)
        self.design_name = design
        self.singletons = bool(singletons)
        self.deletion_share = float(deletion_share)
        self.solver = solver
        self.learning_rate = learning_rate
        self.l2_importance = l2_importance
        self.l2_value = l2_value

    @property
    def samples_short(self) -> bool:
        """Short samples only, unless a share of the budget goes to deletions of the text."""
        return self.deletion_share == 0

    @property
    def importance_measured(self) -> str:
        """ "alone" on short samples; with ``deletion_share`` the two kinds in one fit."""
        return "alone" if self.deletion_share == 0 else "alone and in context"

    @property
    def samples_repeat_units(self) -> bool:
        """Whether one short sample may hold a unit more than once (and count it twice):
        samples of 3 or more units drawn with replacement. A pair that draws one unit twice
        is that unit alone, as a set would be."""
        hi = max(self.sample_length) if isinstance(self.sample_length, tuple) else self.sample_length
        return hi > 2 and not self.distinct_units

    def design(self, rng, position_units, n_units, n_samples):
        singles = [np.array([u]) for u in range(n_units)] if self.singletons else []
        n_del = int(round(self.deletion_share * n_samples)) if len(position_units) > 1 else 0
        rest = _EFF_DESIGNS[self.design_name](rng, n_units, n_samples - len(singles) - n_del, self.sample_length)
        deletions = deletion_neighbourhood(rng, position_units, n_del) if n_del else []
        return singles + rest + deletions

    def deletion_indices(self, n_samples, n_positions):
        n_del = int(round(self.deletion_share * n_samples)) if n_positions > 1 else 0
        return np.arange(n_samples - n_del, n_samples)  # the design puts them last

    def solve_batch(self, requests, device=None):
        return fit_gradient_batch(
            [(*pad_sequences(r.samples), r.y, r.n_units) for r in requests],
            inits=[r.init for r in requests],
            weights=[r.weights for r in requests],
            solver=self.solver,
            max_iter=self.max_iter,
            tol=self.tol,
            learning_rate=self.learning_rate,
            l2_importance=0.0 if self.objective == "posterior" else float(self.l2_importance),
            prior_sd=self.request_priors(requests),
            objective=self.objective,
            l2_value=self.l2_value,
            value_priors=[r.value_prior for r in requests],
            importance_bases=[r.importance_basis for r in requests],
            device=device,
        )
