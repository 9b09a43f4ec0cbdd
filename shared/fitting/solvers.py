"""Batched box-constrained solvers on an objective of many texts at once: L-BFGS (compact form) and Adam."""

from __future__ import annotations

from collections.abc import Callable

import torch

from .constants import EXACT_FIT, LBFGS_GTOL, LBFGS_MEMORY


def _lbfgs_direction(
    grad: torch.Tensor, s_mem: torch.Tensor, y_mem: torch.Tensor, valid: torch.Tensor, gamma: torch.Tensor
) -> torch.Tensor:
    """H·grad for the L-BFGS inverse Hessian H of every row, in compact form.

    The compact representation (Byrd, Nocedal & Schnabel, 1994) gives the same vector as
    the two-loop recursion, H0 = gamma·I, with a fixed number of batched matrix operations
    instead of a Python loop over the pairs:

        H g = γ g + Sᵀ R⁻ᵀ ((D + γ Y Yᵀ) R⁻¹ S g − γ Y g) − γ Yᵀ R⁻¹ S g

    where S, Y (k, P) hold the pairs oldest first, R is the upper triangle of S Yᵀ and D
    its diagonal. An invalid pair is stored as zeros; its diagonal entry of R is set to one,
    which decouples it (its row and column of S Yᵀ are zero), so it contributes nothing.

    Args:
        grad: (T, P); s_mem, y_mem: (T, k, P); valid: (T, k) bool; gamma: (T,).
    """
    out = grad * gamma.unsqueeze(1)
    if s_mem.shape[1] == 0:
        return out
    sy = s_mem @ y_mem.transpose(1, 2)  # (T, k, k): s_i · y_j
    r = torch.triu(sy) + torch.diag_embed((~valid).to(sy.dtype))
    diag = torch.diagonal(sy, dim1=1, dim2=2)
    yy = y_mem @ y_mem.transpose(1, 2)
    sg = s_mem @ grad.unsqueeze(2)  # (T, k, 1)
    yg = y_mem @ grad.unsqueeze(2)
    gam = gamma[:, None, None]
    u = torch.linalg.solve_triangular(r, sg, upper=True)
    top = torch.linalg.solve_triangular(
        r.transpose(1, 2), diag.unsqueeze(2) * u + gam * (yy @ u) - gam * yg, upper=False
    )
    return out + (s_mem.transpose(1, 2) @ top - gam * (y_mem.transpose(1, 2) @ u)).squeeze(2)


