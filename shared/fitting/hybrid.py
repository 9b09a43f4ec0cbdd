"""SLALOM-hybrid, the default: each token measured alone on short samples, then carried to every
scale of the text (one token, a few, the text) by a length law that samples of each scale determine."""

from __future__ import annotations

import numpy as np
import torch

from ..options import Interval, check_options
from ..sampling import deletion_neighbourhood, short_sequences
from .checks import REMOVAL_AGREEMENT_MIN, removal_agreement
from .constants import (
    CHECK_SAMPLES,
    CONTEXT_SHARE,
    HOLDOUT_FRACTION,
    L2_IMPORTANCE,
    LEARNING_RATE,
    MAX_DELETE_FRACTION,
    MAX_ITER,
    MIN_CONTEXT,
    PRIOR_SD,
    RIDGE_WEIGHT,
    SINGLE_SHARE,
    SLOPE_TOL,
    SOLVER,
    TRIPLE_LENGTH,
)
from .eff import EffFitter
from .fitter import given_options
from .in_context import carry_to_every_scale, cross_validated
from .protocol import FitRequest, FitResult
from .sampled import SampledFitter, mse_and_r2

#: Folds of stage two's cross-validated check (``diagnostics["heldout_r2"]`` in context).
CV_FOLDS = 5
#: The options hybrid shares with eff, each declared once, in eff's table: the short stage's
#: fit, the triples' ``sample_length``, the held-out share (both stages') and the fresh checks.
_EFF_OPTIONS = (
    "holdout_fraction",
    "max_iter",
    "tol",
    "prior_sd",
    "check_samples",
    "sample_length",
    "solver",
    "learning_rate",
    "l2_importance",
    "l2_value",
)


