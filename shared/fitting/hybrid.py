"""SLALOM-hybrid: eff's short samples for the values, a few samples of the text in context for
the importances and the text's own output, one gradient fit over both."""

from __future__ import annotations

import numpy as np

from ..options import Interval, OneOf, check_options
from ..sampling import deletion_neighbourhood, short_sequences, subset_sequences
from .constants import (
    CHECK_SAMPLES,
    HOLDOUT_FRACTION,
    L2_IMPORTANCE,
    LEARNING_RATE,
    MAX_DELETE_FRACTION,
    MAX_ITER,
    PRIOR_SD,
    RIDGE_WEIGHT,
    SAMPLE_LENGTH,
    SLOPE_TOL,
    SOLVER,
)
from .eff import EffFitter
from .fitter import given_options
from .protocol import FitRequest

#: The samplers of the text in context (see ``design``).
_CONTEXTS = ("deletions", "subsets")


class HybridFitter(EffFitter):
    """Short samples plus a few samples of the text in context, fitted together.

    Pairs of the text's tokens are the cheapest forward passes there are and pin down the
    values, but they say little about how the tokens share weight inside the text: on long
    reviews an eff surrogate misses most of the model's own output on the text, and its
    importances are near chance on human attention (docs/results.md). SLALOM-fidel's
    deletion samples carry that signal, at many times the cost. This design spends most of the
    budget on pairs and a small share on samples that keep the text's context, and gives
    those samples (and the text itself, ``anchor_weight``) a fixed share of the weight so
    that the many pairs do not drown them.

    No SLALOM fits both the model's pairs and its long texts: a joint fit reaches the text's
    output by bending the values, and ranks tokens worse by deletion AOPC. So by default the values
    are fitted to the pairs first and then kept near that fit (``value_sd``), while the
    importances take the context.

    The few context samples cannot pin ~100 importances one by one (20 samples, however
    heavily weighted, are 20 observations: the prior counts them so, see
    :func:`~slalom_core.fitting.objective.effective_samples`). What they do pin is one
    number: how strongly weight follows the size of a token's effect. So by default
    (``importance_slope``) the importances' prior is centred on β·|v| (v the pairs' values)
    with the slope β fitted, and each token's own deviation from that line keeps the
    prior's sd. Strongly polar tokens then take the weight that brings the surrogate to the
    model's output on the text, and no single token's importance runs off with the seed; an
    importance the data do not determine keeps a standard error near the prior's. Its top
    tokens are still less stable across seeds than the default's (:class:`EffSlopeFitter`),
    and ``removal`` ranks worse, because concentrating the weight puts the surrogate's output
    above most polar tokens' values. docs/results.md has the measured
    front (two classifiers, against eff, the reference implementation and the previous
    design).

    Args:
        context_share: share of ``n_samples`` spent on samples in context (0: none; the
            values then come from the short samples and the importances from the same
            samples under the slope's prior, see :class:`EffSlopeFitter`).
        context: "deletions" (the text with up to ``max_delete_fraction`` of its positions
            deleted, fidel's design) or "subsets" (``k`` positions kept in order, ``k``
            log-uniform from 2 to n − 1; shorter, so cheaper, see
            :func:`~slalom_core.sampling.subset_sequences`).
        context_weight: share of the total weight (before the anchor's) carried by the
            context samples; None: each sample counts the same.
        max_delete_fraction: for ``context="deletions"``.
        value_sd: None: values and importances are fitted to all samples together. A
            number: the values are first fitted to the short samples alone (as eff fits
            them: each token's effect without its context), and the joint fit then keeps
            them near that fit, with a Gaussian prior of this sd (log-odds); 0 holds them
            there and fits only the importances to the context.
        importance_slope: True: the importances' prior is N(β·|v|, prior_sd²) with β
            fitted (a flat prior on β) and v the values of a first fit on the short samples
            alone; False: N(0, prior_sd²). Default None: True wherever ``value_sd`` is a
            number, False for ``value_sd=None`` (the joint fit, as before the slope).
        anchor_weight: share of the total weight given to the full text itself.
        tol: as :class:`EffFitter`, tighter by default (the tolerance policy in
            :mod:`.constants` says why).
        sample_length, solver, prior_sd, …: as :class:`EffFitter` (the short part).

    Example:
        >>> fitter = HybridFitter(context_share=0.05)
        >>> fitter.name, len(fitter.design(np.random.default_rng(0), np.arange(30), 30, 100))
        ('hybrid', 100)
    """

    name = "hybrid"
    OPTIONS = {
        **{k: v for k, v in EffFitter.OPTIONS.items() if k not in ("design", "singletons", "deletion_share")},
        "context_share": (Interval(float, 0, 1, "left"),),
        "context": (OneOf(*_CONTEXTS),),
        "context_weight": (Interval(float, 0, 1, "neither"), OneOf(None)),
        "max_delete_fraction": (Interval(float, 0, 1, "right"),),
        "value_sd": (Interval(float, 0, None), OneOf(None)),
        "importance_slope": (OneOf(True, False, None),),
    }

    def __init__(
        self,
        context_share: float = 0.04,
        context: str = "deletions",
        context_weight: float | None = 0.75,
        max_delete_fraction: float = MAX_DELETE_FRACTION,
        value_sd: float | None = 0.1,
        importance_slope: bool | None = None,
        anchor_weight: float = 0.1,
        sample_length: int | tuple[int, int] = SAMPLE_LENGTH,
        solver: str = SOLVER,
        holdout_fraction: float = HOLDOUT_FRACTION,
        max_iter: int = MAX_ITER,
        tol: float = SLOPE_TOL,
        learning_rate: float = LEARNING_RATE,
        l2_importance: float | str = L2_IMPORTANCE,
        prior_sd: float | str = PRIOR_SD,
        l2_value: float = RIDGE_WEIGHT,
        check_samples: int = CHECK_SAMPLES,
    ) -> None:
        check_options(self.name, self.OPTIONS, given_options(locals(), self.OPTIONS))
        if value_sd is not None and l2_importance != "auto":
            # The values' prior lives in the posterior objective; a ridge fit has none.
            raise ValueError(
                f"method 'hybrid': value_sd={value_sd!r} needs the prior on the importances "
                "(l2_importance='auto'); pass value_sd=None for a ridge fit"
            )
        super().__init__(
            sample_length=sample_length,
            solver=solver,
            holdout_fraction=holdout_fraction,
            max_iter=max_iter,
            tol=tol,
            learning_rate=learning_rate,
            l2_importance=l2_importance,
            prior_sd=prior_sd,
            l2_value=l2_value,
            anchor_weight=anchor_weight,
            check_samples=check_samples,
        )
        self.context_share = float(context_share)
        self.context = context
        self.context_weight = None if context_weight is None else float(context_weight)
        self.max_delete_fraction = float(max_delete_fraction)
        self.value_sd = None if value_sd is None else float(value_sd)
        if importance_slope is None:  # on wherever the short samples' values are fitted first
            importance_slope = self.value_sd is not None
        self.importance_slope = bool(importance_slope)
        if self.importance_slope and self.objective != "posterior":
            raise ValueError(
                f"method {self.name!r}: importance_slope=True is a prior on the importances; it needs "
                "l2_importance='auto' (pass importance_slope=False for a ridge fit)"
            )

    @property
    def samples_short(self) -> bool:
        """Short samples only, unless a share of the budget goes to samples in context."""
        return self.context_share == 0

    def n_context(self, n_samples: int, n_positions: int) -> int:
        """How many of ``n_samples`` are drawn in context (none for a one-position text)."""
        if n_positions < 2 or self.context_share == 0:
            return 0
        return min(max(1, int(round(self.context_share * n_samples))), n_samples - 1)

    def design(self, rng, position_units, n_units, n_samples):
        n_ctx = self.n_context(n_samples, len(position_units))
        short = short_sequences(rng, n_units, n_samples - n_ctx, self.sample_length, self.distinct_units)
        if not n_ctx:
            return short
        if self.context == "deletions":
            return short + deletion_neighbourhood(rng, position_units, n_ctx, self.max_delete_fraction)
        return short + subset_sequences(rng, position_units, n_ctx)

    def design_priors(self, samples, y, idx, n_positions, n_units):
        if self.value_sd is None and not self.importance_slope:
            return None, None
        # The values of the short samples alone: each token's effect without its context.
        n_short = len(samples) - self.n_context(len(samples), n_positions)
        short = idx[idx < n_short]
        value, _imp, _info = yield FitRequest([samples[i] for i in short], y[short], n_units)
        v_prior = None if self.value_sd is None else (value, self.value_sd)
        # The slope's axis: the size of each token's effect alone (over classes: its norm).
        basis = np.linalg.norm(value, axis=1) if self.importance_slope else None
        return v_prior, basis

    def design_weights(self, samples, n_positions):
        n_ctx = self.n_context(len(samples), n_positions)
        if self.context_weight is None or not n_ctx:
            return None
        # The design puts its context samples last; each group gets its share of the weight.
        n_short = len(samples) - n_ctx
        w = np.full(len(samples), (1.0 - self.context_weight) / n_short)
        w[n_short:] = self.context_weight / n_ctx
        return w * len(samples)

    def design_diagnostics(self, n_samples, n_positions):
        n_ctx = self.n_context(n_samples, n_positions)
        return {
            "design": f"{n_samples - n_ctx} short samples + {n_ctx} {self.context}",
            "n_context": n_ctx,
            "context_weight": self.context_weight if n_ctx else None,
        }


