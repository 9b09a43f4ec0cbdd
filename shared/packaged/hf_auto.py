"""The packaged models' configs, registered with transformers' Auto classes.

Why it is here: ``transformers.pipeline("text-classification", model=...)`` checks the
model's class against the classifiers transformers knows and, for one it does not, logs a
~5 kB list of every supported class. The packaged models are classifiers of our own (a BERT
encoder with a head), so each gets a config class of its own (a ``BertConfig`` with its own
``model_type``), registered with ``AutoConfig`` and ``AutoModelForSequenceClassification``:
the pipeline then accepts them silently, as it does any registered custom model.
"""

from __future__ import annotations

import torch
from transformers import AutoConfig, AutoModelForSequenceClassification, BertConfig

__all__ = ["MiniLMSentimentConfig", "ZeroShotSentimentConfig", "packaged_config"]


class MiniLMSentimentConfig(BertConfig):
    """The config of :class:`~slalom_core.packaged.demo_model.MiniLMSentimentClassifier`: its
    encoder's BERT config, with its labels and its own ``model_type``."""

    model_type = "slalom-minilm-imdb"


class ZeroShotSentimentConfig(BertConfig):
    """The config of :class:`~slalom_core.packaged.zeroshot.ZeroShotSentimentClassifier`."""

    model_type = "slalom-minilm-zeroshot"


def packaged_config(
    config_class: type[BertConfig], encoder_config: BertConfig, model_class: type[torch.nn.Module]
) -> BertConfig:
    """A copy of ``encoder_config`` as ``config_class``, with ``model_class`` registered for it
    with transformers' Auto classes (once; registering again changes nothing).

    Example:
        >>> cfg = packaged_config(MiniLMSentimentConfig, BertConfig(hidden_size=8, num_attention_heads=2), torch.nn.Module)
        >>> type(cfg).__name__, cfg.model_type, cfg.hidden_size
        ('MiniLMSentimentConfig', 'slalom-minilm-imdb', 8)
    """
    AutoConfig.register(config_class.model_type, config_class, exist_ok=True)
    AutoModelForSequenceClassification.register(config_class, model_class, exist_ok=True)
    values = encoder_config.to_dict()
    values.pop("model_type", None)  # the copy is of its own type
    return config_class.from_dict(values)
