"""The benchmark's outputs: the per-row summary, the markdown table, and the CSV, JSON and
PNG files a run writes.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from .. import evaluation as ev
from ..bench_config import METRIC_HEADERS, METRICS, BenchConfig
from ..bench_context import Instance

__all__ = ["summarise", "format_markdown", "write_outputs"]


def summarise(results: Sequence[ev.InstanceResult]) -> list[dict[str, Any]]:
    """One flat dict per row: ``<metric>_mean``, ``<metric>_se``, ``n``, runtime and calls.

    Metrics that are nan for every text of a row (e.g. no human attention in the data)
    come out as nan. Seconds and model evaluations are reported as median and mean.

    Example:
        >>> rows = summarise([ev.InstanceResult("a", {"comprehensiveness": 0.5}, seconds=1.0, model_evaluations=10)])
        >>> rows[0]["comprehensiveness_mean"], rows[0]["seconds_median"]
        (0.5, 1.0)
    """
    agg = ev.aggregate_results(results, metrics=[*METRICS, "seconds", "model_evaluations"])
    by_method: dict[str, dict[str, Any]] = {}
    for r in agg:
        row = by_method.setdefault(r["method"], {"method": r["method"]})
        m = r["metric"]
        if m in ("seconds", "model_evaluations"):
            row[f"{m}_median"] = r["median"]
            row[f"{m}_mean"] = r["mean"]
            row[f"{m}_se"] = r["se"]
            if m == "seconds":
                row["n"] = r["n"]
        else:
            row[f"{m}_mean"] = r["mean"]
            row[f"{m}_se"] = r["se"]
            row[f"{m}_n"] = r["n"]
    return list(by_method.values())


def _fmt(mean: float, se: float, digits: int = 3) -> str:
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return "–"
    # "-0.000" is a rounding artefact: print it as 0.
    m = f"{mean:.{digits}f}".replace("-0." + "0" * digits, "0." + "0" * digits)
    if se is None or math.isnan(se):
        return m
    return f"{m} ± {se:.{digits}f}"


def format_markdown(
    summary: Sequence[dict[str, Any]],
    *,
    config: BenchConfig | None = None,
    info: dict[str, Any] | None = None,
    skipped: dict[str, str] | None = None,
    errors: Sequence[tuple[str, Any, str]] | None = None,
) -> str:
    """The results table (mean ± s.e. per metric, median seconds and model evaluations).

    Columns for human attention and NB Spearman appear only when some row has them.

    Example:
        >>> print(format_markdown(summarise([ev.InstanceResult("a", {"comprehensiveness": 0.5}, seconds=1.0)])))  # doctest: +ELLIPSIS
        | method | deletion AOPC ↑ | ...
    """
    cols = ["comprehensiveness", "sufficiency"]
    for m in ("hat_auc", "hat_auprc", "nb_spearman"):
        if any(not math.isnan(r.get(f"{m}_mean", float("nan"))) for r in summary):
            cols.append(m)
    head = ["method", *[METRIC_HEADERS[c] for c in cols], "s / explanation (median)", "model evals (median)", "n"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in summary:
        cells = [r["method"], *[_fmt(r.get(f"{c}_mean"), r.get(f"{c}_se")) for c in cols]]
        sec = r.get("seconds_median", float("nan"))
        cells.append("–" if math.isnan(sec) else f"{sec:.3g}")
        ev_med = r.get("model_evaluations_median", float("nan"))
        cells.append("–" if math.isnan(ev_med) else f"{ev_med:.0f}")
        cells.append(str(r.get("n", 0)))
        lines.append("| " + " | ".join(cells) + " |")
    parts = []
    if config is not None and info is not None:
        m = info.get("machine", {})
        acc = info.get("accuracy")
        parts.append(
            f"Model: {info.get('model_name')} · data: `{config.data}` · {info.get('n_instances')} texts "
            f"({config.min_tokens}–{config.max_tokens or 'max'} tokens, mean {info.get('mean_tokens', float('nan')):.0f}) · "
            f"seed {config.seed} · n_samples {config.n_samples} · IG steps {config.lig_steps} · "
            f"removal `{config.removal}` · bins {list(config.bins)}"
            + (f" · accuracy on these texts {acc:.2f}" if acc is not None else "")
        )
        parts.append(
            f"Machine: {m.get('processor')} ({m.get('cpu_count')} CPUs, torch {m.get('torch')}, "
            f"{m.get('torch_threads')} threads, device {m.get('device')}, load average at the end "
            f"{tuple(round(x, 1) for x in m['load_average']) if m.get('load_average') else 'n/a'})"
        )
        parts.append(
            "Deletion AOPC = ERASER comprehensiveness, insertion AOPC = sufficiency (probability of the "
            "predicted class); mean ± standard error over texts. Seconds are wall time per explanation, "
            "model evaluations are sequences sent to the model by the explainer."
        )
    parts.append("\n".join(lines))
    if skipped:
        parts.append("Skipped:\n" + "\n".join(f"- `{k}`: {v}" for k, v in skipped.items()))
    if errors:
        parts.append("Errors:\n" + "\n".join(f"- `{r}` on `{i}`: {msg}" for r, i, msg in errors))
    return "\n\n".join(parts) + "\n"


def _plot_rows(rows: Sequence[str]) -> list[str]:
    """Rows worth a line in the plots: every baseline, SLALOM's value and lin."""
    keep = []
    for r in rows:
        if "/" in r and r.split("/", 1)[1] not in ("lin", "value"):
            continue
        keep.append(r)
    return keep


