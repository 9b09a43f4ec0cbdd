"""The result of explaining one text: :class:`SlalomExplanation`."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import scores as _scores
from .surrogate import SlalomSurrogate

__all__ = ["SlalomExplanation"]


@dataclass
class SlalomExplanation:
    """A fitted local SLALOM and its scores for every position of one text.

    Per-position arrays have one row per position (token, or word at word granularity)
    and, for a joint multi-class fit, a trailing class axis (``class_names``).

    Attributes:
        tokens: display string per position.
        token_ids: the model's token ids making up each position.
        unit_index: (n,) index of each position's unique unit in ``surrogate``.
        surrogate: the fitted :class:`SlalomSurrogate` over the unique units.
        method: fitting algorithm ("eff", "fidel", "ana").
        granularity: "token" or "word".
        target: the explained class (None: class 1 of a binary model, or all classes).
        class_names: class axis labels of a joint multi-class fit, else None.
        model_output: the model's log-odds (or centred logits) on the full text.
        diagnostics: model_evaluations, tokens_evaluated, model_seconds, fit_seconds,
            heldout_mse, heldout_r2, seed, ...

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
    empty_value: float = 0.0
    diagnostics: dict = field(default_factory=dict)

    # -- per-position scores ----------------------------------------------------------
    @property
    def value(self) -> np.ndarray:
        """v of each position's token: its effect alone (sign = direction)."""
        return self.surrogate.value[self.unit_index].copy()

    @property
    def importance(self) -> np.ndarray:
        """s of each position's token: how much weight it takes from the others."""
        return self.surrogate.importance[self.unit_index].copy()

    @property
    def lin(self) -> np.ndarray:
        """v·exp(s), the paper's linearised attribution."""
        return _scores.lin(self.value, self.importance)

    @property
    def removal(self) -> np.ndarray:
        """Predicted change F(t) − F(t without this position)."""
        return _scores.removal(self.value, self.importance, self.empty_value)

    @property
    def contribution(self) -> np.ndarray:
        """α_i·v_i; sums over positions to :attr:`surrogate_output`."""
        return _scores.contribution(self.value, self.importance)

    def shapley(self, *, exact_max_positions: int = 12, n_permutations: int = 512, seed: int | None = 0) -> np.ndarray:
        """Shapley values of the surrogate game (see :func:`slalom_core.scores.shapley`)."""
        return _scores.shapley(
            self.value,
            self.importance,
            empty_value=self.empty_value,
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
        """The surrogate's own output on the full text."""
        out = self.contribution.sum(axis=0)
        return out if np.ndim(out) else float(out)

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
        lin = self.surrogate.lin()
        rows = []
        for u in range(self.surrogate.n_units):
            pos = first.get(u)
            rows.append(
                {
                    "token": self.tokens[pos] if pos is not None else None,
                    "token_ids": self.token_ids[pos] if pos is not None else None,
                    "count": int(counts[u]),
                    "value": self.surrogate.value[u].tolist() if self.surrogate.multiclass else float(self.surrogate.value[u]),
                    "importance": float(self.surrogate.importance[u]),
                    "lin": lin[u].tolist() if self.surrogate.multiclass else float(lin[u]),
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
