"""How many texts an amortized pipeline fits per text (labels, audit), and whether a corpus
is large enough for the pipeline to pay for itself (:func:`check_pays`)."""

from __future__ import annotations

import math

from ..warn import warn_user
from .audit import AmortizedFewTextsWarning

__all__ = ["label_set_size", "check_pays", "audit_budget", "LABEL_TEXTS", "AUDIT_SHARE", "MIN_AUDIT", "AUDIT_SAMPLES"]

#: The label set's size when none is given, from the measured curve (docs/amortized.md, "How
#: many labels"): at 200 texts the audit's value Spearman is within 0.011 of 400 texts' and
#: the importance's within 0.017 (it grows fast below 200); 200 keeps the 12,700 reviews of
#: ../shared/data within 40 minutes on a 2-core CPU, labels included (``label_texts`` for
#: more). A corpus smaller than it plus its audit gives every other text to the labels.
LABEL_TEXTS = 200
#: Share of the texts (outside the label set) fitted per text to check the head: 64 of 12,700
#: reviews give the audit's mean value Spearman to about 0.003 (s.e.), and keep the whole
#: run within 40 minutes on a 2-core CPU (each audited text costs a per-text fit, ~3 s).
AUDIT_SHARE = 0.005
#: The fewest texts an audit fits (a share of a small corpus would give a mean of a few).
MIN_AUDIT = 20
#: The least budget of an audit's per-text fits. An audit compares the head with per-text fits,
#: so it can agree no better than those fits agree with themselves: at 300 samples two seeds'
#: fits of one IMDB review agree at value Spearman about 0.5, and a head trained on 300-sample
#: labels agrees with a 1,000-sample fit at 0.82 but with a 300-sample one at 0.59
#: (docs/amortized.md, "What an audit can show"). Cheap labels keep their budget; the audit, a
#: few dozen texts, is fitted at this one or the labels', whichever is larger.
AUDIT_SAMPLES = 1000


def audit_budget(n_samples: int, audit_samples: int | None = None) -> int:
    """The audit's per-text budget: ``audit_samples``, or (None) the labels' ``n_samples`` but
    at least :data:`AUDIT_SAMPLES`.

    Example:
        >>> audit_budget(300), audit_budget(4000), audit_budget(300, 500)
        (1000, 4000, 500)
    """
    return max(int(n_samples), AUDIT_SAMPLES) if audit_samples is None else int(audit_samples)


def label_set_size(n_texts: int, audit: float, label_texts: int | None = None) -> tuple[int, int]:
    """How many texts the labels and the audit take from a corpus of ``n_texts``.

    Args:
        n_texts: the corpus's explainable texts (unique ids).
        audit: the audit's share of the texts (0 to 1); at least :data:`MIN_AUDIT` texts
            when positive, and never more than what the labels leave.
        label_texts: the label set's size; None: :data:`LABEL_TEXTS`, or as many as the
            audit leaves in a smaller corpus.

    Returns:
        ``(n_labels, n_audit)``.

    Example:
        >>> label_set_size(12700, 0.01)
        (200, 127)
        >>> label_set_size(100, 0.01)
        (80, 20)
    """
    n_audit = 0 if audit == 0 else max(MIN_AUDIT, math.ceil(audit * n_texts))
    if label_texts is None:
        n_labels = min(LABEL_TEXTS, max(n_texts - n_audit, 0))
    else:
        if label_texts > n_texts:
            raise ValueError(f"label_texts={label_texts}: the corpus has {n_texts} texts")
        n_labels = label_texts
    n_audit = min(n_audit, n_texts - n_labels)
    return n_labels, n_audit


def check_pays(n_texts: int, audit: float, label_texts: int | None) -> None:
    """Refuse (default sizes) or warn (sizes given) when the labels and the audit would fit
    more than half the corpus per text: the head then saves less than the per-text fits of
    every text would cost (at most twice those fits), and explains the rest worse than they would.

    Raises:
        ValueError: with the default label set, naming the per-text path and the options.

    Example:
        >>> check_pays(12700, AUDIT_SHARE, None)
        >>> check_pays(40, AUDIT_SHARE, None)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ValueError: the corpus has 40 texts: ...
    """
    n_labels, n_audit = label_set_size(n_texts, audit, label_texts)
    if 2 * (n_labels + n_audit) <= n_texts:
        return
    pays = next((n for n in range(n_texts, 10**6) if 2 * sum(label_set_size(n, audit, label_texts)) <= n), None)
    said = (
        f"the corpus has {n_texts} texts: the amortized pipeline would fit {n_labels} label texts and audit "
        f"{n_audit} per text, {n_labels + n_audit} of {n_texts} (more than half), and its head would explain the "
        "rest worse than per-text fits"
    )
    if label_texts is None:
        raise ValueError(
            f"{said}. Explain the corpus per text (`slalom-xai explain` without --amortized; explain_corpus in "
            "Python), at most twice the cost here, or choose the sizes with --label-texts and --audit "
            "(label_texts=, audit=)" + (f"; with these sizes the pipeline pays from {pays} texts" if pays else "")
        )
    warn_user(
        f"{said}; per-text fits of every text (explain without --amortized) would cost at most twice as much",
        AmortizedFewTextsWarning,
    )
