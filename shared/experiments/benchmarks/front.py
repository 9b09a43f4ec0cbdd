"""The cost/quality front of SLALOM designs: one command, the same texts for every design,
paired differences against a reference design.

For each design (a method, a budget and options) and each text, one ``explain`` call (one
text at a time, so that seconds are per explanation) is measured for:

- cost: wall seconds, model tokens read, model evaluations;
- the surrogate on the text: ``gap`` = |model − surrogate| on the full text and ``signal`` =
  |model − base value| (the front reports the ratio of their means, as §12 does);
- fit: the design's own held-out R² and ``check_r2``, the R² on fresh deletion samples of the
  text (the same ``--check-samples`` samples for every design, scored once per text, never
  fitted);
- faithfulness: ERASER deletion AOPC (comprehensiveness) and insertion AOPC (sufficiency) of
  ``lin`` and ``value``, tokens deleted, towards the predicted class;
- agreement: Yelp-HAT ROC-AUC of ``importance`` and |``lin``| (``--data`` with
  ``human_attention``), Naive-Bayes Spearman of ``value`` and ``lin`` (``--nb-train``);
- ``determined``: the share of positions whose importance SE is below half the prior's sd.
- with ``--seeds 0,1,2``: ``top5_stable``, the share of the top-5 positions by |contribution|
  that two seeds agree on, and ``z_sd``, the sd of the importances' seed-to-seed differences
  over their combined standard errors (1 when the standard errors mean what they say);
- deletion AOPC of ``contribution`` and ``removal`` too.

The design ``reference-1000`` runs the authors' implementation (PyPI ``slalom-explanations``
0.1.2, when installed) on the same texts, for the paired comparison of docs/results.md §20.

Rows are mean ± s.e. over texts; a second table gives, for every design, the paired
difference to ``--baseline`` on the same texts (mean ± s.e. of the per-text difference),
which is what decides between designs. Not a test: timings depend on the machine.

    python -m slalom_core.experiments.benchmarks.front --model models/minilm-imdb \\
        --data ../shared/data/imdb_test.jsonl --nb-train ../shared/data/imdb_train.jsonl.gz \\
        --n 30 --min-tokens 120 --max-tokens 250 --out bench_output/front_imdb
"""

from __future__ import annotations

import argparse
import csv
import json
import time
import warnings
from pathlib import Path

import numpy as np
import slalom_core as sc
import torch
from slalom_core.api.fit_warnings import fit_problems as _fit_problems
from slalom_core.experiments import evaluation as ev
from slalom_core.experiments.bench import build_nb_table, load_model, select_instances
from slalom_core.experiments.benchmarks.context import context_metrics, held_out_subtexts, score_subtexts
from slalom_core.experiments.data import read_jsonl
from slalom_core.sampling import deletion_neighbourhood
from slalom_core.surrogate import pad_sequences, predict_sparse

#: name -> (method, n_samples, options). Names: method-budget, then what differs from the
#: method's defaults (ctxN: the hybrid's deletions, N % of the budget; L3: triples).
DESIGNS: dict[str, tuple[str, int, dict]] = {
    # The default (hybrid): 5 % single tokens, triples, 5 % deletions; a length law carries the
    # triples' measurement to every scale.
    "default-1000": ("hybrid", 1000, {}),
    "hybrid-1000-ctx10": ("hybrid", 1000, {"context_share": 0.1}),
    # No single tokens: the length law pinned at three tokens, not one (docs/results.md §24).
    "hybrid-1000-s0": ("hybrid", 1000, {"single_share": 0.0}),
    "hybrid-1000-ctx20": ("hybrid", 1000, {"context_share": 0.2}),
    # Stage one alone: eff on distinct triples (what the default carries into context).
    "hybrid-1000-ctx0": ("hybrid", 1000, {"context_share": 0.0}),
    # The previous defaults: eff-slope (importances' prior centred on a slope of |value|) and
    # the agreement axis (docs/results.md §20-§22).
    "eff-slope-1000": ("eff-slope", 1000, {}),
    "eff-slope-1000-agree": ("eff-slope", 1000, {"slope_axis": "agreement"}),
    # The authors' implementation (PyPI slalom-explanations 0.1.2, SLALOM-eff, its defaults).
    "reference-1000": ("reference", 1000, {}),
    "eff-500": ("eff", 500, {}),
    "eff-1000": ("eff", 1000, {}),
    "eff-1000-L3": ("eff", 1000, {"sample_length": 3}),
    "fidel-100": ("fidel", 100, {}),
    "fidel-200": ("fidel", 200, {}),
    "fidel-500": ("fidel", 500, {}),
    "fidel-1000": ("fidel", 1000, {}),
}

