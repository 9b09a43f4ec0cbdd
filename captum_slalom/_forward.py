"""Forward functions handed to the engine: Captum's ``forward_func`` as a model adapter.

Captum calls ``forward_func(*inputs, *additional_forward_args)`` on full rows; the engine
scores token-id samples through a :class:`slalom_core.TorchClassifier`. The classes here
sit between the two, one set per explained row: :func:`deletion_adapter` for SLALOM's
deletions (shorter inputs whose other tensors follow), :func:`replacement_adapter` for
Lime's replacement by the baselines; :func:`shared_adapter` joins rows of one setup
(:func:`setup_key`) into one adapter, so that one engine call explains them all.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import numpy as np
import slalom_core
import torch
from captum._utils.progress import progress
from slalom_core import Segmentation, TorchClassifier, score_matrix
from slalom_core.link import warn_user
from torch import Tensor

from ._arguments import Rows, is_per_example


class SharedProgress:
    """One Captum progress bar across the engine calls of one ``attribute`` call.

    The engine asks a factory for a bar once per call (``show_progress=callable``); each
    call's total is added to the single Captum bar, so the user sees one bar.
    """

    def __init__(self, desc: str) -> None:
        self.desc = desc
        self.bar: Any = None

    def __call__(self, total: int) -> ProgressView:
        if self.bar is None:
            self.bar = progress(desc=self.desc, total=total)
        else:
            self.bar.total += total
        return ProgressView(self)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


class ProgressView:
    """What one engine call sees: a bar it updates but does not close."""

    def __init__(self, shared: SharedProgress) -> None:
        self._shared = shared

    def update(self, n: int = 1) -> None:
        self._shared.bar.update(n)

    def close(self) -> None:
        pass  # the shared bar is closed once, at the end of attribute()

    @property
    def total(self) -> int:
        return self._shared.bar.total

    @total.setter
    def total(self, value: int) -> None:
        self._shared.bar.total = value


# An extra forward argument of one row, rebuilt per forward batch:
# builder(batch, positions, real) -> the argument for that batch.
_ArgBuilder = Callable[[int, Tensor | None, Tensor | None], object]


class _Companion:
    """A per-position tensor of one row that follows SLALOM's deletions.

    Inputs after the ids and per-position ``additional_forward_args`` (attention mask,
    token type ids, position ids) are read at the positions a sample keeps. Position ids
    that were a plain range are renumbered, as a tokenizer would number the shorter
    text; padding gets 0 (the attention mask: 0, so the model ignores it).
    """

    def __init__(self, values: Tensor, valid: Tensor, *, is_mask: bool = False) -> None:
        self.values = values
        self.is_mask = is_mask
        self.range_start: int | None = None
        kept = values[valid]
        integer = not (values.dtype.is_floating_point or values.dtype.is_complex or values.dtype == torch.bool)
        if not is_mask and values.ndim == 1 and integer and kept.numel() >= 3:
            start = int(kept[0])
            if torch.equal(kept, torch.arange(start, start + kept.numel(), dtype=kept.dtype, device=kept.device)):
                self.range_start = start

    def __call__(self, batch: int, pos: Tensor | None, real: Tensor | None) -> Tensor:
        assert pos is not None and real is not None
        if self.is_mask:
            return real.to(self.values.dtype)
        if self.range_start is not None:
            width = pos.shape[1]
            return (
                (self.range_start + torch.arange(width, device=pos.device)).to(self.values.dtype).expand(batch, width)
            )
        out = self.values.to(pos.device)[pos.clamp_min(0)]
        return torch.where(real.view(*real.shape, *([1] * (out.ndim - 2))), out, torch.zeros_like(out))


def _fixed_arg(a: object, per_example: bool) -> _ArgBuilder:
    """An argument that does not follow positions: one example's entry shared by the batch."""

    def build(batch: int, pos: Tensor | None = None, real: Tensor | None = None) -> object:
        if not per_example:
            return a
        if isinstance(a, Tensor):
            return a.expand(batch, *a.shape[1:])
        return list(a) * batch  # type: ignore[call-overload]

    return build


