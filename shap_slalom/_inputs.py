"""Turn what a SHAP user hands over (pipeline, HF model + tokenizer, f(list[str]) + masker)
into the engine's model adapter, the shap Text masker, and the class names.

Why it is here: the inputs are shap's (its pipeline wrapper, its Text masker and tokenizers);
nothing here fits anything, it only picks the right :mod:`slalom_core` adapter.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import shap
import slalom_core as sc
import torch
from shap.utils import safe_isinstance
from slalom_core.link import config_output_kind

__all__ = ["Resolved", "resolve", "to_text_list"]


@dataclass
class Resolved:
    """What :class:`~shap_slalom.SlalomExplainer` needs from its inputs."""

    adapter: sc.ModelAdapter
    masker: shap.maskers.Text
    class_names: list[str] | None
    #: the tokenizer returns words, not ids (shap's ``SimpleTokenizer``): units get ids from
    #: ``word_vocab`` (an engine WhitespaceTokenizer) and samples are joined with spaces.
    word_vocab: sc.WhitespaceTokenizer | None
    #: what the model declares its outputs to be ("multilabel_logits" for a multi-label
    #: model or a pipeline applying a sigmoid per label), with where that was read; None
    #: when it declares nothing (then ``output="auto"`` decides from the outputs).
    declared_output: tuple[str, str] | None = None


def _is_pipeline(obj: object) -> bool:
    return safe_isinstance(obj, "transformers.pipelines.Pipeline") or safe_isinstance(
        obj, "transformers.pipelines.base.Pipeline"
    )


def _is_hf_tokenizer(obj: object) -> bool:
    return safe_isinstance(
        obj, ["transformers.PreTrainedTokenizer", "transformers.tokenization_utils_base.PreTrainedTokenizerBase"]
    ) or (callable(obj) and hasattr(obj, "convert_ids_to_tokens") and hasattr(obj, "decode"))


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
    tokenizer (as ``masker`` or ``tokenizer``), a :class:`slalom_core.ModelAdapter`, a
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
    elif _is_hf_tokenizer(masker):
        tokenizer = tokenizer if tokenizer is not None else masker
        text_masker = None
    else:
        raise TypeError(
            "SlalomExplainer explains text: give masker=shap.maskers.Text(tokenizer) or a Hugging Face "
            f"tokenizer, not a {type(masker).__name__}"
        )

    word_vocab = None
    declared = _pipeline_output(model) if _is_pipeline(model) else None
    engine_model = model
    if callable(model) and not (isinstance(model, (torch.nn.Module, sc.ModelAdapter)) or _is_pipeline(model)):
        # The one kind of model the engine leaves to its caller (a plain function could take
        # ids or strings): shap's models take strings, so it is f(list[str]).
        if tokenizer is None:
            raise ValueError(
                "a string model f(list[str]) needs a masker that defines the tokens: "
                "SlalomExplainer(f, shap.maskers.Text(tokenizer))"
            )
        if not _is_hf_tokenizer(tokenizer):
            # shap's SimpleTokenizer (regex words, ids are the words themselves): give the
            # words engine ids; samples become the words joined by spaces.
            word_vocab = sc.WhitespaceTokenizer()
        engine_model = sc.StringClassifier(_list_input(model), word_vocab or tokenizer)
    # One model resolution, the engine's (it copies an adapter: the caller's is left alone).
    adapter = sc.as_adapter(engine_model, tokenizer, batch_size=batch_size, device=device)
    tokenizer = tokenizer if tokenizer is not None else adapter.tokenizer
    if tokenizer is None:
        raise ValueError("no tokenizer found: pass masker=shap.maskers.Text(tokenizer)")
    if text_masker is None:
        text_masker = shap.maskers.Text(tokenizer)

    names = list(output_names) if output_names is not None else None
    if names is None:
        names = adapter.class_names or getattr(model, "output_names", None)
    if names is not None:
        names = [str(n) for n in names]
        adapter.class_names = names
    if declared is None and config_output_kind(adapter) is not None:
        declared = ("multilabel_logits", "multilabel_logits (model config)")
    return Resolved(
        adapter=adapter, masker=text_masker, class_names=names, word_vocab=word_vocab, declared_output=declared
    )


def _pipeline_output(pipe: object) -> tuple[str, str] | None:
    """A pipeline told to apply a sigmoid to several outputs scores independent labels.

    SLALOM reads the pipeline's model logits, so its ``function_to_apply`` says what those
    logits mean: "sigmoid" (per label), "softmax" (classes); default: the model's config.
    """
    fn = getattr(pipe, "_postprocess_params", {}).get("function_to_apply")
    if fn is None:
        return None
    fn = str(getattr(fn, "value", fn)).lower()
    n = getattr(getattr(getattr(pipe, "model", None), "config", None), "num_labels", None)
    if fn == "sigmoid" and isinstance(n, int) and n > 1:
        return ("multilabel_logits", "multilabel_logits (pipeline function_to_apply='sigmoid')")
    # "softmax" or "none": the logits of mutually exclusive classes, whatever the config says.
    return ("logits", f"logits (pipeline function_to_apply={fn!r})")


def _list_input(f):
    """shap maskers hand models numpy arrays of strings; string models get plain lists."""

    def call(texts: list[str]) -> object:
        return f(list(texts))

    return call


def to_text_list(x: object) -> list[str]:
    """A string, or an iterable of strings (list, array, Series, ``{"text": ...}``, a
    DataFrame with one column of texts), as a list.

    Example:
        >>> to_text_list(pd.DataFrame({"review": ["great", "dull"]}))  # doctest: +SKIP
        ['great', 'dull']
    """
    if isinstance(x, dict) and "text" in x:
        x = x["text"]
    if isinstance(x, str):
        return [x]
    if safe_isinstance(x, "pandas.core.frame.DataFrame"):
        # Iterating a DataFrame yields its column names, not its texts.
        if x.shape[1] != 1:
            raise ValueError(
                f"a DataFrame to explain must have exactly one column of texts, this one has "
                f"{x.shape[1]} ({list(x.columns)[:5]}); pass the column, e.g. df['text']"
            )
        x = x.iloc[:, 0].tolist()
    if isinstance(x, np.ndarray):
        if x.ndim > 1 and x.size != x.shape[0]:
            raise ValueError(f"expected one text per row, got an array of shape {x.shape}")
        x = x.reshape(-1).tolist()
    try:
        texts = list(x)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"explain a string or a list of strings, not a {type(x).__name__}") from None
    for t in texts:
        if not isinstance(t, str):
            raise TypeError(f"every input must be a string, got a {type(t).__name__}")
    return texts
