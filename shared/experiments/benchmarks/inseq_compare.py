"""SLALOM beside inseq's own occlusion and LIME on the same prompts and generations.

For every method: seconds, the causal LM's forward rows (every row the model reads during
attribution; generation is done once beforehand and handed to each method), and the deletion
AOPC of each generated token's log-probability: delete the context tokens in the order the
method ranks them (most supporting first), k = 1 … ⌈frac·n⌉, and average
log p(token | context) − log p(token | context without them). Higher: the ranking found the
tokens the model uses.

Needs inseq (``pip install "slalom-xai[inseq]"``). Without ``--model`` it runs on a tiny
random GPT-2 built from its config (no download), which measures cost and plumbing, not
quality on a real LM.

    python -m slalom_core.experiments.benchmarks.inseq_compare --prompts 4 --max-new-tokens 3
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import torch

from .machine import machine_line

PROMPTS = [
    "the movie was great and",
    "i hated the boring plot but",
    "a very good film , the actor",
    "the story was fun and the",
    "not good but not awful , the",
    "best film , best actor and",
]


def tiny_lm() -> tuple:
    """A 1-layer GPT-2 with random weights over a byte-level BPE trained on :data:`PROMPTS`'
    words (no download): the LM of this benchmark and of docs/inseq.md's picture.

    Example:
        >>> lm, tok = tiny_lm()  # doctest: +SKIP
        >>> lm.config.n_layer, tok.eos_token  # doctest: +SKIP
        (1, '<|endoftext|>')
    """
    from tokenizers import ByteLevelBPETokenizer
    from transformers import GPT2Config, GPT2LMHeadModel, GPT2TokenizerFast

    words = " ".join(PROMPTS)
    tmp = Path(tempfile.mkdtemp())
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator([words] * 3, vocab_size=300, min_frequency=1, special_tokens=["<|endoftext|>"])
    bpe.save_model(str(tmp))
    tok = GPT2TokenizerFast(vocab_file=str(tmp / "vocab.json"), merges_file=str(tmp / "merges.txt"))
    if len(tok) < 50:
        tok = GPT2TokenizerFast(vocab=str(tmp / "vocab.json"), merges=str(tmp / "merges.txt"))
    torch.manual_seed(0)
    cfg = GPT2Config(vocab_size=len(tok), n_embd=32, n_layer=1, n_head=2, n_positions=128, initializer_range=0.2)
    cfg.bos_token_id = cfg.eos_token_id = tok.eos_token_id
    return GPT2LMHeadModel(cfg).eval(), tok


def _logprob(lm, context: list[int], target: int) -> float:
    with torch.no_grad():
        return float(torch.log_softmax(lm(torch.tensor([context])).logits[0, -1], -1)[target])


def deletion_aopc(lm, context: list[int], target: int, scores: np.ndarray, frac: float = 0.5) -> float:
    """Mean drop of log p(target) as the top-ranked context tokens are deleted, 1 … ⌈frac·n⌉."""
    order = np.argsort(-np.nan_to_num(scores, nan=-np.inf), kind="stable")
    full = _logprob(lm, context, target)
    drops = []
    for k in range(1, max(1, math.ceil(frac * len(context))) + 1):
        gone = set(order[:k].tolist())
        kept = [t for i, t in enumerate(context) if i not in gone]
        if kept:
            drops.append(full - _logprob(lm, kept, target))
    return float(np.mean(drops)) if drops else float("nan")


def run(lm, tok, prompts: list[str], max_new_tokens: int, n_samples: int, methods: list[str]) -> list[dict]:
    """One row per method: seconds, forward rows, AOPC (mean over generated tokens)."""
    import inseq

    import inseq_slalom  # noqa: F401  (registers "slalom")

    gen = inseq.load_model(lm, "dummy", tokenizer=tok)
    generated = [
        gen.generate(p, max_new_tokens=max_new_tokens, do_sample=False, skip_special_tokens=False)[0] for p in prompts
    ]
    rows: list[int] = []

    def count(_module, args, kwargs):
        # inseq's own methods pass embeddings (inputs_embeds), SLALOM's scorer ids.
        given = kwargs.get("input_ids", args[0] if args else None)
        given = kwargs.get("inputs_embeds") if given is None else given
        rows.append(int(given.shape[0]))

    hook = lm.register_forward_pre_hook(count, with_kwargs=True)
    kwargs = {"slalom": {"n_samples": n_samples}, "lime": {"n_samples": n_samples}, "occlusion": {}}
    table = []
    try:
        for method in methods:
            model = inseq.load_model(lm, method, tokenizer=tok)
            rows.clear()
            start = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                outs = [
                    model.attribute(p, g, show_progress=False, **kwargs[method]) for p, g in zip(prompts, generated)
                ]
            seconds = time.perf_counter() - start
            calls = sum(rows)
            aopc = []
            for out in outs:
                seq = out.aggregate().sequence_attributions[0]  # what show() draws (LIME: vnorm)
                ids = [t.id for t in seq.target]
                for step in range(seq.target_attributions.shape[1]):
                    pos = seq.attr_pos_start + step
                    scores = seq.target_attributions[:pos, step].numpy()
                    aopc.append(deletion_aopc(lm, ids[:pos], ids[pos], scores))
            table.append({"method": method, "seconds": seconds, "forward_rows": calls, "aopc": float(np.nanmean(aopc))})
    finally:
        hook.remove()
    return table


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", help="a local Hugging Face causal LM folder (default: a tiny random GPT-2)")
    ap.add_argument("--prompts", type=int, default=4)
    ap.add_argument("--max-new-tokens", type=int, default=3)
    ap.add_argument("--n-samples", type=int, default=200, help="SLALOM's and LIME's samples per generated token")
    ap.add_argument("--methods", default="slalom,occlusion,lime")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.model:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        lm, tok = AutoModelForCausalLM.from_pretrained(args.model).eval(), AutoTokenizer.from_pretrained(args.model)
    else:
        lm, tok = tiny_lm()
    print(f"machine before: {machine_line()}")
    table = run(lm, tok, PROMPTS[: args.prompts], args.max_new_tokens, args.n_samples, args.methods.split(","))
    print(f"machine after: {machine_line()}")
    print("| method | seconds | LM forward rows | deletion AOPC (nats) |\n| --- | --- | --- | --- |")
    for r in table:
        print(f"| {r['method']} | {r['seconds']:.2f} | {r['forward_rows']} | {r['aopc']:.3f} |")


if __name__ == "__main__":
    main()
