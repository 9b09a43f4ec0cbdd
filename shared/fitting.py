"""The three ways of fitting a local SLALOM (Sec. 5.2-5.3, App. D, Prop. 5.2), in torch.

Each fitter is a small state machine written as a generator: it *yields* the samples (lists
of unit-index sequences) it wants the model to score, receives the fitting targets back via
``send``, and finally *returns* a :class:`FitResult`. That keeps fitters free of any model
code, and lets :func:`slalom_core.explain_batch` run the fitters of many texts in lock-step
so that their model calls share batches. The sampled fitters' :meth:`~Fitter.steps` also
yield their fits as :class:`FitRequest` objects, so that the driver can solve the fits of
all texts in one batched optimisation (:meth:`_SampledFitter.solve_batch`) on the model's
device; :meth:`~Fitter.run` solves them inline, one text at a time.

- ``eff``  (:class:`EffFitter`):   short random sequences, gradient descent on the MSE.
- ``fidel`` (:class:`FidelFitter`): deletions from the full text, quasi-Newton on the
  posterior (default) or alternating least squares.
- ``ana``  (:class:`AnaFitter`):   2U-1 evaluations, closed form; exact on a true SLALOM.

All fits run in float64, on the CPU and on CUDA alike: the stopping rules (an exact fit at
a relative residual of 1e-10, a gradient of 1e-4 on an objective that divides by the
residual) are below what float32 resolves, and the fits are small enough that their cost on
a GPU is kernel launches, not arithmetic, so float32 would buy little speed.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field, replace

import numpy as np
import torch

from .options import Interval, IntPair, OneOf, check_option_names, check_options
from .sampling import balanced_sequences, deletion_neighbourhood, short_sequences, split_holdout
from .surrogate import counts_from_sequences, dense_slots, normalise_importance, surrogate_forward

__all__ = [
    "FitResult",
    "FitRequest",
    "Fitter",
    "EffFitter",
    "FidelFitter",
    "AnaFitter",
    "FITTERS",
    "get_fitter",
    "fit_gradient",
    "fit_gradient_batch",
    "fit_als",
    "pad_sequences",
    "laplace_standard_errors",
    "GRAD_TOL",
    "FIT_DTYPE",
]

#: |s| never exceeds this in gradient fits: exp(±15) already spans 13 orders of magnitude.
IMPORTANCE_BOUND = 15.0
#: Standard deviation of the weak prior on values, in units of the targets' sd.
VALUE_PRIOR_SD = 10.0
#: A fit whose squared error is below this share of the targets' variance is exact.
EXACT_FIT = 1e-10
#: A gradient fit whose largest (scaled) gradient entry is below this has converged.
GRAD_TOL = 1e-4
#: The dtype of every fit, on every device (see the module docstring for why).
FIT_DTYPE = torch.float64
#: L-BFGS: stored curvature pairs, and the projected-gradient stop of the scaled objective.
LBFGS_MEMORY = 10
LBFGS_GTOL = 1e-6
#: ``prior_sd="evidence"``: the start, the range and the most re-fits of the prior's sd.
EVIDENCE_START, EVIDENCE_RANGE, EVIDENCE_ROUNDS = 0.25, (0.01, 10.0), 8
# ALS's default relative-improvement stop (fidel with solver="als").
_ALS_TOL = 1e-6

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


@dataclass
class FitRequest:
    """One text's fit, as yielded by :meth:`Fitter.steps`: samples (unit-index sequences),
    their (B, K) targets, the number of units, an optional warm start (value, importance),
    optional (B,) sample weights and the importances' prior sd for this fit (None: the
    fitter's). The driver sends back ``(value, importance, info)``."""

    samples: list[np.ndarray]
    y: np.ndarray
    n_units: int
    init: tuple[np.ndarray, np.ndarray] | None = None
    weights: np.ndarray | None = None
    prior_sd: float | None = None


