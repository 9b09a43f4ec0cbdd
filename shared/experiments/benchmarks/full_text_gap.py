"""The surrogate on the text it explains: mean |full_text_gap| against the model's signal.

Explains the bench's IMDB texts (the same selection as ``slalom-xai bench``: seeded, 120-250
tokens) with each SLALOM method and prints, per method, the mean |model - surrogate| on the
full text, the mean |model - reference| and their ratio (docs/results.md, section 12).

    python -m slalom_core.experiments.benchmarks.full_text_gap --model models/minilm-imdb
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np
import slalom_core as sc
import torch
from slalom_core.experiments.bench import load_model, select_instances
from slalom_core.experiments.data import data_file, read_jsonl


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="default")
    ap.add_argument("--data", default=None, help="JSON lines (default: imdb_test.jsonl in the data folder)")
    ap.add_argument("--n", type=int, default=10)
    ap.add_argument("--min-tokens", type=int, default=120)
    ap.add_argument("--max-tokens", type=int, default=250)
    ap.add_argument("--n-samples", type=int, default=1000)
    ap.add_argument("--methods", default="eff,fidel")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    model, tok, name = load_model(args.model)
    rows = read_jsonl(args.data or data_file("imdb_test.jsonl"))
    insts = select_instances(
        rows, tok, n=args.n, min_tokens=args.min_tokens, max_tokens=args.max_tokens, seed=args.seed
    )
    print(f"{name}: {len(insts)} texts, {args.n_samples} samples, seed {args.seed}")
    for method in args.methods.split(","):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the gap is what is measured here
            exps = sc.explain_batch(
                model,
                [i.token_ids for i in insts],
                tokenizer=tok,
                method=method,
                n_samples=args.n_samples,
                seed=args.seed,
            )
        gap = np.mean([abs(e.full_text_gap) for e in exps])
        signal = np.mean([abs(e.model_output - e.base_value) for e in exps])
        print(f"{method:>6}: mean |gap| {gap:.3f}, mean |model - reference| {signal:.3f}, ratio {gap / signal:.3f}")


if __name__ == "__main__":
    main()
