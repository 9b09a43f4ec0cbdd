"""The tables of the local ground-truth study
(:mod:`slalom_core.experiments.benchmarks.local_ground_truth`): one row per model, for the
agreement with the truth, the diagnostics and the comparison with a 2-word global SLALOM.
"""

from __future__ import annotations

import math

from slalom_core.experiments.paper.output import markdown_table

__all__ = ["markdown"]


def _f(x, digits: int = 3) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def markdown(result: dict) -> str:
    """The study's tables (one row per model)."""
    st = result["settings"]
    head = (
        f"Local SLALOM-eff fits ({st['n_samples']} samples, the engine's defaults unless a row names "
        f"fitter options, seed {st['fit_seed']}) on "
        f"{st['n_texts']} texts of {st['lengths'][0]}–{st['lengths'][1]} words (|V| = {st['n_words']}), "
        "against the true SLALOM and against a global SLALOM fitted to the same model "
        f"({st['n_fit']} samples). Coverage: share within {st['z']:g} SE (importances: the determined "
        "ones, pooled over texts; values: all, from a fit with reference=0.0).\n\n"
    )
    hdr = [
        "model",
        "Spearman vs truth: mean",
        "median",
        "share ≥ 0.9",
        "Spearman vs global: mean",
        "median",
        "share ≥ 0.9",
        "determined / units",
        "coverage s (truth)",
        "coverage s (global)",
        "coverage v (truth)",
        "coverage v (global)",
        "held-out R² (median)",
        "model vs truth MSE",
    ]
    lines = []
    for m in result["models"]:
        s = m["summary"]
        st_, sl = s["spearman_truth"], s.get("spearman_learned", {})
        lines.append(
            [
                m["label"],
                _f(st_["mean"]),
                _f(st_["median"]),
                _f(st_["share_ge"], 2),
                _f(sl.get("mean")),
                _f(sl.get("median")),
                _f(sl.get("share_ge"), 2),
                f"{s['n_determined']['total']} / {s['n_determined']['units']}",
                _f(s.get("cover_s_truth"), 2),
                _f(s.get("cover_s_learned"), 2),
                _f(s.get("cover_v_truth"), 2),
                _f(s.get("cover_v_learned"), 2),
                _f(s["heldout_r2"]["median"]),
                _f(m.get("model_vs_truth_mse"), 4),
            ]
        )
    extra_hdr = [
        "model",
        "Spearman(global, truth) per text: mean",
        "over all words",
        "Spearman vs truth, determined only",
        "coverage s, all units (truth)",
        "median |ŝ − s| (truth)",
        "median SE of determined s",
        "global vs model MSE",
        "slope of ŝ on s (truth, median)",
        "slope of ŝ on s (global, median)",
        "seed-to-seed coverage (determined)",
        "converged",
    ]
    extra = []
    for m in result["models"]:
        s = m["summary"]
        extra.append(
            [
                m["label"],
                _f(s.get("spearman_learned_vs_truth", {}).get("mean")),
                _f(m.get("global_importance_spearman_vs_truth")),
                _f(s.get("spearman_truth_determined")),
                _f(s.get("cover_s_all_truth"), 2),
                _f(s.get("median_abs_err_s_truth")),
                _f(s.get("median_se_s_determined")),
                _f(m.get("global_vs_model_mse"), 4),
                _f(s.get("slope_truth_median"), 2),
                _f(s.get("slope_learned_median"), 2),
                _f(s.get("cover_s_repeat"), 2),
                _f(s["share_converged"], 2),
            ]
        )
    short_hdr = [
        "model",
        "Spearman vs 2-word global: mean",
        "median",
        "share ≥ 0.9",
        "coverage s (2-word global)",
        "coverage v (2-word global)",
        "slope of ŝ on s (2-word global, median)",
        "Spearman(2-word global, truth) over all words",
        "Spearman(2-word global, global)",
    ]
    short = []
    for m in result["models"]:
        s = m["summary"]
        if "spearman_short" not in s:
            continue
        sp = s["spearman_short"]
        short.append(
            [
                m["label"],
                _f(sp["mean"]),
                _f(sp["median"]),
                _f(sp["share_ge"], 2),
                _f(s.get("cover_s_short"), 2),
                _f(s.get("cover_v_short"), 2),
                _f(s.get("slope_short_median"), 2),
                _f(m.get("short_importance_spearman_vs_truth")),
                _f(m.get("short_importance_spearman_vs_global")),
            ]
        )
    text = head + markdown_table(hdr, lines) + "\nDiagnostics:\n\n" + markdown_table(extra_hdr, extra)
    if short:
        text += (
            "\nAgainst a global SLALOM fitted to the model on "
            f"{st['n_fit']} inputs of 2 words (uniform, with replacement: the inputs eff's samples are):\n\n"
            + markdown_table(short_hdr, short)
        )
    return text
