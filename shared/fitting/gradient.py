"""Gradient fits of SLALOM's surrogate: :func:`fit_gradient_batch` (many texts at once) and
:func:`fit_gradient` (one text)."""

from __future__ import annotations

import numpy as np
import torch

from .constants import (
    EXACT_FIT,
    FIT_DTYPE,
    FIT_TOL,
    GRAD_TOL,
    IMPORTANCE_BOUND,
    LEARNING_RATE,
    MAX_ITER,
    RIDGE_WEIGHT,
    SOLVER,
)
from .objective import (
    OBJECTIVE_KINDS,
    FitBatch,
    Objective,
    initial_values,
    make_objective,
    mse_and_grads,
    pack_problems,
)
from .solvers import adam, lbfgs


def fit_gradient_batch(
    problems: list[tuple[np.ndarray, np.ndarray, np.ndarray, int]],
    *,
    inits: list[tuple[np.ndarray, np.ndarray] | None] | None = None,
    weights: list[np.ndarray | None] | None = None,
    solver: str = SOLVER,
    max_iter: int = MAX_ITER,
    tol: float = FIT_TOL,
    learning_rate: float = LEARNING_RATE,
    l2_importance: float = RIDGE_WEIGHT,
    l2_value: float = RIDGE_WEIGHT,
    prior_sd: float | list[float] | None = None,
    objective: str | None = None,
    value_priors: list[tuple[np.ndarray, float] | None] | None = None,
    importance_bases: list[np.ndarray | None] | None = None,
    device: torch.device | str | None = None,
) -> list[tuple[np.ndarray, np.ndarray, dict]]:
    """:func:`fit_gradient` for many problems at once: one batched optimisation.

    The problems (``(idx, mask, y, n_units)`` each, e.g. one per text) are padded into
    common tensors on ``device`` and minimised together; each keeps its own curvature
    memory, line search and stopping rule, so its answer does not depend on its
    companions beyond floating-point effects of padding. The cost is about one fit's
    iterations, each on the whole batch.

    Args:
        problems: (idx (B, L), mask (B, L), y (B, K), n_units); K equal for all.
        inits, weights: per problem, as ``init`` and ``weights`` of :func:`fit_gradient`.
        prior_sd: as in :func:`fit_gradient`, one for all problems or one per problem.
        objective: as in :func:`fit_gradient`.
        value_priors: per problem, None or ``(centre (U, K), sd)``: the values' prior is
            N(centre, sd²) instead of the weak one centred at zero (needs ``prior_sd``);
            sd = 0 holds the values at the centre and fits the importances alone (the
            bounded solver gets equal lower and upper bounds there).
        importance_bases: per problem, None or a (U,) direction h: the importances' prior
            is then N(β·h, prior_sd²) with the slope β fitted (needs ``prior_sd``).
        device: where to fit (default: the CPU).
        Other arguments: as in :func:`fit_gradient`, shared by all problems.

    Returns:
        One ``(value, importance, info)`` per problem, as :func:`fit_gradient` returns.

    Example:
        >>> idx, mask = pad_sequences([np.array([0]), np.array([1]), np.array([0, 1])])
        >>> y = np.array([[1.0], [-1.0], [0.0]])
        >>> (v1, _, _), (v2, _, _) = fit_gradient_batch([(idx, mask, y, 2), (idx, mask, 2 * y, 2)])
        >>> np.round(v2[:, 0] / v1[:, 0], 3).tolist()
        [2.0, 2.0]
    """
    objective = _checked_objective(solver, objective, prior_sd)
    if not problems:
        return []
    dev = torch.device(device) if device is not None else torch.device("cpu")
    batch = _packed(problems, weights, dev)
    given, centre = _value_centres(batch, value_priors, dev)
    basis = _importance_basis(batch, importance_bases, dev)
    fun = make_objective(
        batch,
        kind=objective,
        importance_basis=basis,
        l2_importance=l2_importance,
        l2_value=l2_value,
        prior_sd=prior_sd,
        value_centre=centre,
        # A held value (sd 0) is fixed by the bounds below; its prior term then vanishes.
        value_sd=None if not given else [None if p is None else (p[1] or 1.0) for p in value_priors],
    )
    theta0 = _start(batch, fun, inits, dev)
    lower, upper = _bounds(batch, fun, given, centre, theta0, dev)
    theta0 = torch.maximum(torch.minimum(theta0, upper), lower)  # a warm start may lie outside
    if solver == "lbfgs":
        out = _solve_lbfgs(fun, theta0, lower, upper, max_iter=max_iter, tol=tol)
    else:
        out = adam(fun, theta0, lower, upper, lr=learning_rate, max_iter=max_iter, tol=tol)
    return _results(batch, fun, out, lower, upper, max_iter)


