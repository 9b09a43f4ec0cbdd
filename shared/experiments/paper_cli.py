"""The ``slalom-xai paper`` sub-command: run the paper's experiments (:mod:`slalom_core.experiments.paper`).

``slalom-xai paper {fig3,fig4ab,fig4cd,fig9,table12,all} --out DIR [--seed N] [--small]``

Each experiment writes a PNG, a CSV and a markdown table into ``--out`` (``all`` writes
each experiment into its own sub-folder ``DIR/<name>``) and the markdown tables are printed.
Default sizes are those of the functions in :mod:`slalom_core.experiments.paper` (minutes per
experiment on one CPU thread, see ``docs/paper_reproduction.md``); ``--small`` uses toy
sizes that finish in seconds (a smoke test: the numbers mean nothing).

``table12`` needs ``--data`` (default ``imdb_test.jsonl`` in the data folder,
:mod:`slalom_core.experiments.data`) and is reported as skipped when the file is missing.

Example:
    >>> import argparse
    >>> parser = argparse.ArgumentParser(prog="slalom-xai")
    >>> _ = register(parser.add_subparsers(dest="command", required=True))
    >>> args = parser.parse_args(["paper", "fig9", "--out", "out", "--small"])
    >>> args.experiment, args.small, args.seed
    ('fig9', True, 0)
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

__all__ = ["NAMES", "SMALL_SIZES", "register", "add_arguments", "run_paper", "main"]

#: Experiments in the order ``all`` runs them.
NAMES: tuple[str, ...] = ("fig3", "fig4ab", "fig4cd", "fig9", "table12")

_TOY_TRAIN = dict(hidden_size=16, n_heads=2, epochs=1, samples_per_epoch=100, batch_size=20)

#: Keyword arguments for ``--small``: toy sizes, seconds per experiment.
SMALL_SIZES: dict[str, dict] = {
    "fig3": dict(archs=("mlp", "bert"), layers=(1,), k_max=10, **_TOY_TRAIN),
    "fig4ab": dict(archs=("bert",), layers=(1,), n_fit=400, n_test=100, k_max=10, **_TOY_TRAIN),
    "fig4cd": dict(archs=("distilbert",), layers=(1,), n_words=8, max_len=10, n_fit=400, n_test=50, **_TOY_TRAIN),
    "fig9": dict(
        arch="distilbert",
        n_layers=1,
        vocab_sizes=(4, 8),
        lengths=(2, 6),
        base_vocab=4,
        base_length=4,
        n_samples=200,
        n_test=50,
        **_TOY_TRAIN,
    ),
    "table12": dict(n_texts=2, n_samples_grid=(150, 300), min_tokens=20, max_tokens=40),
}

_DESCRIPTIONS = {
    "fig3": "Fig. 3: transformers trained on linear data answer k copies of 'perfect' almost constantly",
    "fig4ab": "Fig. 4 (a, b), Table 6: linear model vs GAM vs SLALOM fitted to the transformers",
    "fig4cd": "Fig. 4 (c, d), Tables 7-8: recovering a SLALOM learned by a transformer",
    "fig9": "Fig. 9: SLALOM-ana vs gradient fits as |V| and the context length grow",
    "table12": "Table 12 (App. F.7): deletion AOPC of SLALOM-eff against the number of samples (IMDB)",
}


def _experiments() -> dict:
    from . import paper

    return {**paper.EXPERIMENTS, "table12": paper.run_table12}


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the sub-command's options to ``parser`` (returned for chaining)."""
    parser.add_argument(
        "experiment", choices=[*NAMES, "all"], help="which experiment to run ('all': every one, each in DIR/<name>)"
    )
    parser.add_argument("--out", required=True, help="output folder for the PNG, CSV and markdown files")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    parser.add_argument(
        "--small", action="store_true", help="toy sizes for a quick check (seconds; the numbers mean nothing)"
    )
    parser.add_argument(
        "--model",
        default="default",
        help="table12 only: 'default' (packaged MiniLM) or a local Hugging Face classifier folder",
    )
    parser.add_argument(
        "--data",
        default=None,
        help="table12 only: JSON-lines reviews (default: imdb_test.jsonl in $SLALOM_DATA or ../shared/data)",
    )
    return parser


def register(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add ``paper`` to a ``slalom-xai`` sub-parser set; its ``func`` is :func:`run_paper`."""
    epilog = "experiments: " + "; ".join(f"{k}: {v}" for k, v in _DESCRIPTIONS.items()) + "."
    parser = subparsers.add_parser(
        "paper",
        help="reproduce the paper's experiments (Figs. 3, 4, 9, Tables 6-8, 12)",
        description="Run one of the paper's experiments (or all) and write PNG, CSV and markdown tables.",
        epilog=epilog,
    )
    add_arguments(parser)
    parser.set_defaults(func=run_paper)
    return parser


def _kwargs(name: str, args: argparse.Namespace) -> dict:
    kw = dict(SMALL_SIZES[name]) if args.small else {}
    if name == "table12":
        kw["model"] = args.model
        if args.data is not None:
            kw["data"] = args.data
    return kw


def run_paper(args: argparse.Namespace) -> int:
    """Run the experiment(s) named in parsed arguments; print tables and file names."""
    experiments = _experiments()
    names = list(NAMES) if args.experiment == "all" else [args.experiment]
    status = 0
    for name in names:
        out = Path(args.out) / name if args.experiment == "all" else Path(args.out)
        print(f"== {name}: {_DESCRIPTIONS[name]}{' (small)' if args.small else ''}", flush=True)
        t0 = time.perf_counter()
        result = experiments[name](out, seed=args.seed, **_kwargs(name, args))
        if "skipped" in result:
            print(f"skipped {name}: {result['skipped']}", file=sys.stderr)
            if args.experiment != "all":
                status = 1
            continue
        for path in result.get("files", []):
            if path.endswith(".md"):
                print(Path(path).read_text())
        for path in result.get("files", []):
            print(f"wrote {path}")
        print(f"{name} took {time.perf_counter() - t0:.1f} s\n", flush=True)
    return status


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m slalom_core.experiments.paper_cli fig9 --out DIR``: the sub-command on its own."""
    parser = argparse.ArgumentParser(prog="slalom-xai paper", description="Reproduce the paper's experiments")
    add_arguments(parser)
    return run_paper(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
