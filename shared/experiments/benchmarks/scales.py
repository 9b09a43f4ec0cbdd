"""One surrogate at every scale? Held-out single tokens, triples and sub-texts, by design.

For each text and design, one explanation (seed ``--seed``) and the model's log-odds on
sub-texts of the text that the fit never read:

- ``single``: up to 40 single tokens (distinct units the design did not score alone);
- ``triple``: 30 triples of distinct units (in text order) the design did not score;
- ``kept``: 15 sub-texts each keeping 50, 70 and 90 % of the positions (:mod:`.context`).

Each is scored by the model once per text; the surrogate's prediction is
``exp.predict(positions)`` (the length law included; for the reference, whose surrogate has
none and no reference point, Σ α_i v_i from 0). Columns: R² and Spearman ρ per scale (R² of
single tokens also as a median over texts, the issue's statistic); ``kept_r2_equal``, the
kept sub-texts' R² with all importances equal; ``vmax_ratio``, the largest |value| over the
largest |f(t) − b| the model shows on these sub-texts (≤ 2: values in the model's units);
ERASER deletion AOPC of ``lin``; seconds; with ``--seeds``, the share of the top-5 positions by
|importance| and by |contribution| two seeds agree on.

``--word-values`` asks whether a word's value grows with the length of the texts it sits in
(one explanation per text; per word seen in 8 texts or more, the Spearman ρ of its value with
the text's length). ``--shapley`` measures instead the derived game on short texts (``--first-tokens 10``: each
review's first 10 tokens, all coalitions enumerated): Σ|φ| of the surrogate's Shapley values over the model's exact ones
(the model's game is its log-odds on every sub-text, from the empty input), and their RMSE.

``--amortized HEAD`` adds two designs: the saved amortized explainer's explanation
(``amortized``: its head's values and importances under the label fits' typical length law,
pivot met at the text's output) and the same without a law (``amortized-nolaw``); its seeds
are not drawn (a head is deterministic). Use texts outside the head's label set (e.g. the
IMDB train file for a head whose labels came from the test file).

    python -m slalom_core.experiments.benchmarks.scales --model default \\
        --data ../shared/data/imdb_test.jsonl --n 30 --designs default-1000,reference-1000 \\
        --seeds 0,1,2 --out bench_output/scales_demo_imdb
    python -m slalom_core.experiments.benchmarks.scales --model default \
        --data ../shared/data/imdb_test.jsonl --n 30 --shapley --first-tokens 10 --out bench_output/shapley_demo

Not a test: timings depend on the machine (its line heads the table).
"""

from __future__ import annotations

import argparse
import json
import math
import time
import warnings
from dataclasses import replace
from itertools import permutations
from pathlib import Path

import numpy as np
import slalom_core as sc
import torch
from scipy.stats import spearmanr
from slalom_core.experiments import evaluation as ev
from slalom_core.experiments.bench import load_model, select_instances
from slalom_core.experiments.benchmarks.context import held_out_subtexts
from slalom_core.experiments.benchmarks.front import DESIGNS, explain_design, log_odds, mean_se, scores_of
from slalom_core.experiments.benchmarks.machine import machine_line
from slalom_core.experiments.data import read_jsonl

#: Held-out sub-texts per scale (the issue's counts).
N_SINGLE, N_TRIPLE = 40, 30
SCALES = ("single", "triple", "kept")


class Recorder:
    """The model adapter, recording every token-id sequence it scores (what a fit read)."""

    def __init__(self, adapter: sc.HFClassifier) -> None:
        self.adapter, self.seen = adapter, set()
        self._score = adapter.score

        def score(seqs, *args, **kwargs):
            self.seen.update(tuple(int(t) for t in q) for q in seqs)
            return self._score(seqs, *args, **kwargs)

        adapter.score = score

    def reset(self) -> None:
        self.seen = set()


def held_out(rng: np.random.Generator, token_ids: list[int], seen: set) -> dict[str, list[np.ndarray]]:
    """Position sets per scale whose token sequences are not in ``seen`` (read by no fit)."""
    ids = np.asarray(token_ids)
    first = {}
    for p, t in enumerate(ids.tolist()):
        first.setdefault(t, p)
    units = np.array(sorted(first.values()))
    singles = [np.array([p]) for p in rng.permutation(units) if (int(ids[p]),) not in seen][:N_SINGLE]
    triples: list[np.ndarray] = []
    for _ in range(50 * N_TRIPLE):
        if len(triples) == N_TRIPLE or len(units) < 3:
            break
        p = np.sort(rng.choice(units, 3, replace=False))
        # A design's triple is a set of units in any order: none of its orders may have been read.
        if not any(tuple(int(t) for t in order) in seen for order in permutations(ids[p].tolist())):
            triples.append(p)
    return {"single": singles, "triple": triples, "kept": held_out_subtexts(rng, len(ids))}


