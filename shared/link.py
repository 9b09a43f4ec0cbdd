"""From raw model outputs to the log-odds SLALOM fits.

SLALOM models log-odds (Sec. 5.1): ``F = log p(y=1|t) / p(y=0|t)`` for a binary model and
centred logits for a multi-class model (App. C.1: one importance per token shared by all
classes, one value per class, values summing to zero over classes). A multi-label model
(one sigmoid per label) is explained one label at a time, in that label's own log-odds
``log p_c / (1 − p_c)``, which is its raw logit. :class:`OutputLink` converts a model's raw
outputs into that form; :func:`resolve_output` decides, once per call, what the raw outputs
are when the caller leaves it to ``output="auto"``.

The ``output`` vocabulary (:data:`OUTPUT_KINDS`):

- ``"auto"`` (default of ``explain``): probabilities if every row the engine sees first is
  non-negative and sums to 1 (K >= 2 outputs), logits otherwise; a model whose config says
  ``problem_type="multi_label_classification"`` is ``"multilabel_logits"``. A single output
  per example is read as a logit. A :class:`SlalomOutputWarning` says when probabilities
  were detected, and when the outputs could be probabilities but are read as logits.
- ``"logits"``: raw logits of mutually exclusive classes (softmax model; one logit = binary).
- ``"probs"``: class probabilities (rows sum to 1), or one probability of the positive class.
- ``"multilabel_logits"``: one independent logit per label (sigmoid per label).
- ``"multilabel_probs"``: one independent probability per label.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from dataclasses import dataclass

import torch

# Moved to .warn; still importable from here for code written against the old place.
from .warn import warn_user as warn_user

__all__ = [
    "OutputLink",
    "OUTPUT_KINDS",
    "MULTICLASS_MODES",
    "SlalomOutputWarning",
    "resolve_output",
    "config_output_kind",
    "check_target",
    "target_index",
    "pipeline_output_kind",
    "declared_output",
    "PROB_SUM_TOL",
    "prob_sum_tolerance",
]

#: What ``output=`` accepts; every kind but "auto" names what the raw outputs are.
OUTPUT_KINDS = ("auto", "logits", "probs", "multilabel_logits", "multilabel_probs")
MULTICLASS_MODES = ("joint", "ovr")
#: "auto" reads rows as probabilities when they sum to 1 within this (float32 and wider).
PROB_SUM_TOL = 1e-4
# An explicit "probs" is the user's word: accept more rounding, reject outputs that are
# plainly something else.
_PROB_CHECK_TOL = 1e-3
_EPS = 1e-12
#: The largest explained output (log-odds) a fit can use: the fitters square outputs, and
#: float64 squares overflow past about 1.3e154. Real logits are a few tens at most.
MAX_LOG_ODDS = 1e150


def target_index(target: object, class_names: Sequence[str] | None) -> object:
    """A class named by its name (``target="POSITIVE"``) as its index among the model's
    ``class_names`` (a Hugging Face model's ``config.id2label``); any other target as given.

    Raises:
        ValueError: a name the model does not have (the message lists its names).
        TypeError: a name, for a model that names none of its classes.

    Example:
        >>> target_index("POSITIVE", ["NEGATIVE", "POSITIVE"]), target_index(0, None)
        (1, 0)
        >>> target_index("GOOD", ["NEGATIVE", "POSITIVE"])
        Traceback (most recent call last):
        ...
        ValueError: target 'GOOD' is not a class of this model; its classes: 'NEGATIVE', 'POSITIVE' (or an index 0..1)
    """
    if not isinstance(target, str):
        return target
    if not class_names:
        raise TypeError(
            f"target must be an int class index or None, got {target!r}: this model names none of its classes "
            "(a Hugging Face model names them in config.id2label; an adapter takes class_names=)"
        )
    names = [str(c) for c in class_names]
    if target not in names:
        listed = ", ".join(repr(n) for n in names[:20]) + (", ..." if len(names) > 20 else "")
        raise ValueError(
            f"target {target!r} is not a class of this model; its classes: {listed} (or an index 0..{len(names) - 1})"
        )
    return names.index(target)


def check_target(target: object, n_outputs: int, class_names: Sequence[str] | None = None) -> int | None:
    """The output ``target`` names among a model's ``n_outputs`` scores per example, checked.

    With one score per example, that score is the explained output: target None and 0 both
    name it (None is returned; a single logit is never sign-flipped), any other target is an
    error. With K >= 2 outputs, target must be a class index in [0, K) or None (the
    default: class 1 of a binary model, every class of a joint multi-class fit).

    Example:
        >>> check_target(0, 1) is None, check_target(2, 3)
        (True, 2)
        >>> check_target(1, 1)
        Traceback (most recent call last):
        ...
        ValueError: target 1 does not exist: the model returns one score per example
    """
    if target is None:
        return None
    target = target_index(target, class_names)
    if isinstance(target, bool) or not isinstance(target, numbers.Integral):
        raise TypeError(f"target must be an int class index, a class name or None, got {target!r}")
    target = int(target)
    if n_outputs == 1:
        if target != 0:
            raise ValueError(f"target {target} does not exist: the model returns one score per example")
        return None
    if not 0 <= target < n_outputs:
        raise ValueError(f"target {target} is not a class of this model (it has {n_outputs} classes)")
    return target


def prob_sum_tolerance(dtype: torch.dtype | None, n_outputs: int, floor: float = PROB_SUM_TOL) -> float:
    """How far from 1 a row of ``n_outputs`` probabilities in ``dtype`` may sum.

    Each probability is rounded to within half its dtype's epsilon, so K of them sum to 1
    within about K epsilons: float16 softmax rows miss 1 by up to ~1e-3 (bfloat16 ~1e-2),
    which a float32 tolerance would read as logits. ``floor`` bounds it below.

    Example:
        >>> prob_sum_tolerance(torch.float32, 2), prob_sum_tolerance(torch.float16, 2)
        (0.0001, 0.001953125)
    """
    if dtype is None or not dtype.is_floating_point:
        return floor
    return max(floor, n_outputs * torch.finfo(dtype).eps)


class SlalomOutputWarning(UserWarning):
    """How the engine read the model's outputs was decided from the outputs themselves
    (``output="auto"``): probabilities were detected, or the outputs could be
    probabilities but are read as logits. Pass ``output=`` explicitly to silence it."""


def config_output_kind(model: object) -> str | None:
    """ "multilabel_logits" if a Hugging Face model (or an adapter holding one as ``.model``)
    declares ``problem_type="multi_label_classification"``, else None.

    Such a model returns one independent logit per label (transformers' pipeline applies a
    sigmoid to each), which softmax centring would misread.

    Example:
        >>> from types import SimpleNamespace
        >>> config_output_kind(SimpleNamespace(config=SimpleNamespace(problem_type="multi_label_classification")))
        'multilabel_logits'
    """
    for obj in (model, getattr(model, "model", None)):
        cfg = getattr(obj, "config", None)
        if getattr(cfg, "problem_type", None) == "multi_label_classification":
            return "multilabel_logits"
    return None


def pipeline_output_kind(pipe: object) -> tuple[str, str] | None:
    """What a transformers pipeline's ``function_to_apply`` says its model's logits are.

    The engine reads the logits of the model inside a pipeline, so the function the
    pipeline was told to apply to them is the user's statement of what they mean: "sigmoid"
    on several outputs scores independent labels, "softmax" (or "none") mutually exclusive
    classes, whatever the model's config says. Returns ``(kind, description)``, or None when
    the pipeline was not told (then the config decides, see :func:`config_output_kind`).

    Example:
        >>> from types import SimpleNamespace
        >>> pipe = SimpleNamespace(_postprocess_params={"function_to_apply": "sigmoid"},
        ...                        model=SimpleNamespace(config=SimpleNamespace(num_labels=3)))
        >>> pipeline_output_kind(pipe)
        ('multilabel_logits', "multilabel_logits (pipeline function_to_apply='sigmoid')")
    """
    params = getattr(pipe, "_postprocess_params", None)
    fn = params.get("function_to_apply") if isinstance(params, dict) else None
    if fn is None:
        return None
    fn = str(getattr(fn, "value", fn)).lower()  # transformers' ClassificationFunction enum
    n = getattr(getattr(getattr(pipe, "model", None), "config", None), "num_labels", None)
    if fn == "sigmoid" and isinstance(n, int) and n > 1:
        return "multilabel_logits", "multilabel_logits (pipeline function_to_apply='sigmoid')"
    # One sigmoid output is a binary model's logit; "softmax" and "none" are classes' logits.
    return "logits", f"logits (pipeline function_to_apply={fn!r})"


def declared_output(model: object) -> tuple[str, str] | None:
    """What a model declares its raw outputs to be, ``(kind, description)``, or None.

    A pipeline's ``function_to_apply`` (recorded on the adapter as ``declared_output`` by
    :func:`~slalom_core.as_adapter`, see :func:`pipeline_output_kind`) comes first, then a
    config's ``problem_type`` (:func:`config_output_kind`). ``output="auto"`` follows it.

    Example:
        >>> from types import SimpleNamespace
        >>> declared_output(SimpleNamespace(config=SimpleNamespace(problem_type="multi_label_classification")))
        ('multilabel_logits', 'multilabel_logits (model config)')
    """
    told = getattr(model, "declared_output", None)
    if told is not None:
        return told
    kind = config_output_kind(model)
    return None if kind is None else (kind, f"{kind} (model config)")


def resolve_output(
    output: str,
    raw: torch.Tensor,
    declared: str | tuple[str, str] | None = None,
    dtype: torch.dtype | None = None,
) -> tuple[str, str, str | None]:
    """Decide what the raw outputs ``raw`` (N, K) are; call it once per explain call.

    Args:
        output: one of :data:`OUTPUT_KINDS`.
        raw: the first outputs the caller has (the engine: every full text and the empty
            input), before any fitting.
        declared: what the model itself declares: a kind (read from its config, see
            :func:`config_output_kind`) or ``(kind, description)`` (:func:`declared_output`);
            used by "auto" only.
        dtype: the dtype the model returned ``raw`` in (before any conversion to float64):
            rows of a half-precision softmax sum to 1 only within its rounding
            (:func:`prob_sum_tolerance`). None: float32 or wider.

    Returns:
        ``(kind, description, warning)``: the kind for :class:`OutputLink`; a description
        for the diagnostics, e.g. ``"probs (detected)"``; and the text of a
        :class:`SlalomOutputWarning` to raise, or None.

    Example:
        >>> resolve_output("auto", torch.tensor([[0.2, 0.8], [0.5, 0.5]]))[:2]
        ('probs', 'probs (detected)')
        >>> resolve_output("auto", torch.tensor([[-1.0, 2.0]]))[:2]
        ('logits', 'logits (detected)')
    """
    if output not in OUTPUT_KINDS:
        raise ValueError(f"unknown output kind {output!r}; choose one of {OUTPUT_KINDS}")
    if output != "auto":
        return output, output, None
    if isinstance(declared, tuple):
        return declared[0], declared[1], None
    if declared is not None:
        return declared, f"{declared} (model config)", None
    if raw.ndim != 2 or raw.shape[0] == 0 or not torch.isfinite(raw).all():
        # Nothing to read (the link's own checks report non-finite outputs).
        return "logits", "logits (detected)", None
    n, k = raw.shape
    in_unit = bool(((raw >= 0) & (raw <= 1)).all())
    off_one = float((raw.sum(dim=1) - 1).abs().max())
    if k >= 2 and in_unit and off_one <= prob_sum_tolerance(dtype, k):
        note = (
            f"the model's outputs look like probabilities (all {n} rows seen first are non-negative "
            f"and sum to 1), so SLALOM explains their log-odds; pass output='logits' if they are "
            "logits, or output='probs' to silence this warning"
        )
        return "probs", "probs (detected)", note
    note = None
    if in_unit and bool((raw > 0).all()):
        # Logits that all happen to lie in [0, 1] are possible, probabilities read as logits
        # are wrong units: say which reading was taken and how to change it. An exact 0 is
        # taken as a sign of logits (a sigmoid reaches 0 only below about -100), so that
        # models written as logits [0, F] are not flagged.
        if k == 1:
            maybe = "the probability of the positive class, pass output='probs'"
        elif off_one <= 0.05:
            # Rows that nearly sum to 1 are most likely class probabilities in low precision.
            maybe = (
                f"class probabilities (the rows sum to 1 within {off_one:.1g}), pass output='probs'; "
                "if they are one probability per label (multi-label), output='multilabel_probs'"
            )
        else:
            maybe = "one probability per label (multi-label), pass output='multilabel_probs'"
        note = (
            f"every output seen lies in (0, 1]: they are read as logits; if they are {maybe}; "
            "or output='logits' to silence this warning"
        )
    return "logits", "logits (detected)", note


@dataclass
class OutputLink:
    """How raw outputs become fitting targets.

    Args:
        n_outputs: K, the number of raw outputs per sample.
        output: what the raw outputs are, one of :data:`OUTPUT_KINDS` but "auto" (resolve
            that first with :func:`resolve_output`). "probs" and "multilabel_probs" are
            checked: outputs that are not probabilities raise a ValueError.
        target: None explains class 1 of a binary model (log-odds); with K > 2 classes the
            fit is joint (App. C.1) and ``target=c`` selects class c's column of it, None
            keeps every column. Multi-label: label c's log-odds; None gives every label's
            (for display; a fit needs one label when K > 1). One output per sample: None or
            0, the output itself (see :func:`check_target`).
        class_names: names of the K outputs, if known.
        multiclass: "joint" (default, App. C.1) or "ovr": with K > 2 classes, fit the
            one-vs-rest log-odds ``log p_c / (1 − p_c)`` of ``target`` alone. One-vs-rest
            log-odds of a multi-class SLALOM are not a SLALOM, so this is opt-in. Ignored
            for multi-label outputs, whose labels are independent anyway.

    Example:
        >>> link = OutputLink(2)
        >>> link.transform(torch.tensor([[0.0, 2.0]])).tolist()
        [2.0]
        >>> OutputLink(3, "multilabel_logits", target=2).transform(torch.tensor([[0.5, -1.0, 1.5]])).tolist()
        [1.5]
    """

    n_outputs: int
    output: str = "logits"
    target: int | None = None
    class_names: Sequence[str] | None = None
    multiclass: str = "joint"
    #: the dtype the raw outputs came in (see :func:`resolve_output`); None: float32 or wider.
    dtype: torch.dtype | None = None

    def __post_init__(self) -> None:
        if self.output == "auto":
            raise ValueError(
                "OutputLink needs to know what the outputs are: resolve output='auto' with resolve_output()"
            )
        if self.output not in OUTPUT_KINDS:
            raise ValueError(f"unknown output kind {self.output!r}; choose one of {OUTPUT_KINDS}")
        if self.multiclass not in MULTICLASS_MODES:
            raise ValueError(f"unknown multiclass mode {self.multiclass!r}; choose one of {MULTICLASS_MODES}")
        if self.class_names is not None and len(self.class_names) != self.n_outputs:
            # Names that do not match the outputs would label columns wrongly, or not at all.
            raise ValueError(
                f"the model returns {self.n_outputs} output(s) per example but {len(self.class_names)} "
                f"class names were given ({list(self.class_names)[:5]}): give one name per output"
            )
        self.target = check_target(self.target, self.n_outputs, self.class_names)
        if not self.multilabel and self.multiclass == "ovr" and self.n_outputs > 2 and self.target is None:
            raise ValueError("multiclass='ovr' explains one class against the rest: give target=")

    @property
    def multilabel(self) -> bool:
        """True when every output is an independent label (sigmoid per label)."""
        return self.output.startswith("multilabel")

    @property
    def joint(self) -> bool:
        """True when every class is fitted at once (values get a class axis)."""
        return self.n_outputs > 2 and self.multiclass == "joint" and not self.multilabel

    @property
    def column(self) -> int | None:
        """The class column of a joint fit that ``target`` selects (None: all, or not joint)."""
        return self.target if self.joint else None

    @property
    def fitted_class_names(self) -> list[str] | None:
        """Names of the columns of :meth:`transform` (None for a single log-odds column)."""
        if not self.joint:
            return None
        if self.class_names is not None:
            return list(self.class_names)
        return [str(i) for i in range(self.n_outputs)]

    def _check_probs(self, raw: torch.Tensor) -> None:
        outside = (raw < -_PROB_CHECK_TOL) | (raw > 1 + _PROB_CHECK_TOL)
        if outside.any():
            row = int(outside.any(dim=1).nonzero()[0])
            raise ValueError(
                f"output={self.output!r} but the model's outputs are not probabilities: row {row} is "
                f"{raw[row].tolist()[:8]} (outside [0, 1]); pass output='logits' (or 'auto')"
            )
        if self.output == "probs" and self.n_outputs >= 2:
            off = (raw.sum(dim=1) - 1).abs() > prob_sum_tolerance(self.dtype, self.n_outputs, _PROB_CHECK_TOL)
            if off.any():
                row = int(off.nonzero()[0])
                raise ValueError(
                    f"output='probs' but row {row} of the model's outputs sums to {float(raw[row].sum()):.6g}, "
                    "not 1: class probabilities sum to 1. Independent per-label probabilities are "
                    "output='multilabel_probs'; logits are output='logits'"
                )

    def _as_logits(self, raw: torch.Tensor) -> torch.Tensor:
        if self.output in ("logits", "multilabel_logits"):
            return raw
        self._check_probs(raw)
        p = raw.clamp(_EPS, 1 - _EPS)
        if self.n_outputs == 1 or self.multilabel:
            # One probability per output: each is its own sigmoid, logit(p).
            return torch.log(p) - torch.log1p(-p)
        # Softmax probabilities: log p is the logits up to a per-row constant, which the
        # differences and centring below remove.
        return torch.log(p)

    def per_class(self, raw: torch.Tensor) -> torch.Tensor:
        """(B, K) raw outputs -> the explained output of *every* class, whatever ``target`` says.

        What an explanation of all classes at once is measured in: a binary model gives
        (B, 2) ``[-F, F]``, since the one fitted ``F = log p1/p0`` makes class 0's log-odds
        ``-F``; k > 2 classes give their (B, K) centred logits (the joint fit); a multi-label
        model gives each label's own log-odds (B, K); a single output gives (B,). One-vs-rest
        log-odds of k > 2 classes are one class each, so ``multiclass="ovr"`` has no such
        form.

        Example:
            >>> OutputLink(2).per_class(torch.tensor([[0.0, 2.0]])).tolist()
            [[-2.0, 2.0]]
            >>> OutputLink(3, target=0).per_class(torch.tensor([[1.0, 2.0, 3.0]])).tolist()
            [[-1.0, 0.0, 1.0]]
        """
        if self.multiclass == "ovr" and self.n_outputs > 2 and not self.multilabel:
            raise ValueError("multiclass='ovr' explains one class against the rest: use transform()")
        y = OutputLink(self.n_outputs, self.output, class_names=self.class_names, dtype=self.dtype).transform(raw)
        if self.n_outputs == 2 and not self.multilabel:
            return torch.stack([-y, y], dim=1)
        return y

    def transform(self, raw: torch.Tensor) -> torch.Tensor:
        """(B, K) raw outputs -> (B,) log-odds, or (B, K) centred logits when joint (or
        per-label log-odds of a multi-label model without ``target``)."""
        if raw.ndim != 2 or raw.shape[1] != self.n_outputs:
            raise ValueError(f"expected (B, {self.n_outputs}) outputs, got {tuple(raw.shape)}")
        if not torch.isfinite(raw).all():
            bad = (~torch.isfinite(raw)).any(dim=1).nonzero().flatten().tolist()
            raise FloatingPointError(
                f"the model returned non-finite outputs (NaN or inf) for {len(bad)} sample(s), "
                f"e.g. rows {bad[:5]}; SLALOM cannot fit them"
            )
        return _check_log_odds(self._explained(self._as_logits(raw)), raw)

    def _explained(self, z: torch.Tensor) -> torch.Tensor:
        if self.multilabel:
            # No softmax across labels: each label's log-odds is its own (sigmoid) logit.
            if self.target is not None:
                return z[:, self.target]
            return z[:, 0] if self.n_outputs == 1 else z
        if self.n_outputs == 1:
            return z[:, 0]
        if self.n_outputs == 2:
            y = z[:, 1] - z[:, 0]
            return -y if self.target == 0 else y
        if self.joint:
            return z - z.mean(dim=1, keepdim=True)
        # One-vs-rest log-odds: log p_t - log(1 - p_t), computed stably from logits.
        rest = torch.cat([z[:, : self.target], z[:, self.target + 1 :]], dim=1)
        return z[:, self.target] - torch.logsumexp(rest, dim=1)


def _check_log_odds(y: torch.Tensor, raw: torch.Tensor) -> torch.Tensor:
    """``y`` (the explained outputs of ``raw``), refused when the link overflowed or the
    values are too large for a fit, before any fit fails on them in its linear algebra."""
    ok = torch.isfinite(y) & (y.abs() <= MAX_LOG_ODDS)
    if not bool(ok.all()):
        rows = (~ok).reshape(len(y), -1).any(dim=1).nonzero().flatten().tolist()
        largest = float(raw[rows].abs().max())
        raise FloatingPointError(
            f"the model's outputs are too large to be logits (up to {largest:.3g} in absolute value, "
            f"in {len(rows)} sample(s), e.g. rows {rows[:5]}): their log-odds are not finite or exceed "
            f"{MAX_LOG_ODDS:.0e}, which no fit can use. Return logits or probabilities (output='probs'), "
            "or rescale the scores"
        )
    return y
