"""The default's second stage: a SLALOM measured on short samples, carried into the text's context.

Short samples measure each token *alone*: its value v⁰ and importance s⁰ (stage one, an eff
fit). A transformer reads a review differently: in context its outputs move less per token,
and short-sample importances do not rank its sub-texts better than equal weights (docs/results.md
§23). Samples of the text itself with some positions deleted show how. This stage fits, to those
samples and the text, the SLALOM

    v = a + c·v⁰ + δ,   s = γ·s⁰

whose numbers each have one meaning: ``a`` the level of the text's context and ``c`` its scale
(log-odds in context per log-odds alone; v is still measured from the reference point), ``γ`` how
strongly the short samples' importances carry into the context (0: equal weights, 1: as alone;
searched on [0, ``GAMMA_MAX``]), and, where asked for (``corrections=True``; the default
fitter leaves them out), ``δ`` per-token corrections that the context samples determine, shrunk
towards 0 with a strength chosen by the evidence (restricted maximum likelihood). On a model
that *is* a SLALOM the short samples are exact, so a = 0, c = 1, γ = 1 and δ = 0 fit the
context exactly and the stage returns the stage-one fit unchanged: the
recovery property (Proposition 5.2) holds with the default options.

Everything here is linear algebra on (m context samples) × (U units) matrices in float64 (numpy),
a few milliseconds next to the model calls.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: The largest temperature searched: importances up to twice as spread in context as alone.
GAMMA_MAX = 2.0
#: Temperature grid step; the best grid point is then refined by golden-section search.
GAMMA_STEP = 0.1
#: Ratios r = τ²/σ² (corrections' prior over noise variance) the evidence chooses among
#: (0: no corrections, then log-spaced).
RATIOS = (0.0, *np.exp(np.linspace(np.log(1e-2), np.log(1e4), 15)))


@dataclass
class ContextFit:
    """The stage's answer: values (U, K) and importances (U,) in context, their standard
    errors, and the numbers that carried the short-sample fit there."""

    value: np.ndarray
    importance: np.ndarray
    value_se: np.ndarray
    importance_se: np.ndarray
    level: np.ndarray  # a, (K,)
    scale: np.ndarray  # c, (K,)
    temperature: float  # γ
    temperature_se: float
    ratio: np.ndarray  # r chosen per column, (K,)


def attention_matrix(samples: list[np.ndarray], importance: np.ndarray, n_units: int) -> np.ndarray:
    """(m, U) softmax weights per sample and unit (a unit occurring twice counts twice).

    Example:
        >>> attention_matrix([np.array([0, 1])], np.array([0.0, 0.0]), 2).tolist()
        [[0.5, 0.5]]
    """
    out = np.zeros((len(samples), n_units))
    for j, sample in enumerate(samples):
        s = importance[sample]
        w = np.exp(s - s.max())
        np.add.at(out[j], sample, w / w.sum())
    return out


def _affine_rss(samples, y, v0, s0, gamma) -> tuple[float, np.ndarray, np.ndarray]:
    """Residual sum of squares of the best level and scale at temperature ``gamma``."""
    a = attention_matrix(samples, gamma * s0, len(s0))
    f0 = a @ v0  # (m, K): the short-sample SLALOM on each context sample
    rss, coef = 0.0, []
    for k in range(y.shape[1]):
        x = np.c_[np.ones(len(y)), f0[:, k]]
        b = np.linalg.lstsq(x, y[:, k], rcond=None)[0]
        rss += float(np.sum((y[:, k] - x @ b) ** 2))
        coef.append(b)
    return rss, a, np.array(coef)


def _search_temperature(samples, y, v0, s0) -> float:
    """γ on [0, GAMMA_MAX] minimising the affine fit's RSS: a grid, then golden section."""
    grid = np.arange(0.0, GAMMA_MAX + 1e-9, GAMMA_STEP)
    rss = [_affine_rss(samples, y, v0, s0, g)[0] for g in grid]
    i = int(np.argmin(rss))
    lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, len(grid) - 1)]
    ratio = (np.sqrt(5.0) - 1.0) / 2.0
    for _ in range(20):  # bracket shrinks to 0.2·0.618²⁰ ≈ 1e-5
        x1, x2 = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
        if _affine_rss(samples, y, v0, s0, x1)[0] <= _affine_rss(samples, y, v0, s0, x2)[0]:
            hi = x2
        else:
            lo = x1
    best = 0.5 * (lo + hi)
    # The grid point wins ties (exact fits: RSS 0 at a grid point such as γ = 1).
    return float(grid[i]) if rss[i] <= _affine_rss(samples, y, v0, s0, best)[0] else best


