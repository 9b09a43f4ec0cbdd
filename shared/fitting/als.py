"""Alternating least squares (fidel with ``solver="als"``): values by least squares, importances by
re-weighted linear solves with a line search."""

from __future__ import annotations

import numpy as np
import torch

from ..surrogate import dense_slots, surrogate_forward
from .constants import ALS_MAX_ITER, FIT_DTYPE, FIT_TOL, GRAD_TOL


def fit_als(
    counts: np.ndarray,
    y: np.ndarray,
    *,
    init_importance: np.ndarray | None = None,
    max_iter: int = ALS_MAX_ITER,
    tol: float = FIT_TOL,
    ridge: float = 1e-8,
    irls_steps: int = 3,
    device: torch.device | str | None = None,
) -> tuple[np.ndarray, np.ndarray, dict]:
    """Fit SLALOM by alternating least squares (SLALOM-fidel with ``solver="als"``), in torch.

    With the importances fixed, F is linear in the values: an ordinary least-squares
    problem. With the values fixed, F(t) = y  ⇔  Σ_u c_u w_u (v_u − y) = 0 is linear in
    w = exp(s); the s-step solves it in the least-squares sense (denominators from the
    previous iterate, scale fixed so the mean denominator is unchanged), then a backtracking
    line search in log-space guarantees that the MSE never increases. Iterates until the
    relative improvement is below ``tol``.

    Args:
        counts: (B, U) occurrence counts; y: (B, K) targets.
        init_importance: starting importances (U,); default: all zero.
        max_iter: ALS iterations at most.
        tol: the relative MSE improvement per iteration at which to stop (SLALOM-fidel
            passes :data:`~.constants.ALS_TOL`; see the tolerance policy there).
        ridge: relative Tikhonov term that keeps both solves well posed when units always
            occur together.
        irls_steps: linear solves per s-step, each with denominators from the previous.
        device: where to fit (default: the CPU); always in float64.

    Returns:
        value (U, K), importance (U,), and a dict with "iterations", "converged", "loss".

    Example:
        >>> c = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
        >>> v, s, info = fit_als(c, np.array([[1.0], [-1.0], [0.0]]))
        >>> np.round(v[:, 0], 3).tolist()
        [1.0, -1.0]
    """
    dev = torch.device(device) if device is not None else torch.device("cpu")
    c = torch.as_tensor(np.asarray(counts, dtype=np.float64), device=dev)
    yt = torch.as_tensor(np.asarray(y, dtype=np.float64), device=dev)
    n_units = c.shape[1]
    reduced = _Reduced(c, yt, ridge, dev)
    imp = (
        torch.zeros(n_units, dtype=FIT_DTYPE, device=dev)
        if init_importance is None
        else torch.as_tensor(np.asarray(init_importance, dtype=np.float64), device=dev).clone()
    )
    value, loss = reduced.solve_values(imp)
    converged = False
    it = 0
    for it in range(1, max_iter + 1):  # noqa: B007  (the count is reported after the loop)
        direction = _irls_direction(reduced, imp, value, irls_steps)
        improved, step, cand, cand_value, cand_loss, direction = _line_search(reduced, imp, value, direction, loss)
        if not improved:
            # No step along the gradient helps: an optimum only if the gradient is ~0
            # (relative to the loss); otherwise the fit stalled and says so.
            converged = bool(float(reduced.grad_s(value, imp).abs().max()) <= GRAD_TOL * max(loss, 1e-300))
            break
        step, cand, cand_value, cand_loss = reduced.lengthen(imp, direction, step, cand, cand_value, cand_loss)
        rel = (loss - cand_loss) / max(loss, 1e-300)
        imp, value, loss = cand, cand_value, cand_loss
        if rel < tol:
            converged = True
            break
    imp = imp - imp.mean()
    return value.cpu().numpy(), imp.cpu().numpy(), {"iterations": it, "converged": converged, "loss": loss}


