"""Laplace standard errors of a fitted surrogate's values and importances."""

from __future__ import annotations

import numpy as np
import torch

from ..surrogate import dense_slots, surrogate_forward
from .constants import FIT_DTYPE
from .objective import effective_samples


def laplace_standard_errors(
    counts: np.ndarray,
    y: np.ndarray,
    value: np.ndarray,
    importance: np.ndarray,
    *,
    prior_sd: float | None = None,
    weights: np.ndarray | None = None,
    value_sd: float | None = None,
    importance_basis: np.ndarray | None = None,
    device: torch.device | str | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Standard errors of the fitted values (U, K) and mean-zero importances (U,).

    A Laplace approximation of the posterior at the fit: Gauss–Newton curvature
    JᵀWJ / σ² of the squared error, with σ² the (weighted) residual variance, plus the prior
    precision 1 / prior_sd² on each importance. The covariance is taken in the subspace the
    reported parameters live in (importances summing to zero; for K > 1 classes, values
    summing to zero over classes), where the softmax's shift-invariance leaves no free
    direction. An SE close to ``prior_sd`` means the data did not determine that
    importance; with no prior an undetermined direction gives an infinite SE. Linear
    algebra in torch (float64), on ``device`` (default: the CPU).

    Args:
        counts: (B, U) occurrence counts of the fitted samples; y: (B, K) targets.
        value, importance: the fit.
        prior_sd: the prior's standard deviation of s (None: no prior).
        weights: the fit's sample weights (mean one).
        value_sd: the sd of a Gaussian prior on the values that the fit used (None: none;
            0: the values were held fixed, so they have no error and the importances' SEs
            are those given the values).
        importance_basis: the (U,) direction along which the fit's prior on the importances
            was flat (see :class:`~.objective.PosteriorObjective`); None: none.
        device: where to compute.

    Example:
        >>> c = np.array([[1, 0], [0, 1], [1, 1], [1, 1]], dtype=float)
        >>> y = np.array([[1.0], [-1.0], [0.1], [-0.1]])
        >>> se_v, se_s = laplace_standard_errors(c, y, np.array([[1.0], [-1.0]]), np.zeros(2))
        >>> bool(se_s[0] > 0 and np.isclose(se_s[0], se_s[1]))
        True
    """
    dev = torch.device(device) if device is not None else torch.device("cpu")
    c, yt, v, s = (_tensor(x, dev) for x in (counts, y, value, importance))
    n_samples, n_units = c.shape
    n_out = v.shape[1]
    f, a = surrogate_forward(v, s, *dense_slots(c))  # (B, K), (B, U)
    wts = (
        torch.ones(n_samples, dtype=FIT_DTYPE, device=dev)
        if weights is None
        else _tensor(weights, dev) / float(np.mean(weights))
    )
    sigma2 = float((wts[:, None] * (f - yt) ** 2).sum()) / yt.numel()
    if sigma2 <= 1e-300:
        # Exact data: the likelihood is a spike; report zeros rather than 0/0.
        return np.zeros_like(np.asarray(value, dtype=np.float64)), np.zeros(n_units)
    n_val = n_units * n_out
    prec = _likelihood_precision(a, v, f, wts, None if weights is None else wts.cpu().numpy(), sigma2)
    _add_prior_precision(prec, n_val, prior_sd, importance_basis, value_sd)
    cons_m = _constraints(n_units, n_out, dev)
    held = value_sd == 0
    if held:
        # Values held fixed by the fit: they have no error, and the importances' SEs are
        # those given the values (the importance block and its mean-zero constraint alone).
        prec, cons_m = prec[n_val:, n_val:], cons_m[n_val:, :1]
    chol, not_pd = torch.linalg.cholesky_ex(prec)
    pivots = torch.diagonal(chol) ** 2
    if prior_sd is not None and not bool(not_pd) and float(pivots.min()) > 1e-10 * float(pivots.max()):
        var = _variance_by_cholesky(chol, cons_m)
    else:
        var = _variance_by_eigen(prec, cons_m)
    se = torch.sqrt(var.clamp_min(0.0)).cpu().numpy()
    if held:
        return np.zeros((n_units, n_out)), se
    return se[:n_val].reshape(n_units, n_out), se[n_val:]


def _tensor(a: np.ndarray, dev: torch.device) -> torch.Tensor:
    return torch.as_tensor(np.asarray(a, dtype=np.float64), device=dev)


def _likelihood_precision(
    a: torch.Tensor, v: torch.Tensor, f: torch.Tensor, wts: torch.Tensor, weights: np.ndarray | None, sigma2: float
) -> torch.Tensor:
    """The Gauss–Newton precision JᵀWJ · n_eff / (n σ²) of the squared error over (values, importances)."""
    n_samples, n_units = a.shape
    n_out = v.shape[1]
    n_val = n_units * n_out
    n_par = n_val + n_units
    # Jacobian rows per (sample, class): dF_bk/dv_uk = a_bu, dF_bk/ds_u = a_bu (v_uk − F_bk).
    eye_k = torch.eye(n_out, dtype=FIT_DTYPE, device=a.device)
    jac_v = (a[:, None, :, None] * eye_k[None, :, None, :]).reshape(n_samples, n_out, n_val)
    jac_s = a[:, None, :] * (v.T[None, :, :] - f[:, :, None])
    jac = torch.cat([jac_v, jac_s], dim=2).reshape(n_samples * n_out, n_par)
    rw = wts.repeat_interleave(n_out)
    # Weights share the evidence out; they do not multiply it: the data carry the information
    # of n_eff (Kish) samples, not of n (see objective.effective_samples).
    n_eff = effective_samples(weights, n_samples)
    return (jac * rw[:, None]).T @ jac * (n_eff / n_samples / sigma2)


def _add_prior_precision(
    prec: torch.Tensor,
    n_val: int,
    prior_sd: float | None,
    importance_basis: np.ndarray | None,
    value_sd: float | None,
) -> None:
    """Adds the priors' precisions to ``prec`` in place: on the importances (none along the
    fitted slope's direction), and on the values where the fit had a prior on them."""
    dev = prec.device
    n_units = prec.shape[0] - n_val
    if prior_sd is not None:
        prior = torch.eye(n_units, dtype=FIT_DTYPE, device=dev)
        if importance_basis is not None:
            h = _tensor(importance_basis, dev)
            h = h - h.mean()
            if float(h.norm()) > 1e-12:
                h = h / h.norm()
                prior = prior - torch.outer(h, h)  # no prior precision along the fitted slope
        prec[n_val:, n_val:] += prior / prior_sd**2
    if value_sd:
        prec[:n_val, :n_val] += torch.eye(n_val, dtype=FIT_DTYPE, device=dev) / value_sd**2


def _constraints(n_units: int, n_out: int, dev: torch.device) -> torch.Tensor:
    """C (P, #constraints): the reported parameters satisfy Cᵀθ = 0 (mean-zero s; class-centred v)."""
    n_val = n_units * n_out
    zeros = torch.zeros(n_val + n_units, 1, dtype=FIT_DTYPE, device=dev)
    cons = [torch.cat([zeros[:n_val], torch.ones_like(zeros[n_val:])])]
    if n_out > 1:
        per_unit = torch.kron(torch.eye(n_units, dtype=FIT_DTYPE, device=dev), torch.ones_like(zeros[:n_out]))
        cons.append(torch.cat([per_unit, torch.zeros_like(per_unit[:n_units])]))
    return torch.cat(cons, dim=1)


def _variance_by_cholesky(chol: torch.Tensor, cons_m: torch.Tensor) -> torch.Tensor:
    """The variances where prec is well posed (a prior, and every unit seen).

    The covariance in the subspace is that of the Gaussian conditioned on Cᵀθ = 0,
    Σ − ΣC (CᵀΣC)⁻¹ CᵀΣ with Σ = prec⁻¹; a Cholesky factor gives it 5x faster than the
    eigendecomposition of :func:`_variance_by_eigen`. Without a prior, the softmax's shift
    is a null direction of prec: that path handles it.
    """
    cov = torch.cholesky_inverse(chol)
    cov_c = cov @ cons_m
    return torch.diagonal(cov) - (cov_c * torch.linalg.solve(cons_m.T @ cov_c, cov_c.T).T).sum(dim=1)


def _variance_by_eigen(prec: torch.Tensor, cons_m: torch.Tensor) -> torch.Tensor:
    """The variances where some direction may be undetermined: prec eigen-decomposed in an
    orthonormal basis of the subspace Cᵀθ = 0; an undetermined direction's variance is inf."""
    q, _ = torch.linalg.qr(cons_m, mode="complete")
    basis = q[:, cons_m.shape[1] :]  # (P, P - #constraints)
    reduced = basis.T @ prec @ basis
    evals, evecs = torch.linalg.eigh((reduced + reduced.T) / 2)
    floor = float(evals.max()) * 1e-12 if evals.numel() else 0.0
    ok = evals > floor
    inv = torch.where(ok, 1.0 / torch.where(ok, evals, torch.ones_like(evals)), torch.zeros_like(evals))
    # Diagonal of basis · V diag(1/λ) Vᵀ · basisᵀ without forming the full covariance; an
    # undetermined direction (0 · inf) makes every parameter it touches infinitely uncertain.
    sq = (basis @ evecs) ** 2  # (P, r)
    var = (sq * inv).sum(dim=1)
    return torch.where(((sq > 0) & ~ok).any(dim=1), torch.full_like(var, float("inf")), var)
