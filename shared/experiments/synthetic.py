"""Synthetic data sets with known ground truth (paper App. E.1 and E.2).

Two generators, both seeded through a :class:`numpy.random.Generator`:

* :func:`sample_linear_dataset` — the *linear* data set of App. E.1: ten words with fixed
  weights and occurrence probabilities (Table 3), lengths ``|t| ~ Bin(30, 0.5)``, log-odds
  ``F(t) = Σ_i w(t_i)`` (Eq. 74) and labels ``y ~ Bernoulli(sigmoid(F(t)))``.
* :func:`sample_slalom_dataset` — the *SLALOM* data set of App. E.2: a vocabulary whose
  values ``v`` and importances ``s`` are correlated as in Eq. 75, every word equally likely,
  lengths uniform in ``[1, 30]``, log-odds ``F(t) = Σ_i softmax(s(t))_i v(t_i)`` (Eq. 4) and
  labels drawn from them.

Sequences are arrays of *word indices* ``0 … V-1`` into the data set's ``words``; a
word-level Hugging Face tokenizer over the same words (plus ``[PAD] [UNK] [CLS] [SEP]
[MASK]``) comes from :func:`make_word_tokenizer`. Nothing is downloaded.

This module imports neither captum nor shap (nor torch).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

__all__ = [
    "LINEAR_WORDS",
    "LINEAR_WEIGHTS",
    "LINEAR_PROBS",
    "SPECIAL_TOKENS",
    "SyntheticDataset",
    "SlalomVocabulary",
    "linear_log_odds",
    "slalom_log_odds",
    "make_slalom_vocabulary",
    "sample_linear_dataset",
    "sample_slalom_dataset",
    "make_word_tokenizer",
    "as_generator",
    "counts_matrix",
]

# --- App. E.1, Table 3 -------------------------------------------------------------------
LINEAR_WORDS: tuple[str, ...] = (
    "the",
    "we",
    "movie",
    "watch",
    "good",
    "best",
    "perfect",
    "ok",
    "bad",
    "worst",
)
LINEAR_WEIGHTS: tuple[float, ...] = (0.0, 0.0, 0.0, 0.0, 0.6, 1.0, 1.5, -0.6, -1.0, -1.5)
LINEAR_PROBS: tuple[float, ...] = (
    1 / 6,
    1 / 6,
    1 / 6,
    1 / 6,
    1 / 15,
    1 / 20,
    1 / 20,
    1 / 15,
    1 / 20,
    1 / 20,
)

SPECIAL_TOKENS: tuple[str, ...] = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def as_generator(seed: int | np.random.Generator | None) -> np.random.Generator:
    """A numpy Generator from a seed (or the Generator itself, used as is)."""
    if isinstance(seed, np.random.Generator):
        return seed
    return np.random.default_rng(seed)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * np.asarray(x, dtype=np.float64)))


@dataclass
class SyntheticDataset:
    """Samples of a synthetic data set.

    Attributes:
        words: the vocabulary (index → word).
        sequences: one int64 array of word indices per sample (no special tokens).
        labels: (N,) int64 sampled labels in {0, 1}.
        log_odds: (N,) float64 ground-truth log-odds ``log p(y=1|t) / p(y=0|t)``.
        kind: "linear" or "slalom".
    """

    words: tuple[str, ...]
    sequences: list[np.ndarray]
    labels: np.ndarray
    log_odds: np.ndarray
    kind: str = ""
    params: dict = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.sequences)

    @property
    def n_words(self) -> int:
        return len(self.words)

    @property
    def lengths(self) -> np.ndarray:
        return np.array([len(s) for s in self.sequences], dtype=np.int64)

    def tokens(self, i: int) -> list[str]:
        """The words of sample ``i``."""
        return [self.words[j] for j in self.sequences[i]]

    def texts(self) -> list[str]:
        """Every sample as a whitespace-joined string (for a word-level tokenizer)."""
        return [" ".join(self.words[j] for j in seq) for seq in self.sequences]

    def counts(self) -> np.ndarray:
        """(N, V) matrix of how often each word occurs in each sample."""
        return counts_matrix(self.sequences, self.n_words)

    def position_onehot(self, max_len: int | None = None) -> np.ndarray:
        """(N, max_len · V) one-hot features: word ``j`` at position ``p`` → column ``p·V + j``.

        These are the features of the paper's GAM (App. E.1.2). Positions beyond
        ``max_len`` are dropped.
        """
        max_len = int(max_len if max_len is not None else max(self.lengths.max(initial=0), 1))
        n_words = self.n_words
        feats = np.zeros((len(self), max_len * n_words), dtype=np.float64)
        for row, seq in enumerate(self.sequences):
            seq = np.asarray(seq[:max_len], dtype=np.int64)
            feats[row, np.arange(len(seq)) * n_words + seq] = 1.0
        return feats

    def token_ids(self, tokenizer) -> list[np.ndarray]:
        """Sequences as ids of ``tokenizer`` (no special tokens added)."""
        ids = np.asarray(tokenizer.convert_tokens_to_ids(list(self.words)), dtype=np.int64)
        return [ids[np.asarray(seq, dtype=np.int64)] for seq in self.sequences]

    def subset(self, index: Sequence[int] | np.ndarray | slice) -> SyntheticDataset:
        """A new data set with the selected samples."""
        idx = np.arange(len(self))[index]
        return SyntheticDataset(
            words=self.words,
            sequences=[self.sequences[i] for i in idx],
            labels=self.labels[idx],
            log_odds=self.log_odds[idx],
            kind=self.kind,
            params=self.params,
        )


def counts_matrix(sequences: Sequence[Sequence[int]], n_words: int) -> np.ndarray:
    """(N, V) count matrix of sequences of word indices."""
    counts = np.zeros((len(sequences), n_words), dtype=np.float64)
    for row, seq in enumerate(sequences):
        np.add.at(counts[row], np.asarray(seq, dtype=np.int64), 1.0)
    return counts


def _split(flat: np.ndarray, lengths: np.ndarray) -> list[np.ndarray]:
    """Cut one long draw into consecutive sequences of the given lengths."""
    return [a.copy() for a in np.split(flat, np.cumsum(lengths)[:-1])] if len(lengths) else []


# --- ground-truth log-odds ---------------------------------------------------------------
def linear_log_odds(sequences: Sequence[Sequence[int]], weights: Sequence[float] = LINEAR_WEIGHTS) -> np.ndarray:
    """Eq. 74: ``F(t) = Σ_i w(t_i)`` for each sequence of word indices."""
    w = np.asarray(weights, dtype=np.float64)
    return np.array([float(w[np.asarray(s, dtype=np.int64)].sum()) for s in sequences])


def slalom_log_odds(
    sequences: Sequence[Sequence[int]], value: Sequence[float], importance: Sequence[float]
) -> np.ndarray:
    """Eq. 4: ``F(t) = Σ_i softmax(s(t))_i v(t_i)``; an empty sequence gives 0."""
    v = np.asarray(value, dtype=np.float64)
    s = np.asarray(importance, dtype=np.float64)
    out = np.zeros(len(sequences), dtype=np.float64)
    for row, seq in enumerate(sequences):
        seq = np.asarray(seq, dtype=np.int64)
        if seq.size == 0:
            continue
        z = s[seq]
        a = np.exp(z - z.max())
        out[row] = float((a * v[seq]).sum() / a.sum())
    return out


# --- App. E.1 ----------------------------------------------------------------------------
def sample_linear_dataset(
    n: int,
    seed: int | np.random.Generator | None = 0,
    *,
    max_len: int = 30,
    p_len: float = 0.5,
    words: Sequence[str] = LINEAR_WORDS,
    weights: Sequence[float] = LINEAR_WEIGHTS,
    probs: Sequence[float] = LINEAR_PROBS,
    min_len: int = 1,
) -> SyntheticDataset:
    """The linear data set of App. E.1.

    Each sample: a length ``|t| ~ Bin(max_len, p_len)`` (mean 15 for the defaults), ``|t|``
    words drawn independently with the occurrence probabilities of Table 3, log-odds
    ``F(t) = Σ_i w(t_i)`` (Eq. 74) and a label ``y ~ Bernoulli(exp F / (1 + exp F))``.

    The binomial can produce an empty sequence (probability 2^-30 for the defaults); a
    length below ``min_len`` is redrawn (``min_len=0`` keeps them: F = 0).

    Args:
        n: number of samples.
        seed: int seed or a numpy Generator.

    Returns:
        A :class:`SyntheticDataset` with ``kind="linear"``.
    """
    rng = as_generator(seed)
    words = tuple(words)
    w = np.asarray(weights, dtype=np.float64)
    p = np.asarray(probs, dtype=np.float64)
    if not (len(words) == len(w) == len(p)):
        raise ValueError("words, weights and probs must have the same length")
    if np.any(p < 0) or not np.isclose(p.sum(), 1.0):
        raise ValueError(f"occurrence probabilities must be >= 0 and sum to 1 (sum={p.sum()})")
    lengths = rng.binomial(max_len, p_len, size=n)
    bad = lengths < min_len
    while bad.any():  # practically never for the defaults
        lengths[bad] = rng.binomial(max_len, p_len, size=int(bad.sum()))
        bad = lengths < min_len
    flat = rng.choice(len(words), size=int(lengths.sum()), p=p).astype(np.int64)
    sequences = _split(flat, lengths)
    log_odds = linear_log_odds(sequences, w)
    labels = (rng.random(n) < _sigmoid(log_odds)).astype(np.int64)
    return SyntheticDataset(
        words=words,
        sequences=sequences,
        labels=labels,
        log_odds=log_odds,
        kind="linear",
        params={"weights": w, "probs": p, "max_len": max_len, "p_len": p_len},
    )


# --- App. E.2 ----------------------------------------------------------------------------
@dataclass
class SlalomVocabulary:
    """A ground-truth SLALOM over a synthetic vocabulary (App. E.2).

    Attributes:
        words: word strings (``w000``, ``w001``, … by default).
        value: (V,) values v.
        importance: (V,) importances s, normalised to sum to zero.
    """

    words: tuple[str, ...]
    value: np.ndarray
    importance: np.ndarray

    def __len__(self) -> int:
        return len(self.words)

    def first(self, n_words: int) -> SlalomVocabulary:
        """The first ``n_words`` words (App. E.2: smaller vocabularies use the first |V|).

        Importances are re-centred so that they sum to zero again; softmax is
        shift-invariant, so the SLALOM over these words is unchanged.
        """
        if not 1 <= n_words <= len(self):
            raise ValueError(f"n_words must be in [1, {len(self)}]")
        s = self.importance[:n_words]
        return SlalomVocabulary(self.words[:n_words], self.value[:n_words].copy(), s - s.mean())

    def log_odds(self, sequences: Sequence[Sequence[int]]) -> np.ndarray:
        return slalom_log_odds(sequences, self.value, self.importance)


def make_slalom_vocabulary(
    n_words: int = 200,
    seed: int | np.random.Generator | None = 0,
    *,
    values: Sequence[float] | None = None,
    value_scale: float = 0.133,
    value_factor: float = 2.0,
    importance_factor: float = 5.0,
    importance_power: float = 1.5,
    noise_std: float = 0.5,
    prefix: str = "w",
) -> SlalomVocabulary:
    """Values and importances as in App. E.2 / Eq. 75.

    ``s(τ) = importance_factor · |v(τ)|^importance_power + noise_std · N(0, 1)``, i.e.
    ``s ~ 5 (v^{3/2}) + ½ N(0,1)`` for the defaults, then shifted to sum to zero (the
    normalisation constraint, γ = 0). Eq. 75 writes ``v^{3/2}``, which is undefined for
    negative v; we use ``|v|^{3/2}``, so that strongly negative and strongly positive words
    are both important (this also matches the authors' released 200-word vocabulary, where
    ``s - 5|v|^{1.5}`` has standard deviation ≈ 0.5).

    Values: the paper takes Naive-Bayes (bag-of-words) log-ratios of 200 random IMDB tokens
    and multiplies them by 2; we do not ship IMDB statistics, so by default
    ``v = value_factor · ω`` with ``ω ~ Laplace(0, value_scale)`` — a heavy-tailed
    distribution with the same spread as those doubled log-ratios (median |v| ≈ 0.18,
    5 %/95 % quantiles ≈ ∓0.6). Pass ``values`` to use your own (``value_factor`` is not
    applied to them).

    Args:
        n_words: vocabulary size |V| (ignored when ``values`` is given).
        seed: int seed or numpy Generator.
    """
    rng = as_generator(seed)
    if values is None:
        v = value_factor * rng.laplace(0.0, value_scale, size=int(n_words))
    else:
        v = np.asarray(values, dtype=np.float64).copy()
    if v.ndim != 1 or v.size < 1:
        raise ValueError("need at least one value")
    s = importance_factor * np.abs(v) ** importance_power + noise_std * rng.standard_normal(v.size)
    s = s - s.mean()
    width = max(3, len(str(v.size - 1)))
    words = tuple(f"{prefix}{i:0{width}d}" for i in range(v.size))
    return SlalomVocabulary(words=words, value=v, importance=s)


def sample_slalom_dataset(
    n: int,
    seed: int | np.random.Generator | None = 0,
    *,
    vocab: SlalomVocabulary | None = None,
    n_words: int | None = None,
    max_len: int = 30,
    min_len: int = 1,
    vocab_seed: int = 0,
) -> SyntheticDataset:
    """The SLALOM data set of App. E.2.

    Each sample: a length uniform in ``[min_len, max_len]``, that many words drawn uniformly
    (every word equally likely) from the first ``n_words`` words of ``vocab``, log-odds from
    the ground-truth SLALOM (Eq. 4) and a label ``y ~ Bernoulli(sigmoid(F))``.

    Args:
        n: number of samples.
        seed: int seed or numpy Generator for the samples.
        vocab: the ground-truth SLALOM; default ``make_slalom_vocabulary(200, vocab_seed)``.
        n_words: use only the first ``n_words`` words of ``vocab`` (default: all).

    Returns:
        A :class:`SyntheticDataset` with ``kind="slalom"``; ``params`` holds ``value`` and
        ``importance`` (mean-zero over the words used).
    """
    rng = as_generator(seed)
    if vocab is None:
        vocab = make_slalom_vocabulary(200, vocab_seed)
    if n_words is not None and n_words != len(vocab):
        vocab = vocab.first(n_words)
    if not 1 <= min_len <= max_len:
        raise ValueError("need 1 <= min_len <= max_len")
    lengths = rng.integers(min_len, max_len + 1, size=n)
    sequences = _split(rng.integers(0, len(vocab), size=int(lengths.sum())).astype(np.int64), lengths)
    log_odds = vocab.log_odds(sequences)
    labels = (rng.random(n) < _sigmoid(log_odds)).astype(np.int64)
    return SyntheticDataset(
        words=tuple(vocab.words),
        sequences=sequences,
        labels=labels,
        log_odds=log_odds,
        kind="slalom",
        params={
            "value": vocab.value,
            "importance": vocab.importance - vocab.importance.mean(),
            "max_len": max_len,
            "min_len": min_len,
        },
    )


# --- tokenizer ---------------------------------------------------------------------------
def make_word_tokenizer(
    words: Sequence[str],
    *,
    add_cls_sep: bool = True,
    model_max_length: int = 512,
    padding_side: str = "right",
):
    """A word-level Hugging Face fast tokenizer over ``words``, built in memory.

    Ids: ``[PAD]=0, [UNK]=1, [CLS]=2, [SEP]=3, [MASK]=4``, then ``words`` in order (word
    index ``j`` → id ``j + 5``). Text is split on whitespace; an unknown word maps to
    ``[UNK]``.

    Args:
        words: the vocabulary.
        add_cls_sep: BERT-style ``[CLS] … [SEP]`` around every text (BERT, DistilBERT);
            ``False`` for GPT-2-style models, which get the bare words (and ``[PAD]`` as
            their pad token).

    Returns:
        A ``transformers.PreTrainedTokenizerFast``.
    """
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    words = list(words)
    clash = set(words) & set(SPECIAL_TOKENS)
    if clash or len(set(words)) != len(words):
        raise ValueError(f"words must be unique and not special tokens (clash: {sorted(clash)})")
    vocab = {tok: i for i, tok in enumerate(list(SPECIAL_TOKENS) + words)}
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    if add_cls_sep:
        cls_id, sep_id = vocab["[CLS]"], vocab["[SEP]"]
        backend.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]",
            pair="[CLS] $A [SEP] $B:1 [SEP]:1",
            special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)],
        )
    special = {"unk_token": "[UNK]", "pad_token": "[PAD]", "mask_token": "[MASK]"}
    if add_cls_sep:  # a GPT-2-style tokenizer must not advertise [CLS]/[SEP] it never adds
        special.update(cls_token="[CLS]", sep_token="[SEP]")
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        model_max_length=model_max_length,
        padding_side=padding_side,
        **special,
    )
