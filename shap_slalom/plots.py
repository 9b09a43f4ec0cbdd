"""shap's waterfall with the SLALOM fit's residual stated beside it, and shap's text,
beeswarm and bar plots made to work and labelled for SLALOM Explanations.

Why it stays here: it draws a ``shap.Explanation`` with ``shap.plots.waterfall`` and reads the
arrays only :class:`~shap_slalom.SlalomExplainer` attaches to it; everything that draws a
SLALOM fit itself (the value-vs-importance scatter, the token highlight) is the engine's
:mod:`slalom_core.plots`, e.g. ``slalom_core.plots.plot_scatter(explainer.fit(text)[0])``.

The Explanation's base value is the reference point b (the same for every text) and its bars
add up to the surrogate's output F(x); what the surrogate leaves of the model's own output,
the residual f(x) − F(x), is not in any bar and must not go unnoticed: :func:`residual_note`
states it in one line, which :func:`waterfall` puts under its title and any other plot can
use too.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import shap
import slalom_core as sc

__all__ = ["waterfall", "residual_note", "text", "beeswarm", "bar", "occurring_means", "SEVERAL_TEXTS"]


def output_index(n_outputs: int, output: int | str | None, names: list[str] | None) -> int:
    """The column ``output`` (name or index) names; None picks a binary model's positive class.

    Example:
        >>> output_index(2, None, ["NEG", "POS"]), output_index(3, "b", ["a", "b", "c"])
        (1, 1)
    """
    if output is None and n_outputs == 2:
        return 1  # binary: the positive class, as SLALOM fits it
    names = list(names) if names is not None else []
    if output in names or (isinstance(output, (int, np.integer)) and 0 <= output < n_outputs):
        return names.index(output) if output in names else int(output)
    raise ValueError(f"output={output!r}: give an index below {n_outputs} or one of the output names {names}")


def _pick(x: np.ndarray, output: int | str | None, names: list[str] | None) -> float:
    """One output's entry of a per-output array (a scalar stays itself)."""
    x = np.asarray(x, dtype=np.float64)
    return float(x) if x.ndim == 0 else float(x[output_index(x.shape[0], output, names)])


def residual_note(
    explanation: shap.Explanation | sc.SlalomExplanation,
    row: int = 0,
    output: int | str | None = None,
) -> str:
    """One line stating f(x), the surrogate's output, the residual and the reference point.

    Args:
        explanation: an *unsliced* Explanation from :class:`~shap_slalom.SlalomExplainer`
            (it carries ``model_outputs``, ``residual_values``, ``reference_values``), or an
            engine :class:`slalom_core.SlalomExplanation`.
        row: which text of a batch.
        output: class (name or index); default: the positive class of a binary model.

    Example:
        >>> residual_note(explainer(["a great movie"]), output="POSITIVE")  # doctest: +SKIP
        "f(x) = 4.11 = reference -0.20 + surrogate's share 2.86 + residual 1.45 (log-odds)"
    """
    if isinstance(explanation, sc.SlalomExplanation):
        # Every class's outputs, a binary model's class 0 included (the negated log-odds).
        names = explanation.class_names
        ref, mo, res = explanation.per_class_outputs()
    else:
        if not hasattr(explanation, "residual_values"):
            raise ValueError(
                "this Explanation has no residual_values: pass the unsliced Explanation a SlalomExplainer returned"
            )
        names = list(explanation.output_names) if explanation.output_names is not None else None
        if names is not None and np.ndim(names) > 1:
            names = list(names[row])
        mo, ref, res = (
            np.asarray(a)[row]
            for a in (explanation.model_outputs, explanation.reference_values, explanation.residual_values)
        )
    mo, ref, res = (_pick(x, output, names) for x in (mo, ref, res))
    share = mo - res - ref
    return f"f(x) = {mo:.2f} = reference {ref:.2f} + surrogate's share {share:.2f} + residual {res:.2f} (log-odds)"


