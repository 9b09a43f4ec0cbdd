"""The surrogate and its scores: formulas checked against direct computation."""

import numpy as np
import pytest
import torch
from slalom_core import SlalomSurrogate
from slalom_core import scores as sc_scores
from slalom_core.surrogate import counts_from_sequences


def direct_slalom(v, s, seq):
    w = np.exp(s[seq])
    return (w[:, None] * v[seq]).sum(0) / w.sum() if v.ndim == 2 else (w * v[seq]).sum() / w.sum()


def test_predict_matches_definition_and_counts_repeats():
    rng = np.random.default_rng(1)
    v, s = rng.normal(size=6), rng.normal(size=6)
    sur = SlalomSurrogate(v, s)
    seqs = [[0, 1, 1, 1], [5], [2, 3, 4, 2]]
    got = sur.predict_sequences(seqs)
    want = [direct_slalom(v, sur.importance, np.array(q)) for q in seqs]
    # tol: float64 rounding of the surrogate's definition written out
    np.testing.assert_allclose(got, want, rtol=1e-12)
    # a token occurring 3 times weighs 3x: differs from the unique-token version
    assert not np.isclose(got[0], direct_slalom(v, sur.importance, np.array([0, 1])))


def test_importance_normalised_to_gamma_and_shift_invariant():
    v, s = np.array([1.0, -2.0, 0.5]), np.array([3.0, 1.0, 2.0])
    a = SlalomSurrogate(v, s)
    b = SlalomSurrogate(v, s + 7.0, gamma=1.5)
    # tol: float64 rounding of a normalisation (a sum of 3 terms)
    assert abs(a.importance.sum()) < 1e-12
    assert abs(b.importance.sum() - 1.5) < 1e-12
    c = counts_from_sequences([[0, 1, 2, 2]], 3)
    np.testing.assert_allclose(a.predict(c), b.predict(c))


def test_multiclass_outputs_are_centred():
    rng = np.random.default_rng(2)
    v = rng.normal(size=(5, 3))
    v -= v.mean(1, keepdims=True)
    sur = SlalomSurrogate(v, rng.normal(size=5))
    out = sur.predict(counts_from_sequences([[0, 1], [2, 3, 4]], 5))
    assert out.shape == (2, 3)
    # tol: float64 rounding of centred values summed over 3 classes
    np.testing.assert_allclose(out.sum(1), 0, atol=1e-12)


def test_gradient_of_soft_removal_equals_alpha_v_minus_f():
    """Eq. 5 / App. B.7: d/dλ_i of F with weights λ_i exp(s_i) at λ = 1 is α_i (v_i − F)."""
    rng = np.random.default_rng(3)
    v, s = rng.normal(size=7), rng.normal(size=7)
    lam = torch.ones(7, dtype=torch.float64, requires_grad=True)
    vt, st = torch.tensor(v), torch.tensor(s)
    w = lam * torch.exp(st)
    f = (w * vt).sum() / w.sum()
    f.backward()
    alpha = sc_scores.attention(s)
    # tol: float64 rounding: the analytic gradient against autograd
    np.testing.assert_allclose(lam.grad.numpy(), alpha * (v - f.item()), rtol=1e-10)
    # lin drops the -F term (paper Eq. 65): equal to v*exp(s), not to the gradient
    np.testing.assert_allclose(sc_scores.lin(v, s), v * np.exp(s))
    assert not np.allclose(sc_scores.lin(v, s) / np.exp(s).sum(), lam.grad.numpy())


def test_removal_is_the_surrogate_output_difference():
    rng = np.random.default_rng(4)
    v, s = rng.normal(size=(6, 2)), rng.normal(size=6)
    rem = sc_scores.removal(v, s)
    full = direct_slalom(v, s, np.arange(6))
    for i in range(6):
        rest = np.delete(np.arange(6), i)
        # tol: float64 rounding of the removal score written out
        np.testing.assert_allclose(rem[i], full - direct_slalom(v, s, rest), rtol=1e-10)


def test_removal_of_only_token_uses_empty_value():
    rem = sc_scores.removal(np.array([2.0]), np.array([0.0]), empty_value=0.5)
    assert rem[0] == pytest.approx(1.5)


def test_contribution_sums_to_output():
    rng = np.random.default_rng(5)
    v, s = rng.normal(size=9), rng.normal(size=9)
    assert sc_scores.contribution(v, s).sum() == pytest.approx(direct_slalom(v, s, np.arange(9)))
    # ranks exactly like lin (same positive factor per text)
    assert (np.argsort(sc_scores.contribution(v, s)) == np.argsort(sc_scores.lin(v, s))).all()


@pytest.mark.parametrize("n", [1, 2, 5, 9])
def test_exact_shapley_efficiency_and_symmetry(n):
    rng = np.random.default_rng(n)
    v, s = rng.normal(size=n), rng.normal(size=n)
    phi = sc_scores.shapley(v, s, empty_value=0.3)
    assert phi.sum() == pytest.approx(direct_slalom(v, s, np.arange(n)) - 0.3)
    # identical players get identical values
    v2, s2 = np.append(v, v[0]), np.append(s, s[0])
    phi2 = sc_scores.shapley(v2, s2)
    assert phi2[0] == pytest.approx(phi2[-1])


def test_sampled_shapley_close_to_exact_and_efficient():
    rng = np.random.default_rng(7)
    v, s = rng.normal(size=(10, 3)), rng.normal(size=10)
    exact = sc_scores.shapley(v, s)
    approx = sc_scores.shapley(v, s, exact_max_positions=0, n_permutations=4000, seed=1)
    # tol: float64 rounding: sampled permutations are efficient exactly, their sum is the full text's
    np.testing.assert_allclose(approx.sum(0), direct_slalom(v, s, np.arange(10)), atol=1e-10)
    assert np.abs(approx - exact).max() < 0.05


def test_the_scores_of_a_surrogate_under_a_length_law_are_those_of_its_predictions():
    """removal, contribution and Shapley values read the surrogate's length law: each is what
    ``predict`` says of the text and its sub-texts (here a law far from the identity)."""
    from slalom_core import LengthLaw, scores

    rng = np.random.default_rng(3)
    law = LengthLaw(exponent=0.7, curvature=-0.05, pivot=0.4)
    v, s = rng.normal(0, 1.5, 7), rng.normal(0, 1, 7)
    sur = SlalomSurrogate(v, s, law=law)

    def f(keep):
        return float(sur.predict(np.isin(np.arange(7), keep).astype(float)[None])[0])

    full = f(range(7))
    # tol: float64 rounding of sums of 7 terms of size ~10
    assert scores.contribution(v, sur.importance, law).sum() == pytest.approx(full, abs=1e-12)
    removal = scores.removal(v, sur.importance, law=law)
    for i in range(7):
        assert removal[i] == pytest.approx(full - f([j for j in range(7) if j != i]), abs=1e-12)  # tol: as above
    exact = scores.shapley(v, sur.importance, law=law)
    assert exact.sum() == pytest.approx(full, abs=1e-12)  # tol: as above (efficiency, F(∅) = 0)
    sampled = scores.shapley(v, sur.importance, law=law, exact_max_positions=0, n_permutations=4000, seed=0)
    # tol: sampling: 4000 antithetic permutations of 7 players; the exact values are ~1 in size
    assert np.abs(sampled - exact).max() < 0.05
    assert f([]) == 0.0 and f([2]) == pytest.approx(v[2], abs=1e-12)  # tol: rounding; A(1) = 1: a value alone
