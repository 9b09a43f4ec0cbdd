"""A pipeline run's quality table (``RUN/quality.parquet``, :meth:`CorpusRun.quality`): per
text, the audit's agreement with its per-text fit, the out-of-distribution check and a flag."""

from __future__ import annotations

import numpy as np

from ..corpus import CorpusRun, store
from ..corpus.restore import explanation_from_tables, json_cell
from ..files import replace_with
from ..fit_quality import row_flags
from .audit import agreement

__all__ = ["write_quality", "POOR_AUDIT"]

#: An audited text whose value Spearman against its per-text fit is below this is flagged.
POOR_AUDIT = 0.5


def write_quality(run: CorpusRun, audited: CorpusRun | None, label_ids: set[str], *, poor_audit: float) -> dict:
    """Write ``RUN/quality.parquet`` (see :meth:`CorpusRun.quality`) and return the totals.

    Every explained text gets a row; an audited one its value and importance Spearman
    against its per-text fit (over its unique tokens, :func:`~.audit.agreement`). A text is
    flagged when the head's out-of-distribution check flagged it, or by the fit-quality rule
    (:mod:`slalom_core.fit_quality`) on the head's explanation: its audit's value Spearman
    below ``poor_audit`` (the rule's "unstable", column ``poor_audit``), or the explanation
    moving against the model or missing its output (column ``fit_flags``, the flags' codes).

    Example:
        >>> write_quality(CorpusRun("runs/r"), CorpusRun("runs/r/auto/audit"), set(), poor_audit=0.5)  # doctest: +SKIP
    """
    import pandas as pd

    rows, records = _run_rows(run, label_ids)
    if audited is not None:
        _add_audit(rows, run, audited)
    table = pd.DataFrame(list(rows.values()), columns=_COLUMNS)
    table = _flagged(table, records, poor_audit)
    replace_with(run.path / store.QUALITY, lambda tmp: table.to_parquet(tmp, index=False))
    return _totals(table, poor_audit)


#: The quality table's columns before its flags (``ood_reason`` only feeds ``flag_reason``).
_COLUMNS = ["id", "in_label_set", "audited", "audit_value_spearman", "audit_importance_spearman", "ood", "ood_reason"]


def _run_rows(run: CorpusRun, label_ids: set[str]) -> tuple[dict[str, dict], dict[str, list[dict]]]:
    """A quality row per explained text (not yet audited), and each text's rows of the texts table."""
    rows: dict[str, dict] = {}
    records: dict[str, list[dict]] = {}
    for _, texts in run.parts("texts"):
        for r in texts.to_dict("records"):
            records.setdefault(str(r["id"]), []).append(r)
        for text_id, ood in zip(texts["id"], texts["ood"] if "ood" in texts else [None] * len(texts)):
            warning = (json_cell(ood, None) or {}).get("warning")
            rows[str(text_id)] = {
                "id": str(text_id),
                "in_label_set": str(text_id) in label_ids,
                "audited": False,
                "audit_value_spearman": float("nan"),
                "audit_importance_spearman": float("nan"),
                "ood": bool(warning),
                "ood_reason": warning or "",
            }
    return rows, records


def _add_audit(rows: dict[str, dict], run: CorpusRun, audited: CorpusRun) -> None:
    """Each audited text's value and importance Spearman against its per-text fit."""
    for key, texts in audited.parts("texts"):
        positions = next(audited.parts("positions", [key]))[1]
        for text_id in texts["id"].unique():
            if text_id not in rows:  # failed in the run of every text
                continue
            fitted = explanation_from_tables(positions[positions["id"] == text_id], texts[texts["id"] == text_id])
            rho_v, rho_s = agreement(run.explanation(text_id), fitted)
            rows[text_id].update(audited=True, audit_value_spearman=rho_v, audit_importance_spearman=rho_s)


def _flagged(table, records: dict[str, list[dict]], poor_audit: float):
    """The table with its flags: ``poor_audit``, ``fit_flags``, ``flagged`` and ``flag_reason``."""
    # The fit-quality rule on the head's explanation (slalom_core.fit_quality), with the
    # audit's agreement as its measured stability: "unstable" is a poor audit. NaN (a constant
    # score on a text of one unique token) is not evidence of a poor head.
    flags = [
        row_flags(records[i], agreement=None if not a else rho, min_agreement=poor_audit)
        for i, a, rho in zip(table["id"], table["audited"], table["audit_value_spearman"])
    ]
    table["poor_audit"] = [any(f.code == "unstable" for f in fl) for fl in flags]
    fit = [[f for f in fl if f.code != "unstable"] for fl in flags]
    table["fit_flags"] = [", ".join(f.code for f in fl) for fl in fit]
    table["flagged"] = table["ood"] | table["poor_audit"] | (table["fit_flags"] != "")
    table["flag_reason"] = [
        "; ".join(
            ([f"out of distribution: {r.ood_reason}"] if r.ood else [])
            + ([f"audit: value Spearman {r.audit_value_spearman:.2f} < {poor_audit}"] if r.poor_audit else [])
            + [f.reason for f in fl]
        )
        for r, fl in zip(table.itertuples(), fit)
    ]
    return table.drop(columns="ood_reason")


def _totals(table, poor_audit: float) -> dict:
    """The audit's and the flags' totals (the pipeline's ``manifest["auto"]``)."""
    aud = table[table["audited"]]
    return {
        "audit": {
            "n_audited": int(len(aud)),
            "value_spearman": _spread(aud["audit_value_spearman"]),
            "importance_spearman": _spread(aud["audit_importance_spearman"]),
            "poor_below": poor_audit,
            "n_poor": int(table["poor_audit"].sum()),
        },
        "flags": {
            "n_ood": int(table["ood"].sum()),
            "n_poor_audit": int(table["poor_audit"].sum()),
            "n_fit_flags": int((table["fit_flags"] != "").sum()),
            "n_flagged": int(table["flagged"].sum()),
        },
    }


def _spread(x) -> dict:
    x = np.asarray(x, dtype=float)
    x = x[np.isfinite(x)]
    if not len(x):
        return {"mean": None, "median": None, "p10": None}
    return {"mean": float(x.mean()), "median": float(np.median(x)), "p10": float(np.quantile(x, 0.1))}
