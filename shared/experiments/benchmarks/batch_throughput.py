"""``explain_batch`` against a loop of ``explain``: texts per second, same seeds.

Explains the same N IMDB test reviews (default 32, 120-250 tokens) once one at a time and
once in a single ``explain_batch`` call, and prints wall seconds, model seconds and the
throughput ratio. Also checks that both paths gave the same explanations (they draw the same
samples from the same seeds). Not a test: timings depend on the machine.

    python -m slalom_core.experiments.benchmarks.batch_throughput --model models/minilm-imdb --n 32 --threads 2
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch

import slalom_core as sc
from slalom_core.experiments.data import data_dir
from slalom_core.experiments.bench import load_model

DATA = (data_dir() or Path("../shared/data")) / "imdb_test.jsonl"


def pick_texts(tok, n: int, lo: int, hi: int, path: Path) -> list[str]:
    out = []
    with path.open() as fh:
        for line in fh:
            text = json.loads(line)["text"]
            if lo <= len(tok(text, add_special_tokens=False)["input_ids"]) <= hi:
                out.append(text)
                if len(out) == n:
                    break
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="default")
    ap.add_argument("--data", default=str(DATA))
    ap.add_argument("--n", type=int, default=32)
    ap.add_argument("--min-tokens", type=int, default=120)
    ap.add_argument("--max-tokens", type=int, default=250)
    ap.add_argument("--n-samples", type=int, default=1000)
    ap.add_argument("--method", default="eff")
    ap.add_argument("--batch-size", type=int, default=256, help="sequences per forward pass")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--device", default=None)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    model, tok, _ = load_model(args.model, device=args.device)
    texts = pick_texts(tok, args.n, args.min_tokens, args.max_tokens, Path(args.data))
    adapter = sc.HFClassifier(model, tok, batch_size=args.batch_size)
    sc.explain(adapter, texts[0], method=args.method, n_samples=200, seed=0)  # warm-up
    print(f"{len(texts)} texts, {args.n_samples} samples, method {args.method}, "
          f"batch size {args.batch_size}, torch threads {torch.get_num_threads()}, device {next(model.parameters()).device}")

    t0 = time.perf_counter()
    single = [sc.explain(adapter, t, method=args.method, n_samples=args.n_samples, seed=0) for t in texts]
    t_loop = time.perf_counter() - t0
    t0 = time.perf_counter()
    batch = sc.explain_batch(adapter, texts, method=args.method, n_samples=args.n_samples, seed=0)
    t_batch = time.perf_counter() - t0

    same = all(np.allclose(a.value, b.value, atol=1e-4) for a, b in zip(single, batch))
    m_loop = sum(e.diagnostics["model_seconds"] for e in single)
    m_batch = sum(e.diagnostics["model_seconds"] for e in batch)
    print(f"loop : {t_loop:7.2f} s wall ({len(texts) / t_loop:.2f} texts/s), model {m_loop:.2f} s")
    print(f"batch: {t_batch:7.2f} s wall ({len(texts) / t_batch:.2f} texts/s), model {m_batch:.2f} s")
    print(f"throughput ratio batch/loop: {t_loop / t_batch:.2f}x; same explanations: {same}")


if __name__ == "__main__":
    main()
