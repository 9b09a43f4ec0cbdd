"""Tiny models and tokenizers built offline from configs, shared by the tests.

Nothing here downloads: tokenizers are made from small vocabularies written to a temp dir,
models from configs with random (seeded) weights.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch
from slalom_core.experiments.benchmarks.recovery import TrueSlalom

WORDS = (
    "the a movie film was is great good bad awful boring fun plot actor i it and but not very "
    "loved hated best worst story , . !"
).split()

#: Short reviews in the tiny vocabulary: the corpus tests' data.
SHORT_REVIEWS = (
    "the movie was great",
    "a boring plot and a bad actor",
    "i loved the film , the story was fun",
    "the worst story , very bad",
    "great fun !",
    "not good but not awful",
    "the plot is boring",
    "best film , best actor",
    "i hated it",
    "very good movie",
    "the film was awful and boring",
)


#: The tiny transformers' shape, as BERT, RoBERTa and Llama name it: one layer of two
#: heads on 32 dimensions (DistilBERT and GPT-2 spell the same sizes their own way).
TINY_LAYER = dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=2)


def bert_tokenizer(tmp: Path):
    from transformers import BertTokenizerFast

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS, "##s", "##ly", "##ing"]
    Path(tmp).mkdir(parents=True, exist_ok=True)
    path = Path(tmp) / "vocab.txt"
    path.write_text("\n".join(vocab) + "\n")
    return _make(BertTokenizerFast, len(vocab), dict(vocab=str(path)), dict(vocab_file=str(path)), do_lower_case=True)


def _make(cls, expected: int, v5_kwargs: dict, v4_kwargs: dict, **common):
    """transformers 5 takes vocab=/merges=, 4.x vocab_file=/merges_file=: try both."""
    tok = cls(**v5_kwargs, **common)
    if len(tok) < expected:
        tok = cls(**v4_kwargs, **common)
    return tok


def bpe_files(tmp: Path) -> tuple[str, str]:
    """A byte-level BPE (GPT-2/RoBERTa style) trained on a few sentences."""
    from tokenizers import ByteLevelBPETokenizer

    corpus = [" ".join(WORDS)] * 3 + ["the movie was great", "i hated the boring plot", "a very good film"]
    Path(tmp).mkdir(parents=True, exist_ok=True)
    tok = ByteLevelBPETokenizer()
    tok.train_from_iterator(
        corpus, vocab_size=300, min_frequency=1, special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<|endoftext|>"]
    )
    tok.save_model(str(tmp))
    return str(Path(tmp) / "vocab.json"), str(Path(tmp) / "merges.txt")


def gpt2_tokenizer(tmp: Path):
    from transformers import GPT2TokenizerFast

    vocab, merges = bpe_files(tmp)
    return _make(
        GPT2TokenizerFast,
        100,
        dict(vocab=vocab, merges=merges),
        dict(vocab_file=vocab, merges_file=merges),
        unk_token="<|endoftext|>",
        bos_token="<|endoftext|>",
        eos_token="<|endoftext|>",
    )


def roberta_tokenizer(tmp: Path):
    from transformers import RobertaTokenizerFast

    vocab, merges = bpe_files(tmp)
    return _make(
        RobertaTokenizerFast, 100, dict(vocab=vocab, merges=merges), dict(vocab_file=vocab, merges_file=merges)
    )


def signal_bert(tmp: Path):
    """The tiny BERT classifier with a signal to explain (``initializer_range=0.2``) and
    its tokenizer, saved under ``tmp``: the corpus and amortized tests' model."""
    tok = bert_tokenizer(tmp)
    return tiny_classifier("bert", tok, initializer_range=0.2), tok


def tiny_classifier(kind: str, tokenizer, num_labels: int = 2, seed: int = 0, initializer_range: float = 0.02):
    """A 1-layer random classifier of the given family ("bert", "distilbert", "roberta", "gpt2").

    With the default initialisation its output barely depends on the input; an
    ``initializer_range`` of ~0.2 gives log-odds that vary by about one unit across tokens,
    a model with a signal to explain.
    """
    from transformers import (
        BertConfig,
        BertForSequenceClassification,
        DistilBertConfig,
        DistilBertForSequenceClassification,
        GPT2Config,
        GPT2ForSequenceClassification,
        RobertaConfig,
        RobertaForSequenceClassification,
    )

    torch.manual_seed(seed)
    vocab_size = len(tokenizer)
    encoder = dict(
        initializer_range=initializer_range,
        vocab_size=vocab_size,
        **TINY_LAYER,
        intermediate_size=37,
        num_labels=num_labels,
    )
    if kind == "bert":
        model = BertForSequenceClassification(BertConfig(**encoder, max_position_embeddings=64))
    elif kind == "distilbert":
        cfg = DistilBertConfig(
            initializer_range=initializer_range,
            vocab_size=vocab_size,
            dim=32,
            n_layers=1,
            n_heads=2,
            hidden_dim=37,
            num_labels=num_labels,
            max_position_embeddings=64,
        )
        model = DistilBertForSequenceClassification(cfg)
    elif kind == "roberta":
        cfg = RobertaConfig(
            **encoder,
            # RoBERTa's positions start after the pad id: two more than BERT's.
            max_position_embeddings=66,
            pad_token_id=tokenizer.pad_token_id,
            bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id,
        )
        model = RobertaForSequenceClassification(cfg)
    elif kind == "gpt2":
        cfg = GPT2Config(
            initializer_range=initializer_range,
            vocab_size=vocab_size,
            n_embd=32,
            n_layer=1,
            n_head=2,
            n_positions=64,
            num_labels=num_labels,
            pad_token_id=None,
            bos_token_id=tokenizer.eos_token_id,
            eos_token_id=tokenizer.eos_token_id,
        )
        model = GPT2ForSequenceClassification(cfg)
    else:
        raise ValueError(kind)
    return model.eval()


