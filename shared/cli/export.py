"""``slalom-xai export``: a corpus run as a dataset to share (Parquet shards and a dataset
card, :func:`slalom_core.corpus.export_dataset`), or as CSV / JSON-lines tables."""

from __future__ import annotations

import argparse

from .common import one_line_errors
from .format import subcommand

__all__ = ["add_export", "run_export"]


def add_export(sub) -> None:
    p = subcommand(
        sub,
        "export",
        "a corpus run as a dataset to share: Parquet shards and a dataset card (datasets.load_dataset reads it)",
        "Write RUN into --out: parquet (default) gives OUT/data/train-*.parquet, one row per (text, "
        "explained class) with its tokens and every score, and OUT/README.md, a dataset card for the Hugging "
        "Face Hub; csv and jsonl give the run's raw tables, one file per chunk.",
    )
    p.add_argument("run", help="a folder written by `slalom-xai explain`")
    p.add_argument("--out", required=True, help="the export's folder (new, or empty)")
    p.add_argument("--format", default="parquet", choices=["parquet", "csv", "jsonl"], help="what to write")
    p.add_argument("--shard-rows", type=int, default=10_000, help="parquet: rows per shard")
    p.add_argument("--overwrite", action="store_true", help="parquet: replace an earlier export at --out")
    p.set_defaults(func=run_export)


@one_line_errors
def run_export(args: argparse.Namespace) -> int:
    from ..corpus import CorpusRun, export_dataset, export_run

    run = CorpusRun(args.run)
    if args.format != "parquet":
        if args.overwrite:
            raise ValueError(f"--overwrite is for --format parquet; {args.format} exports go into a new folder")
        written = export_run(run, args.out, args.format)
        print(f"wrote {len(written)} {args.format} files under {args.out}")
        return 0
    out = export_dataset(run, args.out, shard_rows=args.shard_rows, overwrite=args.overwrite)
    print(f"wrote {out / 'data'} and {out / 'README.md'} (datasets.load_dataset('parquet', data_dir={str(out)!r}))")
    return 0
