"""``slalom-xai demo``: explain a few sentences with the embedded default model (or any
Hugging Face classifier): a tokens × scores table on the console, and per sentence a
value-vs-importance scatter (PNG) and the page of each explanation (HTML)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from ..api import DEFAULT_METHOD
from ..fitting import FITTERS
from .format import subcommand

__all__ = ["register", "run_demo", "format_table", "DEMO_SENTENCES"]

DEMO_SENTENCES = (
    "The acting was wonderful and the story kept me hooked until the very end.",
    "A dull, predictable plot and wooden dialogue; I nearly fell asleep.",
    "Not bad at all, though the ending felt rushed.",
)


def format_table(exp, scores: Sequence[str] = ("value", "importance", "contribution", "removal")) -> str:
    """A plain-text tokens × scores table (first class for multi-class explanations).

    The default columns are the two fitted scores and the two in output units that every
    adapter reports (``contribution``, the default score, and ``removal``); ``lin`` =
    v·exp(s) can reach hundreds on long texts and is one ``scores=`` entry away.

    Example:
        >>> print(format_table(exp, scores=("value", "lin")))  # doctest: +SKIP
    """
    cols = {name: exp.scores(name) for name in scores}
    width = max(8, max(len(t) for t in exp.tokens) + 1)
    col = max(12, *(len(n) + 2 for n in scores))  # a column holds its name with a space
    lines = [f"{'token':<{width}}" + "".join(f"{n:>{col}}" for n in scores)]
    for i, tok in enumerate(exp.tokens):
        cells = []
        for name in scores:
            x = cols[name][i]
            cells.append(f"{float(x if x.ndim == 0 else x[0]):>{col}.4f}")
        lines.append(f"{tok:<{width}}" + "".join(cells))
    return "\n".join(lines)


def _load(model_arg: str | None):
    from ..packaged.demo_model import load_model

    return load_model(model_arg)


def run_demo(args: argparse.Namespace) -> int:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .. import explain_batch, plots
    from ..fit_quality import HELDOUT_R2_LABEL
    from ..views.describe import flag_line

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
            f"scores measured from the empty input's {float(first(exp.base_value)):+.3f} · {HELDOUT_R2_LABEL} {d['heldout_r2']:.3f} · "
            f"{d['model_evaluations']} model evaluations in {d['model_seconds']:.2f} s, fit {d['fit_seconds']:.2f} s"
        )
        print(f"    {flag_line(exp)}")
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


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``demo`` to the ``slalom-xai`` command."""
    demo = subcommand(
        sub,
        "demo",
        "explain example sentences with the embedded default model",
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
