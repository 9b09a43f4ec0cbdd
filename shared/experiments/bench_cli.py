"""The ``slalom-xai bench`` sub-command: a thin argparse front end to :mod:`slalom_core.experiments.bench`.

``register(subparsers)`` adds the sub-command to an existing ``slalom-xai`` parser;
``main(argv)`` runs it on its own (``python -m slalom_core.experiments.bench_cli --model default ...``).

Example:
    >>> import argparse
    >>> parser = argparse.ArgumentParser(prog="slalom-xai")
    >>> sub = parser.add_subparsers(dest="command", required=True)
    >>> _ = register(sub)
    >>> args = parser.parse_args(["bench", "--data", "reviews.jsonl", "--methods", "slalom-eff,lime"])
    >>> args.methods
    'slalom-eff,lime'
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from ..cli.format import option_value
from .bench import DEFAULT_METHODS, METHODS, BenchConfig

__all__ = ["register", "add_arguments", "config_from_args", "run_bench", "main"]

_EPILOG = (
    "methods: " + ", ".join(f"{k} ({m.label})" for k, m in METHODS.items()) + ". "
    "Outputs in --out: results.csv, results.md, results.json, instances.csv, "
    "deletion_curves.png, insertion_curves.png, time_vs_aopc.png."
)


def _fractions(text: str) -> tuple[float, ...]:
    try:
        vals = tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"expected comma-separated fractions, got {text!r}") from err
    if not vals or any(not 0 <= v <= 1 for v in vals):
        raise argparse.ArgumentTypeError("fractions must lie in [0, 1]")
    return vals


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the benchmark's options to ``parser`` (returned for chaining).

    Example:
        >>> p = add_arguments(argparse.ArgumentParser())
        >>> p.parse_args(["--data", "x.jsonl"]).n_samples
        1000
    """
    p = parser
    p.add_argument(
        "--model",
        default="default",
        help="a local Hugging Face classifier folder or Hub id, or a packaged model: 'default' (the MiniLM with "
        "its trained IMDB adapter, minilm-imdb) or 'zeroshot' (the MiniLM as a zero-shot sentiment classifier)",
    )
    p.add_argument(
        "--data",
        required=True,
        help="JSON-lines file (.jsonl or .jsonl.gz) with text and label; words + human_attention enable the human-attention metrics",
    )
    p.add_argument("--out", default="bench_output", help="output folder (default: bench_output)")
    p.add_argument(
        "--methods", default=",".join(DEFAULT_METHODS), help="comma-separated method keys (default: %(default)s)"
    )
    p.add_argument("--n", type=int, default=10, help="number of texts (default: 10)")
    p.add_argument("--min-tokens", type=int, default=1, help="shortest text, in tokens without special tokens")
    p.add_argument("--max-tokens", type=int, default=None, help="longest text (default: what the model accepts)")
    p.add_argument(
        "--n-samples",
        type=int,
        default=1000,
        help="sample budget of SLALOM, LIME, KernelSHAP, Partition, the shapiq approximators and the reference "
        "(default: 1000)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default=None, help="torch device for the model, e.g. cuda")
    p.add_argument(
        "--removal",
        default="delete",
        choices=["delete", "mask", "pad"],
        help="how the metrics and the perturbation baselines remove tokens (default: delete)",
    )
    p.add_argument(
        "--bins",
        type=_fractions,
        default=BenchConfig.bins,
        help="ERASER fractions, comma-separated (default: 0.01,0.05,0.1,0.2,0.5)",
    )
    p.add_argument(
        "--nb-train",
        default=None,
        help="labelled JSON-lines file for the Naive-Bayes Spearman metric (e.g. imdb_train.jsonl.gz)",
    )
    p.add_argument(
        "--nb-alpha", type=float, default=40.0, help="Laplace smoothing of the NB table (default: 40, as in the paper)"
    )
    p.add_argument("--nb-max-docs", type=int, default=None, help="use at most this many NB training documents")
    p.add_argument(
        "--attention-field",
        default="human_attention",
        help="per-word 0/1 field for human attention (default: human_attention)",
    )
    p.add_argument("--batch-size", type=int, default=64, help="sequences per forward pass (default: 64)")
    p.add_argument(
        "--slalom-batch-size",
        type=int,
        default=None,
        help="sequences per forward pass for SLALOM-eff's short samples (default: --batch-size)",
    )
    p.add_argument(
        "--slalom-batch",
        type=int,
        default=1,
        help="texts per explain_batch call for SLALOM (default 1: timed per text like the baselines)",
    )
    p.add_argument(
        "--slalom-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="fitter option for SLALOM-eff/-fidel, repeatable, e.g. sample_length=3",
    )
    p.add_argument("--lig-steps", type=int, default=50, help="integrated-gradients steps (default: 50)")
    p.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's choice)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


def register(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add ``bench`` to a ``slalom-xai`` sub-parser set; its ``func`` is :func:`run_bench`.

    Example:
        >>> parser = argparse.ArgumentParser(prog="slalom-xai")
        >>> bench = register(parser.add_subparsers(dest="command"))
        >>> bench.prog
        'slalom-xai bench'
    """
    parser = subparsers.add_parser(
        "bench",
        help="compare SLALOM with Captum / SHAP / shapiq baselines on your model and data",
        description=(
            "Explain N texts with SLALOM and the baselines at equal sample budgets and report "
            "deletion / insertion AOPC (ERASER), human-attention AUC, Naive-Bayes Spearman, "
            "seconds and model evaluations per explanation."
        ),
        epilog=_EPILOG,
    )
    add_arguments(parser)
    parser.set_defaults(func=run_bench)
    return parser


def config_from_args(args: argparse.Namespace) -> BenchConfig:
    """The :class:`BenchConfig` described by parsed arguments."""
    methods = tuple(m.strip() for m in args.methods.split(",") if m.strip())
    options = {}
    for item in args.slalom_option:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--slalom-option needs KEY=VALUE, got {item!r}")
        options[key.strip()] = option_value(value.strip())
    return BenchConfig(
        model=args.model,
        data=args.data,
        out=args.out,
        methods=methods,
        n=args.n,
        min_tokens=args.min_tokens,
        max_tokens=args.max_tokens,
        n_samples=args.n_samples,
        seed=args.seed,
        device=args.device,
        removal=args.removal,
        bins=tuple(args.bins),
        nb_train=args.nb_train,
        nb_alpha=args.nb_alpha,
        nb_max_docs=args.nb_max_docs,
        attention_field=args.attention_field,
        batch_size=args.batch_size,
        slalom_batch_size=args.slalom_batch_size,
        slalom_batch=args.slalom_batch,
        slalom_options=options,
        lig_steps=args.lig_steps,
        threads=args.threads,
        progress=not args.no_progress,
    )


def run_bench(args: argparse.Namespace) -> int:
    """Run the benchmark for parsed arguments, print the table; exit status 0 or 2."""
    from .bench import run_benchmark

    try:
        config = config_from_args(args)
        config.validate()
    except ValueError as err:
        print(f"slalom-xai bench: error: {err}", file=sys.stderr)
        return 2
    result = run_benchmark(config)
    print(result.markdown)
    for path in result.files.values():
        print(f"wrote {path}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m slalom_core.experiments.bench_cli [options]``: the sub-command without ``slalom-xai``."""
    parser = argparse.ArgumentParser(
        prog="slalom-xai bench", description="SLALOM comparative benchmark", epilog=_EPILOG
    )
    add_arguments(parser)
    return run_bench(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
