"""How much reading each distinct sample once saves: the default with repeats read, and without.

Explains texts of a data file within a token range with the default method (or
``--method``) twice: through the model as given (each distinct sample read once per call)
and through the same model declared ``deterministic=False`` (every sample read, repeats
included, as before samples were shared). Alternates which goes first. Prints, per text
group: the samples drawn, the sequences the model read and the tokens it read (special
tokens included) for both, the median seconds per text of both, and the largest
difference of any score between the two (reading a sequence once or twice gives the same
output, so only batching noise may differ).

Not a test: timings depend on the machine and its load (the load average is printed).

Example:
    python -m slalom_core.experiments.benchmarks.repeats --model models/minilm-imdb \\
        --data ../shared/data/imdb_test.jsonl --words 12 --n 30
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import time
import warnings

import numpy as np
import slalom_core as sc
import torch

from ..data import read_jsonl


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="default", help='"default" (packaged MiniLM) or a local model folder')
    ap.add_argument("--data", required=True, help="a JSON-lines file with a text field (or words)")
    ap.add_argument("--min-tokens", type=int, default=1)
    ap.add_argument("--max-tokens", type=int, default=250)
    ap.add_argument("--n", type=int, default=30)
    ap.add_argument("--words", type=int, default=None, help="cut each text to its first WORDS words (short texts)")
    ap.add_argument("--n-samples", type=int, default=1000)
    ap.add_argument("--method", default=sc.DEFAULT_METHOD)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    warnings.simplefilter("ignore")  # fit warnings are not what is measured
    from ...cli.corpus import load_pair

    model, tok = load_pair(None if args.model == "default" else args.model)
    once = sc.as_adapter(model, tok)
    every = copy.copy(once)
    every.deterministic = False
    texts = []
    for row in read_jsonl(args.data):
        text = row["text"] if "text" in row else " ".join(row["words"])
        text = text if args.words is None else " ".join(text.split()[: args.words])
        if args.min_tokens <= len(tok(text, add_special_tokens=False)["input_ids"]) <= args.max_tokens:
            texts.append(text)
        if len(texts) == args.n:
            break
    load = [os.getloadavg()[0]]
    sc.explain(once, texts[0], n_samples=args.n_samples, method=args.method, seed=0)  # warm-up
    rows = []
    for i, text in enumerate(texts):
        exps, secs = {}, {}
        for name in ("once", "every") if i % 2 == 0 else ("every", "once"):
            t0 = time.perf_counter()
            exps[name] = sc.explain(
                once if name == "once" else every, text, n_samples=args.n_samples, method=args.method, seed=i
            )
            secs[name] = time.perf_counter() - t0
        diff = max(
            float(np.max(np.abs(exps["once"].scores(s) - exps["every"].scores(s))))
            for s in ("value", "importance", "lin", "contribution")
        )
        row = {"n_tokens": len(exps["once"].tokens), "max_score_diff": diff}
        for name, exp in exps.items():
            row[f"{name}_reads"] = exp.diagnostics["model_evaluations"]
            row[f"{name}_tokens"] = exp.diagnostics["tokens_evaluated"]
            row[f"{name}_s"] = secs[name]
        rows.append(row)
    load.append(os.getloadavg()[0])
    n_tok = [r["n_tokens"] for r in rows]
    print(
        f"{len(rows)} texts of {min(n_tok)}–{max(n_tok)} tokens (mean {np.mean(n_tok):.0f}), "
        f"method {args.method}, {args.n_samples} samples, {args.threads} threads, load {load[0]:.2f} → {load[1]:.2f}"
    )
    print("| sequences read | … distinct once | tokens read | … distinct once | s/text (median) | … distinct once |")
    print("|---:|---:|---:|---:|---:|---:|")
    print(
        f"| {np.mean([r['every_reads'] for r in rows]):.0f} | {np.mean([r['once_reads'] for r in rows]):.0f} "
        f"| {np.mean([r['every_tokens'] for r in rows]):.0f} | {np.mean([r['once_tokens'] for r in rows]):.0f} "
        f"| {np.median([r['every_s'] for r in rows]):.3f} | {np.median([r['once_s'] for r in rows]):.3f} |"
    )
    print(f"largest score difference between the two: {max(r['max_score_diff'] for r in rows):.2e}")
    print(json.dumps(rows[:3]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
