"""SLALOM-ana: 2U − 1 model evaluations, closed form (exact on a true SLALOM)."""

from __future__ import annotations

import numpy as np

from ..surrogate import normalise_importance
from .fitter import Fitter
from .protocol import FitResult


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
    samples_short = True  # units alone and pairs

    def samples_scored(self, n_units: int, n_samples: int) -> int:
        # Its design is fixed by the text: every unit alone, then U - 1 pairs.
        return 2 * int(n_units) - 1

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
