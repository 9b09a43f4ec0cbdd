"""The texts and the model as every method of the benchmark sees them: :class:`Instance`
(one selected text) and :class:`BenchContext` (the model, the explained output, the
metric's probabilities and one call counter shared by all methods).

The runner (:mod:`slalom_core.experiments.bench`) and the baselines
(:mod:`slalom_core.experiments.baselines`) both take these; neither imports the other's
internals.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..link import OutputLink
from ..models import HFClassifier, score_matrix
from .bench_config import BenchConfig

__all__ = ["Scores", "Instance", "BenchContext"]

#: ``{score name: one value per token position}``, what every explainer returns.
Scores = dict[str, np.ndarray]


@dataclass
class Instance:
    """One selected text and everything the metrics need about it.

    Attributes:
        index: position in the benchmark (0..N-1).
        id: the row's ``id`` field, else its line number.
        text: the text.
        label: the gold label (None if absent).
        token_ids: the tokenizer's ids without special tokens: every method explains these
            positions, so scores line up.
        tokens: token strings.
        target: the class predicted on the full text (the class being explained).
        full_probability: the model's probability of ``target`` on the full text.
        attention: per-token human-attention labels (NaN = unmapped), or None.

    Example:
        >>> Instance(index=0, id="r1", text="a fine film", label=1, token_ids=[1037, 2986, 2143],
        ...          tokens=["a", "fine", "film"]).n_tokens
        3
    """

    index: int
    id: Any
    text: str
    label: int | None
    token_ids: list[int]
    tokens: list[str]
    target: int = 0
    full_probability: float = float("nan")
    attention: np.ndarray | None = None

    @property
    def n_tokens(self) -> int:
        return len(self.token_ids)


def _n_classes(adapter: HFClassifier) -> int:
    return int(adapter.score([[]] if adapter.prefix_ids or adapter.suffix_ids else [[adapter.pad_id]]).shape[1])


class BenchContext:
    """The model seen by every method, with one call counter shared by all of them.

    Args:
        config: the run's configuration (batch sizes, removal strategy, budgets).
        model: the classifier, in eval mode.
        tokenizer: its tokenizer (the mask / pad id for ``removal="mask"`` / ``"pad"``).

    Example:
        >>> ctx = BenchContext(BenchConfig(removal="pad"), model, tok)  # doctest: +SKIP
        >>> ctx.strategy, ctx.replacement_id == tok.pad_token_id  # doctest: +SKIP
        ('replace', True)
    """

    def __init__(self, config: BenchConfig, model: torch.nn.Module, tokenizer: object) -> None:
        self.config = config
        self.model = model
        self.tokenizer = tokenizer
        self.adapter = HFClassifier(model, tokenizer, batch_size=config.batch_size)
        self.slalom_adapter = HFClassifier(model, tokenizer, batch_size=config.slalom_batch_size or config.batch_size)
        self.n_classes = _n_classes(self.adapter)
        self.evaluations = 0  # sequences sent to the model by the method being timed
        if config.removal == "delete":
            self.strategy, self.replacement_id = "delete", None
        else:
            attr = "mask_token_id" if config.removal == "mask" else "pad_token_id"
            rid = getattr(tokenizer, attr, None)
            if rid is None:
                raise ValueError(f"removal={config.removal!r} but the tokenizer has no {attr}")
            self.strategy, self.replacement_id = "replace", int(rid)

    @property
    def binary(self) -> bool:
        return self.n_classes <= 2

    @property
    def device(self) -> torch.device:
        params = list(self.model.parameters())
        return params[0].device if params else torch.device("cpu")

    # The explained output and the metric's probability, from raw outputs -------------
    def explained_from_logits(self, logits: torch.Tensor, target: int) -> torch.Tensor:
        """log-odds of class 1 (binary) or one-vs-rest log-odds of ``target`` (k > 2)."""
        # The engine's link, so that every baseline explains the number SLALOM fits; a
        # binary model's target only flips the sign afterwards (see ``sign``).
        link = OutputLink(self.n_classes, "logits", target=None if self.binary else target, multiclass="ovr")
        return link.transform(logits)

    def probabilities(self, logits: torch.Tensor) -> torch.Tensor:
        if self.n_classes == 1:
            p1 = torch.sigmoid(logits[:, 0])
            return torch.stack([1 - p1, p1], dim=1)
        return torch.softmax(logits, dim=1)

    def explained_class(self, inst: Instance) -> int | None:
        """SLALOM's ``target``: None (class 1 log-odds) for binary models."""
        return None if self.binary else inst.target

    def sign(self, inst: Instance) -> float:
        """+1 if the explained output points to the predicted class, else -1."""
        return -1.0 if self.binary and inst.target == 0 else 1.0

    def _rows(self, sequences: Sequence[Sequence[int]]) -> list[list[int]]:
        if self.adapter.prefix_ids or self.adapter.suffix_ids:
            return [list(s) for s in sequences]
        # A model without special tokens cannot read an empty text: give it one pad.
        return [list(s) if len(s) else [self.adapter.pad_id] for s in sequences]

    def log_odds(self, sequences: Sequence[Sequence[int]], inst: Instance) -> np.ndarray:
        """The explained output for token-id sequences (no special tokens); counted."""
        self.evaluations += len(sequences)
        raw = self.adapter.score(self._rows(sequences))
        return self.explained_from_logits(raw, self.explained_class(inst) or 0).numpy()

    def metric_predictor(self) -> Callable[[list[list[int]]], np.ndarray]:
        """``predict`` for the evaluation functions: P(target) per sequence, memoised.

        Many methods rank alike on a text, so their perturbed sequences repeat: the cache
        makes the metrics cheaper without changing them. Not counted as method calls.
        """
        cache: dict[tuple[int, ...], np.ndarray] = {}

        def probs(seqs: list[list[int]]) -> np.ndarray:
            missing = [s for s in dict.fromkeys(tuple(s) for s in seqs) if s not in cache]
            if missing:
                p = self.probabilities(self.adapter.score(self._rows(missing))).numpy()
                for s, row in zip(missing, p):
                    cache[s] = row
            return np.stack([cache[tuple(s)] for s in seqs])

        return probs

    def forward_logits(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Differentiable logits for full sequences (special tokens included); counted."""
        self.evaluations += int(input_ids.shape[0])
        return score_matrix(self.adapter.forward(input_ids, attention_mask), int(input_ids.shape[0]))

    def framed(self, ids: Sequence[int]) -> tuple[torch.Tensor, int]:
        """(1, L) tensor with special tokens, and the offset of the first text token."""
        pre, suf = list(self.adapter.prefix_ids), list(self.adapter.suffix_ids)
        return torch.tensor([pre + list(ids) + suf], dtype=torch.long, device=self.device), len(pre)