def _checked_objective(solver: str, objective: str | None, prior_sd: float | list[float] | None) -> str:
    """The objective's kind (defaulted from ``prior_sd``), once the solver and kind are known ones."""
    if solver not in ("lbfgs", "adam"):
        raise ValueError(f"unknown solver {solver!r}; choose 'lbfgs' or 'adam'")
    if objective is None:
        objective = "ridge" if prior_sd is None else "posterior"
    if objective not in OBJECTIVE_KINDS:
        raise ValueError(f"unknown objective {objective!r}; choose one of {OBJECTIVE_KINDS}")
    return objective


def _packed(
    problems: list[tuple[np.ndarray, np.ndarray, np.ndarray, int]],
    weights: list[np.ndarray | None] | None,
    dev: torch.device,
) -> FitBatch:
    """The problems padded into the common tensors of one batch on ``dev``."""
    return pack_problems(
        [
            (
                np.asarray(i),
                np.asarray(m, dtype=np.float64),
                np.asarray(y, dtype=np.float64),
                int(u),
                None if weights is None else weights[k],
            )
            for k, (i, m, y, u) in enumerate(problems)
        ],
        dev,
        FIT_DTYPE,
    )


def _value_centres(
    batch: FitBatch, value_priors: list[tuple[np.ndarray, float] | None] | None, dev: torch.device
) -> tuple[list[tuple[int, tuple[np.ndarray, float]]], torch.Tensor | None]:
    """The problems given a value prior, ``(t, (centre, sd))``, and the centres padded into
    one (T, U, K) tensor (None where no problem has one: the weak prior at zero applies)."""
    n_t, n_units, n_out = batch.shape
    given = [] if value_priors is None else [(t, p) for t, p in enumerate(value_priors) if p is not None]
    centre = None
    if given:
        c_np = np.zeros((n_t, n_units, n_out))
        for t, (c, _sd) in given:
            c_np[t, : batch.sizes[t]] = np.asarray(c, dtype=np.float64).reshape(batch.sizes[t], n_out)
        centre = torch.from_numpy(c_np).to(dev)
    return given, centre


def _importance_basis(
    batch: FitBatch, importance_bases: list[np.ndarray | None] | None, dev: torch.device
) -> torch.Tensor | None:
    """The importances' prior directions padded into one (T, U) tensor (None where none is given)."""
    n_t, n_units, _ = batch.shape
    basis = None
    if importance_bases is not None and any(h is not None for h in importance_bases):
        h_np = np.zeros((n_t, n_units))
        for t, h in enumerate(importance_bases):
            if h is not None:
                h_np[t, : batch.sizes[t]] = np.asarray(h, dtype=np.float64)
        basis = torch.from_numpy(h_np).to(dev)
    return basis


def _start(
    batch: FitBatch,
    fun: Objective,
    inits: list[tuple[np.ndarray, np.ndarray] | None] | None,
    dev: torch.device,
) -> torch.Tensor:
    """The starting parameters (T, P): the given warm starts, else the mean targets and s = 0."""
    n_t, n_units, n_out = batch.shape
    value0 = initial_values(batch)
    imp0 = torch.zeros(n_t, n_units, dtype=FIT_DTYPE, device=dev)
    if inits is not None and any(i is not None for i in inits):
        v_np = value0.cpu().numpy()
        s_np = np.zeros((n_t, n_units))
        for t, init in enumerate(inits):
            if init is not None:
                u = batch.sizes[t]
                v_np[t, :u] = np.asarray(init[0], dtype=np.float64).reshape(u, n_out)
                s_np[t, :u] = np.asarray(init[1], dtype=np.float64)
        value0 = torch.from_numpy(v_np).to(dev)
        imp0 = torch.from_numpy(s_np).to(dev)
    slope0 = torch.zeros(n_t, fun.n_extra, dtype=FIT_DTYPE, device=dev)
    return torch.cat([value0.flatten(1), imp0, slope0], dim=1)


