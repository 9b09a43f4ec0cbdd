"""Our own calls into ``transformers`` without its chatter, and its settings left as found.

Loading the packaged models prints a "Loading weights" bar per model, and a pipeline or
auto class can log long lists (e.g. every class it supports). Those are provoked by our
call, not by anything the user did, so :func:`quiet_transformers` silences them for the
length of our call only: transformers' verbosity and progress-bar switch are restored
afterwards, whatever they were (the user's own ``set_verbosity_info()`` stays).

Example:
    >>> with quiet_transformers():
    ...     pass  # from_pretrained(...) here prints no bar
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["quiet_transformers"]


@contextmanager
def quiet_transformers() -> Iterator[None]:
    """transformers' progress bars off and its logging at errors only, inside the block.

    Example:
        >>> from transformers.utils import logging as hf_logging
        >>> before = hf_logging.get_verbosity()
        >>> with quiet_transformers():
        ...     hf_logging.is_progress_bar_enabled()
        False
        >>> hf_logging.get_verbosity() == before
        True
    """
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:  # no transformers: nothing to quieten
        yield
        return
    bars, level = hf_logging.is_progress_bar_enabled(), hf_logging.get_verbosity()
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)
        if bars:
            hf_logging.enable_progress_bar()
