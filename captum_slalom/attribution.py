"""SLALOM as a Captum ``PerturbationAttribution``: :class:`SlalomAttribution`.

This module only translates. Captum's arguments (inputs, target, feature_mask,
additional_forward_args, baselines, ...) become one :class:`slalom_core.Segmentation` and
one :class:`slalom_core.TorchClassifier` per explained row; :func:`slalom_core.explain_batch`
samples, calls the model and fits; the per-unit scores it returns are spread back onto
the input positions as Captum-shaped tensors. No fitting happens here.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Union

import numpy as np
import torch
from captum._utils.progress import progress
from captum._utils.typing import BaselineType, TargetType
from captum.attr import PerturbationAttribution
from torch import Tensor

import slalom_core
from slalom_core import SCORE_NAMES, Segmentation, SlalomExplanation, TorchClassifier

__all__ = ["SlalomAttribution", "SlalomAttributionResult", "SCORE_NAMES"]

InputType = Union[Tensor, tuple[Tensor, ...]]
FeatureMaskType = Union[None, Tensor, tuple[Union[Tensor, None], ...]]

# explain_batch arguments the adapter sets itself; anything else in **fit_options is
# handed to the engine (which rejects what it does not know).
_RESERVED_FIT_OPTIONS = frozenset(
    {"model", "texts", "tokenizer", "granularity", "batch_size", "device", "target", "seed",
     "n_samples", "method", "show_progress", "output"}
)


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


# ----------------------------------------------------------------------------------------
# Small helpers: Captum argument conventions
# ----------------------------------------------------------------------------------------
def _as_score_matrix(out: object, n_rows: int, index_prefix: tuple[int, ...]) -> Tensor:
    """A forward output as (n_rows, K) scores: the model's class axis is the last one."""
    if hasattr(out, "logits"):
        out = out.logits
    elif isinstance(out, (tuple, list)):
        out = out[0]
    out = torch.as_tensor(out)
    if index_prefix:
        # Captum's tuple targets index the dims after the batch; the last index is the
        # class (it becomes the engine's target), the leading ones select here.
        out = out[(slice(None), *index_prefix)]
    if out.ndim == 0:
        if n_rows != 1:
            raise ValueError(f"forward_func returned a single value for {n_rows} inputs; it must return one score (or a row of class scores) per input")
        out = out.reshape(1, 1)
    elif out.ndim == 1:
        out = out[:, None]
    elif out.ndim > 2:
        raise ValueError(
            f"forward_func returned shape {tuple(out.shape)}; SLALOM needs (batch, classes) "
            "scores. For outputs with more dimensions give a tuple target: its leading "
            "entries select the extra dimensions, the last one the class"
        )
    if out.shape[0] != n_rows:
        raise ValueError(f"forward_func returned {out.shape[0]} rows of scores for {n_rows} inputs")
    return out


def _row_targets(target: TargetType, n_rows: int) -> list[tuple[tuple[int, ...], int | None]]:
    """Captum's TargetType as, per row, (indices of extra output dims, class or None)."""

    def one(t: object) -> tuple[tuple[int, ...], int | None]:
        if t is None:
            return (), None
        if isinstance(t, Tensor):
            if t.numel() != 1:
                raise ValueError(f"a per-example target must be a single index, got shape {tuple(t.shape)}")
            t = t.item()
        if isinstance(t, (bool, np.bool_)):
            raise TypeError(f"target must be an int class index, got {t!r}")
        if isinstance(t, (int, np.integer)):
            return (), int(t)
        if isinstance(t, tuple):
            if not t:
                return (), None
            if not all(isinstance(x, (int, np.integer)) and not isinstance(x, bool) for x in t):
                raise TypeError(f"a tuple target must hold ints, got {t!r}")
            return tuple(int(x) for x in t[:-1]), int(t[-1])
        raise TypeError(f"unsupported target {t!r}: give an int, a tuple, a list per example or a tensor")

    if isinstance(target, Tensor):
        if target.numel() == 1:
            return [one(target)] * n_rows
        if target.ndim == 1 and target.numel() == n_rows:
            return [one(t) for t in target]
        raise ValueError(f"a target tensor must hold 1 or {n_rows} (one per example) indices, got shape {tuple(target.shape)}")
    if isinstance(target, list):
        if len(target) != n_rows:
            raise ValueError(f"a target list needs one entry per example ({n_rows}), got {len(target)}")
        return [one(t) for t in target]
    return [one(target)] * n_rows


