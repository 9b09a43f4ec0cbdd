"""Command-line front of amortized SLALOM: ``amortize`` (train a head on a corpus run) and
``explain-amortized`` (explain a corpus with a saved head, one JSON line per text).

:func:`add_parser` adds both subcommands to an ``argparse`` subparsers object (the
``slalom-xai`` command wires them in); :func:`main` runs them on their own.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

__all__ = ["add_parser", "main"]

from ..cli.format import DefaultsFormatter

Loader = Callable[[str], tuple[object, object]]


def _default_loader(spec: str) -> tuple[object, object]:
    from ..corpus.loading import load_model

    return load_model(spec, None)


def add_parser(subparsers, *, load_pair: Loader | None = None) -> None:
    """Add ``amortize`` and ``explain-amortized`` to ``subparsers``.

    Args:
        subparsers: what ``ArgumentParser.add_subparsers()`` returned.
        load_pair: ``spec -> (model, tokenizer)`` for ``--model`` (default: a local folder
            or Hub id of a sequence classifier, loaded with ``transformers``).

    Example:
        >>> parser = argparse.ArgumentParser(prog="slalom-xai")
        >>> add_parser(parser.add_subparsers(dest="command"))
        >>> parser.parse_args(["amortize", "runs/r", "--model", "m", "--out", "heads/h"]).epochs
        60
    """
    load = load_pair or _default_loader
    p = subparsers.add_parser(
        "amortize",
        help="train an amortized explainer on a corpus run (its per-text fits are the labels)",
        description="Train a head on the model's hidden states to predict the run's values and importances; "
        "save it to OUT (head.safetensors + config.json).",
        formatter_class=DefaultsFormatter,
    )
    p.add_argument("run", help="a corpus run folder (slalom-xai explain --out)")
    p.add_argument("--model", required=True, help="the run's model: a local folder, Hub id or packaged name")
    p.add_argument("--out", required=True, help="folder to save the explainer to")
    p.add_argument("--epochs", type=int, default=60)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=lambda a: _amortize(a, load))
    e = subparsers.add_parser(
        "explain-amortized",
        help="explain a corpus with a saved amortized explainer (one forward pass per text)",
        description="One JSON line per text: tokens, value, importance, lin, contribution, base value, model "
        "output, the out-of-distribution check (and the audit, with --audit); failed texts get an error.",
        formatter_class=DefaultsFormatter,
    )
    e.add_argument("--amortized", required=True, help="a folder saved by 'amortize'")
    e.add_argument("--model", required=True, help="the model it was trained for")
    e.add_argument("--data", required=True, help="a .jsonl/.csv/.parquet file or folder, as 'explain' reads")
    e.add_argument("--out", required=True, help="a .jsonl file to write")
    e.add_argument("--text-column", default="text")
    e.add_argument("--id-column", default="auto")
    e.add_argument("--limit", type=int, default=None)
    e.add_argument("--chunk-size", type=int, default=64)
    e.add_argument("--audit", type=float, default=0.0, help="share of texts also fitted per text, compared")
    e.set_defaults(func=lambda a: _explain(a, load))


def _amortize(args: argparse.Namespace, load: Loader) -> int:
    from .explainer import AmortizedExplainer

    model, tok = load(args.model)
    explainer = AmortizedExplainer(model, tok, epochs=args.epochs, hidden=args.hidden, seed=args.seed).fit(args.run)
    out = explainer.save(args.out)
    print(f"trained on {args.run}: {json.dumps(explainer.config['training'])}; saved to {out}")
    return 0


def _record(text_id: str, exp) -> dict:
    plain = lambda x: np.asarray(x, dtype=float).round(6).tolist()  # noqa: E731 - one line
    rec = {"id": text_id, "tokens": list(exp.tokens), "base_value": float(exp.base_value)}
    rec["model_output"] = float(exp.model_output)
    rec.update({name: plain(exp.scores(name)) for name in ("value", "importance", "lin", "contribution")})
    rec["ood"] = exp.diagnostics["ood"]
    if "audit" in exp.diagnostics:
        rec["audit"] = exp.diagnostics["audit"]
    return rec


def _explain(args: argparse.Namespace, load: Loader) -> int:
    from ..corpus import CorpusSource
    from .explainer import AmortizedExplainer

    model, tok = load(args.model)
    explainer = AmortizedExplainer.load(args.amortized, model, tok)
    source = CorpusSource(args.data, text_column=args.text_column, id_column=args.id_column, limit=args.limit).scan()
    n_done = n_failed = 0
    t0 = time.perf_counter()
    with open(Path(args.out), "w", encoding="utf-8") as fh:
        for chunk in source.chunks(args.chunk_size):
            good = []
            for row in chunk:  # each bad text fails alone, with the per-text explanation's error
                try:
                    explainer.adapter.segment(row.text, "token")
                    good.append(row)
                except (ValueError, TypeError) as err:
                    fh.write(json.dumps({"id": row.id, "error": type(err).__name__, "message": str(err)}) + "\n")
                    n_failed += 1
            exps = explainer.explain_batch([r.text for r in good], audit=args.audit) if good else []
            for row, exp in zip(good, exps):
                fh.write(json.dumps(_record(row.id, exp)) + "\n")
            n_done += len(good)
    seconds = time.perf_counter() - t0
    print(f"{n_done} texts explained, {n_failed} failed, {n_done / max(seconds, 1e-9):.1f} texts/s -> {args.out}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``amortize`` or ``explain-amortized`` on their own (exit status 0, or 2 with a one-line error).

    Example:
        >>> main(["amortize", "runs/imdb", "--model", "models/minilm-imdb", "--out", "heads/imdb"])  # doctest: +SKIP
        0
    """
    parser = argparse.ArgumentParser(prog="slalom-xai", description="amortized SLALOM")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, TypeError, FileNotFoundError, RuntimeError) as err:
        print(f"slalom-xai {args.command}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
