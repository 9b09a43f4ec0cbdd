"""How high can an amortized run's audit agreement be? The per-text fits' own noise bounds it.

The audit of ``slalom-xai explain --amortized auto`` compares the head's explanation of each
audited text with a per-text fit at the run's budget (Spearman over the text's unique
tokens). That fit is itself noisy: even a head that predicted each token's true value would
agree with it only as well as the fit agrees with the truth. This benchmark refits each
audited text per text with another seed at the same budget (the fit's repeatability, the
ceiling's square) and at ``--high`` samples (a steadier reference), and reports per text:

- ``fit_fit``: audit fit against the other seed's fit (same budget);
- ``head_fit``: the head against the audit fit (the audit's own number);
- ``head_high`` and ``fit_high``: the head and the audit fit against the ``--high`` fit.

    python -m slalom_core.experiments.benchmarks.audit_ceiling --run bench_output/amort300 \\
        --model default --high 1000 --threads 1 --out bench_output/audit_ceiling.jsonl

Not a test: it fits every audited text twice (minutes).
"""

from __future__ import annotations

import argparse
import json
import warnings
from pathlib import Path

import numpy as np
import slalom_core as sc
import torch
from slalom_core.amortized.audit import agreement
from slalom_core.corpus import CorpusRun
from slalom_core.experiments.bench import load_model
from slalom_core.experiments.benchmarks.front import mean_se


def refit(adapter, exp, *, n_samples: int, seed: int, method: str) -> sc.SlalomExplanation:
    """A per-text fit of the exact positions ``exp`` explained (its token ids, as cut)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sc.SlalomFitWarning)
        return sc.explain(adapter, [i for u in exp.token_ids for i in u], method=method, n_samples=n_samples, seed=seed)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", required=True, help="an amortized pipeline's run folder (RUN/auto/audit inside)")
    ap.add_argument("--model", default="default")
    ap.add_argument("--high", type=int, default=1000, help="budget of the steadier reference fit")
    ap.add_argument("--seed", type=int, default=1, help="the second fit's seed (the audit's is the run's)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default="bench_output/audit_ceiling.jsonl")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    model, tok, _ = load_model(args.model)
    adapter = sc.HFClassifier(model, tok)
    run, audit = CorpusRun(args.run), CorpusRun(Path(args.run) / "auto" / "audit")
    options = audit.manifest["options"]
    ids = [str(i) for i in audit.texts()["id"]]
    rows = []
    with open(args.out, "w") as fh:
        for text_id in ids:
            head, fit = run.explanation(text_id), audit.explanation(text_id)
            other = refit(adapter, fit, n_samples=options["n_samples"], seed=args.seed, method=options["method"])
            high = refit(adapter, fit, n_samples=args.high, seed=args.seed, method=options["method"])
            row = {
                "id": text_id,
                "n_units": int(fit.surrogate.n_units),
                "fit_fit": agreement(fit, other)[0],
                "head_fit": agreement(head, fit)[0],
                "head_high": agreement(head, high)[0],
                "fit_high": agreement(fit, high)[0],
            }
            rows.append(row)
            fh.write(json.dumps(row) + "\n")
            fh.flush()
            print(text_id, {k: round(v, 3) for k, v in row.items() if isinstance(v, float)}, flush=True)
    for col in ("fit_fit", "head_fit", "head_high", "fit_high"):
        mean, se = mean_se(np.array([r[col] for r in rows], dtype=float))
        print(f"{col}: {mean:.3f} ± {se:.3f} (median {np.median([r[col] for r in rows]):.3f}, {len(rows)} texts)")


if __name__ == "__main__":
    main()
