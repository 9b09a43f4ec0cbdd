"""``slalom-xai explain``: a whole corpus into a Parquet run, locally or on Ray; ``slalom-xai
summarize``: the run's global picture (per-token table, plot, global SLALOM); ``report``: its
static site; ``export``: a dataset to share (Parquet shards and a dataset card) or its raw tables."""

from __future__ import annotations

import argparse
import sys
from functools import partial
from pathlib import Path

from ..api import CallOptions
from ..fitting import FITTERS
from ..models import GRANULARITIES
from ..models.quiet import quiet_transformers
from .common import load_pair, one_line_errors, quiet_weight_loading, run_model_name, run_options, spec_name
from .format import option_value, subcommand


def _target(text: str) -> int | str:
    """``--target``: a class index, or the model's name of the class (read against its config)."""
    text = text.strip()
    return int(text) if text.lstrip("-").isdigit() else text


def _option(text: str) -> tuple[str, object]:

    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"--option takes KEY=VALUE, got {text!r}")
    return key.strip(), option_value(value.strip())


def add_explain(sub) -> None:
    p = subcommand(
        sub,
        "explain",
        "explain every text of a corpus (JSONL/CSV/Parquet/HF dataset) into a Parquet run",
        "Explain a corpus chunk by chunk into OUT/{positions,texts,failures}/*.parquet. "
        "A killed run restarted with the same command and --resume skips finished chunks.",
    )
    _add_data_arguments(p)
    _add_fit_arguments(p)
    _add_amortized_arguments(p)
    _add_ray_arguments(p)
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run_explain)


def _add_data_arguments(p: argparse.ArgumentParser) -> None:
    """``explain``'s model, data, output folder and how the data are read."""
    p.add_argument(
        "--model",
        default="default",
        help="packaged model name (minilm-imdb, the default, or zeroshot), local folder or Hub id",
    )
    p.add_argument("--data", required=True, help="a .jsonl/.csv/.parquet file, a folder of them, or a saved HF dataset")
    p.add_argument("--out", required=True, help="output folder (must be new, unless --resume)")
    p.add_argument("--text-column", default="text", help="the column of texts")
    p.add_argument("--id-column", default="auto", help="the column of ids; auto: 'id' if present, else row numbers")
    p.add_argument(
        "--label-column",
        default="auto",
        help="the data's own labels, kept as gold_label; auto: 'label' if present; none: no labels",
    )
    p.add_argument("--limit", type=int, default=None, help="only the first N rows")
    p.add_argument("--chunk-size", type=int, default=64, help="texts per chunk (per written part)")
    p.add_argument("--resume", action="store_true", help="continue the run in --out")
    p.add_argument(
        "--truncate",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="cut texts longer than the model accepts to their first tokens (recorded per text in "
        "truncated_positions); --no-truncate fails them instead",
    )


def _add_fit_arguments(p: argparse.ArgumentParser) -> None:
    """``explain``'s fit options, with the defaults of the engine's one table (:class:`~slalom_core.CallOptions`)."""
    p.add_argument(
        "--target",
        type=_target,
        default=CallOptions.target,
        help="the class to explain: an index or the model's class name (e.g. POSITIVE); default: class 1 of a "
        "binary model, every class of a larger one",
    )
    p.add_argument("--method", default=CallOptions.method, choices=sorted(FITTERS), help="fitting method")
    p.add_argument("--n-samples", type=int, default=CallOptions.n_samples, help="model evaluations per text")
    p.add_argument("--granularity", default=CallOptions.granularity, choices=GRANULARITIES, help="what a position is")
    p.add_argument("--seed", type=int, default=0, help="the run's seed (each text's is derived from it and its id)")
    p.add_argument("--batch-size", type=int, default=None, help="model batch size (default: the adapter's)")
    p.add_argument("--device", default=None, help="e.g. cuda (default: the model's)")
    p.add_argument("--option", type=_option, action="append", default=[], help="a fit option KEY=VALUE (repeatable)")


