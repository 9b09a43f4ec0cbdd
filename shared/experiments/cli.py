"""The ``slalom-xai`` command.

``slalom-xai demo`` explains a few sentences with the embedded default model (the packaged
MiniLM with a small adapter trained for sentiment on IMDB reviews), prints a tokens × scores
table and writes a value-vs-importance scatter (PNG) and the two-channel view (HTML) per sentence.
``--model NAME_OR_PATH`` explains any Hugging Face sequence classifier instead.
``slalom-xai explain`` explains a whole corpus into a Parquet run and ``slalom-xai summarize``
draws its global picture (:mod:`.corpus_cli`). ``slalom-xai bench`` compares SLALOM with the Captum / SHAP baselines (:mod:`.bench_cli`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from ..api import DEFAULT_METHOD
from ..fitting import FITTERS
from .cli_format import DefaultsFormatter

DEMO_SENTENCES = (
    "The acting was wonderful and the story kept me hooked until the very end.",
    "A dull, predictable plot and wooden dialogue; I nearly fell asleep.",
    "Not bad at all, though the ending felt rushed.",
)


def format_table(exp, scores: Sequence[str] = ("value", "importance", "lin", "removal")) -> str:
    """A plain-text tokens × scores table (first class for multi-class explanations)."""
    cols = {name: exp.scores(name) for name in scores}
    width = max(8, max(len(t) for t in exp.tokens) + 1)
    lines = [f"{'token':<{width}}" + "".join(f"{n:>12}" for n in scores)]
    for i, tok in enumerate(exp.tokens):
        cells = []
        for name in scores:
            x = cols[name][i]
            cells.append(f"{float(x if x.ndim == 0 else x[0]):>12.4f}")
        lines.append(f"{tok:<{width}}" + "".join(cells))
    return "\n".join(lines)


def _load(model_arg: str | None):
    from .demo_model import load_model

    return load_model(model_arg)


def run_demo(args: argparse.Namespace) -> int:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .. import explain_batch, plots

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    model, tok, name = _load(args.model)
    texts = args.text or list(DEMO_SENTENCES)
    print(f"Model: {name}")
    print(f"Method: SLALOM-{args.method}, {args.n_samples} samples, seed {args.seed}\n")
    exps = explain_batch(
        model,
        texts,
        tokenizer=tok,
        method=args.method,
        n_samples=args.n_samples,
        seed=args.seed,
        granularity=args.granularity,
    )
    for i, (text, exp) in enumerate(zip(texts, exps)):
        d = exp.diagnostics
        first = (lambda x: x) if exp.class_names is None else (lambda x: x[0])
        print(f"[{i}] {text}")
        print(
            f"    model log-odds {float(first(exp.model_output)):+.3f} · surrogate {float(first(exp.surrogate_output)):+.3f} · "
            f"scores measured from the empty input's {float(first(exp.base_value)):+.3f} · held-out R² {d['heldout_r2']:.3f} · "
            f"{d['model_evaluations']} model evaluations in {d['model_seconds']:.2f} s, fit {d['fit_seconds']:.2f} s"
        )
        print(format_table(exp))
        fig, ax = plt.subplots(figsize=(6, 4.5))
        plots.plot_scatter(exp, ax=ax)  # its title: the sentence and the prediction
        fig.tight_layout()
        png = out / f"scatter_{i}.png"
        fig.savefig(png, dpi=120)
        plt.close(fig)
        html = out / f"explanation_{i}.html"  # value as colour, importance as underline
        html.write_text(exp.to_html(), encoding="utf-8")
        print(f"    wrote {png} and {html}\n")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="slalom-xai", description="SLALOM explanations for text classifiers")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser(
        "demo",
        help="explain example sentences with the embedded default model",
        formatter_class=DefaultsFormatter,
    )
    demo.add_argument(
        "--model",
        default=None,
        help="a Hugging Face sequence classifier (name or local path), or a packaged model by name "
        "(minilm-imdb, the default, or zeroshot)",
    )
    demo.add_argument("--text", action="append", help="a text to explain (repeatable); default: built-in examples")
    demo.add_argument("--method", default=DEFAULT_METHOD, choices=sorted(FITTERS), help="fitting method")
    demo.add_argument("--n-samples", type=int, default=1000, help="model evaluations per text")
    demo.add_argument("--granularity", default="token", choices=["token", "word"], help="what a position is")
    demo.add_argument("--seed", type=int, default=0, help="random seed of the samples")
    demo.add_argument("--out", default="demo_output", help="directory for the PNG and HTML files")
    demo.set_defaults(func=run_demo)
    from . import bench_cli, corpus_cli, paper_cli

    corpus_cli.register(sub)
    bench_cli.register(sub)
    paper_cli.register(sub)
    return parser


def one_line_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """A warning as the command line shows it: ``slalom-xai: Category: message``, one line.

    Python's default adds the file and the source line that raised it (for a warning from
    the library, often ``sys.exit(main())``), which says nothing to a user of the command.
    Installed by :func:`main` only; the library's warnings stay Python's.

    Example:
        >>> import io
        >>> out = io.StringIO()
        >>> one_line_warning(UserWarning("2 texts  failed"), UserWarning, "x.py", 1, file=out)
        >>> out.getvalue()
        'slalom-xai: UserWarning: 2 texts failed\\n'
    """
    text = " ".join(str(message).split())
    print(f"slalom-xai: {category.__name__}: {text}", file=sys.stderr if file is None else file)


def main(argv: Sequence[str] | None = None) -> int:
    """``slalom-xai <command> ...``: exit status 0, or 1 with a one-line error.

    Errors a user can fix (a missing file, a model that cannot be loaded, an invalid
    option found at run time) are printed as one line, not a traceback; set
    ``SLALOM_XAI_TRACEBACK=1`` to see the traceback.

    Example:
        >>> main(["demo", "--out", "demo_output"])  # doctest: +SKIP
        0
    """
    import os
    import warnings

    args = build_parser().parse_args(argv)
    shown = warnings.showwarning
    warnings.showwarning = one_line_warning
    try:
        return args.func(args)
    except (ValueError, TypeError, OSError, RuntimeError) as err:
        if os.environ.get("SLALOM_XAI_TRACEBACK"):
            raise
        print(f"slalom-xai {args.command}: error: {type(err).__name__}: {' '.join(str(err).split())}", file=sys.stderr)
        return 1
    finally:
        warnings.showwarning = shown


if __name__ == "__main__":
    sys.exit(main())
