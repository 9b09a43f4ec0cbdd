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

import dataclasses
import inspect
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np
import torch
from torch import Tensor

from ..explanation import SlalomExplanation
from ..fitting import Fitter
from ..link import check_target
from ..models import model_session, module_of, score_matrix
from ..models.perturbation import Layout, deletion_row, replacement_row, same_setup, setup_key, shared_adapter
from .call import (
    DEFAULT_METHOD,
    DEFAULT_N_SAMPLES,
    CallOptions,
    CheckedCall,
    ExplainOptions,
    FitOptions,
    ProgressOption,
    ReferenceOption,
    check_call,
    text_seeds,
)
from .driver import explain_batch, explain_checked, progress_bar

__all__ = ["explain_rows", "check_row_options", "PERTURBATIONS", "RowTarget"]

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
    deterministic: bool = True,
    method: str | Fitter = DEFAULT_METHOD,
    n_samples: int = DEFAULT_N_SAMPLES,
    output: str = "auto",
    reference: ReferenceOption = "empty",
    multiclass: str = "joint",
    gamma: float = 0.0,
    **fit_options: object,
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
        deterministic: False if ``forward_func``'s outputs are random draws: every sample is
            then read, repeats included (default: each distinct sample once per call).
        method, n_samples, output, reference, multiclass, gamma: as in :func:`explain`.
        **fit_options: the fitter's own options, as in :func:`explain`.

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
    check_row_options(fit_options)
    options = CallOptions(
        method=method,
        n_samples=n_samples,
        output=output,
        reference=reference,
        multiclass=multiclass,
        seed=seed,
        gamma=gamma,
        fit_options=fit_options,
    )
    call = check_call(options)
    tensors = _as_tensors(inputs)
    replace = _check_perturbation(perturbation, call.fitter)
    rows = _RowsSetup(forward_func, tensors, features, padding, forward_args, per_row_args, baselines, pad_id)
    layout, views = _row_views(rows, replace, batch_size=batch_size, tokenizer=tokenizer)
    for adapter, _ in views:
        adapter.deterministic = bool(deterministic)
    probe = _first_output(layout, module_of(forward_func))
    row_targets = [_row_target(t, probe) for t in _per_row(target, len(views))]
    seeds = _row_seeds(call.seed, len(views))
    return _explain_groups(_group_by_setup(views, row_targets), layout, call, seeds, show_progress)


class _RowsSetup(NamedTuple):
    """What :func:`explain_rows` was given about its rows and their forward (unchecked)."""

    forward_func: Callable[..., object]
    tensors: tuple[Tensor, ...]
    features: Sequence[Sequence[Sequence[int]]] | None
    padding: Tensor | None
    forward_args: Sequence[object]
    per_row_args: Sequence[bool] | None
    baselines: Sequence[Tensor | None] | None
    pad_id: int | None


def _row_views(rows: _RowsSetup, replace: bool, *, batch_size: int, tokenizer: object) -> tuple[Layout, list]:
    """The rows' shared layout, and each row as an adapter and its segmentation (all checked
    before any model call)."""
    ids = rows.tensors[0]
    valid = torch.ones_like(ids, dtype=torch.bool) if rows.padding is None else ~rows.padding.to(ids.device).bool()
    groups = [_row_features(rows.features, valid, row, contiguous=not replace) for row in range(int(ids.shape[0]))]
    args = tuple(rows.forward_args)
    flags = [False] * len(args) if rows.per_row_args is None else [bool(f) for f in rows.per_row_args]
    if len(flags) != len(args):
        raise ValueError(f"per_row_args has {len(flags)} entries for {len(args)} forward_args")
    bases = _check_baselines(rows.baselines, rows.tensors) if replace else None
    layout = Layout(rows.forward_func, rows.tensors, valid, args, flags, bases, rows.pad_id)
    module = module_of(rows.forward_func)
    make = replacement_row if replace else deletion_row
    views = [
        make(layout, r, groups[r], batch_size=batch_size, module=module, tokenizer=tokenizer)
        for r in range(len(groups))
    ]
    return layout, views