def _corrections(
    a: np.ndarray, y: np.ndarray, f0: np.ndarray, ratios: tuple[float, ...] = RATIOS
) -> tuple[np.ndarray, np.ndarray, float, np.ndarray]:
    """One column: y = l + c·f0 + A δ + ε with δ ~ N(0, τ²), ε ~ N(0, σ²), (l, c) flat.

    Chooses r = τ²/σ² by restricted maximum likelihood over :data:`RATIOS`; returns (l, c),
    δ's posterior mean, r and the (U,) posterior sd of l + c·v⁰ + δ's δ part (σ² profiled)."""
    m = len(y)
    # A short-sample fit that is constant on the context (a model that ignores its input)
    # says nothing about the scale: c stays 1 and only the level is fitted.
    flat = np.ptp(f0) <= 1e-12 * (1.0 + np.abs(f0).max())
    x = np.ones((m, 1)) if flat else np.c_[np.ones(m), f0]
    target = y - f0 if flat else y
    gram = a @ a.T
    best = None
    for r in ratios:
        v = np.eye(m) + r * gram
        chol = np.linalg.cholesky(v)
        xw, yw = np.linalg.solve(chol, x), np.linalg.solve(chol, target)
        xtx = xw.T @ xw
        b = np.linalg.lstsq(xw, yw, rcond=None)[0]
        res = yw - xw @ b
        p = x.shape[1]
        s2 = max(float(res @ res) / max(m - p, 1), 1e-300)
        ll = -0.5 * ((m - p) * np.log(s2) + 2.0 * np.sum(np.log(np.diag(chol))) + np.linalg.slogdet(xtx)[1])
        if best is None or ll > best[0] + 1e-12:  # ties keep the smaller r (no corrections)
            best = (ll, r, b, v, s2)
    _, r, b, v, s2 = best
    vinv_a = np.linalg.solve(v, a)
    delta = r * vinv_a.T @ (target - x @ b)
    if flat:
        b = np.array([b[0], 1.0])
    # Posterior covariance of δ: τ²(I − r AᵀV⁻¹A), τ² = r·σ²; its diagonal is the corrections' sd.
    var = r * s2 * (1.0 - r * np.einsum("mu,mu->u", a, vinv_a)) if r > 0 else np.zeros(a.shape[1])
    return b, delta, float(r), np.sqrt(np.clip(var, 0.0, None))


def carry_into_context(
    samples: list[np.ndarray],
    y: np.ndarray,
    value0: np.ndarray,
    importance0: np.ndarray,
    value0_se: np.ndarray | None = None,
    importance0_se: np.ndarray | None = None,
    corrections: bool = True,
) -> ContextFit:
    """Fit a, c, γ and δ (module docstring) to samples of the text in context.

    Args:
        samples: unit-index sequences of the text in context (deletions, the text itself).
        y: (m, K) the model's outputs on them, from the reference point.
        value0, importance0: the short-sample fit, (U, K) and (U,).
        value0_se, importance0_se: its standard errors (None: zero), carried through.
        corrections: whether per-token corrections δ are fitted (False: δ = 0).

    Returns:
        A :class:`ContextFit`. Its importances are γ·s⁰ (mean-zero when s⁰ is); its values'
        SEs combine c·se(v⁰) with the corrections' posterior sd, its importances' SEs
        γ·se(s⁰) with se(γ)·|s⁰| (se(γ) from the RSS's curvature in γ).

    Example:
        >>> s0, v0 = np.array([1.0, 0.0, -1.0]), np.array([[2.0], [0.0], [-1.0]])
        >>> ctx = [np.array([0, 1, 2]), np.array([0, 1]), np.array([1, 2]), np.array([0, 2])]
        >>> y = attention_matrix(ctx, s0, 3) @ v0
        >>> fit = carry_into_context(ctx, y, v0, s0)
        >>> round(fit.temperature, 6), np.round(fit.scale, 6).tolist()
        (1.0, [1.0])
    """
    y = np.asarray(y, dtype=np.float64).reshape(len(samples), -1)
    v0 = np.asarray(value0, dtype=np.float64).reshape(len(importance0), -1)
    s0 = np.asarray(importance0, dtype=np.float64)
    n_units, n_out = v0.shape
    gamma = _search_temperature(samples, y, v0, s0)
    rss, a, _ = _affine_rss(samples, y, v0, s0, gamma)
    f0 = a @ v0
    value = np.empty_like(v0)
    corr_sd = np.zeros_like(v0)
    level, scale, ratio = np.zeros(n_out), np.zeros(n_out), np.zeros(n_out)
    for k in range(n_out):
        b, delta, r, sd = _corrections(a, y[:, k], f0[:, k], (0.0,) if not corrections else RATIOS)
        level[k], scale[k], ratio[k] = b[0], b[1], r
        value[:, k] = b[0] + b[1] * v0[:, k] + delta
        corr_sd[:, k] = sd
    if n_out > 1:  # App. C.1: values sum to zero over classes
        value -= value.mean(axis=1, keepdims=True)
    se_v0 = np.zeros_like(v0) if value0_se is None else np.asarray(value0_se, dtype=np.float64).reshape(v0.shape)
    value_se = np.sqrt((scale[None, :] * se_v0) ** 2 + corr_sd**2)
    gamma_se = _temperature_se(samples, y, v0, s0, gamma, rss)
    se_s0 = np.zeros_like(s0) if importance0_se is None else np.asarray(importance0_se, dtype=np.float64)
    importance_se = np.sqrt((gamma * se_s0) ** 2 + (gamma_se * (s0 - s0.mean())) ** 2)
    return ContextFit(value, gamma * s0, value_se, importance_se, level, scale, gamma, gamma_se, ratio)


def _temperature_se(samples, y, v0, s0, gamma: float, rss: float) -> float:
    """se(γ) from the profile RSS's curvature: σ² / (½ d²RSS/dγ²), σ² = RSS / (m − 3)."""
    m = y.size
    if m <= 3 or rss <= 1e-300:
        return 0.0
    h = 1e-3
    lo = max(gamma - h, 0.0)
    hi = lo + 2 * h
    mid = lo + h
    r_lo, r_mid, r_hi = (_affine_rss(samples, y, v0, s0, g)[0] for g in (lo, mid, hi))
    curv = (r_lo - 2.0 * r_mid + r_hi) / h**2
    s2 = rss / (m - 3)
    # Where the RSS is flat in γ the data do not locate it within its search range: its sd
    # is then that of a uniform on [0, GAMMA_MAX] (finite, so that scores' SEs stay numbers).
    flat = GAMMA_MAX / np.sqrt(12.0)
    return float(min(np.sqrt(2.0 * s2 / curv), flat)) if curv > 0 else float(flat)
