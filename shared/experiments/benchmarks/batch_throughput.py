"""``explain_batch`` against a loop of ``explain``, on whatever device is present.

Explains the same N IMDB test reviews (default 64, 120-250 tokens) with SLALOM-eff at 1000
samples, once one text at a time and once in a single ``explain_batch`` call, and prints
per path: seconds per explanation, forward-pass seconds, fit seconds (the engine's own
``model_seconds`` / ``fit_seconds`` diagnostics, summed over texts), texts per second, the
fit's share of wall time, and the batch/loop throughput ratio. Both paths draw the same
samples from the same seed; the script also reports how far their explanations differ on
what the data determine (predictions on the held-out design, held-out R²).

Not a test: timings depend on the machine and its load. One command, any device (CUDA when
present, else CPU; ``--device`` overrides):

    python -m slalom_core.experiments.benchmarks.batch_throughput   # packaged MiniLM, 64 texts
    python -m slalom_core.experiments.benchmarks.batch_throughput --device cuda --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import numpy as np
import slalom_core as sc
import torch
from slalom_core.experiments.bench import load_model as _load
from slalom_core.experiments.data import data_dir

DATA = (data_dir() or Path("../shared/data")) / "imdb_test.jsonl"


def load_model(spec: str, device: str | None):
    """A packaged demo model by name ("default") or a local ``save_pretrained`` folder, offline."""
    model, tok, _name = _load(spec, device=device)
    return model, tok


def pick_texts(tok, n: int, lo: int, hi: int, path: Path) -> list[str]:
    out = []
    with path.open() as fh:
        for line in fh:
            text = json.loads(line)["text"]
            if lo <= len(tok(text, add_special_tokens=False)["input_ids"]) <= hi:
                out.append(text)
                if len(out) == n:
                    break
    if len(out) < n:
        raise SystemExit(f"only {len(out)} texts of {lo}-{hi} tokens in {path}")
    return out


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"CPU {platform.processor() or platform.machine()}, {torch.get_num_threads()} torch threads, {os.cpu_count()} cores"


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def summarise(name: str, exps: list, wall: float) -> dict:
    fwd = float(sum(e.diagnostics["model_seconds"] for e in exps))
    fit = float(sum(e.diagnostics["fit_seconds"] for e in exps))
    n = len(exps)
    return {
        "path": name,
        "wall_s": wall,
        "per_explanation_s": wall / n,
        "forward_s": fwd,
        "fit_s": fit,
        "fit_share_of_wall": fit / wall,
        "texts_per_s": n / wall,
        "not_converged": int(sum(e.diagnostics.get("fit_converged") is False for e in exps)),
        "median_heldout_r2": float(np.nanmedian([e.diagnostics["heldout_r2"] for e in exps])),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="default", help='"default" (packaged MiniLM) or a local model folder')
    ap.add_argument("--data", default=str(DATA))
    ap.add_argument("--n", type=int, default=64)
    ap.add_argument("--min-tokens", type=int, default=120)
    ap.add_argument("--max-tokens", type=int, default=250)
    ap.add_argument("--n-samples", type=int, default=1000)
    ap.add_argument("--method", default="eff")
    ap.add_argument(
        "--batch-size", type=int, default=None, help="sequences per forward pass (default: 256 on CPU, 1024 on CUDA)"
    )
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--device", default=None, help="default: cuda when available, else cpu")
    ap.add_argument("--skip-loop", action="store_true", help="time explain_batch only")
    ap.add_argument("--json", default=None, help="also write the figures here")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    batch_size = args.batch_size or (1024 if device.type == "cuda" else 256)
    model, tok = load_model(args.model, str(device))
    texts = pick_texts(tok, args.n, args.min_tokens, args.max_tokens, Path(args.data))
    adapter = sc.HFClassifier(model, tok, batch_size=batch_size)
    opts = dict(method=args.method, n_samples=args.n_samples, seed=0)
    # Warm-up: kernels, allocator, the first-call costs of both paths.
    sc.explain_batch(adapter, texts[:4], **{**opts, "n_samples": 200})
    sc.explain(adapter, texts[0], **{**opts, "n_samples": 200})
    header = {
        "device": device_name(device),
        "torch": torch.__version__,
        "texts": len(texts),
        "tokens": [args.min_tokens, args.max_tokens],
        "n_samples": args.n_samples,
        "method": args.method,
        "batch_size": batch_size,
        "load_average": os.getloadavg() if hasattr(os, "getloadavg") else None,
    }
    print(json.dumps(header))

    rows = []
    batch = single = None
    sync(device)
    t0 = time.perf_counter()
    batch = sc.explain_batch(adapter, texts, **opts)
    sync(device)
    rows.append(summarise("explain_batch", batch, time.perf_counter() - t0))
    if not args.skip_loop:
        t0 = time.perf_counter()
        single = [sc.explain(adapter, t, **opts) for t in texts]
        sync(device)
        rows.append(summarise("loop of explain", single, time.perf_counter() - t0))

    print(f"{'path':<16}{'s/expl':>9}{'fwd s':>9}{'fit s':>8}{'fit %':>7}{'texts/s':>9}{'R2 med':>8}{'not conv':>9}")
    for r in rows:
        print(
            f"{r['path']:<16}{r['per_explanation_s']:>9.4f}{r['forward_s']:>9.2f}{r['fit_s']:>8.2f}{100 * r['fit_share_of_wall']:>6.1f}%"
            f"{r['texts_per_s']:>9.2f}{r['median_heldout_r2']:>8.3f}{r['not_converged']:>9}"
        )
    result = {**header, "rows": rows}
    if single is not None:
        ratio = rows[1]["wall_s"] / rows[0]["wall_s"]
        # Agreement on what the data determine: the surrogates' outputs on the full texts
        # and the held-out R² (never float-exact parameters a flat objective leaves free).
        gap = max(
            float(np.max(np.abs(np.subtract(a.surrogate_output, b.surrogate_output)))) for a, b in zip(single, batch)
        )
        r2 = max(abs(a.diagnostics["heldout_r2"] - b.diagnostics["heldout_r2"]) for a, b in zip(single, batch))
        result.update({"batch_over_loop": ratio, "max_surrogate_output_diff": gap, "max_heldout_r2_diff": r2})
        print(f"throughput batch/loop: {ratio:.2f}x; max |Δ surrogate output| {gap:.2e}; max |Δ held-out R²| {r2:.2e}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
