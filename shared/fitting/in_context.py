"""The default's context stage: a SLALOM measured on short samples, carried to every scale.

Short samples measure each token *alone*: its value v⁰ and importance s⁰ (the short stage, an
eff fit on triples). A transformer's log-odds grow with the number of words that push one way,
while a SLALOM's output is a weighted *mean* of values: fitted on triples alone its values come
out 2–3× each token's output alone, and its predictions on the text's long sub-texts are far
off (docs/results.md §24). This stage fits, to single tokens, the short samples *and* samples of
the text with up to half of its positions deleted (and the text itself), the surrogate

    F(t) = p + A(k) · (Σ_i softmax(s⁰)_i · v_i − p),   v = c·v⁰ + d,   A(k) = k^(η + κ·ln k)

(:class:`~slalom_core.surrogate.LengthLaw`, k = |t|) whose numbers each have one meaning:
``c`` and ``d`` turn the triples' values into each token's output alone (at k = 1, A = 1, so a
value is what its token does alone, in log-odds from the reference point, in every text); η and
κ how the output is amplified as the text grows, and the pivot ``p`` the output it moves away
from. The importances are the short samples' s⁰, unchanged: on both classifiers measured, a
temperature fitted on top did not predict held-out sub-texts better, and one bounded on [0, 2]
switched the channel off on noise (docs/results.md §24). Single tokens and triples weigh as
much as the text's context (:data:`SHORT_WEIGHT`), so that no scale decides alone.

On a model that *is* a SLALOM the short samples are exact, so A ≡ 1, c = 1 and d = 0 fit every
sample exactly and the stage returns the short stage's fit unchanged: the recovery property
(Proposition 5.2) holds with the default options, law at its identity. On a model that is a
SLALOM under such a law, the stage recovers the law, and the values alone.

(η, κ) are searched on a grid containing the identity, then refined by Nelder–Mead from the
best point; for each, c, d and p are one weighted least-squares solve per output. Linear algebra
on the samples' weighted means, in float64: tens of milliseconds next to the model calls.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..surrogate import LengthLaw, pad_sequences, predict_sparse

#: The search ranges of the law's exponent η and curvature κ (measured fits: η 0.3–1.4, κ −0.2–0.05).
ETA_RANGE, KAPPA_RANGE = (-0.5, 1.5), (-0.2, 0.2)
#: Grid steps of η and κ; the best grid point is then refined.
ETA_STEP, KAPPA_STEP = 0.1, 0.04
#: Share of the fit's weight on single tokens and short samples; the rest on the text's
#: context (its deletions and the text itself). Equal: each scale counts as much as the other.
SHORT_WEIGHT = 0.5


@dataclass(frozen=True)
class ContextFit:
    """The stage's answer: values (U, K) in the model's units and their standard errors, and
    the numbers that carried the short-sample fit to every scale."""

    value: np.ndarray
    value_se: np.ndarray
    scale: np.ndarray  # c, (K,)
    shift: np.ndarray  # d, (K,)
    law: LengthLaw
    weighted_r2: float  # of every sample the stage saw, each scale weighted as in the fit
    #: (RSS with all importances equal − RSS) / RSS equal, on the text's context samples (each fit with
    #: its own law): ≤ 0 where the importances do not help the surrogate in this text.
    importance_gain: float = float("nan")


class _Samples:
    """The samples' weighted means under the short-stage fit, their lengths, targets and
    weights (each scale sums to its share; mean weight 1, so the RSS counts observations)."""

    def __init__(self, short, y_short, context, y_context, v0, s0, short_weight: float) -> None:
        samples = list(short) + list(context)
        idx, mask = pad_sequences(samples)
        self.means = predict_sparse(idx, mask, v0, s0)[0]  # (m, K)
        self.k = mask.sum(axis=1)
        self.y = np.vstack([np.reshape(y_short, (len(short), -1)), np.reshape(y_context, (len(context), -1))])
        self.is_short = np.arange(len(samples)) < len(short)
        self.short_weight = short_weight
        self._weigh()

    def _weigh(self) -> None:
        n_short, n_ctx = int(self.is_short.sum()), int((~self.is_short).sum())
        share = self.short_weight if n_short and n_ctx else 1.0
        w = np.where(self.is_short, share / max(n_short, 1), (1 - share) / max(n_ctx, 1))
        self.w = w * len(w) / w.sum()

    def context_rss(self, law: LengthLaw, scale: np.ndarray, shift: np.ndarray) -> float:
        """Residual sum of squares of the context samples under a fitted stage (the means are
        linear in the values, so c·v⁰ + d gives c·mean + d)."""
        ctx = ~self.is_short
        means = self.means[ctx] * scale[None, :] + shift[None, :]
        if means.shape[1] > 1:  # the values are centred over classes, and so their means
            means -= means.mean(axis=1, keepdims=True)
        return float(np.sum((self.y[ctx] - law.apply(means, self.k[ctx])) ** 2))

    def without(self, rows: np.ndarray) -> _Samples:
        """The same samples less ``rows`` (indices into them), re-weighted: a fold's fit."""
        keep = np.setdiff1d(np.arange(len(self.k)), rows)
        part = object.__new__(_Samples)
        part.means, part.k, part.y, part.is_short = self.means[keep], self.k[keep], self.y[keep], self.is_short[keep]
        part.short_weight = self.short_weight
        part._weigh()
        return part

    def profile(self, eta: float, kappa: float) -> tuple[float, np.ndarray]:
        """Weighted RSS and (K, 3) coefficients on [mean·A, A, 1] of the best fit at (η, κ)."""
        rss, coef = self.profiles(np.array([eta]), np.array([kappa]))
        return float(rss[0]), coef[0]

    def profiles(self, etas: np.ndarray, kappas: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`profile` at every pair (etas[g], kappas[g]) at once: (G,) RSS, (G, K, 3).

        The normal equations of the three columns, from weighted sums over the samples (one
        matrix product per sum for the whole grid); solved by pseudo-inverse, so that at the
        identity (A ≡ 1, the last two columns equal) the level is split evenly (minimum norm)."""
        lk = np.log(np.maximum(self.k, 1.0))
        amp = np.exp((etas[:, None] + kappas[:, None] * lk[None, :]) * lk[None, :])  # (G, m)
        wa, wa2 = amp * self.w, amp**2 * self.w
        rss = np.zeros(len(etas))
        coef = np.zeros((len(etas), self.y.shape[1], 3))
        for col in range(self.y.shape[1]):
            f, y = self.means[:, col], self.y[:, col]
            # Σ w x_i x_j over the columns x = (f·A, A, 1), and Σ w x y.
            s_ff, s_fa, s_a2 = wa2 @ (f * f), wa2 @ f, wa2.sum(axis=1)
            s_f1, s_a1, s_11 = wa @ f, wa.sum(axis=1), np.full(len(etas), self.w.sum())
            gram = np.stack(
                [np.stack([s_ff, s_fa, s_f1], -1), np.stack([s_fa, s_a2, s_a1], -1), np.stack([s_f1, s_a1, s_11], -1)],
                -2,
            )
            rhs = np.stack([wa @ (f * y), wa @ y, np.full(len(etas), self.w @ y)], -1)
            b = np.einsum("gij,gj->gi", np.linalg.pinv(gram, rcond=1e-12, hermitian=True), rhs)
            rss += np.maximum(float(self.w @ (y * y)) - np.einsum("gi,gi->g", b, rhs), 0.0)
            coef[:, col] = b
        return rss, coef


def _search(data: _Samples) -> tuple[float, float]:
    """(η, κ) minimising the weighted RSS: a grid containing the identity (0, 0), then
    Nelder–Mead from the best grid point; the identity unless the law pays (:func:`_law_pays`)."""
    etas = np.round(np.arange(ETA_RANGE[0], ETA_RANGE[1] + 1e-9, ETA_STEP), 10)
    kappas = np.round(np.arange(KAPPA_RANGE[0], KAPPA_RANGE[1] + 1e-9, KAPPA_STEP), 10)
    grid_e, grid_k = (g.ravel() for g in np.meshgrid(etas, kappas, indexing="ij"))
    rss = data.profiles(grid_e, grid_k)[0]
    i = int(np.argmin(rss))
    best = (float(rss[i]), float(grid_e[i]), float(grid_k[i]))
    rss_identity = data.profile(0.0, 0.0)[0]
    if best[0] > 1e-300 and (best[1], best[2]) != (0.0, 0.0):
        from scipy.optimize import minimize

        # A few dozen steps within one grid cell: the grid already found the basin.
        res = minimize(
            lambda p: data.profile(*_clip(p))[0],
            [best[1], best[2]],
            method="Nelder-Mead",
            options={"xatol": 1e-4, "fatol": 1e-12 * best[0], "maxfev": 200},
        )
        if res.fun < best[0]:
            best = (float(res.fun), *_clip(res.x))
    return (best[1], best[2]) if _law_pays(data, rss_identity, best[0]) else (0.0, 0.0)


#: A law must explain more than this share of the samples' variance beyond the identity: the
#: short stage fits exact data to a relative MSE of 1e-10 (EXACT_FIT), so gains below 1e-8
#: are the solver's, not the model's.
LAW_MIN_GAIN = 1e-8


def _law_pays(data: _Samples, rss_identity: float, rss_law: float) -> bool:
    """Whether the law's numbers (η, κ and a pivot per output) earn their place: BIC prefers
    them, and they explain more than :data:`LAW_MIN_GAIN` of the variance. Otherwise the
    identity, whose pivot the data cannot locate anyway."""
    m, n_out = data.y.shape
    sst = float(np.sum(data.w[:, None] * (data.y - np.average(data.y, axis=0, weights=data.w)) ** 2))
    if rss_identity - rss_law <= LAW_MIN_GAIN * max(sst, 1e-300):
        return False
    if rss_law <= 1e-300:
        return True
    return data.y.size * np.log(rss_identity / rss_law) > (2 + n_out) * np.log(data.y.size)


def _clip(p: np.ndarray) -> tuple[float, float]:
    return float(np.clip(p[0], *ETA_RANGE)), float(np.clip(p[1], *KAPPA_RANGE))


def carry_to_every_scale(
    short: list[np.ndarray],
    y_short: np.ndarray,
    context: list[np.ndarray],
    y_context: np.ndarray,
    value0: np.ndarray,
    importance0: np.ndarray,
    value0_se: np.ndarray | None = None,
    short_weight: float = SHORT_WEIGHT,
) -> ContextFit:
    """Fit the length law and the values alone (module docstring) to every scale.

    Args:
        short, y_short: single tokens and the short stage's samples (unit-index sequences)
            and their (m₁, K) outputs.
        context, y_context: samples of the text in context (deletions, the text itself) and
            their (m₂, K) outputs, all from the reference point.
        value0, importance0: the short-sample fit, (U, K) and (U,).
        value0_se: its values' standard errors (None: zero), carried through c.
        short_weight: the short samples' share of the fit's weight.

    Returns:
        A :class:`ContextFit`: values c·v⁰ + d and the law; the importances stay s⁰.

    Example:
        >>> s0, v0 = np.array([1.0, 0.0, -1.0]), np.array([[2.0], [0.0], [-1.0]])
        >>> short = [np.array([0]), np.array([0, 1]), np.array([1, 2]), np.array([0, 2])]
        >>> ctx = [np.array([0, 1, 2]), np.array([0, 1, 2, 2])]
        >>> y = lambda q: predict_sparse(*pad_sequences(q), v0, s0)[0]
        >>> fit = carry_to_every_scale(short, y(short), ctx, y(ctx), v0, s0)
        >>> fit.law.is_identity, np.round(fit.scale, 6).tolist(), bool(abs(fit.shift[0]) < 1e-9)
        (True, [1.0], True)
    """
    v0 = np.asarray(value0, dtype=np.float64).reshape(len(importance0), -1)
    s0 = np.asarray(importance0, dtype=np.float64)
    data = _Samples(short, y_short, context, y_context, v0, s0, short_weight)
    fit = _fit(data, v0, value0_se)
    # The same stage with every importance equal, judged on the context samples alone (the
    # importances were fitted to the triples, not to these): do they help in this text?
    equal = _Samples(short, y_short, context, y_context, v0, np.zeros_like(s0), short_weight)
    rss = data.context_rss(fit.law, fit.scale, fit.shift)
    flat = _fit(equal, v0, None)
    rss_equal = equal.context_rss(flat.law, flat.scale, flat.shift)
    # Relative to the equal fit's error, floored at a millionth of the context's variance: the
    # short stage leaves importances of ~1e-4 where the truth is 0 (EXACT_FIT), so two fits of
    # a model whose tokens weigh alike differ by roundings, and gain ~0, not their ratio.
    ctx_y = data.y[~data.is_short]
    floor = 1e-6 * float(np.sum((ctx_y - ctx_y.mean(axis=0)) ** 2))
    return replace(fit, importance_gain=(rss_equal - rss) / max(rss_equal + floor, 1e-300))


def cross_validated(
    short: list[np.ndarray],
    y_short: np.ndarray,
    context: list[np.ndarray],
    y_context: np.ndarray,
    value0: np.ndarray,
    importance0: np.ndarray,
    rows: int,
    folds: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """(rows, K): each of the first ``rows`` context samples predicted by the stage fitted
    without it (``folds`` folds; every short sample and the other context samples kept).

    Example:
        >>> s0, v0 = np.zeros(3), np.array([[2.0], [0.0], [-1.0]])
        >>> ctx = [np.array([0, 1]), np.array([1, 2]), np.array([0, 2]), np.array([0, 1, 2])]
        >>> y = predict_sparse(*pad_sequences(ctx), v0, s0)[0]
        >>> pred = cross_validated([np.array([0])], [[2.0]], ctx, y, v0, s0, 4, 2, np.random.default_rng(0))
        >>> bool(np.allclose(pred, y, atol=1e-9))
        True
    """
    v0 = np.asarray(value0, dtype=np.float64).reshape(len(importance0), -1)
    s0 = np.asarray(importance0, dtype=np.float64)
    data = _Samples(short, y_short, context, y_context, v0, s0, SHORT_WEIGHT)
    pred = np.full((rows, v0.shape[1]), np.nan)
    for held in np.array_split(rng.permutation(rows), folds):
        part = _fit(data.without(len(short) + held), v0, None)
        idx, mask = pad_sequences([context[i] for i in held])
        means = predict_sparse(idx, mask, part.value, s0)[0]
        pred[held] = part.law.apply(means, mask.sum(axis=1))
    return pred


def _fit(data: _Samples, v0: np.ndarray, value0_se: np.ndarray | None) -> ContextFit:
    """The stage on prepared samples: the law's search, then c, d and the pivot."""
    eta, kappa = _search(data)
    rss, coef = data.profile(eta, kappa)
    scale, pivot = coef[:, 0], coef[:, 2]
    shift = coef[:, 1] + pivot  # d: the coefficient of A is d − p
    if eta == 0.0 and kappa == 0.0:
        pivot = np.zeros_like(pivot)  # A ≡ 1: no amplification, and the pivot means nothing
    value = v0 * scale[None, :] + shift[None, :]
    if value.shape[1] > 1:  # App. C.1: values (and so the pivots) sum to zero over classes
        value -= value.mean(axis=1, keepdims=True)
        pivot = pivot - pivot.mean()
    se_v0 = np.zeros_like(v0) if value0_se is None else np.asarray(value0_se, dtype=np.float64).reshape(v0.shape)
    sst = float(np.sum(data.w[:, None] * (data.y - np.average(data.y, axis=0, weights=data.w)) ** 2))
    law = LengthLaw(eta, kappa, float(pivot[0]) if len(pivot) == 1 else pivot)
    return ContextFit(
        value, np.abs(scale)[None, :] * se_v0, scale, shift, law, 1.0 - rss / sst if sst > 0 else float("nan")
    )
