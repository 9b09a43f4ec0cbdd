"""How a sample of a tensor row becomes the inputs of a torch forward: deletion or replacement.

The engine samples units (token ids) of a row; :func:`explain_rows` hands the row to
:func:`~slalom_core.explain_batch` as a :class:`~slalom_core.TorchClassifier` whose forward
is built here. :func:`deletion_row`: a sample is a shorter row, and the row's other tensors
and per-position forward arguments follow the deletion. :func:`replacement_row`: a sample
is a set of present features, absent ones take the baselines' values, and rows keep their
length. :func:`shared_adapter` joins rows of one setup (:func:`setup_key`) into one adapter,
so that one engine call explains them all and their samples share forward batches.

Internal to :func:`~slalom_core.explain_rows` (its names are not exported by
``slalom_core``): use that function, which checks every argument these assume.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import Tensor

from .reading import score_matrix
from .segmentation import Segmentation
from .torch_models import TorchClassifier

__all__ = ["Layout", "deletion_row", "replacement_row", "setup_key", "same_setup", "shared_adapter"]


class Layout:
    """The explained batch: input tensors, valid positions, extra arguments, baselines."""

    def __init__(self, forward_func, tensors, valid, args, per_row, bases, pad_id) -> None:
        self.forward_func: Callable[..., Any] = forward_func
        self.tensors: tuple[Tensor, ...] = tensors
        self.valid: Tensor = valid
        self.args: tuple = args
        self.per_row: list[bool] = per_row
        self.bases: list[Tensor | None] | None = bases
        self.pad_id: int | None = pad_id

    @property
    def ids(self) -> Tensor:
        return self.tensors[0]

    def arg_builders(self, row: int, valid: Tensor | None) -> list[_ArgBuilder]:
        """Per extra argument of ``row``: follows deletions (``valid`` given) or is fixed."""
        builders: list[_ArgBuilder] = []
        length = self.ids.shape[1]
        for a, many in zip(self.args, self.per_row):
            if not many:
                builders.append(_fixed_arg(a, False))
            elif valid is not None and isinstance(a, Tensor) and a.ndim >= 2 and a.shape[1] == length:
                builders.append(_Companion(a[row], valid))
            else:
                builders.append(_fixed_arg(a[row : row + 1], True))
        return builders


# An extra forward argument of one row, rebuilt per forward batch:
# builder(batch, positions, real) -> the argument for that batch.
_ArgBuilder = Callable[[int, Tensor | None, Tensor | None], object]


class _Companion:
    """A per-position tensor of one row that follows the deletions.

    Read at the positions a sample keeps. Position ids that were a plain range are
    renumbered, as a tokenizer would number the shorter text; padding gets 0 (for an
    attention mask: 0, so the model ignores it).
    """

    def __init__(self, values: Tensor, valid: Tensor) -> None:
        self.values = values
        self.range_start: int | None = None
        kept = values[valid]
        integer = not (values.dtype.is_floating_point or values.dtype.is_complex or values.dtype == torch.bool)
        if values.ndim == 1 and integer and kept.numel() >= 3:
            start = int(kept[0])
            if torch.equal(kept, torch.arange(start, start + kept.numel(), dtype=kept.dtype, device=kept.device)):
                self.range_start = start

    def __call__(self, batch: int, pos: Tensor | None, real: Tensor | None) -> Tensor:
        assert pos is not None and real is not None
        if self.range_start is not None:
            width = pos.shape[1]
            return (
                (self.range_start + torch.arange(width, device=pos.device)).to(self.values.dtype).expand(batch, width)
            )
        out = self.values.to(pos.device)[pos.clamp_min(0)]
        return torch.where(real.view(*real.shape, *([1] * (out.ndim - 2))), out, torch.zeros_like(out))


def _fixed_arg(a: object, per_row: bool) -> _ArgBuilder:
    """An argument that does not follow positions: one row's entry shared by the batch."""

    def build(batch: int, pos: Tensor | None = None, real: Tensor | None = None) -> object:
        if not per_row:
            return a
        if isinstance(a, Tensor):
            return a.expand(batch, *a.shape[1:])
        return list(a) * batch  # type: ignore[call-overload]

    return build