def _r2(y: np.ndarray, pred: np.ndarray) -> float:
    sst = float(np.sum((y - y.mean()) ** 2))
    return float(1.0 - np.sum((pred - y) ** 2) / sst) if len(y) > 1 and sst > 1e-12 else float("nan")


def _rho(y: np.ndarray, pred: np.ndarray) -> float:
    return float(spearmanr(y, pred)[0]) if len(y) > 2 and np.ptp(pred) > 0 and np.ptp(y) > 0 else float("nan")


def _predictor(exp, scores: dict):
    """positions -> prediction in the model's log-odds (absolute), and the same with equal importances."""
    if exp is None:  # the reference: no reference point, no law
        v, s = scores["value"], scores["importance"]

        def plain(p, equal=False):
            w = np.ones(len(p)) if equal else np.exp(s[p] - s[p].max())
            return float(w @ v[p] / w.sum())

        return plain
    flat = sc.SlalomSurrogate(exp.surrogate.value, np.zeros(exp.surrogate.n_units), law=exp.surrogate.law)

    def ours(p, equal=False):
        if not equal:
            return float(exp.predict(p))
        counts = np.bincount(exp.unit_index[p], minlength=flat.n_units)
        return float(exp.base_value + flat.predict(counts[None])[0])

    return ours


class Amortized:
    """A saved amortized explainer as a design: its explanation of a benchmark text, under its
    length law or (``law=False``) the identity."""

    def __init__(self, explainer, law: bool = True) -> None:
        self.explainer, self.law = explainer, law

    def explain(self, inst):
        """The same 4-tuple as :func:`~.front.explain_design`."""
        t0 = time.perf_counter()
        seg = sc.Segmentation(unit_ids=[(t,) for t in inst.token_ids], tokens=list(inst.tokens))
        exp = self.explainer.explain_batch([seg])[0]
        if not self.law:
            exp.surrogate = replace(exp.surrogate, law=sc.IDENTITY_LAW)
        seconds = time.perf_counter() - t0
        return scores_of(exp), None, exp, seconds


def _explain(adapter, inst, design, seed: int):
    return design.explain(inst) if isinstance(design, Amortized) else explain_design(adapter, inst, design, seed)


def measure(adapter, rec: Recorder, inst, design, seed: int, seeds: list[int], subs_seed) -> dict:
    """One design on one text: the per-scale columns (module docstring)."""
    rec.reset()
    scores, _, exp, seconds = _explain(adapter, inst, design, seed)
    subs = held_out(np.random.default_rng(subs_seed), inst.token_ids, rec.seen)
    ids = np.asarray(inst.token_ids)
    base = float(log_odds(adapter, [[]])[0])
    predict = _predictor(exp, scores)
    row: dict = {"seconds": seconds, "n_tokens": inst.n_tokens}
    moves = []
    for scale in SCALES:
        if not subs[scale]:
            continue
        y = log_odds(adapter, [ids[p].tolist() for p in subs[scale]])
        moves.append(np.abs(y - base))
        pred = np.array([predict(p) for p in subs[scale]])
        row[f"{scale}_r2"], row[f"{scale}_rho"] = _r2(y, pred), _rho(y, pred)
        row[f"{scale}_n"] = len(subs[scale])
        if scale == "kept":
            row["kept_r2_equal"] = _r2(y, np.array([predict(p, equal=True) for p in subs[scale]]))
    row["vmax_ratio"] = float(np.max(np.abs(scores["value"]))) / max(float(np.max(np.concatenate(moves))), 1e-12)
    full = log_odds(adapter, [list(inst.token_ids)])[0]
    target = 1 if full > 0 else 0
    row["del_lin"] = ev.comprehensiveness(
        lambda q: torch.softmax(adapter.score(q), dim=1)[:, target].numpy(),
        inst.token_ids,
        (1.0 if target else -1.0) * scores["lin"],
    ).value
    if len(seeds) > 1 and not isinstance(design, Amortized):
        runs = [scores] + [explain_design(adapter, inst, design, s)[0] for s in seeds if s != seed]
        for name in ("importance", "contribution"):
            tops = [set(np.argsort(-np.abs(r[name] - np.mean(r[name])), kind="stable")[:5]) for r in runs]
            pairs = [len(tops[i] & tops[j]) / 5 for i in range(len(tops)) for j in range(i + 1, len(tops))]
            row[f"top5_{name}"] = float(np.mean(pairs))
    return row


