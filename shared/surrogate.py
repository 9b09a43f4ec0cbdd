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

__all__ = [
    "LengthLaw",
    "IDENTITY_LAW",
    "SlalomSurrogate",
    "surrogate_forward",
    "softmax_weights",
    "dense_slots",
    "counts_from_sequences",
    "pad_sequences",
    "count_matrix",
    "predict_sparse",
]


def surrogate_forward(
    value: torch.Tensor | None,
    importance: torch.Tensor,
    idx: torch.Tensor,
    mult: torch.Tensor,
) -> tuple[torch.Tensor | None, torch.Tensor]:
    """The SLALOM forward: attention weights and output of every sample, in one place.

    A sample is a row of *slots*: ``idx`` names the unit in each slot and ``mult`` how often
    it counts there (1 for an occurrence, 0 for padding, or a whole count when the row is a
    dense count vector, see :func:`dense_slots`). Weights are ``mult · exp(s)`` normalised
    over the row, so a unit occurring k times weighs k times; the output is the weighted
    sum of the slots' values. Every leading dimension is a batch dimension (e.g. one per
    text in a batched fit), shared by all four arguments.

    Args:
        value: (..., U, K) values, or None for the weights alone.
        importance: (..., U) importances (any shift: softmax is shift-invariant).
        idx: (..., B, L) int64 unit index per slot.
        mult: (..., B, L) multiplicity per slot, same dtype as ``importance``.

    Returns:
        ``(pred, alpha)``: (..., B, K) outputs (None without ``value``) and (..., B, L)
        weights; an all-padding row has zero weights and output 0.

    Example:
        >>> v = torch.tensor([[1.0], [-1.0]], dtype=torch.float64)
        >>> s = torch.tensor([0.5, -0.5], dtype=torch.float64)
        >>> pred, alpha = surrogate_forward(v, s, torch.tensor([[0, 1]]), torch.ones(1, 2, dtype=torch.float64))
        >>> round(float(pred[0, 0]), 4)
        0.4621
    """
    # Subtracting the max keeps exp() finite for large importances. It is detached: the
    # result does not depend on it, and a gradient through amax would only add noise.
    shifted = importance - importance.amax(dim=-1, keepdim=True).detach()
    flat = idx.flatten(-2)
    w = mult * torch.exp(torch.gather(shifted, -1, flat)).view(idx.shape)
    alpha = w / w.sum(dim=-1, keepdim=True).clamp_min(torch.finfo(w.dtype).tiny)
    if value is None:
        return None, alpha
    v_slot = torch.gather(value, -2, flat.unsqueeze(-1).expand(*flat.shape, value.shape[-1]))
    pred = (alpha.unsqueeze(-1) * v_slot.view(*idx.shape, value.shape[-1])).sum(dim=-2)
    return pred, alpha


