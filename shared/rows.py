"""Explaining rows of token-id tensors: :func:`explain_rows`.

A torch forward function that takes a padded batch of rows (token ids, plus tensors laid
out like them: attention mask, token type ids, position ids) and extra arguments is seen
by the engine as one :class:`~slalom_core.TorchClassifier` per row. Absent features are
either *deleted* (SLALOM's own removal: shorter rows whose other tensors and per-position
arguments follow the deletion) or *replaced* by baselines (Lime's: rows keep their
length). Rows that share a target and a forward setup share one :func:`explain_batch`
call, so their samples share forward batches.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor
from typing_extensions import Unpack

from .api import (
    DEFAULT_METHOD,
    ExplainOptions,
    FitOptions,
    ProgressOption,
    _check_seed,
    _progress,
    _text_seeds,
    explain_batch,
)
from .explanation import SlalomExplanation
from .link import check_target
from .models import Segmentation, TorchClassifier, model_session, module_of, score_matrix

__all__ = ["explain_rows", "PERTURBATIONS", "RowTarget"]

#: How absent features are removed: "delete" (SLALOM's own: shorter inputs) or "replace"
#: (absent features take the baselines' values; inputs keep their length).
PERTURBATIONS = ("delete", "replace")
#: One row's target: a class index, None (the model's default output), or a tuple whose
#: leading entries index the output dimensions between batch and classes, the last the class.
RowTarget = int | tuple[int, ...] | None


def explain_rows(
    forward_func: Callable[..., object],
    inputs: Tensor | Sequence[Tensor],
    features: Sequence[Sequence[Sequence[int]]] | None = None,
    *,
    perturbation: str = "delete",
    baselines: Sequence[Tensor | None] | None = None,
    padding: Tensor | None = None,
    forward_args: Sequence[object] = (),
    per_row_args: Sequence[bool] | None = None,
    target: RowTarget | list[RowTarget] = None,
    pad_id: int | None = None,
    tokenizer: object | None = None,
    seed: int | Sequence[int] | None = None,
    batch_size: int = 64,
    show_progress: ProgressOption = False,
    **options: Unpack[FitOptions],
) -> list[SlalomExplanation]:
    """Explain every row of a batch of token-id tensors; one explanation per row.

    ``forward_func(*inputs, *forward_args)`` is called on perturbed rows and returns class
    scores (batch x classes, a score per row, or an object with ``.logits``).

    Args:
        forward_func: the model (a module, a bound method of one, or any callable); a
            module is run in eval mode and every submodule's mode is restored afterwards.
        inputs: the token ids (batch x length), or a sequence of tensors whose first holds
            them; the others are laid out like the ids (batch x length x ...) and follow
            the deletions (position ids that were a range are renumbered).
        features: per row, the positions of each feature (one unit that is sampled,
            removed and scored as a whole), in the order the explanation lists them.
            Positions in no feature and not padding stay in place (special tokens): with
            deletion only at the start or end of the row, and a feature must be a
            contiguous span. None: every position that is not padding is a feature.
        perturbation: "delete" or "replace" (see :data:`PERTURBATIONS`).
        baselines: with "replace", per input tensor, the values absent features take
            (shaped like that tensor), or None to leave the tensor unchanged.
        padding: batch x length, True on padding (no part of the row; deleted rows drop it).
        forward_args: extra arguments passed after the inputs.
        per_row_args: per extra argument, whether it holds one entry per row (a tensor or
            list along its first dimension; each row gets its own, and a batch x length
            tensor follows the deletions); default: none does, each is passed unchanged.
        target: the output to explain, for every row, or a list with one per row (see
            :data:`RowTarget`). For k > 2 classes give the class; for one score per row,
            None or 0 (the score itself).
        pad_id: the id that pads forward batches of samples of different lengths. Give it
            only if ``forward_func`` reads an attention mask among ``inputs``; None: a
            forward batch holds samples of one length, never padded.
        tokenizer: names the features' tokens (``convert_ids_to_tokens``) and, for a model
            without special tokens, gives the input with no tokens (its BOS/EOS token).
        seed: one seed for every row, or one per row; None: row r's seed is the r-th draw
            from torch's global generator (``torch.manual_seed`` reproduces).
        batch_size: samples per forward call. A forward that fails on a batch but runs on
            one sample is then called one sample at a time, with a warning.
        show_progress: one progress bar over all rows' model evaluations (True: tqdm; or a
            factory ``total -> bar`` as in :func:`explain`).
        **options: the fit options of :func:`explain` (method, n_samples, output,
            reference, multiclass, gamma and the fitter's own).

    Returns:
        One :class:`SlalomExplanation` per row: position i is feature i of the row. Its
        ``token_ids`` are the feature's ids in the row when deleting (a token repeated in
        the row is one unit), the feature's index when replacing (every feature a unit).

    Example:
        >>> import torch
        >>> emb = torch.nn.Embedding(50, 2)
        >>> f = lambda ids, mask: (emb(ids) * mask[..., None]).sum(1)
        >>> ids = torch.tensor([[1, 7, 8, 9, 2, 0], [1, 5, 6, 2, 0, 0]])
        >>> mask = (ids != 0).long()
        >>> feats = [[[1], [2], [3]], [[1], [2]]]  # [1] and [2] at the ends stay in place
        >>> exps = explain_rows(f, (ids, mask), feats, padding=mask == 0, pad_id=0, target=1,
        ...                     n_samples=100, seed=0)
        >>> [len(e.lin) for e in exps]
        [3, 2]
    """
    _check_fit_options(options)
    tensors = _as_tensors(inputs)
    ids = tensors[0]
    n_rows = int(ids.shape[0])
    replace = _check_perturbation(perturbation, options)
    valid = torch.ones_like(ids, dtype=torch.bool) if padding is None else ~padding.to(ids.device).bool()
    groups = [_row_features(features, valid, row, contiguous=not replace) for row in range(n_rows)]
    args = tuple(forward_args)
    flags = [False] * len(args) if per_row_args is None else [bool(f) for f in per_row_args]
    if len(flags) != len(args):
        raise ValueError(f"per_row_args has {len(flags)} entries for {len(args)} forward_args")
    targets = _per_row(target, n_rows)
    bases = _check_baselines(baselines, tensors) if replace else None
    layout = _Layout(forward_func, tensors, valid, args, flags, bases, pad_id)
    module = module_of(forward_func)
    make = _replacement_row if replace else _deletion_row
    views = [
        make(layout, r, groups[r], batch_size=batch_size, module=module, tokenizer=tokenizer) for r in range(n_rows)
    ]
    probe = _first_output(layout, module)
    row_targets = [_row_target(t, probe) for t in targets]
    seeds = _row_seeds(seed, n_rows)
    groups_by_setup: list[tuple[tuple, tuple, list]] = []  # (target, setup, [(row, adapter, seg)])
    for row, (adapter, seg) in enumerate(views):
        adapter.forward_func.index = row_targets[row][0]
        key = _setup_key(adapter)
        group = next((g for g in groups_by_setup if g[0] == row_targets[row] and _same_setup(g[1], key)), None)
        if group is None:
            groups_by_setup.append((row_targets[row], key, [(row, adapter, seg)]))
        else:
            group[2].append((row, adapter, seg))
    progress = _SharedProgress(show_progress) if show_progress else None
    out: list[Any] = [None] * n_rows
    try:
        for (_, cls), _, members in groups_by_setup:
            adapter, segs = _shared_adapter([(a, seg) for _, a, seg in members], layout)
            fits = explain_batch(
                adapter,
                segs,
                target=cls,
                seed=[seeds[row] for row, _, _ in members],
                show_progress=progress if progress is not None else False,
                **options,
            )
            for (row, _, seg), fit in zip(members, fits):
                fit.token_ids = list(seg.unit_ids)  # the row's own ids, not the shifted ones
                out[row] = fit
    finally:
        if progress is not None:
            progress.close()
    return out


def _check_fit_options(options: dict) -> None:
    """Refuse the explain options a rows call decides itself, before any model call."""
    own = sorted(set(options) & (ExplainOptions.__optional_keys__ - FitOptions.__optional_keys__))
    if own:
        raise TypeError(
            f"{own} cannot be passed as fit options: explain_rows sets them from its own arguments "
            "(target, seed, batch_size, show_progress; rows need no granularity or device)"
        )


def _row_seeds(seed: int | Sequence[int] | None, n_rows: int) -> list[int]:
    """One seed per row: ``seed`` for all, one of a sequence each, or (None) one draw per row
    from torch's global generator, in row order (as if each row had a call of its own)."""
    checked = _check_seed(seed)
    if checked is None:
        return [_text_seeds(None, 1)[0] for _ in range(n_rows)]
    return _text_seeds(checked, n_rows)


