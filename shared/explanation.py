"""The result of explaining one text: :class:`SlalomExplanation`."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from . import saving
from . import scores as _scores
from .diagnostics import Diagnostics

# The rule's constants live with the fit-quality rule, stated once there (DETERMINED_RULE).
from .fit_quality import DETERMINED_APART_SE, DETERMINED_SE_RATIO
from .surrogate import SlalomSurrogate

__all__ = ["SlalomExplanation", "LabelExplanations", "ClassOutputs", "load_explanation", "explanation_from_dict"]


class ClassOutputs(NamedTuple):
    """One text's outputs per explained column (class or label), in the explained units.

    Each is a float64 array: 0-d for a model with one output, else one entry per column.

    Attributes:
        reference: the reference point the scores are measured from (``base_value``).
        model_output: the model's own output on the text, f(x).
        residual: f(x) − the surrogate's output: what the fit misses on the text.

    Example:
        >>> import numpy as np
        >>> ref, f_x, residual = ClassOutputs(np.zeros(2), np.array([-1.5, 1.5]), np.array([-0.1, 0.1]))
        >>> float(f_x[1] - residual[1] - ref[1])  # the surrogate's share of class 1
        1.4
    """

    reference: np.ndarray
    model_output: np.ndarray
    residual: np.ndarray


def _both_classes(x: np.ndarray, sign: int, explained: int) -> np.ndarray:
    """A binary model's two columns from the one fitted for class ``explained``: the other
    class's entry is ``sign`` times it (log-odds of class 0 are minus those of class 1)."""
    other = sign * x
    return np.stack([other, x] if explained == 1 else [x, other], axis=-1)


