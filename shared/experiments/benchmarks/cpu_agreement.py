"""Same seed, same scores on any CPU: dump explanations under one instruction set, compare two dumps.

Float kernels differ between CPUs (AVX-512 on recent Intel, AVX2 on AMD EPYC, SSE elsewhere),
so the model's log-odds differ in their last bits. The fits must turn that into differences
far below what the data determine. This script explains a fixed set of texts with every
method, as ``explain_batch`` and as a loop, and writes every score to an ``.npz``; a second
call compares two dumps with the criterion of the batching tests: every score within
``1e-3 × (1 + max |score|)``.

Without an AMD machine at hand, the kernels an AMD EPYC uses can be forced on Intel by
environment variables read at start-up (torch's ATen dispatch, MKL, oneDNN)::

    python -m slalom_core.experiments.benchmarks.cpu_agreement dump native.npz
    ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 ONEDNN_MAX_CPU_ISA=AVX2 \\
        python -m slalom_core.experiments.benchmarks.cpu_agreement dump avx2.npz
    ATEN_CPU_CAPABILITY=default MKL_ENABLE_INSTRUCTIONS=SSE4_2 ONEDNN_MAX_CPU_ISA=SSE41 \\
        python -m slalom_core.experiments.benchmarks.cpu_agreement dump sse.npz
    python -m slalom_core.experiments.benchmarks.cpu_agreement compare native.npz avx2.npz sse.npz
"""

from __future__ import annotations

import argparse
import os
import warnings
from pathlib import Path

import numpy as np
import slalom_core as sc
import torch
from slalom_core.packaged.demo_model import load_default_model

TEXTS = [
    "a wonderful, moving film with great acting",
    "the plot was dull and the ending awful, i would not watch it again",
    "not bad at all",
    "great",
    "the cast tries hard but the script is a mess ; two hours i will never get back",
]
SCORES = ("value", "importance", "lin", "removal", "contribution")
METHODS = {"eff": 500, "fidel": 500, "ana": 0}
ENV = ("ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS", "ONEDNN_MAX_CPU_ISA")


def dump(path: str, threads: int) -> None:
    torch.set_num_threads(threads)
    model, tok = load_default_model()
    out = {"capability": np.array(torch.backends.cpu.get_cpu_capability())}
    for method, n in METHODS.items():
        kw = dict(tokenizer=tok, method=method, seed=0, **({"n_samples": n} if n else {}))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", sc.SlalomFitWarning)
            runs = {"batch": sc.explain_batch(model, TEXTS, **kw), "loop": [sc.explain(model, t, **kw) for t in TEXTS]}
        for how, exps in runs.items():
            for i, exp in enumerate(exps):
                for name in SCORES:
                    out[f"{method}/{how}/{i}/{name}"] = np.asarray(exp.scores(name), dtype=np.float64)
                out[f"{method}/{how}/{i}/model_output"] = np.atleast_1d(exp.model_output)
    np.savez(path, **out)
    env = ", ".join(f"{k}={os.environ.get(k, '-')}" for k in ENV)
    print(f"{path}: capability {out['capability']} ({env}); {len(out) - 1} arrays")


def worst(a: dict, b: dict, pairs: list[tuple[str, str]]) -> tuple[float, float]:
    """Largest absolute and scaled (÷ (1 + max |score|)) difference over key pairs (a's, b's)."""
    absolute = scaled = 0.0
    for ka, kb in pairs:
        d = float(np.abs(a[ka] - b[kb]).max())
        absolute = max(absolute, d)
        scaled = max(scaled, d / (1.0 + float(np.abs(a[ka]).max())))
    return absolute, scaled


def compare(paths: list[str], rel: float = 1e-3) -> bool:
    """Each dump's batch against its loop, then every dump against the first; True when all pass."""
    dumps = [dict(np.load(p)) for p in paths]
    names = [f"{Path(p).stem} ({d['capability']})" for p, d in zip(paths, dumps)]
    checks = [(f"{n}: batch vs loop", d, d, "batch", "loop") for n, d in zip(names, dumps)]
    checks += [
        (f"{names[0]} vs {n}", dumps[0], d, h, h) for n, d in zip(names[1:], dumps[1:]) for h in ("batch", "loop")
    ]
    ok = True
    print(f"{'comparison':<38}{'runs':<7}{'method':<8}{'output |Δ|':>12}{'score |Δ|':>11}{'scaled':>10}  pass")
    for label, a, b, how_a, how_b in checks:
        for method in METHODS:
            keys = [k for k in a if k.startswith(f"{method}/{how_a}/")]
            pairs = [(k, k.replace(f"/{how_a}/", f"/{how_b}/")) for k in keys]
            out_abs, _ = worst(a, b, [p for p in pairs if p[0].endswith("model_output")])
            sc_abs, sc_rel = worst(a, b, [p for p in pairs if not p[0].endswith("model_output")])
            good = sc_rel <= rel
            ok &= good
            runs = how_a if how_a == how_b else "-"
            print(f"{label:<38}{runs:<7}{method:<8}{out_abs:>12.2e}{sc_abs:>11.2e}{sc_rel:>10.2e}  {good}")
    return ok


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dump")
    d.add_argument("path")
    d.add_argument("--threads", type=int, default=1)
    c = sub.add_parser("compare")
    c.add_argument("paths", nargs="+")
    args = ap.parse_args()
    if args.cmd == "dump":
        dump(args.path, args.threads)
    elif not compare(args.paths):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