def _as_tensors(inputs: Tensor | Sequence[Tensor]) -> tuple[Tensor, ...]:
    tensors = (inputs,) if isinstance(inputs, Tensor) else tuple(inputs)
    if not tensors or not all(isinstance(t, Tensor) for t in tensors):
        raise TypeError("inputs must be a tensor of token ids or a sequence of tensors whose first holds the ids")
    if tensors[0].ndim != 2:
        raise ValueError(f"the token ids must be batch x length, got shape {tuple(tensors[0].shape)}")
    for t in tensors[1:]:
        if tuple(t.shape[:2]) != tuple(tensors[0].shape):
            raise ValueError(
                f"every input tensor must be batch x length like the ids {tuple(tensors[0].shape)}, got {tuple(t.shape)}"
            )
    return tensors


def _check_perturbation(perturbation: str, options: FitOptions) -> bool:
    """True for replacement; refuses what replacement cannot do, before any model call."""
    if perturbation not in PERTURBATIONS:
        raise ValueError(f"unknown perturbation {perturbation!r}; choose one of {PERTURBATIONS}")
    method = options.get("method", DEFAULT_METHOD)
    if perturbation == "replace" and method in ("eff", "hybrid") and int(options.get("sample_length", 2)) > 2:
        raise ValueError(
            "with perturbation='replace', a sample is a set of present features, so a "
            "feature drawn twice cannot count twice: use sample_length <= 2"
        )
    return perturbation == "replace"


