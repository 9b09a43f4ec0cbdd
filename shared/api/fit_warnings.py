"""What a call warns about or refuses after its checks: poor fits, no empty input."""

from __future__ import annotations

import numpy as np

from ..explanation import SlalomExplanation
from ..warn import warn_user

__all__ = [
    "NoEmptyInputError",
    "NO_EMPTY_INPUT_ADVICE",
    "SlalomFitWarning",
    "FULL_TEXT_GAP_BOUND",
    "MIN_HELDOUT_R2",
    "warn_about_fits",
]


class NoEmptyInputError(ValueError):
    """The default reference point (the model's output on the input with no tokens) cannot
    be had: the model fails on it, returns a non-finite output, or has no such input.

    A typed error so that an adapter can give the advice that fits its own arguments (the
    Captum adapter: name the special tokens, rather than pass a reference).

    Example:
        >>> try:  # doctest: +SKIP
        ...     exp = explain(model, ids)
        ... except NoEmptyInputError:
        ...     exp = explain(model, ids, reference=0.0)
    """


NO_EMPTY_INPUT_ADVICE = (
    "the default reference point is the model's output on the input with no tokens, but {why}; "
    "pass reference=<number> (the output the scores are measured from, in log-odds; "
    "reference=0.0 gives the paper's raw scores)"
)

#: A SlalomFitWarning is raised when the surrogate misses the model's output on the
#: explained text by more than this many log-odds (a factor e on the odds).
FULL_TEXT_GAP_BOUND = 1.0
#: ... or when its held-out R² on the design's samples is below this.
MIN_HELDOUT_R2 = 0.5


class SlalomFitWarning(UserWarning):
    """A fitted surrogate that should not be read at face value (not converged, poor fit,
    far from the model on the explained text, or invalid pairs in ana)."""


def warn_about_fits(explanations: list[SlalomExplanation]) -> None:
    """One SlalomFitWarning per call, listing what went wrong in which texts."""
    problems: dict[str, list[int]] = {}
    for i, exp in enumerate(explanations):
        d = exp.diagnostics
        if d.get("fit_converged") is False:
            problems.setdefault("the fit did not converge", []).append(i)
        if np.isfinite(d.get("heldout_r2", np.nan)) and d["heldout_r2"] < MIN_HELDOUT_R2:
            problems.setdefault(f"held-out R² below {MIN_HELDOUT_R2}", []).append(i)
        if np.max(np.abs(exp.full_text_gap)) > FULL_TEXT_GAP_BOUND:
            problems.setdefault(
                f"the surrogate misses the model's output on the text by more than {FULL_TEXT_GAP_BOUND} log-odds", []
            ).append(i)
        if d.get("ana_invalid_pairs", 0):
            problems.setdefault(
                "ana met pairs whose importance ratio is not positive (the model is no SLALOM there)", []
            ).append(i)
    if problems:
        parts = [
            f"{what} (text{'s' if len(idx) > 1 else ''} {', '.join(map(str, idx[:10]))}{', …' if len(idx) > 10 else ''})"
            for what, idx in problems.items()
        ]
        warn_user("SLALOM fit: " + "; ".join(parts) + ". See each explanation's diagnostics.", SlalomFitWarning)
