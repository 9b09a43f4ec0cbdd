"""The ``slalom-xai`` command: the product's command line (``demo``, ``explain``,
``summarize``, ``report``), apart from the experiments harness, whose ``bench`` and ``paper``
commands it loads only when they are asked for.

- :mod:`.command`: the parser and :func:`main`, with one-line errors and warnings;
- :mod:`.demo`: ``slalom-xai demo``;
- :mod:`.corpus`: ``slalom-xai explain``, ``summarize`` and ``report`` (corpus runs);
- ``slalom-xai amortize`` / ``explain-amortized``: :mod:`.amortize`;
- :mod:`.format`: help that shows every default, and how option values are read.
"""

from .command import main

__all__ = ["main"]
