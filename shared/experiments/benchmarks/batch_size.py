"""Does a larger forward batch speed up the default explanation? Paired, interleaved timing.

Explains N IMDB test reviews (120–250 tokens) with the default method at two ``batch_size``
values, alternating which goes first, each text with its own seed, and prints the median
seconds per text of each, the mean per-text time ratio (second / first) with its standard
error, and the largest difference of the contributions (batching changes only padding).

Not a test: timings depend on the machine and its load; run it on an idle machine.

Example:
    python -m slalom_core.experiments.benchmarks.batch_size --model default --n 10 --sizes 64,512
"""

from __future__ import annotations

import argparse
import json
import time
import warnings

import numpy as np
import slalom_core as sc
import torch

from ..data import data_file


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="default", help='"default" (packaged MiniLM) or a local model folder')
    ap.add_argument("--n", type=int, default=10, help="number of reviews")
    ap.add_argument("--sizes", default="64,512", help="two batch sizes, comma-separated")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args(argv)
    first, second = (int(x) for x in args.sizes.split(","))
    torch.set_num_threads(args.threads)
    warnings.simplefilter("ignore")  # fit warnings are not what is timed
    from ...cli.corpus import load_pair

    model, tok = load_pair(None if args.model == "default" else args.model)
    texts = []
    with open(data_file("imdb_test.jsonl"), encoding="utf-8") as fh:
        for line in fh:
            text = json.loads(line)["text"]
            if 120 <= len(tok(text)["input_ids"]) <= 250:
                texts.append(text)
            if len(texts) == args.n:
                break
    sc.explain(model, texts[0], tok, seed=0)  # warm-up: first-call costs are not the batch's
    seconds: dict[int, list[float]] = {first: [], second: []}
    diff = 0.0
    for i, text in enumerate(texts):
        exps = {}
        for size in (first, second) if i % 2 == 0 else (second, first):
            t0 = time.perf_counter()
            exps[size] = sc.explain(model, text, tok, seed=i, batch_size=size)
            seconds[size].append(time.perf_counter() - t0)
        diff = max(diff, float(np.max(np.abs(exps[first].contribution - exps[second].contribution))))
    a, b = np.array(seconds[first]), np.array(seconds[second])
    ratio = b / a
    print(
        f"{args.model}: {len(texts)} texts; median s/text batch {first}: {np.median(a):.3f}, batch {second}: "
        f"{np.median(b):.3f}; time ratio {second}/{first} {ratio.mean():.3f} ± {ratio.std(ddof=1) / np.sqrt(len(ratio)):.3f}; "
        f"max |Δ contribution| {diff:.2e}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
