"""The one fit-quality rule: when an explanation would mislead a reader, and why.

Every place that marks a fit (the ``SlalomFitWarning`` of a call, the page's header, a
corpus run's closing warning, the report's index and a pipeline's quality table) asks
:func:`fit_flags` (an explanation) or :func:`row_flags` (a text's rows of a corpus run's
texts table). A flag is raised for what misleads, whatever the fitting method:

- **against**: the surrogate moves from the reference point b the other way than the
  model does on the full text (its contributions then add up the wrong way); judged only
  where the model moves at least :data:`~slalom_core.diagnostics.MIN_MOVE`;
- **missed**: the surrogate misses the model's output on the text by more than
  :data:`MISSED_SHARE` of the model's own move, ``|F(x) − f(x)| > MISSED_SHARE·|f(x) − b|``,
  and by more than :data:`MISSED_FLOOR` log-odds (norms of the centred logits for a joint
  fit of k > 2 classes): the sum b → F(x) the page draws is then not the model's;
- **undetermined**: the data determine none of the text's importances (each is its prior's,
  :attr:`~slalom_core.SlalomExplanation.importance_determined`), judged only where the
  fitter reports standard errors and the text has two unique tokens or more;
- **unstable**: the ranking agrees poorly with an independent fit of the same text, where one
  was measured (a Spearman below :data:`MIN_AGREEMENT`: another seed's fit,
  ``diagnostics["seed_agreement"]``, or an amortized pipeline's audit);
- **not converged** and **invalid pairs**: the fitter says its fit did not converge, or
  (ana) that the model is no SLALOM on some pairs.

The held-out R² is not a flag: it is the R² on held-out samples of the fit's own design
(:data:`HELDOUT_R2_LABEL`), whose spread of targets differs between designs and texts, so
the same number means a good fit on one and a poor one on another. Views and reports show it
under that name.

Example:
    >>> [f.code for f in fit_flags(exp)]  # doctest: +SKIP
    []
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .diagnostics import MIN_MOVE, direction_check

__all__ = [
    "FitFlag",
    "FitFacts",
    "fit_flags",
    "row_flags",
    "flags_of",
    "MISSED_SHARE",
    "MISSED_FLOOR",
    "MIN_AGREEMENT",
    "HELDOUT_R2_LABEL",
    "HELDOUT_R2_NOTE",
    "FLAG_CODES",
    "FLAG_RULES",
    "RULE_SUMMARY",
    "DETERMINED_SE_RATIO",
    "DETERMINED_APART_SE",
    "DETERMINED_RULE",
    "text_excerpt",
]

#: "missed": the surrogate's miss on the text exceeds this share of the model's own move ...
MISSED_SHARE = 0.5
#: ... and this many log-odds: below it the two outputs differ by at most 12.5 points of
#: probability anywhere (the sigmoid's slope is at most 1/4), too little to mislead a reader.
MISSED_FLOOR = 0.5
#: "unstable": a Spearman of the ranking against an independent fit below this.
MIN_AGREEMENT = 0.5
#: What the held-out R² is of, as views, reports and warnings name it.
HELDOUT_R2_LABEL = "R² on held-out samples of the fit's own design"
#: What a reader is told beside the held-out R² wherever a verdict stands near it (a report's
#: column, the page): it is not part of the rule, and what a negative one means.
HELDOUT_R2_NOTE = (
    "not part of the fit-quality rule; below 0 the surrogate predicts the held-out samples worse than their "
    "mean does, which says how the design's samples spread, not that the explanation misleads"
)
#: An importance is determined by the data where its standard error is below this share of
#: the prior's sd (a posterior contraction 1 − SE²/sd² above 0.36) ...
DETERMINED_SE_RATIO = 0.8
#: ... or where it lies more than this many standard errors from the text's mean importance.
DETERMINED_APART_SE = 2.0
#: ``importance_determined`` in one sentence: the docs, the page's tooltip and a dataset's card
#: state it in these words (``tests/engine/test_rule_statements.py`` reads them).
DETERMINED_RULE = (
    f"an importance is determined by the data where its standard error is below {DETERMINED_SE_RATIO:g} × the "
    f"prior's sd, or where it lies more than {DETERMINED_APART_SE:g} standard errors from the mean importance "
    "of the text's tokens"
)
#: When each flag is raised, from the constants: the docs' table of the rule states exactly
#: these (``docs/guide.md``), the warning, page and report name the codes.
FLAG_RULES = {
    "against": "the surrogate moves from the reference point b the other way than the model on the full text "
    f"(judged where the model moves at least {MIN_MOVE:g} log-odds): its contributions add up the wrong way",
    "missed": f"|F(x) − f(x)| > {MISSED_SHARE:.0%} of the model's move |f(x) − b| and > {MISSED_FLOOR:g} "
    "log-odds (norms of the centred logits for a joint fit): the sum b → F(x) the page draws is not the model's",
    "undetermined": "the data determine none of the text's importances (judged where the fitter reports "
    "standard errors and the text has two unique tokens or more)",
    "unstable": f"where measured, the token ranking agrees with an independent fit below Spearman {MIN_AGREEMENT:g} "
    "(another seed's fit, or an amortized pipeline's audit)",
    "not converged": "the fitter says its fit did not converge",
    "invalid pairs": "ana met pairs whose importance ratio is not positive (the model is no SLALOM there)",
}
#: The rule in one line, as the API reference and the report's index state it.
RULE_SUMMARY = (
    f"against (the surrogate moves from the reference point the other way than the model, where the model moves "
    f"at least {MIN_MOVE:g} log-odds), missed (it misses the model's output by more than {MISSED_SHARE:.0%} of "
    f"the model's move and more than {MISSED_FLOOR:g} log-odds), undetermined (the data determine none of the "
    f"importances), unstable (a Spearman below {MIN_AGREEMENT:g} against an independent fit, where measured), "
    "not converged, invalid pairs (ana)"
)
#: Every flag's code, with what it says in one phrase.
FLAG_CODES = {
    "against": "the surrogate moves from the reference point against the model's own move on the text",
    "missed": f"the surrogate misses the model's output on the text by more than {MISSED_SHARE:.0%} of the model's "
    f"move and more than {MISSED_FLOOR:g} log-odds",
    "undetermined": "the data determine none of the importances (each is its prior's)",
    "unstable": "the token ranking agrees poorly with an independent fit of the same text",
    "not converged": "the fit did not converge",
    "invalid pairs": "ana met pairs whose importance ratio is not positive (the model is no SLALOM there)",
}


@dataclass(frozen=True)
class FitFlag:
    """One reason an explanation would mislead: its ``code`` (a key of :data:`FLAG_CODES`)
    and the sentence that says it, with this text's numbers."""

    code: str
    reason: str

    def __str__(self) -> str:
        return self.reason


