"""Seconds per text of the amortized explainer's forward pass against the texts per batch
(the measurement behind ``slalom_core.amortized.features.CPU_BATCH``).

256 IMDB test reviews (rows 1000-1255 of ``imdb_test.jsonl``, cut at the model's 512 tokens)
are encoded as a corpus run encodes them: in chunks of ``--chunk`` texts, each chunk sorted
by length and cut into batches of B. Prints seconds per text for each B in ``--sizes``.

Not a test: seconds depend on the machine and its load.

    python -m slalom_core.experiments.benchmarks.amortized_batch --sizes 32,16,8,4,2,1 --threads 2
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data/imdb_test.jsonl"))
    parser.add_argument("--sizes", default="32,16,8,4,2,1")
    parser.add_argument("--chunk", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--model", default=None, help="default: the packaged demo model")
    args = parser.parse_args(argv)

    import torch
    from slalom_core.amortized.features import check_encoder, encode
    from slalom_core.cli.common import load_pair
    from slalom_core.experiments.data import read_jsonl
    from slalom_core.models import as_adapter

    torch.set_num_threads(args.threads)
    model, tok = load_pair(args.model)
    adapter = check_encoder(as_adapter(model, tok))
    texts = [r["text"] for r in read_jsonl(args.data)][1000:1256]
    seqs = [[i for u in adapter.segment_within_length(t)[0].unit_ids for i in u] for t in texts]
    encode(adapter, seqs[:8], batch_size=8)  # warm-up: the first pass allocates
    for size in (int(s) for s in args.sizes.split(",")):
        t0 = time.perf_counter()
        for start in range(0, len(seqs), args.chunk):
            encode(adapter, seqs[start : start + args.chunk], batch_size=size)
        per_text = (time.perf_counter() - t0) / len(seqs)
        print(json.dumps({"batch": size, "chunk": args.chunk, "seconds_per_text": round(per_text, 4)}), flush=True)


if __name__ == "__main__":
    main()
