"""SLALOM-hybrid, the default: eff's short samples for the values, a few samples of the text in
context for the importances and the text's own output, one gradient fit over both."""

from __future__ import annotations

import numpy as np

from ..options import Interval, OneOf, check_options
from ..sampling import deletion_neighbourhood, short_sequences, subset_sequences
from .constants import (
    CHECK_SAMPLES,
    CONTEXT_ANCHOR_WEIGHT,
    CONTEXT_SHARE,
    CONTEXT_WEIGHT,
    HOLDOUT_FRACTION,
    L2_IMPORTANCE,
    LEARNING_RATE,
    MAX_DELETE_FRACTION,
    MAX_ITER,
    MIN_CONTEXT,
    PRIOR_SD,
    RIDGE_WEIGHT,
    SLOPE_AXIS,
    SLOPE_TOL,
    SOLVER,
    TRIPLE_LENGTH,
    VALUE_SD,
)
from .eff import EffFitter
from .fitter import given_options
from .protocol import FitRequest

#: The samplers of the text in context (see ``design``).
_CONTEXTS = ("deletions", "subsets")
#: The axes of the importances' slope (see ``slope_axis``).
_SLOPE_AXES = ("size", "agreement")


class HybridFitter(EffFitter):
    """The default: short samples for the values, a few samples of the text in context and
    the text itself for the importances and the text's own output.

    Triples of the text's tokens are cheap forward passes and pin down each token's value,
    but they say little about how the tokens share weight *inside the text*: a surrogate of
    short samples alone (``eff``, ``eff-slope``) misses most of the model's output on a long
    text, sometimes in the wrong direction, and its importances stay at their prior (below
    chance against human attention, docs/results.md). This design spends 99 % of the budget
    on triples and 1 % on deletions from the full text, and gives those few samples and the
    text itself (``anchor_weight``) a fixed share of the weight so that the many triples do
    not drown them.

    No SLALOM fits both the model's triples and its long texts: a joint fit reaches the
    text's output by bending the values, and ranks tokens worse by deletion AOPC. So the
    values are fitted to the triples first and then kept near that fit (``value_sd``), while
    the importances take the context.

    Ten context samples cannot pin ~100 importances one by one (however heavily weighted,
    they are ten observations: the prior counts them so, see
    :func:`~slalom_core.fitting.objective.effective_samples`). What they do pin is how
    strongly weight follows a token's effect. So the importances' prior is centred on β·h
    with the slope β fitted (``importance_slope``), and each token's own deviation keeps the
    prior's sd. The axis h (``slope_axis``) is by default each token's effect *in the
    direction of the model's move on the text* (``"agreement"``: ‖v‖ + v·u, u that
    direction): a weighted mean of values can only reach a confident output if the tokens
    that agree with it carry the weight, which is what the model's own deletions show.

    What it gives up: ``removal`` = F(t) − F(t without the token) ranks worse, because a
    weighted mean near a confident output *rises* when a mildly polar token goes while the
    model's output falls (a property of the surrogate class). Each explanation checks
    ``removal`` against the model's own deletions (``diagnostics["removal_agreement"]``,
    ``["removal_agrees"]``); rank by ``contribution`` or ``lin``. For the fastest faithful
    ranking without a description of the text's output, use ``method="eff-slope"``.
    docs/results.md has the measured front on two classifiers.

    Args:
        context_share: share of ``n_samples`` spent on samples in context (0: none; the
            values then come from the short samples and the importances from the same
            samples under the slope's prior, see :class:`EffSlopeFitter`).
        min_context: the fewest samples in context whenever ``context_share`` > 0 (budget
            permitting: at most ``n_samples`` − 1), so that a small budget still reads enough
            of the text in context to set the importances.
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
        importance_slope: True: the importances' prior is N(β·h, prior_sd²) with β
            fitted (a flat prior on β) and h from the values v of a first fit on the short
            samples alone (``slope_axis``); False: N(0, prior_sd²). Default None: True
            wherever ``value_sd`` is a number, False for ``value_sd=None`` (the joint fit).
        slope_axis: "agreement" (default): h = ‖v‖ + v·u, u the unit direction of the
            model's move from the reference point on the text (for one log-odds column,
            2·max(±v, 0): a token's effect towards the model's side, 0 against it);
            "size": h = ‖v‖, whatever the direction.
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
    #: Draw each short sample's units without replacement: a sample is then a set, which
    #: Captum's ``perturbation="replace"`` can show the model as it is.
    distinct_units = True
    OPTIONS = {
        **{k: v for k, v in EffFitter.OPTIONS.items() if k not in ("design", "singletons", "deletion_share")},
        "context_share": (Interval(float, 0, 1, "left"),),
        "min_context": (Interval(int, 1, None),),
        "context": (OneOf(*_CONTEXTS),),
        "context_weight": (Interval(float, 0, 1, "neither"), OneOf(None)),
        "max_delete_fraction": (Interval(float, 0, 1, "right"),),
        "value_sd": (Interval(float, 0, None), OneOf(None)),
        "importance_slope": (OneOf(True, False, None),),
        "slope_axis": (OneOf(*_SLOPE_AXES),),
    }

    def __init__(
        self,
        context_share: float = CONTEXT_SHARE,
        min_context: int = MIN_CONTEXT,
        context: str = "deletions",
        context_weight: float | None = CONTEXT_WEIGHT,
        max_delete_fraction: float = MAX_DELETE_FRACTION,
        value_sd: float | None = VALUE_SD,
        importance_slope: bool | None = None,
        slope_axis: str = SLOPE_AXIS,
        anchor_weight: float = CONTEXT_ANCHOR_WEIGHT,
        sample_length: int | tuple[int, int] = TRIPLE_LENGTH,
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
        self.min_context = int(min_context)
        self.context = context
        self.context_weight = None if context_weight is None else float(context_weight)
        self.max_delete_fraction = float(max_delete_fraction)
        self.value_sd = None if value_sd is None else float(value_sd)
        if importance_slope is None:  # on wherever the short samples' values are fitted first
            importance_slope = self.value_sd is not None
        self.importance_slope = bool(importance_slope)
        self.slope_axis = slope_axis
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
        return min(max(self.min_context, int(round(self.context_share * n_samples))), n_samples - 1)

    def design(self, rng, position_units, n_units, n_samples):
        n_ctx = self.n_context(n_samples, len(position_units))
        short = short_sequences(rng, n_units, n_samples - n_ctx, self.sample_length, self.distinct_units)
        if not n_ctx:
            return short
        if self.context == "deletions":
            return short + deletion_neighbourhood(rng, position_units, n_ctx, self.max_delete_fraction)
        return short + subset_sequences(rng, position_units, n_ctx)

    def design_priors(self, samples, y, idx, n_positions, n_units, full_target=None):
        if self.value_sd is None and not self.importance_slope:
            return None, None
        # The values of the short samples alone: each token's effect without its context.
        n_short = len(samples) - self.n_context(len(samples), n_positions)
        short = idx[idx < n_short]
        value, _imp, _info = yield FitRequest([samples[i] for i in short], y[short], n_units)
        v_prior = None if self.value_sd is None else (value, self.value_sd)
        # The slope's axis: the size of each token's effect alone (over classes: its norm).
        basis = np.linalg.norm(value, axis=1) if self.importance_slope else None
        if basis is not None and self.slope_axis == "agreement" and full_target is not None:
            move = np.reshape(full_target, -1)
            if np.linalg.norm(move) > 0:
                # ‖v‖ + v·u (u the unit direction of the model's move on the text): twice a
                # token's effect along the text's own direction, 0 for a token against it.
                basis = basis + value @ (move / np.linalg.norm(move))
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

    def deletion_indices(self, n_samples, n_positions):
        n_ctx = self.n_context(n_samples, n_positions) if self.context == "deletions" else 0
        return np.arange(n_samples - n_ctx, n_samples)  # the design puts them last

    def design_diagnostics(self, n_samples, n_positions):
        n_ctx = self.n_context(n_samples, n_positions)
        return {
            "design": f"{n_samples - n_ctx} short samples + {n_ctx} {self.context}",
            "n_context": n_ctx,
            "context_weight": self.context_weight if n_ctx else None,
        }
