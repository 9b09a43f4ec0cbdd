"""How the default's length law was chosen: candidate laws fitted offline to one pool per text.

``pool`` scores, per review, everything the candidates may use and everything they are judged
on, once: the short stage's fit (eff on 950 distinct triples, ``context_share=0``), 150 fresh
triples, 50 deletions of the text and the text, every single token, and the held-out sets (40
single tokens, 30 distinct triples, 15 sub-texts each keeping 50/70/90 % of the positions).
``analyse`` fits each candidate to the pool's fitting part (weights: short samples and the
text's context half each) and reports held-out R² by scale (pooled over the 45 kept sub-texts),
Spearman ρ on the kept sub-texts and the largest |value| over the largest |f − b| of the
model. Candidates (v⁰, s⁰: the short stage's values and importances; f = Σ softmax(s⁰) v⁰):

- ``stage1``: the short stage alone (F = f);
- ``power``: F = c·k^η·f + slope·ln k (a power law of length, values c·v⁰);
- ``power+singles``: the same with 30 single tokens in the fit;
- ``pivot``: F = p + A(k)(c·f + d − p), A = k^(η + κ ln k), values c·v⁰ + d (the default's);
- ``pivot+singles``: the same with 30 single tokens in the fit (the default's design).

Single tokens in a fit are drawn from units outside the 40 held-out ones. A pool that also
holds ``v_def``/``s_def`` (the fit of an earlier default, recorded by the pool step of the
release that had it) adds the row ``previous default`` (F = Σ softmax(s) v, its own numbers).

    python -m slalom_core.experiments.benchmarks.law_study pool --model default \\
        --data ../shared/data/imdb_test.jsonl --n 10 --out bench_output/pool_demo.json
    python -m slalom_core.experiments.benchmarks.law_study analyse bench_output/pool_demo.json

Not a test (docs/results.md §24).
"""

from __future__ import annotations

import argparse
import json
import warnings

import numpy as np
import slalom_core as sc
import torch
from scipy.stats import spearmanr
from slalom_core.experiments.bench import load_model, select_instances
from slalom_core.experiments.benchmarks.context import held_out_subtexts
from slalom_core.experiments.data import read_jsonl
from slalom_core.sampling import deletion_neighbourhood, short_sequences

CANDIDATES = ("stage1", "power", "power+singles", "pivot", "pivot+singles")


def pool(spec: str, data: str, n: int) -> list[dict]:
    """One dict per review: the short stage's fit and every group of samples with its log-odds."""
    torch.set_num_threads(1)
    model, tok, _ = load_model(spec)
    adapter = sc.HFClassifier(model, tok)
    insts = select_instances(read_jsonl(data), tok, n=n, min_tokens=120, max_tokens=250, seed=0)
    pools = []
    for t, inst in enumerate(insts):
        ids = np.asarray(inst.token_ids)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", sc.SlalomFitWarning)
            exp0 = sc.explain(adapter, list(ids), n_samples=950, context_share=0, seed=0)
        ui = np.asarray(exp0.unit_index)
        n_units = int(ui.max()) + 1
        unit_tok = np.zeros(n_units, int)
        unit_tok[ui] = ids
        rng, hr = np.random.default_rng(1000 + t), np.random.default_rng(99 + t)
        groups = {
            "tri": short_sequences(rng, n_units, 150, 3, True),
            "dels": deletion_neighbourhood(rng, ui, 50, 0.5),
            "full": [ui],
            "singles": [np.array([u]) for u in hr.choice(n_units, size=min(40, n_units), replace=False)],
            "htri": short_sequences(hr, n_units, 30, 3, True),
            "kept": [ui[p] for p in held_out_subtexts(hr, len(ids))],
            "allsingles": [np.array([u]) for u in range(n_units)],
        }
        logits = adapter.score([[]]).double()
        base = float(logits[0, 1] - logits[0, 0])
        p = {"U": n_units, "v0": exp0.surrogate.value.tolist(), "s0": exp0.surrogate.importance.tolist()}
        for name, g in groups.items():
            lg = adapter.score([unit_tok[x].tolist() for x in g]).double()
            p[name] = [x.tolist() for x in g]
            p["y_" + name] = ((lg[:, 1] - lg[:, 0]).numpy() - base).tolist()
        pools.append(p)
        print(f"review {t}: {len(ids)} tokens, {n_units} units", flush=True)
    return pools


def _means(seqs: list, v0: np.ndarray, s0: np.ndarray) -> np.ndarray:
    out = np.empty(len(seqs))
    for j, q in enumerate(seqs):
        w = np.exp(s0[q] - s0[q].max())
        out[j] = w @ v0[q] / w.sum()
    return out


