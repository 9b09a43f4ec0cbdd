"""Comparative benchmark: SLALOM against the usual baselines, side by side, on one model.

``run_benchmark`` loads a classifier (a local Hugging Face folder, or ``"default"`` for the
packaged MiniLM used as a zero-shot sentiment model), picks N texts from a JSON-lines file,
explains every text with every requested method at an equal sample budget, scores each
explanation with :mod:`slalom_core.experiments.evaluation`, and writes tables and plots.

Methods (``--methods`` keys; a row per score in the tables):

==================  ==========================================================================
``slalom-eff``      this engine, short random samples (rows ``/value``, ``/importance``,
                    ``/lin``, ``/removal``: one fit gives all four)
``slalom-fidel``    this engine, deletions from the full text (same four rows)
``slalom-hybrid``   this engine, the default: short samples plus a few deletions, fitted
                    together (same four rows)
``slalom-ana``      this engine, the analytical 2U − 1 design (each unit alone, then each
                    with one reference unit); ignores ``n_samples``
``reference``       PyPI ``slalom-explanations`` 0.1.2 (the authors' code, SLALOM-eff);
                    optional: skipped with a message when not installed
``lime``            ``captum.attr.Lime``, LIME-package style: ridge (alpha 1) on the binary
                    keep/remove vector, cosine kernel of width 25 on that vector
``kernelshap``      ``captum.attr.KernelShap``
``partition``       ``shap.explainers.Partition`` with ``shap.maskers.Text(tokenizer)``
``lig``             ``captum.attr.LayerIntegratedGradients`` on the word-embedding layer
``ixg``             input × gradient on the word embeddings (``LayerGradientXActivation``)
``saliency``        gradient L2 norm on the word embeddings (the paper's "Grad"; unsigned)
``random``          a random ranking
==================  ==========================================================================

Conventions (recorded in ``results.json``):

* **Explained output.** Every method explains the same number: for a binary model the
  log-odds of class 1 (``l1 - l0``), for k > 2 classes the one-vs-rest log-odds of the
  predicted class. Binary attributions are then turned towards the *predicted* class by a
  sign flip, which is exact for every method here (all are linear in the explained output,
  and SLALOM's ``v`` flips with it while ``s`` does not).
* **Faithfulness** (ERASER, DeYoung et al. 2020): the model's probability of the predicted
  class, tokens ranked by attribution (descending; unsigned scores such as importance and
  saliency rank the largest first), bins 1/5/10/20/50 % by default. ``comprehensiveness`` is
  the deletion AOPC (higher is better), ``sufficiency`` the insertion AOPC (lower is better).
* **Removal strategy** (``removal``): ``"delete"`` drops tokens (default), ``"mask"`` /
  ``"pad"`` put the tokenizer's mask / pad id in their place. The same strategy is used by
  the metric and by the perturbation baselines (Captum: baseline value = a sentinel that the
  forward wrapper drops, or the replacement id; SHAP: the masker's ``mask_token`` is ``""``
  or the mask / pad token). SLALOM (this engine and the reference) always samples by deletion.
* **Equal budgets.** ``n_samples`` model evaluations for SLALOM-eff / -fidel, the reference,
  LIME, KernelSHAP and Partition (``max_evals``); IG uses ``lig_steps`` steps; gradients one
  backward pass. Every model call goes through a counter, so the tables show what each
  method really used.
* **Human attention** (Yelp-HAT style rows with ``words`` and ``human_attention``): each
  sub-token inherits its word's label; ROC-AUC / AUPRC of ``|score|`` for signed scores and
  of the raw score for unsigned ones (SLALOM importance, saliency), as in the paper.
* **Naive Bayes** (``nb_train``): log-count ratios of token ids on a labelled training file
  (Laplace α = 40, App. E.3); Spearman ρ with scores oriented to class 1, against ``|NB|``
  for unsigned scores. Binary models only.

captum and shap are imported inside the functions that run them, never at module level, so
``import slalom_core`` stays free of both.

Example:
    >>> from slalom_core.experiments.bench import BenchConfig, run_benchmark
    >>> cfg = BenchConfig(model="default", data="imdb_test.jsonl", out="bench_out",
    ...                   n=5, min_tokens=120, max_tokens=250, n_samples=500,
    ...                   methods=("slalom-eff", "lime", "random"))  # doctest: +SKIP
    >>> result = run_benchmark(cfg)  # doctest: +SKIP
    >>> print(result.markdown)  # doctest: +SKIP
"""

from __future__ import annotations

import csv
import json
import math
import os
import platform
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..api import explain_batch
from ..link import OutputLink
from ..models import HFClassifier, model_session, score_matrix
from . import evaluation as ev
from .baselines import RUNNERS, SLALOM_SCORES, MethodSkipped, check_available
from .data import read_jsonl

__all__ = [
    "METHODS",
    "DEFAULT_METHODS",
    "METRICS",
    "BenchConfig",
    "Instance",
    "BenchResult",
    "MethodSkipped",
    "read_jsonl",
    "load_model",
    "select_instances",
    "build_nb_table",
    "run_benchmark",
    "summarise",
    "format_markdown",
]

# ----------------------------------------------------------------------------------------
# Method registry
# ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MethodInfo:
    """How one ``--methods`` key is run and reported.

    Attributes:
        key: the name on the command line.
        label: row name (``label/score`` when the method gives several scores).
        family: "slalom", "reference", "captum", "shap" or "baseline".
        scores: the scores one run yields.
        unsigned: scores without a direction (ranked as is, not flipped, |NB| for NB ρ).
        budget: what ``n_samples`` (or the steps) mean for this method.
    """

    key: str
    label: str
    family: str
    scores: tuple[str, ...]
    unsigned: frozenset[str]
    budget: str

    def row_name(self, score: str) -> str:
        return self.label if len(self.scores) == 1 else f"{self.label}/{score}"


