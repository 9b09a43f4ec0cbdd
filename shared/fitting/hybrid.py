"""SLALOM-hybrid: eff's short samples for the values, a few samples of the text in context for
the importances and the text's own output, one gradient fit over both."""

from __future__ import annotations

import numpy as np

from ..options import Interval, OneOf, check_options
from ..sampling import deletion_neighbourhood, short_sequences, subset_sequences
from .eff import EffFitter
from .fitter import _given
from .protocol import FitRequest

#: The samplers of the text in context (see ``design``).
_CONTEXTS = ("deletions", "subsets")


class HybridFitter(EffFitter):
    """Short samples plus a few samples of the text in context, fitted together.

    Pairs of the text's tokens are the cheapest forward passes there are and pin down the
    values, but they say little about how the tokens share weight inside the text: on
    120–250-token reviews an eff surrogate misses the model's own output on the text by
    96 % of its signal, and its importances are at chance on human attention. SLALOM-fidel's
    deletion samples carry that signal, at 20–30x the cost. This design spends most of the
    budget on pairs and a small share on samples that keep the text's context, and gives
    those samples (and the text itself, ``anchor_weight``) a fixed share of the weight so
    that the many pairs do not drown them.

    No SLALOM fits both the model's pairs and its long texts: a joint fit reaches the text's
    output by bending the values, and loses 0.10–0.13 deletion AOPC. So by default the values
    are fitted to the pairs first and then kept near that fit (``value_sd``), while the
    importances take the context.

    The few context samples cannot pin ~100 importances one by one (20 samples, however
    heavily weighted, are 20 observations: the prior counts them so, see
    :func:`~slalom_core.fitting.objective.effective_samples`). What they do pin is one
    number: how strongly weight follows the size of a token's effect. So by default
    (``importance_slope``) the importances' prior is centred on β·|v| (v the pairs' values)
    with the slope β fitted, and each token's own deviation from that line keeps the
    prior's sd. Strongly polar tokens then take the weight that brings the surrogate to the
    model's output on the text, every seed the same ones; an importance the data do not
    determine keeps a standard error near the prior's. docs/results.md has the measured
    front (two classifiers, against eff, the reference implementation and the previous
    design).

    Args:
        context_share: share of ``n_samples`` spent on samples in context.
        context: "deletions" (the text with up to ``max_delete_fraction`` of its positions
            deleted, fidel's design) or "subsets" (``k`` positions kept in order, ``k``
            log-uniform from 2 to n − 1; shorter, so cheaper, see
            :func:`~slalom_core.sampling.subset_sequences`).
        context_weight: share of the total weight (before the anchor's) carried by the
            context samples; None: each sample counts the same.
        max_delete_fraction: for ``context="deletions"``.
        value_sd: None: values and importances are fitted to all samples together. A
            number: the values are first fitted to the short samples alone (as eff fits
            them: each token's effect without its context), and the joint fit then keeps
            them near that fit, with a Gaussian prior of this sd (log-odds); 0 holds them
            there and fits only the importances to the context.
        importance_slope: True: the importances' prior is N(β·|v|, prior_sd²) with β
            fitted (a flat prior on β) and v the pairs' values; False: N(0, prior_sd²).
            Default None: True wherever ``value_sd`` is a number (the pairs' values give
            the axis), False for ``value_sd=None``.
        anchor_weight: share of the total weight given to the full text itself.
        tol: as :class:`EffFitter`, tighter by default: the slope and the held values
            leave long shallow valleys where a looser stop ends at points that differ
            between a batch and a loop by 1e-4 (measured on a tiny random BERT).
        sample_length, solver, prior_sd, …: as :class:`EffFitter` (the short part).

    Example:
        >>> fitter = HybridFitter(context_share=0.05)
        >>> fitter.name, len(fitter.design(np.random.default_rng(0), np.arange(30), 30, 100))
        ('hybrid', 100)
    """

    name = "hybrid"
    OPTIONS = {
        **{k: v for k, v in EffFitter.OPTIONS.items() if k not in ("design", "singletons", "deletion_share")},
        "context_share": (Interval(float, 0, 1, "neither"),),
        "context": (OneOf(*_CONTEXTS),),
        "context_weight": (Interval(float, 0, 1, "neither"), OneOf(None)),
        "max_delete_fraction": (Interval(float, 0, 1, "right"),),
        "value_sd": (Interval(float, 0, None), OneOf(None)),
        "importance_slope": (OneOf(True, False, None),),
    }

    def __init__(
        self,
        context_share: float = 0.04,
        context: str = "deletions",
        context_weight: float | None = 0.75,
        max_delete_fraction: float = 0.5,
        value_sd: float | None = 0.1,
        importance_slope: bool | None = None,
        anchor_weight: float = 0.1,
        sample_length: int | tuple[int, int] = 2,
        solver: str = "lbfgs",
        holdout_fraction: float = 0.1,
        max_iter: int = 500,
        tol: float = 1e-10,
        learning_rate: float = 0.05,
        l2_importance: float | str = "auto",
        prior_sd: float | str = 0.25,
        l2_value: float = 1e-3,
        check_samples: int = 0,
    ) -> None:
        check_options(self.name, self.OPTIONS, _given(locals(), self.OPTIONS))
        if value_sd is not None and l2_importance != "auto":
            # The values' prior lives in the posterior objective; a ridge fit has none.
            raise ValueError(
                f"method 'hybrid': value_sd={value_sd!r} needs the prior on the importances "
                "(l2_importance='auto'); pass value_sd=None for a ridge fit"
            )
        super().__init__(
            sample_length=sample_length,
            solver=solver,
            holdout_fraction=holdout_fraction,
            max_iter=max_iter,
            tol=tol,
            learning_rate=learning_rate,
            l2_importance=l2_importance,
            prior_sd=prior_sd,
            l2_value=l2_value,
            anchor_weight=anchor_weight,
            check_samples=check_samples,
        )
        self.context_share = float(context_share)
        self.context = context
        self.context_weight = None if context_weight is None else float(context_weight)
        self.max_delete_fraction = float(max_delete_fraction)
        self.value_sd = None if value_sd is None else float(value_sd)
        if importance_slope is None:  # on wherever the pairs' values are there to give the axis
            importance_slope = self.value_sd is not None
        self.importance_slope = bool(importance_slope)
        if self.importance_slope and self.value_sd is None:
            raise ValueError(
                "method 'hybrid': importance_slope=True needs value_sd (the pairs' values give the slope's axis)"
            )

    def importance_basis(self, value_prior):
        if not self.importance_slope or value_prior is None:
            return None
        # The size of each token's effect alone, |v| from the pairs (over classes: its norm).
        return np.linalg.norm(np.asarray(value_prior[0], dtype=np.float64), axis=1)

    def n_context(self, n_samples: int, n_positions: int) -> int:
        """How many of ``n_samples`` are drawn in context (none for a one-position text)."""
        if n_positions < 2:
            return 0
        return min(max(1, int(round(self.context_share * n_samples))), n_samples - 1)

    def design(self, rng, position_units, n_units, n_samples):
        n_ctx = self.n_context(n_samples, len(position_units))
        short = short_sequences(rng, n_units, n_samples - n_ctx, self.sample_length)
        if not n_ctx:
            return short
        if self.context == "deletions":
            return short + deletion_neighbourhood(rng, position_units, n_ctx, self.max_delete_fraction)
        return short + subset_sequences(rng, position_units, n_ctx)

    def _value_prior(self, samples, y, idx, n_positions, n_units):
        if self.value_sd is None:
            return None
        n_short = len(samples) - self.n_context(len(samples), n_positions)
        short = idx[idx < n_short]
        value, _imp, _info = yield FitRequest([samples[i] for i in short], y[short], n_units)
        return value, self.value_sd

    def design_weights(self, samples, n_positions):
        n_ctx = self.n_context(len(samples), n_positions)
        if self.context_weight is None or not n_ctx:
            return None
        # The design puts its context samples last; each group gets its share of the weight.
        n_short = len(samples) - n_ctx
        w = np.full(len(samples), (1.0 - self.context_weight) / n_short)
        w[n_short:] = self.context_weight / n_ctx
        return w * len(samples)

    def design_diagnostics(self, n_samples, n_positions):
        n_ctx = self.n_context(n_samples, n_positions)
        return {
            "design": f"{n_samples - n_ctx} short samples + {n_ctx} {self.context}",
            "n_context": n_ctx,
            "context_weight": self.context_weight if n_ctx else None,
        }
