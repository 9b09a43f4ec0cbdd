"""Amortized SLALOM against per-text fits: quality on held-out texts, and texts per second.

Five stages, each a subcommand writing under ``--work``:

- ``prepare``: cut IMDB reviews to word prefixes the model reads whole (``--max-tokens``,
  the fine-tuned MiniLM was trained on 128 tokens) and write ``train.jsonl`` (``--n-train``
  texts from ``--train``) and ``test.jsonl`` (``--n-test`` texts from ``--test``).
- ``run``: a corpus run with the project's runner (``explain_corpus``) on one of them at one
  budget, e.g. the training labels (200 texts x 300 samples) or the held-out reference (30
  texts x 4000 samples).
- ``evaluate``: fit the amortized head on a training run, then on each held-out text, in
  turn, the amortized explanation and a per-text fit at ``--samples`` (interleaved, so that
  both see the same load), and compare both with the reference run: Spearman of value and
  importance per text, ERASER deletion AOPC of ``lin`` and ``contribution`` (paired), and
  seconds per text. Writes ``amortized.md`` / ``amortized.json``.
- ``throughput``: texts per second of a head and of per-text fits, both batched by chunks
  as a corpus run batches them, interleaved. Writes ``throughput.md``.
- ``hat``: Yelp-HAT ROC-AUC of ``importance`` and |``lin``| against human attention, for the
  heads and a per-text fit of each text (Yelp reviews of at most ``--max-tokens`` tokens).
  Writes ``human_attention.md``.

Not a test: timings depend on the machine and its load (they are printed with the load
average at the start and end).

    python -m slalom_core.experiments.benchmarks.amortized prepare --model models/minilm-imdb \\
        --train ../shared/data/imdb_train.jsonl.gz --test ../shared/data/imdb_test.jsonl --work bench_output/amort
    python -m slalom_core.experiments.benchmarks.amortized run --model models/minilm-imdb \\
        --work bench_output/amort --split train --n-samples 300
    python -m slalom_core.experiments.benchmarks.amortized run --model models/minilm-imdb \\
        --work bench_output/amort --split test --n-samples 4000
    python -m slalom_core.experiments.benchmarks.amortized evaluate --model models/minilm-imdb \\
        --work bench_output/amort --train-run train-300 --reference-run test-4000 --samples 1000
    python -m slalom_core.experiments.benchmarks.amortized hat --model models/minilm-imdb \\
        --work bench_output/amort --train-run train-300 --yelp ../shared/data/yelp_hat_dev.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import time
import warnings
from pathlib import Path

import numpy as np
import torch

#: The files ``prepare`` writes, by split.
SPLITS = ("train", "test")


def training_run(work: Path, spec: str):
    """The run a head trains on: ``NAME`` under ``WORK/runs``, or ``NAME@N`` for its first N
    texts in the order of ``train.jsonl`` (how quality grows with the number of training
    texts, from one run)."""
    from slalom_core.corpus import CorpusRun
    from slalom_core.experiments.data import read_jsonl

    name, _, n = spec.partition("@")
    run = CorpusRun(work / "runs" / name)
    if not n:
        return run
    order = [r["id"] for r in read_jsonl(work / "train.jsonl")]
    done = set(run.texts()["id"].astype(str))
    keep = [i for i in map(str, order) if i in done][: int(n)]
    if len(keep) < int(n):
        raise ValueError(f"{spec}: the run has only {len(keep)} explained texts")

    class FirstTexts(CorpusRun):
        def positions(self):
            pos = super().positions()
            return pos[pos["id"].astype(str).isin(set(keep))]

    return FirstTexts(run.path)


def trained_head(work: Path, spec: str, model, tok, *, epochs: int, hidden: int = 256):
    """The head trained on ``spec`` (see :func:`training_run`), kept under ``WORK/heads`` so
    that the later stages load it instead of training it again (a 5,000-text head takes
    minutes); a kept head of other settings is trained again."""
    from slalom_core.amortized import AmortizedExplainer

    folder = work / "heads" / f"{spec.replace('@', '-first')}-e{epochs}-h{hidden}"
    if (folder / "config.json").exists():
        return AmortizedExplainer.load(folder, model, tok)
    t0 = time.perf_counter()
    head = AmortizedExplainer(model, tok, epochs=epochs, hidden=hidden).fit(training_run(work, spec))
    head.config["training"]["fit_seconds"] = time.perf_counter() - t0
    head.save(folder)
    return head


def _prefix(tokenizer, text: str, max_tokens: int) -> str:
    """The longest whitespace-word prefix of ``text`` with at most ``max_tokens`` tokens."""
    words = text.split()
    lo, hi = 0, len(words)
    while lo < hi:  # the largest k whose prefix fits: token counts grow with k
        mid = (lo + hi + 1) // 2
        n = len(tokenizer(" ".join(words[:mid]), add_special_tokens=False)["input_ids"])
        lo, hi = (mid, hi) if n <= max_tokens else (lo, mid - 1)
    return " ".join(words[:lo])


def prepare(args) -> None:
    """Write ``train.jsonl`` and ``test.jsonl`` of word prefixes under ``--work``."""
    from slalom_core.experiments.bench import load_model
    from slalom_core.experiments.data import read_jsonl

    _, tok, _ = load_model(args.model)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(args.seed)
    for split, path, n in (("train", args.train, args.n_train), ("test", args.test, args.n_test)):
        rows = read_jsonl(path)
        order = rng.permutation(len(rows))[:n]
        with open(work / f"{split}.jsonl", "w", encoding="utf-8") as fh:
            for i in order:
                text = _prefix(tok, rows[i]["text"], args.max_tokens)
                fh.write(json.dumps({"id": rows[i]["id"], "text": text}) + "\n")
        print(f"{split}: {n} texts -> {work / f'{split}.jsonl'}")


def run(args) -> None:
    """One corpus run: ``--split`` texts (the first ``--limit``) at ``--n-samples``."""
    from slalom_core.corpus import explain_corpus
    from slalom_core.experiments.bench import load_model

    model, tok, _ = load_model(args.model)
    work = Path(args.work)
    name = args.name or f"{args.split}-{args.n_samples}" + (f"-n{args.limit}" if args.limit else "")
    t0 = time.perf_counter()
    run_ = explain_corpus(
        model,
        work / f"{args.split}.jsonl",
        work / "runs" / name,
        tokenizer=tok,
        n_samples=args.n_samples,
        limit=args.limit,
        resume=args.resume,
        chunk_size=args.chunk_size,
        show_progress=False,
    )
    print(f"{run_!r}: {time.perf_counter() - t0:.1f} s wall, load {os.getloadavg()[0]:.2f}")


def _unit_spearman(exp_v, exp_s, ref_v, ref_s, units) -> tuple[float, float]:
    from slalom_core.amortized.audit import spearman

    first = np.unique(units, return_index=True)[1]
    return spearman(exp_v[first], ref_v[first]), spearman(exp_s[first], ref_s[first])


def _mean_se(x) -> tuple[float, float]:
    x = np.asarray(x, dtype=float)
    x = x[np.isfinite(x)]
    return (float(x.mean()), float(x.std(ddof=1) / np.sqrt(len(x)))) if len(x) > 1 else (float("nan"),) * 2


def evaluate(args) -> None:
    """Amortized (one head per ``--train-run``) and per-text fits against the reference run."""
    import slalom_core as sc
    from slalom_core.corpus import CorpusRun, text_seed
    from slalom_core.experiments import evaluation as ev
    from slalom_core.experiments.bench import load_model
    from slalom_core.experiments.data import read_jsonl

    model, tok, _ = load_model(args.model)
    work = Path(args.work)
    load = [os.getloadavg()[0]]
    heads = {}
    for name in args.train_run.split(","):
        heads[name] = trained_head(work, name, model, tok, epochs=args.epochs, hidden=args.hidden)
        print(f"fitted {name}: {heads[name].config['training']}", flush=True)
    ref = CorpusRun(work / "runs" / args.reference_run).positions()
    texts = {r["id"]: r["text"] for r in read_jsonl(work / "test.jsonl")}
    adapter = sc.as_adapter(model, tok)
    rows = []
    for text_id, pos in ref.groupby("id", sort=False):
        text = texts[text_id]
        ids = [int(t[0]) for t in pos["token_ids"]]
        # Interleaved per text: one plain forward, the amortized explanations, one per-text fit.
        t0 = time.perf_counter()
        full = adapter.score([ids])[0]
        row = {"id": text_id, "n": len(ids), "forward_s": time.perf_counter() - t0}
        target = int(torch.argmax(full))
        sign = 1.0 if target == 1 else -1.0  # deletion towards the predicted class

        def predict(seqs, target=target):
            return torch.softmax(adapter.score(seqs), dim=1)[:, target].numpy()

        exps = {}
        for name, head in heads.items():
            t0 = time.perf_counter()
            exps[name] = head.explain(text)
            row[f"{name}_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        exps["per-text"] = sc.explain(model, text, tokenizer=tok, n_samples=args.samples, seed=text_seed(1, text_id))
        row["per-text_s"] = time.perf_counter() - t0
        ref_v, ref_s = pos["value"].to_numpy(), pos["importance"].to_numpy()
        for name, exp in exps.items():
            if [t[0] for t in exp.token_ids] != ids:
                raise RuntimeError(f"{text_id}: the explanation's tokens are not the reference run's")
            row[f"{name}_rho_v"], row[f"{name}_rho_s"] = _unit_spearman(
                exp.value, exp.importance, ref_v, ref_s, exp.unit_index
            )
            for score in ("lin", "contribution"):
                row[f"{name}_del_{score}"] = ev.comprehensiveness(predict, ids, sign * exp.scores(score)).value
        for score, ref_score in (("lin", pos["lin"]), ("contribution", pos["contribution"])):
            row[f"reference_del_{score}"] = ev.comprehensiveness(predict, ids, sign * ref_score.to_numpy()).value
        rows.append(row)
        print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()}), flush=True)
    batch = {}
    for name, head in heads.items():  # texts per second when explained together
        t0 = time.perf_counter()
        head.explain_batch([texts[r["id"]] for r in rows])
        batch[name] = len(rows) / (time.perf_counter() - t0)
    load.append(os.getloadavg()[0])
    _write(work, args, rows, heads, batch, load)


def _write(work: Path, args, rows: list[dict], heads: dict, batch: dict, load: list[float]) -> None:
    names = list(heads) + ["per-text"]
    lines = [
        f"Held-out texts: {len(rows)} (mean {np.mean([r['n'] for r in rows]):.0f} tokens); reference: "
        f"{args.reference_run}; per-text fits at {args.samples} samples; load average {load[0]:.2f} -> {load[1]:.2f}.",
        "",
        "| explainer | trained on | value ρ | importance ρ | del AOPC lin | del AOPC contribution | s/text | texts/s |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    summary = {"rows": rows, "load": load, "explainers": {}}
    for name in names:
        cells = {
            k: _mean_se([r[f"{name}_{k}"] for r in rows]) for k in ("rho_v", "rho_s", "del_lin", "del_contribution")
        }
        sec = float(np.median([r[f"{name}_s"] for r in rows]))
        tps = f"{1 / sec:.1f} (one at a time)" + (f", {batch[name]:.1f} (batch)" if name in batch else "")
        trained = heads[name].config["trained_on"] if name in heads else None
        what = f"{trained['n_samples']} samples, {heads[name].config['training']['n_texts']} texts" if trained else "—"
        fmt = " | ".join(f"{m:.3f} ± {se:.3f}" for m, se in cells.values())
        lines.append(f"| {name} | {what} | {fmt} | {sec:.3f} | {tps} |")
        summary["explainers"][name] = {**{k: v[0] for k, v in cells.items()}, "seconds_median": sec}
    forward = float(np.median([r["forward_s"] for r in rows]))
    lines += ["", f"One plain forward pass: {forward:.3f} s median per text.", "", "Paired (amortized − per-text):", ""]
    for name in heads:
        for k in ("rho_v", "rho_s", "del_lin", "del_contribution"):
            m, se = _mean_se([r[f"{name}_{k}"] - r[f"per-text_{k}"] for r in rows])
            lines.append(f"- {name} {k}: {m:+.3f} ± {se:.3f}")
    ref = {k: _mean_se([r[f"reference_{k}"] for r in rows]) for k in ("del_lin", "del_contribution")}
    lines.append(
        f"- reference run's own deletion AOPC: lin {ref['del_lin'][0]:.3f}, contribution {ref['del_contribution'][0]:.3f}"
    )
    (work / "amortized.md").write_text("\n".join(lines) + "\n")
    (work / "amortized.json").write_text(json.dumps(summary, indent=1, default=float))
    print("\n".join(lines))


def human_attention(args) -> None:
    """Yelp-HAT ROC-AUC of ``importance`` (and of |lin|): amortized heads against per-text fits."""
    import slalom_core as sc
    from slalom_core.corpus import text_seed
    from slalom_core.experiments import evaluation as ev
    from slalom_core.experiments.bench import load_model, select_instances
    from slalom_core.experiments.data import read_jsonl

    model, tok, _ = load_model(args.model)
    work = Path(args.work)
    load = [os.getloadavg()[0]]
    heads = {
        n: trained_head(work, n, model, tok, epochs=args.epochs, hidden=args.hidden) for n in args.train_run.split(",")
    }
    chosen = select_instances(read_jsonl(args.yelp), tok, n=args.n, min_tokens=20, max_tokens=args.max_tokens)
    rows = []
    for inst in chosen:
        exps = {name: head.explain(inst.text) for name, head in heads.items()}
        exps["per-text"] = sc.explain(
            model, inst.text, tokenizer=tok, n_samples=args.samples, seed=text_seed(1, str(inst.id))
        )
        row = {"id": inst.id}
        for name, exp in exps.items():
            if [t[0] for t in exp.token_ids] != list(inst.token_ids):
                raise RuntimeError(f"{inst.id}: the explanation's tokens are not the instance's")
            row[f"{name}_importance"] = ev.human_attention_agreement(
                exp.importance, inst.attention, absolute=False
            ).roc_auc
            row[f"{name}_abs_lin"] = ev.human_attention_agreement(exp.lin, inst.attention, absolute=True).roc_auc
            row[f"{name}_ood"] = bool(exp.diagnostics.get("ood", {}).get("warning"))
        rows.append(row)
    load.append(os.getloadavg()[0])
    lines = [
        f"Yelp-HAT: {len(rows)} texts of 20-{args.max_tokens} tokens; load average {load[0]:.2f} -> {load[1]:.2f}.",
        "",
    ]
    lines += ["| explainer | importance ROC-AUC | abs(lin) ROC-AUC | flagged OOD |", "| --- | --- | --- | --- |"]
    for name in [*heads, "per-text"]:
        imp, lin = (_mean_se([r[f"{name}_{k}"] for r in rows]) for k in ("importance", "abs_lin"))
        flagged = sum(r[f"{name}_ood"] for r in rows)
        lines.append(f"| {name} | {imp[0]:.3f} ± {imp[1]:.3f} | {lin[0]:.3f} ± {lin[1]:.3f} | {flagged} |")
    lines += ["", "Paired (amortized − per-text):", ""]
    for name in heads:
        for k in ("importance", "abs_lin"):
            m, se = _mean_se([r[f"{name}_{k}"] - r[f"per-text_{k}"] for r in rows])
            lines.append(f"- {name} {k}: {m:+.3f} ± {se:.3f}")
    (work / "human_attention.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def throughput(args) -> None:
    """Texts per second of a head and of per-text fits, both batched the way a corpus run
    batches (``explain_batch`` over chunks of ``--chunk-size`` texts), interleaved chunk by
    chunk (their order alternating) so that both see the same load. Writes ``throughput.md``."""
    import slalom_core as sc
    from slalom_core.corpus import text_seed
    from slalom_core.experiments.bench import load_model
    from slalom_core.experiments.data import read_jsonl

    model, tok, _ = load_model(args.model)
    work = Path(args.work)
    head = trained_head(work, args.train_run, model, tok, epochs=args.epochs, hidden=args.hidden)
    rows = read_jsonl(work / "test.jsonl")[: args.n]
    chunks = [rows[i : i + args.chunk_size] for i in range(0, len(rows), args.chunk_size)]
    load, seconds = [os.getloadavg()[0]], {"amortized": 0.0, "per-text": 0.0}

    def amortized(chunk) -> None:
        head.explain_batch([r["text"] for r in chunk])

    def per_text(chunk) -> None:
        seeds = [text_seed(1, str(r["id"])) for r in chunk]
        sc.explain_batch(model, [r["text"] for r in chunk], tokenizer=tok, n_samples=args.samples, seed=seeds)

    amortized(chunks[0])  # warm-up: the empty input's pass, once per explainer
    for k, chunk in enumerate(chunks * args.rounds):
        order = [("amortized", amortized), ("per-text", per_text)]
        for name, fn in order if k % 2 == 0 else order[::-1]:
            t0 = time.perf_counter()
            fn(chunk)
            seconds[name] += time.perf_counter() - t0
        print(json.dumps({"chunk": k, **{n: round(s, 2) for n, s in seconds.items()}}), flush=True)
    load.append(os.getloadavg()[0])
    n = len(rows) * args.rounds
    rate = {name: n / s for name, s in seconds.items()}
    lines = [
        f"# Amortized vs per-text throughput ({args.train_run}; {len(rows)} texts x {args.rounds} rounds, "
        f"chunks of {args.chunk_size}, per-text at {args.samples} samples; load {load[0]:.1f} -> {load[1]:.1f})",
        "",
        "| explainer | seconds | texts/s |",
        "| --- | --- | --- |",
        *(f"| {name} | {seconds[name]:.1f} | {rate[name]:.2f} |" for name in seconds),
        "",
        f"ratio (amortized / per-text texts per second): {rate['amortized'] / rate['per-text']:.1f}",
    ]
    (work / "throughput.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def main(argv: list[str] | None = None) -> None:
    """The benchmark's command line (see the module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="stage", required=True)
    p = sub.add_parser("prepare", help="write word-prefix train/test texts")
    p.add_argument("--train", required=True)
    p.add_argument("--test", required=True)
    p.add_argument("--n-train", type=int, default=2000)
    p.add_argument("--n-test", type=int, default=30)
    p.add_argument("--max-tokens", type=int, default=120)
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=prepare)
    r = sub.add_parser("run", help="a corpus run on one split at one budget")
    r.add_argument("--split", choices=SPLITS, required=True)
    r.add_argument("--n-samples", type=int, required=True)
    r.add_argument("--limit", type=int, default=None)
    r.add_argument("--name", default=None)
    r.add_argument("--chunk-size", type=int, default=16)
    r.add_argument("--resume", action="store_true")
    r.set_defaults(func=run)
    e = sub.add_parser("evaluate", help="amortized vs per-text fits against the reference run")
    e.add_argument(
        "--train-run", required=True, help="run names under WORK/runs (NAME@N: its first N texts), comma-separated"
    )
    e.add_argument("--reference-run", required=True)
    e.add_argument("--samples", type=int, default=1000, help="budget of the per-text fits compared")
    e.add_argument("--epochs", type=int, default=60)
    e.set_defaults(func=lambda a: evaluate(a))
    h = sub.add_parser("hat", help="Yelp-HAT importance ROC-AUC: amortized heads against per-text fits")
    h.add_argument("--train-run", required=True, help="run names under WORK/runs, comma-separated")
    h.add_argument("--yelp", required=True, help="yelp_hat_dev.jsonl (words + human_attention)")
    h.add_argument("--n", type=int, default=30)
    h.add_argument("--max-tokens", type=int, default=120)
    h.add_argument("--samples", type=int, default=1000)
    h.add_argument("--epochs", type=int, default=60)
    h.set_defaults(func=human_attention)
    t = sub.add_parser("throughput", help="texts/s: a head against per-text fits, batched by chunks")
    t.add_argument("--train-run", required=True, help="a run name under WORK/runs")
    t.add_argument("--n", type=int, default=30)
    t.add_argument("--chunk-size", type=int, default=10)
    t.add_argument("--rounds", type=int, default=1)
    t.add_argument("--samples", type=int, default=1000)
    t.add_argument("--epochs", type=int, default=60)
    t.set_defaults(func=throughput)
    for q in (p, r, e, h, t):
        q.add_argument("--model", default="models/minilm-imdb")
        q.add_argument("--work", default="bench_output/amortized")
        q.add_argument("--threads", type=int, default=1)
        q.add_argument("--hidden", type=int, default=256, help="the heads' MLP width")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    warnings.simplefilter("ignore")
    args.func(args)


if __name__ == "__main__":
    main()
