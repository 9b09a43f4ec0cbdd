"""The torch fitting engine: one surrogate forward, batched fits, devices."""

import subprocess
import sys

import numpy as np
import pytest
import slalom_core as sc
import torch
from invariance import assert_same_answer
from slalom_core import fitting
from slalom_core.fitting import als, solvers
from slalom_core.fitting.objective import (
    PosteriorObjective,
    RidgeObjective,
    make_objective,
    mse_and_grads,
    pack_problems,
)
from slalom_core.surrogate import dense_slots, predict_sparse, surrogate_forward
from tiny_models import SlalomModel, random_slalom


def random_problem(rng, n_units, n_samples, n_out, max_len=4):
    samples = [rng.integers(0, n_units, size=rng.integers(1, max_len + 1)) for _ in range(n_samples)]
    idx, mask = fitting.pad_sequences(samples)
    return samples, idx, mask, rng.normal(size=(n_samples, n_out))


def test_surrogate_forward_batched_equals_per_text_and_definition():
    rng = np.random.default_rng(0)
    n_t, n_units, n_out = 3, 6, 2
    v = torch.tensor(rng.normal(size=(n_t, n_units, n_out)))
    s = torch.tensor(rng.normal(size=(n_t, n_units)))
    idx = torch.tensor(rng.integers(0, n_units, size=(n_t, 5, 4)))
    mult = torch.tensor((rng.random((n_t, 5, 4)) < 0.8).astype(float))
    mult[:, 0] = 0.0  # an all-padding row
    pred, alpha = surrogate_forward(v, s, idx, mult)
    for t in range(n_t):
        p1, a1 = surrogate_forward(v[t], s[t], idx[t], mult[t])
        # tol: float64 rounding: one batched forward against per-text forwards of the same numbers
        torch.testing.assert_close(pred[t], p1, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(alpha[t], a1, rtol=1e-12, atol=1e-12)
        for b in range(1, 5):
            w = mult[t, b] * torch.exp(s[t, idx[t, b]])
            want = (w[:, None] * v[t, idx[t, b]]).sum(0) / w.sum()
            # tol: float64 rounding of the surrogate's definition written out
            torch.testing.assert_close(pred[t, b], want, rtol=1e-12, atol=1e-12)
    assert torch.all(pred[:, 0] == 0) and torch.all(alpha[:, 0] == 0)
    # a dense count row gives the same output as the same occurrences in slots
    counts = torch.zeros(1, n_units, dtype=torch.float64)
    for u in [0, 2, 2, 5]:
        counts[0, u] += 1
    dense = surrogate_forward(v[0], s[0], *dense_slots(counts))[0]
    sparse = surrogate_forward(v[0], s[0], torch.tensor([[0, 2, 2, 5]]), torch.ones(1, 4, dtype=torch.float64))[0]
    # tol: float64 rounding: dense count slots and sparse sequences sum the same terms
    torch.testing.assert_close(dense, sparse, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("n_out", [1, 3])
def test_hand_written_gradients_match_autograd(n_out):
    rng = np.random.default_rng(n_out)
    problems = []
    for n_units, n_samples in [(5, 40), (9, 60)]:  # different sizes: padding in the batch
        _, idx, mask, y = random_problem(rng, n_units, n_samples, n_out)
        problems.append((idx, mask, y, n_units, rng.random(n_samples) + 0.5))
    batch = pack_problems(problems, torch.device("cpu"), torch.float64)
    for prior_sd in (0.5, 2.0, None):  # the posterior objective, and the ridge one (no prior)
        kind = "ridge" if prior_sd is None else "posterior"
        obj = make_objective(batch, kind=kind, l2_importance=1e-2, l2_value=1e-2, prior_sd=prior_sd)
        assert isinstance(obj, RidgeObjective if prior_sd is None else PosteriorObjective)
        theta = torch.tensor(rng.normal(size=(2, obj.n_val + batch.shape[1])))
        theta[:, obj.n_val :] *= batch.unit_mask  # padded units sit at s = 0
        theta[:, : obj.n_val] *= batch.unit_mask.repeat_interleave(n_out, dim=1)
        f, g, _ = obj(theta)
        x = theta.clone().requires_grad_(True)
        obj(x)[0].sum().backward()
        # tol: float64 rounding: analytic gradient against autograd of the same objective
        torch.testing.assert_close(g, x.grad, rtol=1e-9, atol=1e-11)
        # the MSE part against its finite-difference derivative, too
        value, imp = obj.unpack(theta)
        _, gv, gs = mse_and_grads(batch, value, imp)
        eps = 1e-6
        for u in (0, 3):
            e = torch.zeros_like(imp)
            e[:, u] = eps
            fd = (mse_and_grads(batch, value, imp + e)[0] - mse_and_grads(batch, value, imp - e)[0]) / (2 * eps)
            # tol: central finite differences: truncation O(eps^2) and rounding of the differenced losses
            torch.testing.assert_close(gs[:, u], fd, rtol=1e-5, atol=1e-9)


def test_preconditioner_is_the_gauss_newton_diagonal():
    """The L-BFGS variable scaling (under the prior) is diag(JᵀWJ) of the objective plus the priors' curvature."""
    rng = np.random.default_rng(7)
    problems = []
    for n_units, n_samples in [(5, 30), (8, 50)]:
        # distinct units per sample: there the slot-wise diagonal is exact
        samples = [rng.choice(n_units, size=rng.integers(1, 4), replace=False) for _ in range(n_samples)]
        problems.append((*fitting.pad_sequences(samples), rng.normal(size=(n_samples, 1)), n_units, None))
    batch = pack_problems(problems, torch.device("cpu"), torch.float64)
    for prior_sd in (0.5, 2.0):
        obj = make_objective(batch, kind="posterior", l2_importance=1e-2, l2_value=1e-2, prior_sd=prior_sd)
        theta = torch.tensor(rng.normal(size=(2, obj.n_val + batch.shape[1]))) * batch.unit_mask.repeat(1, 2)
        got = obj.curvature(theta)
        for t, (_, _, y, _, _) in enumerate(problems):
            n_rows = len(y)

            def pred(th, t=t, obj=obj, n_rows=n_rows):
                value, imp = obj.unpack(th.unsqueeze(0).expand(2, -1))
                return surrogate_forward(value[t], imp[t], batch.idx[t], batch.mult[t])[0][:n_rows, 0]

            jac = torch.autograd.functional.jacobian(pred, theta[t])  # (B, P)
            gn = 2.0 * (jac**2).sum(0) / len(y) * obj.scale[t]
            gn = gn / obj(theta)[2][t]
            gn[: obj.n_val] += 2.0 * obj.prior_v[t]
            gn[obj.n_val :] += 2.0 * obj.prior[t]
            real = torch.cat([batch.unit_mask[t], batch.unit_mask[t]]) > 0
            # tol: float64 rounding: the objective's gradient written out by hand
            torch.testing.assert_close(got[t][real], gn[real], rtol=1e-8, atol=1e-12)


@pytest.mark.invariance
def test_batched_fit_matches_separate_fits():
    """One optimisation over texts of different sizes gives each text its own answer."""
    rng = np.random.default_rng(1)
    problems = []
    for n_units in (3, 12, 30):
        v, s = random_slalom(n_units, seed=n_units)
        samples = [rng.integers(0, n_units, size=2) for _ in range(300)]
        y = sc.SlalomSurrogate(v, s).predict_sequences(samples)[:, None] + 0.05 * rng.normal(size=(300, 1))
        problems.append((*fitting.pad_sequences(samples), y, n_units))
    together = fitting.fit_gradient_batch(problems, prior_sd=0.5)
    for (idx, mask, y, n_units), (v_b, s_b, info_b) in zip(problems, together):
        v_1, s_1, info_1 = fitting.fit_gradient(idx, mask, y, n_units, prior_sd=0.5)
        assert info_b["converged"] and info_1["converged"]
        # the posterior is strictly convex here: parameters are identified
        # tol: strictly convex posterior: each fit stops at a scaled gradient <= the solver's
        # GRAD_TOL, over the prior's curvature (1/0.5^2), so within ~1e-4 of the optimum
        np.testing.assert_allclose(v_b, v_1, atol=1e-4)
        np.testing.assert_allclose(s_b - s_b.mean(), s_1 - s_1.mean(), atol=1e-4)
        p_b = predict_sparse(idx, mask, v_b, s_b)[0]
        p_1 = predict_sparse(idx, mask, v_1, s_1)[0]
        # tol: the same solver stops; predictions move less than the parameters (a weighted average of values)
        np.testing.assert_allclose(p_b, p_1, atol=1e-5)


def pair_samples(n_units: int, *, seed: int, n: int = 300) -> list[list[int]]:
    """Random pairs of distinct units (one unit for a one-unit text): the short samples'
    design, on which a fit's predictions are determined by its data."""
    rng = np.random.default_rng(seed)
    return [sorted(rng.choice(n_units, size=min(2, n_units), replace=False).tolist()) for _ in range(n)]


@pytest.mark.invariance
@pytest.mark.parametrize("method,fits", [("eff", 2), ("hybrid", 2)])
def test_explain_batch_fits_each_text_alone_as_a_loop_does(monkeypatch, method, fits):
    calls = []
    real = fitting.EffFitter.solve_batch

    def spy(self, requests, device=None):
        calls.append(len(requests))
        return real(self, requests, device)

    monkeypatch.setattr(fitting.EffFitter, "solve_batch", spy)
    v, s = random_slalom(30, seed=2)
    model = sc.TorchClassifier(SlalomModel(v, s))
    rng = np.random.default_rng(3)
    texts = [rng.integers(0, 30, size=n) for n in (5, 12, 25, 40)]
    exps = sc.explain_batch(model, texts, method=method, n_samples=400, seed=0, prior_sd=1.0)
    # eff, and hybrid's stage one: two fits per text (held-out, then final); hybrid's stage
    # two is linear algebra of the text's own. Each text's fit is solved alone, so that its scores do not depend
    # on which texts share its batch (padding changes float64 rounding in a flat valley).
    assert calls == [1] * fits * 4
    calls.clear()
    loop = [sc.explain(model, t, method=method, n_samples=400, seed=0, prior_sd=1.0) for t in texts]
    assert calls == [1] * fits * 4
    for a, b in zip(exps, loop):
        # Compare what the data determine, not the parameters: in the shallow valleys of
        # hybrid's objective the batched and the single fit stop at points whose importances
        # differ by ~1e-4 depending on the CPU's rounding, with the same predictions.
        # tol: r2 = 1 - mse / var; both held-out MSEs are ~1e-10 of a target variance ~1,
        # so the two r2 differ by far less than 1e-6
        assert a.diagnostics["heldout_r2"] == pytest.approx(b.diagnostics["heldout_r2"], abs=1e-6)
        pairs = pair_samples(a.surrogate.n_units, seed=9)
        gap = np.sqrt(np.mean((a.surrogate.predict_sequences(pairs) - b.surrogate.predict_sequences(pairs)) ** 2))
        # tol: on the same samples, the triangle inequality bounds the RMS gap of two fits by
        # the sum of their RMS residuals (train_mse); these pairs are fresh draws of the same
        # pair design, so the bound holds up to the residuals' sampling noise: a factor 3.
        residuals = np.sqrt(a.diagnostics["train_mse"]) + np.sqrt(b.diagnostics["train_mse"])
        assert gap <= 3 * residuals
        # tol: the full text, the same bound (hybrid fits near-full deletions too; eff's two
        # fits are the same computation and agree to rounding)
        assert abs(a.surrogate_output - b.surrogate_output) <= 3 * residuals
        assert a.diagnostics["heldout_r2"] > 0.99


@pytest.mark.invariance
@pytest.mark.parametrize(
    "method,opts", [("fidel", {}), ("fidel", {"solver": "als"}), ("eff", {"solver": "adam", "max_iter": 2000})]
)
def test_other_solvers_batched_match_loop(method, opts):
    v, s = random_slalom(10, seed=5)
    model = sc.TorchClassifier(SlalomModel(v, s))
    texts = [list(range(10)), [1, 2, 3, 3, 4], [0, 9, 8, 7, 6, 5, 5]]
    batch = (
        sc.explain_batch(model, texts, method=method, n_samples=300, seed=1, prior_sd=1.0, **opts)
        if "solver" not in opts or opts["solver"] != "als"
        else sc.explain_batch(model, texts, method=method, n_samples=300, seed=1, **opts)
    )
    kw = {} if opts.get("solver") == "als" else {"prior_sd": 1.0}
    loop = [sc.explain(model, t, method=method, n_samples=300, seed=1, **kw, **opts) for t in texts]
    for a, b in zip(batch, loop):
        assert a.diagnostics["heldout_r2"] > 0.99 and b.diagnostics["heldout_r2"] > 0.99
        # tol: adam and ALS stop on a relative decrease (EFF_TOL, ALS_TOL): batch and loop stop at other iterations
        assert a.diagnostics["heldout_r2"] == pytest.approx(b.diagnostics["heldout_r2"], abs=1e-4)
        # each score within a tenth of its standard error: what the data determine (tests/invariance.py)
        assert_same_answer(a, b)


def test_fitting_does_not_import_scipy_optimize():
    code = "import sys, slalom_core.fitting, slalom_core.api; print('scipy.optimize' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "False"


def test_bounds_hold_and_stationary_point_is_converged():
    # unit 0 dominates every pair: the data push s_0 − s_1 upwards without end, and a warm
    # start beyond the bounds is projected back
    samples = [np.array([0, 1])] * 50 + [np.array([0])] * 25 + [np.array([1])] * 25
    y = np.array([[1.0]] * 75 + [[-1.0]] * 25)
    idx, mask = fitting.pad_sequences(samples)
    init = (np.array([[1.0], [-1.0]]), np.array([30.0, -30.0]))
    v, s, info = fitting.fit_gradient(idx, mask, y, 2, init=init, l2_importance=0.0, l2_value=0.0)
    assert np.all(np.abs(s) <= fitting.IMPORTANCE_BOUND)
    np.testing.assert_allclose(s, [fitting.IMPORTANCE_BOUND, -fitting.IMPORTANCE_BOUND])
    # tol: the solver's stop with importances held at the bound: values then fit exactly to ~1e-10
    np.testing.assert_allclose(v[:, 0], [1.0, -1.0], atol=1e-8)
    # at the bound the gradient points outwards: not counted against convergence
    assert info["converged"] and info["grad_norm"] <= fitting.GRAD_TOL


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_fits_match_cpu_fits():
    rng = np.random.default_rng(4)
    v, s = random_slalom(20, seed=4)
    samples = [rng.integers(0, 20, size=2) for _ in range(400)]
    y = sc.SlalomSurrogate(v, s).predict_sequences(samples)[:, None]
    idx, mask = fitting.pad_sequences(samples)
    cpu = fitting.fit_gradient(idx, mask, y, 20, prior_sd=1.0)
    gpu = fitting.fit_gradient(idx, mask, y, 20, prior_sd=1.0, device="cuda")
    # tol: float64 on both devices: other reduction orders, then the solver's stop (~1e-5 on parameters of size ~1)
    np.testing.assert_allclose(gpu[0], cpu[0], atol=1e-4)
    assert gpu[2]["converged"]
    model = sc.TorchClassifier(SlalomModel(v, s))
    exps = sc.explain_batch(model, [list(range(20)), [3, 4, 5]], n_samples=400, seed=0, prior_sd=1.0, device="cuda")
    ref = sc.explain_batch(model, [list(range(20)), [3, 4, 5]], n_samples=400, seed=0, prior_sd=1.0)
    for a, b in zip(exps, ref):
        # (within the fits' gradient tolerance; hybrid's two stages add up to ~1e-5)
        np.testing.assert_allclose(a.surrogate_output, b.surrogate_output, atol=5e-5)
    assert model.module.value.device.type == "cpu"  # the model is given back where it was


@pytest.mark.parametrize("seed", [0, 1, 3])
def test_unregularised_fit_keeps_neutral_units_off_the_plateau(seed):
    """Without prior or ridge, a near-neutral unit's importance can be parked at s → −∞,
    where its weight and gradient vanish: a stationary plateau of worse fit. The paper's
    global fits (Table 6) use this objective; they must reach the good optimum."""
    rng = np.random.default_rng(seed)
    w = np.array([0.0, 0.0, 0.0, 0.0, 0.6, 1.0, 1.5, -0.6, -1.0, -1.5])
    samples = [rng.integers(0, 10, size=max(1, rng.binomial(30, 0.5))) for _ in range(3000)]
    y = np.array([[3 * np.tanh(w[s].sum() / 3)] for s in samples]) + 0.3 * rng.normal(size=(3000, 1))
    idx, mask = fitting.pad_sequences(samples)
    v, s, info = fitting.fit_gradient(idx, mask, y, 10, max_iter=1000, tol=1e-12, l2_importance=0.0, l2_value=0.0)
    s = s - s.mean()
    assert info["converged"]
    # the neutral words share one importance, below the decisive words' (none is parked)
    assert np.ptp(s[:4]) < 0.5, s
    assert s[:4].max() < s[[5, 6, 8, 9]].min(), s


def _two_loop(grad, pairs, gamma):
    """H·grad by Nocedal's two-loop recursion (H0 = gamma·I), pairs oldest first."""
    q = grad.clone()
    alphas = []
    for s, y in reversed(pairs):
        rho = 1.0 / float(y @ s)
        a = rho * float(s @ q)
        alphas.append((a, rho, s, y))
        q = q - a * y
    r = gamma * q
    for a, rho, s, y in reversed(alphas):
        b = rho * float(y @ r)
        r = r + s * (a - b)
    return r


def test_compact_lbfgs_direction_equals_the_two_loop_recursion():
    # Curvature pairs from a random SPD Hessian; in the compact form an invalid pair is
    # stored as zeros, and it must contribute nothing (the two-loop recursion skips it).
    gen = torch.Generator().manual_seed(0)
    p, k = 7, 4
    m = torch.randn(p, p, generator=gen, dtype=torch.float64)
    hess = m @ m.T + p * torch.eye(p, dtype=torch.float64)
    s_mem = torch.randn(k, p, generator=gen, dtype=torch.float64)
    y_mem = s_mem @ hess
    valid = torch.tensor([True, False, True, True])
    s_mem[~valid], y_mem[~valid] = 0.0, 0.0
    grad = torch.randn(p, generator=gen, dtype=torch.float64)
    gamma = float(s_mem[-1] @ y_mem[-1]) / float(y_mem[-1] @ y_mem[-1])
    got = solvers._lbfgs_direction(
        grad[None], s_mem[None], y_mem[None], valid[None], torch.tensor([gamma], dtype=torch.float64)
    )[0]
    pairs = [(s_mem[i], y_mem[i]) for i in range(k) if valid[i]]
    expected = _two_loop(grad, pairs, gamma)
    # tol: float64 rounding: the L-BFGS two-loop recursion written out
    torch.testing.assert_close(got, expected, rtol=1e-10, atol=1e-12)
    # and it is not the plain scaled gradient: the pairs change the direction.
    assert float((got - gamma * grad).abs().max()) > 1e-3


def test_als_importance_gradient_equals_autograd():
    rng = np.random.default_rng(3)
    n_units, n_out = 6, 2
    counts = torch.as_tensor(rng.integers(0, 3, size=(40, n_units)), dtype=torch.float64)
    counts[counts.sum(1) == 0, 0] = 1.0
    value = torch.as_tensor(rng.normal(size=(n_units, n_out)))
    y = torch.as_tensor(rng.normal(size=(40, n_out)))
    s = torch.as_tensor(rng.normal(size=n_units), dtype=torch.float64).requires_grad_(True)
    w = counts * torch.exp(s)
    a = w / w.sum(dim=1, keepdim=True)
    loss = 0.5 * ((a @ value - y) ** 2).sum()
    (expected,) = torch.autograd.grad(loss, s)
    got = als._importance_gradient(a.detach(), value, y)
    # tol: float64 rounding: the ALS importance gradient against autograd
    torch.testing.assert_close(got, expected, rtol=1e-10, atol=1e-12)


def test_the_objective_kind_is_explicit_and_says_how_it_is_solved():
    rng = np.random.default_rng(5)
    _, idx, mask, y = random_problem(rng, 6, 60, 1)
    batch = pack_problems([(idx, mask, y, 6, None)], torch.device("cpu"), torch.float64)
    ridge = make_objective(batch, kind="ridge", l2_importance=1e-3, l2_value=1e-3, prior_sd=None)
    posterior = make_objective(batch, kind="posterior", l2_importance=0.0, l2_value=0.0, prior_sd=0.5)
    # Only the posterior is preconditioned and stopped at an exact fit.
    assert (ridge.preconditioned, ridge.stops_when_exact) == (False, False)
    assert (posterior.preconditioned, posterior.stops_when_exact) == (True, True)
    # A kind that contradicts the prior given is refused, not silently reinterpreted.
    with pytest.raises(ValueError, match="ridge objective has no prior"):
        make_objective(batch, kind="ridge", l2_importance=1e-3, l2_value=1e-3, prior_sd=0.5)
    with pytest.raises(ValueError, match="needs the importances' prior"):
        make_objective(batch, kind="posterior", l2_importance=0.0, l2_value=0.0, prior_sd=None)
    with pytest.raises(ValueError, match="unknown objective"):
        fitting.fit_gradient(idx, mask, y, 6, objective="lasso")
    with pytest.raises(ValueError, match="ridge objective has no prior"):
        fitting.fit_gradient(idx, mask, y, 6, prior_sd=0.5, objective="ridge")
    # Left out, the kind follows prior_sd: the very same computation as naming it.
    for prior_sd, kind in ((None, "ridge"), (0.5, "posterior")):
        implied = fitting.fit_gradient(idx, mask, y, 6, prior_sd=prior_sd)
        named = fitting.fit_gradient(idx, mask, y, 6, prior_sd=prior_sd, objective=kind)
        np.testing.assert_array_equal(implied[0], named[0])
        np.testing.assert_array_equal(implied[1], named[1])


def test_fitters_declare_how_many_samples_they_score():
    assert sc.get_fitter("ana").samples_scored(7, 1000) == 13  # every unit alone, then U - 1 pairs
    assert sc.get_fitter("ana").samples_scored(1, 1000) == 1
    for method in ("eff-slope", "hybrid", "eff", "fidel"):
        assert sc.get_fitter(method).samples_scored(7, 1000) == 1000
