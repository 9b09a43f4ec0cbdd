"""inseq's ``show()`` with its colours under numpy 2: the one repair, for every inseq output.

inseq 0.7.1 writes each heatmap cell's colour as ``"rgba" + str(tuple)`` of numpy floats.
Under numpy 2 a numpy float's repr is ``np.float64(178.0)``, so the CSS reads
``rgba(np.float64(178.0), ...)``, which browsers drop: the heatmap shows no colour at all, for
any attribution method. :func:`show` runs inseq's own ``show`` under numpy's 1.25 print style,
where the numbers print plainly again; inseq is not patched, and nothing outside the call is
changed.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["show"]


def show(out: Any, **kwargs: Any) -> Any:
    """``out.show(**kwargs)`` with its colours: inseq's own drawing, numbers printed plainly.

    Args:
        out: anything with inseq's ``show`` (a ``FeatureAttributionOutput``, one of its
            sequences, an aggregated output, :func:`inseq_slalom.channel`'s result).
        **kwargs: inseq's ``show`` options (``display=False, return_html=True`` returns the
            HTML).

    Returns:
        What inseq's ``show`` returns (the HTML with ``return_html=True``).

    Example:
        >>> html = inseq_slalom.show(out, display=False, return_html=True)  # doctest: +SKIP
        >>> "np.float64" in html  # doctest: +SKIP
        False
    """
    if not callable(getattr(out, "show", None)):
        raise TypeError(f"inseq_slalom.show takes an inseq output (with .show()), got {type(out).__name__}")
    with np.printoptions(legacy="1.25"):
        return out.show(**kwargs)