def _fit_data(p: dict, singles: bool) -> tuple[list, np.ndarray, np.ndarray]:
    short, y_short = list(p["tri"]), list(p["y_tri"])
    if singles:
        held = {q[0] for q in p["singles"]}
        free = [u for u in range(p["U"]) if u not in held][:30]
        short, y_short = [[u] for u in free] + short, [p["y_allsingles"][u] for u in free] + y_short
    ctx, y_ctx = p["dels"] + p["full"], list(p["y_dels"]) + list(p["y_full"])
    w = np.r_[np.full(len(short), 0.5 / len(short)), np.full(len(ctx), 0.5 / len(ctx))]
    return short + ctx, np.asarray(y_short + y_ctx), w


def _columns(kind: str, f: np.ndarray, k: np.ndarray, eta: float, kappa: float) -> np.ndarray:
    if kind == "power":
        return np.c_[f * k**eta, np.log(k)]
    amp = np.exp((eta + kappa * np.log(k)) * np.log(k))
    return np.c_[f * amp, amp, np.ones_like(k)]


def fit_candidate(p: dict, name: str):
    """The candidate's predictor (sequences -> log-odds from b) and its values."""
    v0, s0 = np.asarray(p["v0"]).ravel(), np.asarray(p["s0"])
    if name == "stage1":
        return (lambda q: _means(q, v0, s0)), v0
    if name == "previous default":
        vd, sd = np.asarray(p["v_def"]).ravel(), np.asarray(p["s_def"])
        return (lambda q: _means(q, vd, sd)), vd
    kind = name.split("+")[0]
    seqs, y, w = _fit_data(p, name.endswith("+singles"))
    f, k, sw = _means(seqs, v0, s0), np.array([len(q) for q in seqs], float), np.sqrt(w)
    kappas = [0.0] if kind == "power" else np.arange(-0.2, 0.201, 0.02)
    best = None
    for eta in np.arange(0, 1.51, 0.05):
        for kappa in kappas:
            x = _columns(kind, f, k, eta, kappa)
            b = np.linalg.lstsq(x * sw[:, None], y * sw, rcond=None)[0]
            rss = float(np.sum(w * (y - x @ b) ** 2))
            if best is None or rss < best[0]:
                best = (rss, eta, kappa, b)
    _, eta, kappa, b = best
    values = b[0] * v0 + (b[1] + b[2] if kind == "pivot" else 0.0)

    def predict(q):
        kq = np.array([len(x) for x in q], float)
        return _columns(kind, _means(q, v0, s0), kq, eta, kappa) @ b

    return predict, values


def _r2(y, pred) -> float:
    y, pred = np.asarray(y), np.asarray(pred)
    return float(1 - np.sum((y - pred) ** 2) / max(np.sum((y - y.mean()) ** 2), 1e-12))


def analyse(pools: list[dict]) -> str:
    """A markdown table: mean over reviews of each candidate's held-out numbers."""
    names = (("previous default",) if all("v_def" in p for p in pools) else ()) + CANDIDATES
    rows = {name: [] for name in names}
    for p in pools:
        top = np.max(np.abs(np.r_[p["y_allsingles"], p["y_tri"], p["y_dels"], p["y_full"]]))
        for name in names:
            predict, values = fit_candidate(p, name)
            kept_y, kept_pred = np.asarray(p["y_kept"]), predict(p["kept"])
            rows[name].append(
                [
                    _r2(p["y_singles"], predict(p["singles"])),
                    _r2(p["y_htri"], predict(p["htri"])),
                    _r2(kept_y, kept_pred),
                    float(spearmanr(kept_y, kept_pred)[0]),
                    float(np.max(np.abs(values)) / top),
                ]
            )
    lines = [
        "| candidate | single R² (median) | triple R² | kept R² | kept ρ | max\\|v\\| / max\\|f − b\\| |",
        "|---|---|---|---|---|---|",
    ]
    for name, r in rows.items():
        a = np.array(r)
        lines.append(
            f"| {name} | {a[:, 0].mean():.2f} ({np.median(a[:, 0]):.2f}) | {a[:, 1].mean():.2f} | "
            f"{a[:, 2].mean():.2f} | {a[:, 3].mean():.2f} | {a[:, 4].mean():.2f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    pp = sub.add_parser("pool", help="score one pool per review")
    pp.add_argument("--model", default="default")
    pp.add_argument("--data", required=True)
    pp.add_argument("--n", type=int, default=10)
    pp.add_argument("--out", required=True)
    pa = sub.add_parser("analyse", help="fit the candidates to pools and print the table")
    pa.add_argument("pools", nargs="+")
    args = ap.parse_args(argv)
    if args.command == "pool":
        with open(args.out, "w") as fh:
            json.dump(pool(args.model, args.data, args.n), fh)
        return
    for path in args.pools:
        print(f"{path}\n\n{analyse(json.load(open(path)))}")


if __name__ == "__main__":
    main()
