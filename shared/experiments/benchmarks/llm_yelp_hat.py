"""App. F.8 / Table 13 setting: a prompted causal LM (BLOOM, Mamba, Llama...) on Yelp-HAT.

Loads a Hugging Face causal LM (Hub name or local folder) and its tokenizer, makes it a
sentiment classifier with :class:`slalom_core.PromptClassifier` (label words " negative" /
" positive"), explains N Yelp-HAT reviews with SLALOM-eff, and reports the ROC-AUC of
|value|, importance and |lin| against the human-attention labels (every sub-token gets
its word's label), as in the paper's Table 13 (BLOOM-7B: 0.69 / 0.71 / 0.70; Mamba-2.8B:
0.69 / 0.32 / 0.70).

The paper's models need a GPU (bf16: ~15 GB for BLOOM-7B1, ~6 GB for Mamba-2.8B):

    python -m slalom_core.experiments.benchmarks.llm_yelp_hat --model bigscience/bloom-7b1 \\
        --device cuda --dtype bfloat16 --texts 50 --n-samples 5000 --json bloom.json
    python -m slalom_core.experiments.benchmarks.llm_yelp_hat --model state-spaces/mamba-2.8b-hf \\
        --device cuda --dtype bfloat16 --texts 50 --n-samples 5000 --json mamba.json

The data (``yelp_hat_dev.jsonl``) are found as the harness finds them (``$SLALOM_DATA`` or
``../shared/data``). Any local folder written by ``save_pretrained`` works the same way
(the tests run it on a tiny random GPT-2).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import slalom_core as sc
import torch
from slalom_core.experiments import evaluation as ev
from slalom_core.experiments.bench import read_jsonl, select_instances
from slalom_core.experiments.data import data_dir

TEMPLATE = "Review:\n{text}\nIs this review negative or positive? Answer:"
LABELS = [" negative", " positive"]
PAPER = {"bloom": (0.69, 0.71, 0.70), "mamba": (0.69, 0.32, 0.70)}


def run(
    model_name: str,
    *,
    data: Path | None = None,
    texts: int = 50,
    n_samples: int = 5000,
    min_tokens: int = 20,
    max_tokens: int = 200,
    device: str | None = None,
    dtype: str = "float32",
    batch_size: int = 16,
    seed: int = 0,
) -> dict:
    """Explain ``texts`` Yelp-HAT reviews with a prompted LM; mean human-attention ROC-AUC per score.

    Example:
        >>> res = run("bigscience/bloom-7b1", device="cuda", dtype="bfloat16")  # doctest: +SKIP
        >>> res["auc"]  # doctest: +SKIP
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = data if data is not None else (data_dir() or Path("../shared/data")) / "yelp_hat_dev.jsonl"
    tok = AutoTokenizer.from_pretrained(model_name)
    model = AutoModelForCausalLM.from_pretrained(model_name, dtype=getattr(torch, dtype)).eval()
    clf = sc.PromptClassifier(model, tok, TEMPLATE, LABELS, batch_size=batch_size, device=device)
    insts = select_instances(read_jsonl(path), tok, n=texts, min_tokens=min_tokens, max_tokens=max_tokens, seed=seed)
    aucs: dict[str, list[float]] = {"value": [], "importance": [], "lin": []}
    t0 = time.perf_counter()
    for inst in insts:
        exp = sc.explain(clf, inst.token_ids, method="eff", n_samples=n_samples, seed=seed, output="logits")
        for score, absolute in (("value", True), ("importance", False), ("lin", True)):
            agr = ev.human_attention_agreement(getattr(exp, score), inst.attention, absolute=absolute)
            aucs[score].append(agr.roc_auc)
    return {
        "model": model_name,
        "texts": len(insts),
        "n_samples": n_samples,
        "seconds": time.perf_counter() - t0,
        "auc": {k: float(np.nanmean(v)) if v else float("nan") for k, v in aucs.items()},
    }


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="Hub name or local folder of a causal LM")
    ap.add_argument("--data", type=Path)
    ap.add_argument("--texts", type=int, default=50)
    ap.add_argument("--n-samples", type=int, default=5000)
    ap.add_argument("--min-tokens", type=int, default=20)
    ap.add_argument("--max-tokens", type=int, default=200)
    ap.add_argument("--device")
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    res = run(
        args.model,
        data=args.data,
        texts=args.texts,
        n_samples=args.n_samples,
        min_tokens=args.min_tokens,
        max_tokens=args.max_tokens,
        device=args.device,
        dtype=args.dtype,
        batch_size=args.batch_size,
    )
    print(json.dumps(res, indent=2))
    if args.json:
        args.json.write_text(json.dumps(res, indent=2))
    return res


if __name__ == "__main__":
    main()
