"""A corpus run on disk, read back: :class:`CorpusRun` (tables, summaries, explanations)."""

from __future__ import annotations

from pathlib import Path

from ..files import read_manifest
from . import store

__all__ = ["CorpusRun"]


class CorpusRun:
    """A corpus run on disk (see :mod:`slalom_core.corpus.store` for the layout).

    Example:
        >>> run = CorpusRun("runs/imdb")  # doctest: +SKIP
        >>> run.texts()[["id", "model_output", "full_text_gap"]].head()  # doctest: +SKIP
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.manifest: dict = read_manifest(self.path)

    def positions(self):
        """One row per (text id, explained class, position): token, unit, word index, the
        five scores and their SEs."""
        return store.read_table(self.path, "positions")

    def texts(self):
        """One row per (text id, explained class): the gold label and text from the data,
        base value, outputs, gap, held-out R², cost, options and diagnostics."""
        return store.read_table(self.path, "texts")

    def failures(self):
        """One row per text that could not be explained: id, error class, message."""
        return store.read_table(self.path, "failures")

    def quality(self):
        """One row per text of an amortized pipeline's run (``explain --amortized auto``), or
        None for any other run: whether the text was in the label set or audited, the audit's
        Spearman of value and importance against its per-text fit, the out-of-distribution
        check, and ``flagged`` with ``flag_reason`` (texts its head should not be trusted on).

        Example:
            >>> q = CorpusRun("runs/imdb").quality()  # doctest: +SKIP
            >>> q[q.flagged].id.tolist()  # doctest: +SKIP
        """
        path = self.path / store.QUALITY
        if not path.exists():
            return None
        import pandas as pd

        return pd.read_parquet(path)

    def parts(self, table: str, keys: list[str] | None = None):
        """One table, one finished chunk at a time: ``(chunk key, DataFrame)`` pairs, so that
        a reader of a large run (the report, an export) holds one chunk in memory.

        Args:
            table: "texts", "positions" or "failures".
            keys: only these chunks (default: every finished chunk, in the run's order).

        Example:
            >>> for key, texts in CorpusRun("runs/imdb").parts("texts"):  # doctest: +SKIP
            ...     print(key, len(texts))
        """
        return store.read_parts(self.path, table, keys)

    def part(self, table: str, key: str, hint: str = ""):
        """One finished chunk's part of ``table``; a missing part is named, never skipped.

        Args:
            table: "texts", "positions" or "failures".
            key: the chunk's key (as :meth:`parts` gives it).
            hint: what else the caller may do, added to the error (", or ...").

        Raises:
            FileNotFoundError: the part is missing (deleted by hand, a partial copy).

        Example:
            >>> CorpusRun("runs/imdb").part("positions", key)  # doctest: +SKIP
        """
        for _, frame in self.parts(table, [key]):
            return frame
        raise FileNotFoundError(
            f"{self.path / table / f'part-{key}.parquet'} is missing: the run's texts part {key} has no "
            f"{table} (re-run `slalom-xai explain --resume`{hint})"
        )

    def explanation(self, text_id: str, *, explained_class: str | None = None):
        """A stored text's :class:`~slalom_core.SlalomExplanation`, rebuilt without the model.

        Tokens, scores, standard errors, base value, model output and diagnostics are the
        ones the run stored, so the explanation equals the one the run computed and every
        plot of :mod:`slalom_core.plots` draws it. Only the chunk holding the text is read.

        Args:
            text_id: the text's id (as in the texts table; ids are strings).
            explained_class: for a run that explained several classes per text one by one
                (multi-label), which one; a joint multi-class fit comes back whole.

        Returns:
            The text's explanation.

        Raises:
            KeyError: the run holds no explanation of this id (the message says whether
                it failed, and why).

        Example:
            >>> exp = CorpusRun("runs/imdb").explanation("17")  # doctest: +SKIP
            >>> slalom_core.plots.plot_scatter(exp)  # doctest: +SKIP
        """
        from .restore import explanation_from_tables

        text_id = str(text_id)
        keys = [k for k, m in store.markers(self.path).items() if text_id in m["ids"]]
        for key, texts in store.read_parts(self.path, "texts", keys):
            texts = texts[texts["id"] == text_id]
            if len(texts):
                positions = next(store.read_parts(self.path, "positions", [key]))[1]
                positions = positions[positions["id"] == text_id]
                return explanation_from_tables(positions, texts, explained_class=explained_class)
        for _, failed in store.read_parts(self.path, "failures", keys):
            failed = failed[failed["id"] == text_id]
            if len(failed):
                row = failed.iloc[0]
                raise KeyError(f"text {text_id!r} could not be explained ({row['error']}: {row['message']})")
        raise KeyError(f"the run holds no text {text_id!r}")

    @property
    def n_done(self) -> int:
        return sum(len(m["ids"]) for m in store.markers(self.path).values())

    @property
    def complete(self) -> bool:
        """Every input row is accounted for (explained or failed), every finished chunk's
        tables still on disk."""
        return self.n_done == self.manifest["input"]["n_rows"] and not store.missing_parts(self.path)

    def __repr__(self) -> str:
        return f"CorpusRun({str(self.path)!r}, rows={self.manifest['input']['n_rows']}, done={self.n_done})"