def shapley_row(adapter, inst, design, seed: int) -> dict:
    """Σ|φ| ratio and RMSE of the surrogate's exact Shapley values against the model's."""
    scores, _, exp, _ = explain_design(adapter, inst, design, seed)
    n = inst.n_tokens
    codes = np.arange(2**n)
    masks = (codes[:, None] >> np.arange(n)) & 1
    ids = np.asarray(inst.token_ids)
    game = log_odds(adapter, [ids[m.astype(bool)].tolist() for m in masks])
    phi_model = np.zeros(n)
    weight = np.array([math.factorial(k) * math.factorial(n - k - 1) / math.factorial(n) for k in range(n)])
    sizes = masks.sum(axis=1)
    for i in range(n):
        without = codes[(codes >> i) & 1 == 0]
        phi_model[i] = float((weight[sizes[without]] * (game[without | (1 << i)] - game[without])).sum())
    if exp is not None:
        phi = exp.shapley(exact_max_positions=n)
    else:  # the reference's raw surrogate, from log-odds 0
        phi = sc.scores.shapley(scores["value"], scores["importance"], exact_max_positions=n, empty_value=game[0])
    return {
        "n_tokens": n,
        "phi_ratio": float(np.abs(phi).sum() / max(np.abs(phi_model).sum(), 1e-12)),
        "phi_rmse": float(np.sqrt(np.mean((phi - phi_model) ** 2))),
    }


def word_values(adapter, inst, design, seed: int) -> list[dict]:
    """One row per unique token of the text: its value and the text's length (``--word-values``)."""
    scores, _, exp, _ = explain_design(adapter, inst, design, seed)
    seen, rows = set(), []
    for pos, tid in enumerate(inst.token_ids):
        if tid not in seen:
            seen.add(tid)
            rows.append({"token": inst.tokens[pos], "value": float(scores["value"][pos]), "n_tokens": inst.n_tokens})
    return rows


def word_summary(rows: list[dict], min_texts: int = 8) -> str:
    """Does a word's value grow with the length of the texts it sits in? Per word seen in at
    least ``min_texts`` texts: Spearman ρ of its value (and |value|) with the text's length;
    and the ratio of its mean |value| in the longer half of its texts to the shorter half."""
    by: dict[str, list[tuple[int, float]]] = {}
    for r in rows:
        by.setdefault(r["token"], []).append((r["n_tokens"], r["value"]))
    rhos, abs_rhos, ratios = [], [], []
    for pairs in by.values():
        if len(pairs) >= min_texts:
            n, v = np.array(pairs).T
            if np.ptp(n) > 0 and np.ptp(v) > 0:
                rhos.append(spearmanr(n, v)[0])
                abs_rhos.append(spearmanr(n, np.abs(v))[0])
                long = n > np.median(n)
                if long.any() and (~long).any():
                    ratios.append(np.mean(np.abs(v[long])) / max(np.mean(np.abs(v[~long])), 1e-12))
    return (
        f"{len(rhos)} words in ≥ {min_texts} texts: Spearman(length, value) {np.mean(rhos):+.3f} ± "
        f"{np.std(rhos) / np.sqrt(len(rhos)):.3f}, Spearman(length, |value|) {np.mean(abs_rhos):+.3f} ± "
        f"{np.std(abs_rhos) / np.sqrt(len(abs_rhos)):.3f}; mean |value| in the longer half of a word's texts over "
        f"the shorter half: median {np.median(ratios):.2f}\n"
    )