def _per_row(target: RowTarget | list[RowTarget], n_rows: int) -> list[RowTarget]:
    if not isinstance(target, list):
        return [target] * n_rows
    if len(target) != n_rows:
        raise ValueError(f"a target list needs one entry per row ({n_rows}), got {len(target)}")
    return target


def _row_features(
    features: Sequence[Sequence[Sequence[int]]] | None, valid: Tensor, row: int, *, contiguous: bool
) -> list[np.ndarray]:
    """The checked positions of each feature of ``row``.

    With ``contiguous`` (deletion) a feature must be one span of the row's features:
    deleting scattered positions together would reorder the text.
    """
    ok = valid[row].cpu().numpy()
    if features is None:
        groups = [np.array([p]) for p in np.flatnonzero(ok)]
    else:
        if len(features) != valid.shape[0]:
            raise ValueError(f"features has {len(features)} rows for {valid.shape[0]} rows of inputs")
        groups = [np.asarray(g, dtype=np.int64).reshape(-1) for g in features[row]]
    if not groups or any(g.size == 0 for g in groups):
        raise ValueError(f"row {row} has no token to explain (all positions are special tokens or padding)")
    flat = np.concatenate(groups)
    if flat.min() < 0 or flat.max() >= ok.size or not ok[flat].all() or len(set(flat.tolist())) != flat.size:
        raise ValueError(f"the features of row {row} must be distinct positions of the row, not padding")
    if contiguous:
        rank = {p: i for i, p in enumerate(sorted(flat.tolist()))}
        for g in groups:
            r = sorted(rank[p] for p in g.tolist())
            if r[-1] - r[0] + 1 != len(r):
                raise ValueError(
                    f"a feature of row {row} is not a contiguous span (positions {g.tolist()}); deleting it "
                    "would reorder the text. Use contiguous groups, or perturbation='replace' (replacement "
                    "keeps every position in place)"
                )
    return groups


def _check_baselines(baselines: Sequence[Tensor | None] | None, tensors: tuple[Tensor, ...]) -> list[Tensor | None]:
    if baselines is None:
        raise ValueError("perturbation='replace' needs baselines= (the values absent features take)")
    bases = list(baselines)
    if len(bases) != len(tensors) or all(b is None for b in bases):
        raise ValueError(f"baselines needs one entry per input tensor ({len(tensors)}), not all None")
    for b, t in zip(bases, tensors):
        if b is not None and tuple(b.shape) != tuple(t.shape):
            raise ValueError(f"a baseline of shape {tuple(b.shape)} for an input of shape {tuple(t.shape)}")
    return bases


class _Layout:
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