class _RowForward:
    """Engine samples of one row -> ``forward_func``'s inputs -> a (B, K) score matrix."""

    forward_func: Callable[..., Any]
    arg_builders: list[_ArgBuilder]
    index: tuple[int, ...] = ()  # the output dims between batch and classes (set per engine call)

    def build(self, ids: Tensor, mask: Tensor) -> tuple[tuple, tuple]:
        raise NotImplementedError

    def __call__(self, ids: Tensor, mask: Tensor) -> Tensor:
        inputs, args = self.build(ids, mask)
        return score_matrix(self.forward_func(*inputs, *args), ids.shape[0], index=self.index)


class _DeletionForward(_RowForward):
    """Engine samples (token ids, right-padded, with a mask) -> shorter rows.

    The engine wraps each sample in the row's leading and trailing special tokens; here
    every column is traced back to a position of the original row (special tokens to
    theirs, content tokens to the first position holding that id) so that the other
    inputs and per-position arguments can follow the deletion.
    """

    def __init__(self, forward_func, ids_dtype, companions, arg_builders, prefix_pos, suffix_pos, content) -> None:
        self.forward_func = forward_func
        self.ids_dtype = ids_dtype
        self.companions = companions
        self.arg_builders = arg_builders
        self.prefix_pos = torch.tensor(prefix_pos, dtype=torch.long)
        self.suffix_pos = torch.tensor(suffix_pos, dtype=torch.long)
        self.content_ids = torch.tensor(sorted(content), dtype=torch.long)
        self.content_pos = torch.tensor([content[i] for i in sorted(content)], dtype=torch.long)

    def positions(self, ids: Tensor, real: Tensor) -> Tensor:
        """(B, W) original row position of every column; -1 on padding."""
        batch, width = ids.shape
        dev = ids.device
        n = real.sum(dim=1, keepdim=True)
        cols = torch.arange(width, device=dev).expand(batch, width)
        lp, ls = len(self.prefix_pos), len(self.suffix_pos)
        pos = torch.full((batch, width), -1, dtype=torch.long, device=dev)
        if lp:
            pos[:, :lp] = self.prefix_pos.to(dev)
        content = (cols >= lp) & (cols < n - ls)
        uid = self.content_ids.to(dev)
        idx = torch.searchsorted(uid, ids.to(uid.dtype)).clamp_max(len(uid) - 1)
        pos = torch.where(content, self.content_pos.to(dev)[idx], pos)
        if ls:
            k = cols - (n - ls)
            pos = torch.where((k >= 0) & real, self.suffix_pos.to(dev)[k.clamp(0, ls - 1)], pos)
        return pos

    def build(self, ids: Tensor, mask: Tensor) -> tuple[tuple, tuple]:
        """The forward_func inputs and extra arguments of these samples."""
        batch = ids.shape[0]
        real = mask.bool()
        pos = self.positions(ids, real) if (self.companions or self.arg_builders) else None
        inputs = (ids.to(self.ids_dtype), *(c(batch, pos, real) for c in self.companions))
        return inputs, tuple(b(batch, pos, real) for b in self.arg_builders)


class _ReplacementForward(_RowForward):
    """Engine samples (sets of feature indices) -> full-length rows whose absent features
    take the baselines."""

    def __init__(self, forward_func, rows, bases, feature_of_position, n_features, arg_builders) -> None:
        self.forward_func = forward_func
        self.rows = rows  # per input tensor, this row: (1, L, ...)
        self.bases = bases  # per input tensor, its baseline row or None (left unchanged)
        # Positions in no feature (special tokens, padding) point at an extra, always
        # present column so that they are never replaced.
        self.feature_of_position = feature_of_position
        self.n_features = n_features
        self.arg_builders = arg_builders

    def build(self, units: Tensor, slots: Tensor) -> tuple[tuple, tuple]:
        """The forward_func inputs and extra arguments of these samples."""
        batch = units.shape[0]
        device = self.rows[0].device
        units, real = units.to(device), slots.to(device).bool()
        present = torch.zeros((batch, self.n_features + 1), dtype=torch.bool, device=device)
        present[:, self.n_features] = True
        rows = torch.arange(batch, device=device)[:, None].expand_as(units)
        # A unit drawn twice is simply present (samples that could count it twice are refused).
        present[rows[real], units[real]] = True
        keep = present[:, self.feature_of_position]
        inputs = []
        for x, base in zip(self.rows, self.bases):
            if base is None:
                inputs.append(x.expand(batch, *x.shape[1:]))
            else:
                k = keep.view(*keep.shape, *([1] * (x.ndim - 2)))
                inputs.append(torch.where(k, x, base))
        return tuple(inputs), tuple(b(batch, None, None) for b in self.arg_builders)


