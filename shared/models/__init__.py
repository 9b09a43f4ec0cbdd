"""Model adapters: the engine sees every model as "token-id sequences in, scores out".

One module per kind of model, each a :class:`ModelAdapter`:

- :mod:`.segmentation`: texts cut into positions (:class:`Segmentation`, tokenizers);
- :mod:`.base`: the adapter contract (:class:`ModelAdapter`), with neutral billing hooks;
- :mod:`.reading`: a model's output as a checked score matrix (:func:`score_matrix`);
- :mod:`.session`: a torch model run as deployed and given back unchanged;
- :mod:`.torch_models`: :class:`TorchModel` (the public base for torch adapters),
  :class:`TorchClassifier`, :class:`HFClassifier`;
- :mod:`.strings`: :class:`StringClassifier`, a black box on strings;
- :mod:`.api_classifier`: :class:`APIClassifier`, a paid endpoint (cache, retries, budget);
- :mod:`.prompted`: :class:`PromptClassifier`, a causal LM prompted to classify;
- :mod:`.onnx_runtime`: :class:`OnnxClassifier`, an ONNX Runtime session (and the worked
  example of a custom adapter);
- :mod:`.perturbation`: rows of token-id tensors, deleted or replaced (for ``explain_rows``);
- :mod:`.factory`: :func:`as_adapter`, which picks the adapter for a model.

Write your own adapter by subclassing :class:`TorchModel` (a torch-like forward on padded
rows) or :class:`ModelAdapter` (anything else); see ``docs/architecture.md``.
"""

from .api_classifier import (
    APIClassifier,
    APIError,
    BudgetExceededError,
    CacheChangedError,
    TransientAPIError,
    redact_secrets,
)
from .base import ModelAdapter
from .factory import as_adapter, is_pipeline
from .onnx_runtime import OnnxClassifier
from .prompted import PADDINGS, PromptClassifier
from .reading import OutputShapeError, score_matrix
from .segmentation import (
    GRANULARITIES,
    Segmentation,
    WhitespaceTokenizer,
    as_id_list,
    check_segmentation,
    check_tokenizer,
    is_hf_tokenizer,
    segment_text,
    special_token_frame,
    tokenizer_of,
)
from .session import check_device, input_vocab_size, model_session, module_of
from .strings import StringClassifier
from .torch_models import HFClassifier, TorchClassifier, TorchModel, model_max_length

__all__ = [
    "GRANULARITIES",
    "Segmentation",
    "ModelAdapter",
    "TorchModel",
    "HFClassifier",
    "TorchClassifier",
    "StringClassifier",
    "APIClassifier",
    "APIError",
    "TransientAPIError",
    "BudgetExceededError",
    "CacheChangedError",
    "PromptClassifier",
    "OnnxClassifier",
    "PADDINGS",
    "WhitespaceTokenizer",
    "OutputShapeError",
    "as_adapter",
    "as_id_list",
    "check_device",
    "check_segmentation",
    "check_tokenizer",
    "input_vocab_size",
    "is_hf_tokenizer",
    "is_pipeline",
    "model_max_length",
    "model_session",
    "module_of",
    "redact_secrets",
    "score_matrix",
    "segment_text",
    "special_token_frame",
    "tokenizer_of",
]
