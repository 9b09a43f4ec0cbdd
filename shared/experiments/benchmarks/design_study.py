"""Designs across lengths: the full-text gap against held-out error, deletion
AOPC and cost, for SLALOM-eff designs, anchoring at the full text, and SLALOM-fidel.

For each text the model's log-odds on the full text is compared with the surrogate's
(``full_text_gap``); the fit is checked on the design's own held-out samples
(``heldout_r2``) and on fresh deletion samples of the text that no design fits
(``check_r2``, ``check_samples`` of them); deletion AOPC (ERASER comprehensiveness, tokens
deleted) is measured for ``lin`` and ``value``. Not a test: timings depend on the machine.

    python -m slalom_core.experiments.benchmarks.design_study --data ../shared/data/imdb_test.jsonl --n 10 \\
        --min-tokens 40 --max-tokens 120 --n-samples 1000 --out bench_output/designs
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np
import slalom_core as sc
import torch
from slalom_core.experiments import evaluation as ev

#: name -> (method, options)
VARIANTS: dict[str, tuple[str, dict]] = {
    "eff pairs (default)": ("eff", {}),
    "eff lengths 1-3": ("eff", {"sample_length": (1, 3)}),
    "eff + anchor 0.05": ("eff", {"anchor_weight": 0.05}),
    "eff + anchor 0.2": ("eff", {"anchor_weight": 0.2}),
    "eff + 10% deletions": ("eff", {"deletion_share": 0.1}),
    "eff + 10% deletions + anchor 0.05": ("eff", {"deletion_share": 0.1, "anchor_weight": 0.05}),
    "eff + 30% deletions": ("eff", {"deletion_share": 0.3}),
    "fidel": ("fidel", {}),
}


def load_texts(path: Path, n: int, tok, lo: int, hi: int) -> list[str]:
    out = []
    with open(path) as fh:
        for line in fh:
            text = json.loads(line)["text"]
            k = len(tok(text, add_special_tokens=False)["input_ids"])
            if lo <= k <= hi:
                out.append(text)
            if len(out) == n:
                break
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="default", help="'default' (packaged MiniLM) or a local HF model folder")
    ap.add_argument("--data", required=True)
    ap.add_argument("--n", type=int, default=10)
    ap.add_argument("--min-tokens", type=int, default=40)
    ap.add_argument("--max-tokens", type=int, default=120)
    ap.add_argument("--n-samples", type=int, default=1000)
    ap.add_argument("--check-samples", type=int, default=50)
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default="bench_output/designs")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.model == "default":
        from slalom_core.packaged.demo_model import load_default_model

        model, tok = load_default_model()
    else:
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        tok = AutoTokenizer.from_pretrained(args.model)
        model = AutoModelForSequenceClassification.from_pretrained(args.model).eval()
    adapter = sc.HFClassifier(model, tok)
    texts = load_texts(Path(args.data), args.n, tok, args.min_tokens, args.max_tokens)

    def predict(seqs):
        return torch.softmax(adapter.score(seqs), dim=1).numpy()

    rows = []
    for name in args.variants.split(","):
        method, opts = VARIANTS[name]
        per = []
        for text in texts:
            t0 = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", sc.SlalomFitWarning)
                exp = sc.explain(
                    adapter,
                    text,
                    method=method,
                    n_samples=args.n_samples,
                    seed=0,
                    check_samples=args.check_samples,
                    **opts,
                )
            seconds = time.perf_counter() - t0
            d = exp.diagnostics
            ids = [t[0] for t in exp.token_ids]
            target = int(exp.model_output > 0)
            sign = 1.0 if target == 1 else -1.0
            pred = lambda seqs, target=target: predict(seqs)[:, target]
            per.append(
                {
                    "gap": abs(exp.full_text_gap),
                    "signal": abs(exp.model_output - exp.base_value),
                    "heldout_r2": d["heldout_r2"],
                    "check_r2": d.get("check_r2", np.nan),
                    "aopc_lin": ev.deletion_aopc(pred, ids, sign * exp.lin),
                    "aopc_value": ev.deletion_aopc(pred, ids, sign * exp.value),
                    "tokens": d["tokens_evaluated"] - (d.get("n_check", 0) * (len(ids) + 1)),
                    "seconds": seconds,
                    "determined": float(np.mean(exp.importance_determined)),
                }
            )
        agg = {k: float(np.nanmean([p[k] for p in per])) for k in per[0]}
        agg["gap_ratio"] = agg["gap"] / agg["signal"]
        rows.append({"variant": name, **agg})
        print(json.dumps(rows[-1]), flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cols = [
        "variant",
        "gap",
        "signal",
        "gap_ratio",
        "heldout_r2",
        "check_r2",
        "aopc_lin",
        "aopc_value",
        "determined",
        "tokens",
        "seconds",
    ]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        lines.append("| " + " | ".join(r[c] if isinstance(r[c], str) else f"{r[c]:.3g}" for c in cols) + " |")
    (out / "design_study.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