def _bounds(
    batch: FitBatch,
    fun: Objective,
    given: list[tuple[int, tuple[np.ndarray, float]]],
    centre: torch.Tensor | None,
    theta0: torch.Tensor,
    dev: torch.device,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Lower and upper bounds of the parameters; a problem with a value prior starts at its
    centre (``theta0`` is changed in place), held there where the prior's sd is 0."""
    n_t, n_units, n_out = batch.shape
    # Bounds keep exp(s) finite and the softmax meaningful (weights within e^±30); the
    # slope moves a unit-norm axis, so the same bound keeps its part of each s within it.
    inf = torch.full((fun.n_val,), float("inf"), dtype=FIT_DTYPE, device=dev)
    bound = torch.full((n_units + fun.n_extra,), IMPORTANCE_BOUND, dtype=FIT_DTYPE, device=dev)
    lower, upper = torch.cat([-inf, -bound]), torch.cat([inf, bound])
    if given:
        lower, upper = lower.repeat(n_t, 1), upper.repeat(n_t, 1)
        for t, (_centre, v_sd) in given:
            k = batch.sizes[t] * n_out
            v = centre[t, : batch.sizes[t]].reshape(-1)
            theta0[t, :k] = v  # start at the centre
            if v_sd == 0:
                # Equal bounds hold a value where it is: the projected steps never move it.
                lower[t, :k] = upper[t, :k] = v
    return lower, upper


def _solve_lbfgs(
    fun: Objective, theta0: torch.Tensor, lower: torch.Tensor, upper: torch.Tensor, *, max_iter: int, tol: float
) -> dict:
    """:func:`~.solvers.lbfgs` on variables rescaled by the root of the Hessian's diagonal
    where the objective's kind asks for it (see Objective.preconditioned), its answer
    scaled back."""
    root = fun.curvature(theta0).sqrt() if fun.preconditioned else torch.ones_like(theta0)

    def scaled(z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        f, g, rel = fun(z / root)
        return f, g / root, rel

    out = lbfgs(
        scaled,
        theta0 * root,
        lower * root,
        upper * root,
        max_iter=max_iter,
        ftol=tol,
        exact_stop=fun.stops_when_exact,
    )
    out["x"], out["g"] = out["x"] / root, out["g"] * root
    return out


def _results(
    batch: FitBatch, fun: Objective, out: dict, lower: torch.Tensor, upper: torch.Tensor, max_iter: int
) -> list[tuple[np.ndarray, np.ndarray, dict]]:
    """Each problem's ``(value, importance, info)`` from the solver's answer."""
    theta, grad = out["x"], out["g"]
    # Judge convergence by the gradient too: a line search that cannot make progress at a
    # stationary point is an optimum found, while running out of iterations away from one
    # is not. A bounded importance whose gradient points outwards is not counted.
    free = ~(((theta <= lower) & (grad > 0)) | ((theta >= upper) & (grad < 0)))
    grad_norm = (grad * free).abs().amax(dim=1)
    value, imp = fun.unpack(theta)
    mse, _, _ = mse_and_grads(batch, value, imp)  # report the plain MSE, whatever the objective
    exact = out["rel"] <= EXACT_FIT if fun.stops_when_exact else torch.zeros_like(out["success"])
    converged = out["success"] | ((out["iterations"] < max_iter) & (grad_norm <= GRAD_TOL)) | exact
    # One transfer of everything the caller reads.
    value, imp = value.cpu().numpy(), imp.cpu().numpy()
    its, conv, gn, loss = (a.cpu().numpy() for a in (out["iterations"], converged, grad_norm, mse))
    results = []
    for t, u in enumerate(batch.sizes):
        info = {
            "iterations": int(its[t]),
            "converged": bool(conv[t]),
            "loss": float(loss[t]),
            "grad_norm": float(gn[t]),
        }
        results.append((value[t, :u].copy(), imp[t, :u].copy(), info))
    return results


def fit_gradient(
    idx: np.ndarray,
    mask: np.ndarray,
    y: np.ndarray,
    n_units: int,
    *,
    init: tuple[np.ndarray, np.ndarray] | None = None,
    solver: str = SOLVER,
    max_iter: int = MAX_ITER,
    tol: float = FIT_TOL,
    learning_rate: float = LEARNING_RATE,
    l2_importance: float = RIDGE_WEIGHT,
    l2_value: float = RIDGE_WEIGHT,
    prior_sd: float | None = None,
    objective: str | None = None,
    weights: np.ndarray | None = None,
    device: torch.device | str | None = None,
) -> tuple[np.ndarray, np.ndarray, dict]:
    """Minimise the MSE between SLALOM and the targets by gradient descent (in torch).

    Args:
        idx, mask: samples from :func:`pad_sequences`.
        y: (B, K) targets (log-odds, or centred logits for K > 1), measured from the
            explanation's reference point.
        init: starting (value, importance); default: the mean target of the samples
            containing each unit, s = 0.
        solver: "lbfgs" (bounded quasi-Newton; converges in tens of steps) or "adam" (the
            paper's Algorithm 1 with full batches).
        max_iter: maximum number of gradient steps.
        tol: stop when the relative loss improvement falls below this.
        l2_importance: weight of a ridge penalty ``l2 · mean(s²)`` that keeps weakly
            identified importances from drifting (0 disables it).
        l2_value: the same for values, ``l2 · mean(v²) / var(y)``.
        prior_sd: the sd of a Gaussian prior s ~ N(0, prior_sd²), for the posterior
            objective (None for the ridge one).
        objective: which objective to minimise, and so how it is solved (see
            :func:`~.objective.make_objective`):
            "ridge": the relative MSE plus the two ridges, solved unscaled, stopped by the
            gradient or the decrease ``tol``;
            "posterior": the ridges are replaced by the prior on s, with the noise variance
            profiled out: ``log(MSE) + Σ s² / (n · prior_sd²)`` (n samples), the negative
            log posterior up to constants. Its pull on s grows with the residual noise and
            fades with more samples, so noisy fits are shrunk and exact data is still fitted
            exactly. Values get a weak prior N(0, (10·sd(y))²) (:data:`VALUE_PRIOR_SD`)
            instead of ``l2_value``. L-BFGS then steps on variables rescaled by the
            objective's curvature, and a fit also stops (converged) at a relative MSE of
            :data:`EXACT_FIT`.
            None (default): "posterior" where ``prior_sd`` is given, else "ridge".
        weights: (B,) non-negative sample weights (default: all one); rescaled to mean one.
        device: where to fit (default: the CPU); always in float64.

    Returns:
        value (U, K), importance (U,), and a dict with "iterations", "converged", "loss"
        and "grad_norm" (largest projected gradient entry of the objective at the end).

    Example:
        >>> idx, mask = pad_sequences([np.array([0]), np.array([1]), np.array([0, 1])])
        >>> v, s, info = fit_gradient(idx, mask, np.array([[1.0], [-1.0], [0.0]]), 2)
        >>> np.round(v[:, 0], 2).tolist(), info["converged"]
        ([1.0, -1.0], True)
    """
    return fit_gradient_batch(
        [(idx, mask, y, n_units)],
        inits=[init],
        weights=[weights],
        solver=solver,
        max_iter=max_iter,
        tol=tol,
        learning_rate=learning_rate,
        l2_importance=l2_importance,
        l2_value=l2_value,
        prior_sd=prior_sd,
        objective=objective,
        device=device,
    )[0]
