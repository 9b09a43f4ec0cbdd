"""The paper's synthetic experiments (Sec. 4–5, App. E.1, E.2, F.1–F.3), CPU-sized.

One function per experiment, each ``run_<name>(out_dir, *, seed=0, **sizes) -> dict``;
each writes a PNG plus a CSV and a markdown table into ``out_dir`` and returns its key
numbers (JSON-serialisable):

=================  =====================================================================
``run_fig3``        Fig. 3 — small transformers trained on the linear data set (App. E.1)
                    answer inputs of k copies of "perfect" almost constantly, unlike the
                    linear model's ``1.5·k`` (and unlike a ReLU network on word counts).
``run_fig4ab``      Fig. 4 (a, b) and Table 6 — fit a linear model (OLS on counts), a GAM
                    (position × word one-hot, LASSO λ=0.01) and a global SLALOM to the
                    trained transformers' log-odds on fresh samples; held-out MSE.
``run_fig4cd``      Fig. 4 (c, d) and Tables 7–8 — train on the SLALOM data set (App. E.2),
                    fit SLALOM post hoc, report logit MSE and parameter MSE.
``run_fig9``        Fig. 9 — SLALOM-ana vs SLALOM-SGD as the vocabulary size and the
                    sequence length grow.
``run_table12``     Table 12 (App. F.7) — deletion AOPC of SLALOM-eff ``lin`` scores
                    against the number of samples, on IMDB reviews and a real classifier
                    (the packaged MiniLM by default); skipped without the data file.
=================  =====================================================================

Models are 1–2 layer BERT / DistilBERT / GPT-2 built from configs (hidden size 64, word
level tokenizer from :mod:`slalom_core.experiments.synthetic`); nothing is downloaded. Training uses
the paper's recipe (5 epochs of 5000 fresh samples, batch size 20, cross-entropy on the
sampled labels) with a learning rate suited to training from scratch (1e-3, AdamW). The
SLALOM-data experiments (``run_fig4cd``, ``run_fig9``) train on the true probabilities
instead of sampled labels by default (``soft_labels=True``), which stands in for the
paper's much larger training budget (400k samples). Global SLALOMs are fitted with the
engine's fitters (:func:`slalom_core.fit_gradient`, ``get_fitter("ana" | "eff")``).
Trained models are cached in memory for the lifetime of the process, so that
``run_fig3`` followed by ``run_fig4ab`` with the same settings trains each model once.

Modules: :mod:`.models` (classifiers and their training), :mod:`.surrogates` (linear,
GAM and global SLALOM fits), :mod:`.output` (files and figures), :mod:`.linear_data`
(Fig. 3, Fig. 4 a–b), :mod:`.slalom_data` (Fig. 4 c–d, Fig. 9), :mod:`.table12`.
"""

from collections.abc import Callable

from .linear_data import run_fig3, run_fig4ab
from .models import ARCH_LABELS, ARCHITECTURES, ModelSpec, SyntheticClassifier, build_classifier, train_classifier
from .slalom_data import run_fig4cd, run_fig9
from .surrogates import fit_gam_surrogate, fit_global_slalom, fit_linear_surrogate, fit_slalom_ana, fit_with_engine
from .table12 import DEFAULT_IMDB_TEST, run_table12

__all__ = [
    "ARCHITECTURES",
    "ARCH_LABELS",
    "EXPERIMENTS",
    "ModelSpec",
    "SyntheticClassifier",
    "build_classifier",
    "train_classifier",
    "fit_linear_surrogate",
    "fit_gam_surrogate",
    "fit_global_slalom",
    "fit_slalom_ana",
    "fit_with_engine",
    "run_fig3",
    "run_fig4ab",
    "run_fig4cd",
    "run_fig9",
    "run_table12",
    "DEFAULT_IMDB_TEST",
]

EXPERIMENTS: dict[str, Callable[..., dict]] = {
    "fig3": run_fig3,
    "fig4ab": run_fig4ab,
    "fig4cd": run_fig4cd,
    "fig9": run_fig9,
}