#: (column, higher is better) in table order.
METRICS: tuple[tuple[str, bool], ...] = (
    ("seconds", False),
    ("tokens", False),
    ("gap", False),
    ("heldout_r2", True),
    ("check_r2", True),
    ("ctx_r2", True),
    ("ctx_rho", True),
    ("ctx_r2_equal", True),
    ("ctx_rho_equal", True),
    ("del_lin", True),
    ("del_value", True),
    ("ins_lin", False),
    ("hat_importance", True),
    ("hat_lin", True),
    ("nb_value", True),
    ("nb_lin", True),
    ("determined", True),
    ("del_contribution", True),
    ("del_removal", True),
    ("top5_stable", True),
    ("z_sd", False),
    ("direction", True),
    ("reproduced", True),
    ("removal_agreement", True),
    ("warned", False),
)

#: Metrics measured across seeds (``--seeds``): the share of the top-5 positions by
#: |contribution| that two seeds agree on (mean over seed pairs), and the sd of the
#: importances' seed-to-seed differences over their combined standard errors (1 when the
#: standard errors mean what they say; determined importances only).
SEED_METRICS = ("top5_stable", "z_sd")


#: Scores whose deletion AOPC the front measures (``--aopc``; each costs a deletion curve).
AOPC_SCORES = ("lin", "value", "contribution", "removal")


def log_odds(adapter: sc.HFClassifier, seqs: list[list[int]]) -> np.ndarray:
    logits = adapter.score(seqs).double()
    return (logits[:, 1] - logits[:, 0]).numpy()


class _ReferenceModel(torch.nn.Module):
    """The HF-style ``model(input_ids, attention_mask)["logits"]`` the reference calls."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.inner = model

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> dict:
        with torch.no_grad():
            return {"logits": self.inner(input_ids=input_ids, attention_mask=attention_mask).logits.float()}


def _reference_scores(adapter, inst, n_samples: int, seed: int) -> dict:
    """The reference's scores per position, in the engine's terms (no reference point, no SEs)."""
    from slalom_core.experiments.baselines import quiet_reference  # the bench's own silencer
    from slalom_explanations import SLALOMLocalExplanantions  # the package's own spelling

    explainer = SLALOMLocalExplanantions(
        _ReferenceModel(adapter.model),
        adapter.tokenizer,
        n_samples=n_samples,
        device="cpu",
        modes=["value", "imp", "lin", "removal"],
        pad_token_id=int(adapter.pad_id),
    )
    torch.manual_seed(seed)
    with quiet_reference():
        value, imp, lin, removal = np.asarray(explainer.get_signed_importance_for_tokens(list(inst.token_ids)), float)
    alpha = np.exp(imp - imp.max())
    alpha /= alpha.sum()
    return {"value": value, "importance": imp, "lin": lin, "removal": removal, "contribution": alpha * value}


def explain_design(adapter, inst, design, seed: int):
    """(scores per position, importance SEs or None, the explanation or None, seconds)."""
    method, n_samples, options = design
    t0 = time.perf_counter()
    if method == "reference":
        return _reference_scores(adapter, inst, n_samples, seed), None, None, time.perf_counter() - t0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sc.SlalomFitWarning)  # the gap and R² are measured here
        exp = sc.explain(adapter, inst.token_ids, method=method, n_samples=n_samples, seed=seed, **options)
    seconds = time.perf_counter() - t0
    return scores_of(exp), np.asarray(exp.importance_se, dtype=float), exp, seconds


def scores_of(exp) -> dict[str, np.ndarray]:
    """The five per-position scores of an explanation, as the front's designs report them."""
    return {
        k: np.asarray(exp.scores(k), dtype=float) for k in ("value", "importance", "lin", "removal", "contribution")
    }


