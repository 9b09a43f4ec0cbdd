"""SLALOM-eff-slope: eff's triples, with the importances' prior centred on a fitted slope of |value|."""

from __future__ import annotations

from .constants import (
    CHECK_SAMPLES,
    HOLDOUT_FRACTION,
    L2_IMPORTANCE,
    LEARNING_RATE,
    MAX_ITER,
    PRIOR_SD,
    RIDGE_WEIGHT,
    SLOPE_TOL,
    SOLVER,
    TRIPLE_LENGTH,
)
from .hybrid import HybridFitter


class EffSlopeFitter(HybridFitter):
    """SLALOM-eff on triples with the importances' prior centred on a fitted slope of |value|:
    the fastest faithful ranking (the default before :class:`HybridFitter`).

    Short samples of three distinct tokens of the text (the authors' own code samples triples;
    the paper's Algorithm 1 pairs), no samples in context and no extra weight on the text itself.
    A first fit gives each token's |v|; the fit then puts the importances' prior at
    N(β·|v|, prior_sd²) with β fitted (:class:`HybridFitter`'s ``importance_slope``), values
    free (``value_sd=None``: holding them near the first fit counts the same samples twice
    and makes the standard errors too small).
    A triple shows how two or three tokens share weight, and the slope carries what all
    triples say about it to every token at once, so each token's own deviation needs only
    its own samples to stay within the prior.

    What it gives up is the description of the model: like eff, the surrogate misses the
    model on a long text by most of the signal (``exp.full_text_gap``), on some texts in the
    wrong direction, and its importances stay at their prior (short samples do not show how
    the text's tokens share weight). Closing that gap with a few deletion samples and the
    text itself is what the default, :class:`HybridFitter`, does (docs/results.md has the
    measured front on two classifiers against the reference).

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
    OPTIONS = {
        k: v
        for k, v in HybridFitter.OPTIONS.items()
        if k
        not in ("context_share", "min_context", "context", "context_weight", "max_delete_fraction", "anchor_weight")
    }

    def __init__(
        self,
        sample_length: int | tuple[int, int] = TRIPLE_LENGTH,
        value_sd: float | None = None,
        importance_slope: bool = True,
        slope_axis: str = "size",
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
            slope_axis=slope_axis,
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