METHODS: dict[str, MethodInfo] = {
    m.key: m
    for m in (
        MethodInfo(
            "slalom-eff",
            "slalom-eff",
            "slalom",
            SLALOM_SCORES,
            frozenset({"importance"}),
            "n_samples short random sequences",
        ),
        MethodInfo(
            "slalom-fidel",
            "slalom-fidel",
            "slalom",
            SLALOM_SCORES,
            frozenset({"importance"}),
            "n_samples deletions from the full text",
        ),
        MethodInfo(
            "slalom-hybrid",
            "slalom-hybrid",
            "slalom",
            SLALOM_SCORES,
            frozenset({"importance"}),
            "n_samples: short random sequences plus a few deletions from the full text",
        ),
        MethodInfo(
            "slalom-ana",
            "slalom-ana",
            "slalom",
            SLALOM_SCORES,
            frozenset({"importance"}),
            "2U-1 evaluations, whatever n_samples says",
        ),
        MethodInfo(
            "reference",
            "reference-eff",
            "reference",
            SLALOM_SCORES,
            frozenset({"importance"}),
            "n_samples (slalom-explanations 0.1.2 defaults otherwise)",
        ),
        MethodInfo("lime", "captum-lime", "captum", ("attribution",), frozenset(), "n_samples perturbations"),
        MethodInfo(
            "kernelshap", "captum-kernelshap", "captum", ("attribution",), frozenset(), "n_samples perturbations"
        ),
        MethodInfo("partition", "shap-partition", "shap", ("attribution",), frozenset(), "max_evals = n_samples"),
        MethodInfo("lig", "captum-lig", "captum", ("attribution",), frozenset(), "lig_steps interpolation steps"),
        MethodInfo("ixg", "captum-ixg", "captum", ("attribution",), frozenset(), "1 forward + backward"),
        MethodInfo(
            "saliency",
            "captum-saliency",
            "captum",
            ("attribution",),
            frozenset({"attribution"}),
            "1 forward + backward",
        ),
        MethodInfo("random", "random", "baseline", ("attribution",), frozenset(), "no model calls"),
    )
}
DEFAULT_METHODS: tuple[str, ...] = (
    "slalom-eff",
    "slalom-fidel",
    "reference",
    "lime",
    "kernelshap",
    "partition",
    "lig",
    "saliency",
    "random",
)
#: Metrics reported per row, in table order.
METRICS: tuple[str, ...] = (
    "comprehensiveness",
    "sufficiency",
    "deletion_curve_aopc",
    "insertion_curve_aopc",
    "hat_auc",
    "hat_auprc",
    "nb_spearman",
)
_METRIC_HEADERS = {
    "comprehensiveness": "deletion AOPC ↑",
    "sufficiency": "insertion AOPC ↓",
    "hat_auc": "HAT ROC-AUC ↑",
    "hat_auprc": "HAT AUPRC ↑",
    "nb_spearman": "NB Spearman ↑",
}
_REMOVALS = ("delete", "mask", "pad")
# Captum writes the baseline value into removed positions; the forward wrapper drops this
# value again, which turns "replace by baseline" into real token deletion. -1 is never a
# token id, so a real token cannot be mistaken for it.


# ----------------------------------------------------------------------------------------
# Configuration, data
# ----------------------------------------------------------------------------------------


