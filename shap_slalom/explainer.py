"""``SlalomExplainer``: SLALOM (Leemann et al., TMLR 2025) as a ``shap.Explainer``.

A thin adapter: the fit happens in :mod:`slalom_core`; this module maps shap's inputs to
engine calls and the engine's per-token scores onto the tokens of shap's Text masker.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

import numpy as np
import shap
import torch

import slalom_core as sc

from ._inputs import resolve, to_text_list
from .models import LogOddsModel

__all__ = ["SlalomExplainer", "SCORES", "ADDITIVE_SCORES", "BASES"]

#: Scores an Explanation can carry (``score=``); see DESIGN.md sec. 2.
SCORES = ("contribution", "value", "importance", "lin", "removal", "shapley")
#: Scores that sum (with the base value) to the surrogate's output: safe for waterfall plots.
ADDITIVE_SCORES = ("contribution", "shapley")
#: Choices of ``base=``: "empty" = the reference point, the model's output on the input with
#: no tokens; "residual" = whatever makes base + sum(values) equal the model's own output.
BASES = ("empty", "residual")

_SIGNED = ("contribution", "value", "lin", "removal", "shapley")


class SlalomExplainer(shap.Explainer):
    """Explain a text classifier with one local SLALOM fit per text, the shap way.

    SLALOM gives every token a *value* v (its effect alone) and an *importance* s (how much
    weight it takes from the other tokens); the surrogate's log-odds are
    ``F(t) = sum_i alpha_i v_i`` with ``alpha = softmax(s)`` over the text's tokens.

    Calling the explainer returns a ``shap.Explanation`` over the tokens of its
    ``shap.maskers.Text`` masker (special tokens get 0):

    - ``.values``: by default the additive split ``alpha_i * v_i`` ("contribution"), so
      ``.base_values + .values.sum() == F(t)``, the surrogate's log-odds. The other scores
      ("value", "importance", "lin", "removal", "shapley") come with ``score=``, or all at
      once, from one fit, with :meth:`explain_scores`.
    - ``.base_values``: by default (``base="empty"``) the reference point the scores are
      measured from, the model's output on the input with no tokens (the engine's
      ``base_value``). ``base="residual"`` instead uses ``model output - sum(values)``, so
      that base + values adds up to the model's own output, as Shapley values do.
      Non-additive scores always get base 0.
    - an output axis per class for models with two or more outputs, named from ``id2label``:
      a binary model gives ``[-x, x]`` (log-odds of class 0 is minus that of class 1); k > 2
      classes are fitted jointly (centred logits) in one fit. ``importance`` is shared by
      all classes and repeated on that axis.

    What is explained is log-odds (binary) or centred logits (k > 2), never probabilities;
    :attr:`model` is that quantity as a shap model, for SHAP's own explainers and
    ``shap.benchmark``. SLALOM deletes tokens (short samples of the text's tokens) rather than
    masking them: the masker only defines the tokens. For pipelines and HF models SLALOM reads
    the model's logits directly, so a pipeline needs no ``top_k=None`` here (shap's own
    explainers of a pipeline do need it).

    Args:
        model: a transformers text-classification pipeline, a Hugging Face sequence
            classifier (give its tokenizer as ``masker``/``tokenizer``), a
            ``slalom_core.ModelAdapter``, or ``f(list[str]) -> scores`` with a
            ``shap.maskers.Text`` masker.
        masker: ``shap.maskers.Text(tokenizer)`` or a tokenizer (default: the pipeline's).
        tokenizer: the model's tokenizer, if not given through ``masker``.
        method: the engine's fitting method: "eff" (default; short samples), "fidel"
            (deletions from the full text) or "ana".
        n_samples: model evaluations per text (``max_evals=`` overrides it per call).
        output: "logits" (default) or "probs" if ``f`` returns probabilities.
        seed: random seed of the fit (default 0: explanations are reproducible).
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
        >>> shap.plots.text(sv[0, :, "POSITIVE"])  # doctest: +SKIP
    """

    def __init__(
        self,
        model: Any,
        masker: Any = None,
        *,
        tokenizer: Any = None,
        method: str = "eff",
        n_samples: int = sc.DEFAULT_N_SAMPLES,
        output: str = "logits",
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
        if output not in sc.OUTPUT_KINDS:
            raise ValueError(f"output must be one of {sc.OUTPUT_KINDS}, got {output!r}")
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
        self.fit_options = dict(fit_options or {})
        self._prefit: deque = deque()
        log_odds = LogOddsModel(self.adapter, output, self.class_names)
        super().__init__(log_odds, r.masker, link=shap.links.identity, linearize_link=True)
        # shap's __call__ reads output names from each row when this is None (ours may be
        # known only after the first call, for string models).
        self.output_names = None

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
        return n, keep, sc.Segmentation(unit_ids=units, tokens=tokens)

    def _n_outputs(self, probe: str) -> int:
        k = self.model.n_outputs(probe)
        if self.class_names is not None and k > 1 and len(self.class_names) != k:
            raise ValueError(f"the model has {k} outputs but {len(self.class_names)} output names were given")
        return k

    def _output_names(self, k: int) -> list[str] | None:
        return list(self.class_names) if (self.class_names is not None and k > 1) else None

    # -- fitting ------------------------------------------------------------------------
    def fit(
        self,
        texts: str | Iterable[str],
        *,
        max_evals: int | Literal["auto"] = "auto",
        seed: int | None = None,
        silent: bool = True,
    ) -> list[sc.SlalomExplanation]:
        """Fit one SLALOM per text (model calls shared across texts); no shap objects.

        The returned :class:`slalom_core.SlalomExplanation` objects carry everything:
        per-token scores on the masker's tokens (special tokens left out), ``model_output``,
        ``surrogate_output`` and ``diagnostics`` (held-out R², timings). Turn them into
        Explanations with :meth:`to_explanation`, or tabulate them with :meth:`fit_summary`.

        Args:
            texts: a string or a list of strings.
            max_evals: model evaluations per text ("auto": ``n_samples``).
            seed: overrides the explainer's seed.
            silent: False shows a progress bar over model evaluations.

        Example:
            >>> fits = explainer.fit(["a great movie"])  # doctest: +SKIP
            >>> fits[0].model_output - fits[0].surrogate_output  # the fit residual  # doctest: +SKIP
        """
        texts = to_text_list(texts)
        if not texts:
            return []
        segs = []
        for i, t in enumerate(texts):
            _, keep, seg = self._positions(t)
            if not keep:
                raise ValueError(f"text {i} ({t!r}) has no tokens to explain")
            segs.append(seg)
        n = self.n_samples if max_evals == "auto" else int(max_evals)
        return sc.explain_batch(
            self.adapter,
            segs,
            method=self.method,
            n_samples=n,
            output=self.output,
            seed=self.seed if seed is None else seed,
            show_progress=not silent,
            **self.fit_options,
        )

    # -- engine scores -> shap rows -----------------------------------------------------------
    def _row(self, text: str, fit: sc.SlalomExplanation, score: str, base: str) -> tuple[np.ndarray, Any]:
        """Per-masker-token values and the base value for one text."""
        if score not in SCORES:
            raise ValueError(f"unknown score {score!r}; choose one of {SCORES}")
        if base not in BASES:
            raise ValueError(f"unknown base {base!r}; choose one of {BASES}")
        n, keep, _ = self._positions(text)
        if len(keep) != fit.n_positions:
            raise ValueError(f"this fit has {fit.n_positions} tokens but the masker gives {len(keep)} for {text!r}")
        k = self._n_outputs(text)
        s = np.asarray(fit.scores(score), dtype=np.float64)
        model_out = np.asarray(fit.model_output, dtype=np.float64)
        reference = np.asarray(fit.base_value, dtype=np.float64)
        if k == 2:
            # One fit of F = log p1/p0 explains both classes: class 0 is -F.
            s = np.stack([s, s] if score == "importance" else [-s, s], axis=1)
            model_out = np.array([-model_out, model_out])
            reference = np.array([-reference, reference])
        elif k > 2 and s.ndim == 1:
            s = np.repeat(s[:, None], k, axis=1)  # importance: one per token, shared by classes
        values = np.zeros((n,) + s.shape[1:])
        values[keep] = s
        if score in ADDITIVE_SCORES:
            if base == "residual":
                expected = model_out - s.sum(axis=0)
            else:
                expected = np.broadcast_to(reference, s.shape[1:]).astype(np.float64)
        else:
            expected = np.zeros(s.shape[1:])
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
        score: str = "contribution",
        base: str = "empty",
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
        fit = None
        if self._prefit and self._prefit[0][0] == text:
            fit = self._prefit.popleft()[1]
        if fit is None:
            fit = self.fit([text], max_evals=max_evals, seed=seed, silent=silent)[0]
        values, expected = self._row(text, fit, score, base)
        return {
            "values": values,
            "expected_values": expected,
            "mask_shapes": self.masker.mask_shapes(text),
            "main_effects": None,
            "clustering": None,
            "error_std": None,
            "output_names": self._output_names(self._n_outputs(text)),
            "slalom": fit,
        }

    def to_explanation(
        self,
        texts: str | Iterable[str],
        fits: Sequence[sc.SlalomExplanation],
        score: str = "contribution",
        base: str = "empty",
    ) -> shap.Explanation:
        """Build the ``shap.Explanation`` of already fitted texts (no model calls).

        Example:
            >>> fits = explainer.fit(texts)  # doctest: +SKIP
            >>> lin = explainer.to_explanation(texts, fits, score="lin")  # doctest: +SKIP
        """
        t0 = time.perf_counter()
        texts = to_text_list(texts)
        if len(texts) != len(fits):
            raise ValueError(f"{len(texts)} texts but {len(fits)} fits")
        if score not in SCORES:
            raise ValueError(f"unknown score {score!r}; choose one of {SCORES}")
        # shap's own __call__ assembles the Explanation (ragged data, token names, output
        # names) exactly as for its explainers; explain_row picks up these fits in order.
        self._prefit = deque(zip(texts, fits))
        try:
            exp = super().__call__(texts, silent=True, score=score, base=base)
        finally:
            self._prefit.clear()
        exp.compute_time = time.perf_counter() - t0 + sum(f.diagnostics.get("total_seconds", 0.0) for f in fits)
        return exp

    def __call__(  # type: ignore[override]
        self,
        *args: Any,
        score: str = "contribution",
        base: str = "empty",
        max_evals: int | Literal["auto"] = "auto",
        seed: int | None = None,
        silent: bool = False,
        main_effects: bool = False,
        error_bounds: bool = False,
        batch_size: int | Literal["auto"] = "auto",
        outputs: Any = None,
    ) -> shap.Explanation:
        """Explain a string or a list of strings; returns one ``shap.Explanation`` (rows = texts).

        Args:
            score: what ``.values`` holds: "contribution" (default, additive), "value",
                "importance", "lin", "removal" or "shapley" (additive, on the surrogate).
            base: "empty" (base value 0) or "residual" (base = model output - sum of values).
            max_evals: model evaluations per text ("auto": the explainer's ``n_samples``).
            seed: overrides the explainer's seed.
            silent: True hides the progress bar.

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
        if score not in SCORES:
            raise ValueError(f"unknown score {score!r}; choose one of {SCORES}")
        if base not in BASES:
            raise ValueError(f"unknown base {base!r}; choose one of {BASES}")
        texts = to_text_list(args[0])
        t0 = time.perf_counter()
        fits = self.fit(texts, max_evals=max_evals, seed=seed, silent=silent)
        exp = self.to_explanation(texts, fits, score=score, base=base)
        exp.compute_time = time.perf_counter() - t0
        return exp

    def explain_scores(
        self,
        texts: str | Iterable[str],
        scores: Sequence[str] = ("contribution", "value", "importance", "lin", "removal"),
        *,
        base: str = "empty",
        max_evals: int | Literal["auto"] = "auto",
        seed: int | None = None,
        silent: bool = True,
    ) -> dict[str, shap.Explanation]:
        """Several scores from one fit: ``{score name: shap.Explanation}``.

        Each entry is a plain Explanation (it survives slicing); a dict of single-row
        Explanations is what ``shap.plots.bar`` takes to compare them side by side, and
        :func:`shap_slalom.plots.value_importance` draws the SLALOM scatter from it.

        Example:
            >>> ex = explainer.explain_scores(["a great movie"])  # doctest: +SKIP
            >>> shap.plots.bar({k: e[0, :, "POSITIVE"] for k, e in ex.items()})  # doctest: +SKIP
        """
        texts = to_text_list(texts)
        t0 = time.perf_counter()
        fits = self.fit(texts, max_evals=max_evals, seed=seed, silent=silent)
        fit_time = time.perf_counter() - t0
        out = {}
        for name in scores:
            exp = self.to_explanation(texts, fits, score=name, base=base)
            exp.compute_time = fit_time
            out[name] = exp
        return out

    @staticmethod
    def fit_summary(fits: Sequence[sc.SlalomExplanation]) -> Any:
        """One row per fitted text: model vs surrogate output, residual, held-out R², cost.

        For k > 2 classes the output columns hold one value per class (centred logits).
        Returns a ``pandas.DataFrame``.

        Example:
            >>> SlalomExplainer.fit_summary(explainer.fit(texts))[["residual", "heldout_r2"]]  # doctest: +SKIP
        """
        import pandas as pd

        rows = []
        for f in fits:
            mo = np.asarray(f.model_output, dtype=np.float64)
            so = np.asarray(f.surrogate_output, dtype=np.float64)

            def plain(x: np.ndarray) -> Any:
                return float(x) if x.ndim == 0 else x.tolist()

            d = f.diagnostics
            rows.append(
                {
                    "tokens": f.n_positions,
                    "model_output": plain(mo),
                    "surrogate_output": plain(so),
                    "residual": plain(mo - so),
                    "heldout_r2": d.get("heldout_r2"),
                    "heldout_mse": d.get("heldout_mse"),
                    "model_evaluations": d.get("model_evaluations"),
                    "seconds": d.get("total_seconds"),
                }
            )
        return pd.DataFrame(rows)
