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
    "fit_problems",
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

#: Corpus summaries count the texts whose surrogate misses the model's output on the text by
#: more than this many log-odds (a factor e on the odds).
FULL_TEXT_GAP_BOUND = 1.0
#: A SlalomFitWarning is raised when the held-out R² on the design's samples is below this.
MIN_HELDOUT_R2 = 0.5


class SlalomFitWarning(UserWarning):
    """A fitted surrogate that should not be read at face value: not converged, a poor fit,
    moving against the model on the explained text, importances the data do not determine,
    or invalid pairs in ana (see :func:`fit_problems`)."""


def fit_problems(exp: SlalomExplanation) -> list[str]:
    """What would make this explanation mislead a reader, one phrase each (empty: nothing).

    Only what misleads counts: a fit that did not converge or does not fit its own samples
    (held-out R² below :data:`MIN_HELDOUT_R2`, for designs of short samples alone: hybrid
    weighs them down on purpose, and is judged by the text's output instead); a surrogate that moves from the reference point
    *against* the model's move on the text (its contributions then sum the wrong way); and
    importances that the data determine nowhere (every one is its prior's). A surrogate that
    reaches only part of the model's output is not a problem by itself: the part it reaches
    is in ``diagnostics.reproduced`` and the rest in ``full_text_gap``.

    Example:
        >>> fit_problems(exp)  # doctest: +SKIP
        []
    """
    d = exp.diagnostics
    found = []
    if d.get("fit_converged") is False:
        found.append("the fit did not converge")
    # A design with samples in context (hybrid) gives the short samples a quarter of the
    # weight on purpose and fits them less closely; its check is the text's own output.
    short_only = not d.get("n_context")
    if short_only and np.isfinite(d.get("heldout_r2", np.nan)) and d["heldout_r2"] < MIN_HELDOUT_R2:
        found.append(f"held-out R² below {MIN_HELDOUT_R2}")
    if d.get("direction_agrees") is False:
        found.append("the surrogate moves from the reference point against the model's own move on the text")
    determined = exp.importance_determined
    if exp.importance_se is not None and len(determined) > 1 and not np.any(determined):
        found.append("the data determine none of the importances (each is its prior's)")
    if d.get("ana_invalid_pairs", 0):
        found.append("ana met pairs whose importance ratio is not positive (the model is no SLALOM there)")
    return found


def warn_about_fits(explanations: list[SlalomExplanation]) -> None:
    """One SlalomFitWarning per call, listing what would mislead in which texts (see :func:`fit_problems`)."""
    problems: dict[str, list[int]] = {}
    for i, exp in enumerate(explanations):
        for what in fit_problems(exp):
            problems.setdefault(what, []).append(i)
    if problems:
        parts = [
            f"{what} (text{'s' if len(idx) > 1 else ''} {', '.join(map(str, idx[:10]))}{', …' if len(idx) > 10 else ''})"
            for what, idx in problems.items()
        ]
        warn_user("SLALOM fit: " + "; ".join(parts) + ". See each explanation's diagnostics.", SlalomFitWarning)