class EffSlopeFitter(HybridFitter):
    """SLALOM-eff on triples with the importances' prior centred on a fitted slope of |value|:
    the default.

    Short samples of three distinct tokens of the text (the authors' own code samples triples;
    the paper's Algorithm 1 pairs), no samples in context and no extra weight on the text itself.
    A first fit gives each token's |v|; the fit then puts the importances' prior at
    N(β·|v|, prior_sd²) with β fitted (:class:`HybridFitter`'s ``importance_slope``), values
    free (``value_sd=None``: holding them near the first fit counts the same samples twice
    and makes the standard errors too small).
    A triple shows how two or three tokens share weight, and the slope carries what all
    triples say about it to every token at once, so each token's own deviation needs only
    its own samples to stay within the prior.

    What it gives up is the text's own output: like eff, the surrogate misses the model on
    a long text by most of the signal (``exp.full_text_gap``; the SHAP adapter folds that
    residual into ``base_values``). Closing that gap with deletion samples or the anchor is
    what :class:`HybridFitter` does, at the cost of stable top tokens and of ``removal``
    (docs/results.md has the measured front on two classifiers against the reference).

    Args:
        sample_length: units per sample, distinct within a sample (see :class:`EffFitter`).
        value_sd: as :class:`HybridFitter` (None: the values are fitted freely).
        importance_slope: as :class:`HybridFitter` (True: the prior is centred on β·|v|).
        solver, holdout_fraction, max_iter, tol, learning_rate, l2_importance, prior_sd,
            l2_value, check_samples: as :class:`HybridFitter`, whose options it takes except
            those of the context samples and the anchor.

    Example:
        >>> fitter = EffSlopeFitter()
        >>> fitter.name, fitter.sample_length, fitter.importance_slope, fitter.n_context(1000, 150)
        ('eff-slope', 3, True, 0)
    """

    name = "eff-slope"
    distinct_units = True  # each sample is a set, so replacement perturbations can show it
    OPTIONS = {
        k: v
        for k, v in HybridFitter.OPTIONS.items()
        if k not in ("context_share", "context", "context_weight", "max_delete_fraction", "anchor_weight")
    }

    def __init__(
        self,
        sample_length: int | tuple[int, int] = 3,
        value_sd: float | None = None,
        importance_slope: bool = True,
        solver: str = SOLVER,
        holdout_fraction: float = HOLDOUT_FRACTION,
        max_iter: int = MAX_ITER,
        tol: float = SLOPE_TOL,
        learning_rate: float = LEARNING_RATE,
        l2_importance: float | str = L2_IMPORTANCE,
        prior_sd: float | str = PRIOR_SD,
        l2_value: float = RIDGE_WEIGHT,
        check_samples: int = CHECK_SAMPLES,
    ) -> None:
        # HybridFitter checks every option against this class's table (self.OPTIONS).
        super().__init__(
            context_share=0.0,
            anchor_weight=0.0,
            sample_length=sample_length,
            value_sd=value_sd,
            importance_slope=importance_slope,
            solver=solver,
            holdout_fraction=holdout_fraction,
            max_iter=max_iter,
            tol=tol,
            learning_rate=learning_rate,
            l2_importance=l2_importance,
            prior_sd=prior_sd,
            l2_value=l2_value,
            check_samples=check_samples,
        )

    def design_diagnostics(self, n_samples, n_positions):
        return {"design": f"{n_samples} short samples of {self.sample_length} units"}
