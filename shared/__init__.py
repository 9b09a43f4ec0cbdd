"""slalom_core: the SLALOM fitting engine behind ``captum_slalom`` and ``shap_slalom``.

SLALOM (Leemann et al., TMLR 2025) explains a text classifier with a softmax-linked
surrogate that gives every token a *value* (its effect alone) and an *importance* (how
much weight it takes from the other tokens). This package holds all of the science; the
adapters only translate to Captum's and SHAP's result types.

Example:
    >>> import slalom_core as sc
    >>> exp = sc.explain(model, "a great movie", tokenizer=tok, seed=0)  # doctest: +SKIP
    >>> exp.value, exp.importance, exp.lin  # doctest: +SKIP
"""

from .api import (
    DEFAULT_METHOD,
    DEFAULT_N_SAMPLES,
    FULL_TEXT_GAP_BOUND,
    PERTURBATIONS,
    CallOptions,
    ExplainOptions,
    FitOptions,
    NoEmptyInputError,
    RowTarget,
    SlalomFitWarning,
    check_call,
    check_row_options,
    estimate_cost,
    explain,
    explain_batch,
    explain_rows,
)
from .diagnostics import Diagnostics
from .explanation import ClassOutputs, LabelExplanations, SlalomExplanation, explanation_from_dict, load_explanation
from .fitting import (
    FITTERS,
    AnaFitter,
    EffFitter,
    EffSlopeFitter,
    FidelFitter,
    FitResult,
    Fitter,
    HybridFitter,
    fit_als,
    fit_gradient,
    get_fitter,
    laplace_standard_errors,
)
from .inputs import text_batch
from .link import OUTPUT_KINDS, OutputLink, SlalomOutputWarning, declared_output, resolve_output
from .models import (
    APIClassifier,
    APIError,
    BudgetExceededError,
    CacheChangedError,
    HFClassifier,
    ModelAdapter,
    OnnxClassifier,
    PromptClassifier,
    Segmentation,
    StringClassifier,
    TorchClassifier,
    TorchModel,
    TransientAPIError,
    WhitespaceTokenizer,
    as_adapter,
    model_session,
    module_of,
    score_matrix,
    segment_text,
)
from .outputs import class_outputs, explain_outputs, fit_summary
from .saving import FORMAT_VERSION, explanation_frame, save_explanation
from .scores import (
    ADDITIVE_SCORES,
    DEFAULT_SCORE,
    SCORE_NAMES,
    SCORES,
    STORED_SCORES,
    Score,
    check_score,
    register_score,
    unregister_score,
)
from .surrogate import IDENTITY_LAW, LengthLaw, SlalomSurrogate
from .views import compare_html

__version__ = "0.1.0"

__all__ = [
    "explain",
    "explain_batch",
    "explain_rows",
    "check_row_options",
    "PERTURBATIONS",
    "RowTarget",
    "FitOptions",
    "CallOptions",
    "ExplainOptions",
    "NoEmptyInputError",
    "text_batch",
    "estimate_cost",
    "check_call",
    "DEFAULT_N_SAMPLES",
    "DEFAULT_METHOD",
    "SlalomFitWarning",
    "FULL_TEXT_GAP_BOUND",
    "SlalomExplanation",
    "load_explanation",
    "compare_html",
    "save_explanation",
    "explanation_from_dict",
    "explanation_frame",
    "FORMAT_VERSION",
    "LabelExplanations",
    "ClassOutputs",
    "explain_outputs",
    "class_outputs",
    "fit_summary",
    "Diagnostics",
    "SlalomSurrogate",
    "LengthLaw",
    "IDENTITY_LAW",
    "SCORE_NAMES",
    "SCORES",
    "ADDITIVE_SCORES",
    "STORED_SCORES",
    "register_score",
    "unregister_score",
    "Score",
    "DEFAULT_SCORE",
    "check_score",
    "OutputLink",
    "OUTPUT_KINDS",
    "SlalomOutputWarning",
    "resolve_output",
    "declared_output",
    "ModelAdapter",
    "HFClassifier",
    "TorchClassifier",
    "TorchModel",
    "model_session",
    "module_of",
    "score_matrix",
    "StringClassifier",
    "PromptClassifier",
    "OnnxClassifier",
    "APIClassifier",
    "APIError",
    "TransientAPIError",
    "BudgetExceededError",
    "CacheChangedError",
    "WhitespaceTokenizer",
    "Segmentation",
    "as_adapter",
    "segment_text",
    "Fitter",
    "FitResult",
    "EffFitter",
    "FidelFitter",
    "AnaFitter",
    "HybridFitter",
    "EffSlopeFitter",
    "FITTERS",
    "get_fitter",
    "fit_gradient",
    "fit_als",
    "laplace_standard_errors",
]