def summarise(rows: list[dict], designs: list[str]) -> str:
    """Mean ± s.e. over texts per design (R² of single tokens also as the median over texts)."""
    cols: list[str] = []
    for r in rows:
        cols += [c for c in r if c not in ("design", "text", "n_tokens", *cols) and not c.endswith("_n")]
    lines = ["| design | texts | " + " | ".join(cols) + " |", "|" + "---|" * (len(cols) + 2)]
    for name in designs:
        rs = [r for r in rows if r["design"] == name]
        cells = []
        for c in cols:
            x = np.array([r.get(c, np.nan) for r in rs], dtype=float)
            mean, se = mean_se(x)
            cell = f"{mean:.3f} ± {se:.3f}"
            if c == "single_r2":
                cell += f" (median {np.nanmedian(x):.3f})"
            cells.append(cell)
        lines.append(f"| {name} | {len(rs)} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="default", help="'default', 'zeroshot' or a local HF model folder")
    ap.add_argument("--data", required=True, help="JSON lines with text")
    ap.add_argument("--n", type=int, default=30)
    ap.add_argument("--min-tokens", type=int, default=120)
    ap.add_argument("--max-tokens", type=int, default=250)
    ap.add_argument("--designs", default="default-1000,reference-1000", help="comma-separated names of front.DESIGNS")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--seeds", default="", help="comma-separated seeds for the top-5 agreement, e.g. 0,1,2")
    ap.add_argument("--shapley", action="store_true", help="the derived game on short texts (see module docstring)")
    ap.add_argument("--word-values", action="store_true", help="does a word's value grow with text length?")
    ap.add_argument(
        "--first-tokens", type=int, default=0, help="explain each text's first N tokens only (e.g. 10 with --shapley)"
    )
    ap.add_argument("--amortized", default="", help="a saved amortized explainer's folder (module docstring)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default="bench_output/scales")
    args = ap.parse_args(argv)
    names = [n for n in args.designs.split(",") if n]
    if unknown := [n for n in names if n not in DESIGNS]:
        ap.error(f"unknown design(s) {unknown}; choose from {list(DESIGNS)}")
    torch.set_num_threads(args.threads)
    model, tok, model_name = load_model(args.model)
    designs: dict = {n: DESIGNS[n] for n in names}
    if args.amortized:
        from slalom_core.amortized import AmortizedExplainer

        head = AmortizedExplainer.load(args.amortized, model, tok)
        designs.update(amortized=Amortized(head), **{"amortized-nolaw": Amortized(head, law=False)})
        names += ["amortized", "amortized-nolaw"]
    adapter = sc.HFClassifier(model, tok)
    rec = Recorder(adapter)
    insts = select_instances(
        read_jsonl(args.data), tok, n=args.n, min_tokens=args.min_tokens, max_tokens=args.max_tokens, seed=args.seed
    )
    if args.first_tokens:
        insts = [
            replace(i, token_ids=i.token_ids[: args.first_tokens], tokens=i.tokens[: args.first_tokens]) for i in insts
        ]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    seeds = [int(x) for x in args.seeds.split(",") if x]
    with open(out / "per_text.jsonl", "w") as fh, warnings.catch_warnings():
        warnings.simplefilter("ignore", sc.SlalomFitWarning)
        sc.explain(adapter, insts[0].token_ids[:8], method="eff", n_samples=50, seed=0)  # untimed warm-up
        for inst in insts:
            for name in names:
                t0 = time.perf_counter()
                if args.word_values:
                    for r in word_values(adapter, inst, designs[name], args.seed):
                        rows.append({**r, "design": name})
                        fh.write(json.dumps(rows[-1]) + "\n")
                    continue
                if args.shapley:
                    row = shapley_row(adapter, inst, designs[name], args.seed)
                else:
                    row = measure(adapter, rec, inst, designs[name], args.seed, seeds, [args.seed, inst.index, 11])
                row.update(design=name, text=inst.index)
                rows.append(row)
                fh.write(json.dumps(row) + "\n")
                fh.flush()
                print(f"text {inst.index} {name}: {time.perf_counter() - t0:.1f} s", flush=True)
    head = (
        f"{model_name}, {len(insts)} texts of {args.data} ({args.min_tokens}-{args.max_tokens} tokens), "
        f"seed {args.seed}, {args.threads} threads; {machine_line()}\n\n"
    )
    if args.word_values:
        table = "\n".join(f"{n}: " + word_summary([r for r in rows if r["design"] == n]) for n in names)
    else:
        table = summarise(rows, names)
    (out / "scales.md").write_text(head + table)
    print(head + table)


if __name__ == "__main__":
    main()