def row_arg_builders(args: tuple, row: int, n_rows: int, length: int, valid: Tensor | None) -> list[_ArgBuilder]:
    """Per extra argument of ``row``: follows deletions (``valid`` given) or is fixed."""
    builders: list[_ArgBuilder] = []
    for a in args:
        if not is_per_example(a, n_rows):
            builders.append(_fixed_arg(a, False))
        elif valid is not None and isinstance(a, Tensor) and a.ndim >= 2 and a.shape[1] == length:
            builders.append(_Companion(a[row], valid))
        else:
            builders.append(_fixed_arg(a[row : row + 1], True))
    return builders


class BatchCaller:
    """Calls ``forward_func`` on a forward batch and checks one score row per sample.

    A forward that fails on a batch but runs on a single sample (a GPT-2 classifier
    without pad token behind a closure refuses every batch > 1) is then called one sample
    at a time, with a warning, so that the default ``perturbations_per_eval`` works on
    every architecture. If one sample fails too, the original error is raised.
    """

    def __init__(self, forward_func: Callable[..., Any], index_prefix: tuple[int, ...]) -> None:
        self.forward_func = forward_func
        self.index_prefix = index_prefix
        self.one_by_one = False

    def __call__(self, inputs: tuple, args: tuple, batch: int) -> Tensor:
        if self.one_by_one and batch > 1:
            return torch.cat([self._one(inputs, args, batch, r) for r in range(batch)])
        try:
            return score_matrix(self.forward_func(*inputs, *args), batch, index=self.index_prefix)
        except FloatingPointError:
            raise  # NaN scores are the model's answer, not a batching problem
        except Exception as err:
            if batch == 1:
                raise
            try:
                first = self._one(inputs, args, batch, 0)
            except Exception:
                raise err from None
            warn_user(
                f"forward_func failed on a batch of {batch} samples ({type(err).__name__}: {err}) but runs "
                "on one: evaluating one sample per call from here on (as perturbations_per_eval=1)",
                UserWarning,
            )
            self.one_by_one = True
            return torch.cat([first] + [self._one(inputs, args, batch, r) for r in range(1, batch)])

    def _one(self, inputs: tuple, args: tuple, batch: int, r: int) -> Tensor:
        def pick(a: object) -> object:
            if isinstance(a, Tensor) and a.ndim > 0 and a.shape[0] == batch:
                return a[r : r + 1]
            if isinstance(a, list) and len(a) == batch:
                return a[r : r + 1]
            return a

        out = self.forward_func(*(pick(x) for x in inputs), *(pick(a) for a in args))
        return score_matrix(out, 1, index=self.index_prefix)


class _DeletionForward:
    """Engine samples (token ids, right-padded, with a mask) -> the user's forward_func.

    The engine wraps each sample in the row's leading and trailing special tokens; here
    every column is traced back to a position of the original row (special tokens to
    theirs, content tokens to the first position holding that id) so that the other
    inputs and per-position arguments can follow the deletion.
    """

    def __init__(self, ids_dtype, companions, arg_builders, prefix_pos, suffix_pos, content_ids, content_pos, caller):
        self.ids_dtype = ids_dtype
        self.companions = companions
        self.arg_builders = arg_builders
        self.prefix_pos = prefix_pos
        self.suffix_pos = suffix_pos
        self.content_ids = content_ids
        self.content_pos = content_pos
        self.caller = caller

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

    def __call__(self, ids: Tensor, mask: Tensor) -> Tensor:
        return self.caller(*self.build(ids, mask), ids.shape[0])