@dataclass
class BenchConfig:
    """Everything one benchmark run depends on (saved as ``results.json``).

    Attributes:
        model: a local Hugging Face sequence-classifier folder, or "default" (the packaged
            MiniLM zero-shot sentiment model).
        data: a JSON-lines file (``.jsonl`` or ``.jsonl.gz``) with ``text`` and ``label``;
            ``words`` plus ``attention_field`` enable the human-attention metrics.
        out: output folder.
        methods: keys of :data:`METHODS`.
        n: texts to explain.
        min_tokens / max_tokens: token-count window (without special tokens); max defaults
            to what the model accepts.
        n_samples: sample budget of the sampling methods.
        seed: selection of texts and every method's randomness.
        device: torch device for the model (default: where it is).
        removal: "delete", "mask" or "pad" (see module notes).
        bins: ERASER fractions for comprehensiveness / sufficiency.
        curve_fractions: x-axis of the deletion / insertion curves.
        nb_train: labelled JSON-lines file for the Naive-Bayes table (None: no NB metric).
        nb_alpha: Laplace smoothing of the NB table.
        nb_max_docs: use at most this many training documents (None: all).
        attention_field: per-word 0/1 labels ("human_attention" = majority of 3 annotators
            in ../shared/data; "human_attention_all" = all three).
        batch_size: sequences per forward pass for the baselines (full-length samples).
        slalom_batch_size: sequences per forward pass for SLALOM-eff, whose samples are a
            few tokens long (None: ``batch_size``; SLALOM-fidel's samples are full-length
            and always use ``batch_size``).
        lig_steps: integrated-gradients steps.
        slalom_batch: texts per ``explain_batch`` call for SLALOM (1: one text at a time, the
            same footing as the baselines; more: shared batches, time split evenly).
        slalom_options: fitter options for SLALOM-eff / -fidel, passed to
            ``explain_batch`` (e.g. ``{"sample_length": 3}``); options a fitter does not
            take are left out for it.
        threads: ``torch.set_num_threads`` (None: leave as is).
        progress: show a tqdm bar over (text, method) runs.
    """

    model: str = "default"
    data: str = ""
    out: str = "bench_output"
    methods: tuple[str, ...] = DEFAULT_METHODS
    n: int = 10
    min_tokens: int = 1
    max_tokens: int | None = None
    n_samples: int = 1000
    seed: int = 0
    device: str | None = None
    removal: str = "delete"
    bins: tuple[float, ...] = ev.ERASER_BINS
    curve_fractions: tuple[float, ...] = ev.CURVE_FRACTIONS
    nb_train: str | None = None
    nb_alpha: float = 40.0
    nb_max_docs: int | None = None
    attention_field: str = "human_attention"
    batch_size: int = 64
    slalom_batch_size: int | None = None
    lig_steps: int = 50
    slalom_batch: int = 1
    slalom_options: dict[str, Any] = field(default_factory=dict)
    threads: int | None = None
    progress: bool = True

    def validate(self) -> None:
        """Raise ``ValueError`` on an inconsistent configuration."""
        unknown = [m for m in self.methods if m not in METHODS]
        if unknown:
            raise ValueError(f"unknown method(s) {unknown}; choose from {sorted(METHODS)}")
        if not self.methods:
            raise ValueError("no methods to run")
        if self.removal not in _REMOVALS:
            raise ValueError(f"removal must be one of {_REMOVALS}, got {self.removal!r}")
        if self.slalom_batch_size is not None and self.slalom_batch_size < 1:
            raise ValueError("slalom_batch_size must be >= 1")
        for name in ("n", "n_samples", "batch_size", "lig_steps", "slalom_batch", "min_tokens"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1")
        if self.max_tokens is not None and self.max_tokens < self.min_tokens:
            raise ValueError("max_tokens must be >= min_tokens")
        self._check_slalom_options()

    def _check_slalom_options(self) -> None:
        """Every SLALOM option is taken, with a valid value, by a SLALOM method that is run.

        An option no fitter takes would otherwise be dropped while the run records it as used.
        """
        from ..fitting import get_fitter

        if not self.slalom_options:
            return
        fitters = [m.split("-", 1)[1] for m in self.methods if METHODS[m].family == "slalom"]
        if not fitters:
            raise ValueError(f"slalom options {sorted(self.slalom_options)} given, but no SLALOM method is run")
        taken: set[str] = set()
        for name in fitters:
            options = _fitter_options(name, self.slalom_options)
            get_fitter(name, **options)  # the values, checked before any model is loaded
            taken |= set(options)
        unused = sorted(set(self.slalom_options) - taken)
        if unused:
            raise ValueError(
                f"slalom option(s) {unused} are taken by none of the SLALOM methods run ({', '.join(fitters)}); "
                "see each fitter's OPTIONS (slalom_core.FITTERS[name].OPTIONS)"
            )


@dataclass
class Instance:
    """One selected text and everything the metrics need about it.

    Attributes:
        index: position in the benchmark (0..N-1).
        id: the row's ``id`` field, else its line number.
        text: the text.
        label: the gold label (None if absent).
        token_ids: the tokenizer's ids without special tokens: every method explains these
            positions, so scores line up.
        tokens: token strings.
        target: the class predicted on the full text (the class being explained).
        full_probability: the model's probability of ``target`` on the full text.
        attention: per-token human-attention labels (NaN = unmapped), or None.
    """

    index: int
    id: Any
    text: str
    label: int | None
    token_ids: list[int]
    tokens: list[str]
    target: int = 0
    full_probability: float = float("nan")
    attention: np.ndarray | None = None

    @property
    def n_tokens(self) -> int:
        return len(self.token_ids)


def load_model(spec: str, *, device: str | None = None) -> tuple[torch.nn.Module, object, str]:
    """The classifier, its tokenizer and a display name, in eval mode, offline.

    Args:
        spec: a packaged demo model's name ("default" = the MiniLM with its trained IMDB
            adapter, "zeroshot"), otherwise a local folder written by ``save_pretrained``
            (never downloaded).
        device: move the model there.

    Example:
        >>> model, tok, name = load_model("default")  # doctest: +SKIP
    """
    from .demo_model import load_model as load

    return load(spec, device=device, local_files_only=True)


def _n_classes(adapter: HFClassifier) -> int:
    return int(adapter.score([[]] if adapter.prefix_ids or adapter.suffix_ids else [[adapter.pad_id]]).shape[1])


def select_instances(
    rows: Sequence[dict],
    tokenizer: object,
    *,
    n: int,
    min_tokens: int = 1,
    max_tokens: int | None = None,
    seed: int = 0,
    attention_field: str = "human_attention",
) -> list[Instance]:
    """Pick ``n`` rows whose token count lies in ``[min_tokens, max_tokens]``, at random.

    Rows are visited in a seeded random order and the first ``n`` that fit are kept (then
    put back in file order), so the choice is reproducible and the file is tokenized only as
    far as needed. Rows with ``words`` and ``attention_field`` get per-token attention labels
    (each sub-token inherits its word's label; needs a fast tokenizer for the offsets).

    Example:
        >>> inst = select_instances(rows, tok, n=5, min_tokens=120, max_tokens=250)  # doctest: +SKIP
    """
    rng = np.random.default_rng(seed)
    chosen: list[tuple[int, dict, list[int], list | None]] = []
    fast = bool(getattr(tokenizer, "is_fast", False))
    for i in rng.permutation(len(rows)).tolist():
        row = rows[i]
        text = row.get("text")
        if not isinstance(text, str) or not text.strip():
            continue
        enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=fast, verbose=False)
        ids = list(enc["input_ids"])
        if not (min_tokens <= len(ids) <= (max_tokens if max_tokens is not None else len(ids))):
            continue
        chosen.append((i, row, ids, list(enc["offset_mapping"]) if fast else None))
        if len(chosen) == n:
            break
    chosen.sort(key=lambda c: c[0])
    out = []
    for k, (i, row, ids, offsets) in enumerate(chosen):
        attention = None
        if attention_field in row and "words" in row and offsets is not None:
            word_ids = ev.word_ids_from_offsets(offsets, row["text"], row["words"])
            attention = ev.word_labels_to_tokens(row[attention_field], word_ids)
        label = row.get("label")
        out.append(
            Instance(
                index=k,
                id=row.get("id", i),
                text=row["text"],
                label=None if label is None else int(label),
                token_ids=ids,
                tokens=list(tokenizer.convert_ids_to_tokens(ids)),
                attention=attention,
            )
        )
    return out


