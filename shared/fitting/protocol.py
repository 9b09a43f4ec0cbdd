"""What a fitter hands the driver and gets back: :class:`FitRequest` out, :class:`FitResult` at the end."""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass, field

import numpy as np

from ..surrogate import IDENTITY_LAW, LengthLaw

FitGenerator = Generator[list[np.ndarray], np.ndarray, "FitResult"]


@dataclass
class FitResult:
    """Fitted parameters per unit: value (U, K) and importance (U,), plus diagnostics and
    their standard errors (None where a method has none, e.g. ana).

    Example:
        >>> r = FitResult(np.zeros((3, 1)), np.zeros(3), {"fit_converged": True})
        >>> r.value.shape, r.importance_se is None
        ((3, 1), True)
    """

    value: np.ndarray
    importance: np.ndarray
    diagnostics: dict = field(default_factory=dict)
    value_se: np.ndarray | None = None
    importance_se: np.ndarray | None = None
    #: How the surrogate's output grows with length (the identity: the paper's SLALOM).
    law: LengthLaw = IDENTITY_LAW


@dataclass
class FitRequest:
    """One text's fit, as yielded by :meth:`Fitter.steps`: samples (unit-index sequences),
    their (B, K) targets, the number of units, an optional warm start (value, importance),
    optional (B,) sample weights, the importances' prior sd for this fit (None: the
    fitter's) and an optional prior on the values ``(centre (U, K), sd)`` (sd 0: the values
    are held at the centre and only the importances are fitted), and an optional (U,)
    direction ``h`` along which the importances' prior is flat (the prior is on s minus
    its best fit β·h, β fitted from the data; see :class:`~.objective.PosteriorObjective`).
    The driver sends back
    ``(value, importance, info)``."""

    samples: list[np.ndarray]
    y: np.ndarray
    n_units: int
    init: tuple[np.ndarray, np.ndarray] | None = None
    weights: np.ndarray | None = None
    prior_sd: float | None = None
    value_prior: tuple[np.ndarray, float] | None = None
    importance_basis: np.ndarray | None = None
