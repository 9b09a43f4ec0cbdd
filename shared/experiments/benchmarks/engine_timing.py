"""Engine benchmark: model seconds vs engine seconds for eff, fidel and ana.

Explains one ~250-token IMDB review (from ../shared/data, or a built-in text when the data
is absent) with the packaged MiniLM zero-shot model and prints, per method, the wall time,
the time spent in the model's forward passes and the time spent in the engine (sampling,
bookkeeping and fitting). Not a test: timings depend on the machine.

    python -m slalom_core.experiments.benchmarks.engine_timing [--n-samples 1000] [--repeats 3] [--device cpu]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import slalom_core as sc
import torch
from slalom_core.experiments.data import data_dir
from slalom_core.packaged.demo_model import load_default_model

DATA = (data_dir() or Path("../shared/data")) / "imdb_test.jsonl"


def pick_text(tok, target_tokens: int = 250) -> str:
    if DATA.exists():
        best = None
        for line in DATA.open():
            text = json.loads(line)["text"]
            n = len(tok(text, add_special_tokens=False)["input_ids"])
            if abs(n - target_tokens) <= 10:
                return text
            if best is None or abs(n - target_tokens) < abs(best[0] - target_tokens):
                best = (n, text)
        return best[1]
    base = "the film was a long and uneven ride with some great moments and some dull ones . "
    return base * (target_tokens // 17)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n-samples", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--device", default=None)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    model, tok = load_default_model(device=args.device)
    text = pick_text(tok)
    n_tok = len(tok(text, add_special_tokens=False)["input_ids"])
    print(f"text: {n_tok} tokens; torch threads {torch.get_num_threads()}; device {args.device or 'cpu'}")
    adapter = sc.HFClassifier(model, tok, batch_size=args.batch_size)
    sc.explain(adapter, text, n_samples=200, seed=0)  # warm-up
    print(f"{'method':<7}{'wall s':>9}{'model s':>9}{'engine s':>10}{'engine %':>10}{'evals':>7}{'R2':>8}")
    for method in ("eff", "fidel", "ana"):
        rows = []
        for r in range(args.repeats):
            t0 = time.perf_counter()
            exp = sc.explain(adapter, text, method=method, n_samples=args.n_samples, seed=r)
            wall = time.perf_counter() - t0
            rows.append(
                (
                    wall,
                    exp.diagnostics["model_seconds"],
                    exp.diagnostics["model_evaluations"],
                    exp.diagnostics.get("heldout_r2", float("nan")),
                )
            )
        wall, model_s = np.median([r[0] for r in rows]), np.median([r[1] for r in rows])
        eng = wall - model_s
        print(
            f"{method:<7}{wall:>9.3f}{model_s:>9.3f}{eng:>10.3f}{100 * eng / wall:>9.1f}%{rows[0][2]:>7}{np.median([r[3] for r in rows]):>8.3f}"
        )


if __name__ == "__main__":
    main()