def build_nb_table(
    path: str | os.PathLike,
    tokenizer: object,
    *,
    alpha: float = 40.0,
    max_docs: int | None = None,
) -> dict[int, float]:
    """Naive-Bayes log-count ratios of the tokenizer's ids on a labelled JSON-lines file.

    Example:
        >>> nb = build_nb_table("../shared/data/imdb_train.jsonl.gz", tok)  # doctest: +SKIP
        >>> nb[tok.convert_tokens_to_ids("great")] > 0  # doctest: +SKIP
        True
    """
    rows = read_jsonl(path)
    if max_docs is not None:
        rows = rows[:max_docs]
    texts = [r["text"] for r in rows]
    labels = [int(r["label"]) for r in rows]
    docs = tokenizer(texts, add_special_tokens=False, verbose=False)["input_ids"]
    return ev.naive_bayes_log_ratios(docs, labels, alpha=alpha)


# ----------------------------------------------------------------------------------------
# Running the model
# ----------------------------------------------------------------------------------------


class _Context:
    """The model seen by every method, with one call counter shared by all of them."""

    def __init__(self, config: BenchConfig, model: torch.nn.Module, tokenizer: object) -> None:
        self.config = config
        self.model = model
        self.tokenizer = tokenizer
        self.adapter = HFClassifier(model, tokenizer, batch_size=config.batch_size)
        self.slalom_adapter = HFClassifier(model, tokenizer, batch_size=config.slalom_batch_size or config.batch_size)
        self.n_classes = _n_classes(self.adapter)
        self.evaluations = 0  # sequences sent to the model by the method being timed
        if config.removal == "delete":
            self.strategy, self.replacement_id = "delete", None
        else:
            attr = "mask_token_id" if config.removal == "mask" else "pad_token_id"
            rid = getattr(tokenizer, attr, None)
            if rid is None:
                raise ValueError(f"removal={config.removal!r} but the tokenizer has no {attr}")
            self.strategy, self.replacement_id = "replace", int(rid)

    @property
    def binary(self) -> bool:
        return self.n_classes <= 2

    @property
    def device(self) -> torch.device:
        params = list(self.model.parameters())
        return params[0].device if params else torch.device("cpu")

    # The explained output and the metric's probability, from raw outputs -------------
    def explained_from_logits(self, logits: torch.Tensor, target: int) -> torch.Tensor:
        """log-odds of class 1 (binary) or one-vs-rest log-odds of ``target`` (k > 2)."""
        # The engine's link, so that every baseline explains the number SLALOM fits; a
        # binary model's target only flips the sign afterwards (see ``sign``).
        link = OutputLink(self.n_classes, "logits", target=None if self.binary else target, multiclass="ovr")
        return link.transform(logits)

    def probabilities(self, logits: torch.Tensor) -> torch.Tensor:
        if self.n_classes == 1:
            p1 = torch.sigmoid(logits[:, 0])
            return torch.stack([1 - p1, p1], dim=1)
        return torch.softmax(logits, dim=1)

    def explained_class(self, inst: Instance) -> int | None:
        """SLALOM's ``target``: None (class 1 log-odds) for binary models."""
        return None if self.binary else inst.target

    def sign(self, inst: Instance) -> float:
        """+1 if the explained output points to the predicted class, else -1."""
        return -1.0 if self.binary and inst.target == 0 else 1.0

    def _rows(self, sequences: Sequence[Sequence[int]]) -> list[list[int]]:
        if self.adapter.prefix_ids or self.adapter.suffix_ids:
            return [list(s) for s in sequences]
        # A model without special tokens cannot read an empty text: give it one pad.
        return [list(s) if len(s) else [self.adapter.pad_id] for s in sequences]

    def log_odds(self, sequences: Sequence[Sequence[int]], inst: Instance) -> np.ndarray:
        """The explained output for token-id sequences (no special tokens); counted."""
        self.evaluations += len(sequences)
        raw = self.adapter.score(self._rows(sequences))
        return self.explained_from_logits(raw, self.explained_class(inst) or 0).numpy()

    def metric_predictor(self) -> Callable[[list[list[int]]], np.ndarray]:
        """``predict`` for the evaluation functions: P(target) per sequence, memoised.

        Many methods rank alike on a text, so their perturbed sequences repeat: the cache
        makes the metrics cheaper without changing them. Not counted as method calls.
        """
        cache: dict[tuple[int, ...], np.ndarray] = {}

        def probs(seqs: list[list[int]]) -> np.ndarray:
            missing = [s for s in dict.fromkeys(tuple(s) for s in seqs) if s not in cache]
            if missing:
                p = self.probabilities(self.adapter.score(self._rows(missing))).numpy()
                for s, row in zip(missing, p):
                    cache[s] = row
            return np.stack([cache[tuple(s)] for s in seqs])

        return probs

    def forward_logits(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Differentiable logits for full sequences (special tokens included); counted."""
        self.evaluations += int(input_ids.shape[0])
        return score_matrix(self.adapter.forward(input_ids, attention_mask), int(input_ids.shape[0]))

    def framed(self, ids: Sequence[int]) -> tuple[torch.Tensor, int]:
        """(1, L) tensor with special tokens, and the offset of the first text token."""
        pre, suf = list(self.adapter.prefix_ids), list(self.adapter.suffix_ids)
        return torch.tensor([pre + list(ids) + suf], dtype=torch.long, device=self.device), len(pre)


# ----------------------------------------------------------------------------------------
# The explainers: each returns {score name: per-position array} for the explained output
# ----------------------------------------------------------------------------------------

Scores = dict[str, np.ndarray]


def _run_slalom(ctx: _Context, insts: Sequence[Instance], method: str) -> list[tuple[Scores, dict]]:
    """One ``explain_batch`` call for these texts (one text: per-text timing)."""
    target = ctx.explained_class(insts[0])
    if not ctx.binary and len({i.target for i in insts}) > 1:
        # One-vs-rest targets differ per text: a batch needs one target; run singly.
        return [r for inst in insts for r in _run_slalom(ctx, [inst], method)]
    # eff and ana send short sequences: they get the short-sample batch size.
    adapter = ctx.slalom_adapter if method in ("eff", "ana") else ctx.adapter
    exps = explain_batch(
        adapter,
        [i.token_ids for i in insts],
        method=method,
        n_samples=ctx.config.n_samples,
        target=target,
        seed=ctx.config.seed,
        **_fitter_options(method, ctx.config.slalom_options),
    )
    out = []
    for e in exps:
        scores = {name: np.asarray(e.scores(name), dtype=float) for name in SLALOM_SCORES}
        d = e.diagnostics
        # Where the time went (model passes vs the engine's own work), for the tables' notes.
        out.append(
            (
                scores,
                {
                    "model_evaluations": int(d["model_evaluations"]),
                    "heldout_r2": float(d.get("heldout_r2", float("nan"))),
                    "model_seconds": float(d.get("model_seconds", float("nan"))),
                    "fit_seconds": float(d.get("fit_seconds", float("nan"))),
                },
            )
        )
    return out


def _fitter_options(method: str, options: dict[str, Any]) -> dict[str, Any]:
    """The subset of ``options`` that this fitter declares (the rest is for other fitters)."""
    from ..fitting import FITTERS

    return {k: v for k, v in options.items() if k in FITTERS[method].OPTIONS}


def _warm_up(ctx: _Context, key: str, inst: Instance) -> None:
    """Run ``key`` once, untimed, on the first few words of ``inst`` with a small budget."""
    import dataclasses

    text = " ".join(inst.text.split()[:4])
    ids = list(ctx.tokenizer(text, add_special_tokens=False)["input_ids"])
    if not ids:
        return
    dummy = dataclasses.replace(inst, index=-1, text=text, token_ids=ids, tokens=[str(i) for i in ids], attention=None)
    config = ctx.config
    ctx.config = dataclasses.replace(config, n_samples=min(config.n_samples, max(16, 2 * len(ids) + 2)), lig_steps=2)
    try:
        if METHODS[key].family == "slalom":
            _run_slalom(ctx, [dummy], key.split("-", 1)[1])
        else:
            RUNNERS[key](ctx, dummy)
    except Exception:
        pass  # a real failure shows up, with its message, in the timed run
    finally:
        ctx.config = config
        ctx.evaluations = 0


# ----------------------------------------------------------------------------------------
# Scoring one explanation
# ----------------------------------------------------------------------------------------


def _evaluate(
    ctx: _Context,
    inst: Instance,
    info: MethodInfo,
    score: str,
    values: np.ndarray,
    predict: Callable,
    nb_table: dict[int, float] | None,
) -> tuple[dict[str, float], dict[str, Any]]:
    values = np.asarray(values, dtype=float).reshape(-1)
    if values.shape[0] != inst.n_tokens:
        raise RuntimeError(f"{info.row_name(score)} gave {values.shape[0]} scores for {inst.n_tokens} tokens")
    unsigned = score in info.unsigned
    # Towards the predicted class; unsigned scores have no direction to flip.
    oriented = values if unsigned else ctx.sign(inst) * values
    if not np.all(np.isfinite(oriented)):
        # A degenerate explanation (e.g. a failed fit) cannot be ranked: record nan.
        return {m: float("nan") for m in METRICS}, {"error": "non-finite scores"}
    rep = ev.faithfulness_metrics(
        _predict_target(predict, inst.target),
        inst.token_ids,
        oriented,
        bins=ctx.config.bins,
        curve_fractions=ctx.config.curve_fractions,
        strategy=ctx.strategy,
        replacement_id=ctx.replacement_id,
    )
    metrics = rep.as_metrics()
    if inst.attention is not None:
        agr = ev.human_attention_agreement(values, inst.attention, absolute=not unsigned)
        metrics["hat_auc"], metrics["hat_auprc"] = agr.roc_auc, agr.auprc
    if nb_table is not None and ctx.binary:
        # NB log-ratios point to class 1, like the explained output before the flip.
        rho = ev.nb_spearman(inst.token_ids, values, nb_table, absolute_nb=unsigned)
        metrics["nb_spearman"] = rho.rho
    curves = {"deletion": rep.deletion_curve, "insertion": rep.insertion_curve}
    return metrics, curves


def _predict_target(predict: Callable, target: int) -> Callable[[list[list[int]]], np.ndarray]:
    """The metric's ``predict`` for one class from a memoised all-class predictor."""
    return lambda seqs: predict(seqs)[:, target]


# ----------------------------------------------------------------------------------------
# The run
# ----------------------------------------------------------------------------------------


@dataclass
class BenchResult:
    """What :func:`run_benchmark` produced.

    Attributes:
        config: the configuration (as run).
        instances: the selected texts.
        results: one :class:`slalom_core.experiments.evaluation.InstanceResult` per (row, text).
        summary: one dict per row (see :func:`summarise`).
        skipped: ``{method key: reason}`` for methods that could not run.
        errors: ``[(row, instance id, message)]`` for single runs that failed.
        markdown: the results table as markdown.
        files: output paths by name.
        info: model name, machine, accuracy on the selected texts, ...
    """

    config: BenchConfig
    instances: list[Instance]
    results: list[ev.InstanceResult]
    summary: list[dict[str, Any]]
    skipped: dict[str, str]
    errors: list[tuple[str, Any, str]]
    markdown: str
    files: dict[str, str]
    info: dict[str, Any] = field(default_factory=dict)


def _machine_info(ctx: _Context) -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "device": str(ctx.device),
        "load_average": os.getloadavg() if hasattr(os, "getloadavg") else None,
    }


