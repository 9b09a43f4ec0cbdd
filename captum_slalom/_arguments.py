"""Captum's ``attribute`` arguments, checked and laid out per explained row.

Everything here is bookkeeping on Captum's conventions (targets, baselines, feature
masks, special positions, per-example forward arguments); nothing samples or fits.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import slalom_core as sc
import torch
from slalom_core import RowTarget
from torch import Tensor

from ._compat import BaselineType, TargetType

InputType = Tensor | tuple[Tensor, ...]
FeatureMaskType = Tensor | tuple[Tensor | None, ...] | None


def check_options(
    score: str, perturbations_per_eval: int, return_input_shape: bool, return_all: bool, fit_options: dict[str, Any]
) -> None:
    """Reject option combinations before any model call."""
    sc.check_score(score)
    sc.check_row_options(fit_options, owner="SlalomAttribution")
    if (
        isinstance(perturbations_per_eval, bool)
        or not isinstance(perturbations_per_eval, int)
        or perturbations_per_eval < 1
    ):
        raise ValueError(f"perturbations_per_eval must be a positive int, got {perturbations_per_eval!r}")
    if return_all and not return_input_shape:
        raise ValueError("return_all gives input-shaped scores: leave return_input_shape=True")


@dataclass
class Rows:
    """The explained batch after argument translation.

    Attributes:
        tensors: the input tensors; the first holds the token ids (batch x length).
        is_tuple: whether ``inputs`` was a tuple (results are shaped alike).
        attn: the attention mask of an ``(input_ids, attention_mask)`` pair, else None.
        valid: batch x length, False on padding.
        specials: batch x length, True where a position stays in place (no feature).
        fmask: integer feature ids per position (``feature_mask``), or None.
        bases: per input tensor, its baseline rows (None: left unchanged); None if no
            baselines were given.
        args: ``additional_forward_args`` as a tuple.
        targets: per row, its target in the engine's form (:data:`slalom_core.RowTarget`).
        pad_id: the id forward batches are padded with, if known.
    """

    tensors: tuple[Tensor, ...]
    is_tuple: bool
    attn: Tensor | None
    valid: Tensor
    specials: Tensor
    fmask: Tensor | None
    bases: list[Tensor | None] | None
    args: tuple
    targets: list[RowTarget]
    pad_id: int | None

    @property
    def ids(self) -> Tensor:
        return self.tensors[0]

    @property
    def n_rows(self) -> int:
        return int(self.ids.shape[0])

    @property
    def length(self) -> int:
        return int(self.ids.shape[1])


def parse_rows(
    inputs: InputType,
    baselines: BaselineType,
    target: TargetType,
    additional_forward_args: Any,
    feature_mask: FeatureMaskType,
    *,
    replace: bool,
    special_token_ids: Sequence[int] | None,
    special_token_positions: Sequence[int] | Tensor | None,
    pad_token_id: int | None,
) -> Rows:
    """Check Captum's arguments and lay them out per row (see :class:`Rows`)."""
    tensors = _input_tensors(inputs, replace)
    ids = tensors[0]
    attn = _attention_mask(tensors, pad_token_id)
    valid = torch.ones_like(ids, dtype=torch.bool) if attn is None else attn != 0
    bases = _baselines(baselines, tensors) if baselines is not None else None
    specials = _special_positions(ids, valid, special_token_ids, special_token_positions)
    if not replace and bases is not None and bases[0] is not None:
        # When deleting, baselines replace nothing: Captum's tutorials mark special tokens
        # by giving them in the baseline. When replacing (as Lime), the baseline is the
        # value absent features take, and a token that happens to equal it is still a
        # feature (one whose absence changes nothing), never a special token.
        specials |= (ids == bases[0]) & valid
    if additional_forward_args is None:
        args: tuple = ()
    else:
        args = additional_forward_args if isinstance(additional_forward_args, tuple) else (additional_forward_args,)
    return Rows(
        tensors=tensors,
        is_tuple=isinstance(inputs, tuple),
        attn=attn,
        valid=valid,
        specials=specials,
        fmask=_feature_mask(feature_mask, len(tensors), tuple(ids.shape), ids.device),
        bases=bases,
        args=args,
        targets=_row_targets(target, int(ids.shape[0])),
        pad_id=_pad_id(ids, valid, pad_token_id),
    )


def check_length(rows: Rows, limit: int | None) -> None:
    """Raise before any model call if a row is longer than the model accepts (``limit``)."""
    longest = int(rows.valid.sum(dim=1).max()) if rows.n_rows else 0
    if limit is not None and longest > limit:
        raise ValueError(
            f"a row of inputs has {longest} tokens (special tokens included) but the model accepts at most "
            f"{limit}; truncate the inputs (e.g. tokenizer(..., truncation=True))"
        )


