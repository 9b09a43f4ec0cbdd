"""SLALOM-eff: short random samples, gradient fit."""

from __future__ import annotations

import numpy as np

from ..options import Interval, IntPair, OneOf, check_options
from ..sampling import balanced_sequences, deletion_neighbourhood, short_sequences
from ..surrogate import pad_sequences
from .fitter import _POSITIVE, _SAMPLED_OPTIONS, _given, _request_priors
from .gradient import fit_gradient_batch
from .sampled import _SampledFitter

_EFF_DESIGNS = {"random": short_sequences, "balanced": balanced_sequences}


class EffFitter(_SampledFitter):
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
            "evidence" to choose it per text from the data (see :class:`_SampledFitter`).
        l2_value: ridge weight on v, see :func:`fit_gradient`.
        tol: relative improvement (in units of the targets' variance) at which to stop.
        holdout_fraction, anchor_weight, check_samples: see :class:`_SampledFitter`.

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
        **_SAMPLED_OPTIONS,
        "sample_length": (Interval(int, 1, None), IntPair(1)),
        "design": (OneOf(*_EFF_DESIGNS),),
        "singletons": (OneOf(True, False),),
        "deletion_share": (Interval(float, 0, 1, "left"),),
        "solver": (OneOf("lbfgs", "adam"),),
        "learning_rate": (_POSITIVE,),
        "l2_importance": (Interval(float, 0, None), OneOf("auto")),
        # No None here: without a prior, a number l2_importance is the ridge instead.
        "prior_sd": (_POSITIVE, OneOf("evidence")),
        "l2_value": (Interval(float, 0, None),),
    }

    def __init__(
        self,
        sample_length: int | tuple[int, int] = 2,
        design: str = "random",
        singletons: bool = False,
        deletion_share: float = 0.0,
        solver: str = "lbfgs",
        holdout_fraction: float = 0.1,
        max_iter: int = 500,
        tol: float = 1e-7,
        learning_rate: float = 0.05,
        l2_importance: float | str = "auto",
        prior_sd: float | str = 0.25,
        l2_value: float = 1e-3,
        anchor_weight: float = 0.0,
        check_samples: int = 0,
    ) -> None:
        check_options(self.name, self.OPTIONS, _given(locals(), self.OPTIONS))
        super().__init__(
            holdout_fraction, max_iter, tol, prior_sd if l2_importance == "auto" else None, anchor_weight, check_samples
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

    def solve_batch(self, requests, device=None):
        return fit_gradient_batch(
            [(*pad_sequences(r.samples), r.y, r.n_units) for r in requests],
            inits=[r.init for r in requests],
            weights=[r.weights for r in requests],
            solver=self.solver,
            max_iter=self.max_iter,
            tol=self.tol,
            learning_rate=self.learning_rate,
            l2_importance=0.0 if self.prior_sd is not None else float(self.l2_importance),
            prior_sd=_request_priors(self.prior_sd, requests),
            l2_value=self.l2_value,
            value_priors=[r.value_prior for r in requests],
            importance_bases=[r.importance_basis for r in requests],
            device=device,
        )