def run_benchmark(
    config: BenchConfig,
    *,
    model: torch.nn.Module | None = None,
    tokenizer: object | None = None,
    model_name: str | None = None,
    write: bool = True,
) -> BenchResult:
    """Explain ``config.n`` texts with every method, score them, write tables and plots.

    Args:
        config: see :class:`BenchConfig`.
        model / tokenizer: an already loaded classifier (then ``config.model`` is only a
            label); default: :func:`load_model` of ``config.model``.
        model_name: display name for a model passed directly.
        write: write ``results.csv``, ``instances.csv``, ``results.md``, ``results.json``,
            ``deletion_curves.png``, ``insertion_curves.png`` and ``time_vs_aopc.png``
            into ``config.out``.

    Returns:
        A :class:`BenchResult`.

    Example:
        >>> res = run_benchmark(BenchConfig(model="default", data="imdb_test.jsonl",
        ...                                 n=3, n_samples=300, methods=("slalom-eff", "random")))  # doctest: +SKIP
        >>> [r["method"] for r in res.summary][:2]  # doctest: +SKIP
        ['slalom-eff/value', 'slalom-eff/importance']
    """
    config.validate()
    config.methods = tuple(dict.fromkeys(config.methods))
    if config.threads:
        torch.set_num_threads(int(config.threads))
    if model is None:
        model, tokenizer, name = load_model(config.model, device=config.device)
        return _run(config, model, tokenizer, name, write)
    if tokenizer is None:
        raise ValueError("a model passed directly needs its tokenizer")
    # The caller's model: run in eval mode (on config.device) and given back as it came,
    # every submodule's mode and its device restored, even if the benchmark fails.
    with model_session(model, config.device):
        return _run(config, model, tokenizer, model_name or config.model, write)