def _first_output(layout: _Layout, module: torch.nn.Module | None) -> object:
    """``forward_func`` on the first row as given (model restored after): its output's shape
    decides what each target means, and a failure here is not the perturbation's doing."""
    with model_session(module), torch.no_grad():
        args = tuple(b(1, None, None) for b in layout.arg_builders(0, None))
        try:
            return layout.forward_func(*(t[:1] for t in layout.tensors), *args)
        except Exception as err:
            first = str(err).strip().splitlines()[0] if str(err).strip() else ""
            raise ValueError(
                f"forward_func fails on the first example of inputs as given, before any perturbation "
                f"({type(err).__name__}: {first}); check the inputs (longer than the model accepts? "
                "a missing forward argument?)"
            ) from err


def _row_target(target: RowTarget, probe: object) -> tuple[tuple[int, ...], int | None]:
    """(indices of the output dims between batch and classes, the engine's target) of one row."""
    if isinstance(target, tuple):
        index, cls = tuple(int(i) for i in target[:-1]), (int(target[-1]) if target else None)
    else:
        index, cls = (), target
    try:
        n_outputs = score_matrix(probe, 1, index=index).shape[1]
    except ValueError as err:
        raise ValueError(
            f"forward_func on one example: {err}. If the output has extra dimensions, give a tuple "
            "target: its leading entries select them, the last one the class"
        ) from None
    cls = check_target(cls, n_outputs)
    if cls is None and n_outputs > 2:
        raise ValueError(
            f"forward_func returns {n_outputs} class scores per example: give target= (the class to "
            "explain); one explanation per row explains one class (explain_batch(..., target=None) "
            "fits all classes jointly)"
        )
    return index, cls


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


def _feature_names(tokenizer: object | None, row_ids: list[int], groups: list[np.ndarray]) -> list[str]:
    """Each feature's display string: its tokens (the tokenizer's strings, else the ids), joined."""
    convert = getattr(tokenizer, "convert_ids_to_tokens", None)
    names = [str(t) for t in convert(row_ids)] if convert is not None else [str(i) for i in row_ids]
    return [" ".join(names[p] for p in g.tolist()) for g in groups]


def _deletion_row(
    layout: _Layout,
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


def _replacement_row(
    layout: _Layout,
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
    :func:`_shared_adapter`); a sample's row is read back from its ids, each row's part of
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


def _setup_key(adapter: TorchClassifier) -> tuple:
    """What a row's adapter must share with others for one engine call to serve them all.

    The engine scores the input with no tokens (the reference point) once per call, so rows
    share a call only where that input, as forward_func would get it, is the same; and the
    adapter's frame (special tokens) wraps every sample of the call.
    """
    empty = adapter.empty_sequence() or []
    seq = torch.tensor([[*adapter.prefix_ids, *empty, *adapter.suffix_ids]], dtype=torch.long)
    return (adapter.prefix_ids, adapter.suffix_ids, adapter.forward_func.build(seq, torch.ones_like(seq)))


def _same_setup(a: tuple, b: tuple) -> bool:
    """Whether two :func:`_setup_key` results allow one engine call."""
    return a[:2] == b[:2] and _same(a[2], b[2])


def _shared_adapter(
    members: list[tuple[TorchClassifier, Segmentation]], layout: _Layout
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


class _SharedProgress:
    """One progress bar across the engine calls of one :func:`explain_rows` call.

    The engine asks for a bar once per call (``show_progress=callable``); the first call's
    bar is made by ``show`` (True: tqdm), later calls add their totals to it.
    """

    def __init__(self, show: ProgressOption) -> None:
        self.make = show if callable(show) else (lambda total: _progress(total, True, "SLALOM samples"))
        self.bar: Any = None

    def __call__(self, total: int) -> _ProgressView:
        if self.bar is None:
            self.bar = self.make(total)
        else:
            self.bar.total += total
        return _ProgressView(self)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


class _ProgressView:
    """What one engine call sees: a bar it updates but does not close."""

    def __init__(self, shared: _SharedProgress) -> None:
        self._shared = shared

    def update(self, n: int = 1) -> None:
        self._shared.bar.update(n)

    def close(self) -> None:
        pass  # the shared bar is closed once, at the end of explain_rows()

    @property
    def total(self) -> int:
        return self._shared.bar.total

    @total.setter
    def total(self, value: int) -> None:
        self._shared.bar.total = value