# A classifier that *is* a SLALOM over token ids (ground truth for the fitters): the harness's,
# so that the recovery benchmark and the tests share one definition.
SlalomModel = TrueSlalom


def random_slalom(vocab: int, n_classes: int = 1, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    value = rng.normal(0, 1.5, size=(vocab,) if n_classes == 1 else (vocab, n_classes))
    if n_classes > 1:
        value -= value.mean(axis=1, keepdims=True)
    importance = rng.normal(0, 1.0, size=vocab)
    return value, importance - importance.mean()


def llama_style_tokenizer(tmp: Path):
    """The byte-level BPE with a Llama-style post-processor that puts ``<s>`` before every text."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab, merges = bpe_files(tmp)
    bpe = Tokenizer(models.BPE.from_file(vocab, merges))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    from tokenizers import decoders

    bpe.decoder = decoders.ByteLevel()
    bos = bpe.token_to_id("<s>")
    bpe.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", bos)])
    return PreTrainedTokenizerFast(tokenizer_object=bpe, bos_token="<s>", eos_token="</s>", unk_token="<unk>")


def tiny_causal_lm(kind: str, tokenizer, seed: int = 0, initializer_range: float = 0.2):
    """A 1-layer random causal LM ("gpt2", "bloom", "llama", "mamba") over ``tokenizer``'s vocabulary.

    ``initializer_range`` ~0.2 makes the next-token distribution depend on the prompt, so
    label log-probabilities move with the text.
    """
    from transformers import (
        BloomConfig,
        BloomForCausalLM,
        GPT2Config,
        GPT2LMHeadModel,
        LlamaConfig,
        LlamaForCausalLM,
        MambaConfig,
        MambaForCausalLM,
    )

    torch.manual_seed(seed)
    v = len(tokenizer)
    common = dict(
        vocab_size=v,
        initializer_range=initializer_range,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    if kind == "gpt2":
        model = GPT2LMHeadModel(GPT2Config(n_embd=32, n_layer=1, n_head=2, n_positions=128, **common))
    elif kind == "bloom":
        model = BloomForCausalLM(BloomConfig(hidden_size=32, n_layer=1, n_head=2, **common))
    elif kind == "llama":
        cfg = LlamaConfig(
            **TINY_LAYER, intermediate_size=48, num_key_value_heads=1, max_position_embeddings=128, **common
        )
        model = LlamaForCausalLM(cfg)
    elif kind == "mamba":
        model = MambaForCausalLM(MambaConfig(hidden_size=32, state_size=4, num_hidden_layers=1, expand=2, **common))
    else:
        raise ValueError(kind)
    return model.eval()


@contextlib.contextmanager
def record_reads(module: torch.nn.Module) -> Iterator[list[tuple[int, ...]]]:
    """Every sequence ``module`` reads inside the block (padding dropped), in order of reading.

    A forward pre-hook, so it sees what reached the model whichever adapter called it,
    with positional or keyword inputs (``input_ids``, ``attention_mask``).
    """
    reads: list[tuple[int, ...]] = []

    def hook(_module, args, kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        mask = kwargs.get("attention_mask", args[1] if len(args) > 1 else None)
        mask = torch.ones_like(ids) if mask is None else mask
        reads.extend(tuple(row[m.bool()].tolist()) for row, m in zip(ids, mask))

    handle = module.register_forward_pre_hook(hook, with_kwargs=True)
    try:
        yield reads
    finally:
        handle.remove()


def write_jsonl(path: Path, texts: list[str]) -> Path:
    """``texts`` as a JSON-lines corpus with ids r0, r1, … (what the corpus tests read)."""
    path.write_text("".join(json.dumps({"id": f"r{i}", "text": t}) + "\n" for i, t in enumerate(texts)))
    return path
