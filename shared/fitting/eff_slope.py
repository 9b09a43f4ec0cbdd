"""SLALOM-eff-slope: eff's triples, with the importances' prior centred on a fitted slope of |value|."""

from __future__ import annotations

import numpy as np

from ..options import Interval, OneOf, check_options
from ..sampling import short_sequences
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
from .eff import EffFitter
from .fitter import given_options
from .protocol import FitRequest

#: The axes of the importances' slope (see ``slope_axis``).
_SLOPE_AXES = ("size", "agreement")


class EffSlopeFitter(EffFitter):
    """SLALOM-eff on triples with the importances' prior centred on a fitted slope of |value|:
    the fastest faithful ranking (the default before :class:`HybridFitter`).

    Short samples of three distinct tokens of the text (the authors' own code samples triples;
    the paper's Algorithm 1 pairs), no samples in context and no extra weight on the text itself.
    A first fit gives each token's |v|; the fit then puts the importances' prior at
    N(β·|v|, prior_sd²) with β fitted (``importance_slope``), values free (``value_sd=None``:
    holding them near the first fit counts the same samples twice and makes the standard
    errors too small).

    **Its importances are not measured**: the prior is built from the values, so where the
    samples leave an importance open (most of them, on a text of 100+ tokens) it is |v| read
    again through β (on a model that *is* a SLALOM it does not recover the importances; docs/results.md
    §23). Kept for comparison with earlier results; the default, :class:`HybridFitter`,
    measures its importances.
    A triple shows how two or three tokens share weight, and the slope carries what all
    triples say about it to every token at once, so each token's own deviation needs only
    its own samples to stay within the prior.

    What it gives up is the description of the model: like eff, the surrogate misses the
    model on a long text by most of the signal (``exp.full_text_gap``), on some texts in the
    wrong direction, and its importances stay at their prior (short samples do not show how
    the text's tokens share weight). Closing that gap is what the default,
    :class:`HybridFitter`, does (docs/results.md has the measured front).

    Args:
        sample_length: units per sample, distinct within a sample (see :class:`EffFitter`).
        value_sd: None (default): values fitted freely; a number: the values are first fitted
            alone and then kept near that fit with a Gaussian prior of this sd (log-odds); 0
            holds them there.
        importance_slope: True: the importances' prior is N(β·h, prior_sd²) with β fitted
            and h from a first fit's values (``slope_axis``); False: N(0, prior_sd²) (eff on
            distinct triples).
        slope_axis: "size" (default): h = ‖v‖; "agreement": h = ‖v‖ + v·u, u the unit
            direction of the model's move on the text.
        solver, holdout_fraction, max_iter, tol, learning_rate, l2_importance, prior_sd,
            l2_value, check_samples: as :class:`EffFitter`.

    Example:
        >>> fitter = EffSlopeFitter()
        >>> fitter.name, fitter.sample_length, fitter.importance_slope
        ('eff-slope', 3, True)
    """

    name = "eff-slope"
    #: Draw each short sample's units without replacement (a set, as Captum's replace shows it).
    distinct_units = True
    OPTIONS = {
        **{k: v for k, v in EffFitter.OPTIONS.items() if k not in ("design", "singletons", "deletion_share")},
        "value_sd": (Interval(float, 0, None), OneOf(None)),
        "importance_slope": (OneOf(True, False),),
        "slope_axis": (OneOf(*_SLOPE_AXES),),
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
        check_options(self.name, self.OPTIONS, given_options(locals(), self.OPTIONS))
        if (value_sd is not None or importance_slope) and l2_importance != "auto":
            raise ValueError(
                f"method {self.name!r}: value_sd and importance_slope=True are priors; they need "
                "l2_importance='auto' (pass value_sd=None, importance_slope=False for a ridge fit)"
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
            anchor_weight=0.0,
            check_samples=check_samples,
        )
        self.value_sd = None if value_sd is None else float(value_sd)
        self.importance_slope = bool(importance_slope)
        self.slope_axis = slope_axis

    @property
    def samples_short(self) -> bool:
        return True

    @property
    def importance_measured(self) -> str:
        """ "prior from the values" while the slope prior is on (its default), else "alone"."""
        return "prior from the values" if self.importance_slope else "alone"

    def design(self, rng, position_units, n_units, n_samples):
        return short_sequences(rng, n_units, n_samples, self.sample_length, self.distinct_units)

    def design_priors(self, samples, y, idx, n_positions, n_units, full_target=None):
        if self.value_sd is None and not self.importance_slope:
            return None, None
        # The values of the short samples alone: each token's effect without its context.
        short = idx
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

    def design_diagnostics(self, n_samples, n_positions):
        return {"design": f"{n_samples} short samples of {self.sample_length} units"}