def _group_by_setup(views: list, row_targets: list) -> list[tuple[tuple, tuple, list]]:
    """The rows in groups that share a target and a forward setup: (target, setup, [(row, adapter, seg)])."""
    groups: list[tuple[tuple, tuple, list]] = []
    for row, (adapter, seg) in enumerate(views):
        adapter.forward_func.index = row_targets[row][0]
        key = setup_key(adapter)
        group = next((g for g in groups if g[0] == row_targets[row] and same_setup(g[1], key)), None)
        if group is None:
            groups.append((row_targets[row], key, [(row, adapter, seg)]))
        else:
            group[2].append((row, adapter, seg))
    return groups


def _explain_groups(
    groups: list, layout: Layout, call: CheckedCall, seeds: list[int], show_progress: ProgressOption
) -> list[SlalomExplanation]:
    """One engine call per group (its samples share forward batches), each with the group's
    target and its rows' seeds; the explanations back in row order."""
    progress = _SharedProgress(show_progress) if show_progress else None
    out: list[Any] = [None] * len(seeds)
    try:
        for (_, cls), _, members in groups:
            adapter, segs = shared_adapter([(a, seg) for _, a, seg in members], layout)
            group_call = dataclasses.replace(call, target=cls, seed=tuple(seeds[row] for row, _, _ in members))
            fits = explain_checked(
                adapter, segs, None, group_call, show_progress=progress if progress is not None else False
            )
            for (row, _, seg), fit in zip(members, fits):
                fit.token_ids = list(seg.unit_ids)  # the row's own ids, not the shifted ones
                out[row] = fit
    finally:
        if progress is not None:
            progress.close()
    return out


def check_row_options(options: dict, owner: str = "explain_rows") -> None:
    """Refuse the explain options a rows call decides itself, before any model call.

    ``owner`` names the caller in the error (an adapter passes its own name): the target,
    seed, batch size and progress come from its own arguments, and rows have no
    granularity or device of their own.

    Example:
        >>> check_row_options({"method": "eff", "sample_length": 3})
        >>> check_row_options({"seed": 1}, owner="SlalomAttribution")
        Traceback (most recent call last):
        ...
        TypeError: ['seed'] cannot be passed as fit options: SlalomAttribution sets them from its own arguments
    """
    own = set(ExplainOptions.__optional_keys__)
    # and every argument the rows call passes itself; the fit options are the caller's to give.
    for f in (explain_rows, explain_batch):
        own |= {n for n, p in inspect.signature(f).parameters.items() if p.kind is not p.VAR_KEYWORD}
    own -= FitOptions.__optional_keys__
    bad = sorted(set(options) & own)
    if bad:
        raise TypeError(f"{bad} cannot be passed as fit options: {owner} sets them from its own arguments")


def _row_seeds(checked: int | tuple[int, ...] | None, n_rows: int) -> list[int]:
    """One seed per row from a checked seed: one for all, one of a tuple each, or (None) one
    draw per row from torch's global generator, in row order (as if each row had a call of its own)."""
    if checked is None:
        return [text_seeds(None, 1)[0] for _ in range(n_rows)]
    return text_seeds(checked, n_rows, what="row")


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


def _check_perturbation(perturbation: str, fitter: Fitter) -> bool:
    """True for replacement; refuses what replacement cannot do, before any model call."""
    if perturbation not in PERTURBATIONS:
        raise ValueError(f"unknown perturbation {perturbation!r}; choose one of {PERTURBATIONS}")
    if perturbation == "delete":
        return False
    if fitter.samples_repeat_units:
        # In 3 or more units drawn with replacement, a repeated feature would weigh twice in
        # the surrogate, once in the replaced input.
        raise ValueError(
            "with perturbation='replace', a sample is a set of present features, so a feature "
            f"drawn twice cannot count twice: use sample_length <= 2 (got {fitter.sample_length}) "
            "or the default method (distinct units per sample)"
        )
    return True


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


def _first_output(layout: Layout, module: torch.nn.Module | None) -> object:
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


class _SharedProgress:
    """One progress bar across the engine calls of one :func:`explain_rows` call.

    The engine asks for a bar once per call (``show_progress=callable``); the first call's
    bar is made by ``show`` (True: tqdm), later calls add their totals to it.
    """

    def __init__(self, show: ProgressOption) -> None:
        self.make = show if callable(show) else (lambda total: progress_bar(total, True, "SLALOM model reads"))
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
