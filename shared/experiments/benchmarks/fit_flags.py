"""How often the fit-quality rule (``slalom_core.fit_quality``) fires on a corpus run, beside
the rule it replaced (held-out R² < 0.5, |full-text gap| > 1 log-odds, or not converged).

Explains the first ``--limit`` reviews of ``--data`` with the packaged demo model and the
default method into ``--out`` (reused when it holds a finished run), one torch thread, then
prints per flag how many texts it marks and which ids.

Not a test: the counts depend on the default fitting method of the day.

    python -m slalom_core.experiments.benchmarks.fit_flags --data ../shared/data/imdb_test.jsonl --limit 40 --out /tmp/run40
"""

from __future__ import annotations

import argparse
from pathlib import Path


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data/imdb_test.jsonl"))
    parser.add_argument("--limit", type=int, default=40)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)

    import torch

    torch.set_num_threads(1)
    from slalom_core.corpus import CorpusRun, explain_corpus
    from slalom_core.files import has_manifest
    from slalom_core.fit_quality import row_flags
    from slalom_core.packaged.demo_model import load_default_model

    if not has_manifest(args.out):
        model, tok = load_default_model()
        explain_corpus(model, args.data, args.out, tok, limit=args.limit, show_progress=False)
    run = CorpusRun(args.out)
    by_id: dict[str, list[dict]] = {}
    for r in run.texts().to_dict("records"):
        by_id.setdefault(str(r["id"]), []).append(r)
    old: dict[str, list[str]] = {"held-out R² < 0.5": [], "|gap| > 1": [], "not converged": []}
    new: dict[str, list[str]] = {}
    for text_id, rows in by_id.items():
        first = rows[0]
        if first["heldout_r2"] == first["heldout_r2"] and first["heldout_r2"] < 0.5:
            old["held-out R² < 0.5"].append(text_id)
        if max(abs(float(r["full_text_gap"])) for r in rows) > 1.0:
            old["|gap| > 1"].append(text_id)
        if first["converged"] is False:
            old["not converged"].append(text_id)
        for flag in row_flags(rows):
            new.setdefault(flag.code, []).append(text_id)
    method = run.manifest["options"]["method"]
    print(f"{len(by_id)} texts of {args.data.name}, method {method} ({run.manifest['options']['n_samples']} samples)")
    any_old = {i for ids in old.values() for i in ids}
    any_new = {i for ids in new.values() for i in ids}
    print(f"old rule (report 'poor fit'): {len(any_old)} texts; " + "; ".join(f"{k}: {len(v)}" for k, v in old.items()))
    print(f"new rule (fit_quality): {len(any_new)} texts; " + "; ".join(f"{k}: {len(v)} {v}" for k, v in new.items()))


if __name__ == "__main__":
    main()
