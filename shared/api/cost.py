"""What a call costs a model that bills per call: the estimate before, the usage after."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from ..fitting import Fitter
from ..models import ModelAdapter, Segmentation
from .call import DEFAULT_METHOD, DEFAULT_N_SAMPLES, CallOptions, CheckedCall, ReferenceOption, check_call, text_seeds
from .plan import TextLike, TextPlan, prepare_texts

__all__ = ["UsageMeter", "planned_cost", "estimate_cost"]


class UsageMeter:
    """What a call costs a model that bills per call (an API black box), else nothing.

    Made before the first model call: the call's estimate is checked against the adapter's
    budget then, so an over-budget call is refused before it spends anything. After the
    call, :meth:`call_usage` is what it spent (the adapter's running totals, differenced).
    """

    def __init__(self, adapter: ModelAdapter, call: CheckedCall, plans: list[TextPlan], seeds: list[int]) -> None:
        self.adapter = adapter
        self.before = adapter.usage()
        self.estimate = None
        if self.before is not None:
            self.estimate = planned_cost(adapter, call.fitter, plans, call.n_samples, seeds, call.reference)
            what = f"method {call.fitter.name!r} with n_samples={call.n_samples} on {len(plans)} text(s)"
            adapter.check_budget(self.estimate, f"{what}, seed={call.seed}")

    def call_usage(self) -> dict | None:
        """Calls made, cache hits, input tokens, retries and the estimate (None: a free model)."""
        if self.before is None:
            return None
        after = self.adapter.usage() or {}
        usage = {k: v - self.before.get(k, 0) for k, v in after.items() if isinstance(v, int)}
        asked = usage.get("calls", 0) + usage.get("cache_hits", 0)
        usage["hit_rate"] = usage.get("cache_hits", 0) / asked if asked else 0.0
        usage["estimate"] = self.estimate
        return usage


def planned_cost(adapter, fitter, plans, n_samples, seeds, fixed_reference) -> dict[str, int]:
    """The adapter's cost estimate for the samples explain_batch will score (no model call).

    For a deterministic model the sequences are those the driver reads: each text's
    distinct ones once (its full text included), the input with no tokens once for all.
    """
    known: list = []
    shared: set[tuple[int, ...]] = set()
    if fixed_reference is None:
        empty = adapter.empty_sequence()
        if empty is not None:
            known.append(empty)
            shared.add(tuple(empty))
    bounds: list[list[int]] = []
    for p, seed in zip(plans, seeds):
        lengths = np.array([len(u) for u in p.units])
        # The same generator state as the fit's own: eff's and fidel's samples exactly.
        k, b = fitter.planned_samples(np.random.default_rng(seed), p.position_units, len(p.units), n_samples, lengths)
        full = p.token_sequence(p.position_units)
        mine = [full] + p.token_sequences(list(k))
        if adapter.deterministic:
            mine = [s for s in {tuple(s): s for s in mine}.values() if tuple(s) not in shared]
        known += mine
        bounds += p.token_sequences(list(b))
    return adapter.estimate_cost(known, bounds)


def estimate_cost(
    model: object,
    texts: TextLike | Sequence[TextLike],
    tokenizer: object | None = None,
    *,
    method: str | Fitter = DEFAULT_METHOD,
    n_samples: int = DEFAULT_N_SAMPLES,
    seed: int | Sequence[int] = 0,
    reference: ReferenceOption = "empty",
    granularity: str = "token",
    truncate: bool = False,
    **fit_options,
) -> dict[str, int]:
    """What ``explain_batch`` with these arguments would cost, without calling the model.

    Returns ``calls`` (model evaluations; for a cached API black box, new sample strings
    plus the samples a method only decides on later, e.g. ana's pairs), ``cache_hits``
    and ``input_tokens`` (the adapter's count: tokens the model reads, or what an API
    black box's ``count_tokens`` says it is sent). eff's and fidel's samples are known
    exactly for a given ``seed``; later samples are counted at an upper bound. A text too
    long for the model is refused, or with ``truncate=True`` cut as ``explain`` cuts it.

    Example:
        >>> est = estimate_cost(api_model, review, method="eff", n_samples=1000, seed=0)  # doctest: +SKIP
        >>> est["calls"], est["input_tokens"]  # doctest: +SKIP
    """
    batch = [texts] if isinstance(texts, (str, Segmentation, torch.Tensor)) else list(texts)
    if batch and not isinstance(batch[0], (str, Segmentation, torch.Tensor, Sequence)):
        batch = [texts]  # one sequence of token ids
    options = CallOptions(
        method=method,
        n_samples=n_samples,
        reference=reference,
        granularity=granularity,
        seed=seed,
        truncate=truncate,
        fit_options=fit_options,
    )
    call = check_call(options)
    adapter, plans = prepare_texts(model, batch, tokenizer, call, None, None)
    if not plans:
        return {"calls": 0, "cache_hits": 0, "input_tokens": 0}
    return planned_cost(adapter, call.fitter, plans, call.n_samples, text_seeds(call.seed, len(plans)), call.reference)
