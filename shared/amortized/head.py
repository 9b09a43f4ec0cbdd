"""The amortized head: per-position hidden states in, one value and one importance per unit out.

What the surrogate defines holds for the prediction too (see the design notes on amortized
SLALOM): a token repeated in a text has one v and one s (the head's outputs are averaged over
its positions), and s is only determined up to a constant per text (centred over the text's
unique units, as the fits report it).
"""

from __future__ import annotations

import torch

__all__ = ["AmortizedHead", "pool_units", "HIDDEN", "EPOCHS"]

#: The head's defaults, stated once (the explainer, its training, the pipeline and ``amortize``):
#: the MLP's hidden width, and training passes over the label run's texts (the best one kept).
HIDDEN, EPOCHS = 256, 60


class AmortizedHead(torch.nn.Module):
    """A learned mix of the model's layers, then a small MLP to (value, importance).

    Args:
        n_layers: hidden-state layers the model returns (embeddings included).
        width: their width D.
        hidden: the MLP's hidden width.

    Example:
        >>> head = AmortizedHead(n_layers=3, width=8, hidden=16)
        >>> head(torch.zeros(5, 3, 8)).shape
        torch.Size([5, 2])
    """

    def __init__(self, *, n_layers: int, width: int, hidden: int = HIDDEN) -> None:
        super().__init__()
        self.n_layers, self.width, self.hidden = int(n_layers), int(width), int(hidden)
        self.layer_logits = torch.nn.Parameter(torch.zeros(self.n_layers))
        self.norm = torch.nn.LayerNorm(self.width)
        self.mlp = torch.nn.Sequential(
            torch.nn.Linear(self.width, self.hidden),
            torch.nn.GELU(),
            torch.nn.Linear(self.hidden, self.hidden),
            torch.nn.GELU(),
            torch.nn.Linear(self.hidden, 2),
        )

    def forward(self, states: torch.Tensor) -> torch.Tensor:
        """(N, L, D) hidden states of N positions -> (N, 2): raw value and importance."""
        mix = torch.softmax(self.layer_logits, dim=0)
        return self.mlp(self.norm(torch.einsum("nld,l->nd", states, mix)))


def pool_units(raw: torch.Tensor, unit_index: torch.Tensor, n_units: int, group: torch.Tensor, n_groups: int):
    """Per-unit value and centred importance from per-position outputs.

    Args:
        raw: (N, 2) the head's outputs per position (of several texts, concatenated).
        unit_index: (N,) each position's unit, numbered across all texts (0 .. n_units-1).
        n_units: units of all texts together.
        group: (n_units,) the text each unit belongs to (0 .. n_groups-1).
        n_groups: number of texts.

    Returns:
        ``(value, importance)``, each (n_units,): the mean over a unit's positions, the
        importance minus its text's mean over units.

    Example:
        >>> v, s = pool_units(torch.tensor([[1.0, 2.0], [3.0, 0.0]]), torch.tensor([0, 0]), 1, torch.tensor([0]), 1)
        >>> v.tolist(), s.tolist()
        ([2.0], [0.0])
    """
    ones = torch.ones(len(unit_index), dtype=raw.dtype)
    count = torch.zeros(n_units, dtype=raw.dtype).index_add_(0, unit_index, ones)
    summed = torch.zeros(n_units, 2, dtype=raw.dtype).index_add_(0, unit_index, raw)
    per_unit = summed / count[:, None]
    s = per_unit[:, 1]
    size = torch.zeros(n_groups, dtype=raw.dtype).index_add_(0, group, torch.ones_like(s))
    mean = torch.zeros(n_groups, dtype=raw.dtype).index_add_(0, group, s) / size
    return per_unit[:, 0], s - mean[group]