def waterfall(
    explanation: shap.Explanation,
    row: int = 0,
    output: int | str | None = None,
    *,
    max_display: int = 10,
    show: bool = False,
) -> Any:
    """``shap.plots.waterfall`` of one text, with the fit's residual stated under its title.

    shap's waterfall starts at the base value (shap's E[f(X)]: here the reference point b)
    and ends at the sum of the bars, which shap labels f(x): here the surrogate's output
    F(x). The note under the title gives the model's own f(x) = F(x) + residual, so that
    the residual is seen beside the plot.

    Args:
        explanation: the unsliced Explanation from :class:`~shap_slalom.SlalomExplainer`.
        row: which text.
        output: class (name or index); default: the positive class of a binary model.
        max_display: as in shap.
        show: call ``plt.show()``.

    Returns:
        The matplotlib Axes.

    Example:
        >>> ax = waterfall(explainer(["a great movie"]), output="POSITIVE")  # doctest: +SKIP
    """
    import matplotlib.pyplot as plt

    note = residual_note(explanation, row, output)
    note += "\nE[f(X)] = reference point; the bars end at the surrogate's F(x), not at f(x)"
    one = explanation[row]
    if np.ndim(one.values) == 2:
        names = list(one.output_names) if one.output_names is not None else None
        one = one[:, output_index(one.values.shape[1], output, names)]
    shap.plots.waterfall(one, max_display=max_display, show=False)
    ax = plt.gca()
    ax.set_title(note, fontsize=9)
    if show:
        plt.show()
    return ax


def text(explanation: shap.Explanation, output: int | str | None = None, **kwargs: Any) -> str | None:
    """``shap.plots.text`` with its colours, for one text or several.

    With numpy 2, shap 0.51 writes each token's colour as ``rgba(np.float64(255.0), ...)``
    (numpy 2's repr of the colormap's numbers), which no browser reads: every token is
    drawn without its colour and the bars black, for any Explanation. Drawn here under
    numpy's 1.25 print style, the colours are plain numbers again.

    Args:
        explanation: what ``shap.plots.text`` takes (``sv[0, :, "POSITIVE"]``, or several
            texts ``sv[:, :, "POSITIVE"]``), or the unsliced Explanation of a
            :class:`~shap_slalom.SlalomExplainer` with ``output``.
        output: with an unsliced Explanation, the class (name or index) to draw.
        **kwargs: ``shap.plots.text``'s own (``display=False`` returns the HTML).

    Returns:
        The HTML with ``display=False``, else None (shown in the notebook).

    Example:
        >>> html = shap_slalom.plots.text(sv, "POSITIVE", display=False)  # every text  # doctest: +SKIP
    """
    if output is not None:
        names = list(explanation.output_names) if explanation.output_names is not None else None
        if names is not None and np.ndim(names) > 1:
            names = list(names[0])
        n_outputs = np.shape(np.asarray(explanation.values[0]))[-1]
        explanation = explanation[:, :, output_index(n_outputs, output, names)]
    with np.printoptions(legacy="1.25"):
        return shap.plots.text(explanation, **kwargs)


def _relabel(ax: Any, explanation: Any) -> Any:
    label = getattr(explanation, "score_label", None)
    if label is not None:
        ax.set_xlabel(label)
    return ax


#: What a plot of several texts needs, said when it is given something else.
SEVERAL_TEXTS = (
    "over several texts a token sits at a different position in each, so shap's bar and beeswarm would pool "
    "different tokens by position: pass the unsliced Explanation of a SlalomExplainer with output= "
    "(shap_slalom.plots.bar(sv, output='POSITIVE')), or a cohort (shap_slalom.cohort(sv, 'POSITIVE'), "
    "shap_slalom.corpus_explanation(run)); one text: shap.plots.bar(sv[0, :, 'POSITIVE'])"
)


def _cohort(explanation: Any, output: int | str | None, top: int) -> Any:
    """A texts × tokens cohort: as given, or aligned by token from the unsliced Explanation."""
    if getattr(explanation, "score_label", None) is not None and np.ndim(explanation.values) == 2:
        return explanation  # shap_slalom.cohort or corpus_explanation: one column per token
    if getattr(explanation, "slalom_score", None) is not None:
        from .cohort import cohort  # here, not above: cohort imports this module's output_index

        return cohort(explanation, output, top=top)
    raise ValueError(SEVERAL_TEXTS)