def dense_slots(counts: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Slots of a dense (..., B, U) count matrix: slot u of every row holds unit u.

    Example:
        >>> idx, mult = dense_slots(torch.tensor([[2.0, 0.0, 1.0]]))
        >>> idx.tolist(), mult.tolist()
        ([[0, 1, 2]], [[2.0, 0.0, 1.0]])
    """
    idx = torch.arange(counts.shape[-1], device=counts.device).expand(counts.shape)
    return idx, counts


def softmax_weights(counts: torch.Tensor, importance: torch.Tensor) -> torch.Tensor:
    """(B, U) attention weights ``c_u exp(s_u) / Σ c exp(s)``: rows sum to one, or are all zero
    for an empty sample.

    Args:
        counts: (B, U) occurrence counts.
        importance: (U,) importance scores s.

    Example:
        >>> softmax_weights(torch.tensor([[1.0, 1.0]]), torch.zeros(2)).tolist()
        [[0.5, 0.5]]
    """
    return surrogate_forward(None, importance, *dense_slots(counts.to(importance.dtype)))[1]


@dataclass(frozen=True)
class LengthLaw:
    """How the surrogate's output grows with the number k of tokens it reads.

    A SLALOM's output is a weighted *mean* of values, so it cannot follow a transformer whose
    log-odds grow as a text gathers more words of one sentiment. The length law lets it:

        F(t) = p + A(k) · (Σ_i α_i(t) v(t_i) − p),   A(k) = k^(η + κ·ln k),   k = |t| ≥ 1;  F(∅) = 0

    (F measured from the reference point): as the text grows, its output moves away from the
    pivot p by the factor A(k). At k = 1, A = 1, so a token's value is the surrogate's output on
    that token alone, in log-odds, whatever the text; the law says how outputs on longer texts
    scale. ``exponent = curvature = 0`` (A ≡ 1) is the paper's SLALOM (the identity,
    :data:`IDENTITY_LAW`), which a model that *is* a SLALOM is fitted with.

    Attributes:
        exponent: η, the amplification's growth per unit of ln k at k = 1 (unit-free).
        curvature: κ, how that growth changes with ln k (unit-free; 0: a power law).
        pivot: p, the output (from the reference point) that amplification moves away from;
            (K,) for a joint multi-class fit (summing to zero over classes), else a float.

    Example:
        >>> law = LengthLaw(exponent=0.5)
        >>> float(law.apply(np.array([1.0]), np.array([4.0]))[0])  # 4^0.5 · (1 − 0)
        2.0
    """

    exponent: float = 0.0
    curvature: float = 0.0
    pivot: float | np.ndarray = 0.0

    @property
    def is_identity(self) -> bool:
        return self.exponent == 0.0 and self.curvature == 0.0

    def amplification(self, k: np.ndarray) -> np.ndarray:
        """A(k) for k ≥ 1 (1 at k = 1; any k < 1 is read as 1)."""
        lk = np.log(np.maximum(np.asarray(k, dtype=np.float64), 1.0))
        return np.exp((self.exponent + self.curvature * lk) * lk)

    def read_at(self, value: np.ndarray, k: float) -> np.ndarray:
        """Values (n,) or (n, K) as read in a text of ``k`` tokens: p + A(k)·(v − p). A text's
        output is the attention-weighted mean of its tokens' values read at its length."""
        pivot = np.asarray(self.pivot, dtype=np.float64)
        return pivot + float(self.amplification(np.array([k]))[0]) * (np.asarray(value, dtype=np.float64) - pivot)

    def apply(self, mean: np.ndarray, k: np.ndarray) -> np.ndarray:
        """F from the weighted means ``mean`` ((B,) or (B, K)) of samples of ``k`` tokens
        ((B,)); an empty sample (k = 0) gives 0, the reference point."""
        mean = np.asarray(mean, dtype=np.float64)
        k = np.asarray(k, dtype=np.float64)
        amp = self.amplification(k)
        if mean.ndim == 2:
            amp = amp[:, None]
        pivot = np.asarray(self.pivot, dtype=np.float64)
        out = pivot + amp * (mean - pivot)
        return np.where((k > 0)[:, None] if mean.ndim == 2 else k > 0, out, 0.0)

    def column(self, k: int | None) -> LengthLaw:
        """The law of one output column ``k`` of a joint fit (itself for one output)."""
        pivot = np.asarray(self.pivot, dtype=np.float64)
        return self if k is None or pivot.ndim == 0 else LengthLaw(self.exponent, self.curvature, float(pivot[k]))

    def as_dict(self) -> dict:
        return {
            "exponent": float(self.exponent),
            "curvature": float(self.curvature),
            "pivot": np.asarray(self.pivot, dtype=np.float64).tolist(),
        }

    @classmethod
    def from_diagnostics(cls, d: dict) -> LengthLaw:
        """The law a fit recorded in its diagnostics (``length_exponent``, ``length_curvature``,
        ``length_pivot``; the identity where it recorded none: every method but the default)."""
        if d.get("length_exponent") is None:
            return IDENTITY_LAW
        return cls.from_dict(
            {"exponent": d["length_exponent"], "curvature": d.get("length_curvature", 0.0), "pivot": d["length_pivot"]}
        )

    @classmethod
    def from_dict(cls, d: dict | None) -> LengthLaw:
        """The law :meth:`as_dict` wrote (None: the identity, as files before the law hold)."""
        if d is None:
            return IDENTITY_LAW
        try:
            numbers = float(d["exponent"]), float(d["curvature"])
            pivot = np.asarray(d["pivot"], dtype=np.float64)
        except (KeyError, TypeError, ValueError):
            raise ValueError("'surrogate.law' must hold the numbers 'exponent', 'curvature' and 'pivot'") from None
        if not (np.all(np.isfinite(numbers)) and np.all(np.isfinite(pivot))) or pivot.ndim > 1:
            raise ValueError("'surrogate.law' holds a non-finite or mis-shaped number")
        return cls(*numbers, float(pivot) if pivot.ndim == 0 else pivot)


#: The paper's SLALOM: no growth with length.
IDENTITY_LAW = LengthLaw()