def _feature_names(tokenizer: object | None, row_ids: list[int], groups: list[np.ndarray]) -> list[str]:
    """Each feature's display string: its tokens (the tokenizer's strings, else the ids), joined."""
    convert = getattr(tokenizer, "convert_ids_to_tokens", None)
    names = [str(t) for t in convert(row_ids)] if convert is not None else [str(i) for i in row_ids]
    return [" ".join(names[p] for p in g.tolist()) for g in groups]


def deletion_row(
    layout: Layout,
    row: int,
    groups: list[np.ndarray],
    *,
    batch_size: int,
    module: torch.nn.Module | None,
    tokenizer: object | None,
) -> tuple[TorchClassifier, Segmentation]:
    """The engine's view of ``row`` when absent features are deleted.

    Positions in no feature before and after the features become the adapter's frame; a
    unit is a feature's token ids, so repeated tokens share a unit as in the engine's own
    text path.
    """
    ids, valid = layout.ids, layout.valid
    real = torch.nonzero(valid[row]).flatten().tolist()
    if real != list(range(real[0], real[-1] + 1)):
        raise ValueError(f"row {row}: padding must sit at the start or end of the row")
    in_feature = set(np.concatenate(groups).tolist())
    first_content, last_content = min(in_feature), max(in_feature)
    for p in range(first_content, last_content + 1):
        if p not in in_feature:
            raise ValueError(
                f"row {row}: special token at position {p} lies between content tokens; special "
                "tokens stay in place only at the start or end. Drop it from the special tokens "
                "to treat it as a feature, or use perturbation='replace'"
            )
    row_ids = ids[row].tolist()
    prefix = [p for p in real if p < first_content]
    suffix = [p for p in real if p > last_content]
    first_at: dict[int, int] = {}
    for g in groups:
        for p in g.tolist():
            first_at.setdefault(row_ids[p], p)
    forward = _DeletionForward(
        layout.forward_func,
        ids.dtype,
        [_Companion(t[row], valid[row]) for t in layout.tensors[1:]],
        layout.arg_builders(row, valid[row]),
        prefix,
        suffix,
        first_at,
    )
    seg = Segmentation(
        unit_ids=[tuple(row_ids[p] for p in g.tolist()) for g in groups],
        tokens=_feature_names(tokenizer, row_ids, groups),
    )
    adapter = TorchClassifier(
        forward,
        prefix_ids=[row_ids[p] for p in prefix],
        suffix_ids=[row_ids[p] for p in suffix],
        pad_id=0 if layout.pad_id is None else layout.pad_id,
        tokenizer=tokenizer,  # the reference input of a model without special tokens
        batch_size=batch_size,
        device=None if module is not None else ids.device,
        # Padding needs a model that reads an attention mask and the id it pads with;
        # otherwise each forward batch holds samples of one length (never padded).
        pads_safely=layout.pad_id is not None,
        module=module,
    )
    return adapter, seg


def replacement_row(
    layout: Layout,
    row: int,
    groups: list[np.ndarray],
    *,
    batch_size: int,
    module: torch.nn.Module | None,
    tokenizer: object | None = None,
) -> tuple[TorchClassifier, Segmentation]:
    """The engine's view of ``row`` when absent features take the baselines.

    Each feature is its own unit (ids 0..G-1): replacement switches positions on and off,
    so two occurrences of a token are two features here.
    """
    ids = layout.ids
    assert layout.bases is not None
    n_features = len(groups)
    feature_of_position = torch.full((ids.shape[1],), n_features, dtype=torch.long, device=ids.device)
    for g, positions in enumerate(groups):
        feature_of_position[torch.as_tensor(positions, device=ids.device)] = g
    seg = Segmentation(
        unit_ids=[(g,) for g in range(n_features)], tokens=_feature_names(tokenizer, ids[row].tolist(), groups)
    )
    forward = _ReplacementForward(
        layout.forward_func,
        [t[row : row + 1] for t in layout.tensors],
        [None if b is None else b[row : row + 1] for b in layout.bases],
        feature_of_position,
        n_features,
        layout.arg_builders(row, None),
    )
    adapter = TorchClassifier(
        forward,
        pad_id=0,
        batch_size=batch_size,
        device=None if module is not None else ids.device,
        pads_safely=True,
        module=module,
    )
    return adapter, seg


