"""The partial rank correlation of the importance study, on cases with known answers."""

from __future__ import annotations

import numpy as np
from slalom_core.experiments import evaluation as ev
from slalom_core.experiments.benchmarks.importance_signal import nb_metrics, partial_spearman, rank_residual


def test_partial_spearman_removes_a_shared_cause():
    rng = np.random.default_rng(0)
    z = rng.normal(size=400)
    x, y = z + 0.3 * rng.normal(size=400), z + 0.3 * rng.normal(size=400)
    assert ev.spearman(x, y) > 0.85  # raw: strongly related through z
    # tol: sampling noise of 400 draws: a Spearman correlation's sd is ~0.05
    assert abs(partial_spearman(x, y, z)) < 0.12  # given z: nothing left


def test_partial_spearman_keeps_a_link_that_z_hides():
    rng = np.random.default_rng(1)
    z, w = rng.normal(size=400), rng.normal(size=400)
    x, y = z + w, -z + w  # z pulls them apart, w together: raw ≈ 0, given z ≈ +1
    # tol: sampling noise of 400 draws: a Spearman correlation's sd is ~0.05
    assert abs(ev.spearman(x, y)) < 0.25
    assert partial_spearman(x, y, z) > 0.8
    # A second conditioning variable that carries nothing changes little.
    # tol: sampling noise: a conditioning variable that carries nothing moves the estimate by far less than its sd
    assert abs(partial_spearman(x, y, [z, np.abs(z)]) - partial_spearman(x, y, z)) < 0.05


def test_rank_residual_is_orthogonal_to_the_given_ranks():
    rng = np.random.default_rng(2)
    x, z = rng.normal(size=50), rng.normal(size=50)
    r = rank_residual(x, z)
    # tol: float64 rounding: a rank residual is orthogonal to the ranks up to sums of 50 terms
    assert abs(r.sum()) < 1e-9 and abs(r @ ev.average_ranks(z)) < 1e-6


def test_nb_metrics_sees_importance_that_only_follows_the_value():
    # importance = |value| exactly, |value| tracks |NB|: raw correlation high, and nothing
    # of importance is left once |value| is accounted for (undefined partial, nan).
    rng = np.random.default_rng(3)
    ids = list(range(100, 160))
    nb = {t: float(x) for t, x in zip(ids, rng.normal(size=60))}
    value = np.array([nb[t] for t in ids]) + 0.2 * rng.normal(size=60)
    m = nb_metrics(ids, value, np.abs(value), nb)
    assert m["imp~|NB|"] > 0.7 and m["imp~|value|"] == 1.0
    assert np.isnan(m["imp~|NB| given |value|"])
    # Importance that follows |NB| by itself keeps its signal given the value.
    m = nb_metrics(ids, value, np.abs([nb[t] for t in ids]) + rng.normal(size=60) * 0.05, nb)
    assert m["imp~|NB| given |value|"] > 0.5
