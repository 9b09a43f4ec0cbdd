"""The shared flow of the sampled fitters (eff, fidel): design, held-out check, final fit, standard
errors; and the single-threaded context the driver runs fits in."""

from __future__ import annotations

import contextlib
from abc import abstractmethod
from collections.abc import Iterator
from dataclasses import replace

import numpy as np
import torch

from ..options import check_options
from ..sampling import deletion_neighbourhood, split_holdout
from ..surrogate import count_matrix, normalise_importance, pad_sequences, predict_sparse
from .checks import REMOVAL_AGREEMENT_MIN, removal_agreement
from .constants import (
    ANCHOR_WEIGHT,
    CHECK_SAMPLES,
    EVIDENCE_RANGE,
    EVIDENCE_ROUNDS,
    EVIDENCE_START,
    FIT_TOL,
    HOLDOUT_FRACTION,
    MAX_ITER,
    PRIOR_SD,
)
from .fitter import SAMPLED_OPTIONS, Fitter, given_options
from .laplace import laplace_standard_errors
from .protocol import FitRequest, FitResult


@contextlib.contextmanager
def single_threaded_fits() -> Iterator[None]:
    """Run the fits on one CPU thread (torch's intra-op pool), without autograd bookkeeping.

    The fits are small (U ≤ a few hundred): a multi-threaded pool spends more time waking
    threads than computing, the more so when another process keeps the cores busy.
    Inference mode skips the version counters and view tracking every torch operation
    otherwise pays for. torch's thread count is global to the process; it is restored on exit.

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


def mse_and_r2(y: np.ndarray, pred: np.ndarray) -> tuple[float, float]:
    """MSE and R² (pooled over output columns); R² is NaN when the targets are constant.

    Every sample counts once, whatever weight the fit gave it: a design's few heavily
    weighted samples would otherwise make the held-out R² the R² of a handful of samples.
    """
    if len(y) == 0:
        return float("nan"), float("nan")
    sse = float(np.sum((pred - y) ** 2))
    sst = float(np.sum((y - y.mean(axis=0, keepdims=True)) ** 2))
    return sse / y.size, (1.0 - sse / sst) if sst > 1e-12 * y.size else float("nan")


class SampledFitter(Fitter):
    """Shared flow of eff, hybrid, eff-slope and fidel: one design, held-out check, final fit
    on all samples. A subclass gives the :meth:`design` and :meth:`solve_batch`, and may
    give the hooks :meth:`design_weights`, :meth:`design_priors` and :meth:`design_diagnostics`.

    Args:
        holdout_fraction: share of samples kept aside to report held-out MSE/R².
        max_iter, tol: the solver's budget and stopping rule (see the tolerance policy in
            :mod:`.constants`).
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

    OPTIONS = SAMPLED_OPTIONS

    def __init__(
        self,
        holdout_fraction: float = HOLDOUT_FRACTION,
        max_iter: int = MAX_ITER,
        tol: float = FIT_TOL,
        prior_sd: float | str | None = PRIOR_SD,
        anchor_weight: float = ANCHOR_WEIGHT,
        check_samples: int = CHECK_SAMPLES,
    ) -> None:
        if self.OPTIONS is SAMPLED_OPTIONS:  # eff and fidel check these in their own tables
            check_options(self.name or "fitter", SAMPLED_OPTIONS, given_options(locals(), SAMPLED_OPTIONS))
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
            pred = predict_sparse(*pad_sequences(checks), result.value, result.importance)[0]
            result.diagnostics["check_mse"], result.diagnostics["check_r2"] = mse_and_r2(y_check, pred)
            result.diagnostics["n_check"] = len(checks)
        return result

    def design_weights(self, samples: list[np.ndarray], n_positions: int) -> np.ndarray | None:
        """Per-sample weights of the design (None: every sample counts the same)."""
        return None

    def design_priors(self, samples, y, idx, n_positions, n_units, full_target=None):
        """Generator: the priors of the fit on ``samples[idx]``: the values' ``(centre, sd)``
        (None: the weak one) and the importances' slope axis, a (U,) direction along which
        their prior is flat (None: centred at zero). ``full_target`` is the model's output on
        the text (from the reference point), or None. Default: (None, None); it may yield fit
        requests of its own to find them."""
        return None, None
        yield  # a generator that yields nothing

    def deletion_indices(self, n_samples: int, n_positions: int) -> np.ndarray:
        """Indices of the design's samples that are the text with some positions deleted
        (none by default): the samples on which ``removal`` is checked against the model."""
        return np.zeros(0, dtype=np.int64)

    def design_diagnostics(self, n_samples: int, n_positions: int) -> dict:
        """What the design was on this text, for the explanation's diagnostics."""
        return {}

    def request_priors(self, requests: list[FitRequest]) -> list[float] | None:
        """Each request's prior sd (its own where it carries one, e.g. chosen by
        ``prior_sd="evidence"``), or None when the fit has no prior on the importances."""
        return (
            None if self.prior_sd is None else [self.prior_sd if r.prior_sd is None else r.prior_sd for r in requests]
        )

    def _with_anchor(self, samples, y, weights, position_units, full_target):
        """Append the full text as one observation carrying ``anchor_weight`` of the weight."""
        if self.anchor_weight <= 0 or full_target is None:
            return samples, y, weights
        weights = np.ones(len(samples)) if weights is None else np.asarray(weights, dtype=np.float64)
        anchor = self.anchor_weight / (1.0 - self.anchor_weight) * weights.sum()
        return (
            samples + [np.asarray(position_units)],
            np.vstack([y, np.reshape(full_target, (1, -1))]),
            np.append(weights, anchor),
        )

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
            _, se_s = laplace_standard_errors(
                counts,
                request.y,
                value,
                s,
                prior_sd=sd,
                weights=request.weights,
                value_sd=None if request.value_prior is None else request.value_prior[1],
                importance_basis=request.importance_basis,
            )
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
        w_design = self.design_weights(samples, len(position_units))
        diag: dict = self.design_diagnostics(len(samples), len(position_units))
        init, sd = yield from self._heldout_fit(
            samples, y, fit_idx, hold_idx, w_design, n_units, position_units, full_target, diag
        )
        # Final fit on every sample, warm-started: the held-out check costs no model calls.
        v_prior, basis = yield from self.design_priors(
            samples, y, np.arange(len(samples)), len(position_units), n_units, full_target
        )
        all_samples, y_all, weights = self._with_anchor(samples, y, w_design, position_units, full_target)
        final = FitRequest(all_samples, y_all, n_units, init, weights, sd, value_prior=v_prior, importance_basis=basis)
        if len(hold_idx):
            value, imp, info = yield final
        else:
            value, imp, info, sd = yield from self._prior_fit(final)
        if self.evidence:
            diag["prior_sd"] = sd
        self._training_checks(diag, samples, y, value, imp, position_units, full_target)
        diag.update({f"fit_{k}": v for k, v in info.items()})
        imp = normalise_importance(imp)
        se_v, se_s = laplace_standard_errors(
            count_matrix(all_samples, n_units),
            y_all,
            value,
            imp,
            prior_sd=sd,
            weights=weights,
            value_sd=None if v_prior is None else v_prior[1],
            importance_basis=basis,
        )
        return FitResult(value, imp, diag, value_se=se_v, importance_se=se_s)

    def _heldout_fit(self, samples, y, fit_idx, hold_idx, w_design, n_units, position_units, full_target, diag):
        """Generator: the fit without the held-out samples, judged on them (into ``diag``);
        returns the final fit's warm start (None without held-out samples) and the prior's sd."""
        if not len(hold_idx):
            diag["heldout_mse"] = diag["heldout_r2"] = float("nan")
            diag["n_heldout"] = 0
            return None, self.prior_sd
        # With prior_sd="evidence" the sd is chosen here, without the held-out samples,
        # so that the held-out R² judges the whole procedure; so is a prior on the values.
        v_prior, basis = yield from self.design_priors(samples, y, fit_idx, len(position_units), n_units, full_target)
        train, y_train, w_train = self._with_anchor(
            [samples[i] for i in fit_idx],
            y[fit_idx],
            None if w_design is None else w_design[fit_idx],
            position_units,
            full_target,
        )
        value, imp, info, sd = yield from self._prior_fit(
            FitRequest(train, y_train, n_units, None, w_train, value_prior=v_prior, importance_basis=basis)
        )
        hold = [samples[i] for i in hold_idx]
        pred, _ = predict_sparse(*pad_sequences(hold), value, imp)
        diag["heldout_mse"], diag["heldout_r2"] = mse_and_r2(y[hold_idx], pred)
        diag["n_heldout"] = int(len(hold_idx))
        return (value, imp), sd

    def _training_checks(self, diag, samples, y, value, imp, position_units, full_target) -> None:
        """The final fit judged on its own samples and, where the design holds deletions of
        the text, against the model's removal effects (into ``diag``)."""
        pred, _ = predict_sparse(*pad_sequences(samples), value, imp)
        diag["train_mse"], diag["train_r2"] = mse_and_r2(y, pred)
        dels = self.deletion_indices(len(samples), len(position_units))
        if len(dels) and full_target is not None:
            rho = removal_agreement([samples[i] for i in dels], y[dels], position_units, full_target, value, imp)
            diag["removal_agreement"] = rho
            diag["removal_agrees"] = None if not np.isfinite(rho) else bool(rho >= REMOVAL_AGREEMENT_MIN)
