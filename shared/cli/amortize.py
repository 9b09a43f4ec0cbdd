"""Command-line front of amortized SLALOM: ``amortize`` (train a head on a corpus run) and
the deprecated ``explain-amortized`` (explain a corpus with a saved head, one JSON line per
text; ``slalom-xai explain --amortized DIR`` is the one way to explain a corpus with a head).

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

from ..amortized.head import EPOCHS, HIDDEN
from ..files import replace_with
from ..saving import plain
from .format import subcommand

__all__ = ["add_parser", "main", "inside", "check_out_not_data"]

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
    p = subcommand(
        subparsers,
        "amortize",
        "train an amortized explainer on a corpus run (its per-text fits are the labels)",
        "Train a head on the model's hidden states to predict the run's values and importances; "
        "save it to OUT (head.safetensors + config.json).",
    )
    p.add_argument("run", help="a corpus run folder (slalom-xai explain --out) of per-text fits, 200+ texts")
    p.add_argument("--model", required=True, help="the run's model: a local folder, Hub id or packaged name")
    p.add_argument(
        "--out",
        required=True,
        help="a new folder to save the explainer to (never the model's or the run's folder; an existing one "
        "only if it holds a saved explainer)",
    )
    p.add_argument(
        "--epochs", type=int, default=EPOCHS, help="training passes over the run's texts (at least 1; the best kept)"
    )
    p.add_argument("--hidden", type=int, default=HIDDEN, help="width of the head's MLP (at least 1)")
    p.add_argument("--seed", type=int, default=0, help="the head's initialisation and order of training texts")
    p.set_defaults(func=lambda a: _amortize(a, load))
    e = subcommand(
        subparsers,
        "explain-amortized",
        "deprecated: use 'explain --amortized DIR' (JSON lines from a saved amortized explainer)",
        "Deprecated: 'slalom-xai explain --amortized DIR' explains a corpus with a saved head into a "
        "run (the same tables as a per-text run). This writes one JSON line per text: tokens, value, importance, "
        "lin, contribution, base value, model output, predicted class, the out-of-distribution check (and the "
        "audit, with --audit); failed texts get an error. Texts too long are cut as 'explain' cuts them.",
    )
    e.add_argument("--amortized", required=True, help="a folder saved by 'amortize'")
    e.add_argument("--model", required=True, help="the model it was trained for")
    e.add_argument("--data", required=True, help="a .jsonl/.csv/.parquet file or folder, as 'explain' reads")
    e.add_argument("--out", required=True, help="a new .jsonl file to write (never the --data file)")
    e.add_argument("--text-column", default="text", help="the column of texts")
    e.add_argument("--id-column", default="auto", help="the column of ids; auto: 'id' if present, else row numbers")
    e.add_argument("--limit", type=int, default=None, help="only the first N rows")
    e.add_argument("--chunk-size", type=int, default=64, help="texts per forward batch group")
    e.add_argument("--audit", type=float, default=0.0, help="share of texts also fitted per text, compared")
    e.set_defaults(func=lambda a: _explain(a, load))


def inside(path: str | Path, folder: str | Path) -> bool:
    """Whether ``path`` is ``folder`` or lies under it (both resolved; False if ``folder`` does not exist).

    Example:
        >>> import tempfile
        >>> folder = tempfile.mkdtemp()
        >>> inside(folder + "/head", folder), inside(folder + "-head", folder)
        (True, False)
    """
    folder = Path(folder)
    if not folder.exists():
        return False
    p, f = Path(path).resolve(), folder.resolve()
    return p == f or f in p.parents


def _amortize(args: argparse.Namespace, load: Loader) -> int:
    from ..amortized.explainer import AmortizedExplainer

    # Checked before the model is loaded or anything written.
    for name in ("epochs", "hidden"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name} must be at least 1, got {getattr(args, name)}")
    for what, folder in (("the model's folder (--model)", args.model), ("the corpus run it reads", args.run)):
        if inside(args.out, folder):
            raise ValueError(
                f"--out {args.out!r} is inside {what} {str(folder)!r}: an explainer is never saved there (it "
                "would write over its files); choose a new folder"
            )
    model, tok = load(args.model)
    explainer = AmortizedExplainer(model, tok, epochs=args.epochs, hidden=args.hidden, seed=args.seed).fit(args.run)
    out = explainer.save(args.out)
    print(f"trained on {args.run}: {json.dumps(explainer.config['training'])}; saved to {out}")
    return 0


def _record(text_id: str, exp) -> dict:
    rec = {"id": text_id, "tokens": list(exp.tokens), "base_value": float(exp.base_value)}
    rec["model_output"] = float(exp.model_output)
    # The predicted class, named as the model names it (the per-text run's report does so).
    names = exp.diagnostics.get("class_names")
    k = int(exp.model_output >= 0)
    rec["predicted"] = str(names[k]) if names and len(names) == 2 else k
    rec["class_names"] = names
    rec["truncated_positions"] = int(exp.diagnostics.get("truncated_positions", 0))
    rec.update(
        {
            name: plain(np.asarray(exp.scores(name), dtype=float).round(6))
            for name in ("value", "importance", "lin", "contribution")
        }
    )
    # The surrogate's length law: with value and importance it gives every sub-text's output.
    rec["length_law"] = exp.surrogate.law.as_dict()
    rec["ood"] = exp.diagnostics["ood"]
    if "audit" in exp.diagnostics:
        rec["audit"] = exp.diagnostics["audit"]
    return rec


def check_out_not_data(out: str | Path, data: str | Path) -> None:
    """Refuse an ``--out`` that is the ``--data`` file or lies in the ``--data`` folder (a
    command never writes into its own input), before anything is read or written.

    Example:
        >>> check_out_not_data("reviews.jsonl", "reviews.jsonl")
        Traceback (most recent call last):
        ...
        ValueError: --out 'reviews.jsonl' is the --data input (or inside it): a command never writes into its input; choose another --out
    """
    same = Path(out).resolve() == Path(data).resolve()
    if same or (Path(data).is_dir() and inside(out, data)):
        raise ValueError(
            f"--out {str(out)!r} is the --data input (or inside it): a command never writes into its input; "
            "choose another --out"
        )


def _explain(args: argparse.Namespace, load: Loader) -> int:
    import warnings

    from ..amortized.explainer import AmortizedExplainer
    from ..corpus import CorpusSource

    warnings.warn(
        "explain-amortized is deprecated: 'slalom-xai explain --amortized DIR --out RUN' explains a corpus with "
        "the same head into a run (the per-text run's tables, report and summaries); the audit is "
        "AmortizedExplainer.explain_batch(texts, audit=...)",
        FutureWarning,
        stacklevel=2,
    )
    check_out_not_data(args.out, args.data)
    out = Path(args.out)
    if out.exists():
        raise FileExistsError(f"--out {str(out)!r} exists: it is not overwritten; choose a new file")
    model, tok = load(args.model)
    explainer = AmortizedExplainer.load(args.amortized, model, tok)
    source = CorpusSource(args.data, text_column=args.text_column, id_column=args.id_column, limit=args.limit).scan()
    t0 = time.perf_counter()
    # Written beside --out and renamed: a killed command leaves no half file under its name.
    n_done, n_failed = replace_with(out, lambda tmp: _write_records(tmp, source, explainer, args))
    seconds = time.perf_counter() - t0
    print(f"{n_done} texts explained, {n_failed} failed, {n_done / max(seconds, 1e-9):.1f} texts/s -> {args.out}")
    return 1 if n_failed and not n_done else 0  # every text failed: not a success


def _write_records(path: Path, source, explainer, args: argparse.Namespace) -> tuple[int, int]:
    """One JSON line per text of ``source`` into ``path``; returns (explained, failed)."""
    n_done = n_failed = 0
    with open(path, "w", encoding="utf-8") as fh:
        for chunk in source.chunks(args.chunk_size):
            good = []
            for row in chunk:  # each bad text fails alone, with the per-text explanation's error
                try:
                    if not isinstance(row.text, str):
                        raise TypeError(f"the text is {type(row.text).__name__}, not str")
                    # The one cutting rule of every entry point (explain --amortized too).
                    good.append((row, *explainer.adapter.segment_within_length(row.text)))
                except (ValueError, TypeError) as err:
                    fh.write(json.dumps({"id": row.id, "error": type(err).__name__, "message": str(err)}) + "\n")
                    n_failed += 1
            segs = [seg for _, seg, _ in good]
            exps = explainer.explain_batch(segs, audit=args.audit) if good else []
            for (row, _, n_cut), exp in zip(good, exps):
                exp.diagnostics["truncated_positions"] = n_cut
                fh.write(json.dumps(_record(row.id, exp)) + "\n")
            n_done += len(good)
    return n_done, n_failed


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
