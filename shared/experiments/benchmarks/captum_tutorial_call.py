"""Cost of Captum's BERT-tutorial call through SlalomAttribution against the engine alone.

The tutorial call passes ``input_ids`` with a ``[CLS] [PAD]... [SEP]`` baseline and
``(token_type_ids, position_ids, attention_mask)`` as additional forward arguments. The
adapter must find the special tokens from the baseline, let the per-position arguments
follow SLALOM's deletions and cost about what ``slalom_core.explain`` costs on the same
ids (target: at most 1.5x). Both run SLALOM-eff with the same seed on the packaged MiniLM
(zero-shot head) and IMDB reviews. Not a test: timings depend on the machine.

    python -m slalom_core.experiments.benchmarks.captum_tutorial_call --data ../shared/data/imdb_test.jsonl --n 5
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import slalom_core as sc
import torch
from slalom_core.packaged.demo_model import load_default_model

from captum_slalom import SlalomAttribution


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--n", type=int, default=5)
    ap.add_argument("--min-tokens", type=int, default=100)
    ap.add_argument("--max-tokens", type=int, default=250)
    ap.add_argument("--n-samples", type=int, default=1000)
    args = ap.parse_args()

    model, tok = load_default_model()

    def predict(inputs, token_type_ids=None, position_ids=None, attention_mask=None):
        return model(input_ids=inputs, token_type_ids=token_type_ids, attention_mask=attention_mask).logits

    texts = []
    with open(args.data) as fh:
        for line in fh:
            text = json.loads(line)["text"]
            n = len(tok(text, add_special_tokens=False)["input_ids"])
            if args.min_tokens <= n <= args.max_tokens:
                texts.append(text)
            if len(texts) == args.n:
                break

    rows = []
    for i, text in enumerate(texts):
        ids = tok(text, return_tensors="pt")["input_ids"]
        ref = torch.full_like(ids, tok.pad_token_id)
        ref[0, 0], ref[0, -1] = tok.cls_token_id, tok.sep_token_id
        extra = (torch.zeros_like(ids), torch.arange(ids.shape[1])[None], torch.ones_like(ids))
        t0 = time.perf_counter()
        exp = sc.explain(model, ids[0, 1:-1].tolist(), tokenizer=tok, n_samples=args.n_samples, seed=i)
        t_engine = time.perf_counter() - t0
        t0 = time.perf_counter()
        attr = SlalomAttribution(predict).attribute(
            ids, baselines=ref, target=1, additional_forward_args=extra, n_samples=args.n_samples, seed=i
        )
        t_captum = time.perf_counter() - t0
        gap = float((attr[0, 1:-1] - torch.as_tensor(exp.contribution, dtype=attr.dtype)).abs().max())
        rows.append((ids.shape[1], t_engine, t_captum, gap))
        print(
            f"text {i}: {ids.shape[1]} tokens, engine {t_engine:.2f} s, Captum tutorial call {t_captum:.2f} s "
            f"(x{t_captum / t_engine:.2f}), max |difference| of contributions {gap:.1e}"
        )
    ratios = [c / e for _, e, c, _ in rows]
    print(
        f"median ratio Captum/engine {statistics.median(ratios):.2f} (max {max(ratios):.2f}) over {len(rows)} texts, "
        f"torch threads {torch.get_num_threads()}"
    )


if __name__ == "__main__":
    main()
