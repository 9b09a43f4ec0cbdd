"""Turn what a SHAP user hands over (pipeline, HF model + tokenizer, f(list[str]) + masker)
into the engine's model adapter, the shap Text masker, and the class names.

Why it is here: the inputs are shap's (its pipeline wrapper, its Text masker and tokenizers);
nothing here fits anything, it only picks the right :mod:`slalom_core` adapter.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import shap
import slalom_core as sc
import torch
from shap.utils import safe_isinstance
from slalom_core.models import is_hf_tokenizer, is_pipeline

__all__ = ["Resolved", "resolve"]


@dataclass
class Resolved:
    """What :class:`~shap_slalom.SlalomExplainer` needs from its inputs."""

    adapter: sc.ModelAdapter
    masker: shap.maskers.Text
    class_names: list[str] | None
    #: the tokenizer returns words, not ids (shap's ``SimpleTokenizer``): units get ids from
    #: ``word_vocab`` (an engine WhitespaceTokenizer) and samples are joined with spaces.
    word_vocab: sc.WhitespaceTokenizer | None


def resolve(
    model: object,
    masker: object = None,
    tokenizer: object = None,
    *,
    output_names: Sequence[str] | None = None,
    batch_size: int | None = None,
    device: torch.device | str | None = None,
) -> Resolved:
    """Pick the engine adapter and the Text masker for ``model``.

    Accepted: a transformers text-classification pipeline (or shap's wrapper of one, which
    shap's own ``Explainer.__init__`` creates), a Hugging Face sequence classifier with its
    tokenizer (as ``masker`` or ``tokenizer``), a :class:`slalom_core.ModelAdapter` (one
    on the engine's whitespace words, as a :class:`slalom_core.StringClassifier` has by
    default, gets a Text masker split on whitespace), a
    ``torch.nn.Module`` (as :func:`slalom_core.as_adapter` takes it), or any
    ``f(list[str]) -> scores`` with a ``shap.maskers.Text`` (or a tokenizer) as ``masker``.

    Example:
        >>> r = resolve(pipe)  # doctest: +SKIP
        >>> r.class_names  # doctest: +SKIP
        ['NEGATIVE', 'POSITIVE']
    """
    if safe_isinstance(model, "shap.models.TransformersPipeline"):
        # shap's base __init__ wraps pipelines; SLALOM reads the logits of the model inside.
        model = model.inner_model
    if isinstance(masker, shap.maskers.Text):
        text_masker: shap.maskers.Text | None = masker
        tokenizer = tokenizer if tokenizer is not None else masker.tokenizer
    elif masker is None:
        text_masker = None
    elif is_hf_tokenizer(masker):
        tokenizer = tokenizer if tokenizer is not None else masker
        text_masker = None
    else:
        raise TypeError(
            "SlalomExplainer explains text: give masker=shap.maskers.Text(tokenizer) or a Hugging Face "
            f"tokenizer, not a {type(masker).__name__}"
        )

    word_vocab = None
    engine_model = model
    if callable(model) and not (isinstance(model, (torch.nn.Module, sc.ModelAdapter)) or is_pipeline(model)):
        # The one kind of model the engine leaves to its caller (a plain function could take
        # ids or strings): shap's models take strings, so it is f(list[str]).
        if tokenizer is None:
            raise ValueError(
                "a string model f(list[str]) needs a masker that defines the tokens: "
                "SlalomExplainer(f, shap.maskers.Text(tokenizer))"
            )
        if not is_hf_tokenizer(tokenizer):
            # shap's SimpleTokenizer (regex words, ids are the words themselves): give the
            # words engine ids; samples become the words joined by spaces.
            word_vocab = sc.WhitespaceTokenizer()
        engine_model = sc.StringClassifier(model, word_vocab or tokenizer)
    # One model resolution, the engine's (it copies an adapter: the caller's is left alone).
    adapter = sc.as_adapter(engine_model, tokenizer, batch_size=batch_size, device=device)
    tokenizer = tokenizer if tokenizer is not None else adapter.tokenizer
    if tokenizer is None:
        raise ValueError("no tokenizer found: pass masker=shap.maskers.Text(tokenizer)")
    if text_masker is None and tokenizer is adapter.tokenizer and isinstance(tokenizer, sc.WhitespaceTokenizer):
        # The engine's whitespace words (a StringClassifier's default), which shap's masker
        # cannot wrap: shap's own regex tokenizer split on whitespace gives it the same
        # words, and the adapter's vocabulary gives them their ids.
        text_masker, word_vocab = shap.maskers.Text(r"\s+"), tokenizer
    elif text_masker is None and not is_hf_tokenizer(tokenizer):
        raise TypeError(
            f"the model's tokenizer ({type(tokenizer).__name__}) is not one shap's Text masker can wrap: pass "
            "masker=shap.maskers.Text(...) with a Hugging Face tokenizer or a splitting regex that gives its tokens"
        )
    elif text_masker is None:
        text_masker = shap.maskers.Text(tokenizer)

    names = list(output_names) if output_names is not None else None
    if names is None:
        names = adapter.class_names or getattr(model, "output_names", None)
    if names is not None:
        names = [str(n) for n in names]
        adapter.class_names = names
    return Resolved(adapter=adapter, masker=text_masker, class_names=names, word_vocab=word_vocab)
