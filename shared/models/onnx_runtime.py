"""A model exported to ONNX, explained through an ONNX Runtime session: :class:`OnnxClassifier`.

Also the worked example of a custom adapter: a :class:`~slalom_core.models.TorchModel`
subclass needs only :meth:`forward` (one call on padded rows); batching, padding, output
checks and the explain machinery come with the base class.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from .segmentation import special_token_frame
from .torch_models import TorchModel

__all__ = ["OnnxClassifier"]


class OnnxClassifier(TorchModel):
    """An ``onnxruntime.InferenceSession`` of a sequence classifier (ids and mask in, logits out).

    Args:
        session: the session (anything with ``run(output_names, feeds)`` and
            ``get_inputs()``, as ONNX Runtime's); it is not imported here.
        tokenizer: the model's tokenizer: its special tokens frame every sample and its
            pad id pads batches (unless given below).
        input_names: the session's inputs for the token ids and the attention mask (a
            ``token_type_ids`` input, if the session has one, gets zeros: one segment).
        output_index: which of the session's outputs holds the logits.
        prefix_ids, suffix_ids, pad_id: override what the tokenizer says.
        max_length, class_names, batch_size: as for :class:`TorchModel`.

    Example:
        >>> import onnxruntime as ort  # doctest: +SKIP
        >>> session = ort.InferenceSession("classifier.onnx", providers=["CPUExecutionProvider"])  # doctest: +SKIP
        >>> exp = slalom_core.explain(OnnxClassifier(session, tok), "a great movie", seed=0)  # doctest: +SKIP
    """

    def __init__(
        self,
        session: object,
        tokenizer: object | None = None,
        *,
        input_names: tuple[str, str] = ("input_ids", "attention_mask"),
        output_index: int = 0,
        prefix_ids: Sequence[int] | None = None,
        suffix_ids: Sequence[int] | None = None,
        pad_id: int | None = None,
        max_length: int | None = None,
        class_names: Sequence[str] | None = None,
        batch_size: int = 64,
    ) -> None:
        if not (hasattr(session, "run") and hasattr(session, "get_inputs")):
            raise TypeError(f"session must be an ONNX Runtime InferenceSession, got a {type(session).__name__}")
        available = [i.name for i in session.get_inputs()]
        missing = [n for n in input_names if n not in available]
        if missing:
            raise ValueError(f"the session has no input {missing}; its inputs are {available}: give input_names=")
        frame = special_token_frame(tokenizer) if tokenizer is not None else ((), ())
        tok_pad = getattr(tokenizer, "pad_token_id", None)
        super().__init__(
            tokenizer=tokenizer,
            prefix_ids=frame[0] if prefix_ids is None else prefix_ids,
            suffix_ids=frame[1] if suffix_ids is None else suffix_ids,
            pad_id=pad_id if pad_id is not None else (tok_pad if isinstance(tok_pad, int) else 0),
            max_length=max_length,
            class_names=class_names,
            batch_size=batch_size,
        )
        # Not ``self.session``: that is the base class's set-up context manager.
        self.runtime = session
        self.input_names = tuple(input_names)
        self.output_index = int(output_index)
        self._token_types = "token_type_ids" in available and "token_type_ids" not in input_names

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> object:
        ids = input_ids.cpu().numpy().astype(np.int64)
        feeds = {self.input_names[0]: ids, self.input_names[1]: attention_mask.cpu().numpy().astype(np.int64)}
        if self._token_types:
            feeds["token_type_ids"] = np.zeros_like(ids)
        outputs = self.runtime.run(None, feeds)
        return torch.from_numpy(np.asarray(outputs[self.output_index]))