def _run(config: BenchConfig, model: torch.nn.Module, tokenizer: object, name: str, write: bool) -> BenchResult:
    """The body of :func:`run_benchmark` once the model is loaded (and in eval mode)."""
    ctx = _Context(config, model, tokenizer)

    limit = None
    if ctx.adapter.max_length is not None:
        limit = ctx.adapter.max_length - len(ctx.adapter.prefix_ids) - len(ctx.adapter.suffix_ids)
    max_tokens = (
        limit if config.max_tokens is None else (config.max_tokens if limit is None else min(config.max_tokens, limit))
    )
    rows = read_jsonl(config.data)
    instances = select_instances(
        rows,
        tokenizer,
        n=config.n,
        min_tokens=config.min_tokens,
        max_tokens=max_tokens,
        seed=config.seed,
        attention_field=config.attention_field,
    )
    if not instances:
        raise ValueError(f"no text in {config.data} has between {config.min_tokens} and {max_tokens} tokens")
    if len(instances) < config.n:
        print(f"note: only {len(instances)} texts fit the token window", file=sys.stderr)

    nb_table = None
    if config.nb_train:
        if ctx.binary:
            nb_table = build_nb_table(config.nb_train, tokenizer, alpha=config.nb_alpha, max_docs=config.nb_max_docs)
        else:
            print("note: NB Spearman needs a binary model; skipped", file=sys.stderr)

    predictors = {}
    # Warm-up (thread pools, lazy init) so that the first timed method is not penalised,
    # and the target of every text: the class the model predicts on the full text.
    for inst in instances:
        predictors[inst.index] = ctx.metric_predictor()
        p = predictors[inst.index]([inst.token_ids])[0]
        inst.target = int(np.argmax(p))
        inst.full_probability = float(p[inst.target])
    ctx.adapter.score([inst.token_ids[:3] for inst in instances[:8]])

    skipped: dict[str, str] = {}
    runnable = []
    for key in config.methods:
        try:
            check_available(key, METHODS[key].family, ctx)
            runnable.append(key)
        except MethodSkipped as err:
            skipped[key] = str(err)
            print(f"skipping {key}: {err}", file=sys.stderr)

    # First calls pay one-off costs (shap's numba JIT takes ~10 s, lazy imports, autograd
    # set-up): run every method once on a few words, untimed, so no method is charged.
    for key in list(runnable):
        _warm_up(ctx, key, instances[0])

    results: list[ev.InstanceResult] = []
    curves: dict[str, dict[str, list]] = {}
    errors: list[tuple[str, Any, str]] = []
    from tqdm.auto import tqdm

    bar = tqdm(total=len(instances) * len(runnable), desc="bench", disable=not config.progress, unit="run")

    def record(key: str, inst: Instance, scores: Scores, seconds: float, n_eval: int | None, extra: dict) -> None:
        info = METHODS[key]
        for score in info.scores:
            row = info.row_name(score)
            try:
                metrics, cur = _evaluate(ctx, inst, info, score, scores[score], predictors[inst.index], nb_table)
            except Exception as err:  # one bad row must not end a long run
                errors.append((row, inst.id, f"{type(err).__name__}: {err}"))
                continue
            for mode, c in cur.items():
                if c is not None:
                    curves.setdefault(row, {}).setdefault(mode, []).append(c)
            results.append(
                ev.InstanceResult(
                    row,
                    metrics,
                    seconds=seconds,
                    model_evaluations=n_eval,
                    instance_id=inst.id,
                    extra={"n_tokens": inst.n_tokens, "target": inst.target, **extra},
                )
            )

    for key in runnable:
        if METHODS[key].family != "slalom":
            continue
        method = key.split("-", 1)[1]
        for start in range(0, len(instances), config.slalom_batch):
            group = instances[start : start + config.slalom_batch]
            bar.set_postfix_str(key)
            t0 = time.perf_counter()
            try:
                outs = _run_slalom(ctx, group, method)
            except Exception as err:
                for inst in group:
                    errors.append((key, inst.id, f"{type(err).__name__}: {err}"))
                bar.update(len(group))
                continue
            per_text = (time.perf_counter() - t0) / len(group)
            for inst, (scores, extra) in zip(group, outs):
                record(key, inst, scores, per_text, extra.pop("model_evaluations"), extra)
            bar.update(len(group))

    for inst in instances:
        for key in runnable:
            if METHODS[key].family == "slalom":
                continue
            bar.set_postfix_str(key)
            ctx.evaluations = 0
            t0 = time.perf_counter()
            try:
                scores, extra = RUNNERS[key](ctx, inst)
            except MethodSkipped as err:
                skipped.setdefault(key, str(err))
                bar.update(1)
                continue
            except Exception as err:
                errors.append((key, inst.id, f"{type(err).__name__}: {err}"))
                bar.update(1)
                continue
            seconds = time.perf_counter() - t0
            record(key, inst, scores, seconds, ctx.evaluations, extra)
            bar.update(1)
    bar.close()
    for row, iid, msg in errors:
        print(f"error: {row} on {iid}: {msg}", file=sys.stderr)

    info = {
        "model_name": name,
        "n_classes": ctx.n_classes,
        "explained_output": "log-odds of class 1, flipped towards the predicted class"
        if ctx.binary
        else "one-vs-rest log-odds of the predicted class",
        "removal": {"strategy": ctx.strategy, "replacement_id": ctx.replacement_id, "name": config.removal},
        "n_instances": len(instances),
        "mean_tokens": float(np.mean([i.n_tokens for i in instances])),
        "accuracy": _accuracy(instances),
        "has_attention": any(i.attention is not None for i in instances),
        "nb_table_size": None if nb_table is None else len(nb_table),
        "machine": _machine_info(ctx),
    }
    summary = summarise(results)
    markdown = format_markdown(summary, config=config, info=info, skipped=skipped, errors=errors)
    files: dict[str, str] = {}
    if write:
        files = _write_outputs(config, summary, results, curves, markdown, info, skipped, errors, instances)
    return BenchResult(config, instances, results, summary, skipped, errors, markdown, files, info)


