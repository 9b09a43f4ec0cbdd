"""Corpus runs: texts/s and peak memory, local against Ray, and the kill-and-resume check.

Explains the first N IMDB test reviews (``../shared/data/imdb_test.jsonl``; ``--truncate``
so that the few reviews over 512 tokens count too) with the packaged demo model through
the same command users run (``slalom-xai explain``, in a subprocess), and reports per run:
wall seconds, texts/s, peak resident memory of the whole process tree (Ray workers
included, sampled every 0.2 s), texts explained and failed.

``--resume-check N``: runs N reviews once uninterrupted, once killed with SIGKILL when
about half of the chunks are done and restarted with ``--resume``, and compares the two
runs' files (the same part files, identical tables but for the wall-clock ``seconds``).

Not a test: timings depend on the machine and its load. Examples:

    python -m slalom_core.experiments.benchmarks.corpus_throughput --sizes 200 --engines local
    python -m slalom_core.experiments.benchmarks.corpus_throughput --sizes 100 --engines ray1 ray2
    python -m slalom_core.experiments.benchmarks.corpus_throughput --resume-check 48
    python -m slalom_core.experiments.benchmarks.corpus_throughput --sizes 1000 --engines local --device cuda
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
from slalom_core.experiments.data import data_dir

DATA = (data_dir() or Path("../shared/data")) / "imdb_test.jsonl"
TIMES = ["seconds", "model_seconds", "fit_seconds"]  # wall-clock: what a re-run may change


def _tree_rss(proc: psutil.Process) -> int:
    total = 0
    for p in [proc, *proc.children(recursive=True)]:
        try:
            total += p.memory_info().rss
        except psutil.Error:
            pass
    return total


def _command(out: Path, n: int, engine: str, args) -> list[str]:
    cmd = [sys.executable, "-m", "slalom_core.cli", "explain", "--data", str(args.data), "--out", str(out)]
    cmd += ["--limit", str(n), "--chunk-size", str(args.chunk_size), "--truncate", "--no-progress"]
    cmd += ["--n-samples", str(args.n_samples), "--method", args.method]
    if args.device:
        cmd += ["--device", args.device]
    if engine.startswith("ray"):
        cmd += ["--ray", "--workers", engine[3:] or "2"]
    return cmd


def _run(cmd: list[str], env: dict, kill_when=None) -> tuple[float, int, int]:
    """(wall seconds, peak tree RSS bytes, return code); ``kill_when()`` True sends SIGKILL."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, start_new_session=True)
    ps = psutil.Process(proc.pid)
    peak = 0
    stop = threading.Event()

    def watch() -> None:
        nonlocal peak
        while not stop.is_set():
            peak = max(peak, _tree_rss(ps))
            if kill_when is not None and kill_when():
                os.killpg(proc.pid, signal.SIGKILL)  # the whole tree, as a crash would
                return
            stop.wait(0.2)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    rc = proc.wait()
    stop.set()
    thread.join()
    return time.perf_counter() - t0, peak, rc


def throughput(args) -> list[dict]:
    from slalom_core.corpus import CorpusRun

    rows = []
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    for n in args.sizes:
        for engine in args.engines:
            out = Path(args.out) / f"{engine}-{n}"
            shutil.rmtree(out, ignore_errors=True)
            wall, peak, rc = _run(_command(out, n, engine, args), env)
            run = CorpusRun(out)
            texts, fails = run.texts(), run.failures()
            row = {
                "engine": engine,
                "texts": n,
                "rc": rc,
                "wall_s": round(wall, 1),
                "texts_per_s": round(n / wall, 3),
                "peak_rss_gib": round(peak / 2**30, 2),
                "explained": int(texts["id"].nunique()),
                "failed": len(fails),
                "model_fit_s_per_text": round(float(texts["seconds"].mean()), 3),
            }
            print(json.dumps(row), flush=True)
            rows.append(row)
    return rows


def resume_check(args) -> dict:
    import pandas as pd
    from slalom_core.corpus import CorpusRun, store

    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    n = args.resume_check
    whole, cut = Path(args.out) / "resume-whole", Path(args.out) / "resume-cut"
    for p in (whole, cut):
        shutil.rmtree(p, ignore_errors=True)
    _run(_command(whole, n, "local", args), env)
    chunks = -(-n // args.chunk_size)
    done = lambda: len(list((cut / "done").glob("*.json"))) >= chunks // 2 if (cut / "done").is_dir() else False
    _, _, rc_killed = _run(_command(cut, n, "local", args), env, kill_when=done)
    done_at_kill = CorpusRun(cut).n_done
    _, _, rc_resumed = _run(_command(cut, n, "local", args) + ["--resume"], env)
    a, b = CorpusRun(whole), CorpusRun(cut)
    same_files = all(
        sorted(p.name for p in (whole / t).iterdir()) == sorted(p.name for p in (cut / t).iterdir())
        for t in store.TABLES
    )
    try:
        pd.testing.assert_frame_equal(a.texts().drop(columns=TIMES), b.texts().drop(columns=TIMES))
        pd.testing.assert_frame_equal(a.positions(), b.positions())
        pd.testing.assert_frame_equal(a.failures(), b.failures())
        same_tables = True
    except AssertionError:
        same_tables = False
    result = {
        "texts": n,
        "killed_rc": rc_killed,
        "texts_done_at_kill": done_at_kill,
        "resumed_rc": rc_resumed,
        "complete": b.complete,
        "same_part_files": same_files,
        "identical_tables_but_seconds": same_tables,
    }
    print(json.dumps(result), flush=True)
    return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default=str(DATA))
    parser.add_argument("--sizes", type=int, nargs="*", default=[200])
    parser.add_argument("--engines", nargs="*", default=["local"], help="local, ray1, ray2, ... (rayN: N workers)")
    parser.add_argument("--chunk-size", type=int, default=32)
    parser.add_argument("--n-samples", type=int, default=1000)
    parser.add_argument("--method", default="eff")
    parser.add_argument("--device", default=None)
    parser.add_argument("--resume-check", type=int, default=0, metavar="N")
    parser.add_argument("--out", default="bench_output/corpus")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    report = {"machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs", "runs": []}
    if args.sizes and args.engines:
        report["runs"] = throughput(args)
    if args.resume_check:
        report["resume"] = resume_check(args)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
