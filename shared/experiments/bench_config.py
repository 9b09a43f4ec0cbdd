"""What a benchmark run is asked to do: the methods it can run (one row per score in the
tables), the metrics it reports and its configuration, :class:`BenchConfig`.

The runner (:mod:`slalom_core.experiments.bench`) and the baselines
(:mod:`slalom_core.experiments.baselines`) both read these; nothing here runs a model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from . import evaluation as ev

__all__ = [
    "SLALOM_SCORES",
    "MethodInfo",
    "METHODS",
    "DEFAULT_METHODS",
    "METRICS",
    "METRIC_HEADERS",
    "REMOVALS",
    "BenchConfig",
    "fitter_options",
]

#: The SLALOM scores the benchmark ranks tokens by (one table row each).
SLALOM_SCORES = ("value", "importance", "lin", "removal")


@dataclass(frozen=True)
class MethodInfo:
    """How one ``--methods`` key is run and reported.

    Attributes:
        key: the name on the command line.
        label: row name (``label/score`` when the method gives several scores).
        family: "slalom", "reference", "captum", "shap", "shapiq" or "baseline".
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
            "slalom-eff-slope",
            "slalom-eff-slope",
            "slalom",
            SLALOM_SCORES,
            frozenset({"importance"}),
            "n_samples short random triples (the library's default method)",
        ),
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
        MethodInfo(
            "kernelshapiq",
            "shapiq-kernelshapiq",
            "shapiq",
            ("attribution",),
            frozenset(),
            "budget = n_samples coalitions; ranked by the order-1 values of pairwise SII (the Shapley values)",
        ),
        MethodInfo(
            "svarmiq",
            "shapiq-svarmiq",
            "shapiq",
            ("attribution",),
            frozenset(),
            "budget = n_samples coalitions; ranked by the order-1 values of pairwise SII (the Shapley values)",
        ),
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
    "slalom-eff-slope",
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


#: Column headers of the markdown table, by metric.
METRIC_HEADERS = {
    "comprehensiveness": "deletion AOPC ↑",
    "sufficiency": "insertion AOPC ↓",
    "hat_auc": "HAT ROC-AUC ↑",
    "hat_auprc": "HAT AUPRC ↑",
    "nb_spearman": "NB Spearman ↑",
}


#: Values of :attr:`BenchConfig.removal`: drop tokens, or put the mask / pad id in their place.
REMOVALS = ("delete", "mask", "pad")


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
        if self.removal not in REMOVALS:
            raise ValueError(f"removal must be one of {REMOVALS}, got {self.removal!r}")
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
            options = fitter_options(name, self.slalom_options)
            get_fitter(name, **options)  # the values, checked before any model is loaded
            taken |= set(options)
        unused = sorted(set(self.slalom_options) - taken)
        if unused:
            raise ValueError(
                f"slalom option(s) {unused} are taken by none of the SLALOM methods run ({', '.join(fitters)}); "
                "see each fitter's OPTIONS (slalom_core.FITTERS[name].OPTIONS)"
            )


def fitter_options(method: str, options: dict[str, Any]) -> dict[str, Any]:
    """The subset of ``options`` that this fitter declares (the rest is for other fitters).

    Args:
        method: a fitter name (``"eff"``, ``"fidel"``, ``"hybrid"``, ``"ana"``).
        options: SLALOM options given for the run (:attr:`BenchConfig.slalom_options`).

    Returns:
        The options ``method``'s fitter takes, to pass on to ``explain_batch``.

    Example:
        >>> fitter_options("ana", {"sample_length": 3})
        {}
    """
    from ..fitting import FITTERS

    return {k: v for k, v in options.items() if k in FITTERS[method].OPTIONS}
