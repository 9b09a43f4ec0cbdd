"""SLALOM as a Captum ``PerturbationAttribution``: :class:`SlalomAttribution`.

This module only translates. Captum's arguments (inputs, target, feature_mask,
additional_forward_args, baselines, ...) are checked and laid out per row in
``_arguments``; :func:`slalom_core.explain_rows` perturbs the rows (deletion or
replacement), calls the model and fits; the per-feature scores it returns are spread back
onto the input positions as Captum-shaped tensors in ``_result``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import slalom_core
import torch
from captum.attr import PerturbationAttribution
from slalom_core import SCORE_NAMES
from slalom_core.models import check_tokenizer, input_vocab_size, is_hf_tokenizer, model_max_length, tokenizer_of
from torch import Tensor

from ._arguments import (
    FeatureMaskType,
    InputType,
    check_ids,
    check_length,
    check_options,
    feature_groups,
    is_per_example,
    parse_rows,
)
from ._compat import BaselineType, TargetType, progress
from ._result import SlalomAttributionResult, per_feature, scores_per_position

__all__ = ["SlalomAttribution", "SlalomAttributionResult", "SCORE_NAMES"]


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

        slalom = SlalomAttribution(predict, tokenizer=tokenizer)
        attributions = slalom.attribute(input_ids, baselines=ref_input_ids, target=1,
            additional_forward_args=(token_type_ids, position_ids, attention_mask))

    Example:
        >>> import torch
        >>> class BagOfWords(torch.nn.Module):  # a toy classifier: per-token logits, summed
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.emb = torch.nn.Embedding(100, 2)
        ...     def forward(self, ids):
        ...         return self.emb(ids).sum(dim=1)
        >>> _ = torch.manual_seed(0)
        >>> slalom = SlalomAttribution(BagOfWords())
        >>> ids = torch.tensor([[5, 17, 42, 8]])
        >>> slalom.attribute(ids, target=1, n_samples=200, seed=0).shape
        torch.Size([1, 4])
        >>> every = slalom.attribute(ids, target=1, n_samples=200, seed=0, return_all=True)
        >>> every.keys()
        ['value', 'importance', 'lin', 'removal', 'contribution', 'shapley']
    """

    def __init__(
        self,
        forward_func: Callable[..., Any],
        *,
        tokenizer: Any = None,
        special_token_ids: Sequence[int] | None = None,
        pad_token_id: int | None = None,
        deterministic: bool = True,
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
            deterministic (bool, optional): whether ``forward_func`` gives one input
                        one output. Then each distinct sample is read once per call; give
                        False for a forward whose outputs are random draws (sampling, MC
                        dropout), and every sample is read.
                        Default: True
        """
        PerturbationAttribution.__init__(self, forward_func)
        check_tokenizer(tokenizer)
        if tokenizer is None:
            # An HF model (or its bound forward) loaded from disk carries its tokenizer's
            # location: its special tokens are then known as with tokenizer=.
            tokenizer = tokenizer_of(slalom_core.module_of(forward_func))
        if special_token_ids is None and tokenizer is not None:
            special_token_ids = getattr(tokenizer, "all_special_ids", None)
        if pad_token_id is None and tokenizer is not None:
            pad_token_id = getattr(tokenizer, "pad_token_id", None)
        self.special_token_ids = None if special_token_ids is None else tuple(int(i) for i in special_token_ids)
        self.pad_token_id = pad_token_id
        self.tokenizer = tokenizer
        self.deterministic = bool(deterministic)

    def _vocab_size(self) -> tuple[int, str] | None:
        """How many ids the model reads, where known: its input embedding, else the tokenizer."""
        n = input_vocab_size(slalom_core.module_of(self.forward_func))
        if n is not None:
            return n, "the model's input embedding"
        if is_hf_tokenizer(self.tokenizer):
            try:
                return len(self.tokenizer), "the tokenizer's vocabulary"
            except TypeError:
                return None
        return None

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
        method: str = slalom_core.DEFAULT_METHOD,
        seed: int | None = None,
        perturbation: str = "delete",
        special_token_ids: Sequence[int] | None = None,
        special_token_positions: Sequence[int] | Tensor | None = None,
        output: str = "auto",
        reference: slalom_core.api.ReferenceOption = "empty",
        multiclass: str = "joint",
        gamma: float = 0.0,
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
                        share padded forward batches. A 0/1 second tensor is read
                        as a mask only where its 0s sit on the pad id (or, with no
                        pad id known, on one repeated id at the row's ends); token
                        type ids of a sentence pair follow the kept positions like
                        any other tensor. Every row is explained separately.
            baselines (scalar, Tensor or tuple, optional): with the default
                        ``perturbation="delete"``, positions where the baseline equals
                        the input are special tokens (kept in place, attribution 0),
                        as in Captum's tutorials (``[CLS] [PAD] ... [SEP]``); nothing is
                        replaced. With ``perturbation="replace"``: the values absent
                        features take, as in Lime (a scalar such as the [PAD] id, a
                        tensor broadcastable to the ids, or one entry per input
                        tensor, None leaving that tensor unchanged); every position
                        not named special (``tokenizer``, ``special_token_ids``,
                        ``special_token_positions``) is a feature, even where it
                        equals the baseline, as in Lime.
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
                        position of the ids; batch x features (1 x features for a
                        single example, as Lime).
                        Default: True
            show_progress (bool, optional): Captum's progress bar ("Slalom
                        attribution") over model evaluations.
                        Default: False
            score (str, optional): which score to return: "contribution", "lin",
                        "value", "importance", "removal" or "shapley".
                        Default: "contribution"
            method (str, optional): "hybrid" (the engine's default: short random
                        triples for the values, a few deletions from the full input
                        and the input itself for the importances), "eff-slope"
                        (triples alone; fastest faithful ranking), "eff" (short
                        random sequences, fastest), "fidel"
                        (deletions from the full input) or "ana" (closed form from
                        singles and pairs; exact on a true SLALOM).
                        Default: ``slalom_core.DEFAULT_METHOD`` ("hybrid")
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
                        Default: "auto" (detected from the first outputs)
            reference (str, float or sequence, optional): the point every score is
                        measured from, as in ``slalom_core.explain``: "empty" (the
                        model's output on the row without its features) or a number.
                        Default: "empty"
            multiclass (str, optional): "joint" or "ovr", as in ``slalom_core.explain``.
                        Default: "joint"
            gamma (float, optional): the importances' sum, as in ``slalom_core.explain``.
                        Default: 0.0
            return_all (bool, optional): return a :class:`SlalomAttributionResult`
                        holding every score (each shaped like the ids) and the
                        engine's explanations, instead of one score.
                        Default: False
            **fit_options: the engine's fitting options (``slalom_core.explain``),
                        e.g. ``sample_length=2`` (eff), ``max_delete_fraction=0.5``
                        (fidel), ``prior_sd=0.25``.

        Returns:

            *Tensor* or *tuple[Tensor, ...]* of **attributions**, or a
            :class:`SlalomAttributionResult` with ``return_all=True``:
            - **attributions**: float tensor shaped like the ids, one score per
              position (0 on special tokens and padding). For tuple inputs, a tuple
              shaped like the inputs: the other tensors carry no attribution of
              their own (zeros).

        Examples::

            slalom = SlalomAttribution(forward_func, special_token_ids=[101, 102])
            attr = slalom.attribute(input_ids, target=1, n_samples=500, seed=0)
            every = slalom.attribute(input_ids, target=1, return_all=True)
            every.value, every.importance, every.removal

        (A runnable example is on the class.)
        """
        check_options(score, perturbations_per_eval, return_input_shape, return_all, fit_options)
        rows = parse_rows(
            inputs,
            baselines,
            target,
            additional_forward_args,
            feature_mask,
            replace=perturbation == "replace",
            special_token_ids=self.special_token_ids
            if special_token_ids is None
            else tuple(int(i) for i in special_token_ids),
            special_token_positions=special_token_positions,
            pad_token_id=self.pad_token_id,
        )
        check_length(rows, model_max_length(slalom_core.module_of(self.forward_func), self.tokenizer))
        if perturbation != "replace":  # replaced inputs need not be token ids
            check_ids(rows, self._vocab_size())
        groups = [feature_groups(rows, row) for row in range(rows.n_rows)]
        try:
            explanations = slalom_core.explain_rows(
                self.forward_func,
                rows.tensors,
                groups,
                perturbation=perturbation,
                baselines=rows.bases,
                padding=~rows.valid,
                forward_args=rows.args,
                per_row_args=[is_per_example(a, rows.n_rows) for a in rows.args],
                target=rows.targets,
                # Samples are padded only where the inputs carry an attention mask.
                pad_id=rows.pad_id if rows.attn is not None else None,
                tokenizer=self.tokenizer,
                seed=seed,
                batch_size=perturbations_per_eval,
                deterministic=self.deterministic,
                show_progress=(lambda total: progress(desc=f"{self.get_name()} attribution", total=total))
                if show_progress
                else False,
                method=method,
                n_samples=n_samples,
                output=output,
                reference=reference,
                multiclass=multiclass,
                gamma=gamma,
                **fit_options,
            )
        except slalom_core.NoEmptyInputError as err:
            if bool(rows.specials.any()) or self.tokenizer is not None:
                raise
            # Nothing named the special tokens: a reference= would make [CLS]/[SEP]
            # features and change every score, so the advice is to name them.
            raise ValueError(
                "SlalomAttribution does not know which ids are special tokens (e.g. [CLS], [SEP]), "
                "and the model cannot be scored on an input without content tokens (the reference "
                "point): pass tokenizer=<the model's tokenizer>, or special_token_ids="
            ) from err
        per_position = scores_per_position(explanations, groups, rows, SCORE_NAMES if return_all else (score,))
        if return_all:
            return SlalomAttributionResult(per_position, explanations)
        if not return_input_shape:
            return per_feature(per_position[score], rows.fmask)
        if rows.is_tuple:
            return (
                per_position[score],
                *(torch.zeros(t.shape, dtype=per_position[score].dtype, device=t.device) for t in rows.tensors[1:]),
            )
        return per_position[score]