# ----------------------------------------------------------------------------------------
# Sample representations
# ----------------------------------------------------------------------------------------
def pad_sequences(sequences: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(B, L) unit-index matrix (padding index 0) and a 0/1 mask of real slots.

    A sparse view of the count matrix: each slot is one occurrence, so repeated units
    count as often as they occur, and the cost of a gradient is B·L, not B·U.

    Example:
        >>> idx, mask = pad_sequences([np.array([2]), np.array([0, 1])])
        >>> idx.tolist(), mask.tolist()
        ([[2, 0], [0, 1]], [[1.0, 0.0], [1.0, 1.0]])
    """
    lengths = np.fromiter((len(s) for s in sequences), dtype=np.int64, count=len(sequences))
    width = max(int(lengths.max()) if len(lengths) else 0, 1)
    mask_bool = np.arange(width)[None, :] < lengths[:, None]
    idx = np.zeros((len(sequences), width), dtype=np.int64)
    if len(sequences):
        # One scatter of all slots at once, row-major like the mask.
        idx[mask_bool] = np.concatenate(sequences)
    return idx, mask_bool.astype(np.float64)


def count_matrix(sequences: list[np.ndarray], n_units: int) -> np.ndarray:
    """Dense (B, U) occurrence counts (see :func:`~slalom_core.surrogate.counts_from_sequences`)."""
    return counts_from_sequences(sequences, n_units)


def _predict_sparse(
    idx: np.ndarray, mask: np.ndarray, value: np.ndarray, importance: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Surrogate outputs (B, K) and the per-slot attention weights (B, L), in numpy."""
    pred, alpha = surrogate_forward(
        torch.from_numpy(np.asarray(value, dtype=np.float64)),
        torch.from_numpy(np.asarray(importance, dtype=np.float64)),
        torch.from_numpy(idx),
        torch.from_numpy(mask),
    )
    return pred.numpy(), alpha.numpy()


# ----------------------------------------------------------------------------------------
# Batched gradient fits
# ----------------------------------------------------------------------------------------
@dataclass
class _Batch:
    """T fitting problems padded to common sizes, on one device.

    Padding keeps every per-text quantity exact: padded slots have multiplicity 0, padded
    samples weight 0 and target 0, padded units appear in no slot and stay at v = s = 0
    (their gradient and prior terms vanish there). Every sum that defines one text's
    objective runs over that text's entries only.
    """

    idx: torch.Tensor  # (T, B, L) int64
    mult: torch.Tensor  # (T, B, L) slot multiplicity (0 = padding)
    y: torch.Tensor  # (T, B, K)
    w: torch.Tensor  # (T, B) sample weights, mean one over real samples, 0 for padding
    n_rows: torch.Tensor  # (T,) real samples
    n_units: torch.Tensor  # (T,) real units
    unit_mask: torch.Tensor  # (T, U) 1 for real units
    sizes: list[int]  # real units per text (host copy)

    @property
    def shape(self) -> tuple[int, int, int]:
        return self.idx.shape[0], self.unit_mask.shape[1], self.y.shape[2]


def _pack(
    problems: list[tuple[np.ndarray, np.ndarray, np.ndarray, int, np.ndarray | None]],
    device: torch.device,
    dtype: torch.dtype,
) -> _Batch:
    """Pad (idx, mask, y, n_units, weights) problems into one :class:`_Batch` on ``device``.

    Assembled in numpy and moved with one copy per tensor: per-problem transfers would cost
    more than the fit on a GPU.
    """
    n_t = len(problems)
    b_max = max(p[0].shape[0] for p in problems)
    l_max = max(p[0].shape[1] for p in problems)
    u_max = max(max(p[3] for p in problems), 1)
    n_out = problems[0][2].shape[1]
    idx = np.zeros((n_t, b_max, l_max), dtype=np.int64)
    mult = np.zeros((n_t, b_max, l_max))
    y = np.zeros((n_t, b_max, n_out))
    w = np.zeros((n_t, b_max))
    for t, (i, m, yy, _u, wt) in enumerate(problems):
        b, l_ = i.shape
        idx[t, :b, :l_], mult[t, :b, :l_], y[t, :b] = i, m, yy
        w[t, :b] = 1.0 if wt is None else np.asarray(wt, dtype=np.float64) / np.mean(wt)
    sizes = [int(p[3]) for p in problems]
    unit_mask = (np.arange(u_max)[None, :] < np.array(sizes)[:, None]).astype(np.float64)

    def dev(a: np.ndarray, dt: torch.dtype = dtype) -> torch.Tensor:
        return torch.from_numpy(a).to(device=device, dtype=dt)

    return _Batch(
        dev(idx, torch.int64),
        dev(mult),
        dev(y),
        dev(w),
        dev(np.array([p[0].shape[0] for p in problems], dtype=np.float64)),
        dev(np.array(sizes, dtype=np.float64)),
        dev(unit_mask),
        sizes,
    )


def _mse_and_grads(
    batch: _Batch, value: torch.Tensor, importance: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Weighted MSE per text (T,) and its gradients w.r.t. value (T, U, K) and importance (T, U).

    With α the attention weights of a sample, dF_k/dv_uk = Σ_slots(u) α and
    dF_k/ds_u = Σ_slots(u) α (v_uk − F_k) (Eq. 5 of the paper, at λ = 1). Written by hand
    (and checked against autograd in the tests): a backward pass through autograd records
    and replays the graph at every step, which costs more than the arithmetic on a fit this
    small.
    """
    n_t, n_units, n_out = value.shape
    pred, alpha = surrogate_forward(value, importance, batch.idx, batch.mult)
    resid = pred - batch.y
    resid_w = resid * batch.w[..., None]
    denom = (batch.n_rows * n_out)[:, None, None]
    mse = (resid_w * resid).sum(dim=(1, 2)) / denom[:, 0, 0]
    g = 2.0 * resid_w / denom  # dMSE/dF, (T, B, K)
    flat = batch.idx.flatten(1)  # (T, B·L)
    flat_k = flat.unsqueeze(-1).expand(-1, -1, n_out)
    grad_v = torch.zeros_like(value).scatter_add_(
        1, flat_k, (alpha.unsqueeze(-1) * g.unsqueeze(2)).reshape(n_t, -1, n_out)
    )
    v_slot = torch.gather(value, 1, flat_k).view(*batch.idx.shape, n_out)
    # Σ_k g_bk (v_uk − F_bk) for every slot
    slot = (v_slot * g.unsqueeze(2)).sum(dim=-1) - (g * pred).sum(dim=-1, keepdim=True)
    grad_s = torch.zeros_like(importance).scatter_add_(1, flat, (alpha * slot).reshape(n_t, -1))
    return mse, grad_v, grad_s


def _initial_values(batch: _Batch) -> torch.Tensor:
    """Start each value at the mean target of the samples that contain the unit.

    Algorithm 1 starts at zero; this start is closer to the optimum (exact for a text of
    one unique token) and lets the descent converge in far fewer steps. Units seen in no
    sample start at the mean target; padded units at zero.
    """
    n_t, n_units, n_out = batch.shape
    flat = batch.idx.flatten(1)
    m = batch.mult.flatten(1)
    hits = torch.zeros(n_t, n_units, dtype=m.dtype, device=m.device).scatter_add_(1, flat, m)
    per_slot = (batch.mult.unsqueeze(-1) * batch.y.unsqueeze(2)).reshape(n_t, -1, n_out)
    sums = torch.zeros(n_t, n_units, n_out, dtype=m.dtype, device=m.device).scatter_add_(
        1, flat.unsqueeze(-1).expand(-1, -1, n_out), per_slot
    )
    mean_y = batch.y.sum(dim=1) / batch.n_rows[:, None]  # (T, K)
    init = torch.where(hits[..., None] > 0, sums / hits.clamp_min(1.0)[..., None], mean_y[:, None, :])
    if n_out > 1:
        init = init - init.mean(dim=-1, keepdim=True)
    return init * batch.unit_mask[..., None]


class _Objective:
    """The gradient fits' objective per text, on a flat (T, P) parameter matrix.

    The first U·K entries of a row are the values, the last U the importances. The MSE is
    taken in units of the targets' variance (1 − R² on the samples), so that a tolerance
    means the same for models with large or small log-odds.
    """

    def __init__(self, batch: _Batch, *, l2_importance: float, l2_value: float, prior_sd: float | None) -> None:
        self.batch = batch
        n_t, n_units, n_out = batch.shape
        self.n_val = n_units * n_out
        self.centre = n_out > 1  # App. C.1: values sum to zero over classes
        real = batch.w > 0  # (T, B)
        n_el = batch.n_rows * n_out
        y_mean = batch.y.sum(dim=(1, 2)) / n_el
        var = ((batch.y - y_mean[:, None, None]) ** 2 * real[..., None]).sum(dim=(1, 2)) / n_el
        self.scale = 1.0 / var.clamp_min(1e-12)
        # The values' prior is on the scale of the targets' size around the reference (their
        # second moment, not their variance: a text of one token has constant targets).
        size_v = 1.0 / ((batch.y**2).sum(dim=(1, 2)) / n_el).clamp_min(1e-12)
        self.prior_sd = prior_sd
        if prior_sd is not None:
            sd = torch.as_tensor(prior_sd, dtype=batch.y.dtype, device=batch.y.device)  # one, or one per text
            self.prior = 1.0 / (batch.n_rows * sd**2)
            self.prior_v = size_v / (batch.n_rows * VALUE_PRIOR_SD**2)
        self.l2_importance = l2_importance
        self.l2_value = l2_value

    def curvature(self, theta: torch.Tensor) -> torch.Tensor:
        """The diagonal of the objective's Gauss–Newton Hessian at ``theta`` (T, P).

        Values and importances differ in curvature by orders of magnitude (an importance
        next to a near-neutral partner barely moves F): quasi-Newton steps on variables
        rescaled by the root of this diagonal need far fewer iterations. Repeated units in
        one sample are treated as independent slots (a preconditioner need not be exact).
        Defined for the prior's objective, the only one that is preconditioned.
        """
        batch = self.batch
        n_t, n_units, n_out = batch.shape
        value, imp = self.unpack(theta)
        pred, alpha = surrogate_forward(value, imp, batch.idx, batch.mult)
        flat = batch.idx.flatten(1)
        # dF_bk/dv_uk = α, dF_bk/ds_u = α (v_uk − F_bk), per slot; squared and summed per unit.
        a2 = alpha * alpha * (2.0 * batch.w / (batch.n_rows * n_out)[:, None]).unsqueeze(-1)
        v_slot = torch.gather(value, 1, flat.unsqueeze(-1).expand(-1, -1, n_out)).view(*batch.idx.shape, n_out)
        spread = ((v_slot - pred.unsqueeze(2)) ** 2).sum(dim=-1)
        d_v = torch.zeros_like(imp).scatter_add_(1, flat, a2.flatten(1))  # the same for every class
        d_s = torch.zeros_like(imp).scatter_add_(1, flat, (a2 * spread).flatten(1))
        data, p_v, p_s = self.scale / (self(theta)[2] + 1e-12), self.prior_v, self.prior
        d_v = d_v.unsqueeze(-1).expand(-1, -1, n_out).flatten(1) * data[:, None] + 2.0 * p_v[:, None]
        d_s = d_s * data[:, None] + 2.0 * p_s[:, None]
        d = torch.cat([d_v, d_s], dim=1)
        return torch.where(d > 0, d, torch.ones_like(d))

    def unpack(self, theta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        n_t, n_units, n_out = self.batch.shape
        value = theta[:, : self.n_val].view(n_t, n_units, n_out)
        if self.centre:
            value = value - value.mean(dim=-1, keepdim=True)
        return value, theta[:, self.n_val :]

    def __call__(self, theta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(objective (T,), gradient (T, P), relative MSE (T,))."""
        value, imp = self.unpack(theta)
        mse, gv, gs = _mse_and_grads(self.batch, value, imp)
        sc = self.scale
        rel = mse * sc
        if self.centre:
            gv = gv - gv.mean(dim=-1, keepdim=True)
        vv = (value * value).sum(dim=(1, 2))
        ss = (imp * imp).sum(dim=1)
        if self.prior_sd is None:
            # A weak ridge on values (in units of the targets' variance): a unit whose
            # weight is tiny next to its partners barely moves F, so its value would wander.
            # A ridge on s: with few samples a unit seen only beside one partner can trade
            # an ever larger importance against its value without changing the fit; the
            # ridge picks the smallest such s instead of letting it run off.
            n_v = self.batch.n_units * value.shape[-1]
            obj = rel + self.l2_value * sc * vv / n_v + self.l2_importance * ss / self.batch.n_units
            gv = gv * sc[:, None, None] + (2.0 * self.l2_value * sc / n_v)[:, None, None] * value
            gs = gs * sc[:, None] + (2.0 * self.l2_importance / self.batch.n_units)[:, None] * imp
        else:
            # Negative log posterior per n/2 samples, noise variance profiled out:
            # d log(L) = dL/L. The floor keeps exact fits finite. Priors sit outside the
            # log, so that exact data is still fitted exactly: s ~ N(0, prior_sd²), and the
            # values a weak N(0, (VALUE_PRIOR_SD · sd(y))²) for the same reason as the ridge.
            floor = rel + 1e-12
            obj = torch.log(floor) + self.prior * ss + self.prior_v * vv
            gv = gv * (sc / floor)[:, None, None] + (2.0 * self.prior_v)[:, None, None] * value
            gs = gs * (sc / floor)[:, None] + (2.0 * self.prior)[:, None] * imp
        return obj, torch.cat([gv.flatten(1), gs], dim=1), rel


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


def _lbfgs(
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

    Returns a dict with the final ``x``, ``f``, ``g``, ``rel`` and per row ``iterations``
    and ``success`` (a gradient or decrease stop).
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
    vdot = torch.linalg.vecdot
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
        d = -_lbfgs_direction(pg, s_mem, y_mem, valid, gamma) * free
        # A direction that does not descend (stale curvature after a bound became active)
        # is replaced by scaled steepest descent, and that row's memory is cleared.
        bad = vdot(g, d) >= 0
        d = torch.where(bad.unsqueeze(1), -pg * gamma.unsqueeze(1), d)
        valid = valid & ~bad.unsqueeze(1)
        keep_mem = (~bad).to(x.dtype)[:, None, None]
        s_mem, y_mem = s_mem * keep_mem, y_mem * keep_mem
        # Projected backtracking (Armijo) line search, from the full quasi-Newton step.
        step = torch.ones(n_t, dtype=x.dtype, device=x.device)
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
        moved = active & ~pending
        active &= ~pending  # no decrease along a descent direction: stop (as L-BFGS-B does)
        s_k = x_new - x
        y_k = g_new - g
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
        decrease = (f - f_new) / torch.clamp_min(torch.maximum(f.abs(), f_new.abs()), 1.0)
        iterations += moved
        x, f, g, rel = x_new, f_new, g_new, rel_new
        small = moved & (decrease <= ftol)
        success |= small
        active &= ~small
    return {"x": x, "f": f, "g": g, "rel": rel, "iterations": iterations, "success": success}


def _adam(
    fun: Callable, x: torch.Tensor, lower: torch.Tensor, upper: torch.Tensor, *, lr: float, max_iter: int, tol: float
) -> dict:
    """Full-batch Adam for every row of ``x``; bounded entries are clipped after each step.

    Adam's loss is noisy step to step: a row stops when its loss improved by less than
    ``tol`` (relative) over a window of 50 steps.
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


def fit_gradient_batch(
    problems: list[tuple[np.ndarray, np.ndarray, np.ndarray, int]],
    *,
    inits: list[tuple[np.ndarray, np.ndarray] | None] | None = None,
    weights: list[np.ndarray | None] | None = None,
    solver: str = "lbfgs",
    max_iter: int = 500,
    tol: float = 1e-9,
    learning_rate: float = 0.05,
    l2_importance: float = 1e-3,
    l2_value: float = 1e-3,
    prior_sd: float | list[float] | None = None,
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
    if solver not in ("lbfgs", "adam"):
        raise ValueError(f"unknown solver {solver!r}; choose 'lbfgs' or 'adam'")
    if not problems:
        return []
    dev = torch.device(device) if device is not None else torch.device("cpu")
    batch = _pack(
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
    n_t, n_units, n_out = batch.shape
    objective = _Objective(batch, l2_importance=l2_importance, l2_value=l2_value, prior_sd=prior_sd)
    value0 = _initial_values(batch)
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
    theta0 = torch.cat([value0.flatten(1), imp0], dim=1)
    # Bounds keep exp(s) finite and the softmax meaningful (weights within e^±30).
    inf = torch.full((objective.n_val,), float("inf"), dtype=FIT_DTYPE, device=dev)
    bound = torch.full((n_units,), IMPORTANCE_BOUND, dtype=FIT_DTYPE, device=dev)
    lower, upper = torch.cat([-inf, -bound]), torch.cat([inf, bound])
    theta0 = torch.maximum(torch.minimum(theta0, upper), lower)  # a warm start may lie outside
    if solver == "lbfgs":
        # Quasi-Newton steps on variables rescaled by the root of the Hessian's diagonal:
        # measured on the packaged MiniLM, 40 % fewer iterations to a 2x more accurate optimum.
        # Only under the prior: without it a near-neutral unit's importance has almost no
        # curvature, and rescaled steps carry it onto the plateau s → −∞ where its weight
        # and gradient vanish, a worse optimum (global fits of Table 6: held-out MSE 0.113
        # instead of 0.087; tests/engine/test_torchfit.py).
        root = objective.curvature(theta0).sqrt() if prior_sd is not None else torch.ones_like(theta0)

        def scaled(z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
            f, g, rel = objective(z / root)
            return f, g / root, rel

        out = _lbfgs(
            scaled,
            theta0 * root,
            lower * root,
            upper * root,
            max_iter=max_iter,
            ftol=tol,
            exact_stop=prior_sd is not None,
        )
        out["x"], out["g"] = out["x"] / root, out["g"] * root
    else:
        out = _adam(objective, theta0, lower, upper, lr=learning_rate, max_iter=max_iter, tol=tol)
    theta, grad = out["x"], out["g"]
    # Judge convergence by the gradient too: a line search that cannot make progress at a
    # stationary point is an optimum found, while running out of iterations away from one
    # is not. A bounded importance whose gradient points outwards is not counted.
    free = ~(((theta <= lower) & (grad > 0)) | ((theta >= upper) & (grad < 0)))
    grad_norm = (grad * free).abs().amax(dim=1)
    value, imp = objective.unpack(theta)
    mse, _, _ = _mse_and_grads(batch, value, imp)  # report the plain MSE, whatever the objective
    exact = out["rel"] <= EXACT_FIT if prior_sd is not None else torch.zeros_like(out["success"])
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
    solver: str = "lbfgs",
    max_iter: int = 500,
    tol: float = 1e-9,
    learning_rate: float = 0.05,
    l2_importance: float = 1e-3,
    l2_value: float = 1e-3,
    prior_sd: float | None = None,
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
        prior_sd: if given, replaces both ridges by a Gaussian prior s ~ N(0, prior_sd²)
            with the noise variance profiled out: the objective becomes
            ``log(MSE) + Σ s² / (n · prior_sd²)`` (n samples), the negative log posterior
            up to constants. Its pull on s grows with the residual noise and fades with
            more samples, so noisy fits are shrunk and exact data is still fitted exactly.
            Values get a weak prior N(0, (10·sd(y))²) (:data:`VALUE_PRIOR_SD`) instead of
            ``l2_value``.
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
        device=device,
    )[0]


def fit_als(
    counts: np.ndarray,
    y: np.ndarray,
    *,
    init_importance: np.ndarray | None = None,
    max_iter: int = 200,
    tol: float = 1e-9,
    ridge: float = 1e-8,
    irls_steps: int = 3,
    device: torch.device | str | None = None,
) -> tuple[np.ndarray, np.ndarray, dict]:
    """Fit SLALOM by alternating least squares (DESIGN.md sec. 3, "SLALOM-fidel"), in torch.

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
    n_samples, n_units = c.shape
    n_out = yt.shape[1]
    slots = dense_slots(c)
    eye = torch.eye(n_units, dtype=FIT_DTYPE, device=dev)
    imp = (
        torch.zeros(n_units, dtype=FIT_DTYPE, device=dev)
        if init_importance is None
        else torch.as_tensor(np.asarray(init_importance, dtype=np.float64), device=dev).clone()
    )

    def attention(s: torch.Tensor) -> torch.Tensor:
        return surrogate_forward(None, s, *slots)[1]

    def solve_values(s: torch.Tensor) -> tuple[torch.Tensor, float]:
        """The least-squares values for fixed s, and the MSE they reach."""
        a = attention(s)
        gram = a.T @ a
        lam = ridge * max(float(torch.trace(gram)) / n_units, 1e-12)
        value = torch.linalg.solve(gram + lam * eye, a.T @ yt)
        return value, float(((a @ value - yt) ** 2).mean())

    def grad_s(value: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        """Gradient of the MSE w.r.t. s for fixed v (unscaled)."""
        a = attention(s)
        f = a @ value
        r = f - yt
        # dF_bk/ds_u = a_bu (v_uk − F_bk)
        return (a * (r @ value.T)).sum(dim=0) - a.T @ (r * f).sum(dim=1)

    def backtrack(s: torch.Tensor, direction: torch.Tensor, loss: float):
        """First step 1, 1/2, 1/4 … along ``direction`` whose reduced MSE is not larger."""
        step = 1.0
        for _ in range(30):
            cand = s + step * direction
            cand_value, cand_loss = solve_values(cand)
            if cand_loss <= loss:
                return True, step, cand, cand_value, cand_loss
            step *= 0.5
        return False, 0.0, s, None, loss

    value, loss = solve_values(imp)
    converged = False
    it = 0
    for it in range(1, max_iter + 1):  # noqa: B007  (the count is reported after the loop)
        # s-step: residual r_bk = Σ_u M_(bk),u w_u with M = c_bu (v_uk − y_bk) / D_b. The
        # denominators D_b depend on w themselves, so the linear solve is repeated a few
        # times with D_b from the latest w (IRLS); one pass alone stalls short of the optimum.
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
        direction = torch.log(w_new) - torch.log(w_old)
        # Line search along the s-step on the *reduced* objective (v re-solved for each
        # candidate s): backtrack until the MSE does not increase, and when the full step
        # already helps, try longer ones too. Plain alternation crawls along the valley
        # where v and s trade off (measured: 3x more iterations with v held fixed).
        improved, step, cand, cand_value, cand_loss = backtrack(imp, direction, loss)
        if not improved:
            # The IRLS step is not guaranteed to descend; steepest descent on s is.
            grad = grad_s(value, imp)
            improved, step, cand, cand_value, cand_loss = backtrack(
                imp, -grad / max(float(grad.abs().max()), 1e-300), loss
            )
            direction = cand - imp if improved else direction
            step = 1.0
        if not improved:
            # No step along the gradient helps: an optimum only if the gradient is ~0
            # (relative to the loss); otherwise the fit stalled and says so.
            converged = bool(float(grad_s(value, imp).abs().max()) <= GRAD_TOL * max(loss, 1e-300))
            break
        while 1.0 <= step < 64.0:
            longer = imp + 2.0 * step * direction
            l_value, l_loss = solve_values(longer)
            if l_loss >= cand_loss:
                break
            step, cand, cand_value, cand_loss = 2.0 * step, longer, l_value, l_loss
        rel = (loss - cand_loss) / max(loss, 1e-300)
        imp, value, loss = cand, cand_value, cand_loss
        if rel < tol:
            converged = True
            break
    imp = imp - imp.mean()
    return value.cpu().numpy(), imp.cpu().numpy(), {"iterations": it, "converged": converged, "loss": loss}


@contextlib.contextmanager
def single_threaded_fits() -> Iterator[None]:
    """Run the fits on one CPU thread (torch's intra-op pool), without autograd bookkeeping.

    The fits are small (U ≤ a few hundred): a multi-threaded pool spends more time waking
    threads than computing — measured 30x slower for a 150x150 solve on 2 cores, and 12x
    slower for the standard errors of a 110-unit text (0.22 s against 0.018 s), far worse
    when another process keeps the cores busy. Inference mode skips the version counters
    and view tracking every torch operation otherwise pays for (a fifth of an L-BFGS step
    on one text). torch's thread count is global to the process; it is restored on exit.

    Example:
        >>> with single_threaded_fits():
        ...     torch.get_num_threads()
        1
    """
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with torch.inference_mode():
            yield
    finally:
        torch.set_num_threads(before)


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
        device: where to compute.

    Example:
        >>> c = np.array([[1, 0], [0, 1], [1, 1], [1, 1]], dtype=float)
        >>> y = np.array([[1.0], [-1.0], [0.1], [-0.1]])
        >>> se_v, se_s = laplace_standard_errors(c, y, np.array([[1.0], [-1.0]]), np.zeros(2))
        >>> bool(se_s[0] > 0 and np.isclose(se_s[0], se_s[1]))
        True
    """
    dev = torch.device(device) if device is not None else torch.device("cpu")

    def tens(a: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(np.asarray(a, dtype=np.float64), device=dev)

    c, yt, v, s = tens(counts), tens(y), tens(value), tens(importance)
    n_samples, n_units = c.shape
    n_out = v.shape[1]
    f, a = surrogate_forward(v, s, *dense_slots(c))  # (B, K), (B, U)
    wts = (
        torch.ones(n_samples, dtype=FIT_DTYPE, device=dev)
        if weights is None
        else tens(weights) / float(np.mean(weights))
    )
    sigma2 = float((wts[:, None] * (f - yt) ** 2).sum()) / yt.numel()
    if sigma2 <= 1e-300:
        # Exact data: the likelihood is a spike; report zeros rather than 0/0.
        return np.zeros_like(np.asarray(value, dtype=np.float64)), np.zeros(n_units)
    n_val = n_units * n_out
    n_par = n_val + n_units
    # Jacobian rows per (sample, class): dF_bk/dv_uk = a_bu, dF_bk/ds_u = a_bu (v_uk − F_bk).
    eye_k = torch.eye(n_out, dtype=FIT_DTYPE, device=dev)
    jac_v = (a[:, None, :, None] * eye_k[None, :, None, :]).reshape(n_samples, n_out, n_val)
    jac_s = a[:, None, :] * (v.T[None, :, :] - f[:, :, None])
    jac = torch.cat([jac_v, jac_s], dim=2).reshape(n_samples * n_out, n_par)
    rw = wts.repeat_interleave(n_out)
    prec = (jac * rw[:, None]).T @ jac / sigma2
    if prior_sd is not None:
        prec[n_val:, n_val:] += torch.eye(n_units, dtype=FIT_DTYPE, device=dev) / prior_sd**2
    # The reported parameters satisfy Cᵀθ = 0 (mean-zero s; class-centred v).
    zeros = torch.zeros(n_val + n_units, 1, dtype=FIT_DTYPE, device=dev)
    cons = [torch.cat([zeros[:n_val], torch.ones_like(zeros[n_val:])])]
    if n_out > 1:
        per_unit = torch.kron(torch.eye(n_units, dtype=FIT_DTYPE, device=dev), torch.ones_like(zeros[:n_out]))
        cons.append(torch.cat([per_unit, torch.zeros_like(per_unit[:n_units])]))
    cons_m = torch.cat(cons, dim=1)
    chol, not_pd = torch.linalg.cholesky_ex(prec)
    pivots = torch.diagonal(chol) ** 2
    if prior_sd is not None and not bool(not_pd) and float(pivots.min()) > 1e-10 * float(pivots.max()):
        # Well-posed (a prior, and every unit seen): the covariance in the subspace is that
        # of the Gaussian conditioned on Cᵀθ = 0, Σ − ΣC (CᵀΣC)⁻¹ CᵀΣ with Σ = prec⁻¹; a
        # Cholesky factor gives it 5x faster than the eigendecomposition below. Without a
        # prior, the softmax's shift is a null direction of prec: that path handles it.
        cov = torch.cholesky_inverse(chol)
        cov_c = cov @ cons_m
        var = torch.diagonal(cov) - (cov_c * torch.linalg.solve(cons_m.T @ cov_c, cov_c.T).T).sum(dim=1)
    else:
        # Otherwise some direction may be undetermined: eigen-decompose prec in an
        # orthonormal basis of the subspace.
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
        var = torch.where(((sq > 0) & ~ok).any(dim=1), torch.full_like(var, float("inf")), var)
    se = torch.sqrt(var.clamp_min(0.0)).cpu().numpy()
    return se[:n_val].reshape(n_units, n_out), se[n_val:]


# ----------------------------------------------------------------------------------------
# Fitters
# ----------------------------------------------------------------------------------------
class Fitter(ABC):
    """A fitting algorithm, selected by name (see :data:`FITTERS`).

    :meth:`run` is a generator. It receives the text's positions as unit indices and the
    model's target on the full text (measured from the reference point), yields lists of
    samples for the model to score, is sent their (B, K) targets back, and returns a
    :class:`FitResult`. :meth:`steps` is the same generator, except that it may also yield
    :class:`FitRequest` objects, answered by :meth:`solve_batch` (the driver collects the
    requests of many texts and solves them together).

    Example:
        >>> fitter = get_fitter("fidel")
        >>> isinstance(fitter, Fitter), fitter.name
        (True, 'fidel')
    """

    name: str = ""
    #: The options the constructor takes and what each may be (see :mod:`.options`).
    OPTIONS: dict = {}

    @abstractmethod
    def run(
        self,
        rng: np.random.Generator,
        position_units: np.ndarray,
        n_units: int,
        n_samples: int,
        full_target: np.ndarray | None = None,
    ) -> FitGenerator:
        """Generator: yields sample lists, receives (B, K) targets, returns a FitResult."""

    def steps(
        self,
        rng: np.random.Generator,
        position_units: np.ndarray,
        n_units: int,
        n_samples: int,
        full_target: np.ndarray | None = None,
    ) -> Generator:
        """Like :meth:`run`, but fits may be yielded as :class:`FitRequest` (default: none are)."""
        return self.run(rng, position_units, n_units, n_samples, full_target)

    def solve_batch(
        self, requests: list[FitRequest], device: torch.device | str | None = None
    ) -> list[tuple[np.ndarray, np.ndarray, dict]]:
        """Solve the fit requests of several texts at once; ``(value, importance, info)`` each."""
        raise NotImplementedError(f"{type(self).__name__} yields no fit requests")

    def min_samples(self, n_units: int) -> int:
        return 1

    def planned_samples(
        self,
        rng: np.random.Generator,
        position_units: np.ndarray,
        n_units: int,
        n_samples: int,
        unit_lengths: np.ndarray | None = None,
    ) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """The samples :meth:`steps` will ask for, before any model call, for cost estimates.

        Returns ``(known, bounds)``: samples known in advance (given the same ``rng`` state
        as :meth:`steps` gets), and one upper bound (a sample at least as long) per sample
        that depends on model outputs and so cannot be known yet. ``unit_lengths`` (tokens
        per unit) lets a bound be tighter than the full text. Default: ``n_samples``
        samples, each bounded by the full text.

        Example:
            >>> known, bounds = get_fitter("fidel").planned_samples(np.random.default_rng(0), np.arange(4), 4, 10)
            >>> len(known), len(bounds)
            (10, 0)
        """
        return [], [position_units] * int(n_samples)


# Option tables (see :mod:`.options`): what each fitter's options may be, checked once,
# in the constructor, before any model call.
_POSITIVE = Interval(float, 0, None, "neither")
_SAMPLED_OPTIONS = {
    "holdout_fraction": (Interval(float, 0, 0.5, "left"),),
    "max_iter": (Interval(int, 1, None),),
    "tol": (_POSITIVE,),
    "prior_sd": (_POSITIVE, OneOf("evidence", None)),
    "anchor_weight": (Interval(float, 0, 1, "left"),),
    "check_samples": (Interval(int, 0, None),),
}


def _given(args: dict, table: dict) -> dict:
    """The constructor arguments (``locals()`` at its top) that ``table`` declares."""
    return {k: v for k, v in args.items() if k in table}


def _request_priors(prior_sd: float | None, requests: list[FitRequest]) -> list[float] | None:
    """Each request's prior sd (its own where it carries one), or None when the fitter has no prior."""
    return None if prior_sd is None else [prior_sd if r.prior_sd is None else r.prior_sd for r in requests]


class _SampledFitter(Fitter):
    """Shared flow of eff and fidel: one design, held-out check, final fit on all samples.

    Args:
        holdout_fraction: share of samples kept aside to report held-out MSE/R².
        max_iter, tol: the solver's budget and stopping rule.
        prior_sd: standard deviation of a Gaussian prior on the importances (noise
            variance profiled out, see :func:`fit_gradient`); None for no prior; or
            "evidence": chosen per text from the data (see :meth:`_prior_fit`).
        anchor_weight: share of the total weight given to the full text itself as one more
            observation (0 = the design alone). The full text is scored anyway; anchoring
            pulls the surrogate towards the model's output on the text it explains.
        check_samples: extra deletion samples of the full text, scored after the fit and
            never fitted, to report ``check_r2`` / ``check_mse`` on the text's own
            neighbourhood (each one is a near-full-length forward pass).
    """

    OPTIONS = _SAMPLED_OPTIONS

    def __init__(
        self,
        holdout_fraction: float = 0.1,
        max_iter: int = 500,
        tol: float = 1e-9,
        prior_sd: float | str | None = 0.25,
        anchor_weight: float = 0.0,
        check_samples: int = 0,
    ) -> None:
        if self.OPTIONS is _SAMPLED_OPTIONS:  # eff and fidel check these in their own tables
            check_options(self.name or "fitter", _SAMPLED_OPTIONS, _given(locals(), _SAMPLED_OPTIONS))
        self.evidence = prior_sd == "evidence"
        if self.evidence:
            prior_sd = EVIDENCE_START
        self.holdout_fraction = holdout_fraction
        self.max_iter = int(max_iter)
        self.tol = tol
        self.prior_sd = None if prior_sd is None else float(prior_sd)
        self.anchor_weight = float(anchor_weight)
        self.check_samples = int(check_samples)

    def min_samples(self, n_units: int) -> int:
        # Each unit needs to be seen at least once for its value to mean anything.
        return n_units + 1

    @abstractmethod
    def design(
        self, rng: np.random.Generator, position_units: np.ndarray, n_units: int, n_samples: int
    ) -> list[np.ndarray]:
        """The samples (unit-index sequences) to score."""

    def solve(
        self, samples: list[np.ndarray], y: np.ndarray, n_units: int, init: tuple | None, weights: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray, dict]:
        """Fit (value, importance, info) on these samples (one text, on the CPU)."""
        return self.solve_batch([FitRequest(samples, y, n_units, init, weights)])[0]

    @abstractmethod
    def solve_batch(
        self, requests: list[FitRequest], device: torch.device | str | None = None
    ) -> list[tuple[np.ndarray, np.ndarray, dict]]:
        """Fit every request, together where the solver allows."""

    def run(self, rng, position_units, n_units, n_samples, full_target=None):
        # Fits answered here, one text at a time: the generator protocol of a lone text.
        gen = self.steps(rng, position_units, n_units, n_samples, full_target)
        out = next(gen)
        try:
            while True:
                if isinstance(out, FitRequest):
                    with single_threaded_fits():
                        out = gen.send(self.solve_batch([out])[0])
                else:
                    out = gen.send((yield out))
        except StopIteration as stop:
            return stop.value

    def planned_samples(self, rng, position_units, n_units, n_samples, unit_lengths=None):
        # steps() draws its design first from the rng it is given: the same samples.
        known = self.design(rng, position_units, n_units, n_samples)
        checks = self.check_samples if len(position_units) > 1 else 0
        return known, [position_units] * checks

    def steps(self, rng, position_units, n_units, n_samples, full_target=None):
        samples = self.design(rng, position_units, n_units, n_samples)
        y = yield samples
        result = yield from self._fit(rng, samples, y, n_units, position_units, full_target)
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

    def _prior_fit(self, request: FitRequest):
        """Generator: fits ``request``; returns (value, importance, info, the prior's sd).

        With ``prior_sd="evidence"`` the sd is then chosen by empirical Bayes: MacKay's
        fixed point for the sd that maximises the Laplace approximation of the marginal
        likelihood, sd² = Σ s² / γ with γ = (U − 1) − Σ se(s)² / sd² the number of
        importance directions the data determine, re-fitted (warm) until sd moves by less
        than 5 %. A fixed sd shrinks importances that genuinely spread over several units
        (docs/results.md, §14).
        """
        sd = self.prior_sd
        value, imp, info = yield request
        if not self.evidence or request.n_units < 3:
            return value, imp, info, sd
        counts = count_matrix(request.samples, request.n_units)
        for _ in range(EVIDENCE_ROUNDS):
            s = normalise_importance(imp)
            _, se_s = laplace_standard_errors(counts, request.y, value, s, prior_sd=sd, weights=request.weights)
            gamma = (request.n_units - 1) - float(np.sum(se_s**2)) / sd**2
            new = float(np.clip(np.sqrt(np.sum(s**2) / max(gamma, 0.5)), *EVIDENCE_RANGE))
            if abs(np.log(new / sd)) < 0.05:
                break
            sd = new
            value, imp, info = yield replace(request, init=(value, imp), prior_sd=sd)
        return value, imp, info, sd

    def _fit(self, rng, samples, y, n_units, position_units, full_target):
        """Generator: yields the held-out fit's and the final fit's requests, returns the result."""
        fit_idx, hold_idx = split_holdout(rng, len(samples), self.holdout_fraction)
        diag: dict = {}
        init = None
        sd = self.prior_sd
        if len(hold_idx):
            # With prior_sd="evidence" the sd is chosen here, without the held-out samples,
            # so that the held-out R² judges the whole procedure.
            train, y_train, w_train = self._with_anchor(
                [samples[i] for i in fit_idx], y[fit_idx], position_units, full_target
            )
            value, imp, info, sd = yield from self._prior_fit(FitRequest(train, y_train, n_units, None, w_train))
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
        final = FitRequest(all_samples, y_all, n_units, init, weights, sd)
        if len(hold_idx):
            value, imp, info = yield final
        else:
            value, imp, info, sd = yield from self._prior_fit(final)
        if self.evidence:
            diag["prior_sd"] = sd
        pred, _ = _predict_sparse(*pad_sequences(samples), value, imp)
        diag["train_mse"], diag["train_r2"] = _fit_quality(y, pred)
        diag.update({f"fit_{k}": v for k, v in info.items()})
        imp = normalise_importance(imp)
        se_v, se_s = laplace_standard_errors(
            count_matrix(all_samples, n_units), y_all, value, imp, prior_sd=sd, weights=weights
        )
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
        prior_sd: the prior's standard deviation of s, for ``l2_importance="auto"``, or
            "evidence" to choose it per text from the data (see :class:`_SampledFitter`).
        l2_value: ridge weight on v, see :func:`fit_gradient`.
        tol: relative improvement (in units of the targets' variance) at which to stop.
        holdout_fraction, anchor_weight, check_samples: see :class:`_SampledFitter`.

    Example:
        >>> fitter = EffFitter(sample_length=(1, 3), singletons=True)
        >>> fitter.name, fitter.min_samples(10)
        ('eff', 11)
        >>> sc.explain(model, text, tokenizer=tok, method=fitter)  # doctest: +SKIP
    """

    name = "eff"
    OPTIONS = {
        **_SAMPLED_OPTIONS,
        "sample_length": (Interval(int, 1, None), IntPair(1)),
        "design": (OneOf(*_EFF_DESIGNS),),
        "singletons": (OneOf(True, False),),
        "deletion_share": (Interval(float, 0, 1, "left"),),
        "solver": (OneOf("lbfgs", "adam"),),
        "learning_rate": (_POSITIVE,),
        "l2_importance": (Interval(float, 0, None), OneOf("auto")),
        # No None here: without a prior, a number l2_importance is the ridge instead.
        "prior_sd": (_POSITIVE, OneOf("evidence")),
        "l2_value": (Interval(float, 0, None),),
    }

    def __init__(
        self,
        sample_length: int | tuple[int, int] = 2,
        design: str = "random",
        singletons: bool = False,
        deletion_share: float = 0.0,
        solver: str = "lbfgs",
        holdout_fraction: float = 0.1,
        max_iter: int = 500,
        tol: float = 1e-7,
        learning_rate: float = 0.05,
        l2_importance: float | str = "auto",
        prior_sd: float | str = 0.25,
        l2_value: float = 1e-3,
        anchor_weight: float = 0.0,
        check_samples: int = 0,
    ) -> None:
        check_options(self.name, self.OPTIONS, _given(locals(), self.OPTIONS))
        super().__init__(
            holdout_fraction, max_iter, tol, prior_sd if l2_importance == "auto" else None, anchor_weight, check_samples
        )
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

    def solve_batch(self, requests, device=None):
        return fit_gradient_batch(
            [(*pad_sequences(r.samples), r.y, r.n_units) for r in requests],
            inits=[r.init for r in requests],
            weights=[r.weights for r in requests],
            solver=self.solver,
            max_iter=self.max_iter,
            tol=self.tol,
            learning_rate=self.learning_rate,
            l2_importance=0.0 if self.prior_sd is not None else float(self.l2_importance),
            prior_sd=_request_priors(self.prior_sd, requests),
            l2_value=self.l2_value,
            device=device,
        )


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
        prior_sd: standard deviation of the prior on s, or "evidence" (see :class:`_SampledFitter`).
        max_iter: solver iterations (default 500).
        tol: ALS's relative-improvement stop (default 1e-6); only with ``solver="als"``
            (the quasi-Newton fit stops by its gradient, so a ``tol`` there is refused).
        holdout_fraction, anchor_weight, check_samples: see :class:`_SampledFitter`.

    Example:
        >>> FidelFitter(max_delete_fraction=0.3).name
        'fidel'
        >>> sc.explain(model, text, tokenizer=tok, method="fidel", solver="als")  # doctest: +SKIP
    """

    name = "fidel"
    OPTIONS = {
        **_SAMPLED_OPTIONS,
        "max_delete_fraction": (Interval(float, 0, 1, "right"),),
        "solver": (OneOf("lbfgs", "als"),),
        "tol": (_POSITIVE, OneOf(None)),
        # A prior is checked under ALS too (which uses none), so that a typo never passes.
        "prior_sd": (_POSITIVE, OneOf("evidence")),
    }

    def __init__(
        self,
        max_delete_fraction: float = 0.5,
        solver: str = "lbfgs",
        holdout_fraction: float = 0.1,
        max_iter: int = 500,
        tol: float | None = None,
        prior_sd: float | str = 0.25,
        anchor_weight: float = 0.0,
        check_samples: int = 0,
    ) -> None:
        check_options(self.name, self.OPTIONS, _given(locals(), self.OPTIONS))
        if tol is not None and solver != "als":
            # The quasi-Newton fit stops by its gradient: a tol= would be accepted and ignored.
            raise ValueError(
                "method 'fidel': tol= is ALS's stopping rule; solver='lbfgs' stops by its gradient. "
                "Pass solver='als' with tol=, or leave tol out"
            )
        super().__init__(
            holdout_fraction,
            max_iter,
            _ALS_TOL if tol is None else tol,
            prior_sd if solver == "lbfgs" else None,
            anchor_weight,
            check_samples,
        )
        self.max_delete_fraction = float(max_delete_fraction)
        self.solver = solver

    def design(self, rng, position_units, n_units, n_samples):
        return deletion_neighbourhood(rng, position_units, n_samples, self.max_delete_fraction)

    def solve_batch(self, requests, device=None):
        if self.solver == "lbfgs":
            # ftol ~ 0: in the flat valley the loss barely changes while the parameters
            # still move, so only the gradient (GRAD_TOL) may say when the optimum is reached.
            return fit_gradient_batch(
                [(*pad_sequences(r.samples), r.y, r.n_units) for r in requests],
                inits=[r.init for r in requests],
                weights=[r.weights for r in requests],
                max_iter=self.max_iter,
                tol=1e-15,
                l2_importance=0.0,
                prior_sd=_request_priors(self.prior_sd, requests),
                device=device,
            )
        # ALS solves one text at a time (its line searches re-solve whole linear systems).
        return [self._solve_als(r, device) for r in requests]

    def _solve_als(self, r: FitRequest, device) -> tuple[np.ndarray, np.ndarray, dict]:
        counts, y = count_matrix(r.samples, r.n_units), r.y
        if r.weights is not None:
            # ALS takes no weights: the anchor row is repeated instead (its share rounded).
            reps = np.maximum(np.round(r.weights / r.weights.min()).astype(int), 1)
            counts, y = np.repeat(counts, reps, axis=0), np.repeat(y, reps, axis=0)
        return fit_als(
            counts,
            y,
            init_importance=None if r.init is None else r.init[1],
            max_iter=self.max_iter,
            tol=self.tol,
            device=device,
        )


class AnaFitter(Fitter):
    """SLALOM-ana (proof of Prop. 5.2): exactly 2U − 1 model evaluations.

    Step 1 scores every unique unit alone: G([τ]) = v(τ). Step 2 scores pairs [τ0, ω] with
    a reference unit τ0 and solves exp(s_ω − s_τ0) = (v_τ0 − G) / (G − v_ω). τ0 is the
    unit whose value lies farthest from the others', which keeps the denominators away from
    zero. Exact on a true SLALOM; on real models a pair whose ratio is not positive and
    finite gets s_ω = s_τ0 and is counted in ``diagnostics["ana_invalid_pairs"]``; a pair of
    equal values carries no information about s_ω (``ana_undetermined_pairs``, s_ω = s_τ0).

    Example (the "model" is a true SLALOM, which ana recovers exactly):
        >>> v, s = np.array([1.0, -2.0, 0.5]), np.array([0.0, 1.0, -1.0])
        >>> def slalom(samples):
        ...     return np.array([[np.exp(s[x]) @ v[x] / np.exp(s[x]).sum()] for x in samples])
        >>> steps = AnaFitter().run(np.random.default_rng(0), np.arange(3), 3, 0)
        >>> samples = next(steps)
        >>> while True:
        ...     try:
        ...         samples = steps.send(slalom(samples))
        ...     except StopIteration as done:
        ...         fit = done.value
        ...         break
        >>> np.round(fit.value[:, 0], 6).tolist()
        [1.0, -2.0, 0.5]
    """

    name = "ana"

    def planned_samples(self, rng, position_units, n_units, n_samples, unit_lengths=None):
        singles = [np.array([u]) for u in range(n_units)]
        if n_units == 1:
            return singles, []
        # The pairs' reference unit depends on the singles' outputs; no pair is longer than
        # the two longest units together.
        lengths = np.ones(n_units) if unit_lengths is None else np.asarray(unit_lengths)
        longest = np.argsort(-lengths, kind="stable")[:2]
        return singles, [longest] * (n_units - 1)

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
        diag = {
            "ana_invalid_pairs": invalid,
            "ana_undetermined_pairs": undetermined,
            "ana_reference_unit": ref,
            **empty,
        }
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
    # Names first (a constructor would raise Python's own TypeError); values in __init__.
    check_option_names(method, FITTERS[method].OPTIONS, options)
    return FITTERS[method](**options)
