"""The three ways of fitting a local SLALOM (Sec. 5.2-5.3, App. D, Prop. 5.2).

Each fitter is a small state machine written as a generator: it *yields* the samples (lists
of unit-index sequences) it wants the model to score, receives the fitting targets back via
``send``, and finally *returns* a :class:`FitResult`. That keeps fitters free of any model
code, and lets :func:`slalom_core.explain_batch` run the fitters of many texts in lock-step
so that their model calls share batches.

- ``eff``  (:class:`EffFitter`):   short random sequences, gradient descent on the MSE.
- ``fidel`` (:class:`FidelFitter`): deletions from the full text, alternating least squares.
- ``ana``  (:class:`AnaFitter`):   2U-1 evaluations, closed form; exact on a true SLALOM.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Generator
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import minimize  # imported once here, not inside every fit (~0.5 s)

from .sampling import balanced_sequences, deletion_neighbourhood, short_sequences, split_holdout
from .surrogate import normalise_importance

__all__ = [
    "FitResult",
    "Fitter",
    "EffFitter",
    "FidelFitter",
    "AnaFitter",
    "FITTERS",
    "get_fitter",
    "fit_gradient",
    "fit_als",
    "pad_sequences",
    "laplace_standard_errors",
    "GRAD_TOL",
]

#: |s| never exceeds this in gradient fits: exp(±15) already spans 13 orders of magnitude.
IMPORTANCE_BOUND = 15.0
#: Standard deviation of the weak prior on values, in units of the targets' sd.
VALUE_PRIOR_SD = 10.0
#: A fit whose squared error is below this share of the targets' variance is exact.
EXACT_FIT = 1e-10
#: A gradient fit whose largest (scaled) gradient entry is below this has converged.
GRAD_TOL = 1e-4

FitGenerator = Generator[list[np.ndarray], np.ndarray, "FitResult"]


@dataclass
class FitResult:
    """Fitted parameters per unit: value (U, K) and importance (U,), plus diagnostics and
    their standard errors (None where a method has none, e.g. ana)."""

    value: np.ndarray
    importance: np.ndarray
    diagnostics: dict = field(default_factory=dict)
    value_se: np.ndarray | None = None
    importance_se: np.ndarray | None = None


# ----------------------------------------------------------------------------------------
# Sample representations
# ----------------------------------------------------------------------------------------
def pad_sequences(sequences: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(B, L) unit-index matrix (padding index 0) and a 0/1 mask of real slots.

    A sparse view of the count matrix: each slot is one occurrence, so repeated units
    count as often as they occur, and the cost of a gradient is B·L, not B·U.
    """
    width = max((len(s) for s in sequences), default=0)
    idx = np.zeros((len(sequences), max(width, 1)), dtype=np.int64)
    mask = np.zeros_like(idx, dtype=np.float64)
    for row, seq in enumerate(sequences):
        idx[row, : len(seq)] = seq
        mask[row, : len(seq)] = 1.0
    return idx, mask


def count_matrix(sequences: list[np.ndarray], n_units: int) -> np.ndarray:
    """Dense (B, U) occurrence counts."""
    counts = np.zeros((len(sequences), n_units))
    for row, seq in enumerate(sequences):
        counts[row] = np.bincount(np.asarray(seq, dtype=np.int64), minlength=n_units)
    return counts


