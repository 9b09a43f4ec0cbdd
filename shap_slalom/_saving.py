"""SLALOM's settings in a saved :class:`~shap_slalom.SlalomExplainer`: the block written after
shap's own (model, masker), so that a loaded explainer has its method, samples and seed back."""

from __future__ import annotations

import pickle
from typing import Any

__all__ = ["write_settings", "read_settings", "stream_class", "SETTINGS"]

#: The settings saved, in order (``reference``, ``multiclass`` and ``gamma`` ride inside
#: ``fit_options``, so that the block's format is that of version 0).
SETTINGS = ("method", "n_samples", "seed", "output", "fit_options", "output_names")
_IN_FIT_OPTIONS = ("reference", "multiclass", "gamma")


def write_settings(explainer: Any, out_file: Any, block: str) -> None:
    """Append the settings block of ``explainer`` to the binary stream ``out_file``."""
    from shap._serializable import Serializer

    with Serializer(out_file, block, version=0) as s:
        # "auto" is saved as what it decided, so that the loaded explainer reads the
        # model's outputs in the same units without deciding again.
        settings = {
            "method": explainer.method,
            "n_samples": explainer.n_samples,
            "seed": explainer.seed,
            "output": explainer.model.output_kind or explainer.output,
            "fit_options": {**explainer.fit_options, **{k: getattr(explainer, k) for k in _IN_FIT_OPTIONS}},
            "output_names": list(explainer.class_names) if explainer.class_names is not None else None,
        }
        for key in SETTINGS:
            s.save(key, settings[key])


def read_settings(in_file: Any, block: str, kwargs: dict) -> dict:
    """``kwargs`` (shap's model and masker) with the settings block read from ``in_file``."""
    from shap._serializable import Deserializer

    try:
        with Deserializer(in_file, block, min_version=0, max_version=0) as s:
            for key in SETTINGS:
                kwargs[key] = s.load(key)
    except EOFError as err:
        raise ValueError(
            "the stream ends after shap's explainer block: it was saved without SLALOM's settings "
            "(by shap_slalom before save() kept them, or by shap's Explainer.save); save it again"
        ) from err
    for key in _IN_FIT_OPTIONS:
        if key in kwargs["fit_options"]:
            kwargs[key] = kwargs["fit_options"].pop(key)
    return kwargs


def stream_class(in_file: Any, cls: type) -> type:
    """The class pickled at the head of a saved explainer; it must be ``cls`` or a subclass."""
    obj_type = pickle.load(in_file)
    if not (isinstance(obj_type, type) and issubclass(obj_type, cls)):
        raise ValueError(f"the stream holds a {obj_type!r}, not a {cls.__name__}: load it with its own class")
    return obj_type
