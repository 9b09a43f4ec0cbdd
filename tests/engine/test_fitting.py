"""Ground-truth recovery: a model that *is* a SLALOM over token ids."""

import warnings

import numpy as np
import pytest
import slalom_core as sc
import torch
from invariance import assert_same_answer
from slalom_core.fitting.objective import mse_and_grads, pack_problems
from tiny_models import SlalomModel, random_slalom, record_reads


def text_over(vocab: int, length: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    # every vocabulary id at least once, then random repeats
    ids = np.concatenate([np.arange(vocab), rng.integers(0, vocab, size=max(0, length - vocab))])
    return rng.permutation(ids)


@pytest.mark.parametrize("vocab", [3, 20, 200])
@pytest.mark.parametrize("n_classes", [1, 3])
def test_ana_recovers_parameters_exactly(vocab, n_classes):
    v, s = random_slalom(vocab, n_classes, seed=vocab)
    model = sc.TorchClassifier(SlalomModel(v, s))
    ids = text_over(vocab, vocab + 10, seed=1)
    exp = sc.explain(model, ids, method="ana")
    assert exp.diagnostics["model_evaluations"] == 2 * vocab - 1 + 2  # + the full text and the empty input
    assert exp.diagnostics["ana_invalid_pairs"] == 0
    pos_ids = np.array([t[0] for t in exp.token_ids])
    true_v = v[pos_ids]
    if n_classes > 1:
        true_v = true_v - true_v.mean(1, keepdims=True)
    # tol: the solver's stop on an exact SLALOM: parameters recovered to ~1e-6, 1e-4 leaves room for the prior's pull
    np.testing.assert_allclose(exp.value, true_v, atol=1e-4)
    s_text = s[np.unique(ids)]
    true_s = s[pos_ids] - s_text.mean()  # mean-zero over the text's unique tokens
    # tol: the solver's stop on an exact SLALOM, as for the values
    np.testing.assert_allclose(exp.importance, true_s, atol=1e-4)
    np.testing.assert_allclose(exp.lin, true_v * np.exp(true_s)[(...,) + (None,) * (true_v.ndim - 1)], atol=1e-4)


@pytest.mark.parametrize("method", ["eff", "fidel", "hybrid"])
@pytest.mark.parametrize("vocab", [3, 30, 120])
@pytest.mark.parametrize("n_classes", [1, 3])
def test_sampled_fits_reach_high_heldout_r2(method, vocab, n_classes):
    v, s = random_slalom(vocab, n_classes, seed=vocab + 1)
    model = sc.TorchClassifier(SlalomModel(v, s))
    ids = text_over(vocab, vocab + 20, seed=2)
    # fidel's deletion samples all contain most of the text, so each carries less
    # information about single units than eff's short samples: it needs more of them.
    n = max(600, (8 if method == "fidel" else 4) * vocab)
    if method == "hybrid":
        # its ~1 % of samples in context carry 75 % of the weight and count as few effective
        # samples: on 120 units with three classes the data outweigh the importances' prior
        # from about 20 of them (measured: held-out R² 0.83 at 600 samples, 0.93 at 1000, 1.0 at 2000)
        n = max(600, 16 * vocab)
    # eff: the generator draws s ~ N(0, 1), so the prior says so (the default, 0.25, is
    # tuned on real models and shrinks these s visibly at ~5 samples per unit).
    opts = {"prior_sd": 1.0}
    exp = sc.explain(model, ids, method=method, n_samples=n, seed=0, **opts)
    d = exp.diagnostics
    assert d["n_heldout"] > 0
    assert d["heldout_r2"] >= 0.99, d
    if method in ("eff", "hybrid"):
        # short samples identify the parameters: values match the truth too (a unit with
        # tiny importance next to heavy ones is seen only weakly, hence the median)
        pos_ids = np.array([t[0] for t in exp.token_ids])
        true_v = v[pos_ids] - (v[pos_ids].mean(1, keepdims=True) if n_classes > 1 else 0)
        # tol: sampling: a unit of tiny importance next to heavy ones is seen weakly (hence the median); values are of size ~1
        assert np.median(np.abs(exp.value - true_v)) < 0.02
        assert np.corrcoef(exp.value.ravel(), true_v.ravel())[0, 1] > 0.99


@pytest.mark.parametrize("design,singletons", [("balanced", False), ("random", True), ("balanced", True)])
def test_eff_designs_fit_a_true_slalom(design, singletons):
    v, s = random_slalom(40, seed=11)
    net = SlalomModel(v, s)
    ids = text_over(40, 60, seed=3)
    with record_reads(net) as reads:
        exp = sc.explain(
            sc.TorchClassifier(net),
            ids,
            method="eff",
            n_samples=400,
            seed=0,
            design=design,
            singletons=singletons,
            prior_sd=1.0,
        )
    assert exp.diagnostics["heldout_r2"] >= 0.99, exp.diagnostics
    # the text repeats ids, so some samples read alike: each distinct one is read once
    assert exp.diagnostics["model_evaluations"] == len(reads) == len(set(reads)) <= 402
    pos_ids = np.array([t[0] for t in exp.token_ids])
    assert np.corrcoef(exp.value, v[pos_ids])[0, 1] > 0.99


def test_eff_design_layouts():
    rng = np.random.default_rng(0)
    fitter = sc.get_fitter("eff", design="balanced", singletons=True)
    samples = fitter.design(rng, np.arange(7), 7, 50)
    assert len(samples) == 50
    # the first U samples are the units alone, in order; the rest are pairs
    assert [s.tolist() for s in samples[:7]] == [[u] for u in range(7)]
    assert all(len(s) == 2 for s in samples[7:])
    # balanced: 43 pairs = 86 slots over 7 units -> 12 or 13 each
    counts = np.bincount(np.concatenate(samples[7:]), minlength=7)
    assert counts.min() >= 12 and counts.max() <= 13
    with pytest.raises(ValueError, match="design=.sobol. is invalid"):
        sc.get_fitter("eff", design="sobol")


def _is_subsequence(sample, text) -> bool:
    it = iter(text.tolist())
    return all(any(u == t for t in it) for u in sample.tolist())


def test_hybrid_design_layout():
    rng = np.random.default_rng(0)
    pos = np.array([0, 1, 2, 1, 3, 4, 5, 6, 7, 8])  # 10 positions over 9 units
    fitter = sc.get_fitter("hybrid", context_share=0.1)
    samples = fitter.design(rng, pos, 9, 100)
    assert len(samples) == 100
    # 5 single tokens (distinct units), then triples of distinct units, then 10 deletion
    # samples: the text in order with 1 to 5 positions removed
    assert all(len(x) == 1 for x in samples[:5]) and len({int(x[0]) for x in samples[:5]}) == 5
    assert all(len(x) == 3 and len(set(x)) == 3 for x in samples[5:90])
    assert all(5 <= len(x) <= 9 and _is_subsequence(x, pos) for x in samples[90:])
    assert fitter.n_singles(100, len(pos), 9) == 5 and fitter.n_singles(1000, len(pos), 9) == 9  # at most one per unit
    one = fitter.design(rng, np.array([0]), 1, 10)  # a one-position text has no context to sample
    assert len(one) == 10 and fitter.n_context(10, 1) == 0 and fitter.n_singles(10, 1, 1) == 0
    for bad in ("deletion_share", "context_weight", "value_sd", "importance_slope", "slope_axis", "anchor_weight"):
        with pytest.raises(TypeError, match=bad):
            sc.get_fitter("hybrid", **{bad: 0.1})
    with pytest.raises(ValueError, match="context_share=1.5 is invalid"):
        sc.get_fitter("hybrid", context_share=1.5)
    with pytest.raises(ValueError, match="leave no triples"):
        sc.get_fitter("hybrid", context_share=0.6, single_share=0.4)


@pytest.mark.parametrize("n_tokens", [30, 200])
def test_hybrid_recovers_a_true_slalom_with_its_default_options(n_tokens):
    """Proposition 5.2 with the default options: distinct tokens, values and importances drawn
    independently, nothing changed. The fit is the model: its values, its importances' ranking,
    its output on sub-texts it never saw, and the length law at its identity."""
    from scipy.stats import spearmanr

    v, s = random_slalom(400, seed=21)
    net = SlalomModel(v, s)
    ids = np.random.default_rng(8).choice(400, size=n_tokens, replace=False)
    exp = sc.explain(sc.TorchClassifier(net), ids.tolist(), seed=0)
    pos_ids = np.array([t[0] for t in exp.token_ids])
    d = exp.diagnostics
    # tol: the model is exact (float64) and the triples are fitted to a relative MSE of 1e-10
    # (EXACT_FIT); a token of tiny weight next to heavy ones is seen weakly, hence the median
    # (values are of size ~1.5)
    assert np.median(np.abs(exp.value - v[pos_ids])) < 1e-3 and np.abs(exp.value - v[pos_ids]).max() < 0.02
    assert spearmanr(exp.importance, s[pos_ids])[0] >= 0.999
    assert exp.surrogate.law.is_identity  # the law pays nothing on exact data (in_context.LAW_MIN_GAIN)
    assert (
        d["value_scale"][0] == pytest.approx(1.0, abs=1e-3) and abs(d["value_shift"][0]) < 1e-3
    )  # tol: exact data, fitted to EXACT_FIT
    rng = np.random.default_rng(3)
    subs = [np.sort(rng.choice(n_tokens, size=int(k * n_tokens), replace=False)) for k in (0.5, 0.7, 0.9)]
    for sub in [*subs, np.array([0]), np.array([0, 5, 9])]:
        truth = float(net(torch.as_tensor(ids[sub])[None], torch.ones(1, len(sub)))[0, 0])
        assert exp.predict(sub) == pytest.approx(truth, abs=1e-3)  # tol: as above
    singles = min(50, n_tokens)
    assert (
        d["n_context"] == 50
        and d["design"] == f"{singles} single tokens + {950 - singles} short samples + 50 deletions"
    )
    assert d["importance_measured"] == "alone"


def test_a_prior_cannot_overrule_exact_data():
    """However tight the importances' prior, data that a SLALOM fits exactly win: the prior
    only breaks ties that the data leave open."""
    from scipy.stats import spearmanr

    v, s = random_slalom(60, seed=5)
    ids = list(range(60))
    for sd in (0.1, 0.25):
        exp = sc.explain(sc.TorchClassifier(SlalomModel(v, s)), ids, seed=1, prior_sd=sd)
        assert spearmanr(exp.importance, s)[0] >= 0.999, sd
        # tol: exact float64 data fitted to a relative MSE of 1e-10 (EXACT_FIT)
        np.testing.assert_allclose(exp.importance, s - s.mean(), atol=1e-3)


def test_a_prior_on_the_values_holds_or_pulls_them():
    """sd 0 holds the values at the centre exactly (only s is fitted); a small sd keeps them
    near it; a wide one lets the data decide, as without it."""
    from slalom_core.fitting import fit_gradient_batch, pad_sequences

    v, s = random_slalom(8, seed=4)
    rng = np.random.default_rng(0)
    samples = [rng.integers(0, 8, size=3) for _ in range(300)]
    idx, mask = pad_sequences(samples)
    y = SlalomModel(v, s)(torch.as_tensor(idx), torch.as_tensor(mask)).double().numpy()
    free = fit_gradient_batch([(idx, mask, y, 8)], prior_sd=1.0)[0]
    centre = v[:, None] + 0.5
    fits = {
        sd: fit_gradient_batch([(idx, mask, y, 8)], prior_sd=1.0, value_priors=[(centre, sd)])[0]
        for sd in (0.0, 0.01, 100.0)
    }
    # tol: float64 rounding of the solver's rescaling: a held value is not a free parameter
    np.testing.assert_allclose(fits[0.0][0], centre, rtol=0, atol=1e-12)  # held (up to the rescaling)
    assert fits[0.0][2]["converged"]
    # tol: a prior of sd 0.01 holds values within a few sds (0.05 = 5 sd)
    assert np.abs(fits[0.01][0] - centre).max() < 0.05
    np.testing.assert_allclose(fits[100.0][0], free[0], atol=1e-3)
    np.testing.assert_allclose(free[0][:, 0], v, atol=1e-3)
    with pytest.raises(ValueError, match="needs the posterior"):
        fit_gradient_batch([(idx, mask, y, 8)], prior_sd=None, value_priors=[(centre, 0.1)])


def test_eff_prior_shrinks_noisy_importances_but_not_exact_ones():
    v, s = random_slalom(30, seed=7)
    ids = text_over(30, 40, seed=4)
    exact = sc.TorchClassifier(SlalomModel(v, s))
    e = sc.explain(exact, ids, method="eff", n_samples=600, seed=0, prior_sd=0.25)
    # exact targets: the profiled noise goes to zero and with it the prior's pull
    assert e.diagnostics["heldout_r2"] > 0.99

    class Noisy(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = SlalomModel(v, s)

        def forward(self, ids, mask=None):
            out = self.inner(ids, mask)
            g = torch.Generator().manual_seed(int(ids.sum()))
            return out + 2.0 * torch.randn(out.shape, generator=g, dtype=out.dtype)

    noisy = sc.TorchClassifier(Noisy())
    weak = sc.explain(noisy, ids, method="eff", n_samples=300, seed=0, l2_importance=1e-3)
    prior = sc.explain(noisy, ids, method="eff", n_samples=300, seed=0)
    assert np.std(prior.importance) < 0.7 * np.std(weak.importance)
    assert prior.diagnostics["heldout_r2"] > weak.diagnostics["heldout_r2"]
    with pytest.raises(ValueError, match="prior_sd"):
        sc.get_fitter("eff", prior_sd=0)
    with pytest.raises(ValueError, match="l2_importance"):
        sc.get_fitter("eff", l2_importance="big")


def test_adam_solver_also_fits():
    v, s = random_slalom(15, seed=3)
    exp = sc.explain(
        sc.TorchClassifier(SlalomModel(v, s)),
        text_over(15, 30, 0),
        method="eff",
        solver="adam",
        max_iter=3000,
        n_samples=600,
        seed=0,
    )
    assert exp.diagnostics["heldout_r2"] > 0.99


def test_fit_als_never_increases_loss_and_converges():
    rng = np.random.default_rng(0)
    v, s = random_slalom(12, seed=5)
    samples = [rng.choice(12, size=rng.integers(3, 12)) for _ in range(300)]
    counts = np.stack([np.bincount(q, minlength=12) for q in samples]).astype(float)
    y = np.array([(np.exp(s[q]) * v[q]).sum() / np.exp(s[q]).sum() for q in samples])[:, None]
    losses = [sc.fit_als(counts, y, max_iter=k)[2]["loss"] for k in (1, 3, 10, 200)]
    assert all(b <= a + 1e-15 for a, b in zip(losses, losses[1:]))
    assert losses[-1] < 1e-6
    assert sc.fit_als(counts, y, max_iter=200)[2]["converged"]


def test_unknown_method_and_option():
    model = sc.TorchClassifier(SlalomModel(*random_slalom(4)))
    with pytest.raises(ValueError, match="unknown method"):
        sc.explain(model, [0, 1, 2], method="lime")
    with pytest.raises(TypeError, match="invalid option"):
        sc.explain(model, [0, 1, 2], method="eff", not_an_option=3)


class NoisySlalom(torch.nn.Module):
    """A true SLALOM plus independent Gaussian noise on every output (a seeded stream, so
    that runs repeat; a sample drawn twice gets two independent draws, as the Laplace
    approximation assumes)."""

    def __init__(self, v, s, sd):
        super().__init__()
        self.inner, self.sd = SlalomModel(v, s), sd
        self.gen = torch.Generator().manual_seed(0)

    def forward(self, ids, mask):
        out = self.inner(ids, mask)
        return out + self.sd * torch.randn(out.shape, generator=self.gen, dtype=out.dtype)


@pytest.mark.parametrize("method", ["eff"])
def test_standard_errors_cover_the_truth(method):
    """Laplace standard errors: the truth lies within 2 SE where the fit says determined.

    Only eff: on fidel's deletion samples (weights ~1/U, a curved valley of v against s) the
    linearisation undercovers; measured 36 % of the importances within 2 SE at 1500 samples
    on this problem (docs/results.md §10.3), so fidel's SEs are not claimed to cover.
    """
    v, s = random_slalom(12, seed=21)
    ids = list(range(12))
    model = sc.TorchClassifier(NoisySlalom(v, s, 0.3), deterministic=False)  # every sample a fresh draw
    opts = {"sample_length": (1, 3)} if method == "eff" else {}
    exp = sc.explain(model, ids, method=method, n_samples=1500, seed=0, prior_sd=1.0, reference=0.0, **opts)
    true_s = s[ids] - s[ids].mean()
    assert np.all(exp.importance_se > 0) and np.all(exp.value_se > 0)
    det = exp.importance_determined
    assert det.sum() >= 6
    z_s = np.abs(exp.importance - true_s) / exp.importance_se
    z_v = np.abs(exp.value - v[ids]) / exp.value_se
    assert np.mean(z_s[det] <= 2.0) >= 0.8, z_s
    assert np.mean(z_v <= 2.0) >= 0.8, z_v
    # the SEs are not vacuous: far below the prior where determined
    assert np.median(exp.importance_se[det]) < 0.5
    if method == "eff":
        from scipy.stats import spearmanr

        assert spearmanr(exp.importance, true_s)[0] >= 0.9


@pytest.mark.parametrize("prior_sd", [None, 0.5])
def test_standard_errors_match_a_finite_difference_hessian(prior_sd):
    """The Gauss-Newton curvature behind the SEs is that of the profiled objective at the fit.

    Without a prior the softmax's shift leaves a flat direction (the eigen-decomposition
    path); with one the precision is positive definite (the Cholesky path).
    """
    rng = np.random.default_rng(0)
    samples = [rng.integers(0, 5, size=2) for _ in range(300)]
    v, s = random_slalom(5, seed=4)
    counts = sc.fitting.count_matrix(samples, 5)
    y = sc.SlalomSurrogate(v, s).predict(counts)[:, None] + 0.1 * rng.normal(size=(300, 1))
    idx, mask = sc.fitting.pad_sequences(samples)
    fv, fs, _ = sc.fit_gradient(idx, mask, y, 5, prior_sd=None, l2_importance=0.0, l2_value=0.0, tol=1e-14)
    se_v, se_s = sc.laplace_standard_errors(counts, y, fv, fs - fs.mean(), prior_sd=prior_sd)
    # brute force: Hessian of SSE/(2σ²) by finite differences of the analytic gradient, in
    # the mean-zero-s subspace, then invert
    sigma2 = float(np.mean((sc.SlalomSurrogate(fv[:, 0], fs).predict(counts)[:, None] - y) ** 2))

    batch = pack_problems([(idx, mask, y, 5, None)], torch.device("cpu"), torch.float64)

    def grad(theta):
        # the engine's hand-written MSE gradient (itself checked against autograd)
        t = torch.from_numpy(theta)
        _, gv, gs = mse_and_grads(batch, t[None, :5, None], t[None, 5:])
        return np.concatenate([gv[0, :, 0].numpy(), gs[0].numpy()]) * y.size / (2 * sigma2)

    theta = np.concatenate([fv[:, 0], fs - fs.mean()])
    h = np.zeros((10, 10))
    for j in range(10):
        e = np.zeros(10)
        e[j] = 1e-5
        h[:, j] = (grad(theta + e) - grad(theta - e)) / 2e-5
    if prior_sd is not None:
        h[5:, 5:] += np.eye(5) / prior_sd**2
    basis = np.linalg.qr(np.concatenate([np.zeros((5, 1)), np.ones((5, 1))]), mode="complete")[0][:, 1:]
    cov = basis @ np.linalg.inv(basis.T @ ((h + h.T) / 2) @ basis) @ basis.T
    # tol: the engine's SEs use its own curvature at the solver's stop, this is the exact Hessian at the truth: 5 %
    np.testing.assert_allclose(se_v[:, 0], np.sqrt(np.diag(cov)[:5]), rtol=0.05)
    np.testing.assert_allclose(se_s, np.sqrt(np.diag(cov)[5:]), rtol=0.05)


# ----------------------------------------------------------------------------------------
# prior_sd="evidence": the importances' prior chosen from the data
# ----------------------------------------------------------------------------------------
def spread_slalom(importance_sd: float, seed: int = 1, vocab: int = 25):
    rng = np.random.default_rng(seed)
    v, s = rng.normal(0, 2.0, vocab), rng.normal(0, importance_sd, vocab)
    return v, s - s.mean()


# fidel's deletions of one 25-unit text pin importances less than eff's short samples:
# even sd = 1 leaves its slope at 0.69, so less of the shrinkage can be undone there.
@pytest.mark.parametrize("method,undone", [("eff", 0.5), ("fidel", 0.4)])
def test_evidence_prior_follows_the_spread_of_the_importances(method, undone):
    """Importances that spread widely get a wide prior (and are not shrunk); none, a narrow one."""
    opts = {"sample_length": (1, 3)} if method == "eff" else {}
    ids = list(range(25))
    chosen, slopes = {}, {}
    for spread in (1.5, 0.0):
        v, s = spread_slalom(spread)
        model = sc.TorchClassifier(NoisySlalom(v, s, 0.1), deterministic=False)
        for sd in (0.25, "evidence"):
            exp = sc.explain(model, ids, method=method, n_samples=1000, seed=0, reference=0.0, prior_sd=sd, **opts)
            if sd == "evidence":
                chosen[spread] = exp.diagnostics["prior_sd"]
            if spread:
                slopes[sd] = np.polyfit(s, exp.importance, 1)[0]
    assert 0.7 <= chosen[1.5] <= 3.0, chosen  # the truth's sd is 1.5 (1.3 in this draw)
    assert chosen[0.0] < 0.25, chosen
    # the fixed sd 0.25 shrinks the spread importances; the chosen sd much less
    assert abs(slopes["evidence"] - 1) < (1 - undone) * abs(slopes[0.25] - 1), slopes


@pytest.mark.invariance
def test_evidence_prior_is_per_text_and_batching_free():
    """In one batched optimisation each text gets its own sd, as it would alone."""
    models = {}
    for spread in (1.5, 0.2):
        v, s = spread_slalom(spread, seed=3)
        models[spread] = (v, s)
    # one model over two vocabularies: ids < 25 spread widely, ids >= 25 barely
    v = np.concatenate([models[1.5][0], models[0.2][0]])
    s = np.concatenate([models[1.5][1], models[0.2][1]])
    model = sc.TorchClassifier(SlalomModel(v, s))
    texts = [list(range(25)), list(range(25, 50))]
    kw = dict(method="eff", n_samples=800, seed=0, reference=0.0, prior_sd="evidence")
    batch = sc.explain_batch(model, texts, **kw)
    loop = [sc.explain(model, t, **kw) for t in texts]
    sds = [e.diagnostics["prior_sd"] for e in batch]
    assert sds[0] > 2 * sds[1], sds
    for a, b in zip(batch, loop):
        # tol: the evidence re-fits stop at the solver's tolerance; batch and loop sum in other orders
        assert a.diagnostics["prior_sd"] == pytest.approx(b.diagnostics["prior_sd"], rel=1e-3)
        # each score within a tenth of its standard error: what the data determine (tests/invariance.py)
        assert_same_answer(a, b, ("value", "lin", "contribution", "importance"))


def test_prior_sd_option_is_checked():
    for bad in ("auto", -1.0, 0, True):
        with pytest.raises(ValueError, match="prior_sd"):
            sc.get_fitter("eff", prior_sd=bad)
        with pytest.raises(ValueError, match="prior_sd"):
            sc.get_fitter("fidel", prior_sd=bad)
    assert sc.get_fitter("fidel", prior_sd="evidence").evidence


def test_standard_errors_under_a_prior_on_the_values():
    """A prior on the values narrows their SEs and those of the importances; held values
    (sd 0) have none, and the importances' SEs are then the limit of an ever tighter prior."""
    from slalom_core.fitting import count_matrix, laplace_standard_errors, pad_sequences

    v, s = random_slalom(6, seed=8)
    rng = np.random.default_rng(1)
    samples = [rng.integers(0, 6, size=rng.integers(1, 4)) for _ in range(200)]
    counts = count_matrix(samples, 6)
    idx, mask = pad_sequences(samples)
    exact = SlalomModel(v, s)(torch.as_tensor(idx), torch.as_tensor(mask)).double().numpy()
    y = exact + 0.1 * rng.standard_normal(exact.shape)
    s0 = s - s.mean()
    free_v, free_s = laplace_standard_errors(counts, y, v[:, None], s0, prior_sd=1.0)
    some_v, some_s = laplace_standard_errors(counts, y, v[:, None], s0, prior_sd=1.0, value_sd=0.05)
    held_v, held_s = laplace_standard_errors(counts, y, v[:, None], s0, prior_sd=1.0, value_sd=0.0)
    tight_v, tight_s = laplace_standard_errors(counts, y, v[:, None], s0, prior_sd=1.0, value_sd=1e-7)
    assert np.all(some_v < free_v) and np.all(some_v < 0.05)
    assert np.all(held_s <= some_s + 1e-12) and np.all(some_s <= free_s + 1e-12)
    np.testing.assert_array_equal(held_v, 0.0)
    # tol: value_sd=1e-7 holds values to ~1e-7, which moves the importance SEs by far less than 1e-4 of their size
    np.testing.assert_allclose(tight_s, held_s, rtol=1e-4)


# ----------------------------------------------------------------------------------------
# The default (hybrid): what its few heavily weighted context samples may and may not decide
# ----------------------------------------------------------------------------------------
def test_effective_samples_counts_observations_not_weight():
    from slalom_core.fitting.objective import effective_samples

    assert effective_samples(None, 50) == 50.0
    assert effective_samples(np.full(50, 3.0), 50) == pytest.approx(50.0)
    # 960 light samples and 40 that carry three quarters of the weight: ~70, not 1000
    w = np.r_[np.full(960, 0.25 / 960), np.full(40, 0.75 / 40)]
    assert 60 < effective_samples(w, 1000) < 80
    assert effective_samples(w * 7.0, 1000) == pytest.approx(effective_samples(w, 1000))


def test_heavy_context_samples_cannot_single_out_an_importance():
    """Long samples that disagree with the pairs (the model reads long texts otherwise): no
    importance explains that, so none may run off. Counting the 40 samples' weight as 750
    observations let one importance reach 15 prior sds (3.8 here), called significant."""
    from slalom_core.fitting import count_matrix, laplace_standard_errors, pad_sequences
    from slalom_core.fitting.gradient import fit_gradient_batch

    rng = np.random.default_rng(0)
    n_units = 120
    v = rng.normal(0, 1, n_units)
    samples = [rng.integers(0, n_units, 2) for _ in range(960)]
    samples += [np.sort(rng.choice(n_units, size=rng.integers(60, 120), replace=False)) for _ in range(40)]
    y = np.array([v[x].mean() for x in samples]) + 0.1 * rng.normal(size=len(samples))
    y[960:] += 1.0 + 0.3 * rng.normal(size=40)
    w = np.r_[np.full(960, 0.25 / 960), np.full(40, 0.75 / 40)] * 1000
    idx, mask = pad_sequences(samples)
    fv, fs, info = fit_gradient_batch(
        [(idx, mask, y[:, None], n_units)], prior_sd=0.25, weights=[w], value_priors=[(v[:, None], 0.1)]
    )[0]
    s = fs - fs.mean()
    assert info["converged"]
    # tol: the prior (sd 0.25) keeps importances within about two prior sds of 0
    assert np.abs(s).max() < 0.5  # two prior sds
    _, se = laplace_standard_errors(
        count_matrix(samples, n_units), y[:, None], fv, s, prior_sd=0.25, weights=w, value_sd=0.1
    )
    assert np.all(np.abs(s) < 2 * se)  # and none is called significant


class _ReadsLongTextsOtherwise(torch.nn.Module):
    """A SLALOM on short inputs that adds 1.5 log-odds once more than 12 tokens are present."""

    def __init__(self, v, s):
        super().__init__()
        self.inner = SlalomModel(v, s)

    def forward(self, ids, mask):
        out = self.inner(ids, mask)
        return out + 1.5 * (mask.sum(dim=1, keepdim=True) > 12).to(out.dtype)


@pytest.mark.parametrize("method", ["eff-slope", "hybrid"])
def test_default_top_tokens_do_not_depend_on_the_seed(method):
    """Five strongly polar tokens among 75 near-neutral ones, one of them repeated ten times;
    the model's long-text output is not a SLALOM's. The top-5 by |contribution| are the same
    at every seed and never the repeated neutral token (before the effective-sample prior,
    hybrid gave 4 of the top 5 to it at seeds 0 and 2). eff-slope's are the five polar
    tokens; the default's hold the three that agree with the model's move on the text (its
    slope axis gives the weight to them: a polar token against the move takes less)."""
    rng = np.random.default_rng(3)
    v = rng.normal(0, 0.3, 80)
    v[:5] = [3.0, -2.8, 2.5, -2.2, 2.0]
    s = 0.5 * np.abs(v) + 0.1 * rng.normal(size=80)
    # token 5 is a near-neutral word repeated ten times (as `the`, `it` in a review)
    ids = rng.permutation(np.r_[np.arange(80), rng.integers(6, 80, 30), np.full(10, 5)])
    model = sc.TorchClassifier(_ReadsLongTextsOtherwise(v, s))
    tops = []
    for seed in range(3):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", sc.SlalomFitWarning)
            exp = sc.explain(model, ids, method=method, n_samples=1000, seed=seed, reference=0.0, output="logits")
        top = np.argsort(-np.abs(exp.scores("contribution")))[:5]
        tops.append(sorted(int(exp.token_ids[i][0]) for i in top))
    assert tops[0] == tops[1] == tops[2] and 5 not in tops[0], tops
    assert exp.model_output > exp.base_value  # the model moves up: tokens 0, 2, 4 agree with it
    assert {0, 2, 4} <= set(tops[0]) if method == "hybrid" else tops[0] == [0, 1, 2, 3, 4]


def test_eff_slope_importance_errors_cover_the_truth():
    """On noisy true SLALOMs whose importances follow |value| (as eff-slope's prior expects)
    plus a token's own deviation, ±2 SE covers the true mean-zero importance of ~85 % of the
    tokens, and their z-scores spread like N(0, 1) (sd ≤ 1.6)."""
    cover, spread = [], []
    for seed in range(3):
        rng = np.random.default_rng(seed)
        v = rng.normal(0, 1.5, 40)
        s = 0.8 * np.abs(v) + 0.25 * rng.normal(size=40)
        ids = rng.permutation(np.r_[np.arange(40), rng.integers(0, 40, 20)])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", sc.SlalomFitWarning)
            exp = sc.explain(
                sc.TorchClassifier(NoisySlalom(v, s, 0.3), deterministic=False),
                ids,
                method="eff-slope",
                n_samples=1000,
                seed=0,
                reference=0.0,
                output="logits",
            )
        units = np.array([t[0] for t in exp.token_ids])
        _, first = np.unique(units, return_index=True)
        truth = s[units[first]] - s[units[first]].mean()
        z = (exp.importance[first] - truth) / exp.importance_se[first]
        cover.append(np.mean(np.abs(z) <= 2))
        spread.append(np.std(z))
    assert np.mean(cover) >= 0.8, cover
    assert max(spread) <= 1.6, spread


def test_default_importance_errors_hold_across_seeds():
    """The default's standard errors say how far another seed's importance may lie: the
    seed-to-seed differences over their combined SE spread with sd ≤ 1.5 (1 when calibrated;
    below 1, conservative). They are not a coverage of a SLALOM's true importances: the
    default's prior (a slope along each token's effect towards the text's output) pulls the
    importances of a SLALOM that does not follow it, a bias no SE covers (docs/results.md §22)."""
    rng = np.random.default_rng(0)
    v = rng.normal(0, 1.5, 40)
    s = 0.8 * (np.abs(v) + v) + 0.25 * rng.normal(size=40)
    ids = rng.permutation(np.r_[np.arange(40), rng.integers(0, 40, 20)])
    model = sc.TorchClassifier(NoisySlalom(v, s, 0.3), deterministic=False)
    runs = []
    for seed in range(3):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", sc.SlalomFitWarning)
            exp = sc.explain(model, ids, n_samples=1000, seed=seed, reference=0.0, output="logits")
        _, first = np.unique(np.array([t[0] for t in exp.token_ids]), return_index=True)
        runs.append((exp.importance[first], exp.importance_se[first]))
    z = [(a - b) / np.sqrt(sa**2 + sb**2) for i, (a, sa) in enumerate(runs) for (b, sb) in runs[i + 1 :]]
    assert np.std(np.concatenate(z)) <= 1.5


def test_hybrid_is_the_default():
    assert sc.DEFAULT_METHOD == "hybrid"
    fitter = sc.get_fitter(sc.DEFAULT_METHOD)
    assert isinstance(fitter, sc.HybridFitter) and fitter.sample_length == 3
    # 5 % of the budget in context, never fewer than min_context, never the whole budget
    assert fitter.n_context(1000, 150) == 50 and fitter.n_context(50, 150) == 10 and fitter.n_context(5, 150) == 4
    assert fitter.n_context(1000, 1) == 0  # a one-position text has no context to sample


def test_eff_slope_takes_no_context_options():
    fitter = sc.get_fitter("eff-slope")
    assert isinstance(fitter, sc.EffSlopeFitter) and fitter.sample_length == 3 and fitter.value_sd is None
    samples = fitter.design(np.random.default_rng(0), np.arange(40), 40, 200)
    # triples of distinct units (a set: replacement perturbations can show it), no context
    assert len(samples) == 200 and all(len(x) == 3 and len(set(x.tolist())) == 3 for x in samples)
    # a text with too few distinct triples to pin its 2U − 1 parameters gets shorter sets too
    short = fitter.design(np.random.default_rng(0), np.arange(4), 4, 200)
    assert {len(x) for x in short} == {1, 2, 3} and all(len(set(x.tolist())) == len(x) for x in short)
    for bad in ("context_share", "min_context", "anchor_weight", "max_delete_fraction"):
        with pytest.raises(TypeError, match=bad):
            sc.get_fitter("eff-slope", **{bad: 0.1})
    with pytest.raises(ValueError, match="importance_slope=True are priors"):
        sc.get_fitter("eff-slope", l2_importance=0.1)
    v, s = random_slalom(12, seed=3)
    model = sc.TorchClassifier(SlalomModel(v, s))
    exp = sc.explain(model, list(range(12)), method="eff-slope", n_samples=300, seed=0, reference=0.0)
    assert exp.diagnostics["method"] == "eff-slope"
    # a true SLALOM with importances unrelated to |v|: the slope is fitted near 0, nothing lost
    from scipy.stats import spearmanr

    assert spearmanr(exp.importance, s - s.mean())[0] > 0.9


def test_shared_options_default_to_the_stated_constants():
    """A default is stated once (fitting/constants.py); a layer's own ``tol`` follows the policy there."""
    import inspect

    from slalom_core.fitting import constants as c
    from slalom_core.fitting.sampled import SampledFitter

    shared = {
        "holdout_fraction": c.HOLDOUT_FRACTION,
        "max_iter": c.MAX_ITER,
        "prior_sd": c.PRIOR_SD,
        "check_samples": c.CHECK_SAMPLES,
        "solver": c.SOLVER,
        "learning_rate": c.LEARNING_RATE,
        "l2_importance": c.L2_IMPORTANCE,
        "l2_value": c.RIDGE_WEIGHT,
        "max_delete_fraction": c.MAX_DELETE_FRACTION,
    }
    tol = {
        SampledFitter: c.FIT_TOL,
        sc.EffFitter: c.EFF_TOL,
        sc.HybridFitter: c.SLOPE_TOL,
        sc.EffSlopeFitter: c.SLOPE_TOL,
        sc.FidelFitter: None,  # ALS_TOL, for solver="als" only
        sc.fit_gradient: c.FIT_TOL,
        sc.fitting.fit_gradient_batch: c.FIT_TOL,
        sc.fit_als: c.FIT_TOL,
    }
    for obj, expected_tol in tol.items():
        params = inspect.signature(obj).parameters
        assert params["tol"].default == expected_tol, obj
        for name, value in shared.items():
            # the gradient functions fit the ridge objective unless given a prior; the
            # fitters' l2_importance="auto" is the prior
            if name in params and not (name in ("l2_importance", "prior_sd") and not inspect.isclass(obj)):
                assert params[name].default == (c.ALS_MAX_ITER if obj is sc.fit_als else value), (obj, name)


def test_fitters_declare_whether_their_samples_are_short():
    """What a caller batches by (the bench gives short samples a larger batch): read from the
    samples each fitter really draws, not from its name."""
    from slalom_core.fitting import get_fitter

    rng_units = np.arange(60)
    for method, opts in [("eff", {}), ("eff-slope", {}), ("ana", {}), ("fidel", {}), ("hybrid", {}),
                         ("hybrid", {"context_share": 0.0}), ("eff", {"deletion_share": 0.2})]:  # fmt: skip
        fitter = get_fitter(method, **opts)
        gen = fitter.steps(np.random.default_rng(0), rng_units, 60, 200, np.zeros(1))
        longest = max(len(s) for s in next(gen))
        assert fitter.samples_short == (longest <= 3), (method, opts, longest)


# ----------------------------------------------------------------------------------------
# The removal check: the surrogate's removal scores against the model's own deletions
# ----------------------------------------------------------------------------------------
def _deletions_of(v, s, text, n, seed):
    from slalom_core.sampling import deletion_neighbourhood

    model = SlalomModel(v, s)
    dels = deletion_neighbourhood(np.random.default_rng(seed), np.asarray(text), n)

    def out(seq):
        ids = torch.as_tensor([list(seq)])
        return model(ids, torch.ones_like(ids, dtype=torch.float64)).numpy()[0]

    return dels, np.array([out(d) for d in dels]), out(text)


def test_removal_agreement_is_high_on_a_true_slalom_and_negative_when_deletions_go_the_other_way():
    from slalom_core.fitting.checks import REMOVAL_AGREEMENT_MIN, removal_agreement

    v, s = random_slalom(20, seed=4)
    text = list(range(20))
    dels, y, full = _deletions_of(v, s, text, 30, seed=0)
    # the true parameters: removal's first-order sum ranks the true drops almost perfectly
    # (not exactly: several deleted tokens interact through the softmax)
    rho = removal_agreement(dels, y[:, None], np.array(text), np.atleast_1d(full), v[:, None], s)
    assert rho > 0.9
    # a model whose deletions move the opposite way (one that accumulates evidence where the
    # surrogate averages it) is caught
    flipped = 2 * full - y  # the model drops by −(full − y): every drop negated
    rho = removal_agreement(dels, flipped[:, None], np.array(text), np.atleast_1d(full), v[:, None], s)
    assert rho < -0.9 < REMOVAL_AGREEMENT_MIN
    # too few deletions to say anything: NaN, not a number that looks like evidence
    assert np.isnan(removal_agreement(dels[:4], y[:4, None], np.array(text), np.atleast_1d(full), v[:, None], s))


def test_a_design_with_deletions_records_the_removal_check():
    v, s = random_slalom(15, seed=5)
    clf = sc.TorchClassifier(SlalomModel(v, s))
    exp = sc.explain(clf, list(range(15)), method="hybrid", n_samples=600, seed=0, reference=0.0)
    d = exp.diagnostics
    assert d["removal_agrees"] is True and d["removal_agreement"] >= sc.fitting.checks.REMOVAL_AGREEMENT_MIN
    # a design of short samples alone has no deletions to check against
    exp = sc.explain(clf, list(range(15)), method="eff-slope", n_samples=600, seed=0, reference=0.0)
    assert "removal_agrees" not in exp.diagnostics


def test_hybrid_recovers_a_slalom_under_a_length_law():
    """A model that *is* a SLALOM under a known length law (outputs amplified away from a pivot
    as the text grows), default options: the fit recovers the law, each token's value alone
    (not the triples' inflated ones) and the importances' ranking, and predicts every scale."""
    from scipy.stats import spearmanr

    v, s = random_slalom(400, seed=5)
    law = sc.LengthLaw(exponent=0.6, curvature=-0.04, pivot=0.5)
    net = SlalomModel(v, s, law=law)
    ids = np.random.default_rng(2).choice(400, size=120, replace=False)
    exp = sc.explain(sc.TorchClassifier(net), ids.tolist(), seed=0)
    pos_ids = np.array([t[0] for t in exp.token_ids])
    fitted = exp.surrogate.law
    # tol: the data are exact; the law's two exponents come from a Nelder–Mead refinement
    # stopped at xatol 1e-4, which moves c, d and p by a few 1e-4 through the normal equations
    assert fitted.exponent == pytest.approx(0.6, abs=2e-3) and fitted.curvature == pytest.approx(-0.04, abs=1e-3)
    assert fitted.pivot == pytest.approx(0.5, abs=2e-2)
    assert np.median(np.abs(exp.value - v[pos_ids])) < 1e-2  # tol: as above, values of size ~1.5
    assert spearmanr(exp.importance, s[pos_ids])[0] >= 0.999
    rng = np.random.default_rng(4)
    for k in (1, 3, 40, 90, 120):
        sub = np.sort(rng.choice(120, size=k, replace=False))
        truth = float(net(torch.as_tensor(ids[sub])[None], torch.ones(1, k))[0, 0])
        assert exp.predict(sub) == pytest.approx(truth, abs=2e-2)  # tol: as above, outputs of size ~3