@dataclass
class SlalomSurrogate:
    """A fitted SLALOM over ``U`` units.

    Attributes:
        value: (U,) for a binary model (log-odds), (U, C) for a joint multi-class fit.
        importance: (U,) importances, normalised so that they sum to ``gamma``.
        gamma: the normalisation constant Σ_u s_u (0 = mean-zero importances).
        law: how outputs grow with the number of tokens (:class:`LengthLaw`; the identity
            is the paper's SLALOM).

    Example:
        >>> sur = SlalomSurrogate(np.array([1.0, -1.0]), np.array([0.5, -0.5]))
        >>> round(float(sur.predict(np.array([[1, 1]]))[0]), 4)
        0.4621
    """

    value: np.ndarray
    importance: np.ndarray
    gamma: float = 0.0
    law: LengthLaw = IDENTITY_LAW

    def __post_init__(self) -> None:
        self.value = np.asarray(self.value, dtype=np.float64)
        self.importance = np.asarray(self.importance, dtype=np.float64)
        if self.importance.ndim != 1 or self.value.shape[0] != self.importance.shape[0]:
            raise ValueError(
                f"value {self.value.shape} and importance {self.importance.shape} must describe the same units"
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
        """Surrogate output for each row of a (B, U) count matrix: (B,) or (B, C), under its
        length law (a row's length is its count total)."""
        c = torch.as_tensor(np.asarray(counts), dtype=torch.float64)
        if c.ndim == 1:
            c = c[None]
        value = torch.from_numpy(self.value)
        pred, _ = surrogate_forward(
            value if self.multiclass else value[:, None], torch.from_numpy(self.importance), *dense_slots(c)
        )
        mean = (pred if self.multiclass else pred[:, 0]).numpy()
        return self.law.apply(mean, c.sum(dim=1).numpy())

    def predict_sequences(self, sequences: list[list[int]]) -> np.ndarray:
        """Surrogate output for sequences of unit indices."""
        return self.predict(counts_from_sequences(sequences, self.n_units))


def normalise_importance(importance: np.ndarray, gamma: float = 0.0) -> np.ndarray:
    """Shift importances so that they sum to ``gamma`` (softmax is shift-invariant)."""
    s = np.asarray(importance, dtype=np.float64)
    if s.size == 0:
        return s
    return s - s.mean() + gamma / s.size


def counts_from_sequences(sequences: list[list[int]], n_units: int) -> np.ndarray:
    """(B, U) count matrix of sequences of unit indices."""
    lengths = np.fromiter((len(s) for s in sequences), dtype=np.int64, count=len(sequences))
    flat = (
        np.concatenate([np.asarray(s, dtype=np.int64) for s in sequences]) if len(sequences) else np.zeros(0, np.int64)
    )
    rows = np.repeat(np.arange(len(sequences)), lengths)
    # One bincount over (row, unit) pairs: a unit repeated in a row counts as often.
    return (
        np.bincount(rows * n_units + flat, minlength=len(sequences) * n_units)
        .reshape(len(sequences), n_units)
        .astype(np.float64)
    )


# Samples as the fits see them: padded unit-index matrices and count matrices.
def pad_sequences(sequences: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(B, L) unit-index matrix (padding index 0) and a 0/1 mask of real slots.

    A sparse view of the count matrix: each slot is one occurrence, so repeated units
    count as often as they occur, and the cost of a gradient is B·L, not B·U.

    Example:
        >>> idx, mask = pad_sequences([np.array([2]), np.array([0, 1])])
        >>> idx.tolist(), mask.tolist()
        ([[2, 0], [0, 1]], [[1.0, 0.0], [1.0, 1.0]])
    """
    lengths = np.fromiter((len(s) for s in sequences), dtype=np.int64, count=len(sequences))
    width = max(int(lengths.max()) if len(lengths) else 0, 1)
    mask_bool = np.arange(width)[None, :] < lengths[:, None]
    idx = np.zeros((len(sequences), width), dtype=np.int64)
    if len(sequences):
        # One scatter of all slots at once, row-major like the mask.
        idx[mask_bool] = np.concatenate(sequences)
    return idx, mask_bool.astype(np.float64)


def count_matrix(sequences: list[np.ndarray], n_units: int) -> np.ndarray:
    """Dense (B, U) occurrence counts (see :func:`counts_from_sequences`)."""
    return counts_from_sequences(sequences, n_units)


def predict_sparse(
    idx: np.ndarray, mask: np.ndarray, value: np.ndarray, importance: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Surrogate outputs (B, K) and the per-slot attention weights (B, L), in numpy.

    Args:
        idx, mask: padded samples, from :func:`pad_sequences`.
        value: (U, K) values; importance: (U,) importances.

    Returns:
        The surrogate's output per sample (B, K) and each slot's weight (B, L).

    Example:
        >>> pred, alpha = predict_sparse(*pad_sequences([np.array([0, 1])]), np.array([[1.0], [-1.0]]), np.zeros(2))
        >>> pred.tolist(), alpha.tolist()
        ([[0.0]], [[0.5, 0.5]])
    """
    pred, alpha = surrogate_forward(
        torch.from_numpy(np.asarray(value, dtype=np.float64)),
        torch.from_numpy(np.asarray(importance, dtype=np.float64)),
        torch.from_numpy(idx),
        torch.from_numpy(mask),
    )
    return pred.numpy(), alpha.numpy()
