"""SLALOM-hybrid, the default: each token measured alone on short samples, then carried into the
text's context by a few numbers that samples of the text itself determine."""

from __future__ import annotations

import numpy as np

from ..options import Interval, OneOf, check_options
from ..sampling import deletion_neighbourhood, short_sequences
from .checks import REMOVAL_AGREEMENT_MIN, removal_agreement
from .constants import (
    CHECK_SAMPLES,
    CONTEXT_CORRECTIONS,
    CONTEXT_SHARE,
    HOLDOUT_FRACTION,
    L2_IMPORTANCE,
    LEARNING_RATE,
    MAX_DELETE_FRACTION,
    MAX_ITER,
    MIN_CONTEXT,
    PRIOR_SD,
    RIDGE_WEIGHT,
    SLOPE_TOL,
    SOLVER,
    TRIPLE_LENGTH,
)
from .eff import EffFitter
from .fitter import given_options
from .in_context import carry_into_context
from .sampled import mse_and_r2

#: Folds of stage two's cross-validated check (``diagnostics["heldout_r2"]`` in context).
CV_FOLDS = 5


class HybridFitter(EffFitter):
    """The default: short samples measure each token alone; samples of the text in context
    carry that measurement into the text.

    Stage one is eff on triples of distinct tokens (95 % of the budget by default): each
    token's value v⁰ and importance s⁰ *alone*, under a prior on the importances centred at
    zero. Stage two reads the text itself with up to half of its positions deleted (the
    remaining 5 %, and the text) and fits the SLALOM v = a + c·v⁰ (+ δ), s = γ·s⁰
    (:func:`~.in_context.carry_into_context`): the context's level a and scale c, the
    temperature γ with which the short samples' importances carry into the text, and, with
    ``corrections=True``, per-token corrections δ shrunk with a strength the evidence chooses
    (off by default: with 50 deletions they cost stability and ranking, docs/results.md §23).
    Every number is measured from the model's outputs; no prior is built from the values.

    On a model that *is* a SLALOM the triples are exact, a = 0, c = 1, γ = 1, δ = 0 fit the
    context exactly, and the fit is the model (Proposition 5.2). On a transformer, stage two
    moves the surrogate from each token alone to this text (measured on held-out sub-texts of
    two classifiers: docs/results.md §23). ``diagnostics`` report a, c, γ and the R² on held-out
    context samples; ``context_share=0`` leaves stage one alone (eff on distinct triples).

    Args:
        context_share: share of ``n_samples`` spent on deletions of the text (0: none).
        min_context: the fewest deletions whenever ``context_share`` > 0 (budget permitting).
        max_delete_fraction: the largest share of positions one deletion sample removes.
        corrections: whether stage two fits per-token corrections δ (False: v = a + c·v⁰).
        sample_length, solver, holdout_fraction, max_iter, tol, learning_rate,
            l2_importance, prior_sd, l2_value, check_samples: stage one's, as :class:`EffFitter`.

    Example:
        >>> fitter = HybridFitter(context_share=0.2)
        >>> fitter.name, len(fitter.design(np.random.default_rng(0), np.arange(30), 30, 100))
        ('hybrid', 100)
    """

    name = "hybrid"
    #: Draw each short sample's units without replacement: a sample is then a set, which
    #: Captum's ``perturbation="replace"`` can show the model as it is.
    distinct_units = True
    OPTIONS = {
        **{
            k: v
            for k, v in EffFitter.OPTIONS.items()
            if k not in ("design", "singletons", "deletion_share", "anchor_weight")
        },
        "context_share": (Interval(float, 0, 1, "left"),),
        "min_context": (Interval(int, 1, None),),
        "max_delete_fraction": (Interval(float, 0, 1, "right"),),
        "corrections": (OneOf(True, False),),
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
        corrections: bool = CONTEXT_CORRECTIONS,
    ) -> None:
        check_options(self.name, self.OPTIONS, given_options(locals(), self.OPTIONS))
        self.corrections = bool(corrections)
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
            anchor_weight=0.0,
            check_samples=check_samples,
        )
        self.context_share = float(context_share)
        self.min_context = int(min_context)
        self.max_delete_fraction = float(max_delete_fraction)

    @property
    def samples_short(self) -> bool:
        """Short samples only, unless a share of the budget goes to samples in context."""
        return self.context_share == 0

    @property
    def importance_measured(self) -> str:
        """The short samples' importances carried into the text by a temperature (with
        ``corrections``, corrected token by token there); "alone" without samples in context."""
        if self.context_share == 0:
            return "alone"
        return "in context" if self.corrections else "alone, scaled in context"

    def n_context(self, n_samples: int, n_positions: int) -> int:
        """How many of ``n_samples`` are deletions of the text (none for a one-position text)."""
        if n_positions < 2 or self.context_share == 0:
            return 0
        return min(max(self.min_context, int(round(self.context_share * n_samples))), n_samples - 1)

    def design(self, rng, position_units, n_units, n_samples):
        n_ctx = self.n_context(n_samples, len(position_units))
        short = short_sequences(rng, n_units, n_samples - n_ctx, self.sample_length, self.distinct_units)
        if not n_ctx:
            return short
        return short + deletion_neighbourhood(rng, position_units, n_ctx, self.max_delete_fraction)

    def deletion_indices(self, n_samples, n_positions):
        n_ctx = self.n_context(n_samples, n_positions)
        return np.arange(n_samples - n_ctx, n_samples)  # the design puts them last

    def steps(self, rng, position_units, n_units, n_samples, full_target=None):
        samples = self.design(rng, position_units, n_units, n_samples)
        y = yield samples
        n_ctx = self.n_context(len(samples), len(position_units))
        n_short = len(samples) - n_ctx
        # Stage one: the short samples alone (eff's flow: held-out check, final fit, SEs);
        # without the text's output, so it neither anchors nor checks removal on triples.
        alone = yield from self._fit(rng, samples[:n_short], y[:n_short], n_units, position_units, None)
        diag = alone.diagnostics
        diag.update(
            design=f"{n_short} short samples + {n_ctx} deletions",
            n_context=n_ctx,
            importance_measured=self.importance_measured if n_ctx else "alone",
            heldout_r2_of="short samples" if not n_ctx else "deletions of the text",
        )
        if n_ctx:
            self._in_context(rng, alone, samples[n_short:], y[n_short:], position_units, full_target)
        if self.check_samples and len(position_units) > 1:
            checks = deletion_neighbourhood(rng, position_units, self.check_samples)
            y_check = yield checks
            pred = _predict(checks, alone.value, alone.importance)
            diag["check_mse"], diag["check_r2"] = mse_and_r2(y_check, pred)
            diag["n_check"] = len(checks)
        return alone

    def _in_context(self, rng, result, dels, y_dels, position_units, full_target) -> None:
        """Stage two, in place on ``result``: a cross-validated check on the deletions (each
        predicted by a fit without it), then the fit on every deletion and the text itself."""
        diag = result.diagnostics
        diag["alone_heldout_r2"] = diag.get("heldout_r2")
        ctx = list(dels) + ([np.asarray(position_units)] if full_target is not None else [])
        y_ctx = y_dels if full_target is None else np.vstack([y_dels, np.reshape(full_target, (1, -1))])
        pred = np.full_like(y_dels, np.nan)
        if len(dels) >= 2 * CV_FOLDS and self.holdout_fraction > 0:
            # K folds rather than one 10 % split: 50 deletions would leave 5 held out, and an R²
            # of 5 samples says little; every deletion is predicted once, by a fit without it.
            folds = np.array_split(rng.permutation(len(dels)), CV_FOLDS)
            for held in folds:
                keep = np.setdiff1d(np.arange(len(ctx)), held)
                part = carry_into_context(
                    [ctx[i] for i in keep], y_ctx[keep], result.value, result.importance, corrections=self.corrections
                )
                pred[held] = _predict([dels[i] for i in held], part.value, part.importance)
            diag["heldout_mse"], diag["heldout_r2"] = mse_and_r2(y_dels, pred)
            diag["n_heldout"] = len(dels)
        else:
            diag["heldout_mse"] = diag["heldout_r2"] = float("nan")
            diag["n_heldout"] = 0
        fit = carry_into_context(
            ctx, y_ctx, result.value, result.importance, result.value_se, result.importance_se, self.corrections
        )
        result.value, result.importance = fit.value, fit.importance
        result.value_se, result.importance_se = fit.value_se, fit.importance_se
        diag.update(
            context_level=fit.level.tolist(),
            context_scale=fit.scale.tolist(),
            importance_temperature=float(fit.temperature),
            importance_temperature_se=float(fit.temperature_se),
            # The importances' prior sd in context: stage one's, tempered as the importances are.
            prior_sd=float((diag.get("prior_sd") or self.prior_sd or PRIOR_SD) * fit.temperature),
        )
        if full_target is not None:
            rho = removal_agreement(dels, y_dels, position_units, full_target, fit.value, fit.importance)
            diag["removal_agreement"] = rho
            diag["removal_agrees"] = None if not np.isfinite(rho) else bool(rho >= REMOVAL_AGREEMENT_MIN)

    def design_diagnostics(self, n_samples, n_positions):
        return {}


def _predict(samples: list[np.ndarray], value: np.ndarray, importance: np.ndarray) -> np.ndarray:
    from ..surrogate import pad_sequences, predict_sparse

    return predict_sparse(*pad_sequences(samples), value, importance)[0]
