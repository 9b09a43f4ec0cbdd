"""What SLALOM costs a model that is paid per call or per token: eff, fidel and ana on ~200-token reviews.

For N IMDB test reviews of 190-210 tokens (packaged MiniLM's tokenizer), prints per
method and sample budget what an API black box (:class:`slalom_core.APIClassifier`) would
be charged: calls (unique sample strings; the cache answers the rest), the cache hit rate,
and input tokens, each request counted as its text plus the chat template of
:mod:`slalom_core.experiments.openai_chat` (counted with the same tokenizer, a stand-in for
the API's own). These come from :func:`slalom_core.estimate_cost`, which calls no model;
for eff and fidel they are exact (the samples are fixed by the seed), for ana an upper
bound.

``--run`` then explains the first review for real at ``--n-run`` samples through an
``APIClassifier`` around the packaged MiniLM classifier (the "API"), and through a
``PromptClassifier`` on a tiny random 2-layer GPT-2 (a local causal LM), printing the
calls, hits and tokens the run reported against the estimate, and seconds.

    python -m slalom_core.experiments.benchmarks.api_cost                # estimates, 5 reviews
    python -m slalom_core.experiments.benchmarks.api_cost --run --json out.json
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import numpy as np
import slalom_core as sc
import torch
from slalom_core.experiments.bench import load_model
from slalom_core.experiments.benchmarks.batch_throughput import pick_texts
from slalom_core.experiments.data import data_dir
from slalom_core.experiments.openai_chat import DEFAULT_TEMPLATE

DATA = (data_dir() or Path("../shared/data")) / "imdb_test.jsonl"
METHODS = {"eff": (250, 500, 1000, 2000), "fidel": (250, 500, 1000, 2000), "ana": (1,)}


def api_model(clf: torch.nn.Module, tok) -> sc.APIClassifier:
    """The MiniLM classifier behind a per-text call, as a hosted model would be."""
    adapter = sc.HFClassifier(clf, tok)
    frame = DEFAULT_TEMPLATE.replace("{labels}", "negative, positive").replace("{text}", "")

    def call(text: str) -> list[float]:
        ids = tok(text, add_special_tokens=False)["input_ids"]
        return adapter.score([ids])[0].tolist()

    overhead = len(tok(frame, add_special_tokens=False)["input_ids"])
    return sc.APIClassifier(call, tok, class_names=["neg", "pos"], tokens_per_call=overhead)


def tiny_prompted_gpt2(tok) -> sc.PromptClassifier:
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    cfg = GPT2Config(
        vocab_size=len(tok),
        n_embd=64,
        n_layer=2,
        n_head=2,
        n_positions=512,
        initializer_range=0.2,
        bos_token_id=tok.cls_token_id,
        eos_token_id=tok.sep_token_id,
    )
    return sc.PromptClassifier(
        GPT2LMHeadModel(cfg).eval(), tok, "Review: {text}\nSentiment:", [" negative", " positive"], batch_size=64
    )


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--texts", type=int, default=5)
    ap.add_argument("--lo", type=int, default=190)
    ap.add_argument("--hi", type=int, default=210)
    ap.add_argument("--run", action="store_true", help="also explain the first review for real")
    ap.add_argument("--n-run", type=int, default=1000)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    torch.manual_seed(0)
    clf, tok, _name = load_model("default")
    texts = pick_texts(tok, args.texts, args.lo, args.hi, DATA)
    report: dict = {
        "machine": f"{platform.machine()}, {torch.get_num_threads()} torch threads",
        "texts": len(texts),
        "tokens": [len(tok(t, add_special_tokens=False)["input_ids"]) for t in texts],
        "estimates": {},
    }
    api = api_model(clf, tok)
    print(f"{len(texts)} reviews of {report['tokens']} tokens; {api.tokens_per_call} template tokens per request")
    print(f"{'method':6} {'n_samples':>9} {'calls':>8} {'hit rate':>8} {'input tokens':>13} {'tokens/call':>11}")
    for method, grid in METHODS.items():
        for n in grid:
            ests = [sc.estimate_cost(api, t, method=method, n_samples=max(n, 1), seed=0) for t in texts]
            calls = float(np.mean([e["calls"] for e in ests]))
            hits = float(np.mean([e["cache_hits"] / (e["cache_hits"] + e["calls"]) for e in ests]))
            tokens = float(np.mean([e["input_tokens"] for e in ests]))
            report["estimates"][f"{method}/{n}"] = {"calls": calls, "hit_rate": hits, "input_tokens": tokens}
            shown = "2U-1" if method == "ana" else str(n)
            print(f"{method:6} {shown:>9} {calls:8.0f} {hits:8.1%} {tokens:13,.0f} {tokens / calls:11.1f}")

    if args.run:
        report["runs"] = {}
        text = texts[0]
        lm = tiny_prompted_gpt2(tok)
        for label, model in (("MiniLM behind APIClassifier", api_model(clf, tok)), ("tiny GPT-2 prompted", lm)):
            for method in ("eff", "fidel"):
                est = sc.estimate_cost(model, text, method=method, n_samples=args.n_run, seed=0)
                t0 = time.perf_counter()
                exp = sc.explain(model, text, method=method, n_samples=args.n_run, seed=0, output="logits")
                secs = time.perf_counter() - t0
                used = exp.diagnostics.get("api_usage") or {
                    "calls": exp.diagnostics["model_evaluations"],
                    "input_tokens": exp.diagnostics["tokens_evaluated"],
                }
                row = {
                    "seconds": secs,
                    "calls": used["calls"],
                    "input_tokens": used["input_tokens"],
                    "estimate": est,
                    "heldout_r2": exp.diagnostics.get("heldout_r2"),
                }
                report["runs"][f"{label}/{method}"] = row
                print(
                    f"{label:28} {method:5} n={args.n_run}: {secs:6.1f} s, calls {used['calls']} "
                    f"(estimate {est['calls']}), input tokens {used['input_tokens']:,} "
                    f"(estimate {est['input_tokens']:,}), held-out R² {row['heldout_r2']:.2f}"
                )
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return report


if __name__ == "__main__":
    main()
