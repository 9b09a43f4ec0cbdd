"""A causal LM's log-probability of one next token, as a model the engine explains."""

from __future__ import annotations

import inspect
from collections.abc import Sequence

import slalom_core as sc
import torch

__all__ = ["NextTokenLogProb"]


class NextTokenLogProb(sc.TorchModel):
    """log p(``target_id`` | the kept context tokens) of a causal LM: one output, in nats.

    Samples are the context with tokens deleted, ``prefix_ids`` (a leading BOS) kept in
    place; rows are padded on the right and each is read at its own last token, which no
    padding can reach in a causal model. The empty sample is the prefix alone, or, where
    there is none, the tokenizer's BOS (else EOS) token, as for any :class:`~slalom_core.TorchModel`
    without special tokens: the reference point is the LM's log-probability of the token
    with no context.

    Args:
        model: a Hugging Face causal LM (``model(input_ids=...).logits`` is (B, L, V)).
        target_id: the token whose log-probability is explained.
        tokenizer: the LM's tokenizer (display strings; its BOS/EOS for the empty sample).
        prefix_ids: ids kept before every sample (never features).
        batch_size: samples per forward pass.
        device: where to run the model while explaining.

    Example:
        >>> scorer = NextTokenLogProb(lm, tok(" great")["input_ids"][0], tokenizer=tok)  # doctest: +SKIP
        >>> exp = slalom_core.explain(scorer, tok("the movie was")["input_ids"], output="logits")  # doctest: +SKIP
    """

    def __init__(
        self,
        model: torch.nn.Module,
        target_id: int,
        *,
        tokenizer: object | None = None,
        prefix_ids: Sequence[int] = (),
        batch_size: int = 64,
        device: torch.device | str | None = None,
    ) -> None:
        pad = getattr(tokenizer, "pad_token_id", None)
        if pad is None:
            pad = getattr(tokenizer, "eos_token_id", None)
        super().__init__(
            tokenizer=tokenizer,
            prefix_ids=prefix_ids,
            pad_id=int(pad) if pad is not None else 0,
            batch_size=batch_size,
            device=device,
            module=model,
            class_names=["log p(token)"],
            # A context longer than the LM's positions is refused by name, not by an IndexError
            # inside its position embedding.
            max_length=sc.models.model_max_length(model, tokenizer),
        )
        self.model = model
        self.target_id = int(target_id)
        params = inspect.signature(model.forward).parameters
        self._kwargs = {"use_cache": False} if "use_cache" in params else {}
        self._takes_mask = "attention_mask" in params

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """(B, 1) log p(target) at each right-padded row's last real position."""
        # Right padding: no real position sees a pad; the mask only tells the model so.
        mask = {"attention_mask": attention_mask} if self._takes_mask else {}
        out = self.model(input_ids=input_ids, **mask, **self._kwargs)
        logits = out.logits if hasattr(out, "logits") else out[0]
        last = attention_mask.sum(dim=1) - 1
        rows = logits[torch.arange(len(last), device=logits.device), last]
        return torch.log_softmax(rows.float(), dim=-1)[:, self.target_id : self.target_id + 1]