class _RowsForward:
    """Forward batches that mix the samples of several rows, so that rows share them.

    The rows' units reach the engine with row ``r``'s ids shifted by ``r * stride`` (see
    :func:`shared_adapter`); a sample's row is read back from its ids, each row's part of
    the batch is built by that row's own forward, and forward_func sees one batch.
    """

    def __init__(self, forwards: list[_RowForward], stride: int, per_row: list[bool]) -> None:
        self.forwards = forwards
        self.stride = stride
        self.per_row = per_row  # per extra argument: one entry per sample (concatenated)

    def __call__(self, ids: Tensor, mask: Tensor) -> Tensor:
        # Frame tokens and padding carry row 0's (unshifted) ids, so the largest id tells the row.
        kept = torch.where(mask.bool(), ids, torch.zeros_like(ids))
        owner = kept.amax(dim=1) // self.stride if ids.shape[1] else torch.zeros(len(ids), dtype=torch.long)
        ids = ids % self.stride
        order, parts = [], []
        for r in owner.unique().tolist():
            picked = torch.nonzero(owner == r).flatten()
            order.append(picked)
            parts.append(self.forwards[r].build(ids[picked], mask[picked]))
        inputs = tuple(torch.cat(x) for x in zip(*(p[0] for p in parts)))
        args = tuple(_concat(a) if many else a[0] for many, a in zip(self.per_row, zip(*(p[1] for p in parts))))
        first = self.forwards[0]
        out = score_matrix(first.forward_func(*inputs, *args), ids.shape[0], index=first.index)
        return out[torch.argsort(torch.cat(order)).to(out.device)]


def _concat(parts: tuple) -> object:
    return torch.cat(parts) if isinstance(parts[0], Tensor) else [x for p in parts for x in p]


def _same(a: object, b: object) -> bool:
    """Whether two forward arguments are the same value (tensors: same shape, dtype, entries)."""
    if isinstance(a, Tensor) or isinstance(b, Tensor):
        return (isinstance(a, Tensor) and isinstance(b, Tensor) and a.shape == b.shape and a.dtype == b.dtype) and bool(
            torch.equal(a, b.to(a.device))
        )
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    try:
        return a is b or bool(a == b)
    except Exception:  # a value without a plain equality (an array...): not known to be the same
        return False


def setup_key(adapter: TorchClassifier) -> tuple:
    """What a row's adapter must share with others for one engine call to serve them all.

    The engine scores the input with no tokens (the reference point) once per call, so rows
    share a call only where that input, as forward_func would get it, is the same; and the
    adapter's frame (special tokens) wraps every sample of the call.
    """
    empty = adapter.empty_sequence() or []
    seq = torch.tensor([[*adapter.prefix_ids, *empty, *adapter.suffix_ids]], dtype=torch.long)
    return (adapter.prefix_ids, adapter.suffix_ids, adapter.forward_func.build(seq, torch.ones_like(seq)))


def same_setup(a: tuple, b: tuple) -> bool:
    """Whether two :func:`setup_key` results allow one engine call."""
    return a[:2] == b[:2] and _same(a[2], b[2])


def shared_adapter(
    members: list[tuple[TorchClassifier, Segmentation]], layout: Layout
) -> tuple[TorchClassifier, list[Segmentation]]:
    """One adapter (and the segmentations to give the engine) for rows of one setup.

    A unit id names a token (or feature) of one row only: row ``r``'s ids are shifted by
    ``r * stride`` so that no two rows share an id, and :class:`_RowsForward` undoes it.
    """
    if len(members) == 1:
        return members[0][0], [members[0][1]]
    first = members[0][0]
    used = [i for a, seg in members for u in seg.unit_ids for i in u]
    used += [*first.prefix_ids, *first.suffix_ids, *(first.empty_sequence() or []), first.pad_id]
    stride = max(used) + 1
    adapter = copy.copy(first)
    adapter.forward_func = _RowsForward([a.forward_func for a, _ in members], stride, layout.per_row)
    segs = [
        Segmentation([tuple(i + r * stride for i in u) for u in seg.unit_ids], list(seg.tokens))
        for r, (_, seg) in enumerate(members)
    ]
    return adapter, segs