def lbfgs(
    fun: Callable,
    x: torch.Tensor,
    lower: torch.Tensor,
    upper: torch.Tensor,
    *,
    max_iter: int,
    ftol: float,
    exact_stop: bool,
) -> dict:
    """Batched, bounded L-BFGS: one quasi-Newton minimisation per row of ``x`` (T, P).

    Every row has its own curvature pairs, its own projected backtracking line search and
    its own stopping rules; rows run in lock-step (one objective call per trial step for the
    whole batch) and a row that has stopped is frozen. Stops per row: the largest projected
    gradient entry at or below :data:`LBFGS_GTOL`, a relative decrease below ``ftol``, the
    relative MSE at :data:`EXACT_FIT` (``exact_stop``), a line search that cannot decrease
    the objective, or ``max_iter`` iterations. Bounds hold the importances in
    ±:data:`IMPORTANCE_BOUND`: a variable at a bound whose gradient points outwards is held
    fixed for the step (the active set), and every trial point is projected.

    Args:
        fun: the objective: (T, P) parameters -> (objective (T,), gradient (T, P), relative MSE (T,)).
        x: (T, P) start; lower, upper: (P,) or (T, P) bounds.
        max_iter: iterations per row; ftol: the relative-decrease stop (see the tolerance
            policy in :mod:`.constants`); exact_stop: whether the exact-fit stop applies.

    Returns:
        A dict with the final ``x``, ``f``, ``g``, ``rel`` and per row ``iterations`` and
        ``success`` (a gradient or decrease stop).

    Example:
        >>> fun = lambda x: ((x * x).sum(1), 2 * x, (x * x).sum(1))
        >>> out = lbfgs(fun, torch.ones(2, 3), -torch.ones(3), torch.ones(3), max_iter=20, ftol=1e-12, exact_stop=False)
        >>> out["success"].tolist(), float(out["x"].abs().max()) < 1e-6
        ([True, True], True)
    """
    n_t, n_par = x.shape
    f, g, rel = fun(x)
    # Curvature pairs, oldest first, stacked (T, k, P). A pair rejected for a row is stored
    # as zeros there (and marked invalid), which removes it from that row's inverse Hessian.
    s_mem = x.new_zeros(n_t, 0, n_par)
    y_mem = x.new_zeros(n_t, 0, n_par)
    valid = torch.zeros(n_t, 0, dtype=torch.bool, device=x.device)
    gamma = None  # initial inverse-Hessian scale per row
    active = torch.ones(n_t, dtype=torch.bool, device=x.device)
    success = torch.zeros_like(active)
    iterations = torch.zeros(n_t, dtype=torch.int64, device=x.device)
    for _ in range(max_iter):
        free = ~(((x <= lower) & (g > 0)) | ((x >= upper) & (g < 0)))
        pg = g * free
        at_g = pg.abs().amax(dim=1) <= LBFGS_GTOL
        success |= active & at_g
        active &= ~((at_g | (rel <= EXACT_FIT)) if exact_stop else at_g)
        # One host sync per iteration: the loop must know when every row has stopped.
        if not bool(active.any()):
            break
        if gamma is None:
            # First step: the steepest descent of unit length (what L-BFGS-B does).
            gamma = 1.0 / pg.norm(dim=1).clamp_min(1e-300)
        d, s_mem, y_mem, valid = _descent_direction(g, pg, free, s_mem, y_mem, valid, gamma)
        x_new, f_new, g_new, rel_new, pending = _line_search(fun, x, f, g, rel, d, lower, upper, active)
        moved = active & ~pending
        active &= ~pending  # no decrease along a descent direction: stop (as L-BFGS-B does)
        s_mem, y_mem, valid, gamma = _remember(s_mem, y_mem, valid, gamma, x_new - x, g_new - g, moved)
        decrease = (f - f_new) / torch.clamp_min(torch.maximum(f.abs(), f_new.abs()), 1.0)
        iterations += moved
        x, f, g, rel = x_new, f_new, g_new, rel_new
        small = moved & (decrease <= ftol)
        success |= small
        active &= ~small
    return {"x": x, "f": f, "g": g, "rel": rel, "iterations": iterations, "success": success}