class HybridFitter(SampledFitter):
    """The default: short samples measure each token alone; single tokens and samples of the
    text in context carry that measurement to every scale.

    The design spends one budget on three scales: single tokens (5 % by default, distinct),
    triples of distinct tokens (90 %) and the text with up to half of its positions deleted
    (5 %, and the text itself). Two named stages, each returning a new result:

    - :meth:`_short_stage`: eff on the triples, each token's value v⁰ and importance s⁰
      *alone*, under a prior on the importances centred at zero;
    - :meth:`_context_stage`: the length law F(t) = p + A(k)(Σ α_i v_i − p), v = c·v⁰ + d,
      fitted to the single tokens, the triples and the text's context
      (:func:`~.in_context.carry_to_every_scale`): each value becomes its token's output alone
      (log-odds from the reference point, one unit across texts), and the law says how the
      output grows with length. The importances stay s⁰, as measured.

    Every number is measured from the model's outputs; no prior is built from the values. On
    a model that *is* a SLALOM the short samples are exact, c = 1, d = 0 and the law's
    identity fit every sample, and the fit is the model (Proposition 5.2). On two
    transformers the surrogate predicts held-out single tokens, triples and sub-texts of the
    review (docs/results.md §24). ``diagnostics`` report the law (``length_exponent``,
    ``length_curvature``, ``length_pivot``), c and d (``value_scale``, ``value_shift``) and
    the R² on held-out deletions; ``context_share=0`` leaves the short stage alone (eff on
    distinct triples, no singles, law at its identity).

    The short stage is an :class:`EffFitter` the fitter holds (``short_fitter``, never anchored
    on the text): it fits the triples this design draws, and solves the fit requests.

    Args:
        context_share: share of ``n_samples`` spent on deletions of the text (0: none, and
            no context stage).
        single_share: share spent on single tokens (distinct, at most one per unit) when
            there is a context stage.
        min_context: the fewest deletions whenever ``context_share`` > 0 (budget permitting).
        max_delete_fraction: the largest share of positions one deletion sample removes.
        sample_length, solver, holdout_fraction, max_iter, tol, learning_rate,
            l2_importance, prior_sd, l2_value, check_samples: the short stage's, as
            :class:`EffFitter`.

    Example:
        >>> fitter = HybridFitter(context_share=0.2)
        >>> fitter.name, len(fitter.design(np.random.default_rng(0), np.arange(30), 30, 100))
        ('hybrid', 100)
    """

    name = "hybrid"
    #: Draw each short sample's units without replacement: a sample is then a set, which
    #: Captum's ``perturbation="replace"`` can show the model as it is.
    distinct_units = True
    #: The options shared with eff, as eff declares them, then the design's own.
    OPTIONS = {
        **{k: v for k, v in EffFitter.OPTIONS.items() if k in _EFF_OPTIONS},
        "context_share": (Interval(float, 0, 1, "left"),),
        "single_share": (Interval(float, 0, 1, "left"),),
        "min_context": (Interval(int, 1, None),),
        "max_delete_fraction": (Interval(float, 0, 1, "right"),),
    }

    def __init__(
        self,
        context_share: float = CONTEXT_SHARE,
        min_context: int = MIN_CONTEXT,
        max_delete_fraction: float = MAX_DELETE_FRACTION,
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
        single_share: float = SINGLE_SHARE,
    ) -> None:
        check_options(self.name, self.OPTIONS, given_options(locals(), self.OPTIONS))
        if context_share + single_share >= 1:
            raise ValueError(
                f"context_share={context_share} and single_share={single_share} leave no triples: "
                "their sum must be below 1"
            )
        # The short stage fits the samples it is handed (its own design never runs) and is not
        # anchored on the text; the fresh checks are this fitter's, of the result the law carries.
        self.short_fitter = EffFitter(
            solver=solver,
            holdout_fraction=holdout_fraction,
            max_iter=max_iter,
            tol=tol,
            learning_rate=learning_rate,
            l2_importance=l2_importance,
            prior_sd=prior_sd,
            l2_value=l2_value,
            anchor_weight=0.0,
            check_samples=0,
        )
        # The prior the driver records is the short stage's: none where l2_importance is a number.
        posterior = self.short_fitter.objective == "posterior"
        super().__init__(holdout_fraction, max_iter, tol, prior_sd if posterior else None, 0.0, check_samples)
        self.sample_length = sample_length if isinstance(sample_length, tuple) else int(sample_length)
        self.context_share = float(context_share)
        self.single_share = float(single_share)
        self.min_context = int(min_context)
        self.max_delete_fraction = float(max_delete_fraction)

    @property
    def samples_short(self) -> bool:
        """Short samples only, unless a share of the budget goes to samples in context."""
        return self.context_share == 0

    @property
    def importance_measured(self) -> str:
        """The short samples' importances, carried unchanged to every scale: "alone"."""
        return "alone"

    def n_context(self, n_samples: int, n_positions: int) -> int:
        """How many of ``n_samples`` are deletions of the text (none for a one-position text)."""
        if n_positions < 2 or self.context_share == 0:
            return 0
        return min(max(self.min_context, int(round(self.context_share * n_samples))), n_samples - 1)

    def n_singles(self, n_samples: int, n_positions: int, n_units: int) -> int:
        """How many of ``n_samples`` are single tokens (distinct; only with a context stage)."""
        if not self.n_context(n_samples, n_positions):
            return 0
        return min(n_units, int(round(self.single_share * n_samples)))

    def design(self, rng, position_units, n_units, n_samples):
        """Single tokens, then triples, then deletions of the text (each block in that order)."""
        n_ctx = self.n_context(n_samples, len(position_units))
        n_one = self.n_singles(n_samples, len(position_units), n_units)
        singles = [np.array([u]) for u in np.sort(rng.choice(n_units, size=n_one, replace=False))]
        short = short_sequences(rng, n_units, n_samples - n_ctx - n_one, self.sample_length, self.distinct_units)
        if not n_ctx:
            return short
        return singles + short + deletion_neighbourhood(rng, position_units, n_ctx, self.max_delete_fraction)

    def steps(self, rng, position_units, n_units, n_samples, full_target=None):
        samples = self.design(rng, position_units, n_units, n_samples)
        y = yield samples
        n_ctx = self.n_context(len(samples), len(position_units))
        n_one = self.n_singles(len(samples), len(position_units), n_units)
        n_short = len(samples) - n_ctx
        alone = yield from self._short_stage(rng, samples[n_one:n_short], y[n_one:n_short], n_units, position_units)
        result = alone
        if n_ctx:
            # The context stage reads every short sample, the single tokens with them.
            short, y_short = samples[:n_short], y[:n_short]
            result = self._context_stage(
                rng, alone, short, y_short, samples[n_short:], y[n_short:], position_units, full_target
            )
        if self.check_samples and len(position_units) > 1:
            checks = deletion_neighbourhood(rng, position_units, self.check_samples)
            y_check = yield checks
            pred = _predict(checks, result)
            result.diagnostics["check_mse"], result.diagnostics["check_r2"] = mse_and_r2(y_check, pred)
            result.diagnostics["n_check"] = len(checks)
        return result

    def _short_stage(self, rng, short, y_short, n_units, position_units):
        """Generator: stage one, eff on the short samples (held-out check, final fit, SEs);
        without the text's output, so it neither anchors nor checks removal on triples.
        Returns each token's value v⁰ and importance s⁰ *alone*, law at its identity."""
        # The held fitter's flow (SampledFitter's, shared by both): its requests pass up to the driver.
        alone = yield from self.short_fitter._fit(rng, short, y_short, n_units, position_units, None)
        alone.diagnostics.update(
            design=f"{len(short)} short samples",
            n_context=0,
            importance_measured="alone",
            heldout_r2_of="short samples",
        )
        return alone

    def solve_batch(
        self, requests: list[FitRequest], device: torch.device | str | None = None
    ) -> list[tuple[np.ndarray, np.ndarray, dict]]:
        """The short stage's fit requests (the only ones), solved by its :class:`EffFitter`."""
        return self.short_fitter.solve_batch(requests, device)

    def _context_stage(self, rng, alone, short, y_short, dels, y_dels, position_units, full_target) -> FitResult:
        """Stage two, a new result: the short stage's fit carried to every scale
        (:mod:`.in_context`). First a cross-validated check on the deletions (each predicted by
        a fit without it), then the fit on every sample and the text itself."""
        diag = dict(alone.diagnostics)
        ctx = list(dels) + ([np.asarray(position_units)] if full_target is not None else [])
        y_ctx = y_dels if full_target is None else np.vstack([y_dels, np.reshape(full_target, (1, -1))])
        alone_fit = (alone.value, alone.importance)
        diag["alone_heldout_r2"] = diag.get("heldout_r2")
        diag.update(self._cross_validated(rng, short, y_short, ctx, y_ctx, len(dels), alone_fit))
        fit = carry_to_every_scale(short, y_short, ctx, y_ctx, *alone_fit, alone.value_se)
        n_one = sum(len(q) == 1 for q in short)
        diag.update(
            design=f"{n_one} single tokens + {len(short) - n_one} short samples + {len(dels)} deletions",
            n_context=len(dels),
            importance_measured=self.importance_measured,
            heldout_r2_of="deletions of the text",
            value_scale=fit.scale.tolist(),
            value_shift=fit.shift.tolist(),
            length_exponent=float(fit.law.exponent),
            length_curvature=float(fit.law.curvature),
            length_pivot=np.asarray(fit.law.pivot, dtype=np.float64).tolist(),
            scales_r2=fit.weighted_r2,
            importance_gain=fit.importance_gain,
        )
        result = FitResult(fit.value, alone.importance, diag, fit.value_se, alone.importance_se, law=fit.law)
        if full_target is not None:
            rho = removal_agreement(
                dels, y_dels, position_units, full_target, result.value, result.importance, law=result.law
            )
            diag["removal_agreement"] = rho
            diag["removal_agrees"] = None if not np.isfinite(rho) else bool(rho >= REMOVAL_AGREEMENT_MIN)
        return result

    def _cross_validated(self, rng, short, y_short, ctx, y_ctx, n_dels, alone_fit) -> dict:
        """R² of the deletions, each predicted by a fit on the others (and every short sample).

        K folds rather than one 10 % split: 50 deletions would leave 5 held out, and an R²
        of 5 samples says little; every deletion is predicted once, by a fit without it."""
        if n_dels < 2 * CV_FOLDS or self.holdout_fraction <= 0:
            return {"heldout_mse": float("nan"), "heldout_r2": float("nan"), "n_heldout": 0}
        pred = cross_validated(short, y_short, ctx, y_ctx, *alone_fit, n_dels, CV_FOLDS, rng)
        mse, r2 = mse_and_r2(y_ctx[:n_dels], pred)
        return {"heldout_mse": mse, "heldout_r2": r2, "n_heldout": n_dels}


def _predict(samples: list[np.ndarray], result: FitResult) -> np.ndarray:
    """The fitted surrogate (its length law included) on each sample, (B, K)."""
    from ..surrogate import pad_sequences, predict_sparse

    idx, mask = pad_sequences(samples)
    return result.law.apply(predict_sparse(idx, mask, result.value, result.importance)[0], mask.sum(axis=1))
