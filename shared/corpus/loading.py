"""Where a corpus run's model comes from: an object, a Hub id or path, or a :class:`ModelLoader`
(a recipe each Ray worker runs itself)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..packaged.demo_model import check_model_path

__all__ = ["ModelLoader", "load_model", "model_name", "check_model_path"]


@dataclass(frozen=True)
class ModelLoader:
    """A recipe for the model, run where the model is needed (once per Ray worker).

    ``load`` is a picklable zero-argument function returning ``(model, tokenizer)``. Ship
    this rather than a model object when workers should read the weights themselves (from
    a path every worker sees, or the Hub). ``name`` (its path or Hub id) is recorded in
    the run's manifest beside the model's class.

    Example:
        >>> from functools import partial
        >>> loader = ModelLoader(partial(my_load, "path/to/model"), name="path/to/model")  # doctest: +SKIP
        >>> explain_corpus(loader, "reviews.jsonl", "runs/r", engine="ray")  # doctest: +SKIP
    """

    load: Callable[[], tuple[object, object]]
    #: What the model is called (its path, Hub id or packaged name), for the run's manifest.
    name: str | None = None


def model_name(model: object) -> str | None:
    """What the user named the model by: a Hub id, a path (made absolute), a loader's name."""
    if isinstance(model, ModelLoader):
        return model.name
    if isinstance(model, Path) or (isinstance(model, str) and Path(model).exists()):
        return str(Path(model).resolve())
    return model if isinstance(model, str) else None


def load_model(model: object, tokenizer: object | None) -> tuple[object, object | None]:
    """The model and tokenizer behind a :class:`ModelLoader`, a Hub name / local path, or an object."""
    if isinstance(model, ModelLoader):
        return model.load()
    if isinstance(model, (str, Path)):
        check_model_path(model)
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        return (
            AutoModelForSequenceClassification.from_pretrained(str(model)),
            tokenizer or AutoTokenizer.from_pretrained(str(model)),
        )
    return model, tokenizer
