"""The result of explaining one text: :class:`SlalomExplanation`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from . import scores as _scores
from .diagnostics import Diagnostics
from .surrogate import SlalomSurrogate

__all__ = ["SlalomExplanation"]


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

    def __post_init__(self) -> None:
        # A plain dict (an explanation built by hand) gets the typed attributes too.
        if not isinstance(self.diagnostics, Diagnostics):
            self.diagnostics = Diagnostics(self.diagnostics if isinstance(self.diagnostics, Mapping) else {})

    def _column(self, per_unit: np.ndarray) -> np.ndarray:
        """Per-unit values of the explained class (all classes when no column is chosen)."""
        if self.class_index is not None and per_unit.ndim == 2:
            return per_unit[:, self.class_index]
        return per_unit

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
    def importance_determined(self) -> np.ndarray | None:
        """True where the data, not the prior, fixed the importance: its standard error is
        below half the prior's standard deviation (the posterior at least twice as sharp)."""
        se, sd = self.importance_se, self.diagnostics.prior_sd
        return None if se is None else se < (0.5 * sd if sd else 0.5)

    @property
    def lin(self) -> np.ndarray:
        """v·exp(s), the paper's linearised attribution (v measured from ``base_value``)."""
        return _scores.lin(self.value, self.importance)

    @property
    def removal(self) -> np.ndarray:
        """Predicted change F(t) − F(t without this position), in output units."""
        return _scores.removal(self.value, self.importance)

    @property
    def contribution(self) -> np.ndarray:
        """α_i·v_i; with ``base_value`` they sum to :attr:`surrogate_output`."""
        return _scores.contribution(self.value, self.importance)

    def shapley(self, *, exact_max_positions: int = 12, n_permutations: int = 512, seed: int | None = 0) -> np.ndarray:
        """Shapley values of the surrogate game with F(∅) = ``base_value`` (see
        :func:`slalom_core.scores.shapley`); they sum to surrogate_output − base_value."""
        return _scores.shapley(
            self.value,
            self.importance,
            exact_max_positions=exact_max_positions,
            n_permutations=n_permutations,
            seed=seed,
        )

    def scores(self, name: str) -> np.ndarray:
        """Per-position scores by name, one of :data:`slalom_core.SCORE_NAMES`."""
        if name not in _scores.SCORE_NAMES:
            raise ValueError(f"unknown score {name!r}; choose one of {_scores.SCORE_NAMES}")
        if name == "shapley":
            return self.shapley()
        return getattr(self, name)

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
        """Plain Python (JSON-serialisable) view of the explanation."""

        def plain(x):
            if isinstance(x, np.ndarray):
                return x.tolist()
            if isinstance(x, (np.floating, np.integer)):
                return x.item()
            return x

        return {
            "tokens": list(self.tokens),
            "token_ids": [list(t) for t in self.token_ids],
            "method": self.method,
            "granularity": self.granularity,
            "target": self.target,
            "class_names": self.class_names,
            "value": plain(self.value),
            "importance": plain(self.importance),
            "lin": plain(self.lin),
            "removal": plain(self.removal),
            "contribution": plain(self.contribution),
            "model_output": plain(self.model_output),
            "base_value": plain(self.base_value),
            "value_se": plain(self.value_se),
            "importance_se": plain(self.importance_se),
            "surrogate_output": plain(self.surrogate_output),
            "units": self.unit_table(),
            "diagnostics": {k: plain(v) for k, v in self.diagnostics.items()},
        }

    def __repr__(self) -> str:
        d = self.diagnostics
        return (
            f"SlalomExplanation(method={self.method!r}, positions={self.n_positions}, "
            f"units={self.surrogate.n_units}, model_evaluations={d.get('model_evaluations')}, "
            f"heldout_r2={d.get('heldout_r2', float('nan')):.3f})"
        )
