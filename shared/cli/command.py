"""The ``slalom-xai`` command.

``slalom-xai demo`` explains a few sentences with the embedded default model (the packaged
MiniLM with a small adapter trained for sentiment on IMDB reviews), prints a tokens × scores
table and writes a value-vs-importance scatter (PNG) and the explanation's page (HTML) per sentence.
``--model NAME_OR_PATH`` explains any Hugging Face sequence classifier instead.
``slalom-xai explain`` explains a whole corpus into a Parquet run and ``slalom-xai summarize``
draws its global picture, ``slalom-xai report`` writes its static site and ``slalom-xai export``
a dataset to share (:mod:`.corpus`).
The harness adds ``slalom-xai bench`` (SLALOM against the Captum / SHAP / shapiq baselines) and
``slalom-xai paper`` (the paper's experiments); they are registered from
:mod:`slalom_core.experiments` only when one of them is asked for, so explaining never
imports the harness.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from . import amortize, corpus, demo
from .common import STOPPED_STATUS, stopped_line

#: Commands of the harness (:mod:`slalom_core.experiments`): imported only when asked for.
#: The harness is not in the wheel (``pip install slalom-xai``); a clone installed for
#: development (``make install``, ``pip install -e .``) has it.
HARNESS = "slalom_core.experiments"
HARNESS_MISSING = (
    "the experiments harness is not installed: it ships with the repository, not the wheel; "
    "clone the repository and run `make install` there (or `pip install -e .` in the clone)"
)
HARNESS_COMMANDS = {
    "bench": "compare SLALOM with Captum / SHAP / shapiq baselines on a dataset (experiments harness)",
    "paper": "reproduce the paper's experiments (experiments harness)",
}
#: Each harness command's module, spelled out: the layout test reads imports by string too.
HARNESS_MODULES = {"bench": "slalom_core.experiments.bench_cli", "paper": "slalom_core.experiments.paper_cli"}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The ``slalom-xai`` parser. The harness's commands get their full parsers when
    ``command`` is one of them (or None: every command); otherwise a one-line entry each,
    so that ``slalom-xai explain ...`` never imports the harness.

    Example:
        >>> sorted(build_parser("demo")._subparsers._group_actions[0].choices)
        ['amortize', 'bench', 'demo', 'explain', 'explain-amortized', 'export', 'paper', 'refit', 'report', 'summarize']
    """
    parser = argparse.ArgumentParser(prog="slalom-xai", description="SLALOM explanations for text classifiers")
    sub = parser.add_subparsers(dest="command", required=True)
    demo.register(sub)
    corpus.register(sub)
    amortize.add_parser(sub, load_pair=corpus.load_pair)
    for name, what in HARNESS_COMMANDS.items():
        if (command is None or command == name) and _harness_installed():
            import importlib

            importlib.import_module(HARNESS_MODULES[name]).register(sub)
        else:
            sub.add_parser(name, help=what, add_help=False)
    return parser


def _harness_installed() -> bool:
    """Whether the harness can be imported (a development install), without importing it."""
    from importlib.util import find_spec

    try:
        return find_spec(HARNESS) is not None
    except ModuleNotFoundError:  # a finder that refuses the name outright
        return False


def _command(argv: Sequence[str] | None) -> str | None:
    """The command named in ``argv`` (its first word that is not an option)."""
    words = sys.argv[1:] if argv is None else list(argv)
    return next((w for w in words if not w.startswith("-")), "")


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
    """``slalom-xai <command> ...``: exit status 0, or 1 with a one-line error, or 130 when
    stopped by Ctrl-C (one line: what was kept, and for ``explain`` the command that resumes).

    Errors a user can fix (a missing file, a model that cannot be loaded, an invalid
    option found at run time) are printed as one line, not a traceback; set
    ``SLALOM_XAI_TRACEBACK=1`` to see the traceback.

    Example:
        >>> main(["demo", "--out", "demo_output"])  # doctest: +SKIP
        0
    """
    import os
    import warnings

    command = _command(argv)
    if command in HARNESS_COMMANDS and not _harness_installed():
        # Before parsing: ``slalom-xai bench --help`` must say this too, not "unrecognized".
        print(f"slalom-xai {command}: error: {HARNESS_MISSING}", file=sys.stderr)
        return 2
    args = build_parser(command).parse_args(argv)
    shown = warnings.showwarning
    warnings.showwarning = one_line_warning
    try:
        return args.func(args)
    except KeyboardInterrupt:
        # Ctrl-C is the user's own stop, not an error: one line (what was kept, how to go
        # on) instead of a traceback through transformers and torch.
        print(stopped_line(args, sys.argv[1:] if argv is None else list(argv)), file=sys.stderr)
        return STOPPED_STATUS
    except (ValueError, TypeError, OSError, RuntimeError) as err:
        if os.environ.get("SLALOM_XAI_TRACEBACK"):
            raise
        print(f"slalom-xai {args.command}: error: {type(err).__name__}: {' '.join(str(err).split())}", file=sys.stderr)
        return 1
    finally:
        warnings.showwarning = shown


if __name__ == "__main__":
    sys.exit(main())
