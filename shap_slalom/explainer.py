"""``SlalomExplainer``: SLALOM (Leemann et al., TMLR 2025) as a ``shap.Explainer``.

Why it is here: it is the shap side of the adapter, mapping shap's inputs to engine calls
and the engine's per-token scores onto the tokens of shap's Text masker; the fit happens in
:mod:`slalom_core`.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

import numpy as np
import shap
import slalom_core as sc
import torch

from ._inputs import resolve
from ._outputs import ADDITIVITY, check_choices, text_outputs
from ._saving import read_settings, stream_class, write_settings
from .models import LogOddsModel

__all__ = ["SlalomExplainer", "SCORES", "ADDITIVE_SCORES", "ADDITIVITY"]

#: Scores an Explanation can carry (``score=``), and those that add up (with the base value)
#: to an output: the engine's score table (:data:`slalom_core.SCORES`), read, not restated.
SCORES = sc.SCORE_NAMES
ADDITIVE_SCORES = sc.ADDITIVE_SCORES
#: shap shows an explainer's progress bar only once a call has run this long (its show_progress).
SHOW_PROGRESS_AFTER_S = 10.0

#: What :meth:`SlalomExplainer.fit` gives per text (:func:`slalom_core.explain_outputs`):
#: one engine fit; one per label (a tuple) for a multi-label model; None for a text with no
#: tokens to explain.
Fit = sc.outputs.Fit


class SlalomExplainer(shap.Explainer):
    """Explain a text classifier with one local SLALOM fit per text, the shap way.

    SLALOM gives every token a *value* v (its effect alone) and an *importance* s (how much
    weight it takes from the other tokens); the surrogate's log-odds are
    ``F(t) = sum_i alpha_i v_i`` with ``alpha = softmax(s)`` over the text's tokens.

    Calling the explainer returns a ``shap.Explanation`` over the tokens of its
    ``shap.maskers.Text`` masker (special tokens get 0):

    - ``.values``: by default the additive split ``alpha_i * v_i`` ("contribution"), measured
      from the reference point (the model's output on the input with no tokens). The other
      scores ("value", "importance", "lin", "removal", "shapley") come with ``score=``, or
      all at once, from one fit, with :meth:`explain_scores`.
    - ``.base_values``: the reference point b, the model's output on the input with no
      tokens (or the number given as ``reference=``), one per output and *the same for
      every text*, as shap's explainers give E[f(X)]. For the additive scores
      ``base_values + values.sum()`` is the surrogate's output F(x) on the text, so
      waterfall and text plots end at F(x). Non-additive scores get base 0.
    - what the surrogate leaves of the model's output, the residual f(x) − F(x), is reported
      beside the base value, never inside it: every Explanation this explainer returns
      carries, per text, ``residual_values`` (f(x) − F(x)), ``model_outputs`` (f(x)),
      ``surrogate_outputs`` (F(x)) and ``reference_values`` (b), arrays of shape (texts,)
      or (texts, outputs), so ``base_values + values.sum() + residual_values`` is f(x).
      shap's slicing does not carry these extra arrays: read them on the unsliced
      Explanation, or use :func:`shap_slalom.plots.waterfall`, which states them under
      shap's waterfall.
    - an output axis per class for models with two or more outputs, named from ``id2label``:
      a binary model gives ``[-x, x]`` (log-odds of class 0 is minus that of class 1); k > 2
      classes are fitted jointly (centred logits) in one fit. ``importance`` is shared by
      all classes and repeated on that axis. A multi-label model gets one fit per label
      (k times the model calls), each in that label's own log-odds.
    - a text with no tokens to explain (e.g. "") gets zero values on the masker's (special)
      tokens and f(x) as its base value, as shap's explainers give it.

    What is explained is log-odds (binary, multi-label) or centred logits (k > 2), never
    probabilities: ``f(list[str])`` returning probabilities (a pipeline's scores,
    ``predict_proba``) is detected (``output="auto"``, with a
    :class:`slalom_core.SlalomOutputWarning`) and explained in log-odds. The decision is
    taken on the first call and kept by the explainer. :attr:`model` is the explained
    quantity as a shap model, for SHAP's own explainers and ``shap.benchmark``. SLALOM
    deletes tokens (short samples of the text's tokens) rather than masking them: the
    masker only defines the tokens. For pipelines and HF models SLALOM reads the model's
    logits directly, so a pipeline needs no ``top_k=None`` here (shap's own explainers of a
    pipeline do need it); a pipeline with ``function_to_apply="sigmoid"`` or a model whose
    config has ``problem_type="multi_label_classification"`` is explained per label.

    Args:
        model: a transformers text-classification pipeline, a Hugging Face sequence
            classifier (give its tokenizer as ``masker``/``tokenizer``), a
            ``slalom_core.ModelAdapter``, or ``f(list[str]) -> scores`` with a
            ``shap.maskers.Text`` masker.
        masker: ``shap.maskers.Text(tokenizer)`` or a tokenizer (default: the pipeline's).
        tokenizer: the model's tokenizer, if not given through ``masker``.
        method: the engine's fitting method: "hybrid" (the engine's default: short
            random triples plus a few deletions from the full text), "eff-slope" (triples
            alone, the importances' prior following |value|), "eff" (short samples),
            "fidel" (deletions from the full text) or "ana".
        n_samples: model evaluations per text (``max_evals=`` overrides it per call).
        output: what the model returns, one of :data:`slalom_core.OUTPUT_KINDS`: "auto"
            (default: detected, see above), "logits", "probs", "multilabel_logits",
            "multilabel_probs".
        reference: the point every score is measured from, as in
            :func:`slalom_core.explain`: "empty" (default: the model's output on the empty
            text) or a number (one per class).
        multiclass: "joint" (default) or "ovr" for k > 2 classes, as in :func:`slalom_core.explain`.
        gamma: the importances' sum (default 0: mean-zero), as in :func:`slalom_core.explain`.
        seed: random seed of the fit. Default 0: two identical calls give identical
            explanations, as shap's deterministic explainers (Partition) do. None draws a
            seed from torch's global generator on every call, so ``torch.manual_seed``
            reproduces (as in Captum); the seed drawn is in each fit's diagnostics.
        batch_size: sequences per forward pass.
        device: run a torch model there while explaining.
        output_names: class names, if the model does not carry them.
        fit_options: extra engine options, e.g. ``{"sample_length": 3}``.
        **kwargs: shap's base-class arguments (``link``, ``algorithm``...), accepted so that
            shap's re-entrant ``__init__`` works; SLALOM has its own link, so ``link`` must
            stay the identity.

    Example:
        >>> pipe = transformers.pipeline("text-classification", model=m, tokenizer=tok, top_k=None)  # doctest: +SKIP
        >>> explainer = SlalomExplainer(pipe)  # doctest: +SKIP
        >>> sv = explainer(["a great movie", "dull"])  # doctest: +SKIP
        >>> shap_slalom.plots.text(sv[0, :, "POSITIVE"])  # doctest: +SKIP
        >>> sv.residual_values[0]  # f(x) - F(x), beside sv.base_values[0] (the reference point)  # doctest: +SKIP
    """

    def __init__(
        self,
        model: Any,
        masker: Any = None,
        *,
        tokenizer: Any = None,
        method: str = sc.DEFAULT_METHOD,
        n_samples: int = sc.DEFAULT_N_SAMPLES,
        output: str = "auto",
        reference: sc.api.ReferenceOption = "empty",
        multiclass: str = "joint",
        gamma: float = 0.0,
        seed: int | None = 0,
        batch_size: int | None = None,
        device: torch.device | str | None = None,
        output_names: Sequence[str] | None = None,
        fit_options: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        link = kwargs.pop("link", shap.links.identity)
        if link is not shap.links.identity:
            raise ValueError("SlalomExplainer explains log-odds with its own link: leave link as shap.links.identity")
        for unused in ("algorithm", "feature_names", "linearize_link"):
            kwargs.pop(unused, None)
        if kwargs:
            raise TypeError(f"unexpected arguments: {sorted(kwargs)} (engine options go in fit_options=)")
        # The engine's own checks of its options (the same errors as explain_batch gives),
        # before anything is resolved or called.
        own = {"reference": reference, "multiclass": multiclass, "gamma": gamma}
        clash = sorted(set(fit_options or {}) & {*own, "method", "n_samples", "output", "seed"})
        if clash:
            raise TypeError(f"{clash} are SlalomExplainer's own arguments: pass them directly, not in fit_options")
        sc.check_call(method=method, n_samples=_evaluations(n_samples, "n_samples"), output=output, seed=seed, **own)
        # Everything is resolved here, before shap's base __init__: it then gets a plain
        # callable and a Text masker, so it never re-enters (and if it did, this __init__
        # computes the same state again from the same inputs).
        r = resolve(model, masker, tokenizer, output_names=output_names, batch_size=batch_size, device=device)
        self.adapter: sc.ModelAdapter = r.adapter
        self.class_names = r.class_names
        self._word_vocab = r.word_vocab
        self.method = method
        self.n_samples = int(n_samples)
        self.output = output
        self.seed = seed
        self.reference, self.multiclass, self.gamma = reference, multiclass, gamma
        self.fit_options = dict(fit_options or {})
        self._prefit: deque = deque()
        log_odds = LogOddsModel(self.adapter, output, self.class_names)
        super().__init__(log_odds, r.masker, link=shap.links.identity, linearize_link=True)
        # shap's __call__ reads output names from each row when this is None (ours may be
        # known only after the first call, for string models).
        self.output_names = None

    # -- saving ------------------------------------------------------------------------
    #: The block this class adds after shap's own in a saved explainer.
    _SAVE_BLOCK = "shap_slalom.SlalomExplainer"

    def save(self, out_file: Any, model_saver: Any = ".save", masker_saver: Any = ".save") -> None:
        """Write the explainer to a binary stream: shap's model and masker, then SLALOM's settings.

        shap's own ``Explainer.save`` keeps only the model, masker and link, and its
        ``load`` passes only those on, so an explainer came back with the default method,
        sample count and seed. This block keeps ``method``, ``n_samples``, ``seed``,
        ``output`` (as decided on the first call), ``fit_options`` and the class names.

        Example:
            >>> import io
            >>> buf = io.BytesIO()
            >>> explainer.save(buf); _ = buf.seek(0)  # doctest: +SKIP
            >>> SlalomExplainer.load(buf).n_samples  # doctest: +SKIP
            600
        """
        super().save(out_file, model_saver, masker_saver)
        write_settings(self, out_file, self._SAVE_BLOCK)

    @classmethod
    def load(  # type: ignore[override]
        cls, in_file: Any, model_loader: Any = None, masker_loader: Any = None, instantiate: bool = True
    ) -> Any:
        """Read an explainer written by :meth:`save`, with its SLALOM settings.

        Security: like ``shap.Explainer.load``, this unpickles the model and the masker
        from the stream (shap saves them with ``pickle``), and unpickling runs whatever code
        the file names. Load only files you wrote yourself or otherwise trust; never a file
        from an untrusted source.

        Args:
            in_file: a binary stream written by :meth:`save`.
            model_loader, masker_loader: as in ``shap.Explainer.load`` (callables that read
                the model and the masker; default: shap's, which unpickle).
            instantiate: True (default) returns the explainer; False, its keyword arguments.

        Example:
            >>> explainer = SlalomExplainer.load(open("explainer.bin", "rb"))  # doctest: +SKIP
            >>> explainer.method, explainer.n_samples, explainer.seed  # doctest: +SKIP
            ('eff', 600, 7)
        """
        if instantiate:
            # shap's own instantiating load keeps only the positional arguments of __init__
            # (model, masker): the settings, keyword-only here, would be dropped.
            obj_type = stream_class(in_file, cls)
            return obj_type(**obj_type.load(in_file, model_loader, masker_loader, instantiate=False))
        kwargs = super().load(in_file, model_loader, masker_loader, instantiate=False)
        model = kwargs.get("model")
        if isinstance(model, LogOddsModel):
            kwargs["model"] = model.adapter  # the wrapper is rebuilt by __init__
        return read_settings(in_file, cls._SAVE_BLOCK, kwargs)

    # -- inputs -------------------------------------------------------------------------
    def _positions(self, text: str) -> tuple[int, list[int], sc.Segmentation]:
        """The masker's tokens of ``text``: their count, the explained ones, and their units."""
        parts, ids = self.masker.token_segments(text)
        n = len(ids)
        lo, hi = self.masker.keep_prefix or 0, n - (self.masker.keep_suffix or 0)
        keep, units, tokens = [], [], []
        for i in range(lo, hi):
            if self._word_vocab is not None:
                word = str(ids[i]).strip()
                if not word:  # regex tokenizers yield '' around leading separators
                    continue
                unit = tuple(self._word_vocab.encode(word))
            else:
                unit = (int(ids[i]),)
            keep.append(i)
            units.append(unit)
            tokens.append(str(parts[i]))
        # With the text, a model on strings sees its original substrings, not decoded ids.
        return n, keep, sc.Segmentation(unit_ids=units, tokens=tokens, text=text if self._word_vocab is None else None)

    def _output_names(self, outputs: sc.ClassOutputs) -> list[str] | None:
        # The engine has checked that the names match the outputs (one name per column).
        return list(self.class_names) if self.class_names is not None and np.size(outputs.model_output) > 1 else None

    # -- fitting ------------------------------------------------------------------------
    def _progress_bar(self, total: int):
        """shap's convention (``shap.utils.show_progress``): a bar named after the explainer
        that shows only once the call has run 10 s, so a quick call prints nothing."""
        from tqdm.auto import tqdm

        return tqdm(total=total, desc=f"{type(self).__name__} explainer", delay=SHOW_PROGRESS_AFTER_S)

    def fit(
        self,
        texts: str | Iterable[str],
        *,
        max_evals: int | Literal["auto"] = "auto",
        seed: int | None = None,
        silent: bool = True,
        batch_size: int | Literal["auto"] = "auto",
    ) -> list[Fit]:
        """Fit one SLALOM per text (model calls shared across texts); no shap objects.

        The returned :class:`slalom_core.SlalomExplanation` objects carry everything:
        per-token scores on the masker's tokens (special tokens left out), ``model_output``,
        ``surrogate_output``, ``full_text_gap`` (the residual) and ``diagnostics`` (held-out
        R², timings, ``"output"``: how the model's outputs were read). A multi-label model
        gives a tuple of fits per text (one per label); a text with no tokens to explain
        gives None. Turn them into Explanations with :meth:`to_explanation`, or tabulate
        them with :meth:`fit_summary`.

        Args:
            texts: a string or a list of strings.
            max_evals: model evaluations per text ("auto": ``n_samples``).
            seed: overrides the explainer's seed.
            silent: False shows a progress bar over model evaluations once the call has
                run 10 s (as shap's explainers do); True never.
            batch_size: sequences per forward pass for this call ("auto": the explainer's
                ``batch_size``), as shap's explainers read it; scores do not depend on it.

        Example:
            >>> fits = explainer.fit(["a great movie"])  # doctest: +SKIP
            >>> fits[0].model_output - fits[0].surrogate_output  # the fit residual  # doctest: +SKIP
        """
        n_samples = self.n_samples if max_evals == "auto" else _evaluations(max_evals, "max_evals")
        batch = None if batch_size == "auto" else _evaluations(batch_size, "batch_size")
        texts = sc.text_batch(texts)
        out: list[Fit] = [None] * len(texts)
        segs = {}
        for i, t in enumerate(texts):
            _, keep, seg = self._positions(t)
            if keep:  # a text with no tokens has nothing to fit (see _row)
                segs[i] = seg
        if not segs:
            return out
        options = dict(
            method=self.method,
            n_samples=n_samples,
            seed=self.seed if seed is None else seed,
            show_progress=False if silent else self._progress_bar,
            reference=self.reference,
            multiclass=self.multiclass,
            gamma=self.gamma,
            batch_size=batch,
            **self.fit_options,
        )
        fits = sc.explain_outputs(
            self.adapter, list(segs.values()), output=self.model.output_kind or self.output, **options
        )
        # The first decision on what the outputs are stands: one explainer always explains
        # the same units, and every fit says how that was decided.
        diag = _each(fits[0])[0].diagnostics
        self.model.pin(diag["output_kind"], diag["output"])
        for i, fit in zip(segs, fits):
            for f in _each(fit):
                f.diagnostics["output"] = self.model.output_description
            out[i] = fit
        return out

    # -- engine scores -> shap rows -----------------------------------------------------------
    def _row(
        self, text: str, fit: Fit, score: str, additivity: str, outputs: sc.ClassOutputs
    ) -> tuple[np.ndarray, Any]:
        """Per-masker-token values and the base value for one text."""
        n, keep, _ = self._positions(text)
        reference, model_out = outputs.reference, outputs.model_output
        if fit is None:  # nothing to explain: no values, and f(x) is the reference point itself
            keep, s = [], np.zeros((0,) + model_out.shape)
        elif len(keep) != fit.n_positions:
            raise ValueError(f"this fit has {fit.n_positions} tokens but the masker gives {len(keep)} for {text!r}")
        else:
            s = fit.per_class(score)  # the engine's columns: every class (or label) of the model
        values = np.zeros((n,) + s.shape[1:])
        values[keep] = s
        if score not in ADDITIVE_SCORES:
            expected = np.zeros(s.shape[1:])
        else:  # the reference point: E[f(X)] of every text; the residual is reported beside
            expected = np.broadcast_to(reference, s.shape[1:]).astype(np.float64)
        return values, (float(expected) if expected.ndim == 0 else expected)

    def explain_row(
        self,
        *row_args: Any,
        max_evals: int | Literal["auto"] = "auto",
        main_effects: bool = False,
        error_bounds: bool = False,
        batch_size: int | Literal["auto"] = "auto",
        outputs: Any = None,
        silent: bool = True,
        score: str = sc.DEFAULT_SCORE,
        additivity: str = "surrogate",
        seed: int | None = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        """Explain one text, in the dict form shap's ``Explainer.__call__`` assembles.

        Keys: ``values`` (tokens x outputs), ``expected_values``, ``mask_shapes``,
        ``output_names``, ``main_effects``/``clustering``/``error_std`` (None), and
        ``slalom``: the engine's :class:`slalom_core.SlalomExplanation` (shap ignores it).

        Example:
            >>> row = explainer.explain_row("a great movie", max_evals=500)  # doctest: +SKIP
            >>> row["values"].shape  # ([CLS] a great movie [SEP], classes)  # doctest: +SKIP
            (5, 2)
        """
        if len(row_args) != 1:
            raise ValueError("SlalomExplainer explains one text input per row")
        text = row_args[0]
        if not isinstance(text, str):
            raise TypeError(f"a row must be a string, got {type(text).__name__}")
        check_choices(score, additivity)
        if self._prefit and self._prefit[0][0] == text:
            _, fit, outs = self._prefit.popleft()
        else:
            fit = self.fit([text], max_evals=max_evals, seed=seed, silent=silent, batch_size=batch_size)[0]
            outs = text_outputs(self.model, self.reference, text, fit)
        values, expected = self._row(text, fit, score, additivity, outs)
        return {
            "values": values,
            "expected_values": expected,
            "mask_shapes": self.masker.mask_shapes(text),
            "main_effects": None,
            "clustering": None,
            "error_std": None,
            "output_names": self._output_names(outs),
            "slalom": fit,
        }

    def to_explanation(
        self,
        texts: str | Iterable[str],
        fits: Sequence[Fit],
        score: str = sc.DEFAULT_SCORE,
        additivity: str = "surrogate",
    ) -> shap.Explanation:
        """Build the ``shap.Explanation`` of already fitted texts (no model calls, except
        f(x) of texts with no tokens).

        The Explanation also carries ``reference_values``, ``residual_values``,
        ``model_outputs``, ``surrogate_outputs`` (one row per text) and ``additivity`` (see
        the class docstring).

        Example:
            >>> fits = explainer.fit(texts)  # doctest: +SKIP
            >>> lin = explainer.to_explanation(texts, fits, score="lin")  # doctest: +SKIP
        """
        t0 = time.perf_counter()
        texts = _nonempty(sc.text_batch(texts))
        if len(texts) != len(fits):
            raise ValueError(f"{len(texts)} texts but {len(fits)} fits")
        check_choices(score, additivity)
        fitted = [f for f in fits if f is not None]
        # One reference point for the call: a text with no tokens gets the fitted texts'.
        shared = fitted[0].per_class_outputs().reference if fitted else None
        outs = [text_outputs(self.model, self.reference, t, f, shared) for t, f in zip(texts, fits)]
        # shap's own __call__ assembles the Explanation (ragged data, token names, output
        # names) exactly as for its explainers; explain_row picks up these fits in order.
        self._prefit = deque(zip(texts, fits, outs))
        try:
            exp = super().__call__(texts, silent=True, score=score, additivity=additivity)
        finally:
            self._prefit.clear()
        # The residual is not in base_values (the reference point, E[f(X)]): reported beside.
        exp.reference_values, exp.model_outputs, exp.residual_values = (np.array(x) for x in zip(*outs))
        exp.surrogate_outputs = exp.model_outputs - exp.residual_values
        exp.additivity = additivity
        exp.slalom_score = score  # what cohort() and the axis labels read
        exp.compute_time = time.perf_counter() - t0 + sum(f.summary()["seconds"] for f in fits if f is not None)
        return exp

    def __call__(  # type: ignore[override]
        self,
        *args: Any,
        score: str = sc.DEFAULT_SCORE,
        additivity: str = "surrogate",
        max_evals: int | Literal["auto"] = "auto",
        seed: int | None = None,
        silent: bool = False,
        main_effects: bool = False,
        error_bounds: bool = False,
        batch_size: int | Literal["auto"] = "auto",
        outputs: Any = None,
    ) -> shap.Explanation:
        """Explain a string, a list of strings, or a one-column DataFrame of texts; returns
        one ``shap.Explanation`` (rows = texts).

        Args:
            score: what ``.values`` holds: "contribution" (default, additive), "value",
                "importance", "lin", "removal" or "shapley" (additive, on the surrogate).
            additivity: "surrogate" (the only choice): base = the reference point, the same
                for every text; base + values = the surrogate's output F(x); the residual
                f(x) − F(x) is in ``residual_values``. "model" (the residual folded into the
                base so that rows end at f(x)) is refused with what to use instead.
            max_evals: model evaluations per text ("auto": the explainer's ``n_samples``).
            seed: overrides the explainer's seed.
            silent: True hides the progress bar.
            batch_size: sequences per forward pass ("auto": the explainer's ``batch_size``).

        Example:
            >>> sv = explainer(["a great movie", "a dull plot"])  # doctest: +SKIP
            >>> sv[0, :, "POSITIVE"].values  # per token, alpha_i * v_i  # doctest: +SKIP
        """
        if len(args) != 1:
            raise ValueError("SlalomExplainer takes one argument: a string or a list of strings")
        if outputs is not None:
            raise ValueError("SLALOM explains every class in one fit: select classes by slicing the Explanation")
        if main_effects or error_bounds:
            raise ValueError("SLALOM has no main effects or error bounds")
        check_choices(score, additivity)
        texts = _nonempty(sc.text_batch(args[0]))
        t0 = time.perf_counter()
        fits = self.fit(texts, max_evals=max_evals, seed=seed, silent=silent, batch_size=batch_size)
        exp = self.to_explanation(texts, fits, score=score, additivity=additivity)
        exp.compute_time = time.perf_counter() - t0
        return exp

    def explain_scores(
        self,
        texts: str | Iterable[str],
        scores: Sequence[str] = ("contribution", "value", "importance", "lin", "removal"),
        *,
        additivity: str = "surrogate",
        max_evals: int | Literal["auto"] = "auto",
        seed: int | None = None,
        silent: bool = True,
    ) -> dict[str, shap.Explanation]:
        """Several scores from one fit: ``{score name: shap.Explanation}``.

        Each entry is a plain Explanation (it survives slicing); a dict of single-row
        Explanations is what ``shap.plots.bar`` takes to compare them side by side. The
        value-vs-importance scatter is drawn from the fit itself:
        ``slalom_core.plots.plot_scatter(explainer.fit(text)[0])``.

        Example:
            >>> ex = explainer.explain_scores(["a great movie"])  # doctest: +SKIP
            >>> shap.plots.bar({k: e[0, :, "POSITIVE"] for k, e in ex.items()})  # doctest: +SKIP
        """
        texts = _nonempty(sc.text_batch(texts))
        t0 = time.perf_counter()
        fits = self.fit(texts, max_evals=max_evals, seed=seed, silent=silent)
        fit_time = time.perf_counter() - t0
        out = {}
        for name in scores:
            exp = self.to_explanation(texts, fits, score=name, additivity=additivity)
            exp.compute_time = fit_time
            out[name] = exp
        return out

    @staticmethod
    def fit_summary(fits: Sequence[Fit]) -> Any:
        """One row per fitted text: model vs surrogate output, residual, held-out R², cost
        (:func:`slalom_core.fit_summary`; a ``pandas.DataFrame``).

        Example:
            >>> SlalomExplainer.fit_summary(explainer.fit(texts))[["residual", "heldout_r2"]]  # doctest: +SKIP
        """
        return sc.fit_summary(fits)


def _each(fit: Fit) -> tuple[sc.SlalomExplanation, ...]:
    """The engine fits behind one text's entry (one, one per label, or none)."""
    if fit is None:
        return ()
    return fit if isinstance(fit, tuple) else (fit,)


def _nonempty(texts: list[str]) -> list[str]:
    # shap's own explainers fail on [] with an IndexError; say what is wrong instead.
    if not texts:
        raise ValueError("nothing to explain: got no texts (an empty list)")
    return texts


def _evaluations(n: object, name: str) -> int:
    """A count of model evaluations, checked: int() would turn 2.7 into 2 and True into 1,
    and fail on 'lots' with a message that does not name the argument. (The engine checks
    n_samples' range itself; max_evals is named here, as the engine would say n_samples.)"""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or (name != "n_samples" and n < 1):
        what = "sequences per forward pass" if name == "batch_size" else "model evaluations per text"
        auto = ' or "auto"' if name != "n_samples" else ""
        raise ValueError(f"{name} must be a positive int ({what}){auto}, got {n!r}")
    return int(n)
