"""The batched gradient-fit objective: T texts' problems padded together, their MSE, the priors and the
gradients (see :func:`.gradient.fit_gradient_batch`); its two kinds, ridge and posterior, and how each
is solved."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..surrogate import surrogate_forward
from .constants import VALUE_PRIOR_SD


@dataclass
class FitBatch:
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
    n_eff: torch.Tensor  # (T,) effective number of samples of the weighted likelihood (Kish)
    n_units: torch.Tensor  # (T,) real units
    unit_mask: torch.Tensor  # (T, U) 1 for real units
    sizes: list[int]  # real units per text (host copy)

    @property
    def shape(self) -> tuple[int, int, int]:
        return self.idx.shape[0], self.unit_mask.shape[1], self.y.shape[2]


def pack_problems(
    problems: list[tuple[np.ndarray, np.ndarray, np.ndarray, int, np.ndarray | None]],
    device: torch.device,
    dtype: torch.dtype,
) -> FitBatch:
    """Pad (idx, mask, y, n_units, weights) problems into one :class:`FitBatch` on ``device``.

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
    n_eff = np.array([effective_samples(p[4], p[0].shape[0]) for p in problems], dtype=np.float64)
    unit_mask = (np.arange(u_max)[None, :] < np.array(sizes)[:, None]).astype(np.float64)

    def dev(a: np.ndarray, dt: torch.dtype = dtype) -> torch.Tensor:
        return torch.from_numpy(a).to(device=device, dtype=dt)

    return FitBatch(
        dev(idx, torch.int64),
        dev(mult),
        dev(y),
        dev(w),
        dev(np.array([p[0].shape[0] for p in problems], dtype=np.float64)),
        dev(n_eff),
        dev(np.array(sizes, dtype=np.float64)),
        dev(unit_mask),
        sizes,
    )


def effective_samples(weights: np.ndarray | None, n_samples: int) -> float:
    """Kish's effective sample size (Σw)² / Σw² of a weighted fit (``n_samples`` unweighted).

    A weight is a share of the evidence, not a count of observations: 40 samples that carry
    three quarters of the weight are still 40 observations. The posterior objective weighs
    its prior against this number; weighing it against the raw count let 40 heavily weighted
    samples fit ~120 free importances far beyond the prior (an importance 13 prior sds out,
    a different one at every seed).

    Example:
        >>> effective_samples(None, 10), effective_samples(np.array([1.0, 1.0, 2.0]), 3)
        (10.0, 2.666...)
    """
    if weights is None:
        return float(n_samples)
    w = np.asarray(weights, dtype=np.float64)
    return float(w.sum() ** 2 / max(float(np.sum(w * w)), 1e-300))


