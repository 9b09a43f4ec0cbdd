"""What a call warns about or refuses after its checks: poor fits, no empty input."""

from __future__ import annotations

from ..explanation import SlalomExplanation
from ..fit_quality import fit_flags, text_excerpt
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

#: No longer a flag by itself (kept for code that reads it): a surrogate's miss on the text
#: is judged against the model's own move, :data:`slalom_core.fit_quality.MISSED_FLOOR`.
FULL_TEXT_GAP_BOUND = 1.0
#: No longer a flag by itself (kept for code that reads it): the held-out R² is the R² on
#: held-out samples of the fit's own design, reported, never a verdict (:mod:`slalom_core.fit_quality`).
MIN_HELDOUT_R2 = 0.5


class SlalomFitWarning(UserWarning):
    """A fitted surrogate that should not be read at face value: one of the fit-quality
    rule's flags (:mod:`slalom_core.fit_quality`): moving against the model on the text,
    missing its output by more than half its move, importances the data do not determine,
    an unstable ranking where measured, a fit that did not converge, or invalid pairs in ana."""


def fit_problems(exp: SlalomExplanation) -> list[str]:
    """What would make this explanation mislead a reader, one phrase each (empty: nothing):
    the reasons of :func:`slalom_core.fit_quality.fit_flags`, the one rule that the page,
    the report and the quality table use too.

    Example:
        >>> fit_problems(exp)  # doctest: +SKIP
        []
    """
    return [flag.reason for flag in fit_flags(exp)]


#: At most this many flagged texts are named in one warning (the rest are counted).
MAX_NAMED = 10


def warn_about_fits(explanations: list[SlalomExplanation]) -> None:
    """One SlalomFitWarning per call, naming each flagged text (its number in the call and
    the start of its text) with its reasons (see :func:`fit_problems`).

    Why the text is in the message: Python's default filter shows a warning once per code
    line *and message*, so a user who explains texts one call at a time in a ``for`` loop
    would see only the first flagged one if the message were the same for each. Naming the
    text makes each flagged text's warning its own, without touching the user's warning
    filters (an ``"always"`` filter installed at import would override theirs);
    ``warnings.simplefilter("ignore", SlalomFitWarning)`` still silences them all.

    Example:
        >>> warn_about_fits([exp])  # doctest: +SKIP
        SlalomFitWarning: SLALOM fit flagged the text, read with care: "a dull film": ...
    """
    flagged = [(i, exp, fit_flags(exp)) for i, exp in enumerate(explanations)]
    flagged = [(i, exp, flags) for i, exp, flags in flagged if flags]
    if not flagged:
        return
    named = [
        f'text {i} "{text_excerpt(exp, 40)}": ' + "; ".join(f.reason for f in flags)
        for i, exp, flags in flagged[:MAX_NAMED]
    ]
    more = f" (and {len(flagged) - MAX_NAMED} more)" if len(flagged) > MAX_NAMED else ""
    said = f"{len(flagged)} of {len(explanations)} texts" if len(explanations) > 1 else "the text"
    if len(explanations) == 1:  # one text (explain): no number to give it
        named = [named[0].split(" ", 2)[2]]
    warn_user(
        f"SLALOM fit flagged {said}, read with care: " + " | ".join(named) + more + ". "
        "See each explanation's diagnostics.",
        SlalomFitWarning,
    )
