"""Explaining a whole corpus: streamed, resumable, on one machine or on a Ray cluster.

:func:`explain_corpus` writes a Parquet dataset (one row per position, per text and per
failed text) chunk by chunk; :class:`CorpusRun` reads it back; :mod:`.summary` turns a run
into a global picture (per-word aggregates, a global SLALOM, a plot). Needs ``pyarrow`` and
``pandas`` (``pip install slalom-xai[corpus]``), and ``ray[data]`` for ``engine="ray"``.

Example:
    >>> from slalom_core.corpus import explain_corpus, word_summary
    >>> run = explain_corpus(model, "imdb_test.jsonl", "runs/imdb", tokenizer=tok, limit=200)  # doctest: +SKIP
    >>> word_summary(run).head(10)  # doctest: +SKIP
"""

from .export import EXPORTERS, export_dataset, export_run
from .loading import ModelLoader
from .rows import CorpusOptions, text_seed
from .run import ENGINES, explain_corpus
from .source import CorpusSource
from .stored import CorpusRun
from .summary import cohort_matrix, compare_global_local, global_slalom, plot_words, top_words, word_summary

__all__ = [
    "explain_corpus",
    "CorpusRun",
    "export_run",
    "export_dataset",
    "EXPORTERS",
    "ModelLoader",
    "CorpusSource",
    "CorpusOptions",
    "ENGINES",
    "text_seed",
    "word_summary",
    "top_words",
    "cohort_matrix",
    "global_slalom",
    "compare_global_local",
    "plot_words",
]
