"""Captum-shaped results from the engine's explanations: every score spread back onto the
input positions, Lime's one-score-per-feature layout, and the all-scores result type."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from slalom_core import SlalomExplanation
from torch import Tensor

from ._arguments import Rows


@dataclass
class SlalomAttributionResult:
    """Every SLALOM score from one fit, each a tensor shaped like the explained input ids.

    Returned by ``SlalomAttribution.attribute(..., return_all=True)``. Positions that are
    no feature (special tokens, padding) hold 0. A feature made of several positions
    (``feature_mask`` groups) gives its score to each of them, as Captum's Lime does.

    Attributes:
        scores: score name (``slalom_core.SCORE_NAMES``) -> (batch, length) tensor.
        explanations: the engine's :class:`slalom_core.SlalomExplanation` per row (one
            entry per feature, in order of first position; diagnostics, unit table, ...).

    Example:
        >>> res = SlalomAttribution(f).attribute(ids, target=1, return_all=True)  # doctest: +SKIP
        >>> res.lin, res["importance"], res.explanations[0].diagnostics  # doctest: +SKIP
    """

    scores: dict[str, Tensor]
    explanations: list[SlalomExplanation] = field(default_factory=list)

    def __getitem__(self, name: str) -> Tensor:
        if name not in self.scores:
            raise KeyError(f"unknown score {name!r}; choose one of {tuple(self.scores)}")
        return self.scores[name]

    def keys(self) -> list[str]:
        return list(self.scores)

    @property
    def value(self) -> Tensor:
        """v: the effect of a feature on its own (sign = direction)."""
        return self.scores["value"]

    @property
    def importance(self) -> Tensor:
        """s (mean-zero per row): how much weight a feature takes from the others."""
        return self.scores["importance"]

    @property
    def lin(self) -> Tensor:
        """v·exp(s), the paper's linearised attribution."""
        return self.scores["lin"]

    @property
    def removal(self) -> Tensor:
        """Predicted change of the output when the feature is removed."""
        return self.scores["removal"]

    @property
    def contribution(self) -> Tensor:
        """α·v: an additive split of the surrogate's output over features."""
        return self.scores["contribution"]

    @property
    def shapley(self) -> Tensor:
        """Shapley values of the fitted surrogate (no extra model calls)."""
        return self.scores["shapley"]

    @property
    def diagnostics(self) -> list[dict]:
        """Per row: model evaluations, seconds, held-out R², seed, ..."""
        return [e.diagnostics for e in self.explanations]


def scores_per_position(
    explanations: list[SlalomExplanation], position_maps: list[list[np.ndarray]], rows: Rows, names: Sequence[str]
) -> dict[str, Tensor]:
    """Each feature's score on every position it covers; 0 on special tokens and padding."""
    dtype, device = torch.get_default_dtype(), rows.ids.device
    out = {}
    for name in names:
        t = torch.zeros((rows.n_rows, rows.length), dtype=dtype, device=device)
        for row, (exp, groups) in enumerate(zip(explanations, position_maps)):
            per_feature = torch.as_tensor(np.asarray(exp.scores(name), dtype=np.float64), dtype=dtype, device=device)
            for g, positions in enumerate(groups):
                t[row, torch.as_tensor(positions, device=device)] = per_feature[g]
        out[name] = t
    return out


def per_feature(attributions: Tensor, fmask: Tensor | None) -> Tensor:
    """Lime's ``return_input_shape=False``: one score per interpretable feature."""
    if fmask is None:
        out = attributions
    else:
        out = torch.zeros(
            (attributions.shape[0], int(fmask.max()) + 1), dtype=attributions.dtype, device=attributions.device
        )
        # Every position of a feature holds the feature's score; special/padding
        # positions hold 0 and never share an id with a feature (checked in feature_groups).
        out.scatter_(1, fmask.clamp_min(0), attributions)
    return out  # batch x features, also for one example (as Lime's)
