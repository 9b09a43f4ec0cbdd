"""Reading what a model returned as a checked (rows, classes) score matrix: :func:`score_matrix`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import torch

__all__ = ["OutputShapeError", "score_matrix"]


class OutputShapeError(ValueError):
    """The output is not one row of scores per input: the model's error, so a forward batch
    that raises it is never retried one sample at a time (see :class:`~slalom_core.models.TorchModel`)."""


def score_matrix(output: object, n_rows: int, *, index: Sequence[int] = ()) -> torch.Tensor:
    """A model's output as a checked (n_rows, K) float score matrix: one row per input.

    Reads what classifiers return: a tensor or array, a Hugging Face ``ModelOutput`` (or
    any object or dict with ``logits``), or a tuple/list whose first element is the
    logits. The class axis is the last one; ``index`` picks one entry of each dimension
    between the batch and the classes (a model with several heads). One score per input,
    shape (n,) or (n, 1), is one column; a batch of one squeezed to (K,) is that one row.
    The result stays on the output's device and in its autograd graph, so gradient
    methods can use it; integer and boolean outputs become float64.

    Raises:
        ValueError: the output is not one row of scores per input (a model that drops,
            squeezes or reshapes rows would otherwise shift every later sample's target).
        FloatingPointError: NaN or inf scores, which no fit can use.
        TypeError: complex scores.

    Example:
        >>> score_matrix(torch.tensor([0.5, -1.0]), 2).tolist()
        [[0.5], [-1.0]]
        >>> score_matrix({"logits": torch.zeros(3, 2, 4)}, 3, index=(1,)).shape
        torch.Size([3, 4])
    """
    if isinstance(n_rows, bool) or not isinstance(n_rows, int) or n_rows < 0:
        raise ValueError(f"n_rows must be a non-negative int, got {n_rows!r}")
    if hasattr(output, "logits"):
        output = output.logits
    elif isinstance(output, Mapping) and "logits" in output:
        output = output["logits"]
    elif isinstance(output, (tuple, list)) and output and isinstance(output[0], (torch.Tensor, np.ndarray)):
        # (logits, hidden states, ...); a plain list of numbers is one score per input.
        output = output[0]
    # A numpy view with negative strides (``scores[:, ::-1]``) is a valid answer that torch
    # cannot wrap: copy it into a plain array first.
    t = torch.as_tensor(np.ascontiguousarray(output) if isinstance(output, np.ndarray) else output)
    if t.dtype.is_complex:
        raise TypeError(f"the model returned complex scores ({t.dtype}); SLALOM needs real ones")
    if not t.dtype.is_floating_point:
        t = t.to(torch.float64)
    if index:
        if t.ndim < len(index) + 2:
            raise OutputShapeError(
                f"index {tuple(index)} needs an output with {len(index) + 2} or more dimensions, got shape {tuple(t.shape)}"
            )
        t = t[(slice(None), *(int(i) for i in index))]
    if t.ndim == 0 and n_rows == 1:
        t = t.reshape(1, 1)
    elif t.ndim == 1:
        t = t[None, :] if n_rows == 1 and t.numel() > 1 else t[:, None]
    if t.ndim != 2:
        raise OutputShapeError(
            f"the model returned scores of shape {tuple(t.shape)}; SLALOM needs (batch, classes), "
            "one row per input (select extra output dimensions with index=)"
        )
    if t.shape[0] != n_rows:
        raise OutputShapeError(
            f"the model returned {t.shape[0]} rows of scores for {n_rows} inputs; expected one row per input"
        )
    finite = torch.isfinite(t).all(dim=1)
    if not bool(finite.all()):
        bad = (~finite).nonzero().flatten().tolist()
        raise FloatingPointError(
            f"the model returned non-finite scores (NaN or inf) for {len(bad)} of {n_rows} inputs, "
            f"e.g. rows {bad[:5]}; SLALOM cannot fit them"
        )
    return t