class _ReplacementForward:
    """Engine samples (sets of feature indices) -> full-length inputs with absent features
    replaced by the baselines -> the user's forward_func."""

    def __init__(self, rows, bases, feature_of_position, n_features, arg_builders, caller):
        self.rows = rows  # per input tensor, this row: (1, L, ...)
        self.bases = bases  # per input tensor, its baseline row or None (left unchanged)
        # Non-feature positions (special tokens, padding) point at an extra, always
        # present column so that they are never replaced.
        self.feature_of_position = feature_of_position
        self.n_features = n_features
        self.arg_builders = arg_builders
        self.caller = caller

    def __call__(self, units: Tensor, slots: Tensor) -> Tensor:
        return self.caller(*self.build(units, slots), units.shape[0])

    def build(self, units: Tensor, slots: Tensor) -> tuple[tuple, tuple]:
        """The forward_func inputs and extra arguments of these samples."""
        batch = units.shape[0]
        device = self.rows[0].device
        units, real = units.to(device), slots.to(device).bool()
        present = torch.zeros((batch, self.n_features + 1), dtype=torch.bool, device=device)
        present[:, self.n_features] = True
        rows = torch.arange(batch, device=device)[:, None].expand_as(units)
        # A unit drawn twice is simply present (eff's sample_length is capped at 2 here).
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


class _RowsForward:
    """Forward batches that mix the samples of several rows, so that rows share them.

    The rows' units reach the engine with row ``r``'s ids shifted by ``r * stride`` (see
    :func:`shared_adapter`); a sample's row is read back from its ids, each row's part of
    the batch is built by that row's own forward, and forward_func sees one batch.
    """

    def __init__(self, forwards: list, stride: int, per_example: list[bool], caller: BatchCaller) -> None:
        self.forwards = forwards
        self.stride = stride
        self.per_example = per_example  # per extra argument: one entry per sample (concatenated)
        self.caller = caller

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
        args = tuple(_concat(a) if many else a[0] for many, a in zip(self.per_example, zip(*(p[1] for p in parts))))
        out = self.caller(inputs, args, ids.shape[0])
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
    members: list[tuple[TorchClassifier, Segmentation]], rows: Rows, caller: BatchCaller
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
    forward = _RowsForward(
        [a.forward_func for a, _ in members], stride, [is_per_example(x, rows.n_rows) for x in rows.args], caller
    )
    adapter = copy.copy(first)
    adapter.forward_func = forward
    segs = [
        Segmentation([tuple(i + r * stride for i in u) for u in seg.unit_ids], list(seg.tokens))
        for r, (_, seg) in enumerate(members)
    ]
    return adapter, segs


def _feature_names(tokenizer: object | None, row_ids: list[int], groups: list[np.ndarray]) -> list[str]:
    """Each feature's display string: its tokens (the tokenizer's strings, else the ids), joined."""
    convert = getattr(tokenizer, "convert_ids_to_tokens", None)
    names = [str(t) for t in convert(row_ids)] if convert is not None else [str(i) for i in row_ids]
    return [" ".join(names[p] for p in g.tolist()) for g in groups]


def first_output(forward_func: Callable[..., Any], rows: Rows, module: torch.nn.Module | None) -> object:
    """``forward_func`` on the first row, called as Captum calls it (model restored after).

    How many class scores it returns decides what the target means to the engine.
    """
    with slalom_core.model_session(module), torch.no_grad():
        args = tuple(b(1, None, None) for b in row_arg_builders(rows.args, 0, rows.n_rows, rows.length, None))
        try:
            return forward_func(*(t[:1] for t in rows.tensors), *args)
        except Exception as err:
            # The inputs as the user gave them, before any perturbation: not SLALOM's doing.
            first = str(err).strip().splitlines()[0] if str(err).strip() else ""
            raise ValueError(
                f"forward_func fails on the first example of inputs as given, before any perturbation "
                f"({type(err).__name__}: {first}); check the inputs (longer than the model accepts? "
                "a missing additional_forward_args?)"
            ) from err