@dataclass
class SlalomExplanation:
    """A fitted local SLALOM and its scores for every position of one text.

    Per-position arrays have one row per position (token, or word at word granularity)
    and, for a joint multi-class fit explained without a ``target``, a trailing class axis
    (``class_names``).

    **Reference point and units.** Every score is in the units of the explained output
    (log-odds, or centred logits for k > 2 classes) and measured from :attr:`base_value`,
    by default the model's output on the input with no tokens. A value of +1 means "this
    token alone moves the output 1 log-odds above the empty input"; ``contribution`` and
    ``shapley`` add up, with ``base_value``, to the surrogate's output on the full text.
    ``importance`` is unit-free (a log-weight, mean zero over the text's unique tokens).

    **Arrays and methods.** ``value``, ``importance``, ``lin``, ``removal`` and
    ``contribution`` are arrays (attributes: ``exp.lin[0]``). ``shapley`` is a method, because
    it takes options (``exp.shapley()``, ``exp.shapley(n_permutations=2048)``), and
    ``scores`` is a method taking a score's name (``exp.scores("lin")``, any name of
    :data:`slalom_core.SCORE_NAMES`): write ``exp.shapley()[0]``, not ``exp.shapley[0]``.

    Attributes:
        tokens: display string per position.
        token_ids: the model's token ids making up each position.
        unit_index: (n,) index of each position's unique unit in ``surrogate``.
        surrogate: the fitted :class:`SlalomSurrogate` over the unique units, on outputs
            measured from ``base_value`` (every class column for a joint fit).
        method: fitting algorithm ("eff", "fidel", "ana").
        granularity: "token" or "word".
        target: the explained class (None: class 1 of a binary model, or all classes).
        class_names: class axis labels of a joint multi-class fit, else None.
        model_output: the model's log-odds (or centred logits) on the full text.
        base_value: the reference point the scores are measured from.
        class_index: the column of a joint multi-class fit that ``target`` selects.
        unit_value_se, unit_importance_se: standard errors per unique unit (Laplace
            approximation; None for ana, which has none).
        text: the explained text as given, if known (views show its original spelling).
        diagnostics: a :class:`~slalom_core.diagnostics.Diagnostics`, a dict whose entries
            are also typed attributes: model_evaluations, tokens_evaluated, model_seconds,
            fit_seconds, model_output, surrogate_output, full_text_gap, seed, ... and the
            fitter's own (heldout_r2, fit_converged, ...), e.g. ``exp.diagnostics.heldout_r2``
            or ``exp.diagnostics["heldout_r2"]``. A plain mapping given here is converted.

    Example:
        >>> exp = slalom_core.explain(model, "a great movie", tokenizer=tok)  # doctest: +SKIP
        >>> exp.scores("lin")  # one score per token  # doctest: +SKIP
    """

    tokens: list[str]
    token_ids: list[tuple[int, ...]]
    unit_index: np.ndarray
    surrogate: SlalomSurrogate
    method: str
    granularity: str = "token"
    target: int | None = None
    class_names: list[str] | None = None
    model_output: np.ndarray | float | None = None
    base_value: np.ndarray | float = 0.0
    class_index: int | None = None
    unit_value_se: np.ndarray | None = None
    unit_importance_se: np.ndarray | None = None
    diagnostics: Diagnostics = field(default_factory=Diagnostics)
    text: str | None = None

    def __post_init__(self) -> None:
        # A plain dict (an explanation built by hand) gets the typed attributes too.
        if not isinstance(self.diagnostics, Diagnostics):
            self.diagnostics = Diagnostics(self.diagnostics if isinstance(self.diagnostics, Mapping) else {})

    def _column(self, per_unit: np.ndarray) -> np.ndarray:
        """Per-unit values of the explained class (all classes when no column is chosen)."""
        if self.class_index is not None and per_unit.ndim == 2:
            return per_unit[:, self.class_index]
        return per_unit

    @property
    def _law(self):
        """The surrogate's length law for the columns :attr:`value` holds (one class's pivot
        when ``class_index`` picks a column of a joint fit)."""
        return self.surrogate.law.column(self.class_index if self.surrogate.multiclass else None)

    # -- per-position scores ----------------------------------------------------------
    @property
    def value(self) -> np.ndarray:
        """v of each position's token: the output on the token alone, minus ``base_value``."""
        return self._column(self.surrogate.value)[self.unit_index].copy()

    @property
    def importance(self) -> np.ndarray:
        """s of each position's token: how much weight it takes from the others (mean zero)."""
        return self.surrogate.importance[self.unit_index].copy()

    @property
    def value_se(self) -> np.ndarray | None:
        """Standard error of each position's value (None where the method gives none)."""
        return None if self.unit_value_se is None else self._column(self.unit_value_se)[self.unit_index].copy()

    @property
    def importance_se(self) -> np.ndarray | None:
        """Standard error of each position's importance. Close to the prior's sd (0.25 by
        default) means the samples did not determine it; see :attr:`importance_determined`."""
        return None if self.unit_importance_se is None else self.unit_importance_se[self.unit_index].copy()

    @property
    def importance_determined(self) -> np.ndarray:
        """(n,) bool: True where the data, not the prior, fix the position's importance.

        The rule (:data:`~slalom_core.fit_quality.DETERMINED_RULE`, the words the docs and
        the page use): the importance's standard error is below 0.8 times the prior's sd
        (``diagnostics.prior_sd``; the default 0.25 for a fit without a prior), i.e. the
        samples shrank the variance to under 64 % of the prior's, a posterior contraction
        1 − SE²/sd² above 0.36 (Betancourt 2018, "Calibrating model-based inferences and
        decisions", arXiv:1803.08393; Schad, Betancourt & Vasishth 2021, Psychological
        Methods 26(1)); or the importance lies more than 2 standard errors from the mean
        importance of the text's tokens: the data set it apart from the average token. For the
        default (``hybrid``) the SE and the prior's sd are those *in context*: the short
        samples' tempered by the fitted temperature γ, with γ's own uncertainty (importances
        that γ = 0 flattens are determined nowhere). All False for a
        method without standard errors (``ana``): nothing then says the data determined
        them. Views draw an undetermined importance neutral.

        Example:
            >>> exp.importance_determined.mean()  # share of positions the data determine  # doctest: +SKIP
        """
        se = self.importance_se
        if se is None:
            return np.zeros(self.n_positions, dtype=bool)
        from .fitting.constants import PRIOR_SD

        sd = self.diagnostics.prior_sd
        contracted = se < DETERMINED_SE_RATIO * (PRIOR_SD if sd is None else float(sd))
        centre = float(np.mean(self.surrogate.importance))  # over the text's unique tokens
        apart = np.abs(self.importance - centre)
        # Strictly apart: an importance at the mean with SE 0 (γ = 0) is not set apart.
        return np.asarray(contracted | ((apart > DETERMINED_APART_SE * se) & (apart > 0)), dtype=bool)

    @property
    def lin(self) -> np.ndarray:
        """v·exp(s), the paper's linearised attribution (v measured from ``base_value``)."""
        return self.scores("lin")

    @property
    def removal(self) -> np.ndarray:
        """Predicted change F(t) − F(t without this position), in output units."""
        return self.scores("removal")

    @property
    def contribution(self) -> np.ndarray:
        """α_i·v_i; with ``base_value`` they sum to :attr:`surrogate_output`."""
        return self.scores("contribution")

    def shapley(self, *, exact_max_positions: int = 12, n_permutations: int = 512, seed: int | None = 0) -> np.ndarray:
        """Shapley values of the surrogate game with F(∅) = ``base_value`` (see
        :func:`slalom_core.scores.shapley`); they sum to surrogate_output − base_value.

        A method, unlike the array attributes ``lin`` or ``contribution``: call it (it takes
        options), ``exp.shapley()``, or ask by name, ``exp.scores("shapley")``.

        Args:
            exact_max_positions: exact Shapley values up to this many positions; beyond,
                permutation sampling. Default: 12.
            n_permutations: sampled permutations beyond that. Default: 512.
            seed: the permutations' seed. Default: 0.

        Example:
            >>> exp.shapley()[:3]  # doctest: +SKIP
        """
        return _scores.shapley(
            self.value,
            self.importance,
            exact_max_positions=exact_max_positions,
            n_permutations=n_permutations,
            seed=seed,
            law=self._law,
        )

    def predict(self, positions: Sequence[int] | np.ndarray) -> np.ndarray | float:
        """The surrogate's output on the sub-text that keeps ``positions`` (indices into
        :attr:`tokens`, in the text's order), in the model's own units: ``base_value`` plus
        F of those tokens under the surrogate's length law. No model call.

        The same surrogate every score of this explanation is computed from (removal,
        contribution, Shapley values, the shapiq game), so a sub-text's prediction is what
        those scores add up to. An empty selection gives ``base_value``.

        Example:
            >>> exp.predict(range(exp.n_positions)) == exp.surrogate_output  # doctest: +SKIP
            >>> exp.predict([0])  # the first token alone, log-odds  # doctest: +SKIP
        """
        pos = np.asarray(list(positions) if not isinstance(positions, np.ndarray) else positions)
        if pos.size and (pos.dtype.kind not in "iu" or pos.min() < -self.n_positions or pos.max() >= self.n_positions):
            raise ValueError(f"positions must be integer indices into the text's {self.n_positions} positions")
        counts = np.bincount(self.unit_index[pos.astype(np.int64)], minlength=self.surrogate.n_units)
        out = self.surrogate.predict(counts[None])[0]
        if self.class_index is not None and np.ndim(out) == 1:
            out = out[self.class_index]
        out = np.asarray(self.base_value) + out
        return out if np.ndim(out) else float(out)

    def to_interaction_values(
        self, max_order: int = 2, *, index: str = "SII", output: int | str | None = None, exact_max_positions: int = 16
    ) -> Any:
        """The surrogate game's Shapley interactions as a shapiq ``InteractionValues`` (needs
        ``pip install 'slalom-xai[shapiq]'``; no model call).

        The game is the one of :meth:`shapley`: S ↦ F(S), the fitted SLALOM on the kept
        positions, F(∅) = ``base_value``, which is the object's ``baseline_value``. With
        ``index="SII"`` (default) order 1 equals ``exp.shapley()`` and order 2 holds the
        pairwise Shapley interaction indices; ``index="k-SII"`` sums, with the baseline, to
        :attr:`surrogate_output` (for shapiq's force and waterfall plots). Exact: the 2^n
        coalitions are enumerated, up to ``exact_max_positions`` positions (at most 22).
        ``output`` picks a class of a joint multi-class fit, by name or by index 0..k-1
        (anything else, a negative index included, is refused with a ValueError). See
        :mod:`slalom_core.interactions`.

        Example:
            >>> iv = exp.to_interaction_values(max_order=2)  # doctest: +SKIP
            >>> iv.plot_network(feature_names=exp.tokens)  # doctest: +SKIP
        """
        from .interactions import to_interaction_values

        return to_interaction_values(
            self, max_order=max_order, index=index, output=output, exact_max_positions=exact_max_positions
        )

    def scores(self, name: str) -> np.ndarray:
        """Per-position scores by name, one of :data:`slalom_core.SCORE_NAMES` (the score
        table, :data:`slalom_core.SCORES`, computes them from :attr:`value` and
        :attr:`importance`; a score added with :func:`slalom_core.register_score` too).

        A method taking the name (``exp.scores("lin")``, not ``exp.scores["lin"]``); the
        built-in scores are also attributes (``exp.lin``) and ``exp.shapley()``.

        Example:
            >>> exp.scores("contribution").sum() + exp.base_value == exp.surrogate_output  # doctest: +SKIP
        """
        row = _scores.SCORES[_scores.check_score(name)]
        return np.asarray(row.of(self.value, self.importance, self._law))

    # -- every class at once -------------------------------------------------------------
    def _binary_class(self) -> int | None:
        """The class this fit explains when the model is binary with two outputs, else None.

        Such a model is fitted once, F = log p1/p0; every other model's fit already has
        one column per class (joint), or explains one output (one logit, one label).
        """
        d = self.diagnostics
        if self.surrogate.multiclass:
            if self.class_index is not None:
                raise ValueError(
                    f"this explanation holds class {self.class_index} only (target=): explain with "
                    "target=None for every class"
                )
            return None
        if d.n_outputs is None:
            raise ValueError(
                "this explanation does not record how many outputs the model has (diagnostics.n_outputs): "
                "make it with slalom_core.explain"
            )
        if d.n_outputs == 2 and not str(d.output_kind).startswith("multilabel"):
            return 1 if self.target is None else int(self.target)
        if d.n_outputs > 2 and not str(d.output_kind).startswith("multilabel"):
            raise ValueError("a one-vs-rest fit (multiclass='ovr') explains one class: use scores()")
        return None

    def per_class(self, name: str) -> np.ndarray:
        """Per-position scores with one column per class of the model, from this one fit.

        A binary model's fit of F = log p1/p0 gives (n, 2): class 0's column is the score
        table's ``class0_sign`` times class 1's (:data:`slalom_core.SCORES`; importances are
        shared, values and contributions change sign). A joint k-class fit gives (n, k),
        the shared importance repeated per class. A model with one output (one logit, or one
        label of a multi-label model) gives (n,). :class:`LabelExplanations` stacks labels.

        Example:
            >>> exp = slalom_core.explain(model, "a great movie", tokenizer=tok)  # doctest: +SKIP
            >>> exp.per_class("contribution")[:, 0] == -exp.contribution  # doctest: +SKIP
        """
        s = np.asarray(self.scores(name), dtype=np.float64)
        explained = self._binary_class()
        if explained is not None:
            return _both_classes(s, _scores.SCORES[name].class0_sign, explained)
        if self.surrogate.multiclass and s.ndim == 1:
            return np.repeat(s[:, None], self.surrogate.value.shape[1], axis=1)
        return s

    def per_class_outputs(self) -> ClassOutputs:
        """The reference point, f(x) and the residual, one entry per class as in :meth:`per_class`.

        Example:
            >>> ref, f_x, residual = exp.per_class_outputs()  # doctest: +SKIP
        """
        parts = [np.asarray(x, dtype=np.float64) for x in (self.base_value, self.model_output, self.full_text_gap)]
        explained = self._binary_class()
        if explained is not None:
            # Outputs are log-odds: class 0's are minus class 1's.
            parts = [_both_classes(x, -1, explained) for x in parts]
        return ClassOutputs(*parts)

    def summary(self) -> dict:
        """One row on this fit: tokens, model vs surrogate output, residual, held-out fit, cost.

        Outputs are floats (lists of one per class for a joint fit). See :func:`slalom_core.fit_summary`.

        Example:
            >>> exp.summary()["residual"]  # doctest: +SKIP
        """
        d = self.diagnostics
        return {
            "tokens": self.n_positions,
            "model_output": _floats(self.model_output),
            "surrogate_output": _floats(self.surrogate_output),
            "residual": _floats(self.full_text_gap),
            "heldout_r2": d.get("heldout_r2"),
            "heldout_mse": d.get("heldout_mse"),
            "model_evaluations": d.get("model_evaluations", 0),
            "seconds": d.get("total_seconds", 0.0),
        }

    @property
    def surrogate_output(self) -> np.ndarray | float:
        """The surrogate's own output on the full text (``base_value`` + contributions)."""
        out = np.asarray(self.base_value) + self.contribution.sum(axis=0)
        return out if np.ndim(out) else float(out)

    @property
    def full_text_gap(self) -> np.ndarray | float:
        """model_output − surrogate_output: what the surrogate misses on the explained text."""
        gap = np.asarray(self.model_output) - np.asarray(self.surrogate_output)
        return gap if np.ndim(gap) else float(gap)

    @property
    def n_positions(self) -> int:
        return len(self.tokens)

    # -- tables -------------------------------------------------------------------------
    def unit_table(self) -> list[dict]:
        """One row per unique unit: its token(s), count in the text, value, importance, lin."""
        counts = np.bincount(self.unit_index, minlength=self.surrogate.n_units)
        first = {}
        for pos, u in enumerate(self.unit_index.tolist()):
            first.setdefault(u, pos)
        value = self._column(self.surrogate.value)
        lin = _scores.lin(value, self.surrogate.importance)
        rows = []
        for u in range(self.surrogate.n_units):
            pos = first.get(u)
            rows.append(
                {
                    "token": self.tokens[pos] if pos is not None else None,
                    "token_ids": self.token_ids[pos] if pos is not None else None,
                    "count": int(counts[u]),
                    "value": value[u].tolist(),  # a float, or a list with a class axis
                    "importance": float(self.surrogate.importance[u]),
                    "lin": lin[u].tolist(),
                }
            )
        return rows

    def to_dict(self) -> dict:
        """Plain Python (JSON-serialisable) view of the explanation.

        Besides the per-position scores it holds what :meth:`from_dict` needs to rebuild the
        explanation exactly (``format_version``, ``unit_index``, ``surrogate``, the per-unit
        standard errors, ``class_index``, ``text``); see :func:`slalom_core.saving.explanation_dict`.

        Example:
            >>> exp.to_dict()["format_version"]  # doctest: +SKIP
            1
        """
        return saving.explanation_dict(self)

    # -- views and files (the work is done in views/ and saving.py) -----------------------
    def to_html(
        self, *, score: str = "contribution", class_index: int | str | None = None, full_page: bool = True
    ) -> str:
        """The view: first what each token did (``score`` as colour, the sum b → F(x), the
        top tokens), SLALOM's two channels (value colour, importance underline) one tab away.

        See :func:`slalom_core.views.to_html`; a whole offline page, or a fragment.

        Example:
            >>> Path("view.html").write_text(exp.to_html(), encoding="utf-8")  # doctest: +SKIP
        """
        from .views.html import to_html

        return to_html(self, score=score, class_index=class_index, full_page=full_page)

    def _repr_html_(self) -> str:
        """The two-channel view in a notebook cell."""
        return self.to_html(full_page=False)

    def save(self, path: str | os.PathLike) -> Path:
        """Write the explanation to a versioned JSON file; :func:`slalom_core.load_explanation`
        reads it back exactly. See :func:`slalom_core.saving.save_explanation`.

        Example:
            >>> exp.save("review.slalom.json")  # doctest: +SKIP
        """
        return saving.save_explanation(self, path)

    @classmethod
    def from_dict(cls, d: Mapping) -> SlalomExplanation:
        """The explanation :meth:`to_dict` describes (see :func:`slalom_core.saving.explanation_from_dict`).

        Example:
            >>> SlalomExplanation.from_dict(exp.to_dict()).value  # doctest: +SKIP
        """
        explanation = cls(**saving.explanation_fields(d))
        # The scores the dict also holds must be those it rebuilds: else it was edited.
        saving.check_stored_scores(explanation, d)
        return explanation

    def to_pandas(self):
        """One row per position: token, every score of the table and the standard errors.

        See :func:`slalom_core.saving.explanation_frame`; needs pandas.

        Example:
            >>> exp.to_pandas()[["token", "value", "value_se"]]  # doctest: +SKIP
        """
        return saving.explanation_frame(self)

    def __repr__(self) -> str:
        d = self.diagnostics
        return (
            f"SlalomExplanation(method={self.method!r}, positions={self.n_positions}, "
            f"units={self.surrogate.n_units}, model_evaluations={d.get('model_evaluations')}, "
            f"heldout_r2={d.get('heldout_r2', float('nan')):.3f})"
        )


