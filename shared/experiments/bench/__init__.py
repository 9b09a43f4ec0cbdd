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
``kernelshapiq``    ``shapiq.KernelSHAPIQ`` on the model (pairwise SII from ``n_samples``
                    deletion coalitions; ranked by its order-1 values, the Shapley values)
``svarmiq``         ``shapiq.SVARMIQ``, the same game and budget
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
  or the mask / pad token; shapiq: the game removes the coalition's absent tokens the same
  way). SLALOM (this engine and the reference) always samples by deletion.
* **Equal budgets.** ``n_samples`` model evaluations for SLALOM-eff / -fidel, the reference,
  LIME, KernelSHAP, Partition (``max_evals``) and shapiq's approximators (``budget``); IG
  uses ``lig_steps`` steps; gradients one backward pass. Every model call goes through a
  counter, so the tables show what each method really used.
* **Human attention** (Yelp-HAT style rows with ``words`` and ``human_attention``): each
  sub-token inherits its word's label; ROC-AUC / AUPRC of ``|score|`` for signed scores and
  of the raw score for unsigned ones (SLALOM importance, saliency), as in the paper.
* **Naive Bayes** (``nb_train``): log-count ratios of token ids on a labelled training file
  (Laplace α = 40, App. E.3); Spearman ρ with scores oriented to class 1, against ``|NB|``
  for unsigned scores. Binary models only.

captum, shap and shapiq are imported inside the functions that run them, never at module
level, so ``import slalom_core`` stays free of them.

Modules: :mod:`.instances` (model, texts, NB table), :mod:`.runner` (the run),
:mod:`.report` (summary, tables, files); the method table and :class:`BenchConfig` are in
:mod:`slalom_core.experiments.bench_config`, the texts and the model as the methods see
them in :mod:`slalom_core.experiments.bench_context`, the baselines in
:mod:`slalom_core.experiments.baselines`.

Example:
    >>> from slalom_core.experiments.bench import BenchConfig, run_benchmark
    >>> cfg = BenchConfig(model="default", data="imdb_test.jsonl", out="bench_out",
    ...                   n=5, min_tokens=120, max_tokens=250, n_samples=500,
    ...                   methods=("slalom-eff", "lime", "random"))  # doctest: +SKIP
    >>> result = run_benchmark(cfg)  # doctest: +SKIP
    >>> print(result.markdown)  # doctest: +SKIP
"""

from ..baselines import MethodSkipped
from ..bench_config import DEFAULT_METHODS, METHODS, METRICS, BenchConfig, MethodInfo
from ..bench_context import BenchContext, Instance
from ..data import read_jsonl
from .instances import build_nb_table, load_model, select_instances
from .report import format_markdown, summarise
from .runner import BenchResult, run_benchmark, run_slalom

__all__ = [
    "METHODS",
    "DEFAULT_METHODS",
    "METRICS",
    "MethodInfo",
    "BenchConfig",
    "BenchContext",
    "Instance",
    "BenchResult",
    "MethodSkipped",
    "read_jsonl",
    "load_model",
    "select_instances",
    "build_nb_table",
    "run_benchmark",
    "run_slalom",
    "summarise",
    "format_markdown",
]
