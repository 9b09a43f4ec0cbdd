"""SLALOM as a Captum ``PerturbationAttribution``: :class:`SlalomAttribution`.

This module only translates. Captum's arguments (inputs, target, feature_mask,
additional_forward_args, baselines, ...) become one :class:`slalom_core.Segmentation` and
one :class:`slalom_core.TorchClassifier` per explained row; :func:`slalom_core.explain_batch`
samples, calls the model and fits; the per-unit scores it returns are spread back onto
the input positions as Captum-shaped tensors. No fitting happens here.
"""

from __future__ import annotations

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

InputType = Union[Tensor, tuple[Tensor, Tensor]]
FeatureMaskType = Union[None, Tensor, tuple[Union[Tensor, None], ...]]

# explain_batch arguments the adapter sets itself; anything else in **engine_options is
# handed to the engine (which rejects what it does not know).
_RESERVED_ENGINE_OPTIONS = frozenset(
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


def _select_row_args(args: tuple, row: int, n_rows: int) -> tuple[tuple, tuple[bool, ...]]:
    selected, per_example = [], []
    for a in args:
        if _is_per_example(a, n_rows):
            selected.append(a[row : row + 1])
            per_example.append(True)
        else:
            selected.append(a)
            per_example.append(False)
    return tuple(selected), tuple(per_example)


def _expand_row_args(args: tuple, per_example: tuple[bool, ...], batch: int) -> tuple:
    out = []
    for a, rowwise in zip(args, per_example):
        if rowwise and isinstance(a, Tensor):
            # a holds one example (selected by _select_row_args): share it across the batch.
            out.append(a.expand(batch, *a.shape[1:]))
        elif rowwise:
            out.append(list(a) * batch)
        else:
            out.append(a)
    return tuple(out)


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
class _DeletionForward:
    """Engine samples (token ids, right-padded, with a mask) -> the user's forward_func.

    Called as forward_func(ids, *args) for a single input tensor, and as
    forward_func(ids, attention_mask, *args) when inputs were (input_ids, attention_mask).
    """

    def __init__(self, forward_func, with_mask, ids_dtype, mask_dtype, args, per_example, index_prefix):
        self.forward_func = forward_func
        self.with_mask = with_mask
        self.ids_dtype = ids_dtype
        self.mask_dtype = mask_dtype
        self.args = args
        self.per_example = per_example
        self.index_prefix = index_prefix

    def __call__(self, ids: Tensor, mask: Tensor) -> Tensor:
        batch = ids.shape[0]
        args = _expand_row_args(self.args, self.per_example, batch)
        ids = ids.to(self.ids_dtype)
        if self.with_mask:
            out = self.forward_func(ids, mask.to(self.mask_dtype), *args)
        else:
            out = self.forward_func(ids, *args)
        return _as_score_matrix(out, batch, self.index_prefix)


class _ReplacementForward:
    """Engine samples (sets of feature indices) -> full-length inputs with absent features
    replaced by the baseline -> the user's forward_func."""

    def __init__(self, forward_func, x_row, base_row, mask_row, mask_base_row, feature_of_position, n_features, args, per_example, index_prefix):
        self.forward_func = forward_func
        self.x_row = x_row
        self.base_row = base_row
        self.mask_row = mask_row
        self.mask_base_row = mask_base_row
        # Non-feature positions (special tokens, padding) point at an extra, always
        # present column so that they are never replaced.
        self.feature_of_position = feature_of_position
        self.n_features = n_features
        self.args = args
        self.per_example = per_example
        self.index_prefix = index_prefix

    def __call__(self, units: Tensor, slots: Tensor) -> Tensor:
        batch = units.shape[0]
        device = self.x_row.device
        units, real = units.to(device), slots.to(device).bool()
        present = torch.zeros((batch, self.n_features + 1), dtype=torch.bool, device=device)
        present[:, self.n_features] = True
        rows = torch.arange(batch, device=device)[:, None].expand_as(units)
        # A unit drawn twice is simply present (eff's sample_length is capped at 2 here).
        present[rows[real], units[real]] = True
        keep = present[:, self.feature_of_position]
        x = torch.where(keep, self.x_row, self.base_row)
        args = _expand_row_args(self.args, self.per_example, batch)
        if self.mask_row is None:
            out = self.forward_func(x, *args)
        else:
            m = self.mask_row.expand(batch, -1)
            if self.mask_base_row is not None:
                m = torch.where(keep, self.mask_row, self.mask_base_row)
            out = self.forward_func(x, m, *args)
        return _as_score_matrix(out, batch, self.index_prefix)


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
    reports ``lin`` = v·exp(s) (default), ``value``, ``importance``, ``removal`` (the
    predicted output change when the feature is deleted), ``contribution`` (α·v, sums
    to the surrogate's output) and ``shapley`` (Shapley values of the surrogate).

    **Removal semantics.** SLALOM *deletes* absent tokens: the model sees shorter
    sequences (SLALOM-eff scores random 2-token sequences of the text's tokens, which is
    why it is fast). Special tokens declared via ``special_token_ids`` /
    ``special_token_positions`` stay in place at the start and end of every sample.
    Captum's Lime and KernelShap instead *replace* absent features by a baseline; pass
    ``baselines=`` to get that behaviour here (fixed-length inputs; see ``attribute``).

    Fitting and sampling live in the ``slalom_core`` engine; this class only maps
    Captum's arguments and results. Use it exactly like ``Lime``::

        >>> def forward_func(input_ids, attention_mask):
        ...     return model(input_ids=input_ids, attention_mask=attention_mask).logits
        >>> slalom = SlalomAttribution(forward_func, special_token_ids=tokenizer.all_special_ids)
        >>> enc = tokenizer(["a great movie"], return_tensors="pt")
        >>> attr_ids, _ = slalom.attribute((enc.input_ids, enc.attention_mask), target=1)
    """

    def __init__(
        self,
        forward_func: Callable[..., Any],
        *,
        special_token_ids: Sequence[int] | None = None,
        pad_token_id: int | None = None,
    ) -> None:
        r"""
        Args:

            forward_func (Callable or torch.nn.Module): the model's forward function,
                        called as Captum calls it: ``forward_func(input_ids,
                        *additional_forward_args)`` for a single input tensor, or
                        ``forward_func(input_ids, attention_mask,
                        *additional_forward_args)`` when ``inputs`` is the tuple
                        ``(input_ids, attention_mask)``. It returns class scores
                        (batch x classes; logits by default, see ``output``), a
                        score per example, or an object with ``.logits``.
            special_token_ids (Sequence[int], optional): token ids that are never
                        features and stay in place (e.g.
                        ``tokenizer.all_special_ids``: [CLS], [SEP], [PAD], ...).
                        The default for every ``attribute`` call.
                        Default: None (no special tokens)
            pad_token_id (int, optional): id used to pad a batch of samples of
                        different lengths when ``inputs`` carries an attention mask
                        (padding is masked out). If None, it is read from the padded
                        positions of the inputs, else 0. Decoder classifiers that
                        pool at the last non-pad token (GPT-2) need their
                        ``config.pad_token_id`` here.
                        Default: None
        """
        PerturbationAttribution.__init__(self, forward_func)
        self.special_token_ids = None if special_token_ids is None else tuple(int(i) for i in special_token_ids)
        self.pad_token_id = pad_token_id

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
        show_progress: bool = False,
        *,
        score: str = "lin",
        method: str = "eff",
        seed: int | None = None,
        special_token_ids: Sequence[int] | None = None,
        special_token_positions: Sequence[int] | Tensor | None = None,
        output: str = "logits",
        return_all: bool = False,
        **engine_options: Any,
    ) -> Tensor | tuple[Tensor, Tensor] | SlalomAttributionResult:
        r"""
        Fits one local SLALOM per row of ``inputs`` and returns its scores per position.

        Args:

            inputs (Tensor or tuple[Tensor, Tensor]): token ids, batch x length, or the
                        tuple ``(input_ids, attention_mask)``. With a tuple,
                        ``forward_func`` receives a rebuilt attention mask for every
                        sample (1 on tokens, 0 on padding) and samples of different
                        lengths share batches; with a single tensor, no padding is
                        ever added (each forward batch holds samples of one length).
                        Padding in a tuple's mask (0 entries, at either end) is no
                        feature. Every row is explained separately.
            baselines (scalar, Tensor or tuple, optional): None (default): absent
                        features are *deleted* (SLALOM's own semantics). Given:
                        absent features are *replaced* by the baseline and inputs
                        keep their length, as in Lime/KernelShap. A scalar (e.g. the
                        [MASK] or [PAD] id) or a tensor broadcastable to the ids.
                        For tuple inputs, ``(ids_baseline, mask_baseline)``: either
                        may be None (left unchanged); ``mask_baseline=0`` masks
                        absent tokens out. In this mode every feature is its own
                        SLALOM unit (repeated tokens are not merged) and SLALOM-eff
                        needs ``sample_length`` <= 2.
                        Default: None
            target (int, tuple, Tensor, or list, optional): Captum's target
                        convention. An int or a one-element tensor: that class for
                        every example; a list or 1-D tensor: one class per example;
                        a tuple: its last entry is the class, the leading entries
                        index extra output dimensions. SLALOM models *log-odds*: for
                        2 classes, target c explains log p(c)/p(1-c); for k > 2
                        classes, class c against the rest; for a single score per
                        example, the score itself (target None or 0).
                        None on a 2-class model explains class 1. To read the
                        number of class scores, ``forward_func`` is called once on
                        the unperturbed inputs, as Captum would call it.
                        Default: None
            additional_forward_args (Any, optional): extra arguments passed to
                        ``forward_func`` after the inputs. Tensors (and lists) whose
                        first dimension is the batch size hold one entry per example
                        and are expanded to each forward batch; other values are
                        passed unchanged. Per-position tensors (batch x length)
                        cannot follow deletions and raise an error: pass
                        ``(input_ids, attention_mask)`` as inputs instead.
                        Default: None
            feature_mask (Tensor or tuple, optional): groups positions into features,
                        like Lime's: positions with the same integer form one
                        feature, which SLALOM samples, deletes and scores as one
                        unit (e.g. the sub-tokens of a word). Shaped like (or
                        broadcastable to) the ids. With tuple inputs, a tensor for
                        the ids, or ``(ids_mask, None)`` / ``(ids_mask, ids_mask)``.
                        When deleting, a feature must be a contiguous span. Groups
                        with identical token ids share one value and importance,
                        as repeated tokens do. Every position of a feature receives
                        the feature's score.
                        Default: None (every non-special position is a feature)
            n_samples (int, optional): model evaluations used to fit (SLALOM-eff,
                        -fidel); "ana" always uses 2U - 1 (U unique features).
                        Default: 1000
            perturbations_per_eval (int, optional): samples per forward call.
                        Captum's methods default to 1; SLALOM-eff's samples are a
                        few tokens long, so batching them is cheap. Use 1 for a
                        forward_func that only takes one input at a time.
                        Default: 64
            show_progress (bool, optional): Captum's progress bar ("Slalom
                        attribution") over model evaluations.
                        Default: False
            score (str, optional): which score to return: "lin", "value",
                        "importance", "removal", "contribution" or "shapley".
                        Default: "lin"
            method (str, optional): "eff" (short random sequences, fast), "fidel"
                        (deletions from the full input) or "ana" (closed form from
                        singles and pairs; exact on a true SLALOM).
                        Default: "eff"
            seed (int, optional): random seed; the same seed gives the same
                        explanation. None draws one (recorded in diagnostics).
                        Default: None
            special_token_ids (Sequence[int], optional): ids that stay in place and
                        get attribution 0; overrides the constructor's default
                        (``()`` for none). When deleting, they must sit at the start
                        or end of the (unpadded) row.
                        Default: None (the constructor's setting)
            special_token_positions (Sequence[int] or Tensor, optional): positions
                        that stay in place, in addition to ``special_token_ids``:
                        indices into each row's unpadded tokens (negative counts
                        from its last token), or a boolean tensor shaped like the ids.
                        Default: None
            output (str, optional): "logits" (default) or "probs" when
                        ``forward_func`` returns probabilities (turned into log-odds).
                        Default: "logits"
            return_all (bool, optional): return a :class:`SlalomAttributionResult`
                        holding every score (each shaped like the ids) and the
                        engine's explanations, instead of one score.
                        Default: False
            **engine_options: passed to ``slalom_core.explain_batch`` and its fitter,
                        e.g. ``sample_length=2`` (eff), ``max_delete_fraction=0.5``
                        (fidel), ``gamma``, ``reference``.

        Returns:

            *Tensor* or *tuple[Tensor, Tensor]* of **attributions**, or a
            :class:`SlalomAttributionResult` with ``return_all=True``:
            - **attributions**: float tensor shaped like the ids, one score per
              position (0 on special tokens and padding). For tuple inputs, the
              tuple ``(attributions, zeros)``: the attention mask carries no
              attribution of its own.

        Examples::

            >>> slalom = SlalomAttribution(forward_func, special_token_ids=[101, 102])
            >>> attr = slalom.attribute(input_ids, target=1, n_samples=500, seed=0)
            >>> every = slalom.attribute(input_ids, target=1, return_all=True)
            >>> every.value, every.importance, every.removal
        """
        if score not in SCORE_NAMES:
            raise ValueError(f"unknown score {score!r}; choose one of {SCORE_NAMES}")
        bad = sorted(set(engine_options) & _RESERVED_ENGINE_OPTIONS)
        if bad:
            raise TypeError(f"{bad} cannot be passed as engine options: SlalomAttribution sets them from its own arguments")
        if isinstance(perturbations_per_eval, bool) or not isinstance(perturbations_per_eval, int) or perturbations_per_eval < 1:
            raise ValueError(f"perturbations_per_eval must be a positive int, got {perturbations_per_eval!r}")
        replace = baselines is not None
        if replace and method == "eff" and int(engine_options.get("sample_length", 2)) > 2:
            raise ValueError(
                "with baselines (replacement), a sample is a set of present features, so a "
                "feature drawn twice cannot count twice: use sample_length <= 2"
            )

        # -- inputs ------------------------------------------------------------------
        is_tuple = isinstance(inputs, tuple)
        if is_tuple:
            if len(inputs) != 2:
                raise ValueError(f"tuple inputs must be (input_ids, attention_mask), got {len(inputs)} tensors")
            ids, attn = inputs
            if not isinstance(ids, Tensor) or not isinstance(attn, Tensor) or ids.shape != attn.shape:
                raise ValueError("tuple inputs must be two tensors of one shape: (input_ids, attention_mask)")
        elif isinstance(inputs, Tensor):
            ids, attn = inputs, None
        else:
            raise TypeError(f"inputs must be a tensor of token ids or (input_ids, attention_mask), got {type(inputs).__name__}")
        if ids.ndim != 2:
            raise ValueError(f"inputs must be batch x length, got shape {tuple(ids.shape)} (add a batch dim with unsqueeze(0))")
        if not replace and (ids.dtype.is_floating_point or ids.dtype.is_complex or ids.dtype == torch.bool):
            raise TypeError(
                f"deleting tokens needs integer token ids, got {ids.dtype}; for other inputs "
                "give baselines= (absent features replaced)"
            )
        n_rows, length = ids.shape
        device = ids.device
        valid = torch.ones_like(ids, dtype=torch.bool) if attn is None else attn != 0

        # -- per-position bookkeeping: special tokens, features -------------------------
        specials = self._special_positions(ids, valid, special_token_ids, special_token_positions)
        fmask = self._feature_mask(feature_mask, is_tuple, (n_rows, length), device)
        args = self._format_args(additional_forward_args)
        row_targets = _row_targets(target, n_rows)
        pad_id = self._pad_id(ids, valid)

        ids_base = attn_base = None
        if replace:
            ids_base, attn_base = self._baselines(baselines, is_tuple, ids, attn)

        # One forward on the real inputs, as Captum calls the model: how many class
        # scores there are decides what the target means (see _engine_target).
        with torch.no_grad():
            probe = self.forward_func(*((ids, attn) if is_tuple else (ids,)), *args)

        factory = _SharedProgress(f"{self.get_name()} attribution") if show_progress else None
        explanations: list[SlalomExplanation] = []
        position_maps: list[list[np.ndarray]] = []
        try:
            for row in range(n_rows):
                index_prefix, cls = row_targets[row]
                k = _as_score_matrix(probe, n_rows, index_prefix).shape[1]
                engine_target = _engine_target(cls, k)
                row_args, per_example = _select_row_args(args, row, n_rows)
                groups = self._groups(row, ids, valid, specials, fmask, contiguous=not replace)
                if replace:
                    adapter, seg = self._replacement_adapter(
                        row, ids, attn, ids_base, attn_base, groups, length, row_args, per_example,
                        index_prefix, perturbations_per_eval, device,
                    )
                else:
                    for a in row_args:
                        if isinstance(a, Tensor) and a.ndim >= 2 and a.shape[1] == length:
                            raise ValueError(
                                f"additional_forward_args holds a per-position tensor of shape "
                                f"{tuple(a.shape)}: SLALOM deletes tokens, so it cannot follow the "
                                "samples. Pass (input_ids, attention_mask) as inputs (the mask is "
                                "rebuilt per sample), or give baselines= for replacement"
                            )
                    adapter, seg = self._deletion_adapter(
                        row, ids, attn, valid, specials, groups, row_args, per_example,
                        index_prefix, pad_id, perturbations_per_eval, device,
                    )
                exp = slalom_core.explain_batch(
                    adapter,
                    [seg],
                    method=method,
                    n_samples=n_samples,
                    target=engine_target,
                    seed=seed,
                    output=output,
                    show_progress=factory if factory is not None else False,
                    **engine_options,
                )[0]
                explanations.append(exp)
                position_maps.append(groups)
        finally:
            if factory is not None:
                factory.close()

        names = SCORE_NAMES if return_all else (score,)
        dtype = torch.get_default_dtype()
        tensors = {}
        for name in names:
            out = torch.zeros((n_rows, length), dtype=dtype, device=device)
            for row, (exp, groups) in enumerate(zip(explanations, position_maps)):
                per_feature = torch.as_tensor(np.asarray(exp.scores(name), dtype=np.float64), dtype=dtype, device=device)
                for g, positions in enumerate(groups):
                    out[row, torch.as_tensor(positions, device=device)] = per_feature[g]
            tensors[name] = out
        if return_all:
            return SlalomAttributionResult(tensors, explanations)
        attributions = tensors[score]
        if is_tuple:
            return attributions, torch.zeros_like(attn, dtype=dtype)
        return attributions

    # -- argument translation ----------------------------------------------------------
    @staticmethod
    def _format_args(additional_forward_args: Any) -> tuple:
        if additional_forward_args is None:
            return ()
        return additional_forward_args if isinstance(additional_forward_args, tuple) else (additional_forward_args,)

    def _pad_id(self, ids: Tensor, valid: Tensor) -> int:
        if self.pad_token_id is not None:
            return int(self.pad_token_id)
        padded = ids[~valid]
        # The inputs' own padding tells which id the model expects there.
        return int(padded[0]) if padded.numel() else 0

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
    def _feature_mask(feature_mask, is_tuple, shape, device) -> Tensor | None:
        if feature_mask is None:
            return None
        if isinstance(feature_mask, tuple):
            if not is_tuple:
                if len(feature_mask) != 1:
                    raise ValueError("a single input tensor takes one feature mask")
                feature_mask = feature_mask[0]
            else:
                if len(feature_mask) != 2:
                    raise ValueError("tuple inputs take a feature mask tensor, or (ids_mask, None | ids_mask)")
                first, second = feature_mask
                if second is not None and not torch.equal(
                    torch.broadcast_to(torch.as_tensor(second), shape), torch.broadcast_to(torch.as_tensor(first), shape)
                ):
                    raise ValueError(
                        "the attention mask follows the token ids: its feature mask must be None "
                        "or equal to the ids' feature mask"
                    )
                feature_mask = first
        if feature_mask.dtype.is_floating_point or feature_mask.dtype == torch.bool:
            raise TypeError(f"feature_mask must hold integer feature ids, got {feature_mask.dtype}")
        return _broadcast_rows(feature_mask, shape, "feature_mask", torch.long, device)

    @staticmethod
    def _baselines(baselines, is_tuple, ids, attn) -> tuple[Tensor | None, Tensor | None]:
        shape = tuple(ids.shape)
        if isinstance(baselines, tuple):
            if not is_tuple:
                if len(baselines) != 1:
                    raise ValueError("a single input tensor takes one baseline")
                b_ids, b_attn = baselines[0], None
            else:
                if len(baselines) != 2:
                    raise ValueError("tuple inputs take baselines (ids_baseline, mask_baseline)")
                b_ids, b_attn = baselines
                if b_ids is None and b_attn is None:
                    raise ValueError("baselines=(None, None) replaces nothing; use baselines=None to delete tokens")
        else:
            b_ids, b_attn = baselines, None
        ids_base = ids if b_ids is None else _broadcast_rows(b_ids, shape, "baselines", ids.dtype, ids.device)
        attn_base = None if b_attn is None else _broadcast_rows(b_attn, shape, "mask baseline", attn.dtype, ids.device)
        return ids_base, attn_base

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
                        "or baselines= (replacement keeps every position in place)"
                    )
        return ordered

    def _deletion_adapter(self, row, ids, attn, valid, specials, groups, row_args, per_example, index_prefix, pad_id, batch_size, device):
        real = torch.nonzero(valid[row]).flatten().tolist()
        if real != list(range(real[0], real[-1] + 1)):
            raise ValueError(f"row {row}: padding (attention mask 0) must sit at the start or end of the row")
        first_content = min(int(g[0]) for g in groups)
        last_content = max(int(g[-1]) for g in groups)
        row_ids = ids[row].tolist()
        row_special = specials[row].tolist()
        prefix = [row_ids[p] for p in real if p < first_content]
        suffix = [row_ids[p] for p in real if p > last_content]
        for p in range(first_content, last_content + 1):
            if row_special[p]:
                raise ValueError(
                    f"row {row}: special token at position {p} lies between content tokens; special "
                    "tokens stay in place only at the start or end. Drop it from the special tokens "
                    "to treat it as a feature, or give baselines= (replacement)"
                )
        seg = Segmentation(
            unit_ids=[tuple(row_ids[p] for p in g.tolist()) for g in groups],
            tokens=[" ".join(str(row_ids[p]) for p in g.tolist()) for g in groups],
        )
        forward = _DeletionForward(
            self.forward_func, attn is not None, ids.dtype, None if attn is None else attn.dtype,
            row_args, per_example, index_prefix,
        )
        adapter = TorchClassifier(
            forward,
            prefix_ids=prefix,
            suffix_ids=suffix,
            pad_id=pad_id,
            batch_size=batch_size,
            device=device,
            # Without an attention mask the model cannot tell padding from tokens: then the
            # engine batches only samples of one length and never pads.
            pads_safely=attn is not None,
        )
        return adapter, seg

    def _replacement_adapter(self, row, ids, attn, ids_base, attn_base, groups, length, row_args, per_example, index_prefix, batch_size, device):
        n_features = len(groups)
        feature_of_position = torch.full((length,), n_features, dtype=torch.long, device=device)
        for g, positions in enumerate(groups):
            feature_of_position[torch.as_tensor(positions, device=device)] = g
        row_ids = ids[row].tolist()
        # Each feature is its own unit (ids 0..G-1): replacement switches positions on and
        # off, so two occurrences of a token are two features here.
        seg = Segmentation(
            unit_ids=[(g,) for g in range(n_features)],
            tokens=[" ".join(str(row_ids[p]) for p in positions.tolist()) for positions in groups],
        )
        forward = _ReplacementForward(
            self.forward_func,
            ids[row : row + 1],
            ids_base[row : row + 1],
            None if attn is None else attn[row : row + 1],
            None if attn_base is None else attn_base[row : row + 1],
            feature_of_position,
            n_features,
            row_args,
            per_example,
            index_prefix,
        )
        adapter = TorchClassifier(forward, pad_id=0, batch_size=batch_size, device=device, pads_safely=True)
        return adapter, seg
