"""A batch of inputs from the containers users hold texts in: :func:`text_batch`."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

__all__ = ["text_batch"]


def _is_dataframe(x: object) -> bool:
    # Duck-typed so that the engine needs no pandas: a pandas DataFrame has both.
    return hasattr(x, "columns") and hasattr(x, "iloc") and getattr(x, "ndim", None) == 2


def text_batch(texts: object, *, only_str: bool = True) -> list:
    """The inputs of a batch as a list: one entry per text.

    A str is one text. A mapping with a ``"text"`` entry (a Hugging Face dataset row or
    batch) gives that entry; a DataFrame its one column (iterating it would give its column
    *names*, explained as if they were texts); a numpy array of strings one text per entry
    (an (n, 1) array one per row); anything else its items (a list, a pandas Series, the
    rows of an array or tensor of token ids).

    Args:
        texts: the batch.
        only_str: every entry must be a str (a TypeError names the first that is not);
            False leaves the entries to the caller (token ids, segmentations).

    Example:
        >>> text_batch("a great movie"), text_batch({"text": ["great", "dull"]})
        (['a great movie'], ['great', 'dull'])
        >>> text_batch(np.array([["great"], ["dull"]]))
        ['great', 'dull']
    """
    if isinstance(texts, Mapping) and "text" in texts:
        texts = texts["text"]
    if isinstance(texts, str):
        return [texts]
    if _is_dataframe(texts):
        if texts.shape[1] != 1:
            raise ValueError(
                f"a DataFrame to explain must have exactly one column of texts, this one has "
                f"{texts.shape[1]} ({list(texts.columns)[:5]}); pass the column, e.g. df['text']"
            )
        texts = texts.iloc[:, 0].tolist()
    if isinstance(texts, Mapping):
        raise TypeError(f"a mapping of texts needs a 'text' entry, got keys {list(texts)[:5]}")
    if isinstance(texts, np.ndarray) and texts.dtype.kind in "USO":
        if texts.ndim > 1 and texts.size != texts.shape[0]:
            raise ValueError(f"expected one text per row, got an array of shape {texts.shape}")
        texts = texts.reshape(-1).tolist()
    try:
        out = list(texts)  # type: ignore[call-overload]
    except TypeError:
        raise TypeError(f"explain a string or a list of strings, not a {type(texts).__name__}") from None
    for t in out if only_str else ():
        if not isinstance(t, str):
            raise TypeError(f"every input must be a string, got a {type(t).__name__}")
    return out
