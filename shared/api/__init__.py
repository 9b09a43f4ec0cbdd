"""The engine's entry points: explain texts (:func:`explain`, :func:`explain_batch`) or rows
of token-id tensors (:func:`explain_rows`), and what a call will cost (:func:`estimate_cost`).

- :mod:`.call`: the options stated once (:class:`CallOptions`, :data:`OPTION_CHECKS`) and
  :func:`check_call` (every check that needs no model, applied once per call);
- :mod:`.plan`: each text cut into positions and units;
- :mod:`.driver`: the rounds of model calls and batched fits, and the assembled explanations;
- :mod:`.cost`: estimates and usage for models that bill per call;
- :mod:`.fit_warnings`: :class:`SlalomFitWarning` and the empty-input error;
- :mod:`.rows`: :func:`explain_rows`, for torch forwards on padded rows (Captum's inputs).
"""

from .call import (
    DEFAULT_METHOD,
    DEFAULT_N_SAMPLES,
    MAX_FIT_BYTES,
    OPTION_CHECKS,
    CallOptions,
    CheckedCall,
    ExplainOptions,
    FitOptions,
    ProgressOption,
    ReferenceOption,
    check_call,
)
from .cost import estimate_cost
from .driver import explain, explain_batch, explain_checked
from .fit_warnings import FULL_TEXT_GAP_BOUND, MIN_HELDOUT_R2, NoEmptyInputError, SlalomFitWarning
from .plan import TextLike
from .rows import PERTURBATIONS, RowTarget, check_row_options, explain_rows

__all__ = [
    "explain",
    "explain_batch",
    "explain_rows",
    "estimate_cost",
    "explain_checked",
    "check_call",
    "OPTION_CHECKS",
    "check_row_options",
    "CheckedCall",
    "FitOptions",
    "CallOptions",
    "ExplainOptions",
    "ProgressOption",
    "ReferenceOption",
    "TextLike",
    "RowTarget",
    "PERTURBATIONS",
    "DEFAULT_N_SAMPLES",
    "DEFAULT_METHOD",
    "MAX_FIT_BYTES",
    "SlalomFitWarning",
    "NoEmptyInputError",
    "FULL_TEXT_GAP_BOUND",
    "MIN_HELDOUT_R2",
]
