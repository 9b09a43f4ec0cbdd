"""How the ``slalom-xai`` commands show their help: every option with its default."""

from __future__ import annotations

import argparse

__all__ = ["DefaultsFormatter", "subcommand"]


class DefaultsFormatter(argparse.HelpFormatter):
    """argparse's help with ``(default: X)`` after each option that has a default.

    Unlike ``argparse.ArgumentDefaultsHelpFormatter`` it says nothing where the help
    already names the default in words, or where there is none to name (None, an empty
    list, an unset flag), so that no line reads "(default: None)".

    Example:
        >>> p = argparse.ArgumentParser(prog="x", formatter_class=DefaultsFormatter)
        >>> _ = p.add_argument("--n", type=int, default=3, help="how many")
        >>> "how many (default: 3)" in p.format_help()
        True
    """

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if (
            "default" in text
            or default is None
            or default is False
            or default == []
            or default is argparse.SUPPRESS
            or action.option_strings == []
        ):
            return text
        return f"{text} (default: %(default)s)"


def subcommand(sub, name: str, help: str, description: str | None = None) -> argparse.ArgumentParser:
    """A ``slalom-xai NAME`` parser in ``sub`` (what ``add_subparsers()`` returned), its help
    showing every default (:class:`DefaultsFormatter`).

    Example:
        >>> parser = argparse.ArgumentParser(prog="slalom-xai")
        >>> p = subcommand(parser.add_subparsers(dest="command"), "hello", "say hello")
        >>> p.prog
        'slalom-xai hello'
    """
    return sub.add_parser(name, help=help, description=description, formatter_class=DefaultsFormatter)


def option_value(text: str) -> object:
    """A command-line option value as the engine wants it: an int, a float, a bool, None,
    or the text itself (the one reading of ``KEY=VALUE`` options, shared by the commands).

    Example:
        >>> option_value("3"), option_value("0.5"), option_value("False"), option_value("lbfgs")
        (3, 0.5, False, 'lbfgs')
    """
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return {"true": True, "false": False, "none": None}.get(text.lower(), text)