def _accuracy(instances: Sequence[Instance]) -> float | None:
    labelled = [i for i in instances if i.label is not None]
    if not labelled:
        return None
    return float(np.mean([i.target == i.label for i in labelled]))


# ----------------------------------------------------------------------------------------
# Aggregation and outputs
# ----------------------------------------------------------------------------------------


def summarise(results: Sequence[ev.InstanceResult]) -> list[dict[str, Any]]:
    """One flat dict per row: ``<metric>_mean``, ``<metric>_se``, ``n``, runtime and calls.

    Metrics that are nan for every text of a row (e.g. no human attention in the data)
    come out as nan. Seconds and model evaluations are reported as median and mean.

    Example:
        >>> rows = summarise([ev.InstanceResult("a", {"comprehensiveness": 0.5}, seconds=1.0, model_evaluations=10)])
        >>> rows[0]["comprehensiveness_mean"], rows[0]["seconds_median"]
        (0.5, 1.0)
    """
    agg = ev.aggregate_results(results, metrics=[*METRICS, "seconds", "model_evaluations"])
    by_method: dict[str, dict[str, Any]] = {}
    for r in agg:
        row = by_method.setdefault(r["method"], {"method": r["method"]})
        m = r["metric"]
        if m in ("seconds", "model_evaluations"):
            row[f"{m}_median"] = r["median"]
            row[f"{m}_mean"] = r["mean"]
            row[f"{m}_se"] = r["se"]
            if m == "seconds":
                row["n"] = r["n"]
        else:
            row[f"{m}_mean"] = r["mean"]
            row[f"{m}_se"] = r["se"]
            row[f"{m}_n"] = r["n"]
    return list(by_method.values())


def _fmt(mean: float, se: float, digits: int = 3) -> str:
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return "–"
    # "-0.000" is a rounding artefact: print it as 0.
    m = f"{mean:.{digits}f}".replace("-0." + "0" * digits, "0." + "0" * digits)
    if se is None or math.isnan(se):
        return m
    return f"{m} ± {se:.{digits}f}"


