"""The length law of an amortized explanation.

A per-text fit measures its text's length law (:class:`~slalom_core.surrogate.LengthLaw`:
exponent η, curvature κ, pivot p). The head predicts each token's value and importance, not
the law, so the explainer carries the label fits' typical amplification (the median η and κ
over the label texts) and sets each text's pivot so that the surrogate meets the model's
output on the whole text, which the explanation's one forward pass measures anyway. Without
a law the explanation would read alone-values (a token's output alone) as a weighted mean on
the whole text, far below a transformer's log-odds on a long review.

What that buys and costs on held-out sub-texts is measured in docs/amortized.md.
"""

from __future__ import annotations

import numpy as np

from ..corpus.restore import json_cell
from ..surrogate import IDENTITY_LAW, LengthLaw

__all__ = ["typical_law", "law_meeting_output", "PIVOT_MIN_LEVER"]

#: Below this |A(n) − 1| the pivot barely acts on the text's output (one token, or a law near
#: its identity): solving for it would divide by almost zero, so it stays at 0.
PIVOT_MIN_LEVER = 1e-3


def typical_law(texts) -> dict:
    """The median exponent and curvature of the label fits' laws.

    Args:
        texts: the label run's ``texts`` table (its ``diagnostics`` column, JSON per row).

    Returns:
        ``{"exponent", "curvature", "from_texts"}``; the identity (``from_texts`` 0) when no
        label fit recorded a law (methods other than the default).

    Example:
        >>> import pandas as pd
        >>> rows = pd.DataFrame({"diagnostics": ['{"length_exponent": 0.5, "length_curvature": 0.0}'] * 3})
        >>> typical_law(rows)
        {'exponent': 0.5, 'curvature': 0.0, 'from_texts': 3}
    """
    eta, kappa = [], []
    for cell in texts["diagnostics"]:
        d = json_cell(cell, {})
        if d.get("length_exponent") is not None:
            eta.append(float(d["length_exponent"]))
            kappa.append(float(d.get("length_curvature", 0.0)))
    if not eta:
        return {"exponent": 0.0, "curvature": 0.0, "from_texts": 0}
    return {"exponent": float(np.median(eta)), "curvature": float(np.median(kappa)), "from_texts": len(eta)}


def law_meeting_output(typical: dict | None, mean: float, n_positions: int, move: float) -> LengthLaw:
    """The typical law with the pivot p at which the surrogate meets the model on the text.

    F(x) = p + A(n)·(m − p) = ``move`` gives p = (A(n)·m − move) / (A(n) − 1).

    Args:
        typical: :func:`typical_law`'s numbers (None: the identity, heads saved before the law).
        mean: Σ α_i v_i over the text's positions (the surrogate's weighted mean).
        n_positions: the text's length n.
        move: the model's output on the text, from the reference point.

    Example:
        >>> law = law_meeting_output({"exponent": 0.5, "curvature": 0.0}, mean=1.0, n_positions=4, move=3.0)
        >>> law.pivot, float(law.apply(np.array([1.0]), np.array([4]))[0])
        (-1.0, 3.0)
    """
    if not typical or (typical["exponent"] == 0.0 and typical["curvature"] == 0.0):
        return IDENTITY_LAW
    law = LengthLaw(float(typical["exponent"]), float(typical["curvature"]), 0.0)
    lever = float(law.amplification(np.array([n_positions]))[0]) - 1.0
    if abs(lever) < PIVOT_MIN_LEVER:
        return law
    return LengthLaw(law.exponent, law.curvature, float(((lever + 1.0) * mean - move) / lever))
