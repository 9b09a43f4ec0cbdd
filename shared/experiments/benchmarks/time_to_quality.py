"""Time to quality: deletion AOPC against seconds for SLALOM designs and budgets.

Runs ``slalom_core.experiments.bench.run_benchmark`` once per (design, budget) on the same texts and
collects, for one score (``lin`` by default), the deletion AOPC (ERASER comprehensiveness)
with its standard error and the median seconds per explanation. The reference
implementation (``slalom-explanations`` 0.1.2, when installed) runs at the budgets given by
``--reference-samples``. Writes ``time_to_quality.md`` / ``.csv`` and a plot of AOPC
against seconds (one curve per design) to ``--out``. Not a test: timings depend on the
machine and its load; rows from one invocation ran back to back.

    python -m slalom_core.experiments.benchmarks.time_to_quality --model models/minilm-imdb \\
        --data ../shared/data/imdb_test.jsonl --n 10 --min-tokens 120 --max-tokens 250 \\
        --budgets 150,250,500,1000 --threads 2 --out bench_output/ttq
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from slalom_core.experiments.bench import BenchConfig, run_benchmark  # noqa: E402

#: Name -> (bench method key, fitter options). "default" is eff's default design (the paper's
#: random 2-token design, prior on s), not the library's default method (eff-slope);
#: "weak-ridge" is the fit before the prior (ridge 1e-3 on s), i.e. close to the
#: unregularised least-squares SLALOM.
DESIGNS: dict[str, tuple[str, dict]] = {
    "default": ("slalom-eff", {}),
    "weak-ridge": ("slalom-eff", {"l2_importance": 1e-3}),
    "balanced": ("slalom-eff", {"design": "balanced"}),
    "singletons+balanced": ("slalom-eff", {"design": "balanced", "singletons": True}),
    "length-3": ("slalom-eff", {"sample_length": 3}),
    # hybrid (the default method before eff-slope, archive §19), and with the prior's sd chosen per text.
    "hybrid": ("slalom-hybrid", {}),
    "hybrid-evidence": ("slalom-hybrid", {"prior_sd": "evidence"}),
}


def parse_variant(spec: str) -> tuple[str, str, dict]:
    """``NAME`` (a preset of :data:`DESIGNS`) or ``NAME:key=value+key=value`` (SLALOM-eff
    with these fitter options), e.g. ``ridge1:design=balanced+l2_importance=1``."""
    from slalom_core.cli.format import option_value

    name, sep, opts = spec.partition(":")
    if not sep:
        method, options = DESIGNS[name]
        return name, method, dict(options)
    options = {}
    for item in opts.split("+"):
        key, _, value = item.partition("=")
        options[key] = option_value(value)
    return name, "slalom-eff", options


def _row(res, label: str, score: str) -> dict:
    by = {r["method"]: r for r in res.summary}
    row = f"{label}/{score}"
    r = by[row]
    r2 = [x.extra.get("heldout_r2", float("nan")) for x in res.results if x.method == row]
    return {
        "heldout_r2": float(np.nanmedian(r2)) if r2 and not np.all(np.isnan(r2)) else float("nan"),
        "aopc": r["comprehensiveness_mean"],
        "se": r["comprehensiveness_se"],
        "seconds": r["seconds_median"],
        "evals": r["model_evaluations_median"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="default")
    ap.add_argument("--data", required=True)
    ap.add_argument("--n", type=int, default=10)
    ap.add_argument("--min-tokens", type=int, default=120)
    ap.add_argument("--max-tokens", type=int, default=250)
    ap.add_argument("--budgets", default="150,250,500,1000", help="comma-separated n_samples")
    ap.add_argument(
        "--designs",
        default=",".join(DESIGNS),
        help=f"comma-separated presets {list(DESIGNS)} or NAME:key=value+key=value (eff options)",
    )
    ap.add_argument("--reference-samples", default="1000", help="budgets for the reference ('' to skip)")
    ap.add_argument("--ana", action="store_true", help="add SLALOM-ana (2U-1 evaluations)")
    ap.add_argument("--score", default="lin")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="bench_output/time_to_quality")
    args = ap.parse_args()

    base = dict(
        model=args.model,
        data=args.data,
        n=args.n,
        min_tokens=args.min_tokens,
        max_tokens=args.max_tokens,
        seed=args.seed,
        threads=args.threads,
        progress=False,
    )
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []

    def run(name: str, method: str, label: str, n_samples: int, options: dict) -> None:
        cfg = BenchConfig(
            **base, out=str(out / f"{name}_{n_samples}"), methods=(method,), n_samples=n_samples, slalom_options=options
        )
        res = run_benchmark(cfg, write=False)
        if res.skipped:
            print(f"{name}: skipped ({res.skipped})")
            return
        row = {"design": name, "n_samples": n_samples, **_row(res, label, args.score)}
        rows.append(row)
        print(
            f"{name:<22}{n_samples:>6}  AOPC {row['aopc']:.3f} ± {row['se']:.3f}  "
            f"{row['seconds']:.3f} s  {row['evals']:.0f} evals  held-out R² {row['heldout_r2']:.3f}",
            flush=True,
        )

    budgets = [int(b) for b in args.budgets.split(",") if b]
    for b in [int(x) for x in args.reference_samples.split(",") if x]:
        run("reference", "reference", "reference-eff", b, {})
    if args.ana:
        run("ana", "slalom-ana", "slalom-ana", max(budgets), {})
    for spec in [d for d in args.designs.split(",") if d]:
        name, method, options = parse_variant(spec)
        for b in budgets:
            run(name, method, method, b, options)

    with (out / "time_to_quality.csv").open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    lines = [
        f"| design | samples | deletion AOPC ({args.score}) | s / explanation (median) | model evals | held-out R² (median) |",
        "|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['design']} | {r['n_samples']} | {r['aopc']:.3f} ± {r['se']:.3f} | {r['seconds']:.3f} | {r['evals']:.0f} | {r['heldout_r2']:.3f} |"
        for r in rows
    ]
    (out / "time_to_quality.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))

    fig, ax = plt.subplots(figsize=(6, 4))
    for name in dict.fromkeys(r["design"] for r in rows):
        pts = sorted((r["seconds"], r["aopc"], r["se"]) for r in rows if r["design"] == name)
        xs, ys, es = zip(*pts)
        ax.errorbar(xs, ys, yerr=es, marker="o", capsize=3, label=name)
    ax.set_xscale("log")
    ax.set_xlabel("median seconds per explanation")
    ax.set_ylabel(f"deletion AOPC ({args.score})")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "time_to_quality.png", dpi=120)


if __name__ == "__main__":
    main()