@dataclass(frozen=True)
class FitFacts:
    """What the rule reads of one explanation (outputs in log-odds or centred logits).

    Attributes:
        model_output, surrogate_output, base_value: f(x), F(x) and b (floats, or (K,)).
        converged: the fitter's word on convergence (None: it says nothing).
        units_determined: unique tokens whose importance the data determine (None: the
            fitter reports no standard errors, or the count is not known).
        n_units: unique tokens of the text.
        agreement: Spearman of the ranking against an independent fit (None: not measured).
        invalid_pairs: ana's pairs of a non-positive importance ratio.
    """

    model_output: Any
    surrogate_output: Any
    base_value: Any
    converged: bool | None = None
    units_determined: int | None = None
    n_units: int | None = None
    agreement: float | None = None
    invalid_pairs: int = 0


def flags_of(facts: FitFacts, *, min_agreement: float = MIN_AGREEMENT) -> list[FitFlag]:
    """The rule itself (see the module's docstring): every flag ``facts`` raise, in the
    order of :data:`FLAG_CODES`.

    Example:
        >>> [f.code for f in flags_of(FitFacts(model_output=2.0, surrogate_output=-1.0, base_value=0.0))]
        ['against', 'missed']
        >>> flags_of(FitFacts(model_output=2.0, surrogate_output=1.2, base_value=0.0))
        []
    """
    found = []
    f, big_f, b = (
        np.ravel(np.asarray(x, dtype=float)) for x in (facts.model_output, facts.surrogate_output, facts.base_value)
    )
    agrees, _ = direction_check(f, big_f, b)
    if agrees is False:
        found.append(FitFlag("against", FLAG_CODES["against"]))
    move, miss = float(np.linalg.norm(f - b)), float(np.linalg.norm(big_f - f))
    if math.isfinite(miss) and miss > MISSED_SHARE * move and miss > MISSED_FLOOR:
        found.append(
            FitFlag(
                "missed",
                f"the surrogate misses the model's output on the text by {miss:.2f} log-odds, more than "
                f"{MISSED_SHARE:.0%} of the model's move of {move:.2f} from the reference point",
            )
        )
    if facts.units_determined == 0 and (facts.n_units or 0) > 1:
        found.append(FitFlag("undetermined", FLAG_CODES["undetermined"]))
    rho = facts.agreement
    if rho is not None and math.isfinite(rho) and rho < min_agreement:
        found.append(
            FitFlag(
                "unstable",
                f"the token ranking agrees poorly with an independent fit (Spearman {rho:.2f} < {min_agreement})",
            )
        )
    if facts.converged is False:
        found.append(FitFlag("not converged", FLAG_CODES["not converged"]))
    if facts.invalid_pairs:
        found.append(FitFlag("invalid pairs", FLAG_CODES["invalid pairs"]))
    return found


