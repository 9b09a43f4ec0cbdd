"""What every view says about an explanation besides its tokens: class names, the
prediction, every score of the score table per position, the fit's diagnostics.

Scores are enumerated from :data:`slalom_core.SCORES`, so a newly registered score shows up
in every view, its data attributes and tooltips without a change here.

Example:
    >>> cols = class_columns(exp)  # doctest: +SKIP
    >>> position_scores(exp, cols[0])["value"]  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np

from ..diagnostics import IMPORTANCE_MEASURED
from ..fit_quality import HELDOUT_R2_LABEL, HELDOUT_R2_NOTE, MISSED_FLOOR, MISSED_SHARE, fit_flags, text_excerpt
from ..scores import SCORES

if TYPE_CHECKING:
    from ..explained import Explained as SlalomExplanation  # the protocol: views look down

__all__ = [
    "STANDARD_ERRORS",
    "class_columns",
    "class_name",
    "prediction",
    "sides",
    "position_scores",
    "scores_once",
    "position_standard_errors",
    "score_standard_errors",
    "SCORE_SE",
    "fit_line",
    "flag_line",
    "excerpt",
    "fmt",
]

#: The scores that carry a standard error, and the attribute that holds it per position.
STANDARD_ERRORS = {"value": "value_se", "importance": "importance_se"}


def class_columns(exp: SlalomExplanation) -> list[int | None]:
    """The class columns a view shows: every class of a joint multi-class fit, else [None]
    (the one explained output).

    Example:
        >>> class_columns(binary_exp)  # doctest: +SKIP
        [None]
    """
    if exp.surrogate.multiclass and exp.class_index is None:
        return list(range(exp.surrogate.value.shape[1]))
    return [None]


def class_name(exp: SlalomExplanation, col: int | None) -> str:
    """The name of class column ``col`` (None: the explained output).

    A joint fit names its columns (``class_names``); a binary model's fit explains class
    ``target`` (1 by default) against the other; a model with one output explains it.

    Example:
        >>> class_name(binary_exp, None)  # doctest: +SKIP
        'class 1'
    """
    names = _names(exp)
    if col is None:
        col = exp.class_index if exp.class_index is not None else exp.target
        if col is None:
            col = 0 if exp.diagnostics.n_outputs == 1 else 1
        if exp.diagnostics.n_outputs == 1:
            return "the model's output"
    if names is not None and 0 <= col < len(names):
        return str(names[col])
    return f"class {col}"


def prediction(exp: SlalomExplanation) -> str | None:
    """The predicted class and its probability, e.g. ``"class 1 (p = 0.93)"``; None when the
    explanation does not tell (one class explained against the rest, one label).

    Outputs are log-odds (binary) or centred logits (joint k classes), so the probabilities
    are their sigmoid or softmax.

    Example:
        >>> prediction(binary_exp)  # doctest: +SKIP
        'class 1 (p = 0.62)'
    """
    out = exp.model_output
    if out is None:
        return None
    out = np.asarray(out, dtype=np.float64)
    if out.ndim == 1 and exp.surrogate.multiclass and exp.class_index is None:
        p = np.exp(out - out.max())
        p /= p.sum()
        k = int(np.argmax(out))
        return f"{class_name(exp, k)} (p = {p[k]:.3g})"
    d = exp.diagnostics
    if out.ndim != 0 or d.n_outputs != 2 or str(d.output_kind).startswith("multilabel"):
        return None
    explained = exp.target if exp.target is not None else 1
    f = float(out)
    p_explained = 1.0 / (1.0 + math.exp(-f)) if f > -700 else 0.0
    k = explained if f >= 0 else 1 - explained
    names = _names(exp)
    label = str(names[k]) if names is not None and k < len(names) else f"class {k}"
    return f"{label} (p = {max(p_explained, 1.0 - p_explained):.3g})"


def sides(exp: SlalomExplanation, col: int | None, model: float, surrogate: float) -> str | None:
    """What the model and the surrogate each say, in the reader's terms, where their outputs
    lie on different sides of 0 (None where they agree): a binary model's class names, else
    the output's sign. Both may move the same way from the reference point and still land on
    different classes; a reader compares the classes.

    Example:
        >>> sides(binary_exp, None, 0.80, -0.14)  # doctest: +SKIP
        'the model says POSITIVE (+0.8), the surrogate NEGATIVE (-0.14)'
    """
    if (model >= 0) == (surrogate >= 0):
        return None
    d = exp.diagnostics
    if col is None and d.n_outputs == 2 and not str(d.output_kind).startswith("multilabel"):
        explained = exp.target if exp.target is not None else 1
        names = _names(exp)

        def said(x: float) -> str:
            k = explained if x >= 0 else 1 - explained
            return str(names[k]) if names is not None and k < len(names) else f"class {k}"

        return f"the model says {said(model)} ({fmt(model)}), the surrogate {said(surrogate)} ({fmt(surrogate)})"
    what = class_name(exp, col)
    sign = {True: "positive", False: "negative"}
    said = f"the model's output is {sign[model >= 0]} ({fmt(model)}), the surrogate's {sign[surrogate >= 0]} ({fmt(surrogate)})"
    return said if what == "the model's output" else f"for {what}, {said}"


def _names(exp: SlalomExplanation) -> list[str] | None:
    # A joint fit names its columns; a binary fit has one column, the model's names are in
    # its diagnostics (an explanation saved before they were recorded has none).
    return exp.class_names if exp.class_names is not None else exp.diagnostics.get("class_names")


def _column(x: np.ndarray, col: int | None) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    return x[:, col] if x.ndim == 2 and col is not None else x


#: The scores already computed in the current :func:`scores_once` block, by explanation.
_ONCE: contextvars.ContextVar[dict | None] = contextvars.ContextVar("slx_position_scores", default=None)


@contextlib.contextmanager
def scores_once() -> Iterator[None]:
    """Within the block, each explanation's :func:`position_scores` are computed once.

    A page asks for them from every section (text rows, force bar, ranked list, table):
    seven times each, and Shapley's sampled permutations dominated a report's time per text.
    The arrays handed out are read-only, so no section can change another's numbers; the
    memory is dropped when the block ends (an explanation changed afterwards is computed
    afresh).

    Example:
        >>> with scores_once():  # doctest: +SKIP
        ...     html = explanation_fragment(exp)
    """
    token = _ONCE.set({})
    try:
        yield
    finally:
        _ONCE.reset(token)


def position_scores(exp: SlalomExplanation, col: int | None) -> dict[str, np.ndarray]:
    """Every score of the score table, (n,) per position, for class column ``col``
    (computed once per explanation inside a :func:`scores_once` block).

    Args:
        exp: the explanation.
        col: a class column of a joint fit (:func:`class_columns`), or None.

    Returns:
        ``{score name: (n,) float64 array}`` in the table's order.

    Example:
        >>> sorted(position_scores(binary_exp, None))  # doctest: +SKIP
        ['contribution', 'importance', 'lin', 'removal', 'shapley', 'value']
    """
    memory = _ONCE.get()
    if memory is None:
        return {name: _column(exp.scores(name), col) for name in SCORES}
    # Keyed by id() with the object kept beside it: an id is reused only after its object
    # is gone, and the object held here cannot go while the block lasts.
    held = memory.get((id(exp), col))
    if held is None or held[0] is not exp:
        scores = {name: _column(exp.scores(name), col) for name in SCORES}
        for x in scores.values():
            x.setflags(write=False)
        held = memory[(id(exp), col)] = (exp, scores)
    return dict(held[1])


def position_standard_errors(exp: SlalomExplanation, col: int | None) -> dict[str, np.ndarray]:
    """The standard errors there are, (n,) per position: value and importance (Laplace
    approximation) where the fitting method gives them; empty for one that does not.

    Example:
        >>> set(position_standard_errors(binary_exp, None))  # doctest: +SKIP
        {'value', 'importance'}
    """
    out = {}
    for name, attr in STANDARD_ERRORS.items():
        se = getattr(exp, attr)
        if se is not None:
            out[name] = _column(se, col)
    return out


#: The scores whose standard error :func:`score_standard_errors` gives (first-order, from the
#: value's and importance's Laplace standard errors).
SCORE_SE = ("contribution", "value", "importance", "lin")


def score_standard_errors(exp: SlalomExplanation, col: int | None, score: str) -> np.ndarray | None:
    """Per position, the standard error of one occurrence's ``score``; None where the method
    gives no standard errors or the score is not in :data:`SCORE_SE`.

    Value and importance: their Laplace standard errors. Contribution α_u·v_u and lin
    v_u·exp(s_u): the delta method, the value's and importance's errors taken as independent
    and the other tokens' importances as fixed: for contribution
    SE² = (α_u·SE_v)² + (c_u·(1 − n_u·α_u)·SE_s)², with n_u the token's occurrences (the
    derivative of α_u = exp(s_u)/Σ exp(s) in s_u is α_u(1 − n_u·α_u)). A first-order error:
    it says how far sampling can move the number, not an exact interval.

    Example:
        >>> score_standard_errors(binary_exp, None, "contribution").shape  # doctest: +SKIP
        (7,)
    """
    se = position_standard_errors(exp, col)
    if score not in SCORE_SE or "value" not in se or "importance" not in se:
        return None
    if score in ("value", "importance"):
        return se[score]
    v, s = position_scores(exp, col)["value"], position_scores(exp, col)["importance"]
    if score == "lin":
        return np.exp(s) * np.hypot(se["value"], v * se["importance"])
    alpha = np.exp(s - s.max())
    alpha /= alpha.sum()
    units = np.asarray(exp.unit_index)
    n = np.bincount(units)[units]
    return np.hypot(alpha * se["value"], alpha * v * (1.0 - n * alpha) * se["importance"])


def fmt(x: object, digits: int = 3) -> str:
    """A number for people: ``digits`` significant digits, signed; lists joined.

    Example:
        >>> fmt(0.123456), fmt([1.0, -2.0]), fmt(None)
        ('+0.123', '[+1, -2]', '–')
    """
    if x is None:
        return "–"
    a = np.asarray(x, dtype=np.float64)
    if a.ndim:
        return "[" + ", ".join(fmt(v, digits) for v in a.tolist()) + "]"
    return f"{float(a):+.{digits}g}"


def importance_note(exp: SlalomExplanation) -> str | None:
    """One sentence, said once on a page, where this text's importances do not matter or the
    data determine none of them; None otherwise.

    "Do not matter": the fit's context stage predicts the text's own deletions no worse with
    every importance equal (``diagnostics["importance_gain"]`` ≤ 0, the default's measure).

    Example:
        >>> importance_note(binary_exp)  # doctest: +SKIP
    """
    gain = exp.diagnostics.get("importance_gain")
    if gain is not None and np.isfinite(gain) and gain <= 0:
        return (
            "In this text the importances do not matter: with every weight equal the surrogate predicts the "
            "text's deletions as well. Read the values and contributions."
        )
    if exp.importance_se is not None and exp.n_positions > 1 and not exp.importance_determined.any():
        return "The data determine none of this text's importances: every token is drawn without an underline."
    return None


def fit_line(exp: SlalomExplanation) -> str:
    """One line on the fit: method, samples, model calls, the held-out R² named for what it
    is of (:data:`~slalom_core.fit_quality.HELDOUT_R2_LABEL`), the text's residual.

    Example:
        >>> fit_line(binary_exp)  # doctest: +SKIP
        "method eff-slope · 120 samples · 121 model calls · R² on held-out samples of the fit's own design 0.91 · ..."
    """
    d = exp.diagnostics
    parts = [f"method {exp.method}"]
    if d.n_samples is not None:
        parts.append(f"{d.n_samples} samples")
    if d.model_evaluations is not None:
        parts.append(f"{d.model_evaluations} model calls")
    r2 = d.get("heldout_r2")
    if r2 is not None:
        # Beside the fit check, a negative R² must not read as a verdict the check missed.
        parts.append(f"{HELDOUT_R2_LABEL} {float(r2):.3g}" + (f" ({HELDOUT_R2_NOTE})" if float(r2) < 0 else ""))
    if exp.model_output is not None:
        parts.append(f"residual f(x) − surrogate {fmt(exp.full_text_gap)}")
    measured = IMPORTANCE_MEASURED.get(d.get("importance_measured") or "")
    if measured:
        parts.append(f"importances {measured}")
    if d.seed is not None:
        parts.append(f"seed {d.seed}")
    return " · ".join(parts)


def flag_line(exp: SlalomExplanation) -> str:
    """The fit-quality rule's verdict on this explanation in one sentence
    (:func:`~slalom_core.fit_quality.fit_flags`): its flags, or that it raises none.

    Example:
        >>> flag_line(binary_exp)  # doctest: +SKIP
        'Fit check: no flag (the surrogate moves with the model, reaches its output within 50% of the model's move or 0.5 log-odds, ...)'
    """
    flags = fit_flags(exp)
    if not flags:
        return (
            "Fit check: no flag (the surrogate does not move against the model, reaches its output within "
            f"{MISSED_SHARE:.0%} of the model's move or {MISSED_FLOOR} log-odds, and the data determine importances)"
        )
    return "⚑ Read with care: " + "; ".join(f.reason for f in flags) + "."


def excerpt(exp: SlalomExplanation, max_chars: int = 80) -> str:
    """The start of the explained text (its tokens joined when the text is unknown): the
    rule's own :func:`~slalom_core.fit_quality.text_excerpt`, so a warning and a view name a
    text alike.

    Example:
        >>> excerpt(binary_exp, 12)  # doctest: +SKIP
        'the movie w…'
    """
    return text_excerpt(exp, max_chars)