def seed_agreement(runs: list[tuple[dict, np.ndarray | None]]) -> dict:
    """``top5_stable`` and ``z_sd`` (see :data:`SEED_METRICS`) from per-seed (scores, SEs).

    Example:
        >>> s = {"contribution": np.arange(8.0), "importance": np.zeros(8)}
        >>> seed_agreement([(s, None), (s, None)])["top5_stable"]
        1.0
    """
    tops, zs = [], []
    for i in range(len(runs)):
        for j in range(i + 1, len(runs)):
            (a, se_a), (b, se_b) = runs[i], runs[j]
            ta = set(np.argsort(-np.abs(a["contribution"]), kind="stable")[:5])
            tb = set(np.argsort(-np.abs(b["contribution"]), kind="stable")[:5])
            tops.append(len(ta & tb) / 5)
            if se_a is not None and se_b is not None:
                se = np.sqrt(se_a**2 + se_b**2)
                ok = np.isfinite(se) & (se > 0)
                zs.append((a["importance"][ok] - b["importance"][ok]) / se[ok])
    z = np.concatenate(zs) if zs else np.array([])
    return {"top5_stable": float(np.mean(tops)) if tops else np.nan, "z_sd": float(np.std(z)) if len(z) > 2 else np.nan}


def measure(
    adapter, inst, design, *, seed, check, check_y, nb_table, threads, seeds=(), ctx=None, aopc=AOPC_SCORES
) -> dict:
    """One design on one text: the row of per-text numbers the front aggregates (the
    explanation at ``seed``; ``seeds`` adds :data:`SEED_METRICS`; ``ctx``, the held-out
    sub-texts and the model's log-odds on them, adds the ``ctx_*`` columns of :mod:`.context`)."""
    torch.set_num_threads(threads)
    scores, se, exp, seconds = explain_design(adapter, inst, design, seed)
    if exp is not None:
        d = exp.diagnostics
        check_r2 = np.nan  # --check-samples 0: no fresh deletion samples read
        if check:
            units = [exp.unit_index[c] for c in check]
            pred = predict_sparse(*pad_sequences(units), exp.surrogate.value[:, None], exp.surrogate.importance)[0][
                :, 0
            ]
            y = check_y - exp.base_value
            check_r2 = 1.0 - float(np.sum((pred - y) ** 2) / max(np.sum((y - y.mean()) ** 2), 1e-12))
        row = {
            "seconds": seconds,
            "tokens": d["tokens_evaluated"],
            "evaluations": d["model_evaluations"],
            "gap": abs(exp.full_text_gap),
            "signal": abs(exp.model_output - exp.base_value),
            "heldout_r2": d.get("heldout_r2", np.nan),
            "check_r2": check_r2,
            "converged": bool(d.get("fit_converged", True)),
            "determined": float(np.mean(exp.importance_determined)) if exp.importance_se is not None else np.nan,
            "direction": np.nan if d.get("direction_agrees") is None else float(d["direction_agrees"]),
            "reproduced": np.nan if d.get("reproduced") is None else float(d["reproduced"]),
            "removal_agreement": float(d.get("removal_agreement", np.nan)),
            "warned": float(bool(_fit_problems(exp))),
        }
    else:
        row = {"seconds": seconds}
    if ctx is not None:
        # The reference fits raw log-odds (no reference point): its surrogate is read from 0.
        base = exp.base_value if exp is not None else 0.0
        row.update(context_metrics(ctx[1] - base, ctx[0], scores["value"], scores["importance"]))
    full = log_odds(adapter, [list(inst.token_ids)])[0]
    sign = 1.0 if full > 0 else -1.0  # towards the predicted class
    target = 1 if sign > 0 else 0

    def predict(seqs):
        return torch.softmax(adapter.score(seqs), dim=1)[:, target].numpy()

    for score in aopc:
        oriented = sign * scores[score]
        row[f"del_{score}"] = ev.comprehensiveness(predict, inst.token_ids, oriented).value
        if score == "lin":
            row["ins_lin"] = ev.sufficiency(predict, inst.token_ids, oriented).value
    if inst.attention is not None:
        row["hat_importance"] = ev.human_attention_agreement(
            scores["importance"], inst.attention, absolute=False
        ).roc_auc
        row["hat_lin"] = ev.human_attention_agreement(scores["lin"], inst.attention, absolute=True).roc_auc
    if nb_table is not None:
        row["nb_value"] = ev.nb_spearman(inst.token_ids, scores["value"], nb_table).rho
        row["nb_lin"] = ev.nb_spearman(inst.token_ids, scores["lin"], nb_table).rho
    if len(seeds) > 1:
        runs = [(scores, se)] + [explain_design(adapter, inst, design, s)[:2] for s in seeds if s != seed]
        row.update(seed_agreement(runs))
    return row