def occurring_means(explanation: Any) -> np.ndarray:
    """Each token's mean |score| over the texts it occurs in (``data`` > 0), of a cohort.

    A text without the token scores 0 there (it adds nothing), which a mean over every text
    would count: a strong but rare token would then look weak. The cohort's own ranking and
    the bar plot use this mean.

    Example:
        >>> occurring_means(shap.Explanation(np.array([[1.0, 0.0], [-3.0, 2.0]]), data=np.array([[1, 0], [1, 1]])))
        array([2., 2.])
    """
    values, occurs = np.abs(np.asarray(explanation.values, dtype=np.float64)), np.asarray(explanation.data) > 0
    return (values * occurs).sum(axis=0) / np.maximum(occurs.sum(axis=0), 1)


def beeswarm(
    explanation: shap.Explanation,
    output: int | str | None = None,
    *,
    max_display: int = 10,
    show: bool = False,
    **kwargs: Any,
) -> Any:
    """``shap.plots.beeswarm`` of several texts, one row per token: each dot is one text the
    token occurs in (coloured by its occurrences there); texts without it are grey dots at 0
    (it adds nothing to them). Tokens in the cohort's order (largest mean |score| over the
    texts they occur in), the x axis named by the score and its unit.

    Args:
        explanation: the unsliced Explanation of a :class:`~shap_slalom.SlalomExplainer`
            (aligned by token here), a :func:`~shap_slalom.cohort` or a
            :func:`~shap_slalom.corpus_explanation`.
        output: the class (name or index), for an unsliced Explanation.
        max_display: tokens shown.
        show: call ``plt.show()``.
        **kwargs: ``shap.plots.beeswarm``'s own.

    Raises:
        ValueError: anything else of several texts (see :data:`SEVERAL_TEXTS`).

    Example:
        >>> ax = shap_slalom.plots.beeswarm(explainer(texts), "POSITIVE")  # doctest: +SKIP
    """
    import matplotlib.pyplot as plt

    co = _cohort(explanation, output, max_display)
    counts = np.asarray(co.data, dtype=np.float64)
    shown = shap.Explanation(
        values=co.values, base_values=co.base_values, data=np.where(counts > 0, counts, np.nan),
        feature_names=co.feature_names,
    )  # fmt: skip
    kwargs.setdefault("color_bar_label", "occurrences in the text (grey: absent)")
    kwargs.setdefault("order", np.arange(np.shape(co.values)[1]))
    ax = shap.plots.beeswarm(shown, max_display=max_display, show=False, **kwargs) or plt.gca()
    _relabel(ax, co)
    if show:
        plt.show()
    return ax


def bar(
    explanation: shap.Explanation,
    output: int | str | None = None,
    *,
    max_display: int = 10,
    show: bool = False,
    **kwargs: Any,
) -> Any:
    """Each token's mean |score| over the texts it occurs in, as ``shap.plots.bar`` draws
    bars, the x axis named by the score and its unit. One text (``sv[0, :, "POSITIVE"]``) is
    drawn as shap draws it.

    Args:
        explanation: as :func:`beeswarm` takes it, or one text's Explanation.
        output: the class (name or index), for an unsliced Explanation.
        max_display: tokens shown.
        show: call ``plt.show()``.
        **kwargs: ``shap.plots.bar``'s own.

    Raises:
        ValueError: several texts in any other form (see :data:`SEVERAL_TEXTS`).

    Example:
        >>> ax = shap_slalom.plots.bar(shap_slalom.corpus_explanation("runs/imdb"))  # doctest: +SKIP
    """
    import matplotlib.pyplot as plt

    label = getattr(explanation, "score_label", None)
    values = np.asarray(explanation.values)
    if values.ndim == 1 and values.dtype != object and getattr(explanation, "slalom_score", None) is None:
        ax = shap.plots.bar(explanation, max_display=max_display, show=False, **kwargs) or plt.gca()
    else:
        co = _cohort(explanation, output, max_display)
        label = co.score_label
        means = shap.Explanation(values=occurring_means(co), feature_names=co.feature_names)
        ax = shap.plots.bar(means, max_display=max_display, show=False, **kwargs) or plt.gca()
    if label is not None:
        ax.set_xlabel(f"mean |{label}| over the texts it occurs in")
    if show:
        plt.show()
    return ax