def _descent_direction(
    g: torch.Tensor,
    pg: torch.Tensor,
    free: torch.Tensor,
    s_mem: torch.Tensor,
    y_mem: torch.Tensor,
    valid: torch.Tensor,
    gamma: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Each row's quasi-Newton direction on its free variables, and the memory it leaves.

    A direction that does not descend (stale curvature after a bound became active) is
    replaced by scaled steepest descent, and that row's memory is cleared.
    """
    d = -_lbfgs_direction(pg, s_mem, y_mem, valid, gamma) * free
    bad = torch.linalg.vecdot(g, d) >= 0
    d = torch.where(bad.unsqueeze(1), -pg * gamma.unsqueeze(1), d)
    valid = valid & ~bad.unsqueeze(1)
    keep_mem = (~bad).to(g.dtype)[:, None, None]
    return d, s_mem * keep_mem, y_mem * keep_mem, valid


def _line_search(
    fun: Callable,
    x: torch.Tensor,
    f: torch.Tensor,
    g: torch.Tensor,
    rel: torch.Tensor,
    d: torch.Tensor,
    lower: torch.Tensor,
    upper: torch.Tensor,
    active: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Projected backtracking (Armijo) line search of every active row, from the full
    quasi-Newton step: the new (x, f, g, rel), and the rows that found no decrease."""
    vdot = torch.linalg.vecdot
    step = torch.ones(x.shape[0], dtype=x.dtype, device=x.device)
    pending = active.clone()
    x_new, f_new, g_new, rel_new = x, f, g, rel
    slope = vdot(g, d)  # directional derivative at step 0 (negative)
    for _ls in range(60):
        xt = torch.clamp(torch.addcmul(x, step.unsqueeze(1), d), lower, upper)
        ft, gt, relt = fun(xt)
        # Armijo on the projected step; projection can turn a descent direction into
        # one that rises to first order, and then the test must still ask for a decrease
        # (else a step onto the bounds with a far worse objective passes it).
        ok = pending & torch.isfinite(ft) & (ft <= f + 1e-4 * vdot(g, xt - x).clamp_max(0.0))
        ok_c = ok.unsqueeze(1)
        x_new, g_new = torch.where(ok_c, xt, x_new), torch.where(ok_c, gt, g_new)
        f_new, rel_new = torch.where(ok, ft, f_new), torch.where(ok, relt, rel_new)
        pending &= ~ok
        if not bool(pending.any()):
            break
        # Shrink to the minimiser of the quadratic through f(0), f'(0) and f(step),
        # kept within [0.1, 0.5]·step: a badly scaled first step (a near-exact fit
        # whose gradient is large only because the residual is tiny) reaches the right
        # scale in a few trials instead of dozens of halvings.
        curv = ft - f - step * slope
        quad = -slope * step * step / (2.0 * torch.where(curv > 0, curv, torch.ones_like(curv)))
        quad = torch.where((curv > 0) & torch.isfinite(quad), quad, 0.5 * step)
        step = torch.where(pending, torch.minimum(torch.maximum(quad, 0.1 * step), 0.5 * step), step)
    return x_new, f_new, g_new, rel_new, pending


def _remember(
    s_mem: torch.Tensor,
    y_mem: torch.Tensor,
    valid: torch.Tensor,
    gamma: torch.Tensor,
    s_k: torch.Tensor,
    y_k: torch.Tensor,
    moved: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The memory with the step's pair (s_k, y_k) appended where a row moved, the oldest
    dropped once :data:`LBFGS_MEMORY` pairs are held, and the inverse-Hessian scale updated."""
    vdot = torch.linalg.vecdot
    sy = vdot(s_k, y_k)
    yy = vdot(y_k, y_k)
    # Keep a pair only where it carries positive curvature (else the update would
    # make the inverse Hessian indefinite).
    keep = moved & (sy > 2.2e-16 * yy) & (yy > 0)
    keep_c = keep.unsqueeze(1)
    start = 1 if s_mem.shape[1] >= LBFGS_MEMORY else 0
    s_mem = torch.cat([s_mem[:, start:], torch.where(keep_c, s_k, 0.0).unsqueeze(1)], dim=1)
    y_mem = torch.cat([y_mem[:, start:], torch.where(keep_c, y_k, 0.0).unsqueeze(1)], dim=1)
    valid = torch.cat([valid[:, start:], keep_c], dim=1)
    gamma = torch.where(keep, sy / torch.where(keep, yy, 1.0), gamma)
    return s_mem, y_mem, valid, gamma


def adam(
    fun: Callable, x: torch.Tensor, lower: torch.Tensor, upper: torch.Tensor, *, lr: float, max_iter: int, tol: float
) -> dict:
    """Full-batch Adam for every row of ``x``; bounded entries are clipped after each step.

    Adam's loss is noisy step to step: a row stops when its loss improved by less than
    ``tol`` (relative) over a window of 50 steps.

    Args:
        fun, x, lower, upper: as :func:`lbfgs`; lr: the step size; max_iter: steps per row;
            tol: the relative improvement per window at which a row stops.

    Returns:
        A dict like :func:`lbfgs`'s.

    Example:
        >>> fun = lambda x: ((x * x).sum(1), 2 * x, (x * x).sum(1))
        >>> out = adam(fun, torch.ones(1, 2), -torch.ones(2), torch.ones(2), lr=0.1, max_iter=500, tol=1e-6)
        >>> float(out["x"].abs().max()) < 0.05
        True
    """
    m = torch.zeros_like(x)
    v = torch.zeros_like(x)
    b1, b2, eps = 0.9, 0.999, 1e-8
    n_t = x.shape[0]
    prev = torch.full((n_t,), float("inf"), dtype=x.dtype, device=x.device)
    active = torch.ones(n_t, dtype=torch.bool, device=x.device)
    success = torch.zeros_like(active)
    iterations = torch.full((n_t,), max_iter, dtype=torch.int64, device=x.device)
    for step in range(1, max_iter + 1):
        loss, grad, _ = fun(x)
        m = b1 * m + (1 - b1) * grad
        v = b2 * v + (1 - b2) * grad**2
        upd = lr * (m / (1 - b1**step)) / (torch.sqrt(v / (1 - b2**step)) + eps)
        x = torch.where(active[:, None], torch.maximum(torch.minimum(x - upd, upper), lower), x)
        if step % 50 == 0:
            done = active & torch.isfinite(prev) & (prev - loss <= tol * prev.clamp_min(1e-12))
            iterations = torch.where(done, torch.full_like(iterations, step), iterations)
            success |= done
            active &= ~done
            prev = torch.where(active, loss, prev)
            if not bool(active.any()):
                break
    f, g, rel = fun(x)
    return {"x": x, "f": f, "g": g, "rel": rel, "iterations": iterations, "success": success}