def _engine_target(cls: int | None, n_outputs: int) -> int | None:
    """Captum's class index -> the engine's target (see slalom_core.OutputLink)."""
    if n_outputs == 1:
        # Captum: column 0 of a one-column output *is* the output; the engine's target=0
        # would mean "class 0 of a binary model" and flip the sign, so map it to None.
        if cls not in (None, 0):
            raise ValueError(f"target {cls} does not exist: forward_func returns one score per example")
        return None
    if cls is None:
        if n_outputs == 2:
            return None  # the engine's default: log-odds of class 1
        raise ValueError(
            f"forward_func returns {n_outputs} class scores per example: give target= (the "
            "class to explain). slalom_core.explain(..., target=None) fits all classes jointly"
        )
    if not 0 <= cls < n_outputs:
        raise ValueError(f"target {cls} is not a class of this model (it returns {n_outputs} scores)")
    return cls


def _is_per_example(arg: object, n_rows: int) -> bool:
    # Captum's own rule (attr/_utils/batching._select_example): a tensor or list whose
    # length is the batch size holds one entry per example.
    if isinstance(arg, Tensor):
        return arg.ndim > 0 and arg.shape[0] == n_rows
    return isinstance(arg, list) and len(arg) == n_rows


def _broadcast_rows(x: object, shape: tuple[int, int], name: str, dtype: torch.dtype, device: torch.device) -> Tensor:
    t = torch.as_tensor(x, device=device)
    try:
        return torch.broadcast_to(t, shape).to(dtype)
    except RuntimeError:
        raise ValueError(f"{name} of shape {tuple(t.shape)} cannot be broadcast to the inputs' shape {shape}") from None


class _SharedProgress:
    """One Captum progress bar across the engine calls of one ``attribute`` call.

    The engine asks a factory for a bar once per call (``show_progress=callable``); each
    call's total is added to the single Captum bar, so the user sees one bar.
    """

    def __init__(self, desc: str) -> None:
        self.desc = desc
        self.bar: Any = None

    def __call__(self, total: int) -> _ProgressView:
        if self.bar is None:
            self.bar = progress(desc=self.desc, total=total)
        else:
            self.bar.total += total
        return _ProgressView(self)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


class _ProgressView:
    def __init__(self, shared: _SharedProgress) -> None:
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


# ----------------------------------------------------------------------------------------
# Forward functions handed to the engine (one per explained row)
# ----------------------------------------------------------------------------------------
#: How absent features are removed: "delete" (SLALOM's own: shorter inputs) or "replace"
#: (Lime/KernelShap's: the baseline takes their place, inputs keep their length).
PERTURBATIONS = ("delete", "replace")

# An extra forward argument of one row, rebuilt per forward batch:
# builder(batch, positions, real) -> the argument for that batch.
_ArgBuilder = Callable[[int, Union[Tensor, None], Union[Tensor, None]], object]


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
            return (self.range_start + torch.arange(width, device=pos.device)).to(self.values.dtype).expand(batch, width)
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


def _row_arg_builders(args: tuple, row: int, n_rows: int, length: int, valid: Tensor | None) -> list[_ArgBuilder]:
    """Per extra argument of ``row``: follows deletions (``valid`` given) or is fixed."""
    builders: list[_ArgBuilder] = []
    for a in args:
        if not _is_per_example(a, n_rows):
            builders.append(_fixed_arg(a, False))
        elif valid is not None and isinstance(a, Tensor) and a.ndim >= 2 and a.shape[1] == length:
            builders.append(_Companion(a[row], valid))
        else:
            builders.append(_fixed_arg(a[row : row + 1], True))
    return builders


