"""SLALOM in Captum's LLM workflow: :class:`SlalomLLMAttribution`.

``captum.attr.LLMAttribution`` accepts a closed tuple of perturbation methods. This
subclass adds :class:`SlalomAttribution` to it, so that ``TextTokenInput`` /
``TextTemplateInput`` and ``LLMAttributionResult`` (``plot_seq_attr`` ...) work with
SLALOM on a causal language model, the only kind of model ``LLMAttribution`` supports.

How Captum drives the method (captum 0.9, ``LLMAttribution.attribute``): it calls
``attr_method.attribute(ones(1, n_features), additional_forward_args=(inp, target_tokens,
...), **kwargs)``, and its forward function takes a 0/1 tensor of present features (one
perturbation per call) and returns the target's log-probability. SLALOM's samples are
sets of present features there, which is :class:`SlalomAttribution`'s replacement mode
with baseline 0; this class sets that up.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from captum.attr import LLMAttribution, LLMAttributionResult, TextTokenInput
from torch import Tensor

from .attribution import SlalomAttribution

__all__ = ["SlalomLLMAttribution"]


class _TokenDeletionView:
    """A ``TextTokenInput`` whose absent tokens are deleted instead of replaced.

    ``TextTokenInput.to_model_input`` overwrites absent tokens with its baseline id (0 by
    default); SLALOM (and Captum's own text-LIME tutorial) remove them. Skipped tokens
    (``skip_tokens``, e.g. a BOS token) are never features and always stay.
    """

    def __init__(self, inp: TextTokenInput) -> None:
        self._inp = inp

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inp, name)

    def to_model_input(self, perturbed_tensor: Tensor | None = None) -> Tensor:
        if perturbed_tensor is None:
            return self._inp.to_model_input()
        if perturbed_tensor.shape[0] != 1:
            raise ValueError(
                "deleting tokens gives inputs of different lengths: use one perturbation per "
                "forward (perturbations_per_eval=1), or delete_tokens=False"
            )
        full = self._inp.inp_tensor
        keep = torch.ones(full.shape[1], dtype=torch.bool)
        # Captum's convention: a feature is present where the tensor equals 1.
        present = (perturbed_tensor[0] == 1).cpu()
        if self._inp.itp_mask is None:
            keep = present
        else:
            keep[self._inp.itp_mask[0].cpu()] = present
        if not bool(keep.any()):
            # Nothing left for the model to read: fall back to Captum's replacement.
            return self._inp.to_model_input(perturbed_tensor)
        return full[:, keep].to(perturbed_tensor.device)


class SlalomLLMAttribution(LLMAttribution):
    """``captum.attr.LLMAttribution`` that also accepts :class:`SlalomAttribution`.

    Explains the (log-)probability that a causal LM gives to a target continuation, with
    SLALOM's value/importance surrogate over the prompt's features. Everything else is
    Captum's: inputs (``TextTokenInput``, ``TextTemplateInput``), target generation,
    ``num_trials`` and the :class:`LLMAttributionResult`.

    Removal: with ``delete_tokens=True`` (default), absent tokens of a ``TextTokenInput``
    are deleted from the prompt, which is what SLALOM models; ``False`` keeps Captum's
    replacement by the input's baseline id. This applies to every method wrapped here
    (Lime, KernelShap, ...), so comparisons share one removal semantics. A
    ``TextTemplateInput`` removes a segment by substituting its own baseline (``""`` by
    default, i.e. deletion).

    Example:
        >>> model = GPT2LMHeadModel(GPT2Config(...))  # doctest: +SKIP
        >>> llm_attr = SlalomLLMAttribution(SlalomAttribution(model), tokenizer)  # doctest: +SKIP
        >>> res = llm_attr.attribute(TextTokenInput("the movie was great", tokenizer),  # doctest: +SKIP
        ...                          target="a fine film", n_samples=200, seed=0)
        >>> fig, ax = res.plot_seq_attr()  # doctest: +SKIP
    """

    SUPPORTED_METHODS = (*LLMAttribution.SUPPORTED_METHODS, SlalomAttribution)

    def __init__(
        self,
        attr_method: Any,
        tokenizer: Any,
        attr_target: str = "log_prob",
        delete_tokens: bool = True,
    ) -> None:
        """
        Args:
            attr_method: a :class:`SlalomAttribution` (or any method
                ``LLMAttribution`` accepts) built on the causal LM.
            tokenizer: the LM's tokenizer.
            attr_target: "log_prob" (default) or "prob" of the target; SLALOM fits
                this number as its output.
            delete_tokens: delete absent ``TextTokenInput`` tokens (default) instead of
                replacing them by the input's baseline id.
        """
        super().__init__(attr_method, tokenizer, attr_target)
        self.delete_tokens = bool(delete_tokens)

    def _forward_func(  # type: ignore[override]
        self,
        perturbed_tensor: Tensor | None,
        inp: Any,
        target_tokens: Tensor,
        use_cached_outputs: bool = False,
        _inspect_forward: Callable | None = None,
        forward_in_tokens: bool = True,
    ) -> Tensor:
        if self.delete_tokens and perturbed_tensor is not None and isinstance(inp, TextTokenInput):
            inp = _TokenDeletionView(inp)
        return super()._forward_func(
            perturbed_tensor, inp, target_tokens, use_cached_outputs, _inspect_forward, forward_in_tokens
        )

    def attribute(  # type: ignore[override]
        self,
        inp: Any,
        target: str | Tensor | None = None,
        num_trials: int = 1,
        gen_args: dict[str, Any] | None = None,
        use_cached_outputs: bool = False,
        _inspect_forward: Callable | None = None,
        forward_in_tokens: bool = True,
        **kwargs: Any,
    ) -> LLMAttributionResult:
        """Captum's ``LLMAttribution.attribute``; ``**kwargs`` go to the method's ``attribute``.

        For SLALOM, useful kwargs are ``n_samples``, ``method``, ``seed``, ``score``
        (which score becomes ``seq_attr``) and ``show_progress``. The score defaults to
        "removal" here, not "lin": SLALOM fits log p(target), which unlike log-odds has no
        natural zero, and lin = v·exp(s) is not invariant to a shift of all values, while
        removal (the predicted change of log p(target) when the feature is deleted) is.

        ``use_cached_outputs`` defaults to False (Captum: True): Captum's cached
        token-by-token decoding can return target log-probabilities that differ from a
        plain forward pass of the same text (seen with captum 0.9 and transformers 5), while
        the uncached and the one-pass (``forward_in_tokens=False``) paths agree with it.
        ``baselines`` is fixed by the workflow (absent = 0 in Captum's presence tensor)
        and ``perturbations_per_eval`` defaults to 1 (Captum's LLM forward takes one
        perturbation at a time).

        Example:
            >>> res = llm_attr.attribute(inp, target="good", n_samples=300, score="value")  # doctest: +SKIP
            >>> res.seq_attr_dict  # doctest: +SKIP
        """
        if isinstance(self.attr_method, SlalomAttribution):
            _check_not_empty(inp, target, self.tokenizer)
            given = kwargs.pop("baselines", None)
            if given is not None and not (isinstance(given, (int, float)) and given == 0):
                raise ValueError(
                    "in the LLM workflow an absent feature is 0 in Captum's presence tensor; what "
                    "absence means for the text is set by the input (its baselines) and delete_tokens"
                )
            if kwargs.get("return_all"):
                raise ValueError("return_all is not available through LLMAttribution; call SlalomAttribution directly")
            if kwargs.get("special_token_ids") or kwargs.get("special_token_positions") is not None:
                raise ValueError(
                    "in the LLM workflow, leave tokens out of the features with TextTokenInput(skip_tokens=...)"
                )
            kwargs["baselines"] = 0
            kwargs["perturbation"] = "replace"
            # A log-probability has no natural zero (log-odds have: even odds), so v·exp(s)
            # ("lin") mixes an arbitrary offset into the ranking; "removal" - the predicted
            # change of log p(target) when a feature is deleted - does not, and is what
            # FeatureAblation measures directly.
            kwargs.setdefault("score", "removal")
            # A prompt with every feature deleted may have no token left to condition on,
            # so there is no empty-input reference: values are measured from log p = 0.
            # "removal" does not depend on that choice.
            kwargs.setdefault("reference", 0.0)
            # The presence tensor holds 1.0s, not token ids: no id-based special tokens.
            kwargs["special_token_ids"] = ()
            kwargs.setdefault("perturbations_per_eval", 1)
        return super().attribute(
            inp,
            target=target,
            num_trials=num_trials,
            gen_args=gen_args,
            use_cached_outputs=use_cached_outputs,
            _inspect_forward=_inspect_forward,
            forward_in_tokens=forward_in_tokens,
            **kwargs,
        )


def _check_not_empty(inp: Any, target: str | Tensor | None, tokenizer: Any) -> None:
    """An empty prompt has nothing to explain and an empty target no log-probability: say so
    before any model call (Captum's own failures there are shape errors deep in the model)."""
    if isinstance(target, str) and not tokenizer(target, add_special_tokens=False)["input_ids"]:
        raise ValueError(f"the target is empty ({target!r}): give the text whose log-probability is explained")
    if isinstance(target, Tensor) and target.numel() == 0:
        raise ValueError("the target is empty (no token ids): give the text whose log-probability is explained")
    if getattr(inp, "n_itp_features", 1) == 0:
        raise ValueError("the prompt is empty: it has no token to explain")