def mean_se(x: np.ndarray) -> tuple[float, float]:
    x = x[np.isfinite(x)]
    if len(x) == 0:
        return float("nan"), float("nan")
    return float(x.mean()), float(x.std(ddof=1) / np.sqrt(len(x))) if len(x) > 1 else float("nan")


#: Metrics summarised by their median (and the median paired difference): R² on fresh deletion
#: samples runs to −10⁴ on texts where a design says nothing about the neighbourhood, so a
#: mean would be one text's number.
MEDIAN = frozenset({"check_r2"})


def _cell(values: np.ndarray, metric: str, signed: bool = False) -> str:
    values = values[np.isfinite(values)]
    if metric == "tokens":
        return f"{np.mean(values):+.0f}" if signed else f"{np.mean(values):.0f}"
    if metric in MEDIAN:
        return f"{np.median(values):+.3f} (median)" if signed else f"{np.median(values):.3f} (median)"
    mean, se = mean_se(values)
    digits = 2 if metric == "seconds" and not signed else 3
    return f"{mean:+.{digits}f} ± {se:.{digits}f}" if signed else f"{mean:.{digits}f} ± {se:.{digits}f}"


def _paired(by: dict, name: str, baseline: str, texts: list, metric: str) -> np.ndarray:
    return np.array(
        [by[(name, t)].get(metric, np.nan) - by[(baseline, t)].get(metric, np.nan) for t in texts],
        dtype=float,
    )