class _BatchCaller:
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
            return _as_score_matrix(self.forward_func(*inputs, *args), batch, self.index_prefix)
        except Exception as err:
            if batch == 1:
                raise
            try:
                first = self._one(inputs, args, batch, 0)
            except Exception:
                raise err from None
            warnings.warn(
                f"forward_func failed on a batch of {batch} samples ({type(err).__name__}: {err}) but runs "
                "on one: evaluating one sample per call from here on (as perturbations_per_eval=1)",
                stacklevel=2,
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
        return _as_score_matrix(out, 1, self.index_prefix)


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

    def __call__(self, ids: Tensor, mask: Tensor) -> Tensor:
        batch = ids.shape[0]
        real = mask.bool()
        pos = self.positions(ids, real) if (self.companions or self.arg_builders) else None
        inputs = (ids.to(self.ids_dtype), *(c(batch, pos, real) for c in self.companions))
        args = tuple(b(batch, pos, real) for b in self.arg_builders)
        return self.caller(inputs, args, batch)


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
        args = tuple(b(batch, None, None) for b in self.arg_builders)
        return self.caller(tuple(inputs), args, batch)


# ----------------------------------------------------------------------------------------
# The attribution class
# ----------------------------------------------------------------------------------------
class SlalomAttribution(PerturbationAttribution):
    r"""
    SLALOM (Leemann et al., "Attention Mechanisms Don't Learn Additive Models: Rethinking
    Feature Importance for Transformers", TMLR 2025) for Captum.

    SLALOM explains a text classifier with a local surrogate
    ``F(t) = Σ_i softmax(s(t))_i · v(t_i)`` that gives every token (or feature) a
    *value* v (its effect alone) and an *importance* s (how much weight it takes from
    the others), fitted to the model's log-odds on perturbed inputs. From one fit it
    reports ``contribution`` (default: α·v, additive like Lime's coefficients: with the
    reference it sums to the surrogate's output), ``value``, ``importance``, ``lin``
    (v·exp(s)), ``removal`` (the predicted output change when the feature is deleted) and
    ``shapley`` (Shapley values of the surrogate). Scores are in log-odds, measured from
    the reference point (the model's output on the input without content tokens).

    **Removal semantics.** SLALOM *deletes* absent tokens: the model sees shorter
    sequences (SLALOM-eff scores random 2-token sequences of the text's tokens, which is
    why it is fast). Special tokens stay in place at the start and end of every sample;
    they are found from ``baselines`` (positions where the baseline equals the input, as
    in Captum's BERT tutorial), the tokenizer, or ``special_token_ids``. Other inputs and
    per-position ``additional_forward_args`` (attention mask, token type ids, position
    ids) follow the deletions. Lime and KernelShap instead *replace* absent features by
    the baseline: ``perturbation="replace"`` does that here (slower: full-length inputs).

    Fitting and sampling live in the ``slalom_core`` engine; this class only maps
    Captum's arguments and results. Use it exactly like ``Lime``::

        >>> slalom = SlalomAttribution(predict, tokenizer=tokenizer)
        >>> attributions = slalom.attribute(input_ids, baselines=ref_input_ids, target=1,
        ...     additional_forward_args=(token_type_ids, position_ids, attention_mask))
    """

    def __init__(
        self,
        forward_func: Callable[..., Any],
        *,
        tokenizer: Any = None,
        special_token_ids: Sequence[int] | None = None,
        pad_token_id: int | None = None,
    ) -> None:
        r"""
        Args:

            forward_func (Callable or torch.nn.Module): the model's forward function,
                        called as Captum calls it: ``forward_func(*inputs,
                        *additional_forward_args)``. It returns class scores (batch x
                        classes; logits), a score per example, or an object with
                        ``.logits``. A module (or a bound method of one) is run in
                        eval mode while explaining; every submodule's mode is restored.
            tokenizer (optional): a Hugging Face tokenizer: its special ids (never
                        features) and pad id become the defaults below.
                        Default: None
            special_token_ids (Sequence[int], optional): token ids that are never
                        features and stay in place (e.g. [CLS], [SEP], [PAD]).
                        Default: None (the tokenizer's, else none)
            pad_token_id (int, optional): id used to pad forward batches of samples of
                        different lengths. Padding is used only when ``inputs`` is
                        ``(input_ids, attention_mask)`` and this id is known (given,
                        from the tokenizer, or read from padded positions of the
                        inputs); otherwise every forward batch holds samples of one
                        length and nothing is padded (safe for GPT-2 without a pad token).
                        Default: None
        """
        PerturbationAttribution.__init__(self, forward_func)
        if special_token_ids is None and tokenizer is not None:
            special_token_ids = getattr(tokenizer, "all_special_ids", None)
        if pad_token_id is None and tokenizer is not None:
            pad_token_id = getattr(tokenizer, "pad_token_id", None)
        self.special_token_ids = None if special_token_ids is None else tuple(int(i) for i in special_token_ids)
        self.pad_token_id = pad_token_id
        self.tokenizer = tokenizer

    @classmethod
    def get_name(cls) -> str:
        # Captum derives "Slalom Attribution" from the class name, which would make the
        # progress bar read "Slalom Attribution attribution"; Lime/KernelShap read
        # "Lime attribution", so the method's name is "Slalom".
        return "Slalom"

    @property
    def multiplies_by_inputs(self) -> bool:
        # SLALOM's scores are properties of the tokens, not input × gradient products.
        return False

    def has_convergence_delta(self) -> bool:
        return False

    def attribute_future(self) -> Callable:
        r"""
        This method is not implemented for SlalomAttribution.
        """
        raise NotImplementedError("attribute_future is not implemented for SlalomAttribution")

    def attribute(  # type: ignore[override]
        self,
        inputs: InputType,
        baselines: BaselineType = None,
        target: TargetType = None,
        additional_forward_args: Any = None,
        feature_mask: FeatureMaskType = None,
        n_samples: int = slalom_core.DEFAULT_N_SAMPLES,
        perturbations_per_eval: int = 64,
        return_input_shape: bool = True,
        show_progress: bool = False,
        *,
        score: str = slalom_core.DEFAULT_SCORE,
        method: str = "eff",
        seed: int | None = None,
        perturbation: str = "delete",
        special_token_ids: Sequence[int] | None = None,
        special_token_positions: Sequence[int] | Tensor | None = None,
        output: str | None = None,
        return_all: bool = False,
        **fit_options: Any,
    ) -> Tensor | tuple[Tensor, ...] | SlalomAttributionResult:
        r"""
        Fits one local SLALOM per row of ``inputs`` and returns its scores per position.
        The arguments up to ``show_progress`` are Lime's, in Lime's order.

        Args:

            inputs (Tensor or tuple[Tensor, ...]): token ids, batch x length, or a tuple
                        whose first tensor holds the token ids and whose other tensors
                        (attention mask, token type ids, position ids, each batch x
                        length) follow the deletions. In a 2-tuple
                        ``(input_ids, attention_mask)`` the mask's 0 entries are
                        padding (no feature) and samples of different lengths may
                        share padded forward batches. Every row is explained
                        separately.
            baselines (scalar, Tensor or tuple, optional): with the default
                        ``perturbation="delete"``, positions where the baseline equals
                        the input are special tokens (kept in place, attribution 0),
                        as in Captum's tutorials (``[CLS] [PAD] ... [SEP]``); nothing is
                        replaced. With ``perturbation="replace"``: the values absent
                        features take, as in Lime (a scalar such as the [PAD] id, a
                        tensor broadcastable to the ids, or one entry per input
                        tensor, None leaving that tensor unchanged).
                        Default: None
            target (int, tuple, Tensor, or list, optional): Captum's target
                        convention. An int or a one-element tensor: that class for
                        every example; a list or 1-D tensor: one class per example;
                        a tuple: its last entry is the class, the leading entries
                        index extra output dimensions. SLALOM models *log-odds*: for
                        2 classes, target c explains log p(c)/p(1-c); for k > 2
                        classes, class c's column of the joint multi-class fit; for a
                        single score per example, the score itself (target None or 0).
                        None on a 2-class model explains class 1.
                        Default: None
            additional_forward_args (Any, optional): extra arguments passed to
                        ``forward_func`` after the inputs. Tensors of shape batch x
                        length follow the deletions like the inputs (position ids
                        that were a range are renumbered); other tensors and lists
                        whose first dimension is the batch size hold one entry per
                        example; other values are passed unchanged.
                        Default: None
            feature_mask (Tensor or tuple, optional): groups positions into features,
                        like Lime's: positions with the same integer form one
                        feature, which SLALOM samples, deletes and scores as one
                        unit (e.g. the sub-tokens of a word). Shaped like (or
                        broadcastable to) the ids; for tuple inputs, a tuple whose
                        first entry is the ids' mask (the others None or equal to
                        it). When deleting, a feature must be a contiguous span.
                        Default: None (every non-special position is a feature)
            n_samples (int, optional): model evaluations used to fit (SLALOM-eff,
                        -fidel); "ana" always uses 2U - 1 (U unique features).
                        Default: 1000
            perturbations_per_eval (int, optional): samples per forward call.
                        SLALOM-eff's samples are a few tokens long, so batching them
                        is cheap (Captum's methods default to 1). A forward that fails
                        on batches but runs on one sample is called one at a time,
                        with a warning.
                        Default: 64
            return_input_shape (bool, optional): as in Lime: True returns scores
                        shaped like the inputs; False returns one score per feature:
                        per feature id of ``feature_mask`` (0 .. max id), else per
                        position of the ids; 1-D for a single example, else batch x
                        features.
                        Default: True
            show_progress (bool, optional): Captum's progress bar ("Slalom
                        attribution") over model evaluations.
                        Default: False
            score (str, optional): which score to return: "contribution", "lin",
                        "value", "importance", "removal" or "shapley".
                        Default: "contribution"
            method (str, optional): "eff" (short random sequences, fast), "fidel"
                        (deletions from the full input) or "ana" (closed form from
                        singles and pairs; exact on a true SLALOM).
                        Default: "eff"
            seed (int, optional): random seed; the same seed gives the same
                        explanation. None draws from torch's global generator, so
                        ``torch.manual_seed`` reproduces (as with Lime).
                        Default: None
            perturbation (str, optional): "delete" (SLALOM's own semantics) or
                        "replace" (absent features take the baseline; every feature is
                        its own unit; slower, as the inputs keep their full length).
                        Default: "delete"
            special_token_ids (Sequence[int], optional): ids that stay in place and
                        get attribution 0; overrides the constructor's default
                        (``()`` for none). When deleting, they must sit at the start
                        or end of the (unpadded) row.
                        Default: None (the constructor's setting)
            special_token_positions (Sequence[int] or Tensor, optional): positions
                        that stay in place, in addition to the above: indices into
                        each row's unpadded tokens (negative counts from its last
                        token), or a boolean tensor shaped like the ids.
                        Default: None
            output (str, optional): what ``forward_func`` returns, as in
                        ``slalom_core.explain`` (e.g. "logits" or "probs").
                        Default: None (the engine's default)
            return_all (bool, optional): return a :class:`SlalomAttributionResult`
                        holding every score (each shaped like the ids) and the
                        engine's explanations, instead of one score.
                        Default: False
            **fit_options: the engine's fitting options (``slalom_core.explain``),
                        e.g. ``sample_length=2`` (eff), ``max_delete_fraction=0.5``
                        (fidel), ``reference``.

        Returns:

            *Tensor* or *tuple[Tensor, ...]* of **attributions**, or a
            :class:`SlalomAttributionResult` with ``return_all=True``:
            - **attributions**: float tensor shaped like the ids, one score per
              position (0 on special tokens and padding). For tuple inputs, a tuple
              shaped like the inputs: the other tensors carry no attribution of
              their own (zeros).

        Examples::

            >>> slalom = SlalomAttribution(forward_func, special_token_ids=[101, 102])
            >>> attr = slalom.attribute(input_ids, target=1, n_samples=500, seed=0)
            >>> every = slalom.attribute(input_ids, target=1, return_all=True)
            >>> every.value, every.importance, every.removal
        """
        if score not in SCORE_NAMES:
            raise ValueError(f"unknown score {score!r}; choose one of {SCORE_NAMES}")
        if perturbation not in PERTURBATIONS:
            raise ValueError(f"unknown perturbation {perturbation!r}; choose one of {PERTURBATIONS}")
        bad = sorted(set(fit_options) & _RESERVED_FIT_OPTIONS)
        if bad:
            raise TypeError(f"{bad} cannot be passed as fit options: SlalomAttribution sets them from its own arguments")
        if isinstance(perturbations_per_eval, bool) or not isinstance(perturbations_per_eval, int) or perturbations_per_eval < 1:
            raise ValueError(f"perturbations_per_eval must be a positive int, got {perturbations_per_eval!r}")
        if return_all and not return_input_shape:
            raise ValueError("return_all gives input-shaped scores: leave return_input_shape=True")
        replace = perturbation == "replace"
        if replace and method == "eff" and int(fit_options.get("sample_length", 2)) > 2:
            raise ValueError(
                "with perturbation='replace', a sample is a set of present features, so a "
                "feature drawn twice cannot count twice: use sample_length <= 2"
            )
        if output is not None:
            fit_options["output"] = output

        # -- inputs ------------------------------------------------------------------
        is_tuple = isinstance(inputs, tuple)
        tensors = inputs if is_tuple else (inputs,)
        if not tensors or not all(isinstance(t, Tensor) for t in tensors):
            raise TypeError("inputs must be a tensor of token ids or a tuple of tensors whose first holds the ids")
        ids = tensors[0]
        if ids.ndim != 2:
            raise ValueError(f"the token ids must be batch x length, got shape {tuple(ids.shape)} (add a batch dim with unsqueeze(0))")
        for t in tensors[1:]:
            if tuple(t.shape[:2]) != tuple(ids.shape):
                raise ValueError(f"every input tensor must be batch x length like the ids {tuple(ids.shape)}, got {tuple(t.shape)}")
        if not replace and (ids.dtype.is_floating_point or ids.dtype.is_complex or ids.dtype == torch.bool):
            raise TypeError(
                f"deleting tokens needs integer token ids, got {ids.dtype}; for other inputs "
                "use perturbation='replace' with baselines="
            )
        n_rows, length = ids.shape
        device = ids.device
        attn = tensors[1] if len(tensors) == 2 and _is_zero_one(tensors[1]) else None
        valid = torch.ones_like(ids, dtype=torch.bool) if attn is None else attn != 0

        # -- per-position bookkeeping: special tokens, features -------------------------
        base_rows = self._baselines(baselines, tensors) if baselines is not None else None
        if replace and base_rows is None:
            raise ValueError("perturbation='replace' needs baselines= (the values absent features take)")
        specials = self._special_positions(ids, valid, special_token_ids, special_token_positions)
        if base_rows is not None and base_rows[0] is not None:
            # Captum's tutorials mark special tokens by giving them in the baseline (and
            # replacing a token by itself would perturb nothing).
            specials |= (ids == base_rows[0]) & valid
        fmask = self._feature_mask(feature_mask, len(tensors), (n_rows, length), device)
        args = () if additional_forward_args is None else (
            additional_forward_args if isinstance(additional_forward_args, tuple) else (additional_forward_args,)
        )
        row_targets = _row_targets(target, n_rows)
        pad_id = self._pad_id(ids, valid)
        module = slalom_core.module_of(self.forward_func)

        # One forward on the first real row, as Captum calls the model: how many class
        # scores there are decides what the target means (see _engine_target).
        with slalom_core.model_session(module), torch.no_grad():
            probe_args = tuple(b(1, None, None) for b in _row_arg_builders(args, 0, n_rows, length, None))
            probe = self.forward_func(*(t[:1] for t in tensors), *probe_args)

        factory = _SharedProgress(f"{self.get_name()} attribution") if show_progress else None
        explanations: list[SlalomExplanation] = []
        position_maps: list[list[np.ndarray]] = []
        try:
            for row in range(n_rows):
                index_prefix, cls = row_targets[row]
                engine_target = _engine_target(cls, _as_score_matrix(probe, 1, index_prefix).shape[1])
                groups = self._groups(row, ids, valid, specials, fmask, contiguous=not replace)
                caller = _BatchCaller(self.forward_func, index_prefix)
                if replace:
                    adapter, seg = self._replacement_adapter(row, tensors, base_rows, groups, args, caller, perturbations_per_eval, module)
                else:
                    adapter, seg = self._deletion_adapter(
                        row, tensors, attn, valid, specials, groups, args, caller, pad_id, perturbations_per_eval, module
                    )
                exp = slalom_core.explain_batch(
                    adapter,
                    [seg],
                    method=method,
                    n_samples=n_samples,
                    target=engine_target,
                    seed=seed,
                    show_progress=factory if factory is not None else False,
                    **fit_options,
                )[0]
                explanations.append(exp)
                position_maps.append(groups)
        finally:
            if factory is not None:
                factory.close()

        names = SCORE_NAMES if return_all else (score,)
        dtype = torch.get_default_dtype()
        per_position = {}
        for name in names:
            out = torch.zeros((n_rows, length), dtype=dtype, device=device)
            for row, (exp, groups) in enumerate(zip(explanations, position_maps)):
                per_feature = torch.as_tensor(np.asarray(exp.scores(name), dtype=np.float64), dtype=dtype, device=device)
                for g, positions in enumerate(groups):
                    out[row, torch.as_tensor(positions, device=device)] = per_feature[g]
            per_position[name] = out
        if return_all:
            return SlalomAttributionResult(per_position, explanations)
        attributions = per_position[score]
        if not return_input_shape:
            return self._per_feature(attributions, fmask)
        if is_tuple:
            return (attributions, *(torch.zeros(t.shape, dtype=dtype, device=device) for t in tensors[1:]))
        return attributions

    # -- argument translation ----------------------------------------------------------
    @staticmethod
    def _per_feature(attributions: Tensor, fmask: Tensor | None) -> Tensor:
        """Lime's ``return_input_shape=False``: one score per interpretable feature."""
        if fmask is None:
            out = attributions
        else:
            out = torch.zeros((attributions.shape[0], int(fmask.max()) + 1), dtype=attributions.dtype, device=attributions.device)
            # Every position of a feature holds the feature's score; special/padding
            # positions hold 0 and never share an id with a feature (checked in _groups).
            out.scatter_(1, fmask.clamp_min(0), attributions)
        return out[0] if out.shape[0] == 1 else out

    def _pad_id(self, ids: Tensor, valid: Tensor) -> int | None:
        if self.pad_token_id is not None:
            return int(self.pad_token_id)
        padded = ids[~valid]
        # The inputs' own padding tells which id the model expects there.
        return int(padded[0]) if padded.numel() else None

    def _special_positions(self, ids, valid, special_token_ids, special_token_positions) -> Tensor:
        chosen = self.special_token_ids if special_token_ids is None else tuple(int(i) for i in special_token_ids)
        special = torch.zeros_like(ids, dtype=torch.bool)
        if chosen:
            special |= torch.isin(ids, torch.tensor(chosen, dtype=ids.dtype, device=ids.device))
        if special_token_positions is not None:
            if isinstance(special_token_positions, Tensor) and special_token_positions.dtype == torch.bool:
                special |= _broadcast_rows(special_token_positions, tuple(ids.shape), "special_token_positions", torch.bool, ids.device)
            else:
                for row in range(ids.shape[0]):
                    real = torch.nonzero(valid[row]).flatten()
                    for p in [int(p) for p in special_token_positions]:
                        if not -len(real) <= p < len(real):
                            raise ValueError(f"special token position {p} is outside row {row} ({len(real)} tokens)")
                        special[row, real[p]] = True
        return special & valid

    @staticmethod
    def _feature_mask(feature_mask, n_inputs, shape, device) -> Tensor | None:
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
        if feature_mask.dtype.is_floating_point or feature_mask.dtype == torch.bool:
            raise TypeError(f"feature_mask must hold integer feature ids, got {feature_mask.dtype}")
        fmask = _broadcast_rows(feature_mask, shape, "feature_mask", torch.long, device)
        if bool((fmask < 0).any()):
            raise ValueError("feature_mask ids must be >= 0")
        return fmask

    @staticmethod
    def _baselines(baselines, tensors) -> list[Tensor | None]:
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

    # -- per-row translation -------------------------------------------------------------
    @staticmethod
    def _groups(row, ids, valid, specials, fmask, *, contiguous: bool) -> list[np.ndarray]:
        """Positions of each feature in this row, ordered by first position."""
        content = (valid[row] & ~specials[row]).cpu().numpy()
        positions = np.flatnonzero(content)
        if positions.size == 0:
            raise ValueError(f"row {row} has no token to explain (all positions are special tokens or padding)")
        if fmask is None:
            return [np.array([p]) for p in positions]
        labels = fmask[row].cpu().numpy()
        groups: dict[int, list[int]] = {}
        for p in positions.tolist():
            groups.setdefault(int(labels[p]), []).append(p)
        outside = set(labels[~content].tolist()) & set(groups)
        if outside:
            raise ValueError(
                f"feature ids {sorted(outside)} of row {row} cover both tokens and special/padding "
                "positions; special tokens and padding are never features: give them their own ids"
            )
        ordered = [np.array(g) for g in groups.values()]
        ordered.sort(key=lambda g: g[0])
        if contiguous:
            rank = {p: i for i, p in enumerate(positions.tolist())}
            for g in ordered:
                r = [rank[p] for p in g.tolist()]
                if r[-1] - r[0] + 1 != len(r):
                    raise ValueError(
                        f"feature {int(labels[g[0]])} of row {row} is not a contiguous span (positions "
                        f"{g.tolist()}); deleting it would reorder the text. Use contiguous groups, "
                        "or perturbation='replace' (replacement keeps every position in place)"
                    )
        return ordered

    def _deletion_adapter(self, row, tensors, attn, valid, specials, groups, args, caller, pad_id, batch_size, module):
        ids = tensors[0]
        n_rows, length = ids.shape
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
        companions = [_Companion(t[row], valid[row], is_mask=t is attn) for t in tensors[1:]]
        forward = _DeletionForward(
            ids.dtype,
            companions,
            _row_arg_builders(args, row, n_rows, length, valid[row]),
            torch.tensor(prefix, dtype=torch.long),
            torch.tensor(suffix, dtype=torch.long),
            torch.tensor(content_ids, dtype=torch.long),
            torch.tensor([first_at[i] for i in content_ids], dtype=torch.long),
            caller,
        )
        seg = Segmentation(
            unit_ids=[tuple(row_ids[p] for p in g.tolist()) for g in groups],
            tokens=[" ".join(str(row_ids[p]) for p in g.tolist()) for g in groups],
        )
        adapter = TorchClassifier(
            forward,
            prefix_ids=[row_ids[p] for p in prefix],
            suffix_ids=[row_ids[p] for p in suffix],
            pad_id=0 if pad_id is None else pad_id,
            tokenizer=self.tokenizer,  # the reference input of a model without special tokens
            batch_size=batch_size,
            device=None if module is not None else ids.device,
            # Padding needs a model that reads an attention mask and the id it pads with;
            # otherwise each forward batch holds samples of one length (never padded).
            pads_safely=attn is not None and pad_id is not None,
            module=module,
        )
        return adapter, seg

    def _replacement_adapter(self, row, tensors, base_rows, groups, args, caller, batch_size, module):
        ids = tensors[0]
        n_rows, length = ids.shape
        n_features = len(groups)
        feature_of_position = torch.full((length,), n_features, dtype=torch.long, device=ids.device)
        for g, positions in enumerate(groups):
            feature_of_position[torch.as_tensor(positions, device=ids.device)] = g
        row_ids = ids[row].tolist()
        # Each feature is its own unit (ids 0..G-1): replacement switches positions on and
        # off, so two occurrences of a token are two features here.
        seg = Segmentation(
            unit_ids=[(g,) for g in range(n_features)],
            tokens=[" ".join(str(row_ids[p]) for p in positions.tolist()) for positions in groups],
        )
        forward = _ReplacementForward(
            [t[row : row + 1] for t in tensors],
            [None if b is None else b[row : row + 1] for b in base_rows],
            feature_of_position,
            n_features,
            _row_arg_builders(args, row, n_rows, length, None),
            caller,
        )
        adapter = TorchClassifier(
            forward, pad_id=0, batch_size=batch_size, device=None if module is not None else ids.device, pads_safely=True, module=module
        )
        return adapter, seg


def _is_zero_one(t: Tensor) -> bool:
    """True for a tensor holding only 0s and 1s (an attention mask)."""
    return not t.dtype.is_complex and bool(((t == 0) | (t == 1)).all())
