"""SLALOM as an inseq feature attribution method: ``inseq.load_model(model, "slalom")``.

inseq (0.7) keeps its methods in a registry of ``FeatureAttribution`` subclasses, keyed by
their ``method_name``; defining :class:`SlalomInseqAttribution` (importing
:mod:`inseq_slalom`) adds "slalom" to ``inseq.list_feature_attribution_methods()``.

At each generation step inseq hands the method the context (prompt and the tokens
generated so far) and the token generated next. The method explains that token's
log-probability with :func:`slalom_core.explain` on :class:`~inseq_slalom.NextTokenLogProb`:
deleting context tokens, measured from the token's log-probability with no context (the
engine's reference point for a causal LM without special tokens). A leading special token
(BOS) stays in every sample and gets 0.

A prompt the model has no positions for (GPT-2's 1024, a model's ``max_position_embeddings``)
is refused by name before inseq generates (the method's hook checks the prompt and
``max_new_tokens``), and so is a context given with ``generated_texts``: the message says
how many tokens fit. Nothing is cut silently: which tokens to drop is the user's choice.
"""

from __future__ import annotations

from copy import deepcopy
from typing import Any

import slalom_core as sc
import torch
from inseq.attr.attribution_decorators import set_hook, unset_hook
from inseq.attr.feat import FeatureAttribution
from inseq.data import (
    CoarseFeatureAttributionStepOutput,
    FeatureAttributionOutput,
    FeatureAttributionSequenceOutput,
)
from inseq.utils import remap_from_filtered

from .scorer import NextTokenLogProb

__all__ = ["SlalomInseqAttribution", "channel", "OPTIONS", "EXTRA_MAPS", "STEP_SCORES"]

#: What ``model.attribute(..., **options)`` passes on to SLALOM, with the defaults used.
OPTIONS: dict[str, Any] = {"score": "contribution", "n_samples": 500, "seed": 0, "fit_method": None, "batch_size": 64}
#: The second and third maps, in each sequence's ``sequence_scores``: (context, generated).
EXTRA_MAPS = ("slalom_value", "slalom_importance")
#: Step scores every SLALOM attribution carries (one number per generated token).
STEP_SCORES = ("slalom_reference", "slalom_logprob", "slalom_residual", "slalom_model_calls")