def _add_amortized_arguments(p: argparse.ArgumentParser) -> None:
    """``explain --amortized``: a saved head, or the pipeline (``auto``) and its sizes."""
    p.add_argument(
        "--amortized",
        default=None,
        metavar="DIR|auto",
        help="explain with an amortized explainer (one forward pass per text) instead of per-text fits: DIR, "
        "one saved by 'slalom-xai amortize'; auto, fit a label set per text (--n-samples is their budget), train "
        "a head on it, explain every text with it and audit a share per text (RUN/quality.parquet; "
        "RUN/auto holds the labels, head and audit). Same tables, each text's out-of-distribution check in "
        "texts' ood column",
    )
    p.add_argument(
        "--label-texts",
        type=int,
        default=None,
        help="with --amortized auto: texts fitted per text to train the head on (default: 200, from the "
        "measured curve and a 40-minute budget for 12,700 reviews on a 2-core CPU; fewer in a smaller corpus)",
    )
    p.add_argument(
        "--audit",
        type=float,
        default=None,
        metavar="FRACTION",
        help="with --amortized auto: share of the other texts also fitted per text to check the head (default: "
        "0.005, at least 20 texts; 0: none)",
    )
    p.add_argument(
        "--audit-samples",
        type=int,
        default=None,
        metavar="N",
        help="with --amortized auto: the audit's per-text budget (default: --n-samples, at least 1000: an audit "
        "agrees with the head no better than its own fits repeat)",
    )


def _add_ray_arguments(p: argparse.ArgumentParser) -> None:
    """``explain --ray``: Ray Data, its workers and their GPUs."""
    p.add_argument(
        "--ray",
        nargs="?",
        const="local",
        default=None,
        metavar="ADDRESS",
        help="run on Ray Data: alone, a local Ray instance; or a cluster address ('auto', 'ray://head:10001'). "
        "Ray's own messages go to OUT/ray-driver.log and its session folder (/tmp/ray/session_latest/logs), "
        "not to this terminal",
    )
    p.add_argument("--workers", type=int, default=None, help="Ray actors (model copies); default: one per CPU/GPU")
    p.add_argument("--gpus-per-worker", type=float, default=None, help="GPUs each Ray actor holds")


@one_line_errors
def run_explain(args: argparse.Namespace) -> int:
    from ..amortized import CorpusHead
    from ..corpus.loading import ModelLoader
    from ..corpus.run import explain_corpus
    from .amortize import check_out_not_data

    check_out_not_data(args.out, args.data)  # before anything is read or written
    if args.amortized != "auto":
        from ..corpus.resume import check_out

        # A full folder is refused before transformers is imported (~1 s of a rerun's
        # wait); explain_corpus checks again, for callers from Python.
        check_out(Path(args.out), args.resume)
    engine = "local" if args.ray is None else "ray"
    quiet_weight_loading()
    id_column = None if args.id_column in ("", "none") else args.id_column
    label_column = None if args.label_column in ("", "none") else args.label_column
    # Loaded only once the data and options have passed their checks; on Ray, by each
    # worker itself, so that nothing but the model's name travels.
    model, tokenizer = ModelLoader(partial(load_pair, args.model), name=spec_name(args.model)), None
    if engine == "ray" and args.ray != "local":
        import ray

        ray.init(address=args.ray)
    auto = args.amortized == "auto"
    if not auto and (args.label_texts is not None or args.audit is not None or args.audit_samples is not None):
        raise ValueError("--label-texts, --audit and --audit-samples go with --amortized auto")
    with quiet_transformers():  # no "Loading weights" bar: the run's own bar counts texts
        if auto:
            from .auto import explain_auto

            return explain_auto(args, model, run_options(args, id_column, label_column, engine))
        run = explain_corpus(
            model,
            args.data,
            args.out,
            tokenizer,
            method=args.method,
            n_samples=args.n_samples,
            target=args.target,
            granularity=args.granularity,
            seed=args.seed,
            amortized=None if args.amortized is None else CorpusHead(args.amortized),
            **run_options(args, id_column, label_column, engine),
            **dict(args.option),
        )
    texts, failures = run.texts(), run.failures()
    if len(texts) == 0 and len(failures):
        # Nothing explained: whatever failed every text (a device, a target, a broken
        # model) is an error of the command, not a run to report as done.
        first = failures.iloc[0]
        print(
            f"slalom-xai explain: error: every text failed ({len(failures)} of {len(failures)}); the first, "
            f"{first['id']!r}: {first['error']}: {first.get('message', '')} (all in {run.path / 'failures'})",
            file=sys.stderr,
        )
        return 1
    cut = int((texts.drop_duplicates("id")["truncated_positions"] > 0).sum())
    print(
        f"{run.path}: {texts['id'].nunique()} texts explained, {len(failures)} failed, of "
        f"{run.manifest['input']['n_rows']} rows ({cut} cut to the model's length); mean |full-text gap| "
        f"{texts['full_text_gap'].abs().mean():.3f}, {texts['seconds'].sum():.1f} s of model and fit time"
    )
    if engine == "ray":
        from ..corpus.ray_engine import DRIVER_LOG, RAY_LOGS

        print(f"Ray's own messages: {run.path / DRIVER_LOG}; its logs: {RAY_LOGS} (ray-data.log, worker-*)")
    return 0


