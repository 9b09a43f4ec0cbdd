"""The SLALOM surrogate: a value and an importance per unique token.

For a text whose unique units (tokens or words) are indexed ``u = 0 … U-1`` and a sample
that contains unit ``u`` ``c_u`` times, the surrogate's output is

    F = Σ_u c_u exp(s_u) v_u / Σ_u c_u exp(s_u)

(Sec. 5.1 of the paper; repeated tokens count ``c_u`` times). Working on count matrices
rather than on sequences makes the surrogate independent of token order, which is exactly
the property SLALOM assumes, and turns a batch of samples into one matrix product.

Multi-class (App. C.1): one importance per unit, one value per unit and class, with the
values of every unit summing to zero over classes; ``F_c`` are then centred logits.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

__all__ = ["SlalomSurrogate", "softmax_weights"]


def softmax_weights(counts: torch.Tensor, importance: torch.Tensor) -> torch.Tensor:
    """Attention weights α of each unit in each sample (rows sum to one).

    Args:
        counts: (B, U) occurrence counts.
        importance: (U,) importance scores s.

    Returns:
        (B, U) tensor ``c_u exp(s_u) / Σ c exp(s)``; rows of an empty sample are all zero.
    """
    # Subtracting the max keeps exp() finite for large importances; softmax is shift-invariant.
    w = counts * torch.exp(importance - importance.max())
    den = w.sum(dim=1, keepdim=True)
    return w / den.clamp_min(torch.finfo(w.dtype).tiny)


@dataclass
class SlalomSurrogate:
    """A fitted SLALOM over ``U`` units.

    Attributes:
        value: (U,) for a binary model (log-odds), (U, C) for a joint multi-class fit.
        importance: (U,) importances, normalised so that they sum to ``gamma``.
        gamma: the normalisation constant Σ_u s_u (0 = mean-zero importances).

    Example:
        >>> sur = SlalomSurrogate(np.array([1.0, -1.0]), np.array([0.5, -0.5]))
        >>> round(float(sur.predict(np.array([[1, 1]]))[0]), 4)
        0.4621
    """

    value: np.ndarray
    importance: np.ndarray
    gamma: float = 0.0

    def __post_init__(self) -> None:
        self.value = np.asarray(self.value, dtype=np.float64)
        self.importance = np.asarray(self.importance, dtype=np.float64)
        if self.importance.ndim != 1 or self.value.shape[0] != self.importance.shape[0]:
            raise ValueError(
                f"value {self.value.shape} and importance {self.importance.shape} must "
                "describe the same units"
            )
        self.importance = normalise_importance(self.importance, self.gamma)

    @property
    def n_units(self) -> int:
        return int(self.importance.shape[0])

    @property
    def multiclass(self) -> bool:
        return self.value.ndim == 2

    # -- evaluation -----------------------------------------------------------------
    def predict(self, counts: np.ndarray | torch.Tensor) -> np.ndarray:
        """Surrogate output for each row of a (B, U) count matrix: (B,) or (B, C)."""
        c = torch.as_tensor(np.asarray(counts), dtype=torch.float64)
        if c.ndim == 1:
            c = c[None]
        alpha = softmax_weights(c, torch.from_numpy(self.importance))
        return (alpha @ torch.from_numpy(self.value)).numpy()

    def predict_sequences(self, sequences: list[list[int]]) -> np.ndarray:
        """Surrogate output for sequences of unit indices."""
        return self.predict(counts_from_sequences(sequences, self.n_units))

    # -- derived scores per unit ------------------------------------------------------
    def lin(self) -> np.ndarray:
        """The paper's linearised score v·exp(s) per unit (Sec. 5.4, Eq. 65)."""
        w = np.exp(self.importance)
        return self.value * (w[:, None] if self.multiclass else w)


def normalise_importance(importance: np.ndarray, gamma: float = 0.0) -> np.ndarray:
    """Shift importances so that they sum to ``gamma`` (softmax is shift-invariant)."""
    s = np.asarray(importance, dtype=np.float64)
    if s.size == 0:
        return s
    return s - s.mean() + gamma / s.size


def counts_from_sequences(sequences: list[list[int]], n_units: int) -> np.ndarray:
    """(B, U) count matrix of sequences of unit indices."""
    counts = np.zeros((len(sequences), n_units), dtype=np.float64)
    for row, seq in enumerate(sequences):
        np.add.at(counts[row], np.asarray(seq, dtype=np.int64), 1.0)
    return counts
