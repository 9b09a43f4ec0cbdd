"""Explanations of tiny offline models for the view and file tests (seeded, seconds to make)."""

from __future__ import annotations

import warnings

import pytest
import slalom_core as sc
import torch
from slalom_core.experiments.synthetic import make_word_tokenizer
from tiny_models import SlalomModel, bert_tokenizer, gpt2_tokenizer, tiny_classifier

# Words HTML must escape, a script tag among them.
WORDS = ["the", "film", "was", "great", "awful", "<script>", "&", "dull", '"quoted"', "</script>"]
WORD_TEXT = 'the film was great & <script> the film was dull "quoted" </script> the'
BERT_TEXT = "The Movie was GREAT, but <script>alert(1)</script> the plot was boring & bad!"
GPT2_TEXT = "The café movie was great.\nI loved it"


def slalom_model(n_classes: int = 1, seed: int = 0) -> sc.TorchClassifier:
    """A torch callable that is a SLALOM over word ids: Σ softmax(s)_i v_i."""
    g = torch.Generator().manual_seed(seed)
    vocab = 5 + len(WORDS)  # make_word_tokenizer's [PAD] [UNK] [CLS] [SEP] [MASK] first
    v = torch.randn(vocab, n_classes, generator=g, dtype=torch.float64) * 2
    s = torch.randn(vocab, generator=g, dtype=torch.float64)
    return sc.TorchClassifier(
        SlalomModel(v.numpy(), s.numpy()), tokenizer=make_word_tokenizer(WORDS, add_cls_sep=False)
    )


@pytest.fixture(scope="session")
def word_exp() -> sc.SlalomExplanation:
    """One output, fitted with standard errors."""
    return sc.explain(slalom_model(), WORD_TEXT, n_samples=300, seed=0)


@pytest.fixture(scope="session")
def multi_exp() -> sc.SlalomExplanation:
    """A joint fit of three classes."""
    return sc.explain(slalom_model(n_classes=3), WORD_TEXT, method="eff", n_samples=300, seed=0)


@pytest.fixture(scope="session")
def bert_exp(tmp_path_factory) -> sc.SlalomExplanation:
    """A binary BERT with an uncased WordPiece tokenizer: [UNK]s, lower-cased pieces."""
    torch.manual_seed(0)
    tok = bert_tokenizer(tmp_path_factory.mktemp("bert"))
    model = tiny_classifier("bert", tok, initializer_range=0.2)
    return sc.explain(model, BERT_TEXT, tokenizer=tok, n_samples=200, seed=0)


@pytest.fixture(scope="session")
def gpt2_exp(tmp_path_factory) -> sc.SlalomExplanation:
    """A three-class GPT-2 with a byte-level BPE: "Ġ" pieces, a character split over two."""
    tok = gpt2_tokenizer(tmp_path_factory.mktemp("gpt2"))
    model = tiny_classifier("gpt2", tok, num_labels=3, initializer_range=0.2)
    with warnings.catch_warnings():  # a random model: the fit may be flagged; these tests read the page
        warnings.simplefilter("ignore", sc.SlalomFitWarning)
        return sc.explain(model, GPT2_TEXT, tokenizer=tok, n_samples=200, seed=0)