class SlalomInseqAttribution(FeatureAttribution):
    """SLALOM (value and importance per context token) for each generated token.

    The attribution map (``target_attributions``) holds one SLALOM score per context token
    and generated token: ``score="contribution"`` (default; α_i·v_i, summing with the step's
    reference to the surrogate's log p), or any of :data:`slalom_core.SCORE_NAMES`. Every
    sequence also carries both of SLALOM's channels as maps of the same shape,
    ``sequence_scores["slalom_value"]`` (nats of log p, from the reference point) and
    ``["slalom_importance"]``, and the step scores ``slalom_reference`` (log p of the token
    with no context), ``slalom_logprob`` (with the whole context), ``slalom_residual``
    (what the surrogate misses) and ``slalom_model_calls``.

    Options, passed to ``attribute``: ``score``, ``n_samples`` (default 500), ``seed`` (0),
    ``fit_method`` (the engine's ``method``; default the engine's), ``batch_size`` (64).
    ``attributed_fn`` must stay inseq's default: SLALOM explains log-probabilities.

    Example:
        >>> import inseq, inseq_slalom  # doctest: +SKIP
        >>> model = inseq.load_model(lm, "slalom", tokenizer=tok)  # doctest: +SKIP
        >>> out = model.attribute("the movie was", generation_args={"max_new_tokens": 3}, n_samples=300)  # doctest: +SKIP
        >>> out.show()  # doctest: +SKIP
    """

    method_name = "slalom"

    def __init__(self, attribution_model: Any, **kwargs: Any) -> None:
        super().__init__(attribution_model)
        self._pending: dict[str, torch.Tensor] = {}

    @set_hook
    def hook(self, **kwargs: Any) -> None:
        """inseq's pre-attribution hook: the model's generation checks that the prompt and the
        tokens to generate fit the model's positions (else transformers fails inside the
        position embedding with a bare ``IndexError``); :meth:`unhook` takes the check away."""
        super().hook(**kwargs)
        model = self.attribution_model
        if model is not None and not hasattr(vars(model).get("generate"), "slalom_limit"):
            vars(model)["generate"] = _checked_generate(model, type(model).generate.__get__(model))

    @unset_hook
    def unhook(self, **kwargs: Any) -> None:
        """Give the model its own generation back (inseq calls this when another method replaces this one)."""
        super().unhook(**kwargs)
        if self.attribution_model is not None and hasattr(vars(self.attribution_model).get("generate"), "slalom_limit"):
            del vars(self.attribution_model)["generate"]

    def get_attribution_args(self, **kwargs: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        """Split ``attribute``'s keyword arguments into SLALOM's options and the rest."""
        mine = {k: kwargs[k] for k in OPTIONS if k in kwargs}
        score = mine.get("score", OPTIONS["score"])
        if score not in sc.SCORE_NAMES:
            raise ValueError(f"score must be one of {sorted(sc.SCORE_NAMES)}, got {score!r}")
        return mine, {k: v for k, v in kwargs.items() if k not in OPTIONS}

    def attribute(self, batch: Any, attributed_fn: Any, **kwargs: Any) -> FeatureAttributionOutput:
        """inseq's attribution loop, plus the value and importance maps of every sequence."""
        default = self.attribution_model.get_attributed_fn(None)
        if attributed_fn is not default:
            name = getattr(attributed_fn, "__name__", attributed_fn)
            raise ValueError(
                f"slalom explains the log-probability of each generated token; attributed_fn={name!r} "
                "cannot be used with it (leave attributed_fn unset)"
            )
        keep_steps = kwargs.pop("output_step_attributions", False)
        out = super().attribute(batch, attributed_fn, output_step_attributions=True, **kwargs)
        steps = out.step_attributions
        for name in EXTRA_MAPS:
            copies = [
                CoarseFeatureAttributionStepOutput(
                    target_attributions=s._slalom_maps[name], prefix=s.prefix, target=s.target
                )
                for s in steps
            ]
            maps = FeatureAttributionSequenceOutput.from_step_attributions(
                copies,
                [list(seq.target) for seq in out.sequence_attributions],
                pad_token=self.attribution_model.pad_token,
                attr_pos_end=out.info["attr_pos_end"],
            )
            for seq, extra in zip(out.sequence_attributions, maps):
                seq.sequence_scores = {**(seq.sequence_scores or {}), name: extra.target_attributions}
        if not keep_steps:
            out.step_attributions = None
            out.info["output_step_attributions"] = False
        return out

    def filtered_attribute_step(self, batch: Any, target_ids: torch.Tensor, attributed_fn: Any, *args, **kwargs):
        """inseq's step, with the value and importance maps put back in the batch's rows."""
        out = super().filtered_attribute_step(batch, target_ids, attributed_fn, *args, **kwargs)
        mask = kwargs.get("target_attention_mask", args[0] if args else None)
        maps = {}
        for name, filtered in self._pending.items():
            if mask is not None and filtered.shape[0] < mask.shape[0]:
                filtered = remap_from_filtered((mask.shape[0], *filtered.shape[1:]), mask.cpu(), filtered)
            maps[name] = filtered
        out._slalom_maps = maps
        return out

    def attribute_step(
        self, attribute_fn_main_args: dict[str, Any], attribution_args: dict[str, Any] | None = None
    ) -> CoarseFeatureAttributionStepOutput:
        """One SLALOM fit per sequence of the batch for its next token (see the class)."""
        options = {**OPTIONS, **(attribution_args or {})}
        ids, target_ids, _, mask = attribute_fn_main_args["additional_forward_args"][:4]
        ids, mask, targets = ids.cpu(), mask.cpu(), target_ids.reshape(-1).cpu()
        rows, width = ids.shape
        maps = {name: torch.zeros(rows, width) for name in ("main", *EXTRA_MAPS)}
        steps = {name: torch.full((rows,), float("nan")) for name in STEP_SCORES}
        for b in range(rows):
            fit = self._fit(ids[b][mask[b].bool()].tolist(), int(targets[b]), options)
            if fit is None:
                continue
            exp, lead = fit
            where = mask[b].nonzero()[:, 0][lead:]
            maps["main"][b, where] = torch.as_tensor(exp.scores(options["score"]), dtype=torch.float32)
            maps["slalom_value"][b, where] = torch.as_tensor(exp.value, dtype=torch.float32)
            maps["slalom_importance"][b, where] = torch.as_tensor(exp.importance, dtype=torch.float32)
            steps["slalom_reference"][b] = float(exp.base_value)
            steps["slalom_logprob"][b] = float(exp.model_output)
            steps["slalom_residual"][b] = float(exp.full_text_gap)
            steps["slalom_model_calls"][b] = float(exp.diagnostics.model_evaluations)
        self._pending = {name: maps[name] for name in EXTRA_MAPS}
        return CoarseFeatureAttributionStepOutput(target_attributions=maps["main"], step_scores=steps)

    def _fit(self, context: list[int], target: int, options: dict[str, Any]) -> tuple[sc.SlalomExplanation, int] | None:
        """The engine's explanation of log p(target | context) and the number of leading
        special tokens kept out of the features (None: no token to explain)."""
        tokenizer = self.attribution_model.tokenizer
        special = set(getattr(tokenizer, "all_special_ids", []) or [])
        lead = 0
        while lead < len(context) and context[lead] in special:
            lead += 1
        if lead == len(context):
            return None
        limit = positions(self.attribution_model)
        if limit is not None and len(context) > limit:
            raise ValueError(
                f"a generated token's context has {len(context)} tokens, but the model reads at most {limit} "
                f"positions: shorten the prompt (or the generated_texts given) to fit in {limit} tokens"
            )
        scorer = NextTokenLogProb(
            self.attribution_model.model,
            target,
            tokenizer=tokenizer,
            prefix_ids=context[:lead],
            batch_size=int(options["batch_size"]),
        )
        method = {"method": options["fit_method"]} if options["fit_method"] else {}
        exp = sc.explain(
            scorer,
            context[lead:],
            n_samples=int(options["n_samples"]),
            seed=options["seed"],
            output="logits",
            **method,
        )
        return exp, lead


def positions(attribution_model: Any) -> int | None:
    """The most tokens the inseq model's LM reads (its positions, or its tokenizer's limit), if it says."""
    return sc.models.model_max_length(getattr(attribution_model, "model", None), attribution_model.tokenizer)


def _checked_generate(attribution_model: Any, generate: Any) -> Any:
    """``generate`` refusing, by name, a prompt that leaves no positions for the tokens to generate."""

    def checked(inputs: Any, *args: Any, **kwargs: Any) -> Any:
        limit = positions(attribution_model)
        ids = getattr(inputs, "input_ids", None)
        if limit is not None and ids is not None:
            # The LM reads the prompt and every generated token but the last.
            new = int(kwargs.get("max_new_tokens") or 1)
            if ids.shape[1] + new - 1 > limit:
                raise ValueError(
                    f"the prompt has {ids.shape[1]} tokens and {new} are to be generated, but the model reads at "
                    f"most {limit} positions: shorten the prompt to its last {max(limit - new + 1, 0)} tokens, or "
                    "generate fewer (max_new_tokens)"
                )
        return generate(inputs, *args, **kwargs)

    checked.slalom_limit = True
    return checked


def channel(out: FeatureAttributionOutput, name: str) -> FeatureAttributionOutput:
    """A copy of a SLALOM attribution whose map is one of its channels, "value" or "importance".

    The copy is an ordinary inseq output: ``show()``, ``aggregate(...)`` and saving act on
    that channel as they act on the attribution map (``out.aggregate`` itself merges only
    the attribution map consistently; inseq reads ``sequence_scores`` as another layout).

    Example:
        >>> inseq_slalom.channel(out, "importance").show()  # doctest: +SKIP
    """
    key = f"slalom_{name}"
    if key not in EXTRA_MAPS:
        raise ValueError(f"name must be one of {[k.removeprefix('slalom_') for k in EXTRA_MAPS]}, got {name!r}")
    if any(key not in (seq.sequence_scores or {}) for seq in out.sequence_attributions):
        raise ValueError(f"this output has no {key!r} map: make it with inseq.load_model(model, 'slalom')")
    copy = deepcopy(out)
    for seq in copy.sequence_attributions:
        seq.target_attributions = seq.sequence_scores[key]
        seq.sequence_scores = {k: v for k, v in seq.sequence_scores.items() if k not in EXTRA_MAPS}
    copy.info["slalom_channel"] = name
    return copy