def deletion_adapter(
    rows: Rows,
    row: int,
    groups: list[np.ndarray],
    caller: BatchCaller | None,
    *,
    batch_size: int,
    module: torch.nn.Module | None,
    tokenizer: object | None,
) -> tuple[TorchClassifier, Segmentation]:
    """The engine's view of ``row`` when absent features are deleted.

    Special tokens before and after the content become the adapter's frame; a unit is a
    feature's token ids, so repeated tokens share a unit as in the engine's own text path.
    """
    ids, valid, specials = rows.ids, rows.valid, rows.specials
    real = torch.nonzero(valid[row]).flatten().tolist()
    if real != list(range(real[0], real[-1] + 1)):
        raise ValueError(f"row {row}: padding (attention mask 0) must sit at the start or end of the row")
    first_content = min(int(g[0]) for g in groups)
    last_content = max(int(g[-1]) for g in groups)
    row_ids = ids[row].tolist()
    row_special = specials[row].tolist()
    for p in range(first_content, last_content + 1):
        if row_special[p]:
            raise ValueError(
                f"row {row}: special token at position {p} lies between content tokens; special "
                "tokens stay in place only at the start or end. Drop it from the special tokens "
                "to treat it as a feature, or use perturbation='replace'"
            )
    prefix = [p for p in real if p < first_content]
    suffix = [p for p in real if p > last_content]
    first_at: dict[int, int] = {}
    for g in groups:
        for p in g.tolist():
            first_at.setdefault(row_ids[p], p)
    content_ids = sorted(first_at)
    forward = _DeletionForward(
        ids.dtype,
        [_Companion(t[row], valid[row], is_mask=t is rows.attn) for t in rows.tensors[1:]],
        row_arg_builders(rows.args, row, rows.n_rows, rows.length, valid[row]),
        torch.tensor(prefix, dtype=torch.long),
        torch.tensor(suffix, dtype=torch.long),
        torch.tensor(content_ids, dtype=torch.long),
        torch.tensor([first_at[i] for i in content_ids], dtype=torch.long),
        caller,
    )
    seg = Segmentation(
        unit_ids=[tuple(row_ids[p] for p in g.tolist()) for g in groups],
        tokens=_feature_names(tokenizer, row_ids, groups),
    )
    adapter = TorchClassifier(
        forward,
        prefix_ids=[row_ids[p] for p in prefix],
        suffix_ids=[row_ids[p] for p in suffix],
        pad_id=0 if rows.pad_id is None else rows.pad_id,
        tokenizer=tokenizer,  # the reference input of a model without special tokens
        batch_size=batch_size,
        device=None if module is not None else ids.device,
        # Padding needs a model that reads an attention mask and the id it pads with;
        # otherwise each forward batch holds samples of one length (never padded).
        pads_safely=rows.attn is not None and rows.pad_id is not None,
        module=module,
    )
    return adapter, seg


def replacement_adapter(
    rows: Rows,
    row: int,
    groups: list[np.ndarray],
    caller: BatchCaller | None,
    *,
    batch_size: int,
    module: torch.nn.Module | None,
    tokenizer: object | None = None,
) -> tuple[TorchClassifier, Segmentation]:
    """The engine's view of ``row`` when absent features take the baselines.

    Each feature is its own unit (ids 0..G-1): replacement switches positions on and off,
    so two occurrences of a token are two features here.
    """
    ids = rows.ids
    assert rows.bases is not None  # parse_rows requires baselines for replacement
    n_features = len(groups)
    feature_of_position = torch.full((rows.length,), n_features, dtype=torch.long, device=ids.device)
    for g, positions in enumerate(groups):
        feature_of_position[torch.as_tensor(positions, device=ids.device)] = g
    seg = Segmentation(
        unit_ids=[(g,) for g in range(n_features)], tokens=_feature_names(tokenizer, ids[row].tolist(), groups)
    )
    forward = _ReplacementForward(
        [t[row : row + 1] for t in rows.tensors],
        [None if b is None else b[row : row + 1] for b in rows.bases],
        feature_of_position,
        n_features,
        row_arg_builders(rows.args, row, rows.n_rows, rows.length, None),
        caller,
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