def _floats(x: object) -> float | list:
    return saving.plain(np.asarray(x, dtype=np.float64))


class LabelExplanations(tuple):
    """The fits of one text for every label of a multi-label model, one per label, in order.

    A tuple of :class:`SlalomExplanation` (each in its label's own log-odds, with its own
    importances) that reads like one explanation of every label: :meth:`per_class` and
    :meth:`per_class_outputs` put the labels on the last axis, :meth:`summary` lists them.
    Made by :func:`slalom_core.explain_outputs`.

    Example:
        >>> fits = slalom_core.explain_outputs(multilabel_model, ["a text"], tokenizer=tok)[0]  # doctest: +SKIP
        >>> fits.per_class("contribution").shape  # (positions, labels)  # doctest: +SKIP
    """

    @property
    def n_positions(self) -> int:
        """Positions of the text (every label's fit has the same)."""
        return self[0].n_positions

    def per_class(self, name: str) -> np.ndarray:
        """(n, labels) per-position scores: each label's own fit's ``name`` scores."""
        return np.stack([np.asarray(f.scores(name), dtype=np.float64) for f in self], axis=1)

    def per_class_outputs(self) -> ClassOutputs:
        """Reference point, f(x) and residual, one entry per label."""
        per_label = [f.per_class_outputs() for f in self]
        return ClassOutputs(*(np.array([getattr(o, k) for o in per_label]) for k in ClassOutputs._fields))

    def to_html(self, *, score: str = "contribution", full_page: bool = True) -> str:
        """Every label's fit of the text, one two-channel row each, named by its label.

        Example:
            >>> Path("labels.html").write_text(fits.to_html(), encoding="utf-8")  # doctest: +SKIP
        """
        from .views.compare import compare_html

        names = self[0].diagnostics.get("class_names")
        labels = [
            str(names[f.target])
            if names is not None and f.target is not None and f.target < len(names)
            else f"label {i}"
            for i, f in enumerate(self)
        ]
        return compare_html(list(self), scores=(score,), labels=labels, full_page=full_page)

    def _repr_html_(self) -> str:
        return self.to_html(full_page=False)

    def summary(self) -> dict:
        """One row on this text: outputs listed per label, cost summed over the labels' fits."""
        rows = [f.summary() for f in self]
        out = {k: [r[k] for r in rows] for k in rows[0]}
        out["tokens"] = rows[0]["tokens"]
        out["model_evaluations"] = sum(out["model_evaluations"])
        out["seconds"] = sum(out["seconds"])
        return out


def explanation_from_dict(d: Mapping) -> SlalomExplanation:
    """The explanation a :meth:`SlalomExplanation.to_dict` dict describes (format version 1,
    or the unversioned dict of earlier releases); see :func:`slalom_core.saving.explanation_fields`.

    Example:
        >>> again = explanation_from_dict(exp.to_dict())  # doctest: +SKIP
        >>> np.array_equal(again.contribution, exp.contribution)  # doctest: +SKIP
        True
    """
    return SlalomExplanation.from_dict(d)


def load_explanation(path: str | os.PathLike) -> SlalomExplanation:
    """The explanation saved at ``path`` (by :meth:`SlalomExplanation.save`), without a model.

    Raises:
        ValueError: not a SLALOM explanation, a format this version cannot read, or a file
            that fails a check (see :mod:`slalom_core.saving`); the message names the file
            and says why.
        FileNotFoundError: no file at ``path``.

    Example:
        >>> exp = load_explanation("review.slalom.json")  # doctest: +SKIP
    """
    d = saving.read_explanation_dict(path)
    try:
        return SlalomExplanation.from_dict(d)
    except (ValueError, TypeError, KeyError, IndexError) as err:
        raise ValueError(f"{os.fspath(path)}: {err}") from None