def _write_dict_csv(path: Path, rows: Sequence[dict]) -> str:
    """Rows of dicts as CSV; the columns are every key in first-seen order."""
    keys = list(dict.fromkeys(k for r in rows for k in r)) or ["method"]
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)
    return str(path)


def write_outputs(
    config: BenchConfig,
    *,
    summary: Sequence[dict[str, Any]],
    results: Sequence[ev.InstanceResult],
    curves: dict[str, dict[str, list[ev.PerturbationResult]]],
    markdown: str,
    info: dict[str, Any],
    skipped: dict[str, str],
    errors: Sequence[tuple[str, Any, str]],
    instances: Sequence[Instance],
) -> dict[str, str]:
    """Write a run's files into ``config.out``: ``results.csv``, ``instances.csv``,
    ``results.md``, ``results.json``, ``deletion_curves.png``, ``insertion_curves.png``
    and ``time_vs_aopc.png``.

    Args:
        config: the run's configuration (output folder, data, budget for the titles).
        summary: :func:`summarise` of ``results``.
        results: one result per (row, text).
        curves: ``{row: {"deletion" | "insertion": per-text curves}}``, averaged here.
        markdown: :func:`format_markdown` of ``summary``.
        info: model, machine and data facts for ``results.json``.
        skipped: ``{method key: reason}``.
        errors: ``(row, instance id, message)`` of single runs that failed.
        instances: the explained texts.

    Returns:
        ``{name: path}`` of every file written.

    Example:
        >>> files = write_outputs(config, summary=summary, results=results, curves=curves,
        ...                       markdown=md, info=info, skipped={}, errors=[],
        ...                       instances=instances)  # doctest: +SKIP
        >>> sorted(files)[:2]  # doctest: +SKIP
        ['deletion_png', 'insertion_png']
    """
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    files = {}

    files["results_csv"] = _write_dict_csv(out / "results.csv", summary)
    rows = [{**r.to_dict(), **{k: v for k, v in r.extra.items() if isinstance(v, (int, float, str))}} for r in results]
    files["instances_csv"] = _write_dict_csv(out / "instances.csv", rows)

    path = out / "results.md"
    path.write_text("# Benchmark results\n\n" + markdown)
    files["results_md"] = str(path)

    mean_curves = {}
    for row, modes in curves.items():
        for mode, cs in modes.items():
            mc = ev.mean_curve(cs)
            mean_curves.setdefault(row, {})[mode] = {
                "fractions": mc["fractions"].tolist(),
                "mean": mc["mean"].tolist(),
                "se": mc["se"].tolist(),
                "n": mc["n"],
            }
    cfg = asdict(config)
    path = out / "results.json"
    path.write_text(
        json.dumps(
            {
                "config": cfg,
                "info": info,
                "summary": summary,
                "skipped": skipped,
                "errors": [list(e) for e in errors],
                "curves": mean_curves,
                "instances": [
                    {
                        "id": i.id,
                        "n_tokens": i.n_tokens,
                        "label": i.label,
                        "target": i.target,
                        "full_probability": i.full_probability,
                    }
                    for i in instances
                ],
            },
            indent=1,
            default=str,
        )
    )
    files["results_json"] = str(path)

    rows_to_plot = _plot_rows(list(mean_curves))
    for mode in ("deletion", "insertion"):
        fig, ax = plt.subplots(figsize=(7, 4.5))
        cmap = plt.get_cmap("tab20")
        for k, row in enumerate(rows_to_plot):
            c = mean_curves.get(row, {}).get(mode)
            if c is None:
                continue
            x = 100 * np.asarray(c["fractions"])
            style = "-" if row.startswith(("slalom", "reference")) else "--"
            ax.plot(x, c["mean"], style, marker="o", ms=3, color=cmap(k % 20), label=row)
        ax.set_xlabel(f"% of tokens {'deleted' if mode == 'deletion' else 'kept'} (highest attribution first)")
        ax.set_ylabel("P(predicted class)")
        ax.set_title(f"{mode.capitalize()} curves ({config.removal}), mean over {len(instances)} texts")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, ncol=2)
        fig.tight_layout()
        path = out / f"{mode}_curves.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        files[f"{mode}_png"] = str(path)

    fig, ax = plt.subplots(figsize=(7, 4.5))
    k = 0
    for r in summary:
        row = r["method"]
        if row not in rows_to_plot or "/value" in row:
            continue
        sec, aopc = r.get("seconds_median", float("nan")), r.get("comprehensiveness_mean", float("nan"))
        if math.isnan(aopc) or math.isnan(sec):
            continue
        se = r.get("comprehensiveness_se", float("nan"))
        ax.errorbar([max(sec, 1e-4)], [aopc], yerr=None if math.isnan(se) else [se], fmt="o", capsize=3)
        # Alternate label offsets: methods of similar cost would print on top of each other.
        ax.annotate(
            row, (max(sec, 1e-4), aopc), textcoords="offset points", xytext=(4, 4 if k % 2 == 0 else -11), fontsize=7
        )
        k += 1
    ax.set_xscale("log")
    ax.set_xlabel("median seconds per explanation (log scale)")
    ax.set_ylabel("deletion AOPC (comprehensiveness) ↑")
    ax.set_title(f"Time vs faithfulness, n_samples = {config.n_samples}")
    ax.grid(alpha=0.3, which="both")
    fig.tight_layout()
    path = out / "time_vs_aopc.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    files["time_png"] = str(path)
    return files