def check_ids(rows: Rows, vocab: tuple[int, str] | None) -> None:
    """Raise before any model call on token ids the model cannot read: negative ids, and
    ids past its vocabulary (``vocab``: its size and what says so) where that is known.
    Padding is not checked (its id is the user's)."""
    ids = rows.ids[rows.valid]
    if ids.numel() == 0 or ids.dtype.is_floating_point or ids.dtype.is_complex or ids.dtype == torch.bool:
        return
    low, high = int(ids.min()), int(ids.max())
    if low < 0:
        raise ValueError(f"token ids must be >= 0, got {low}: give the ids the model's tokenizer produced")
    if vocab is not None and high >= vocab[0]:
        raise ValueError(
            f"token id {high} is outside the model's vocabulary ({vocab[0]} ids, 0..{vocab[0] - 1}: "
            f"{vocab[1]}): give the ids the model's own tokenizer produced"
        )


def _input_tensors(inputs: InputType, replace: bool) -> tuple[Tensor, ...]:
    tensors = inputs if isinstance(inputs, tuple) else (inputs,)
    if not tensors or not all(isinstance(t, Tensor) for t in tensors):
        raise TypeError("inputs must be a tensor of token ids or a tuple of tensors whose first holds the ids")
    ids = tensors[0]
    if ids.ndim == 3 and (ids.dtype.is_floating_point or ids.dtype.is_complex):
        # inputs_embeds: SLALOM deletes and samples tokens, which embeddings do not name.
        raise ValueError(
            f"inputs look like embeddings (batch x length x dim, shape {tuple(ids.shape)}); SLALOM needs "
            "the token ids (batch x length): pass input_ids and let forward_func embed them"
        )
    if ids.ndim != 2:
        hint = " (add a batch dim with unsqueeze(0))" if ids.ndim == 1 else ""
        raise ValueError(f"the token ids must be batch x length, got shape {tuple(ids.shape)}{hint}")
    for t in tensors[1:]:
        if tuple(t.shape[:2]) != tuple(ids.shape):
            raise ValueError(
                f"every input tensor must be batch x length like the ids {tuple(ids.shape)}, got {tuple(t.shape)}"
            )
    if not replace and (ids.dtype.is_floating_point or ids.dtype.is_complex or ids.dtype == torch.bool):
        raise TypeError(
            f"deleting tokens needs integer token ids, got {ids.dtype}; for other inputs "
            "use perturbation='replace' with baselines="
        )
    return tensors


def _row_targets(target: TargetType, n_rows: int) -> list[RowTarget]:
    """Captum's TargetType as one engine target per row (an int, a tuple or None)."""

    def one(t: object) -> RowTarget:
        if isinstance(t, Tensor):
            if t.numel() != 1:
                raise ValueError(f"a per-example target must be a single index, got shape {tuple(t.shape)}")
            t = t.item()
        if t is None or (isinstance(t, tuple) and not t):
            return None
        if isinstance(t, (bool, np.bool_)):
            raise TypeError(f"target must be an int class index, got {t!r}")
        if isinstance(t, (int, np.integer)):
            return int(t)
        if isinstance(t, tuple):
            if not all(isinstance(x, (int, np.integer)) and not isinstance(x, bool) for x in t):
                raise TypeError(f"a tuple target must hold ints, got {t!r}")
            return tuple(int(x) for x in t)
        raise TypeError(f"unsupported target {t!r}: give an int, a tuple, a list per example or a tensor")

    if isinstance(target, Tensor):
        if target.numel() == 1:
            return [one(target)] * n_rows
        if target.ndim == 1 and target.numel() == n_rows:
            return [one(t) for t in target]
        raise ValueError(
            f"a target tensor must hold 1 or {n_rows} (one per example) indices, got shape {tuple(target.shape)}"
        )
    if isinstance(target, list):
        if len(target) != n_rows:
            raise ValueError(f"a target list needs one entry per example ({n_rows}), got {len(target)}")
        return [one(t) for t in target]
    return [one(target)] * n_rows


def is_per_example(arg: object, n_rows: int) -> bool:
    """Captum's rule: a tensor or list whose length is the batch size holds one entry per example."""
    if isinstance(arg, Tensor):
        return arg.ndim > 0 and arg.shape[0] == n_rows
    return isinstance(arg, list) and len(arg) == n_rows


def _broadcast_rows(x: object, shape: tuple[int, ...], name: str, dtype: torch.dtype, device: torch.device) -> Tensor:
    t = torch.as_tensor(x, device=device)
    try:
        return torch.broadcast_to(t, shape).to(dtype)
    except RuntimeError:
        raise ValueError(f"{name} of shape {tuple(t.shape)} cannot be broadcast to the inputs' shape {shape}") from None


def _is_zero_one(t: Tensor) -> bool:
    """True for a tensor holding only 0s and 1s (an attention mask, or token type ids)."""
    return not t.dtype.is_complex and bool(((t == 0) | (t == 1)).all())