class _Reduced:
    """The *reduced* objective of ALS: the MSE as a function of s alone, with the values
    re-solved by least squares for each s (the s-steps are searched along it)."""

    def __init__(self, c: torch.Tensor, yt: torch.Tensor, ridge: float, dev: torch.device) -> None:
        self.c, self.yt, self.ridge = c, yt, ridge
        self.slots = dense_slots(c)
        self.eye = torch.eye(c.shape[1], dtype=FIT_DTYPE, device=dev)

    def attention(self, s: torch.Tensor) -> torch.Tensor:
        return surrogate_forward(None, s, *self.slots)[1]

    def solve_values(self, s: torch.Tensor) -> tuple[torch.Tensor, float]:
        """The least-squares values for fixed s, and the MSE they reach."""
        a = self.attention(s)
        gram = a.T @ a
        lam = self.ridge * max(float(torch.trace(gram)) / self.c.shape[1], 1e-12)
        value = torch.linalg.solve(gram + lam * self.eye, a.T @ self.yt)
        return value, float(((a @ value - self.yt) ** 2).mean())

    def grad_s(self, value: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        return _importance_gradient(self.attention(s), value, self.yt)

    def backtrack(self, s: torch.Tensor, direction: torch.Tensor, loss: float):
        """First step 1, 1/2, 1/4 … along ``direction`` whose reduced MSE is not larger."""
        step = 1.0
        for _ in range(30):
            cand = s + step * direction
            cand_value, cand_loss = self.solve_values(cand)
            if cand_loss <= loss:
                return True, step, cand, cand_value, cand_loss
            step *= 0.5
        return False, 0.0, s, None, loss

    def lengthen(self, imp, direction, step, cand, cand_value, cand_loss):
        """Where the full step already helps, doubled steps while they help further."""
        while 1.0 <= step < 64.0:
            longer = imp + 2.0 * step * direction
            l_value, l_loss = self.solve_values(longer)
            if l_loss >= cand_loss:
                break
            step, cand, cand_value, cand_loss = 2.0 * step, longer, l_value, l_loss
        return step, cand, cand_value, cand_loss


def _irls_direction(reduced: _Reduced, imp: torch.Tensor, value: torch.Tensor, irls_steps: int) -> torch.Tensor:
    """The s-step's direction in log-space, from re-weighted linear solves for w = exp(s).

    Residual r_bk = Σ_u M_(bk),u w_u with M = c_bu (v_uk − y_bk) / D_b. The denominators D_b
    depend on w themselves, so the linear solve is repeated a few times with D_b from the
    latest w (IRLS); one pass alone stalls short of the optimum.
    """
    c, yt, ridge, eye = reduced.c, reduced.yt, reduced.ridge, reduced.eye
    n_samples, n_units = c.shape
    n_out = yt.shape[1]
    w_old = torch.exp(imp - imp.max())
    w_new = w_old
    for _ in range(irls_steps):
        den = c @ w_new
        coef = c / den[:, None]
        m = (coef[:, None, :] * (value.T[None, :, :] - yt[:, :, None])).reshape(n_samples * n_out, n_units)
        h = m.T @ m
        h += ridge * max(float(torch.trace(h)) / n_units, 1e-12) * eye
        g = coef.mean(dim=0)  # mean_b D_b(w) / D_b(w_prev) = g·w: keep the scale
        hinv_g = torch.linalg.solve(h, g)
        w_next = hinv_g / (g @ hinv_g) * (g @ w_new)
        w_new = torch.clamp_min(w_next, 1e-8 * max(float(w_next.max()), 1e-300))
    return torch.log(w_new) - torch.log(w_old)


def _line_search(reduced: _Reduced, imp: torch.Tensor, value: torch.Tensor, direction: torch.Tensor, loss: float):
    """A step along the s-step that does not raise the reduced MSE, else along steepest descent.

    Searching the *reduced* objective (v re-solved for each candidate s), not alternating
    plainly: that crawls along the valley where v and s trade off (measured: 3x more
    iterations with v held fixed). Returns (improved, step, s, value, loss, direction); a
    steepest-descent step is returned as a direction of step 1.
    """
    improved, step, cand, cand_value, cand_loss = reduced.backtrack(imp, direction, loss)
    if not improved:
        # The IRLS step is not guaranteed to descend; steepest descent on s is.
        grad = reduced.grad_s(value, imp)
        improved, step, cand, cand_value, cand_loss = reduced.backtrack(
            imp, -grad / max(float(grad.abs().max()), 1e-300), loss
        )
        direction = cand - imp if improved else direction
        step = 1.0
    return improved, step, cand, cand_value, cand_loss, direction


def _importance_gradient(a: torch.Tensor, value: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Gradient w.r.t. s of ½·Σ (F − y)² for fixed values, from the attention weights.

    ``a`` (B, U) are the samples' attention weights ``c_bu exp(s_u) / Σ_u' c_bu' exp(s_u')``,
    ``value`` (U, K), ``y`` (B, K). With F = a·v, dF_bk/ds_u = a_bu (v_uk − F_bk), so the
    gradient is Σ_bk r_bk a_bu (v_uk − F_bk) with r = F − y. ALS uses it for its steepest-
    descent fallback and its convergence test.
    """
    f = a @ value
    r = f - y
    return (a * (r @ value.T)).sum(dim=0) - a.T @ (r * f).sum(dim=1)