def mse_and_grads(
    batch: FitBatch, value: torch.Tensor, importance: torch.Tensor
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


def initial_values(batch: FitBatch) -> torch.Tensor:
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


#: The gradient fits' objectives (``objective=`` of :func:`~.gradient.fit_gradient_batch`):
#: "ridge" (:class:`RidgeObjective`) and "posterior" (:class:`PosteriorObjective`).
OBJECTIVE_KINDS = ("ridge", "posterior")


def make_objective(
    batch: FitBatch,
    *,
    kind: str,
    l2_importance: float,
    l2_value: float,
    prior_sd: float | list[float] | None,
    value_centre: torch.Tensor | None = None,
    value_sd: list[float | None] | None = None,
    importance_basis: torch.Tensor | None = None,
) -> Objective:
    """The objective of this ``kind`` over ``batch``.

    Args:
        batch: the padded problems (:func:`pack_problems`).
        kind: "ridge": the relative MSE plus ridges (``l2_importance``, ``l2_value``);
            "posterior": the negative log posterior under a Gaussian prior on the
            importances of sd ``prior_sd`` (the ridges are not used). The kind also says
            how the solver treats it (:attr:`Objective.preconditioned`,
            :attr:`Objective.stops_when_exact`).
        prior_sd, value_centre, value_sd, importance_basis: the priors, for "posterior" only.

    Returns:
        A :class:`RidgeObjective` or a :class:`PosteriorObjective`.

    Example:
        >>> idx, mask = pad_sequences([np.array([0]), np.array([0, 1])])
        >>> batch = pack_problems([(idx, mask, np.ones((2, 1)), 2, None)], torch.device("cpu"), torch.float64)
        >>> make_objective(batch, kind="posterior", l2_importance=0.0, l2_value=0.0, prior_sd=0.25).preconditioned
        True
    """
    if kind not in OBJECTIVE_KINDS:
        raise ValueError(f"unknown objective {kind!r}; choose one of {OBJECTIVE_KINDS}")
    if kind == "ridge":
        if prior_sd is not None:
            raise ValueError("the ridge objective has no prior: pass prior_sd=None, or objective='posterior'")
        if value_centre is not None or importance_basis is not None:
            raise ValueError(
                "a prior on the values or an importance basis needs the posterior objective (give prior_sd)"
            )
        return RidgeObjective(batch, l2_importance=l2_importance, l2_value=l2_value)
    if prior_sd is None:
        raise ValueError("the posterior objective needs the importances' prior: give prior_sd")
    return PosteriorObjective(
        batch, prior_sd=prior_sd, value_centre=value_centre, value_sd=value_sd, importance_basis=importance_basis
    )


class Objective:
    """The gradient fits' objective per text, on a flat (T, P) parameter matrix.

    The first U·K entries of a row are the values, the next U the importances, and, where
    :attr:`n_extra` is 1, a last entry β: the slope of the importances along a fitted axis
    (see :class:`PosteriorObjective`; the importances are then the U entries plus β·h). The MSE is
    taken in units of the targets' variance (1 − R² on the samples), so that a tolerance
    means the same for models with large or small log-odds. Subclasses add the
    regularisation (:meth:`_penalise`): a ridge, or a prior.
    """

    #: Whether L-BFGS steps on the variables rescaled by the root of :meth:`curvature`.
    preconditioned: bool = False
    #: Whether a relative MSE at :data:`~.constants.EXACT_FIT` ends a text's fit (and counts
    #: as converged): for an objective that keeps falling as the residual vanishes.
    stops_when_exact: bool = False

    def __init__(self, batch: FitBatch) -> None:
        self.batch = batch
        n_t, n_units, n_out = batch.shape
        self.n_val = n_units * n_out
        self.n_extra = 0
        self.basis: torch.Tensor | None = None  # (T, U) unit-norm axis of the slope β
        self.centre = n_out > 1  # App. C.1: values sum to zero over classes
        real = batch.w > 0  # (T, B)
        n_el = batch.n_rows * n_out
        y_mean = batch.y.sum(dim=(1, 2)) / n_el
        var = ((batch.y - y_mean[:, None, None]) ** 2 * real[..., None]).sum(dim=(1, 2)) / n_el
        self.scale = 1.0 / var.clamp_min(1e-12)
        # The values' prior is on the scale of the targets' size around the reference (their
        # second moment, not their variance: a text of one token has constant targets).
        self.size_v = 1.0 / ((batch.y**2).sum(dim=(1, 2)) / n_el).clamp_min(1e-12)

    def unpack(self, theta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(values (T, U, K), importances (T, U)) of a parameter matrix."""
        value, own, slope = self._split(theta)
        return value, own if slope is None else own + slope * self.basis

    def _split(self, theta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        n_t, n_units, n_out = self.batch.shape
        value = theta[:, : self.n_val].view(n_t, n_units, n_out)
        if self.centre:
            value = value - value.mean(dim=-1, keepdim=True)
        own = theta[:, self.n_val : self.n_val + n_units]
        return value, own, theta[:, -1:] if self.n_extra else None

    def __call__(self, theta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(objective (T,), gradient (T, P), relative MSE (T,))."""
        value, own, slope = self._split(theta)
        imp = own if slope is None else own + slope * self.basis
        mse, gv, gs = mse_and_grads(self.batch, value, imp)
        rel = mse * self.scale
        if self.centre:
            gv = gv - gv.mean(dim=-1, keepdim=True)
        obj, gv, g_own, g_slope = self._penalise(rel, gv, gs, value, own)
        parts = [gv.flatten(1), g_own] + ([] if g_slope is None else [g_slope])
        return obj, torch.cat(parts, dim=1), rel

    def _penalise(
        self, rel: torch.Tensor, gv: torch.Tensor, gs: torch.Tensor, value: torch.Tensor, own: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """(objective, value gradient, gradient of the importances' own entries, of the slope
        or None) from the relative MSE and its gradients w.r.t. the values and importances."""
        raise NotImplementedError


class RidgeObjective(Objective):
    """Relative MSE plus ridges on the values and the importances (no prior).

    Not preconditioned: without the prior a near-neutral unit's importance has almost no
    curvature, and rescaled steps carry it onto the plateau s → −∞ where its weight and
    gradient vanish, a worse optimum (global fits of Table 6: held-out MSE 0.113 instead of
    0.087; tests/engine/test_torchfit.py). No exact-fit stop: the ridges' optimum is not an
    exact fit, and the relative MSE has a floor of zero, where the decrease stop ends it.
    """

    def __init__(self, batch: FitBatch, *, l2_importance: float, l2_value: float) -> None:
        super().__init__(batch)
        self.l2_importance = l2_importance
        self.l2_value = l2_value

    def _penalise(self, rel, gv, gs, value, imp):
        # A weak ridge on values (in units of the targets' variance): a unit whose
        # weight is tiny next to its partners barely moves F, so its value would wander.
        # A ridge on s: with few samples a unit seen only beside one partner can trade
        # an ever larger importance against its value without changing the fit; the
        # ridge picks the smallest such s instead of letting it run off.
        sc = self.scale
        vv = (value * value).sum(dim=(1, 2))
        ss = (imp * imp).sum(dim=1)
        n_v = self.batch.n_units * value.shape[-1]
        obj = rel + self.l2_value * sc * vv / n_v + self.l2_importance * ss / self.batch.n_units
        gv = gv * sc[:, None, None] + (2.0 * self.l2_value * sc / n_v)[:, None, None] * value
        gs = gs * sc[:, None] + (2.0 * self.l2_importance / self.batch.n_units)[:, None] * imp
        return obj, gv, gs, None


class PosteriorObjective(Objective):
    """Negative log posterior: profiled noise, a Gaussian prior on the importances (sd
    ``prior_sd``, one or one per text) and one on the values: weak and centred at zero, or,
    for the texts that give one, centred at ``value_centre`` (T, U, K) with sd ``value_sd``
    (in the targets' units).

    ``importance_basis`` (T, U), where a text gives a non-zero row h: the importances' prior
    is N(β·h, prior_sd²) with the slope β free (a flat prior on it). One number β fitted from
    all samples moves every importance along h; each token's own deviation from that line
    stays shrunk to what its few samples determine. β is a parameter of its own (s = d + β·ĥ,
    the prior on d): minimised over β, that is the Gaussian penalty on s minus its projection
    on ĥ, but a single parameter along the dense axis ĥ keeps the quasi-Newton steps well
    conditioned where the projected penalty left a nearly flat valley (batched and single
    fits then stopped at different points of it).

    ``prior_sd``'s counterpart in samples is the effective number n_eff (Kish) of the
    weighted samples: the objective is the negative log posterior per n_eff / 2.

    Preconditioned by :meth:`curvature` (measured on the packaged MiniLM: 40 % fewer
    iterations to a 2x more accurate optimum), and stopped at an exact fit: its log of the
    MSE keeps falling as the residual vanishes.
    """

    preconditioned = True
    stops_when_exact = True

    def __init__(
        self,
        batch: FitBatch,
        *,
        prior_sd: float | list[float],
        value_centre: torch.Tensor | None = None,
        value_sd: list[float | None] | None = None,
        importance_basis: torch.Tensor | None = None,
    ) -> None:
        super().__init__(batch)
        if importance_basis is not None:
            # Unit-norm, centred over each text's real units (so the shift stays mean-zero).
            h = importance_basis * batch.unit_mask
            h = (h - (h.sum(dim=1, keepdim=True) / batch.n_units[:, None])) * batch.unit_mask
            norm = h.norm(dim=1, keepdim=True)
            self.basis = torch.where(norm > 1e-12, h / norm.clamp_min(1e-12), torch.zeros_like(h))
            self.n_extra = 1
        self.prior_sd = prior_sd
        sd = torch.as_tensor(prior_sd, dtype=batch.y.dtype, device=batch.y.device)  # one, or one per text
        # The objective is the log posterior per n_eff / 2 samples (see effective_samples).
        self.prior = 1.0 / (batch.n_eff * sd**2)
        self.prior_v = self.size_v / (batch.n_eff * VALUE_PRIOR_SD**2)
        self.value_centre = torch.zeros_like(batch.y[:, :1, :]) if value_centre is None else value_centre
        for t, v_sd in enumerate(value_sd or []):
            if v_sd is not None:
                self.prior_v[t] = 1.0 / (batch.n_eff[t] * v_sd**2)

    def _penalise(self, rel, gv, gs, value, own):
        # Negative log posterior per n_eff/2 samples, noise variance profiled out:
        # d log(L) = dL/L. The floor keeps exact fits finite. Priors sit outside the
        # log, so that exact data is still fitted exactly: s ~ N(0, prior_sd²), and the
        # values a weak N(0, (VALUE_PRIOR_SD · sd(y))²) for the same reason as the ridge.
        sc = self.scale
        dv = value - self.value_centre
        vv = (dv * dv).sum(dim=(1, 2))
        ss = (own * own).sum(dim=1)
        floor = rel + 1e-12
        obj = torch.log(floor) + self.prior * ss + self.prior_v * vv
        gv = gv * (sc / floor)[:, None, None] + (2.0 * self.prior_v)[:, None, None] * dv
        g_data = gs * (sc / floor)[:, None]
        g_own = g_data + (2.0 * self.prior)[:, None] * own
        g_slope = None if self.basis is None else (g_data * self.basis).sum(dim=1, keepdim=True)
        return obj, gv, g_own, g_slope

    def curvature(self, theta: torch.Tensor) -> torch.Tensor:
        """The diagonal of the objective's Gauss–Newton Hessian at ``theta`` (T, P).

        Values and importances differ in curvature by orders of magnitude (an importance
        next to a near-neutral partner barely moves F): quasi-Newton steps on variables
        rescaled by the root of this diagonal need far fewer iterations. Repeated units in
        one sample are treated as independent slots (a preconditioner need not be exact).
        Only the prior's objective is preconditioned.
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
        d_s_data = d_s * data[:, None]
        parts = [d_v, d_s_data + 2.0 * p_s[:, None]]
        if self.basis is not None:
            parts.append((d_s_data * self.basis**2).sum(dim=1, keepdim=True))  # the slope: data only
        d = torch.cat(parts, dim=1)
        return torch.where(d > 0, d, torch.ones_like(d))
