"""One text's explanation from its fit: values read in the explained output's units, diagnostics."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..diagnostics import Diagnostics, direction_check
from ..explanation import SlalomExplanation
from ..fitting import FitResult
from ..link import OutputLink
from ..surrogate import SlalomSurrogate
from .call import CheckedCall
from .plan import TextPlan

__all__ = ["RoundZero", "assemble"]


@dataclass(frozen=True)
class RoundZero:
    """What the first model round decided, once for every text of the call.

    Every later round is read through it: ``link`` turns raw outputs into the fitted units
    (log-odds, centred logits) and ``base`` is the reference point every target is
    measured from, so the texts of one call are never read in different units.
    """

    link: OutputLink
    kind: str  # what the raw outputs were read as, an OUTPUT_KINDS entry
    how: str  # and how that was decided, e.g. "probs (detected)"
    base: np.ndarray  # (K,) the reference point, in fitted units


def assemble(
    plan: TextPlan, fit: FitResult, seed: int, call: CheckedCall, first: RoundZero, api_usage: dict | None
) -> SlalomExplanation:
    """One text's explanation: its fit, read in the explained output's units, and its diagnostics."""
    link, fitter = first.link, call.fitter
    col = link.column
    select = (lambda a: a[col]) if col is not None else (lambda a: a if link.joint else a[0])
    value = fit.value if link.joint else fit.value[:, 0]
    se_v = None if fit.value_se is None else (fit.value_se if link.joint else fit.value_se[:, 0])
    # The core fields (see Diagnostics), then the fitter's own entries; a fitter's entry
    # replaces a core one (the prior sd that prior_sd="evidence" chose).
    diag = Diagnostics(
        method=fitter.name,
        seed=seed,
        n_samples=fitter.samples_scored(len(plan.units), call.n_samples),
        n_positions=len(plan.seg.unit_ids),
        n_units=len(plan.units),
        model_evaluations=plan.model_evaluations,
        tokens_evaluated=plan.tokens_evaluated,
        model_seconds=plan.model_seconds,
        fit_seconds=plan.fit_seconds,
        total_seconds=plan.model_seconds + plan.fit_seconds,
        reference="empty input" if call.reference is None else "given",
        output=first.how,
        output_kind=first.kind,
        n_outputs=first.link.n_outputs,
        class_names=None if link.class_names is None else [str(c) for c in link.class_names],
        prior_sd=fitter.prior_sd,
        importance_measured=fitter.importance_measured,
    )
    if call.truncate:
        diag.truncated_positions = plan.truncated
    if api_usage is not None:
        # Shared by the call's texts: a copy each, so that one can be edited alone.
        diag.api_usage = dict(api_usage)
    diag.update(fit.diagnostics)
    exp = SlalomExplanation(
        tokens=list(plan.seg.tokens),
        token_ids=list(plan.seg.tokenizer_ids),  # the tokenizer's, not an adapter's own
        unit_index=plan.position_units,
        surrogate=SlalomSurrogate(value, fit.importance, gamma=call.gamma, law=fit.law),
        method=fitter.name,
        granularity=call.granularity,
        target=call.target,
        class_names=link.fitted_class_names,
        model_output=scalar_or_array(select(plan.model_output)),
        base_value=scalar_or_array(select(first.base)),
        class_index=col,
        unit_value_se=se_v,
        unit_importance_se=fit.importance_se,
        diagnostics=diag,
        text=plan.text,
    )
    diag.model_output = exp.model_output
    diag.surrogate_output = exp.surrogate_output
    diag.full_text_gap = exp.full_text_gap
    diag.direction_agrees, diag.reproduced = direction_check(exp.model_output, exp.surrogate_output, exp.base_value)
    if exp.importance_se is not None:
        diag.units_determined = len(set(plan.position_units[exp.importance_determined].tolist()))
    else:
        diag.units_determined = None
    return exp


def scalar_or_array(x: np.ndarray) -> np.ndarray | float:
    return float(x) if np.ndim(x) == 0 else np.asarray(x)