def add_summarize(sub) -> None:
    p = subcommand(
        sub,
        "summarize",
        "the global picture of a corpus run: per-token table (CSV), plot (PNG), optional global SLALOM",
    )
    p.add_argument("run", help="a folder written by `slalom-xai explain`")
    p.add_argument("--min-texts", type=int, default=5, help="only tokens seen in at least this many texts")
    p.add_argument("--top", type=int, default=25, help="tokens in the plot and the printed table")
    p.add_argument("--global-fit", action="store_true", help="also fit a global SLALOM (needs the model)")
    p.add_argument(
        "--model",
        default=None,
        help="the model for --global-fit (default: the run's own, as its manifest names it); another model is refused",
    )
    p.set_defaults(func=run_summarize)


@one_line_errors
def run_summarize(args: argparse.Namespace) -> int:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..corpus import CorpusRun, compare_global_local, global_slalom, plot_words, top_words, word_summary

    run = CorpusRun(args.run)
    if args.global_fit:
        # Loaded and checked before anything is written: a fit of another model is refused.
        from ..corpus.summary import check_run_model

        model, tok = load_pair(args.model if args.model is not None else run_model_name(run))
        check_run_model(run, model, tok)
    summary = word_summary(run, min_texts=args.min_texts, sort_by="contribution")
    summary.to_csv(run.path / "words.csv")
    # The report's words.html and words.png pick their tokens by the same rule.
    head = top_words(summary, top=args.top, min_texts=args.min_texts)
    if not len(head):
        n_texts = run.texts()["id"].nunique()
        why = (
            f"no text of the run was explained ({len(run.failures())} failed: see CorpusRun(RUN).failures())"
            if n_texts == 0
            else f"no token occurs in at least {args.min_texts} of its {n_texts} explained texts (lower --min-texts)"
        )
        print(f"{run.path}: the word summary is empty: {why}; wrote the empty table {run.path / 'words.csv'}, no plot")
        return 0
    fig = plot_words(head, top=args.top)
    fig.savefig(run.path / "words.png", dpi=120)
    plt.close(fig)
    print(head[["n_texts", "contribution_mean", "contribution_se", "value_mean", "importance_mean"]].to_string())
    print(f"wrote {run.path / 'words.csv'} and {run.path / 'words.png'}")
    if args.global_fit:
        g = global_slalom(model, run, tok, top=max(args.top, 100), min_texts=args.min_texts)
        g.to_csv(run.path / "global_slalom.csv")
        rho = compare_global_local(g, run)
        print(
            f"global SLALOM over {rho['n_tokens']} tokens (held-out R² {g.attrs.get('heldout_r2', float('nan')):.3f}): "
            f"Spearman with the local means: value {rho['value']:.3f}, importance {rho['importance']:.3f}"
        )
    return 0


def add_report(sub) -> None:
    p = subcommand(
        sub,
        "report",
        "a corpus run as a static site (index of texts, one page per text, word summary) that opens offline",
        "Write RUN's texts as a static site into --out: index.html (sortable, filterable, paged), one "
        "page per text (what each token added; value and importance one tab away) and a word summary. Links are relative and nothing is fetched: open "
        "OUT/index.html from the folder, or zip it.",
    )
    p.add_argument("run", help="a folder written by `slalom-xai explain`")
    p.add_argument("--out", required=True, help="the site's folder")
    p.add_argument("--min-texts", type=int, default=5, help="word summary: only tokens seen in this many texts")
    p.add_argument("--top", type=int, default=30, help="word summary: how many tokens")
    p.add_argument("--score", default="contribution", help="the score coloured first on the text pages")
    p.add_argument("--no-text-pages", action="store_true", help="only the index and the word summary")
    p.set_defaults(func=run_report)


@one_line_errors
def run_report(args: argparse.Namespace) -> int:
    import matplotlib

    matplotlib.use("Agg")
    from ..corpus import CorpusRun
    from ..corpus.report import write_report

    index = write_report(
        CorpusRun(args.run),
        args.out,
        min_texts=args.min_texts,
        top=args.top,
        text_pages=not args.no_text_pages,
        score=args.score,
    )
    print(f"wrote {index} (open it in a browser; the folder works offline)")
    return 0


def register(sub) -> None:
    """Add ``explain``, ``refit``, ``summarize``, ``report`` and ``export`` to a ``slalom-xai`` sub-parser set."""
    from .auto import add_refit
    from .export import add_export

    add_explain(sub)
    add_refit(sub)
    add_summarize(sub)
    add_report(sub)
    add_export(sub)


__all__ = ["register", "run_explain", "run_summarize", "run_report"]