def _predict_sparse(idx: np.ndarray, mask: np.ndarray, value: np.ndarray, importance: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Surrogate outputs (B, K) and the per-slot attention weights (B, L)."""
    w = np.exp(importance - importance.max())[idx] * mask
    alpha = w / np.maximum(w.sum(axis=1, keepdims=True), np.finfo(float).tiny)
    return np.einsum("bl,blk->bk", alpha, value[idx]), alpha


def _attention_dense(counts: np.ndarray, importance: np.ndarray) -> np.ndarray:
    """(B, U) attention weights c_u exp(s_u) / Σ c exp(s) of dense count rows."""
    w = counts * np.exp(importance - importance.max())
    return w / np.maximum(w.sum(axis=1, keepdims=True), np.finfo(float).tiny)


def _loss_grad(
    idx: np.ndarray,
    mask: np.ndarray,
    y: np.ndarray,
    value: np.ndarray,
    importance: np.ndarray,
    weights: np.ndarray | None = None,
) -> tuple[float, np.ndarray, np.ndarray]:
    """(Weighted) MSE and its analytic gradients w.r.t. value (U, K) and importance (U,).

    With α the attention weights of a sample, dF_k/dv_uk = Σ_slots(u) α and
    dF_k/ds_u = Σ_slots(u) α (v_uk − F_k) (Eq. 5 of the paper, at λ = 1). Hand-written
    gradients avoid autograd's per-step overhead, which would dominate on small problems.
    ``weights`` (B,), mean one, weigh the samples (the full-text anchor).
    """
    n_units, n_out = value.shape
    f, alpha = _predict_sparse(idx, mask, value, importance)
    resid = f - y
    resid_w = resid if weights is None else resid * weights[:, None]
    loss = float(np.mean(resid_w * resid))
    g = 2.0 * resid_w / resid.size  # dLoss/dF, (B, K)
    flat = idx.ravel()
    grad_v = np.empty_like(value)
    for k in range(n_out):
        grad_v[:, k] = np.bincount(flat, weights=(alpha * g[:, k : k + 1]).ravel(), minlength=n_units)
    # Σ_k g_bk (v_uk − F_bk) for every slot
    slot = np.einsum("bk,blk->bl", g, value[idx]) - (g * f).sum(axis=1, keepdims=True)
    grad_s = np.bincount(flat, weights=(alpha * slot).ravel(), minlength=n_units)
    return loss, grad_v, grad_s


def _initial_values(idx: np.ndarray, mask: np.ndarray, y: np.ndarray, n_units: int) -> np.ndarray:
    """Start each value at the mean target of the samples that contain the unit.

    Algorithm 1 starts at zero; this start is closer to the optimum (exact for a text of
    one unique token) and lets the descent converge in far fewer steps.
    """
    flat = idx.ravel()
    m = mask.ravel()
    hits = np.bincount(flat, weights=m, minlength=n_units)
    init = np.empty((n_units, y.shape[1]))
    for k in range(y.shape[1]):
        sums = np.bincount(flat, weights=(m.reshape(mask.shape) * y[:, k : k + 1]).ravel(), minlength=n_units)
        init[:, k] = np.where(hits > 0, sums / np.maximum(hits, 1), y[:, k].mean())
    return init - init.mean(axis=1, keepdims=True) if y.shape[1] > 1 else init


def fit_gradient(
    idx: np.ndarray,
    mask: np.ndarray,
    y: np.ndarray,
    n_units: int,
    *,
    init: tuple[np.ndarray, np.ndarray] | None = None,
    solver: str = "lbfgs",
    max_iter: int = 500,
    tol: float = 1e-9,
    learning_rate: float = 0.05,
    l2_importance: float = 1e-3,
    l2_value: float = 1e-3,
    prior_sd: float | None = None,
    weights: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, dict]:
    """Minimise the MSE between SLALOM and the targets by gradient descent.

    Args:
        idx, mask: samples from :func:`pad_sequences`.
        y: (B, K) targets (log-odds, or centred logits for K > 1), measured from the
            explanation's reference point.
        init: starting (value, importance); default: see :func:`_initial_values`, s = 0.
        solver: "lbfgs" (quasi-Newton, scipy; converges in tens of steps) or "adam" (the
            paper's Algorithm 1 with full batches).
        max_iter: maximum number of gradient steps.
        tol: stop when the relative loss improvement falls below this.
        l2_importance: weight of a ridge penalty ``l2 · mean(s²)`` that keeps weakly
            identified importances from drifting (0 disables it).
        l2_value: the same for values, ``l2 · mean(v²) / var(y)``.
        prior_sd: if given, replaces both ridges by a Gaussian prior s ~ N(0, prior_sd²)
            with the noise variance profiled out: the objective becomes
            ``log(MSE) + Σ s² / (n · prior_sd²)`` (n samples), the negative log posterior
            up to constants. Its pull on s grows with the residual noise and fades with
            more samples, so noisy fits are shrunk and exact data is still fitted exactly.
            Values get a weak prior N(0, (10·sd(y))²) (:data:`VALUE_PRIOR_SD`) instead of
            ``l2_value``.
        weights: (B,) non-negative sample weights (default: all one); rescaled to mean one.

    Returns:
        value (U, K), importance (U,), and a dict with "iterations", "converged", "loss"
        and "grad_norm" (largest projected gradient entry of the objective at the end).

    Example:
        >>> idx, mask = pad_sequences([np.array([0]), np.array([1]), np.array([0, 1])])
        >>> v, s, info = fit_gradient(idx, mask, np.array([[1.0], [-1.0], [0.0]]), 2)
        >>> np.round(v[:, 0], 3).tolist(), info["converged"]
        ([1.0, -1.0], True)
    """
    n_out = y.shape[1]
    if weights is not None:
        weights = np.asarray(weights, dtype=float)
        weights = weights / weights.mean()
    if init is None:
        value0, imp0 = _initial_values(idx, mask, y, n_units), np.zeros(n_units)
    else:
        value0, imp0 = np.array(init[0], dtype=float).reshape(n_units, n_out), np.array(init[1], dtype=float)
    centre = n_out > 1

    def unpack(theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        value = theta[: n_units * n_out].reshape(n_units, n_out)
        if centre:  # App. C.1: values sum to zero over classes
            value = value - value.mean(axis=1, keepdims=True)
        return value, theta[n_units * n_out :]

    # The objective is the MSE in units of the targets' variance (1 − R² on the samples), so
    # that ``tol`` means the same for models with large or small log-odds.
    scale = 1.0 / max(float(np.var(y)), 1e-12)
    # The values' prior is on the scale of the targets' size around the reference (their
    # second moment, not their variance: a text of one token has constant targets).
    size_v = 1.0 / max(float(np.mean(y**2)), 1e-12)
    n_samples = y.shape[0]
    state = {"mse": np.inf}

    def stop_when_exact(_xk: np.ndarray) -> None:
        # Exact data (a true SLALOM): the log objective has no floor to stop at, so stop
        # once the residual is at rounding level (1 − R² below EXACT_FIT).
        if state["mse"] <= EXACT_FIT:
            raise StopIteration

    def objective(theta: np.ndarray) -> tuple[float, np.ndarray]:
        value, imp = unpack(theta)
        loss, gv, gs = _loss_grad(idx, mask, y, value, imp, weights)
        loss, gv, gs = loss * scale, gv * scale, gs * scale
        if centre:
            gv = gv - gv.mean(axis=1, keepdims=True)
        if prior_sd is None:
            # A weak ridge on values (in units of the targets' variance): a unit whose
            # weight is tiny next to its partners barely moves F, so its value would wander.
            loss += l2_value * scale * float(np.sum(value * value)) / value.size
            gv = gv + 2.0 * l2_value * scale * value / value.size
            # A ridge on s: with few samples a unit seen only beside one partner can trade
            # an ever larger importance against its value without changing the fit; the
            # ridge picks the smallest such s instead of letting it run off.
            loss += l2_importance * float(imp @ imp) / n_units
            gs = gs + 2.0 * l2_importance * imp / n_units
            return loss, np.concatenate([gv.ravel(), gs])
        # Negative log posterior per n/2 samples, noise variance profiled out: d log(L) = dL/L.
        # The floor keeps exact fits finite. Priors sit outside the log, so that exact data
        # is still fitted exactly: s ~ N(0, prior_sd²), and the values a weak
        # N(0, (VALUE_PRIOR_SD · sd(y))²) for the same reason as the ridge above.
        state["mse"] = loss
        floor = loss + 1e-12
        prior = 1.0 / (n_samples * prior_sd**2)
        prior_v = size_v / (n_samples * VALUE_PRIOR_SD**2)
        grad = np.concatenate([(gv / floor + 2.0 * prior_v * value).ravel(), gs / floor + 2.0 * prior * imp])
        return float(np.log(floor)) + prior * float(imp @ imp) + prior_v * float(np.sum(value * value)), grad

    theta0 = np.concatenate([value0.ravel(), imp0])
    if solver == "lbfgs":
        # Bounds keep exp(s) finite and the softmax meaningful (weights within e^±30).
        bounds = [(None, None)] * (n_units * n_out) + [(-IMPORTANCE_BOUND, IMPORTANCE_BOUND)] * n_units
        res = minimize(objective, theta0, jac=True, method="L-BFGS-B", bounds=bounds, callback=stop_when_exact, options={"maxiter": max_iter, "ftol": tol, "gtol": 1e-6})
        theta, info = res.x, {"iterations": int(res.nit), "converged": bool(res.success), "loss": float(res.fun) / scale}
    elif solver == "adam":
        theta, info = _adam(objective, theta0, learning_rate, max_iter, tol, n_units * n_out)
        info["loss"] /= scale
    else:
        raise ValueError(f"unknown solver {solver!r}; choose 'lbfgs' or 'adam'")
    # Judge convergence by the gradient too: a line search that cannot make progress
    # (scipy's ABNORMAL_TERMINATION) at a stationary point is an optimum found, while
    # running out of iterations away from one is not.
    grad = objective(theta)[1]
    at_bound = np.zeros_like(theta, dtype=bool)
    at_bound[n_units * n_out :] = (np.abs(theta[n_units * n_out :]) >= IMPORTANCE_BOUND) & (grad[n_units * n_out :] * theta[n_units * n_out :] < 0)
    info["grad_norm"] = float(np.abs(np.where(at_bound, 0.0, grad)).max()) if grad.size else 0.0
    if (info["iterations"] < max_iter and info["grad_norm"] <= GRAD_TOL) or state["mse"] <= EXACT_FIT:
        info["converged"] = True
    value, imp = unpack(theta)
    # Report the plain MSE, whatever the objective was.
    info["loss"] = float(_loss_grad(idx, mask, y, value, imp, weights)[0])
    return value, imp, info


def _adam(objective, theta: np.ndarray, lr: float, max_iter: int, tol: float, n_fixed: int) -> tuple[np.ndarray, dict]:
    """Full-batch Adam; the entries from ``n_fixed`` on (importances) are kept in bounds."""
    m = np.zeros_like(theta)
    v = np.zeros_like(theta)
    b1, b2, eps = 0.9, 0.999, 1e-8
    prev = np.inf
    loss = np.inf
    for step in range(1, max_iter + 1):
        loss, grad = objective(theta)
        m = b1 * m + (1 - b1) * grad
        v = b2 * v + (1 - b2) * grad**2
        theta = theta - lr * (m / (1 - b1**step)) / (np.sqrt(v / (1 - b2**step)) + eps)
        theta[n_fixed:] = np.clip(theta[n_fixed:], -IMPORTANCE_BOUND, IMPORTANCE_BOUND)
        # Adam's loss is noisy step to step: judge convergence over windows of 50 steps.
        if step % 50 == 0:
            if np.isfinite(prev) and prev - loss <= tol * max(prev, 1e-12):
                return theta, {"iterations": step, "converged": True, "loss": float(loss)}
            prev = loss
    return theta, {"iterations": max_iter, "converged": False, "loss": float(loss)}


def fit_als(
    counts: np.ndarray,
    y: np.ndarray,
    *,
    init_importance: np.ndarray | None = None,
    max_iter: int = 200,
    tol: float = 1e-9,
    ridge: float = 1e-8,
    irls_steps: int = 3,
) -> tuple[np.ndarray, np.ndarray, dict]:
    """Fit SLALOM by alternating least squares (DESIGN.md sec. 3, "SLALOM-fidel").

    With the importances fixed, F is linear in the values: an ordinary least-squares
    problem. With the values fixed, F(t) = y  ⇔  Σ_u c_u w_u (v_u − y) = 0 is linear in
    w = exp(s); the s-step solves it in the least-squares sense (denominators from the
    previous iterate, scale fixed so the mean denominator is unchanged), then a backtracking
    line search in log-space guarantees that the MSE never increases. Iterates until the
    relative improvement is below ``tol``.

    Args:
        counts: (B, U) occurrence counts; y: (B, K) targets.
        ridge: relative Tikhonov term that keeps both solves well posed when units always
            occur together.
        irls_steps: linear solves per s-step, each with denominators from the previous.

    Returns:
        value (U, K), importance (U,), and a dict with "iterations", "converged", "loss".
    """
    n_samples, n_units = counts.shape
    n_out = y.shape[1]
    imp = np.zeros(n_units) if init_importance is None else np.asarray(init_importance, dtype=float).copy()

    def solve_values(imp: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        a = _attention_dense(counts, imp)
        gram = a.T @ a
        lam = ridge * max(np.trace(gram) / n_units, 1e-12)
        value = np.linalg.solve(gram + lam * np.eye(n_units), a.T @ y)
        return value, a

    def mse(value: np.ndarray, imp: np.ndarray) -> float:
        a = _attention_dense(counts, imp)
        return float(np.mean((a @ value - y) ** 2))

    def _grad_s(value: np.ndarray, imp: np.ndarray) -> np.ndarray:
        """Gradient of the MSE w.r.t. s for fixed v (unscaled)."""
        a = _attention_dense(counts, imp)
        f = a @ value
        r = f - y
        # dF_bk/ds_u = a_bu (v_uk − F_bk)
        return (a * (r @ value.T)).sum(axis=0) - a.T @ (r * f).sum(axis=1)

    def _backtrack(imp: np.ndarray, direction: np.ndarray, loss: float):
        """First step 1, 1/2, 1/4 … along ``direction`` whose reduced MSE is not larger."""
        step = 1.0
        for _ in range(30):
            cand = imp + step * direction
            cand_value, _ = solve_values(cand)
            cand_loss = mse(cand_value, cand)
            if cand_loss <= loss:
                return True, step, cand, cand_value, cand_loss
            step *= 0.5
        return False, 0.0, imp, None, loss

    value, _ = solve_values(imp)
    loss = mse(value, imp)
    converged = False
    it = 0
    for it in range(1, max_iter + 1):
        # s-step: residual r_bk = Σ_u M_(bk),u w_u with M = c_bu (v_uk − y_bk) / D_b. The
        # denominators D_b depend on w themselves, so the linear solve is repeated a few
        # times with D_b from the latest w (IRLS); one pass alone stalls short of the optimum.
        w_old = np.exp(imp - imp.max())
        w_new = w_old
        for _ in range(irls_steps):
            den = counts @ w_new
            coef = counts / den[:, None]
            m = (coef[:, None, :] * (value.T[None, :, :] - y[:, :, None])).reshape(n_samples * n_out, n_units)
            h = m.T @ m
            h += ridge * max(np.trace(h) / n_units, 1e-12) * np.eye(n_units)
            g = coef.mean(axis=0)  # mean_b D_b(w) / D_b(w_prev) = g·w: keep the scale
            hinv_g = np.linalg.solve(h, g)
            w_next = hinv_g / (g @ hinv_g) * (g @ w_new)
            w_new = np.maximum(w_next, 1e-8 * max(w_next.max(), 1e-300))
        direction = np.log(w_new) - np.log(w_old)
        # Line search along the s-step on the *reduced* objective (v re-solved for each
        # candidate s): backtrack until the MSE does not increase, and when the full step
        # already helps, try longer ones too. Plain alternation crawls along the valley
        # where v and s trade off (measured: 3x more iterations with v held fixed).
        improved, step, cand, cand_value, cand_loss = _backtrack(imp, direction, loss)
        if not improved:
            # The IRLS step is not guaranteed to descend; steepest descent on s is.
            grad = _grad_s(value, imp)
            improved, step, cand, cand_value, cand_loss = _backtrack(imp, -grad / max(np.abs(grad).max(), 1e-300), loss)
            direction = cand - imp if improved else direction
            step = 1.0
        if not improved:
            # No step along the gradient helps: an optimum only if the gradient is ~0
            # (relative to the loss); otherwise the fit stalled and says so.
            converged = bool(np.abs(_grad_s(value, imp)).max() <= GRAD_TOL * max(loss, 1e-300))
            break
        while 1.0 <= step < 64.0:
            longer = imp + 2.0 * step * direction
            l_value, _ = solve_values(longer)
            l_loss = mse(l_value, longer)
            if l_loss >= cand_loss:
                break
            step, cand, cand_value, cand_loss = 2.0 * step, longer, l_value, l_loss
        rel = (loss - cand_loss) / max(loss, 1e-300)
        imp, value, loss = cand, cand_value, cand_loss
        if rel < tol:
            converged = True
            break
    imp = imp - imp.mean()
    return value, imp, {"iterations": it, "converged": converged, "loss": loss}


def single_threaded_blas():
    """Limit BLAS to one thread while fitting.

    The fits are small (U ≤ a few hundred): a multi-threaded BLAS spends more time waking
    threads than computing — measured 30x slower for a 150x150 solve on 2 cores.
    """
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=1, user_api="blas")


def _fit_quality(y: np.ndarray, pred: np.ndarray) -> tuple[float, float]:
    """MSE and R² (pooled over output columns); R² is NaN when the targets are constant."""
    if len(y) == 0:
        return float("nan"), float("nan")
    sse = float(np.sum((pred - y) ** 2))
    sst = float(np.sum((y - y.mean(axis=0, keepdims=True)) ** 2))
    return sse / y.size, (1.0 - sse / sst) if sst > 1e-12 * y.size else float("nan")


def laplace_standard_errors(
    counts: np.ndarray,
    y: np.ndarray,
    value: np.ndarray,
    importance: np.ndarray,
    *,
    prior_sd: float | None = None,
    weights: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Standard errors of the fitted values (U, K) and mean-zero importances (U,).

    A Laplace approximation of the posterior at the fit: Gauss–Newton curvature
    JᵀWJ / σ² of the squared error, with σ² the (weighted) residual variance, plus the prior
    precision 1 / prior_sd² on each importance. The covariance is taken in the subspace the
    reported parameters live in (importances summing to zero; for K > 1 classes, values
    summing to zero over classes), where the softmax's shift-invariance leaves no free
    direction. An SE close to ``prior_sd`` means the data did not determine that
    importance; with no prior an undetermined direction gives an infinite SE.

    Args:
        counts: (B, U) occurrence counts of the fitted samples; y: (B, K) targets.
        value, importance: the fit.
        prior_sd: the prior's standard deviation of s (None: no prior).
        weights: the fit's sample weights (mean one).

    Example:
        >>> c = np.array([[1, 0], [0, 1], [1, 1], [1, 1]], dtype=float)
        >>> y = np.array([[1.0], [-1.0], [0.1], [-0.1]])
        >>> se_v, se_s = laplace_standard_errors(c, y, np.array([[1.0], [-1.0]]), np.zeros(2))
        >>> bool(se_s[0] > 0 and se_s[0] == se_s[1])
        True
    """
    n_samples, n_units = counts.shape
    n_out = value.shape[1]
    a = _attention_dense(counts, importance)  # (B, U)
    f = a @ value  # (B, K)
    wts = np.ones(n_samples) if weights is None else np.asarray(weights, dtype=float) / np.mean(weights)
    sigma2 = float(np.sum(wts[:, None] * (f - y) ** 2) / y.size)
    n_par = n_units * n_out + n_units
    # Jacobian rows per (sample, class): dF_bk/dv_uk = a_bu, dF_bk/ds_u = a_bu (v_uk − F_bk).
    jac = np.zeros((n_samples, n_out, n_par))
    for k in range(n_out):
        jac[:, k, k : n_units * n_out : n_out] = a
        jac[:, k, n_units * n_out :] = a * (value[:, k][None, :] - f[:, k : k + 1])
    jac = jac.reshape(n_samples * n_out, n_par)
    rw = np.repeat(wts, n_out)
    info = (jac * rw[:, None]).T @ jac
    # Orthonormal basis of the constrained subspace (mean-zero s; class-centred v).
    cons = []
    e_s = np.zeros(n_par)
    e_s[n_units * n_out :] = 1.0
    cons.append(e_s)
    if n_out > 1:
        for u in range(n_units):
            e = np.zeros(n_par)
            e[u * n_out : (u + 1) * n_out] = 1.0
            cons.append(e)
    q, _ = np.linalg.qr(np.stack(cons, axis=1), mode="complete")
    basis = q[:, len(cons) :]  # (P, P - #constraints)
    if sigma2 <= 1e-300:
        # Exact data: the likelihood is a spike; report zeros rather than 0/0.
        return np.zeros_like(value), np.zeros(n_units)
    prec = info / sigma2
    if prior_sd is not None:
        prec[n_units * n_out :, n_units * n_out :] += np.eye(n_units) / prior_sd**2
    reduced = basis.T @ prec @ basis
    evals, evecs = np.linalg.eigh(reduced)
    floor = evals.max() * 1e-12 if evals.size else 0.0
    inv = np.where(evals > floor, 1.0 / np.where(evals > floor, evals, 1.0), np.inf)
    # Diagonal of basis · V diag(1/λ) Vᵀ · basisᵀ without forming the full covariance.
    proj = basis @ evecs  # (P, r)
    with np.errstate(invalid="ignore"):
        var = np.einsum("pr,r,pr->p", proj, inv, proj, optimize=True)
    var = np.where(np.isnan(var), np.inf, var)
    se = np.sqrt(np.maximum(var, 0.0))
    return se[: n_units * n_out].reshape(n_units, n_out), se[n_units * n_out :]


# ----------------------------------------------------------------------------------------
# Fitters
# ----------------------------------------------------------------------------------------
class Fitter(ABC):
    """A fitting algorithm, selected by name (see :data:`FITTERS`).

    :meth:`run` is a generator. It receives the text's positions as unit indices and the
    model's target on the full text (measured from the reference point), yields lists of
    samples for the model to score, is sent their (B, K) targets back, and returns a
    :class:`FitResult`.
    """

    name: str = ""

    @abstractmethod
    def run(self, rng: np.random.Generator, position_units: np.ndarray, n_units: int, n_samples: int, full_target: np.ndarray | None = None) -> FitGenerator:
        """Generator: yields sample lists, receives (B, K) targets, returns a FitResult."""

    def min_samples(self, n_units: int) -> int:
        return 1


class _SampledFitter(Fitter):
    """Shared flow of eff and fidel: one design, held-out check, final fit on all samples.

    Args:
        holdout_fraction: share of samples kept aside to report held-out MSE/R².
        max_iter, tol: the solver's budget and stopping rule.
        prior_sd: standard deviation of a Gaussian prior on the importances (noise
            variance profiled out, see :func:`fit_gradient`); None for no prior.
        anchor_weight: share of the total weight given to the full text itself as one more
            observation (0 = the design alone). The full text is scored anyway; anchoring
            pulls the surrogate towards the model's output on the text it explains.
        check_samples: extra deletion samples of the full text, scored after the fit and
            never fitted, to report ``check_r2`` / ``check_mse`` on the text's own
            neighbourhood (each one is a near-full-length forward pass).
    """

    def __init__(self, holdout_fraction: float = 0.1, max_iter: int = 500, tol: float = 1e-9, prior_sd: float | None = 0.25, anchor_weight: float = 0.0, check_samples: int = 0) -> None:
        if not 0 <= holdout_fraction < 0.5:
            raise ValueError(f"holdout_fraction must be in [0, 0.5), got {holdout_fraction}")
        if prior_sd is not None and not prior_sd > 0:
            raise ValueError(f"prior_sd must be > 0 or None, got {prior_sd!r}")
        if not 0 <= anchor_weight < 1:
            raise ValueError(f"anchor_weight must be in [0, 1), got {anchor_weight!r}")
        if isinstance(check_samples, bool) or not isinstance(check_samples, (int, np.integer)) or check_samples < 0:
            raise ValueError(f"check_samples must be an int >= 0, got {check_samples!r}")
        self.holdout_fraction = holdout_fraction
        self.max_iter = max_iter
        self.tol = tol
        self.prior_sd = None if prior_sd is None else float(prior_sd)
        self.anchor_weight = float(anchor_weight)
        self.check_samples = int(check_samples)

    def min_samples(self, n_units: int) -> int:
        # Each unit needs to be seen at least once for its value to mean anything.
        return n_units + 1

    @abstractmethod
    def design(self, rng: np.random.Generator, position_units: np.ndarray, n_units: int, n_samples: int) -> list[np.ndarray]:
        """The samples (unit-index sequences) to score."""

    @abstractmethod
    def solve(self, samples: list[np.ndarray], y: np.ndarray, n_units: int, init: tuple | None, weights: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, dict]:
        """Fit (value, importance, info) on these samples."""

    def run(self, rng, position_units, n_units, n_samples, full_target=None):
        samples = self.design(rng, position_units, n_units, n_samples)
        y = yield samples
        with single_threaded_blas():
            result = self._fit(rng, samples, y, n_units, position_units, full_target)
        if self.check_samples and len(position_units) > 1:
            checks = deletion_neighbourhood(rng, position_units, self.check_samples)
            y_check = yield checks
            pred = _predict_sparse(*pad_sequences(checks), result.value, result.importance)[0]
            result.diagnostics["check_mse"], result.diagnostics["check_r2"] = _fit_quality(y_check, pred)
            result.diagnostics["n_check"] = len(checks)
        return result

    def _with_anchor(self, samples, y, position_units, full_target):
        """Append the full text as one observation carrying ``anchor_weight`` of the weight."""
        if self.anchor_weight <= 0 or full_target is None:
            return samples, y, None
        n = len(samples)
        weights = np.ones(n + 1)
        weights[-1] = self.anchor_weight / (1.0 - self.anchor_weight) * n
        return samples + [np.asarray(position_units)], np.vstack([y, np.reshape(full_target, (1, -1))]), weights

    def _fit(self, rng, samples, y, n_units, position_units, full_target) -> FitResult:
        fit_idx, hold_idx = split_holdout(rng, len(samples), self.holdout_fraction)
        diag: dict = {}
        init = None
        if len(hold_idx):
            train, y_train, w_train = self._with_anchor([samples[i] for i in fit_idx], y[fit_idx], position_units, full_target)
            value, imp, info = self.solve(train, y_train, n_units, None, w_train)
            hold = [samples[i] for i in hold_idx]
            pred, _ = _predict_sparse(*pad_sequences(hold), value, imp)
            diag["heldout_mse"], diag["heldout_r2"] = _fit_quality(y[hold_idx], pred)
            diag["n_heldout"] = int(len(hold_idx))
            init = (value, imp)
        else:
            diag["heldout_mse"] = diag["heldout_r2"] = float("nan")
            diag["n_heldout"] = 0
        # Final fit on every sample, warm-started: the held-out check costs no model calls.
        all_samples, y_all, weights = self._with_anchor(samples, y, position_units, full_target)
        value, imp, info = self.solve(all_samples, y_all, n_units, init, weights)
        pred, _ = _predict_sparse(*pad_sequences(samples), value, imp)
        diag["train_mse"], diag["train_r2"] = _fit_quality(y, pred)
        diag.update({f"fit_{k}": v for k, v in info.items()})
        imp = normalise_importance(imp)
        se_v, se_s = laplace_standard_errors(count_matrix(all_samples, n_units), y_all, value, imp, prior_sd=self.prior_sd, weights=weights)
        return FitResult(value, imp, diag, value_se=se_v, importance_se=se_s)


_EFF_DESIGNS = {"random": short_sequences, "balanced": balanced_sequences}


class EffFitter(_SampledFitter):
    """SLALOM-eff (App. D, Algorithm 1): short random sequences, gradient descent.

    Args:
        sample_length: units per sample (the paper uses 2), or a range ``(lo, hi)``: each
            sample's length drawn uniformly from lo … hi (App. D: "1–3").
        design: "random" (the paper's: units drawn uniformly with replacement) or
            "balanced" (every unit in the same number of samples, ±1; see
            :func:`~slalom_core.sampling.balanced_sequences`).
        singletons: spend the first U samples on each unit alone. A one-unit sample is
            the shortest forward pass there is and measures the unit's value directly
            (G([u]) = v_u under the surrogate), leaving the rest of the budget to pin down
            the importances.
        deletion_share: share of the budget spent on deletion samples of the full text
            (SLALOM-fidel's design) instead of short samples: a design across lengths.
        solver: "lbfgs" (default) or "adam", see :func:`fit_gradient`.
        l2_importance: "auto" (default): a Gaussian prior on s with standard deviation
            ``prior_sd`` and the noise variance profiled out (see :func:`fit_gradient`); its
            pull on s grows with the residual noise and fades as samples accumulate. Or a
            number: a fixed ridge weight (1e-3 was the default before; 0 disables it). Short
            samples identify s only weakly and a nearly unregularised fit overfits them (see
            docs/results.md, Table C, for the held-out R² and AOPC of both).
        prior_sd: the prior's standard deviation of s, for ``l2_importance="auto"``.
        l2_value: ridge weight on v, see :func:`fit_gradient`.
        tol: relative improvement (in units of the targets' variance) at which to stop.
        holdout_fraction, anchor_weight, check_samples: see :class:`_SampledFitter`.
    """

    name = "eff"

    def __init__(self, sample_length: int | tuple[int, int] = 2, design: str = "random", singletons: bool = False, deletion_share: float = 0.0, solver: str = "lbfgs", holdout_fraction: float = 0.1, max_iter: int = 500, tol: float = 1e-7, learning_rate: float = 0.05, l2_importance: float | str = "auto", prior_sd: float = 0.25, l2_value: float = 1e-3, anchor_weight: float = 0.0, check_samples: int = 0) -> None:
        if not prior_sd > 0:
            raise ValueError(f"prior_sd must be > 0, got {prior_sd!r}")
        if isinstance(l2_importance, str) and l2_importance != "auto":
            raise ValueError(f"l2_importance must be a number or 'auto', got {l2_importance!r}")
        if not isinstance(l2_importance, str) and not l2_importance >= 0:
            raise ValueError(f"l2_importance must be >= 0, got {l2_importance!r}")
        super().__init__(holdout_fraction, max_iter, tol, prior_sd if l2_importance == "auto" else None, anchor_weight, check_samples)
        if solver not in ("lbfgs", "adam"):
            raise ValueError(f"unknown solver {solver!r}; choose 'lbfgs' or 'adam'")
        if design not in _EFF_DESIGNS:
            raise ValueError(f"unknown design {design!r}; choose one of {sorted(_EFF_DESIGNS)}")
        if not 0 <= deletion_share < 1:
            raise ValueError(f"deletion_share must be in [0, 1), got {deletion_share!r}")
        self.sample_length = sample_length if isinstance(sample_length, tuple) else int(sample_length)
        self.design_name = design
        self.singletons = bool(singletons)
        self.deletion_share = float(deletion_share)
        self.solver = solver
        self.learning_rate = learning_rate
        self.l2_importance = l2_importance
        self.l2_value = l2_value

    def design(self, rng, position_units, n_units, n_samples):
        singles = [np.array([u]) for u in range(n_units)] if self.singletons else []
        n_del = int(round(self.deletion_share * n_samples)) if len(position_units) > 1 else 0
        rest = _EFF_DESIGNS[self.design_name](rng, n_units, n_samples - len(singles) - n_del, self.sample_length)
        deletions = deletion_neighbourhood(rng, position_units, n_del) if n_del else []
        return singles + rest + deletions

    def solve(self, samples, y, n_units, init, weights):
        idx, mask = pad_sequences(samples)
        return fit_gradient(idx, mask, y, n_units, init=init, solver=self.solver, max_iter=self.max_iter, tol=self.tol, learning_rate=self.learning_rate,
                            l2_importance=0.0 if self.prior_sd is not None else float(self.l2_importance), prior_sd=self.prior_sd, l2_value=self.l2_value, weights=weights)


class FidelFitter(_SampledFitter):
    """SLALOM-fidel: deletions from the full text.

    Deletion samples all contain most of the text, so along one direction values and
    importances trade off almost freely: without a prior, where a fit stops in that flat
    valley depends on rounding (batch composition, CPU). By default the same Gaussian
    prior on the importances as eff's makes the optimum unique, and a quasi-Newton solver
    on the posterior objective (:func:`fit_gradient`), stopped by its gradient, finds it.
    ``solver="als"`` is the alternating least squares of the design notes (no prior; its
    answer is one point of the valley). Measured on exact SLALOMs, the quasi-Newton fit from
    s = 0 also reaches a lower error than ALS followed by the same polish (ALS drifts along
    the valley to large importances first).

    Args:
        max_delete_fraction: at most this share of positions is deleted per sample.
        solver: "lbfgs" (default, with the prior) or "als" (the prior is not used).
        prior_sd: standard deviation of the prior on s.
        max_iter: solver iterations (default 500).
        tol: ALS's relative-improvement stop (the quasi-Newton fit stops by its gradient).
        holdout_fraction, anchor_weight, check_samples: see :class:`_SampledFitter`.
    """

    name = "fidel"

    def __init__(self, max_delete_fraction: float = 0.5, solver: str = "lbfgs", holdout_fraction: float = 0.1, max_iter: int = 500, tol: float = 1e-6, prior_sd: float = 0.25, anchor_weight: float = 0.0, check_samples: int = 0) -> None:
        if solver not in ("lbfgs", "als"):
            raise ValueError(f"unknown solver {solver!r}; choose 'lbfgs' or 'als'")
        super().__init__(holdout_fraction, max_iter, tol, prior_sd if solver == "lbfgs" else None, anchor_weight, check_samples)
        self.max_delete_fraction = max_delete_fraction
        self.solver = solver

    def design(self, rng, position_units, n_units, n_samples):
        return deletion_neighbourhood(rng, position_units, n_samples, self.max_delete_fraction)

    def solve(self, samples, y, n_units, init, weights):
        if self.solver == "lbfgs":
            # ftol ~ 0: in the flat valley the loss barely changes while the parameters
            # still move, so only the gradient (GRAD_TOL) may say when the optimum is reached.
            idx, mask = pad_sequences(samples)
            return fit_gradient(idx, mask, y, n_units, init=init, max_iter=self.max_iter, tol=1e-15, l2_importance=0.0, prior_sd=self.prior_sd, weights=weights)
        counts = count_matrix(samples, n_units)
        if weights is not None:
            # ALS takes no weights: the anchor row is repeated instead (its share rounded).
            reps = np.maximum(np.round(weights / weights.min()).astype(int), 1)
            counts, y = np.repeat(counts, reps, axis=0), np.repeat(y, reps, axis=0)
        return fit_als(counts, y, init_importance=None if init is None else init[1], max_iter=self.max_iter, tol=self.tol)


class AnaFitter(Fitter):
    """SLALOM-ana (proof of Prop. 5.2): exactly 2U − 1 model evaluations.

    Step 1 scores every unique unit alone: G([τ]) = v(τ). Step 2 scores pairs [τ0, ω] with
    a reference unit τ0 and solves exp(s_ω − s_τ0) = (v_τ0 − G) / (G − v_ω). τ0 is the
    unit whose value lies farthest from the others', which keeps the denominators away from
    zero. Exact on a true SLALOM; on real models a pair whose ratio is not positive and
    finite gets s_ω = s_τ0 and is counted in ``diagnostics["ana_invalid_pairs"]``; a pair of
    equal values carries no information about s_ω (``ana_undetermined_pairs``, s_ω = s_τ0).
    """

    name = "ana"

    def run(self, rng, position_units, n_units, n_samples, full_target=None):
        singles = [np.array([u]) for u in range(n_units)]
        v = np.asarray((yield singles), dtype=float)  # (U, K)
        empty = {"heldout_mse": float("nan"), "heldout_r2": float("nan")}
        if n_units == 1:
            return FitResult(v, np.zeros(1), {"ana_invalid_pairs": 0, "ana_undetermined_pairs": 0, **empty})
        spread = np.abs(v[:, None, :] - v[None, :, :]).max(axis=2).sum(axis=1)
        ref = int(np.argmax(spread))
        others = [u for u in range(n_units) if u != ref]
        pairs = [np.array([ref, u]) for u in others]
        g = np.asarray((yield pairs), dtype=float)
        imp = np.zeros(n_units)
        invalid = undetermined = 0
        scale = 1.0 + np.abs(v).max()
        for row, u in enumerate(others):
            # The class where the two values differ most gives the best-conditioned ratio.
            k = int(np.argmax(np.abs(v[ref] - v[u])))
            if abs(v[ref, k] - v[u, k]) <= 1e-9 * scale:
                # Equal values: the pair's output is the same whatever the weights, so the
                # data say nothing about s_u (not a failure of the model to be a SLALOM).
                undetermined += 1
                continue
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = (v[ref, k] - g[row, k]) / (g[row, k] - v[u, k])
            if np.isfinite(ratio) and ratio > 0:
                imp[u] = np.log(ratio)
            else:
                invalid += 1
        diag = {"ana_invalid_pairs": invalid, "ana_undetermined_pairs": undetermined, "ana_reference_unit": ref, **empty}
        return FitResult(v, normalise_importance(imp), diag)


FITTERS: dict[str, type[Fitter]] = {"eff": EffFitter, "fidel": FidelFitter, "ana": AnaFitter}


def get_fitter(method: str | Fitter, **options) -> Fitter:
    """A fitter by name ("eff", "fidel", "ana"), configured with ``options``.

    Example:
        >>> get_fitter("eff", sample_length=3).sample_length
        3
    """
    if isinstance(method, Fitter):
        if options:
            raise ValueError("options cannot be combined with a Fitter instance")
        return method
    if method not in FITTERS:
        raise ValueError(f"unknown method {method!r}; choose one of {sorted(FITTERS)}")
    try:
        return FITTERS[method](**options)
    except TypeError as err:
        raise TypeError(f"invalid option for method {method!r}: {err}") from None
