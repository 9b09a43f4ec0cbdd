"""The global surrogates fitted to a trained classifier's log-odds: a linear model on word
counts, a GAM on position × word one-hot features, and a global SLALOM (by gradient
descent, or with the engine's fitters).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ...fitting import fit_gradient, get_fitter, pad_sequences, single_threaded_fits
from ...surrogate import SlalomSurrogate
from ..synthetic import (
    as_generator,
)

__all__ = [
    "SURROGATES",
    "SURROGATE_LABELS",
    "fit_linear_surrogate",
    "fit_gam_surrogate",
    "fit_global_slalom",
    "fit_with_engine",
    "fit_slalom_ana",
    "mse",
]

SURROGATES: tuple[str, ...] = ("linear", "gam", "slalom")
SURROGATE_LABELS = {"linear": "linear", "gam": "GAM", "slalom": "SLALOM"}


def fit_linear_surrogate(counts: np.ndarray, targets: np.ndarray):
    """OLS with intercept on word counts (App. E.1.2); returns a fitted sklearn model."""
    from sklearn.linear_model import LinearRegression

    return LinearRegression().fit(counts, targets)


def fit_gam_surrogate(onehot: np.ndarray, targets: np.ndarray, alpha: float = 0.01):
    """LASSO (λ = ``alpha``) on position × word one-hot features (App. E.1.2)."""
    from sklearn.linear_model import Lasso

    return Lasso(alpha=alpha, max_iter=20000).fit(onehot, targets)


def fit_global_slalom(
    sequences: Sequence[Sequence[int]],
    targets: np.ndarray,
    n_words: int,
    *,
    max_iter: int = 1000,
    tol: float = 1e-12,
    ridge: float = 0.0,
) -> SlalomSurrogate:
    """Least-squares fit of one SLALOM over the whole vocabulary (a *global* SLALOM).

    Minimises ``mean_n (F(t_n) − targets_n)^2`` over values and importances of all
    ``n_words`` words with the engine's gradient fitter (:func:`slalom_core.fit_gradient`,
    L-BFGS; a word occurring k times counts k times). Importances are returned mean-zero.
    Unlike the engine's local fits (which add a small ridge for tiny sample budgets), the
    paper's global fits are plain least squares: ``ridge=0`` and a tight tolerance, so that
    a true SLALOM is recovered to ~1e-5.
    """
    y = np.asarray(targets, dtype=np.float64).reshape(-1, 1)
    idx, mask = pad_sequences([np.asarray(seq, dtype=np.int64) for seq in sequences])
    if idx.shape[0] != y.shape[0]:
        raise ValueError("need one target per sequence")
    with single_threaded_fits():
        value, importance, _ = fit_gradient(
            idx, mask, y, int(n_words), max_iter=max_iter, tol=tol, l2_importance=ridge, l2_value=ridge
        )
    return SlalomSurrogate(value[:, 0], importance)


def fit_with_engine(
    method: str,
    score: Callable[[list[list[int]]], np.ndarray],
    n_words: int,
    n_samples: int,
    seed: int | np.random.Generator = 0,
    **options,
) -> tuple[SlalomSurrogate, dict]:
    """Fit a SLALOM over the whole vocabulary with one of the engine's fitters.

    ``method`` is "eff", "fidel" or "ana" (:func:`slalom_core.get_fitter`); the "text" is
    the vocabulary itself (unit ``j`` = word ``j``), and ``score`` maps a list of
    word-index sequences to the model's log-odds. "ana" asks exactly ``2|V| − 1`` queries.

    Returns:
        The fitted surrogate and the fitter's diagnostics (plus ``model_queries``).
    """
    fitter = get_fitter(method, **options)
    gen = fitter.run(as_generator(seed), np.arange(n_words), int(n_words), int(n_samples))
    queries = 0
    try:
        samples = next(gen)
        while True:
            seqs = [[int(u) for u in sample] for sample in samples]
            queries += len(seqs)
            y = np.asarray(score(seqs), dtype=np.float64).reshape(len(seqs), -1)
            samples = gen.send(y)
    except StopIteration as stop:
        result = stop.value
    diagnostics = dict(result.diagnostics)
    diagnostics["model_queries"] = queries
    return SlalomSurrogate(np.asarray(result.value)[:, 0], result.importance), diagnostics


def fit_slalom_ana(score: Callable[[list[list[int]]], np.ndarray], n_words: int) -> SlalomSurrogate:
    """SLALOM-ana (proof of Prop. 5.2) over the vocabulary: ``2|V| − 1`` queries."""
    return fit_with_engine("ana", score, n_words, 2 * n_words - 1)[0]


def mse(a: np.ndarray, b: np.ndarray) -> float:
    """Mean squared difference of two arrays, in float64.

    Args:
        a: one array.
        b: another of the same shape.

    Returns:
        ``mean((a - b)²)``.

    Example:
        >>> mse(np.array([0.0, 1.0]), np.array([1.0, 1.0]))
        0.5
    """
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(np.mean((a - b) ** 2))
