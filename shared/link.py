"""From raw model outputs to the log-odds SLALOM fits.

SLALOM models log-odds (Sec. 5.1): ``F = log p(y=1|t) / p(y=0|t)`` for a binary model and
centred logits for a multi-class model (App. C.1: one importance per token shared by all
classes, one value per class, values summing to zero over classes). :class:`OutputLink`
converts a model's raw outputs — one logit, two logits, k logits, or probabilities — into
that form.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

__all__ = ["OutputLink", "OUTPUT_KINDS", "MULTICLASS_MODES"]

OUTPUT_KINDS = ("logits", "probs")
MULTICLASS_MODES = ("joint", "ovr")
_EPS = 1e-12


@dataclass
class OutputLink:
    """How raw outputs become fitting targets.

    Args:
        n_outputs: K, the number of raw outputs per sample.
        output: "logits" (default) or "probs" (converted to logits first).
        target: None explains class 1 of a binary model (log-odds); with K > 2 classes the
            fit is joint (App. C.1) and ``target=c`` selects class c's column of it, None
            keeps every column.
        class_names: names of the K outputs, if known.
        multiclass: "joint" (default, App. C.1) or "ovr": with K > 2 classes, fit the
            one-vs-rest log-odds ``log p_c / (1 − p_c)`` of ``target`` alone. One-vs-rest
            log-odds of a multi-class SLALOM are not a SLALOM, so this is opt-in.

    Example:
        >>> link = OutputLink(2)
        >>> link.transform(torch.tensor([[0.0, 2.0]])).tolist()
        [2.0]
    """

    n_outputs: int
    output: str = "logits"
    target: int | None = None
    class_names: Sequence[str] | None = None
    multiclass: str = "joint"

    def __post_init__(self) -> None:
        if self.output not in OUTPUT_KINDS:
            raise ValueError(f"unknown output kind {self.output!r}; choose one of {OUTPUT_KINDS}")
        if self.multiclass not in MULTICLASS_MODES:
            raise ValueError(f"unknown multiclass mode {self.multiclass!r}; choose one of {MULTICLASS_MODES}")
        n_classes = max(self.n_outputs, 2)  # one logit still means two classes
        if self.target is not None:
            if isinstance(self.target, bool) or not isinstance(self.target, int):
                raise TypeError(f"target must be an int class index or None, got {self.target!r}")
            if not 0 <= self.target < n_classes:
                raise ValueError(f"target {self.target} is not a class of this model (it has {n_classes} classes)")
        if self.multiclass == "ovr" and self.n_outputs > 2 and self.target is None:
            raise ValueError("multiclass='ovr' explains one class against the rest: give target=")

    @property
    def joint(self) -> bool:
        """True when every class is fitted at once (values get a class axis)."""
        return self.n_outputs > 2 and self.multiclass == "joint"

    @property
    def column(self) -> int | None:
        """The class column of a joint fit that ``target`` selects (None: all, or not joint)."""
        return self.target if self.joint else None

    @property
    def fitted_class_names(self) -> list[str] | None:
        """Names of the columns of :meth:`transform` (None for a single log-odds column)."""
        if not self.joint:
            return None
        if self.class_names is not None and len(self.class_names) == self.n_outputs:
            return list(self.class_names)
        return [str(i) for i in range(self.n_outputs)]

    def _as_logits(self, raw: torch.Tensor) -> torch.Tensor:
        if self.output == "logits":
            return raw
        p = raw.clamp(_EPS, 1 - _EPS)
        if self.n_outputs == 1:
            return torch.log(p) - torch.log1p(-p)
        return torch.log(p)

    def transform(self, raw: torch.Tensor) -> torch.Tensor:
        """(B, K) raw outputs -> (B,) log-odds, or (B, K) centred logits when joint."""
        if raw.ndim != 2 or raw.shape[1] != self.n_outputs:
            raise ValueError(f"expected (B, {self.n_outputs}) outputs, got {tuple(raw.shape)}")
        if not torch.isfinite(raw).all():
            bad = (~torch.isfinite(raw)).any(dim=1).nonzero().flatten().tolist()
            raise FloatingPointError(
                f"the model returned non-finite outputs (NaN or inf) for {len(bad)} sample(s), "
                f"e.g. rows {bad[:5]}; SLALOM cannot fit them"
            )
        z = self._as_logits(raw)
        if self.n_outputs == 1:
            y = z[:, 0]
            return -y if self.target == 0 else y
        if self.n_outputs == 2:
            y = z[:, 1] - z[:, 0]
            return -y if self.target == 0 else y
        if self.joint:
            return z - z.mean(dim=1, keepdim=True)
        # One-vs-rest log-odds: log p_t - log(1 - p_t), computed stably from logits.
        rest = torch.cat([z[:, : self.target], z[:, self.target + 1 :]], dim=1)
        return z[:, self.target] - torch.logsumexp(rest, dim=1)