def summarise(rows: list[dict], designs: list[str], baseline: str) -> str:
    """Markdown tables: mean ± s.e. per design; paired differences to ``baseline`` on the
    same texts; and the same differences on the shorter and the longer half of the texts
    (split at the median length), which says whether the choice depends on length."""
    by = {(r["design"], r["text"]): r for r in rows}
    texts = sorted({r["text"] for r in rows if all((d, r["text"]) in by for d in designs)})
    present = [m for m, _ in METRICS if any(np.isfinite(r.get(m, np.nan)) for r in rows)]
    head = ["design", "gap ratio", *present]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name in designs:
        rs = [by[(name, t)] for t in texts]
        if all("gap" in r for r in rs):
            ratio = f"{np.mean([r['gap'] for r in rs]) / max(np.mean([r['signal'] for r in rs]), 1e-12):.3f}"
        else:
            ratio = "–"  # the reference reports no surrogate output
        cells = [name, ratio]
        cells += [_cell(np.array([r.get(m, np.nan) for r in rs], dtype=float), m) for m in present]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", f"Paired differences to `{baseline}` on the same texts (design − baseline, mean ± s.e.):", ""]
    head = ["design", *present]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name in designs:
        if name != baseline:
            cells = [name] + [_cell(_paired(by, name, baseline, texts, m), m, signed=True) for m in present]
            lines.append("| " + " | ".join(cells) + " |")
    lengths = {t: by[(baseline, t)]["n_tokens"] for t in texts}
    if not texts:
        return "\n".join(lines) + "\n"
    cut = float(np.median(list(lengths.values())))
    halves = {
        f"≤ {cut:.0f} tokens": [t for t in texts if lengths[t] <= cut],
        f"> {cut:.0f} tokens": [t for t in texts if lengths[t] > cut],
    }
    split = [m for m in ("seconds", "gap", "del_lin", "del_value", "hat_importance", "nb_lin") if m in present]
    lines += ["", "The same paired differences on the shorter and the longer half of the texts:", ""]
    head = ["design", "texts", *split]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name in designs:
        if name == baseline:
            continue
        for label, ts in halves.items():
            if ts:
                cells = [name, f"{len(ts)} {label}"]
                cells += [_cell(_paired(by, name, baseline, ts, m), m, signed=True) for m in split]
                lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="default", help="'default' (packaged MiniLM) or a local HF model folder")
    ap.add_argument("--data", required=True, help="JSON lines with text (and words + human_attention)")
    ap.add_argument("--nb-train", default=None, help="labelled JSON lines for the Naive-Bayes table")
    ap.add_argument("--n", type=int, default=30)
    ap.add_argument("--min-tokens", type=int, default=120)
    ap.add_argument("--max-tokens", type=int, default=250)
    ap.add_argument("--designs", default=",".join(DESIGNS), help="comma-separated names of DESIGNS")
    ap.add_argument("--baseline", default="eff-1000")
    ap.add_argument("--check-samples", type=int, default=50)
    ap.add_argument("--aopc", default=",".join(AOPC_SCORES), help="scores whose deletion AOPC is measured")
    ap.add_argument("--no-context", action="store_true", help="skip the held-out sub-texts (ctx_* columns, context.py)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--seeds", default="", help="comma-separated seeds for the seed metrics, e.g. 0,1,2 (default: none)"
    )
    ap.add_argument("--out", default="bench_output/front")
    ap.add_argument(
        "--summarise", action="store_true", help="only rewrite front.md from --out's per_text.jsonl (no model calls)"
    )
    args = ap.parse_args(argv)
    names = [n for n in args.designs.split(",") if n]
    unknown = [n for n in names if n not in DESIGNS]
    if unknown:
        ap.error(f"unknown design(s) {unknown}; choose from {list(DESIGNS)}")
    out = Path(args.out)
    if args.summarise:
        rows = [json.loads(line) for line in open(out / "per_text.jsonl")]
        names = [n for n in names if any(r["design"] == n for r in rows)]
        table = summarise(rows, names, args.baseline if args.baseline in names else names[0])
        head = (out / "front.md").read_text().split("\n\n")[0] if (out / "front.md").exists() else args.out
        (out / "front.md").write_text(head + "\n\n" + table)
        print(table)
        return
    torch.set_num_threads(args.threads)
    model, tok, model_name = load_model(args.model)
    adapter = sc.HFClassifier(model, tok)
    insts = select_instances(
        read_jsonl(args.data), tok, n=args.n, min_tokens=args.min_tokens, max_tokens=args.max_tokens, seed=args.seed
    )
    nb_table = build_nb_table(args.nb_train, tok) if args.nb_train else None
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []
    with open(out / "per_text.jsonl", "w") as fh:
        for inst in insts:
            rng = np.random.default_rng([args.seed, inst.index])
            check = deletion_neighbourhood(rng, np.arange(inst.n_tokens), args.check_samples)
            check_y = log_odds(adapter, [[inst.token_ids[p] for p in c] for c in check]) if check else None
            ctx = None
            if not args.no_context:
                subs = held_out_subtexts(np.random.default_rng([args.seed, inst.index, 7]), inst.n_tokens)
                ctx = (subs, score_subtexts(lambda q: log_odds(adapter, q), inst.token_ids, subs))
            # One untimed warm-up call per text size, so that no design pays for lazy set-up.
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", sc.SlalomFitWarning)
                sc.explain(adapter, inst.token_ids[:8], method="eff", n_samples=50, seed=0)
            for name in names:
                row = measure(
                    adapter,
                    inst,
                    DESIGNS[name],
                    seed=args.seed,
                    check=check,
                    check_y=check_y,
                    nb_table=nb_table,
                    threads=args.threads,
                    seeds=[int(x) for x in args.seeds.split(",") if x],
                    ctx=ctx,
                    aopc=tuple(a for a in args.aopc.split(",") if a),
                )
                row.update(design=name, text=inst.index, n_tokens=inst.n_tokens)
                rows.append(row)
                fh.write(json.dumps(row) + "\n")
                fh.flush()
            print(f"text {inst.index + 1}/{len(insts)} ({inst.n_tokens} tokens) done", flush=True)
    with open(out / "per_text.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=sorted({k for r in rows for k in r}))
        writer.writeheader()
        writer.writerows(rows)
    table = summarise(rows, names, args.baseline if args.baseline in names else names[0])
    header = (
        f"{model_name}, {len(insts)} texts of {args.data} ({args.min_tokens}-{args.max_tokens} tokens), "
        f"seed {args.seed}, {args.threads} threads, {args.check_samples} check samples\n\n"
    )
    (out / "front.md").write_text(header + table)
    (out / "config.json").write_text(json.dumps(vars(args), indent=1))
    print(header + table)


if __name__ == "__main__":
    main()
