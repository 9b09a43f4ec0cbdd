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

from .diagnostics import direction_check

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
    "FLAG_CODES",
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
#: Every flag's code, with what it says in one phrase.
FLAG_CODES = {
    "against": "the surrogate moves from the reference point against the model's own move on the text",
    "missed": "the surrogate misses the model's output on the text by more than half the model's move",
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
                f"the surrogate misses the model's output on the text by {miss:.2f} log-odds, more than half the "
                f"model's move of {move:.2f} from the reference point",
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
        >>> text_excerpt(SimpleNamespace(text="the movie\nwas fine", tokens=[]), 12)
        'the movie w…'
    """
    text = exp.text if getattr(exp, "text", None) is not None else " ".join(str(t) for t in exp.tokens)
    text = " ".join(text.split())
    return text if len(text) <= max_chars else text[: max_chars - 1] + "…"
