"""How many label texts the amortized pipeline needs: the audit's agreement against the size
of the label set (the curve behind ``slalom_core.amortized.pipeline.LABEL_TEXTS``).

Three stages, each a subcommand writing under ``--work``:

- ``prepare``: ``pool.jsonl``, ``--n-pool`` random IMDB training reviews (``random.Random(43)``), and
  ``audit.jsonl``, ``--n-audit`` random IMDB test reviews (``random.Random(44)``), full length (the runs
  cut them at the model's 512 tokens, as the pipeline does).
- then, with the project's command, the per-text runs the pipeline's labels and audit are
  (the default method and budget):
  ``slalom-xai explain --data WORK/pool.jsonl --out WORK/pool`` and the same for ``audit``.
- ``curve``: for each size N in ``--sizes``, a head trained on the pool run's first N texts
  (the pool is in random order), then the Spearman of value and of importance between its
  explanation of each audit text and the text's per-text fit: what the pipeline's audit
  reports. Prints one JSON line per N (mean, s.e., 10th percentile, training seconds).

Not a test: training seconds depend on the machine and its load.

    python -m slalom_core.experiments.benchmarks.label_curve prepare --work bench_output/labels
    slalom-xai explain --data bench_output/labels/pool.jsonl --out bench_output/labels/pool
    slalom-xai explain --data bench_output/labels/audit.jsonl --out bench_output/labels/audit
    python -m slalom_core.experiments.benchmarks.label_curve curve --work bench_output/labels --sizes 50,100,200,300,400
"""

from __future__ import annotations

import argparse
import json
import random
import time
import warnings
from pathlib import Path

import numpy as np


def prepare(work: Path, data: Path, n_pool: int, n_audit: int) -> None:
    from slalom_core.experiments.data import read_jsonl

    work.mkdir(parents=True, exist_ok=True)
    for name, source, n, seed in (
        ("pool", data / "imdb_train.jsonl.gz", n_pool, 43),
        ("audit", data / "imdb_test.jsonl", n_audit, 44),
    ):
        rows = list(read_jsonl(source))
        random.Random(seed).shuffle(rows)  # the draw the measured curve used
        with open(work / f"{name}.jsonl", "w", encoding="utf-8") as f:
            for r in rows[:n]:
                f.write(json.dumps({"id": r["id"], "text": r["text"], "label": r["label"]}) + "\n")
        print(f"wrote {work / f'{name}.jsonl'} ({n} reviews)")


def _first(labels, n: int):
    """The label set of the run's first ``n`` texts."""
    for name in ("ids", "sequences", "unit_index", "value", "importance", "value_weight", "importance_weight"):
        setattr(labels, name, getattr(labels, name)[:n])
    return labels


def curve(work: Path, sizes: list[int], model_spec: str | None, threads: int) -> list[dict]:
    import torch
    from slalom_core.amortized import AmortizedExplainer
    from slalom_core.amortized import explainer as explainer_module
    from slalom_core.amortized.audit import agreement
    from slalom_core.cli.common import load_pair
    from slalom_core.corpus import CorpusRun
    from slalom_core.experiments.data import read_jsonl

    torch.set_num_threads(threads)
    model, tok = load_pair(model_spec)
    pool, audit = CorpusRun(work / "pool"), CorpusRun(work / "audit")
    texts = {str(r["id"]): r["text"] for r in read_jsonl(work / "audit.jsonl")}
    ids = sorted(audit.texts()["id"])
    fits = [audit.explanation(i) for i in ids]
    read_labels = explainer_module.read_labels
    out = []
    try:
        for n in sizes:
            explainer_module.read_labels = lambda *a, n=n, **k: _first(read_labels(*a, **k), n)
            t0 = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                head = AmortizedExplainer(model, tok).fit(pool)
                seconds = time.perf_counter() - t0
                exps = head.explain_batch([texts[i] for i in ids])
            rho = np.array([agreement(e, f) for e, f in zip(exps, fits)], dtype=float)
            row = {"n_labels": n, "n_audit": len(ids), "train_seconds": round(seconds, 1)}
            for k, name in enumerate(("value", "importance")):
                x = rho[:, k][np.isfinite(rho[:, k])]
                row[f"{name}_mean"] = round(float(x.mean()), 4)
                row[f"{name}_se"] = round(float(x.std(ddof=1) / np.sqrt(len(x))), 4)
                row[f"{name}_p10"] = round(float(np.quantile(x, 0.1)), 4)
            print(json.dumps(row), flush=True)
            out.append(row)
    finally:
        explainer_module.read_labels = read_labels
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="stage", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--work", type=Path, required=True)
    p.add_argument("--data", type=Path, default=Path("../shared/data"))
    p.add_argument("--n-pool", type=int, default=400)
    p.add_argument("--n-audit", type=int, default=60)
    c = sub.add_parser("curve")
    c.add_argument("--work", type=Path, required=True)
    c.add_argument("--sizes", default="50,100,200,300,400")
    c.add_argument("--model", default=None, help="default: the packaged demo model")
    c.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    if args.stage == "prepare":
        prepare(args.work, args.data, args.n_pool, args.n_audit)
    else:
        curve(args.work, [int(s) for s in args.sizes.split(",")], args.model, args.threads)


if __name__ == "__main__":
    main()
