"""The classifiers of the synthetic experiments: 1–2 layer BERT / DistilBERT / GPT-2 built
from configs (or a ReLU network on word counts), trained on fresh synthetic samples and
cached in memory, with the helpers that repeat a training over seeds.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
import torch

from ..synthetic import (
    SlalomVocabulary,
    SyntheticDataset,
    counts_matrix,
    make_word_tokenizer,
    sample_linear_dataset,
    sample_slalom_dataset,
)

__all__ = [
    "ARCHITECTURES",
    "ARCH_LABELS",
    "ModelSpec",
    "SyntheticClassifier",
    "Sampler",
    "build_classifier",
    "small_classifier",
    "train_classifier",
    "torch_threads",
    "linear_sampler",
    "slalom_sampler",
    "training_kwargs",
    "trained_runs",
]

ARCHITECTURES: tuple[str, ...] = ("bert", "distilbert", "gpt2")
ARCH_LABELS = {"bert": "BERT", "distilbert": "DistilBERT", "gpt2": "GPT-2", "mlp": "ReLU net (counts)"}


@dataclass(frozen=True)
class ModelSpec:
    """Architecture of a small classifier trained from scratch.

    ``arch`` is one of ``"bert"``, ``"distilbert"``, ``"gpt2"`` or ``"mlp"`` (a ReLU network
    on word counts, the fully connected baseline of Fig. 3a). ``max_len`` is the longest
    word sequence the model must accept; special tokens come on top.
    """

    arch: str = "bert"
    n_layers: int = 1
    hidden_size: int = 64
    n_heads: int = 4
    intermediate_size: int = 128
    dropout: float = 0.1
    max_len: int = 30


class _CountMLP(torch.nn.Module):
    """ReLU network on the (V,) count vector of a sequence → 2 logits."""

    def __init__(self, n_words: int, width: int, n_layers: int) -> None:
        super().__init__()
        layers: list[torch.nn.Module] = []
        d = n_words
        for _ in range(max(1, n_layers)):
            layers += [torch.nn.Linear(d, width), torch.nn.ReLU()]
            d = width
        layers.append(torch.nn.Linear(d, 2))
        self.net = torch.nn.Sequential(*layers)

    def forward(self, counts: torch.Tensor) -> torch.Tensor:
        return self.net(counts)


def build_classifier(spec: ModelSpec, words: Sequence[str], *, seed: int = 0):
    """A freshly initialised classifier and its word-level tokenizer.

    Returns:
        ``(model, tokenizer)``; the tokenizer adds ``[CLS] … [SEP]`` for BERT and
        DistilBERT and nothing for GPT-2 (which classifies from the last non-pad token and
        gets ``[PAD]`` as pad token). For ``"mlp"`` the tokenizer is ``None``.
    """
    torch.manual_seed(seed)
    words = tuple(words)
    if spec.arch == "mlp":
        return _CountMLP(len(words), spec.hidden_size, spec.n_layers), None
    tok = make_word_tokenizer(words, add_cls_sep=spec.arch != "gpt2")
    gpt_tokens = dict(bos_token_id=None, eos_token_id=None) if spec.arch == "gpt2" else {}
    model = small_classifier(
        spec.arch,
        vocab_size=len(tok),
        hidden_size=spec.hidden_size,
        n_layers=spec.n_layers,
        n_heads=spec.n_heads,
        intermediate_size=spec.intermediate_size,
        max_positions=spec.max_len + 2,
        dropout=spec.dropout,
        pad_token_id=tok.pad_token_id,
        num_labels=2,
        **gpt_tokens,
    )
    return model, tok


def small_classifier(
    arch: str,
    *,
    vocab_size: int,
    hidden_size: int,
    n_layers: int,
    n_heads: int,
    intermediate_size: int,
    max_positions: int,
    dropout: float = 0.1,
    **config_kwargs: object,
) -> torch.nn.Module:
    """A randomly initialised small BERT / DistilBERT / GPT-2 sequence classifier.

    One place that maps the shared size parameters onto each family's config names (used
    by the synthetic experiments and by :mod:`slalom_core.experiments.train_small_models`). Extra keyword
    arguments (``num_labels``, ``pad_token_id``, ``id2label``...) go to the config.

    Example:
        >>> m = small_classifier("bert", vocab_size=50, hidden_size=16, n_layers=1, n_heads=2,
        ...                      intermediate_size=32, max_positions=32, num_labels=2)
        >>> type(m).__name__
        'BertForSequenceClassification'
    """
    from transformers import (
        BertConfig,
        BertForSequenceClassification,
        DistilBertConfig,
        DistilBertForSequenceClassification,
        GPT2Config,
        GPT2ForSequenceClassification,
    )

    if arch == "bert":
        cfg = BertConfig(
            vocab_size=vocab_size,
            hidden_size=hidden_size,
            num_hidden_layers=n_layers,
            num_attention_heads=n_heads,
            intermediate_size=intermediate_size,
            hidden_dropout_prob=dropout,
            attention_probs_dropout_prob=dropout,
            max_position_embeddings=max_positions,
            **config_kwargs,
        )
        return BertForSequenceClassification(cfg)
    if arch == "distilbert":
        cfg = DistilBertConfig(
            vocab_size=vocab_size,
            dim=hidden_size,
            n_layers=n_layers,
            n_heads=n_heads,
            hidden_dim=intermediate_size,
            dropout=dropout,
            attention_dropout=dropout,
            seq_classif_dropout=dropout,
            max_position_embeddings=max_positions,
            **config_kwargs,
        )
        return DistilBertForSequenceClassification(cfg)
    if arch == "gpt2":
        cfg = GPT2Config(
            vocab_size=vocab_size,
            n_embd=hidden_size,
            n_layer=n_layers,
            n_head=n_heads,
            n_inner=intermediate_size,
            n_positions=max_positions,
            resid_pdrop=dropout,
            embd_pdrop=dropout,
            attn_pdrop=dropout,
            **config_kwargs,
        )
        return GPT2ForSequenceClassification(cfg)
    raise ValueError(f"unknown architecture {arch!r}; use one of {ARCHITECTURES + ('mlp',)}")


@dataclass
class SyntheticClassifier:
    """A classifier trained on a synthetic data set; sequences are word-index arrays."""

    spec: ModelSpec
    model: torch.nn.Module
    tokenizer: object | None
    words: tuple[str, ...]
    train_loss: list[float] = field(default_factory=list)
    train_seconds: float = 0.0

    @property
    def label(self) -> str:
        return f"{ARCH_LABELS.get(self.spec.arch, self.spec.arch)} (L={self.spec.n_layers})"

    def encode(self, sequences: Sequence[Sequence[int]]) -> dict[str, torch.Tensor]:
        """Model inputs for word-index sequences (special tokens from the tokenizer)."""
        if self.tokenizer is None:
            return {"counts": torch.as_tensor(counts_matrix(sequences, len(self.words)), dtype=torch.float32)}
        texts = [" ".join(self.words[j] for j in seq) for seq in sequences]
        enc = self.tokenizer(texts, padding=True, return_tensors="pt", return_token_type_ids=False)
        return {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"]}

    def logits(self, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        if self.tokenizer is None:
            return self.model(inputs["counts"])
        return self.model(**inputs).logits

    @torch.no_grad()
    def log_odds(self, sequences: Sequence[Sequence[int]], batch_size: int = 1000) -> np.ndarray:
        """The model's log-odds ``logit_1 − logit_0`` for each sequence (eval mode)."""
        was_training = self.model.training
        self.model.eval()
        out = []
        try:
            for start in range(0, len(sequences), batch_size):
                lg = self.logits(self.encode(sequences[start : start + batch_size])).double()
                out.append((lg[:, 1] - lg[:, 0]).numpy())
        finally:
            self.model.train(was_training)
        return np.concatenate(out) if out else np.zeros(0)


@contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """Run with ``n`` torch threads (None: leave as is); the machine is shared."""
    if n is None:
        yield
        return
    old = torch.get_num_threads()
    torch.set_num_threads(int(n))
    try:
        yield
    finally:
        torch.set_num_threads(old)


Sampler = Callable[[int, np.random.Generator], SyntheticDataset]


_MODEL_CACHE: dict[tuple, SyntheticClassifier] = {}


_MODEL_CACHE_MAX = 64


def train_classifier(
    spec: ModelSpec,
    sampler: Sampler,
    *,
    seed: int = 0,
    epochs: int = 5,
    samples_per_epoch: int = 5000,
    batch_size: int = 20,
    lr: float = 1e-3,
    weight_decay: float = 0.01,
    soft_labels: bool = False,
    num_threads: int | None = 1,
    cache_key: tuple | None = None,
) -> SyntheticClassifier:
    """Train ``spec`` on fresh samples from ``sampler`` (App. E.1.2 recipe).

    Every epoch draws ``samples_per_epoch`` new samples (as the paper's data sets do); the
    loss is cross-entropy on the sampled labels; AdamW with linear warm-up (5 %) and linear
    decay. ``soft_labels=True`` uses the true class probabilities ``sigmoid(F(t))`` as
    cross-entropy targets instead of labels sampled from them: the same minimiser, far less
    label noise, so a CPU-sized budget gets closer to the paper's 400k-sample training.
    With ``cache_key`` the trained model is memoised for the process.
    """
    key = None
    if cache_key is not None:
        key = (cache_key, spec, seed, epochs, samples_per_epoch, batch_size, lr, weight_decay, soft_labels)
        if key in _MODEL_CACHE:
            return _MODEL_CACHE[key]
    rng = np.random.default_rng(seed)
    first = sampler(samples_per_epoch, rng)
    with torch_threads(num_threads):
        model, tok = build_classifier(spec, first.words, seed=seed)
        clf = SyntheticClassifier(spec, model, tok, tuple(first.words))
        opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
        steps_per_epoch = math.ceil(samples_per_epoch / batch_size)
        total = max(1, epochs * steps_per_epoch)
        warm = max(1, total // 20)
        sched = torch.optim.lr_scheduler.LambdaLR(
            opt, lambda k: min((k + 1) / warm, max(0.0, (total - k) / max(1, total - warm)))
        )
        loss_fn = torch.nn.CrossEntropyLoss()
        t0 = time.perf_counter()
        model.train()
        for epoch in range(epochs):
            data = first if epoch == 0 else sampler(samples_per_epoch, rng)
            order = rng.permutation(len(data))
            running, n_batches = 0.0, 0
            for start in range(0, len(order), batch_size):
                idx = order[start : start + batch_size]
                inputs = clf.encode([data.sequences[i] for i in idx])
                if soft_labels:
                    p1 = torch.sigmoid(torch.as_tensor(data.log_odds[idx], dtype=torch.float32))
                    labels = torch.stack([1.0 - p1, p1], dim=1)
                else:
                    labels = torch.as_tensor(data.labels[idx], dtype=torch.long)
                loss = loss_fn(clf.logits(inputs), labels)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                sched.step()
                running += loss.item()
                n_batches += 1
            clf.train_loss.append(running / max(1, n_batches))
        model.eval()
        clf.train_seconds = time.perf_counter() - t0
    if key is not None:
        if len(_MODEL_CACHE) >= _MODEL_CACHE_MAX:
            _MODEL_CACHE.pop(next(iter(_MODEL_CACHE)))
        _MODEL_CACHE[key] = clf
    return clf


def linear_sampler(max_len: int = 30) -> Sampler:
    """Draws of the linear data set (App. E.1), for :func:`train_classifier`.

    Args:
        max_len: the longest sequence.

    Returns:
        ``sampler(n, rng) -> SyntheticDataset``.

    Example:
        >>> linear_sampler(8)(5, np.random.default_rng(0)).labels.shape
        (5,)
    """
    return lambda n, rng: sample_linear_dataset(n, rng, max_len=max_len)


def slalom_sampler(vocab: SlalomVocabulary, max_len: int) -> Sampler:
    """Draws of the SLALOM data set (App. E.2) over ``vocab``, for :func:`train_classifier`.

    Args:
        vocab: the vocabulary with its true values and importances.
        max_len: the longest sequence.

    Returns:
        ``sampler(n, rng) -> SyntheticDataset``.

    Example:
        >>> from slalom_core.experiments.synthetic import make_slalom_vocabulary
        >>> slalom_sampler(make_slalom_vocabulary(6, seed=0), 8)(5, np.random.default_rng(0)).labels.shape
        (5,)
    """
    return lambda n, rng: sample_slalom_dataset(n, rng, vocab=vocab, max_len=max_len)


def training_kwargs(epochs: int, samples_per_epoch: int, batch_size: int, lr: float, num_threads: int | None) -> dict:
    """The training settings of :func:`train_classifier` as keyword arguments.

    Args:
        epochs: passes over fresh samples.
        samples_per_epoch: samples drawn per epoch.
        batch_size: samples per step.
        lr: AdamW learning rate.
        num_threads: torch threads (None: leave as is).

    Returns:
        ``{name: value}`` for ``train_classifier(**...)``.

    Example:
        >>> training_kwargs(5, 5000, 20, 1e-3, None)["batch_size"]
        20
    """
    return dict(
        epochs=epochs,
        samples_per_epoch=samples_per_epoch,
        batch_size=batch_size,
        lr=lr,
        num_threads=num_threads,
    )


def trained_runs(
    spec: ModelSpec, sampler: Sampler, *, n_runs: int, seed: int, train: dict, **options
) -> Iterator[tuple[int, int, SyntheticClassifier]]:
    """(run, run seed, trained model) for each of ``n_runs`` independent trainings of ``spec``.

    Every experiment repeats a model with seeds ``seed + 1000 · run``, so that adding runs
    keeps the earlier ones (and the training cache) unchanged.
    """
    for run in range(n_runs):
        run_seed = seed + 1000 * run
        yield run, run_seed, train_classifier(spec, sampler, seed=run_seed, **options, **train)
