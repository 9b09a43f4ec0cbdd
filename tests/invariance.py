"""Comparing two fits of the same data by what the data determine.

Two runs of one explanation (batched or alone, other batch sizes, a constant added to the
model's output, another runtime) read the model's outputs with other float32 rounding. A fit
whose objective is flat in some direction (a token's value and its importance trading off,
an importance the few samples in context do not pin) may then stop at points that differ
along that direction by far more than the rounding: by how much depends on the CPU's SIMD
kernels and thread count, so a fixed tolerance that one CPU meets fails on another.

What the data do determine is how far each parameter may move: its standard error (the fit's
Laplace approximation, :attr:`SlalomExplanation.value_se` and ``importance_se``). A flat
direction has a wide SE. So two answers are "the same answer" when every score differs by
less than a small share ``KAPPA`` of its own standard error, propagated from the
parameters' SEs to the score (first order, worst case over signs). Anything that changes
the data themselves (a text's samples read with its neighbours', a lost offset, another
seed) moves scores by about one SE or more and is caught.
"""

from __future__ import annotations

import numpy as np
import slalom_core as sc

#: The share of a standard error two fits of the same data may differ by. A tenth of an SE
#: is invisible in anything the fit can tell (the Laplace posterior's density at one answer
#: is exp(-0.1²/2) > 0.99 of its density at the other); data that differ (another seed, a
#: neighbour's samples, an offset left in) move scores by ~1 SE.
KAPPA = 0.1
#: The data's own rounding, relative to the outputs' scale: a float32 network's outputs on the
#: same rows differ across batch shapes and kernels by a few ulps (2^-23) per layer; 64 ulps
#: cover a 6-layer BERT. A parameter the data determine exactly (a one-token text's value is
#: f(text) − f(empty)) moves by that much, whatever its SE.
FLOAT32_FLOOR = 64 * 2.0**-23
#: The scores compared by default: the additive ones and the importances.
DEFAULT_NAMES = ("value", "lin", "removal", "contribution", "shapley", "importance")


def data_rounding(exp: sc.SlalomExplanation) -> float:
    """How far the model's float32 outputs behind ``exp`` may move with the rounding of
    another batch shape or kernel (:data:`FLOAT32_FLOOR` of the outputs' scale)."""
    return FLOAT32_FLOOR * (1 + float(np.max(np.abs(exp.model_output))) + float(np.max(np.abs(exp.base_value))))


def _closed_form_gain(exp: sc.SlalomExplanation) -> float:
    """How much a closed-form fit (``ana``) amplifies its data's rounding: values are
    differences of two outputs (gain 2); importances are logs of ratios of such differences,
    over the gaps between the text's values (gain ~ 1/gap)."""
    v = np.unique(np.round(np.asarray(exp.value, dtype=np.float64).ravel(), 12))
    gaps = np.diff(v)
    return 2.0 + (float(1.0 / gaps.min()) if len(gaps) else 0.0)


def score_tolerances(exp: sc.SlalomExplanation, names: tuple[str, ...], kappa: float = KAPPA) -> dict[str, np.ndarray]:
    """Per-position tolerance of each score when ``exp`` is compared with another fit of the
    same data: ``kappa`` times the score's standard error propagated from the fit's value
    and importance SEs (first order, summed over the parameters without cancellation, so
    never smaller than the SE of a combination), plus the data's own rounding
    (:func:`data_rounding`). A fit without standard errors (``ana``: closed form, no flat
    directions) gets the data's rounding times its amplification.
    """
    floor = data_rounding(exp)
    if exp.value_se is None or exp.importance_se is None:
        gain = _closed_form_gain(exp)
        return {name: np.full(np.shape(exp.scores(name)), gain * floor) for name in names}
    v, s = np.asarray(exp.value, dtype=np.float64), np.asarray(exp.importance, dtype=np.float64)
    v_se, s_se = np.asarray(exp.value_se, dtype=np.float64), np.asarray(exp.importance_se, dtype=np.float64)
    rows = {name: sc.SCORES[name] for name in names}
    spread = {name: np.zeros(np.shape(exp.scores(name))) for name in names}
    for unit in np.unique(exp.unit_index):
        at = exp.unit_index == unit  # a unit's positions move together: one parameter
        for which, se in (("v", v_se[at][0]), ("s", s_se[at][0])):
            for col, one_se in enumerate(np.atleast_1d(se)):
                if not one_se > 0:
                    continue  # a held parameter: it does not move
                step = 1e-3 * one_se
                up_v, up_s, down_v, down_s = v.copy(), s.copy(), v.copy(), s.copy()
                if which == "v":
                    idx = (at, col) if v.ndim == 2 else at
                    up_v[idx] += step
                    down_v[idx] -= step
                else:
                    up_s[at] += step
                    down_s[at] -= step
                for name, row in rows.items():
                    up = np.asarray(row.compute(up_v, up_s), dtype=np.float64)
                    down = np.asarray(row.compute(down_v, down_s), dtype=np.float64)
                    spread[name] += np.abs(up - down) / (2 * step) * one_se
    return {name: kappa * spread[name] + floor for name in names}


def worst_ratio(
    a: sc.SlalomExplanation, b: sc.SlalomExplanation, names: tuple[str, ...], kappa: float = KAPPA
) -> dict[str, float]:
    """Per score, the largest gap between ``a`` and ``b`` over its tolerance (the wider of
    the two fits'): at most 1 for two fits of the same data."""
    tol_a, tol_b = score_tolerances(a, names, kappa), score_tolerances(b, names, kappa)
    out = {}
    for name in names:
        gap = np.abs(np.asarray(a.scores(name)) - np.asarray(b.scores(name)))
        out[name] = float(np.max(gap / np.maximum(tol_a[name], tol_b[name])))
    return out


def assert_same_answer(
    a: sc.SlalomExplanation,
    b: sc.SlalomExplanation,
    names: tuple[str, ...] = DEFAULT_NAMES,
    kappa: float | None = None,
) -> None:
    """Assert that ``a`` and ``b`` (two fits of the same text on data that differ by
    rounding) give every score in ``names`` within its tolerance (:func:`score_tolerances`;
    ``kappa`` defaults to :data:`KAPPA`)."""
    kappa = KAPPA if kappa is None else kappa
    assert a.tokens == b.tokens
    ratios = worst_ratio(a, b, names, kappa)
    over = {name: round(r, 3) for name, r in ratios.items() if not r <= 1}
    assert not over, f"scores differ by more than {kappa} of their standard error (gap / tolerance): {over}"
