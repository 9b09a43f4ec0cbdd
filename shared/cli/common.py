"""What the corpus commands share: loading ``--model``, naming it as a run's manifest does,
quieting transformers' notices, and one-line errors for what a user can fix."""

from __future__ import annotations

import argparse
import functools
import sys

__all__ = [
    "load_pair",
    "spec_name",
    "run_model_name",
    "quiet_weight_loading",
    "one_line_errors",
    "run_options",
    "stopped_line",
    "STOPPED_STATUS",
]

#: The exit status of a command stopped by Ctrl-C (128 + SIGINT, as a shell reports it).
STOPPED_STATUS = 130


def load_pair(spec: str | None):
    """``(model, tokenizer)`` for a ``--model`` value: a packaged model's name (default: the
    demo model), a local folder or a Hub id.

    Example:
        >>> model, tok = load_pair(None)  # doctest: +SKIP
    """
    # Module-level (not a lambda) so that a ModelLoader built on it pickles to Ray workers.
    from ..corpus.loading import check_model_path
    from ..packaged.demo_model import MODEL_NAMES, load_model

    if spec not in (None, "", "default") and spec not in MODEL_NAMES:
        check_model_path(spec)
    model, tok, _ = load_model(spec)
    return model, tok


def spec_name(spec: str | None) -> str:
    """The model as the manifest names it: a packaged model's name, a local folder's
    absolute path, or the Hub id as given."""
    from pathlib import Path

    from ..packaged.demo_model import DEFAULT_MODEL

    if spec in (None, "", "default"):
        return DEFAULT_MODEL
    return str(Path(spec).resolve()) if Path(spec).exists() else str(spec)


def run_model_name(run) -> str:
    """The model a run's manifest names, if the command line can load it by that name."""
    from pathlib import Path

    from ..packaged.demo_model import MODEL_NAMES

    recorded = run.manifest.get("model")
    name = recorded.get("name") if isinstance(recorded, dict) else recorded
    if isinstance(name, str) and (name in MODEL_NAMES or Path(name).exists() or "/" in name):
        return name
    raise ValueError(
        f"{str(run.path)!r} was explained with the model {name!r}, which the command line cannot load by name "
        "(a model given in Python): give it with --model (a folder or Hub id), or call global_slalom(model, run)"
    )


def _not_a_length_notice(record) -> bool:
    # The tokenizer's notice that a text is longer than the model takes: the run cuts such
    # texts itself (or fails them, with --no-truncate) and says so per text and once per run.
    return not str(record.msg).startswith("Token indices sequence length is longer")


def quiet_weight_loading() -> None:
    """No tokenizer notice about over-length texts (the run reports them itself). The
    "Loading weights" bar is silenced around the run by ``quiet_transformers``, which gives
    transformers' settings back afterwards."""
    import logging

    logger = logging.getLogger("transformers.tokenization_utils_base")
    if _not_a_length_notice not in logger.filters:
        logger.addFilter(_not_a_length_notice)


def one_line_errors(run):
    """Errors a user can fix (bad path, column, option) as one line on stderr, exit status 2."""

    @functools.wraps(run)
    def wrapped(args: argparse.Namespace) -> int:
        try:
            return run(args)
        except (ValueError, TypeError, FileNotFoundError, FileExistsError, ImportError) as err:
            print(f"slalom-xai {args.command}: error: {err}", file=sys.stderr)
            return 2

    return wrapped


def run_options(args: argparse.Namespace, id_column: str | None, label_column: str | None, engine: str) -> dict:
    """How ``explain`` runs a corpus (what it reads, chunks, resumes, where it runs), per text
    or by the amortized pipeline alike; the fit options are handed over by name beside it.

    Example:
        >>> run_options(parser.parse_args([...]), "id", None, "local")["chunk_size"]  # doctest: +SKIP
        64
    """
    return dict(
        text_column=args.text_column,
        id_column=id_column,
        label_column=label_column,
        limit=args.limit,
        chunk_size=args.chunk_size,
        resume=args.resume,
        truncate=args.truncate,
        engine=engine,
        num_workers=args.workers,
        num_gpus_per_worker=args.gpus_per_worker,
        batch_size=args.batch_size,
        device=args.device,
        show_progress=not args.no_progress,
    )


def stopped_line(args: argparse.Namespace, words: list[str]) -> str:
    """The one line a command stopped by Ctrl-C ends with: what was kept and, for a corpus
    run (``explain``, resumable), the command that continues it.

    Args:
        args: the parsed command line.
        words: the command's arguments as typed (``sys.argv[1:]``).

    Example:
        >>> stopped_line(argparse.Namespace(command="report"), ["report", "runs/r"])
        'slalom-xai report: stopped (Ctrl-C)'
    """
    import shlex
    from pathlib import Path

    if args.command != "explain" or not getattr(args, "out", None):
        return f"slalom-xai {args.command}: stopped (Ctrl-C)"
    from ..corpus import store

    out = Path(args.out)
    kept = len(store.done_ids(out)) if out.is_dir() else 0
    resume = shlex.join(["slalom-xai", *words, *([] if "--resume" in words else ["--resume"])])
    return (
        f"slalom-xai explain: stopped (Ctrl-C); {kept} texts explained and kept in {str(out)!r} (finished chunks; "
        f"the chunk in progress is redone); to continue: {resume}"
    )
