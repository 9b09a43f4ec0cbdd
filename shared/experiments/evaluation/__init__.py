"""Evaluation metrics for token attributions: faithfulness, human attention, Naive Bayes.

Everything here works on plain token-id sequences and numpy arrays, so that SLALOM, the
Captum and SHAP baselines and the reference implementation are scored by exactly the same
code. Nothing here imports captum, shap, scipy or scikit-learn: the rank statistics are
implemented in numpy (and tested against scipy / scikit-learn), because those two packages
are only an optional ``eval`` extra of the distribution.

One module per group, all names importable from here:

1. :mod:`.faithfulness`, **removal-based faithfulness** (ERASER, DeYoung et al. 2020; the
   paper's Sec. 6 and App. F): :func:`comprehensiveness`, :func:`sufficiency`,
   :func:`deletion_aopc`, :func:`insertion_aopc`, the curves :func:`deletion_curve` /
   :func:`insertion_curve` (all six :func:`removal_metric` with a fixed mode), and
   :func:`faithfulness_metrics`, which computes them with one model call. Its docstring
   states the ranking, bin and removal conventions.
2. :mod:`.attention`, **human-attention agreement** (Yelp-HAT, Table 2b):
   :func:`human_attention_agreement` (ROC-AUC and average precision of unsigned scores
   against binary labels), :func:`word_labels_to_tokens`, :func:`token_scores_to_words`,
   :func:`word_ids_from_offsets`.
3. :mod:`.naive_bayes`, **Naive-Bayes agreement** (Table 2a, App. E.3):
   :func:`naive_bayes_log_ratios` and :func:`nb_spearman`.
4. :mod:`.results`, **bookkeeping**: :class:`InstanceResult`, :class:`CountingPredictor`
   and :func:`aggregate_results` (mean and standard error per metric and method).
5. :mod:`.statistics`, the rank statistics the others share: :func:`average_ranks`,
   :func:`roc_auc`, :func:`average_precision`, :func:`spearman`, :func:`standard_error`.

Example:
    >>> import numpy as np
    >>> from slalom_core.experiments import evaluation as ev
    >>> predict = lambda seqs: np.array([len(s) / 4 for s in seqs])
    >>> ev.comprehensiveness(predict, [5, 6, 7, 8], [1, 2, 3, 4], bins=(0.5,)).value
    0.5
"""

from .attention import (
    AgreementResult,
    human_attention_agreement,
    token_scores_to_words,
    word_ids_from_offsets,
    word_labels_to_tokens,
)
from .faithfulness import (
    CURVE_FRACTIONS,
    ERASER_BINS,
    FaithfulnessReport,
    PerturbationResult,
    Predictor,
    comprehensiveness,
    deletion_aopc,
    deletion_curve,
    faithfulness_metrics,
    insertion_aopc,
    insertion_curve,
    mean_curve,
    perturb_sequence,
    random_attributions,
    rank_tokens,
    removal_metric,
    sufficiency,
    tokens_for_fraction,
)
from .naive_bayes import SpearmanResult, naive_bayes_log_ratios, nb_spearman
from .results import CountingPredictor, InstanceResult, aggregate_results
from .statistics import average_precision, average_ranks, roc_auc, spearman, standard_error

__all__ = [
    "ERASER_BINS",
    "CURVE_FRACTIONS",
    "Predictor",
    "PerturbationResult",
    "FaithfulnessReport",
    "AgreementResult",
    "SpearmanResult",
    "InstanceResult",
    "CountingPredictor",
    "rank_tokens",
    "tokens_for_fraction",
    "perturb_sequence",
    "random_attributions",
    "removal_metric",
    "comprehensiveness",
    "sufficiency",
    "deletion_aopc",
    "insertion_aopc",
    "deletion_curve",
    "insertion_curve",
    "faithfulness_metrics",
    "mean_curve",
    "average_ranks",
    "roc_auc",
    "average_precision",
    "human_attention_agreement",
    "word_ids_from_offsets",
    "word_labels_to_tokens",
    "token_scores_to_words",
    "naive_bayes_log_ratios",
    "spearman",
    "nb_spearman",
    "standard_error",
    "aggregate_results",
]