def _attention_mask(tensors: tuple[Tensor, ...], pad_token_id: int | None) -> Tensor | None:
    """The second of two input tensors if it is an attention mask, else None.

    Token type ids of a sentence pair hold only 0s and 1s too, and reading them as a mask
    would make the first sentence padding. A mask's 0s are padding, so it is read as one
    only where every 0 sits on the pad id (or, with no pad id known, on one id repeated,
    at the ends of each row); otherwise the tensor follows the kept positions like any
    other input (token type ids of the kept tokens).
    """
    if len(tensors) != 2 or not _is_zero_one(tensors[1]):
        return None
    ids, second = tensors
    off = second == 0
    if not bool(off.any()):
        return second  # nothing masked: reading it as a mask leaves every position a token
    padded = ids[off]
    if pad_token_id is not None:
        return second if bool((padded == pad_token_id).all()) else None
    if not bool((padded == padded[0]).all()):
        return None
    for row in off:
        on = torch.nonzero(~row).flatten()
        if on.numel() and int(on[-1] - on[0]) + 1 != on.numel():
            return None  # 0s between tokens: not padding
    return second


def _pad_id(ids: Tensor, valid: Tensor, given: int | None) -> int | None:
    if given is not None:
        return int(given)
    padded = ids[~valid]
    # The inputs' own padding tells which id the model expects there.
    return int(padded[0]) if padded.numel() else None


def _special_positions(
    ids: Tensor, valid: Tensor, chosen: Sequence[int] | None, positions: Sequence[int] | Tensor | None
) -> Tensor:
    special = torch.zeros_like(ids, dtype=torch.bool)
    if chosen:
        special |= torch.isin(ids, torch.tensor(list(chosen), dtype=ids.dtype, device=ids.device))
    if positions is not None:
        if isinstance(positions, Tensor) and positions.dtype == torch.bool:
            special |= _broadcast_rows(positions, tuple(ids.shape), "special_token_positions", torch.bool, ids.device)
        else:
            for row in range(ids.shape[0]):
                real = torch.nonzero(valid[row]).flatten()
                for p in [int(p) for p in positions]:
                    if not -len(real) <= p < len(real):
                        raise ValueError(f"special token position {p} is outside row {row} ({len(real)} tokens)")
                    special[row, real[p]] = True
    return special & valid


def _feature_mask(
    feature_mask: FeatureMaskType, n_inputs: int, shape: tuple[int, ...], device: torch.device
) -> Tensor | None:
    if feature_mask is None:
        return None
    if isinstance(feature_mask, tuple):
        if len(feature_mask) != n_inputs:
            raise ValueError(f"feature_mask has {len(feature_mask)} entries for {n_inputs} input tensor(s)")
        first = feature_mask[0]
        for other in feature_mask[1:]:
            if other is not None and not torch.equal(
                torch.broadcast_to(torch.as_tensor(other), shape), torch.broadcast_to(torch.as_tensor(first), shape)
            ):
                raise ValueError(
                    "the other inputs follow the token ids: their feature masks must be None "
                    "or equal to the ids' feature mask"
                )
        feature_mask = first
    if feature_mask is None or not isinstance(feature_mask, Tensor):
        raise TypeError("the ids' feature_mask must be an integer tensor")
    if feature_mask.dtype.is_floating_point or feature_mask.dtype == torch.bool:
        raise TypeError(f"feature_mask must hold integer feature ids, got {feature_mask.dtype}")
    fmask = _broadcast_rows(feature_mask, shape, "feature_mask", torch.long, device)
    if bool((fmask < 0).any()):
        raise ValueError("feature_mask ids must be >= 0")
    return fmask


def _baselines(baselines: BaselineType, tensors: tuple[Tensor, ...]) -> list[Tensor | None]:
    """One baseline row set per input tensor (None: that tensor is left unchanged)."""
    given = baselines if isinstance(baselines, tuple) else (baselines,) + (None,) * (len(tensors) - 1)
    if len(given) != len(tensors):
        raise ValueError(f"baselines has {len(given)} entries for {len(tensors)} input tensor(s)")
    if all(b is None for b in given):
        raise ValueError("baselines of None only: give a baseline for the ids, or leave baselines=None")
    return [
        None if b is None else _broadcast_rows(b, tuple(t.shape), "baselines", t.dtype, t.device)
        for b, t in zip(given, tensors)
    ]


def feature_groups(rows: Rows, row: int) -> list[np.ndarray]:
    """Positions of each feature of ``row`` (``feature_mask`` groups), ordered by first position."""
    content = (rows.valid[row] & ~rows.specials[row]).cpu().numpy()
    positions = np.flatnonzero(content)
    if positions.size == 0:
        raise ValueError(f"row {row} has no token to explain (all positions are special tokens or padding)")
    if rows.fmask is None:
        return [np.array([p]) for p in positions]
    labels = rows.fmask[row].cpu().numpy()
    groups: dict[int, list[int]] = {}
    for p in positions.tolist():
        groups.setdefault(int(labels[p]), []).append(p)
    outside = set(labels[~content].tolist()) & set(groups)
    if outside:
        raise ValueError(
            f"feature ids {sorted(outside)} of row {row} cover both tokens and special/padding "
            "positions; special tokens and padding are never features: give them their own ids"
        )
    return sorted((np.array(g) for g in groups.values()), key=lambda g: g[0])