def format_markdown(
    summary: Sequence[dict[str, Any]],
    *,
    config: BenchConfig | None = None,
    info: dict[str, Any] | None = None,
    skipped: dict[str, str] | None = None,
    errors: Sequence[tuple[str, Any, str]] | None = None,
) -> str:
    """The results table (mean ± s.e. per metric, median seconds and model evaluations).

    Columns for human attention and NB Spearman appear only when some row has them.

    Example:
        >>> print(format_markdown(summarise([ev.InstanceResult("a", {"comprehensiveness": 0.5}, seconds=1.0)])))  # doctest: +ELLIPSIS
        | method | deletion AOPC ↑ | ...
    """
    cols = ["comprehensiveness", "sufficiency"]
    for m in ("hat_auc", "hat_auprc", "nb_spearman"):
        if any(not math.isnan(r.get(f"{m}_mean", float("nan"))) for r in summary):
            cols.append(m)
    head = ["method", *[_METRIC_HEADERS[c] for c in cols], "s / explanation (median)", "model evals (median)", "n"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in summary:
        cells = [r["method"], *[_fmt(r.get(f"{c}_mean"), r.get(f"{c}_se")) for c in cols]]
        sec = r.get("seconds_median", float("nan"))
        cells.append("–" if math.isnan(sec) else f"{sec:.3g}")
        ev_med = r.get("model_evaluations_median", float("nan"))
        cells.append("–" if math.isnan(ev_med) else f"{ev_med:.0f}")
        cells.append(str(r.get("n", 0)))
        lines.append("| " + " | ".join(cells) + " |")
    parts = []
    if config is not None and info is not None:
        m = info.get("machine", {})
        acc = info.get("accuracy")
        parts.append(
            f"Model: {info.get('model_name')} · data: `{config.data}` · {info.get('n_instances')} texts "
            f"({config.min_tokens}–{config.max_tokens or 'max'} tokens, mean {info.get('mean_tokens', float('nan')):.0f}) · "
            f"seed {config.seed} · n_samples {config.n_samples} · IG steps {config.lig_steps} · "
            f"removal `{config.removal}` · bins {list(config.bins)}"
            + (f" · accuracy on these texts {acc:.2f}" if acc is not None else "")
        )
        parts.append(
            f"Machine: {m.get('processor')} ({m.get('cpu_count')} CPUs, torch {m.get('torch')}, "
            f"{m.get('torch_threads')} threads, device {m.get('device')}, load average at the end "
            f"{tuple(round(x, 1) for x in m['load_average']) if m.get('load_average') else 'n/a'})"
        )
        parts.append(
            "Deletion AOPC = ERASER comprehensiveness, insertion AOPC = sufficiency (probability of the "
            "predicted class); mean ± standard error over texts. Seconds are wall time per explanation, "
            "model evaluations are sequences sent to the model by the explainer."
        )
    parts.append("\n".join(lines))
    if skipped:
        parts.append("Skipped:\n" + "\n".join(f"- `{k}`: {v}" for k, v in skipped.items()))
    if errors:
        parts.append("Errors:\n" + "\n".join(f"- `{r}` on `{i}`: {msg}" for r, i, msg in errors))
    return "\n\n".join(parts) + "\n"


def _plot_rows(rows: Sequence[str]) -> list[str]:
    """Rows worth a line in the plots: every baseline, SLALOM's value and lin."""
    keep = []
    for r in rows:
        if "/" in r and r.split("/", 1)[1] not in ("lin", "value"):
            continue
        keep.append(r)
    return keep


def _write_dict_csv(path: Path, rows: Sequence[dict]) -> str:
    """Rows of dicts as CSV; the columns are every key in first-seen order."""
    keys = list(dict.fromkeys(k for r in rows for k in r)) or ["method"]
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)
    return str(path)


def _write_outputs(config, summary, results, curves, markdown, info, skipped, errors, instances) -> dict[str, str]:
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    files = {}

    files["results_csv"] = _write_dict_csv(out / "results.csv", summary)
    rows = [{**r.to_dict(), **{k: v for k, v in r.extra.items() if isinstance(v, (int, float, str))}} for r in results]
    files["instances_csv"] = _write_dict_csv(out / "instances.csv", rows)

    path = out / "results.md"
    path.write_text("# Benchmark results\n\n" + markdown)
    files["results_md"] = str(path)

    mean_curves = {}
    for row, modes in curves.items():
        for mode, cs in modes.items():
            mc = ev.mean_curve(cs)
            mean_curves.setdefault(row, {})[mode] = {
                "fractions": mc["fractions"].tolist(),
                "mean": mc["mean"].tolist(),
                "se": mc["se"].tolist(),
                "n": mc["n"],
            }
    cfg = asdict(config)
    path = out / "results.json"
    path.write_text(
        json.dumps(
            {
                "config": cfg,
                "info": info,
                "summary": summary,
                "skipped": skipped,
                "errors": [list(e) for e in errors],
                "curves": mean_curves,
                "instances": [
                    {
                        "id": i.id,
                        "n_tokens": i.n_tokens,
                        "label": i.label,
                        "target": i.target,
                        "full_probability": i.full_probability,
                    }
                    for i in instances
                ],
            },
            indent=1,
            default=str,
        )
    )
    files["results_json"] = str(path)

    rows_to_plot = _plot_rows(list(mean_curves))
    for mode in ("deletion", "insertion"):
        fig, ax = plt.subplots(figsize=(7, 4.5))
        cmap = plt.get_cmap("tab20")
        for k, row in enumerate(rows_to_plot):
            c = mean_curves.get(row, {}).get(mode)
            if c is None:
                continue
            x = 100 * np.asarray(c["fractions"])
            style = "-" if row.startswith(("slalom", "reference")) else "--"
            ax.plot(x, c["mean"], style, marker="o", ms=3, color=cmap(k % 20), label=row)
        ax.set_xlabel(f"% of tokens {'deleted' if mode == 'deletion' else 'kept'} (highest attribution first)")
        ax.set_ylabel("P(predicted class)")
        ax.set_title(f"{mode.capitalize()} curves ({config.removal}), mean over {len(instances)} texts")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, ncol=2)
        fig.tight_layout()
        path = out / f"{mode}_curves.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        files[f"{mode}_png"] = str(path)

    fig, ax = plt.subplots(figsize=(7, 4.5))
    k = 0
    for r in summary:
        row = r["method"]
        if row not in rows_to_plot or "/value" in row:
            continue
        sec, aopc = r.get("seconds_median", float("nan")), r.get("comprehensiveness_mean", float("nan"))
        if math.isnan(aopc) or math.isnan(sec):
            continue
        se = r.get("comprehensiveness_se", float("nan"))
        ax.errorbar([max(sec, 1e-4)], [aopc], yerr=None if math.isnan(se) else [se], fmt="o", capsize=3)
        # Alternate label offsets: methods of similar cost would print on top of each other.
        ax.annotate(
            row, (max(sec, 1e-4), aopc), textcoords="offset points", xytext=(4, 4 if k % 2 == 0 else -11), fontsize=7
        )
        k += 1
    ax.set_xscale("log")
    ax.set_xlabel("median seconds per explanation (log scale)")
    ax.set_ylabel("deletion AOPC (comprehensiveness) ↑")
    ax.set_title(f"Time vs faithfulness, n_samples = {config.n_samples}")
    ax.grid(alpha=0.3, which="both")
    fig.tight_layout()
    path = out / "time_vs_aopc.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    files["time_png"] = str(path)
    return files
