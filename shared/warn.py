"""Warnings raised by the library, attributed to the user's own line of code."""

from __future__ import annotations

import sys
import warnings

__all__ = ["warn_user"]

#: Packages whose frames a warning passes over: the engine, its adapters and the libraries
#: that call the adapters back (a shap Explainer's ``__call__``, Captum's wrappers, inseq's
#: ``attribute``, torch's ``no_grad`` decorators around them).
_LIBRARY_PACKAGES = frozenset(
    {"slalom_core", "captum_slalom", "shap_slalom", "inseq_slalom", "captum", "shap", "inseq", "torch"}
)


def warn_user(message: str, category: type[Warning]) -> None:
    """``warnings.warn`` attributed to the user's line: the first frame outside the library.

    A fixed ``stacklevel`` is right for one call path only (``explain`` → ``explain_batch``,
    a Captum ``attribute``, a shap explainer), and a warning filter or the printed location
    should name the user's code whichever path raised it.

    Example:
        >>> import warnings
        >>> with warnings.catch_warnings(record=True) as seen:
        ...     warnings.simplefilter("always")
        ...     warn_user("note", UserWarning)
        >>> str(seen[0].message)
        'note'
    """
    frame, level = sys._getframe(0), 1
    while frame.f_back is not None and frame.f_globals.get("__name__", "").split(".")[0] in _LIBRARY_PACKAGES:
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)