def _agreement(d: Mapping, given: float | None) -> float | None:
    rho = given if given is not None else d.get("seed_agreement")
    return None if rho is None else float(rho)


def fit_flags(exp: Any, *, agreement: float | None = None, min_agreement: float = MIN_AGREEMENT) -> list[FitFlag]:
    """The flags of one explanation (empty: nothing misleads).

    Args:
        exp: a :class:`~slalom_core.SlalomExplanation` (or anything of the same attributes).
        agreement: a Spearman of its ranking against an independent fit of the same text
            (another seed, a per-text fit of an amortized one); default the diagnostics'
            ``seed_agreement`` where recorded.
        min_agreement: below it, the ranking is flagged unstable.

    Example:
        >>> fit_flags(exp)  # doctest: +SKIP
        [FitFlag(code='against', reason='the surrogate moves ...')]
    """
    d = exp.diagnostics
    determined = None
    if exp.importance_se is not None:
        determined = len(set(np.asarray(exp.unit_index)[np.asarray(exp.importance_determined, dtype=bool)].tolist()))
    facts = FitFacts(
        model_output=exp.model_output if exp.model_output is not None else exp.surrogate_output,
        surrogate_output=exp.surrogate_output,
        base_value=exp.base_value,
        converged=d.get("fit_converged"),
        units_determined=determined,
        n_units=len(set(np.asarray(exp.unit_index).tolist())),
        agreement=_agreement(d, agreement),
        invalid_pairs=int(d.get("ana_invalid_pairs") or 0),
    )
    return flags_of(facts, min_agreement=min_agreement)


def row_flags(
    rows: Sequence[Mapping], *, agreement: float | None = None, min_agreement: float = MIN_AGREEMENT
) -> list[FitFlag]:
    """The flags of one text from its rows of a corpus run's texts table (one row per
    explained class column: a joint fit's rows are one explanation), as :func:`fit_flags`
    gives them for the explanation they hold. Whether the data determine an importance is
    read from the diagnostics' ``units_determined`` (recorded by ``explain_batch``; a run
    written before it was recorded is not judged on it).

    Example:
        >>> row_flags(run.texts().query("id == 'r1'").to_dict("records"))  # doctest: +SKIP
        []
    """
    first = rows[0]
    raw = first.get("diagnostics")
    d = json.loads(raw) if isinstance(raw, str) else raw if isinstance(raw, Mapping) else {}
    converged = first.get("converged")
    facts = FitFacts(
        model_output=[float(r["model_output"]) for r in rows],
        surrogate_output=[float(r["surrogate_output"]) for r in rows],
        base_value=[float(r["base_value"]) for r in rows],
        converged=None if converged is None or converged != converged else bool(converged),
        units_determined=d.get("units_determined"),
        n_units=int(first["n_units"]) if first.get("n_units") is not None else None,
        agreement=_agreement(d, agreement),
        invalid_pairs=int(d.get("ana_invalid_pairs") or 0),
    )
    return flags_of(facts, min_agreement=min_agreement)


def text_excerpt(exp: Any, max_chars: int = 80) -> str:
    """The start of the explained text (its tokens joined when the text is unknown), on one
    line: how a warning or a view names the text it speaks of.

    Example:
        >>> from types import SimpleNamespace
        >>> text_excerpt(SimpleNamespace(text="the  movie was fine", tokens=[]), 12)
        'the movie w…'
    """
    text = exp.text if getattr(exp, "text", None) is not None else " ".join(str(t) for t in exp.tokens)
    text = " ".join(text.split())
    return text if len(text) <= max_chars else text[: max_chars - 1] + "…"
