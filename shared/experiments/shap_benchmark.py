"""Score explanations with ``shap.benchmark.SequentialMasker``, one text at a time.

``SequentialMasker`` keeps (or removes) tokens in the order an explanation ranks them and
records the model output after each step; the area under that curve is the score. Under
numpy 2 it stacks the curves of all rows into one array and so crashes on texts of different
lengths: here every text gets its own masker call and the curves (already interpolated to
a common grid by shap) are averaged afterwards, which gives the same mean curve.

Compare methods on the *same* outputs: give :attr:`shap_slalom.SlalomExplainer.model` (the
log-odds SLALOM explains) both to ``shap.explainers.Partition`` and to :func:`sequential`.

Nothing here is SLALOM's: it scores any ``shap.Explanation``, so it belongs to the harness
rather than to the adapter. It needs shap (the ``shap`` extra); importing
``slalom_core.experiments`` alone does not load it.

Example:
    >>> from slalom_core.experiments.shap_benchmark import sequential
    >>> res = sequential({"SLALOM": sv}, texts, explainer.model, explainer.masker, output="POSITIVE")  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import shap

__all__ = ["sequential"]


def _single_output(model: Callable, index: int | None) -> Callable:
    """The benchmark needs a model with one output per text."""

    def f(texts: Any) -> np.ndarray:
        out = np.asarray(model(list(texts)), dtype=np.float64)
        if out.ndim == 1:
            return out
        if index is None:
            if out.shape[1] != 1:
                raise ValueError(f"the model has {out.shape[1]} outputs: choose one with output=")
            return out[:, 0]
        return out[:, index]

    return f


def _output_index(e: shap.Explanation, output: int | str | None) -> int | None:
    if output is None or isinstance(output, int):
        return output
    names = list(e.output_names) if e.output_names is not None else []
    if output not in names:
        raise ValueError(f"output {output!r} is not among the explanation's outputs {names}")
    return names.index(output)


def sequential(
    explanations: Mapping[str, shap.Explanation],
    texts: Sequence[str],
    model: Callable,
    masker: shap.maskers.Text,
    *,
    output: int | str | None = None,
    mask_type: str = "keep",
    sort_order: str = "positive",
    percent: float = 0.01,
) -> dict[str, Any]:
    """Keep/remove benchmark of several explanations of the same texts.

    Args:
        explanations: ``{method name: Explanation}``, each with one row per text of
            ``texts`` and tokens from ``masker``.
        texts: the explained texts.
        model: ``f(list[str]) -> outputs``, the model whose outputs were explained (use
            ``explainer.model`` for SLALOM and give the same to Partition).
        masker: the Text masker used to hide tokens (shap's own: mask token or "...").
        output: which output column (name or index) when the explanations have several.
        mask_type: "keep" (start from all hidden, reveal the top tokens first; higher is
            better) or "remove" (start from the full text, hide the top tokens first; lower
            is better).
        sort_order: "positive", "negative" or "absolute" (shap's orders).
        percent: fraction of tokens changed per step.

    Returns:
        ``{method name: shap.benchmark.BenchmarkResult}`` with the mean curve over texts
        and its area in ``.value`` (``.value_sign`` says whether higher is better); pass
        ``list(result.values())`` to ``shap.plots.benchmark``.

    Example:
        >>> res = sequential({"SLALOM": sv_slalom, "Partition": sv_part}, texts,
        ...                  explainer.model, explainer.masker, output="POSITIVE")  # doctest: +SKIP
        >>> {k: r.value for k, r in res.items()}  # doctest: +SKIP
    """
    import shap.benchmark  # not imported by `import shap`

    texts = list(texts)
    results = {}
    for name, e in explanations.items():
        if len(e) != len(texts):
            raise ValueError(f"{name!r} has {len(e)} rows but {len(texts)} texts were given")
        index = _output_index(e, output)
        f = _single_output(model, index)
        curves, xs = [], None
        for i, text in enumerate(texts):
            values = np.asarray(e[i].values, dtype=np.float64)
            if values.ndim == 2:
                if index is None:
                    raise ValueError(f"{name!r} has several outputs: choose one with output=")
                values = values[:, index]
            # One row per SequentialMasker: its numpy-2 stacking never sees ragged rows.
            smasker = shap.benchmark.SequentialMasker(mask_type, sort_order, masker, f, np.array([text], dtype=object))
            res = smasker(values[None, :], name, percent=percent, silent=True)
            xs = res.curve_x
            curves.append(np.asarray(res.curve_y, dtype=np.float64))
        curves_arr = np.array(curves)
        std = curves_arr.std(0) / np.sqrt(len(curves_arr)) if len(curves_arr) > 1 else np.zeros(curves_arr.shape[1])
        results[name] = shap.benchmark.BenchmarkResult(
            f"{mask_type} {sort_order}", name, curve_x=xs, curve_y=curves_arr.mean(0), curve_y_std=std
        )
    return results
