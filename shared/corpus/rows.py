"""One chunk of a corpus: rows in, three Arrow tables out (positions, texts, failures).

Both engines (the local stream and Ray's actors) call :func:`explain_chunk`, so a text gets
the same scores whichever engine, chunk or worker explains it: its seed comes from its id
(:func:`text_seed`), never from its place in the run.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import warnings
from dataclasses import dataclass, field, fields

import numpy as np

from ..api import CallOptions, CheckedCall, ProgressOption, check_call, explain_checked
from ..explanation import SlalomExplanation
from ..models import ModelAdapter, Segmentation, redact_secrets
from ..saving import plain
from ..scores import STORED_SCORES
from .source import Row

__all__ = [
    "CorpusOptions",
    "options_record",
    "ChunkTables",
    "explain_chunk",
    "text_seed",
    "position_columns",
    "TEXT_COLUMNS",
]


#: Columns of the per-position table, in order.
def position_columns() -> tuple[str, ...]:
    """Columns of the per-position table, in order: every stored score of the score table
    (:data:`slalom_core.STORED_SCORES`, read at each call, so a registered score is kept too)."""
    return ("id", "explained_class", "position", "unit", "word", "token", "token_ids", *STORED_SCORES) + (
        "value_se",
        "importance_se",
    )


#: Columns of the per-text table, in order.
TEXT_COLUMNS = (
    "id",
    "explained_class",
    "gold_label",
    "text",
    "target",
    "class_names",
    "class_index",
    "n_positions",
    "n_units",
    "truncated_positions",
    "base_value",
    "model_output",
    "surrogate_output",
    "full_text_gap",
    "heldout_r2",
    "converged",
    "model_evaluations",
    "tokens_evaluated",
    "seconds",
    "model_seconds",
    "fit_seconds",
    "method",
    "n_samples",
    "seed",
    "output",
    "options",
    "diagnostics",
    "version",
    "ood",
)
FAILURE_COLUMNS = ("id", "error", "message")


def text_seed(seed: int, text_id: str) -> int:
    """The seed of one text: a stable hash of the run's seed and the text's id.

    blake2b, not ``hash()``: Python salts ``hash`` per process, and a text must get the same
    samples in every worker and every restart.

    Example:
        >>> text_seed(0, "review-17") == text_seed(0, "review-17")
        True
    """
    digest = hashlib.blake2b(f"{int(seed)}\x00{text_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & (2**31 - 1)


#: What every text of a run is explained with: the engine's one options object, with the
#: run's seed (an int: each text's is derived from it and its id, :func:`text_seed`) and its
#: ``truncate``. The name runs were written with before the engine had the object.
CorpusOptions = CallOptions


def options_record(opts: CallOptions) -> dict:
    """A run's options as its manifest and texts table record them (a resume compares them).

    Every option of :class:`~slalom_core.api.CallOptions` but ``gamma``, which a corpus run
    does not take (the record keeps the keys of the runs written before it existed).

    Example:
        >>> sorted(options_record(CallOptions(seed=0)))[:3]
        ['fit_options', 'granularity', 'method']
    """
    record = {f.name: getattr(opts, f.name) for f in fields(opts) if f.name != "gamma"}
    record["fit_options"] = dict(opts.fit_options)
    return record


@dataclass
class ChunkTables:
    """The three tables of one chunk, as column lists (turned into Arrow by the writer)."""

    positions: dict[str, list] = field(default_factory=lambda: {c: [] for c in position_columns()})
    texts: dict[str, list] = field(default_factory=lambda: {c: [] for c in TEXT_COLUMNS})
    failures: dict[str, list] = field(default_factory=lambda: {c: [] for c in FAILURE_COLUMNS})
    warnings: list[str] = field(default_factory=list)

    def fail(self, text_id: str, err: BaseException | str, kind: str | None = None) -> None:
        self.failures["id"].append(text_id)
        self.failures["error"].append(kind or type(err).__name__)
        # A model's error may quote a server's reply, and a gateway may echo the request's
        # credentials: the failures table is a file to share, so they are redacted.
        self.failures["message"].append(redact_secrets(str(err)))


def _segment(adapter: ModelAdapter, text: str, opts: CallOptions) -> tuple[Segmentation, int]:
    """The text's positions and how many were cut off (only with ``truncate``)."""
    return adapter.segment_within_length(text, opts.granularity, truncate=opts.truncate)


def _word_index(adapter: ModelAdapter, text: str, seg: Segmentation, opts: CallOptions) -> list[int | None]:
    """Index of the whitespace-level word each position belongs to (where the tokenizer says)."""
    if opts.granularity == "word":
        return list(range(len(seg.unit_ids)))
    tok = adapter.tokenizer
    if getattr(tok, "is_fast", False):
        word_ids = tok(text, add_special_tokens=False).word_ids()
        return list(word_ids[: len(seg.unit_ids)])
    return [None] * len(seg.unit_ids)


def _labels(exp: SlalomExplanation) -> list[tuple[str, int | None]]:
    """(label name, column) pairs that the explanation's arrays hold."""
    if exp.class_names is not None and exp.class_index is None:
        return [(str(name), k) for k, name in enumerate(exp.class_names)]
    if exp.class_names is not None:
        return [(str(exp.class_names[exp.class_index]), None)]
    return [("1" if exp.target is None else str(exp.target), None)]


def _pick(x, column: int | None):
    arr = np.asarray(x, dtype=np.float64)
    return arr[..., column] if column is not None and arr.ndim >= 1 and arr.shape[-1] > column else arr


def _add(tables: ChunkTables, item: Row, exp: SlalomExplanation, words, truncated, opts, version) -> None:
    text_id = item.id
    d = exp.diagnostics
    n = exp.n_positions
    scores = {name: np.asarray(exp.scores(name)) for name in STORED_SCORES}
    v_se, s_se = exp.value_se, exp.importance_se
    options = json.dumps(options_record(opts), sort_keys=True, default=str)
    # Everything CorpusRun.explanation needs to rebuild the explanation without the model.
    diagnostics = json.dumps({k: plain(v) for k, v in d.items()}, sort_keys=True, default=str)
    class_names = None if exp.class_names is None else json.dumps([str(c) for c in exp.class_names])
    for label, col in _labels(exp):
        pos = tables.positions
        pos["id"] += [text_id] * n
        pos["explained_class"] += [label] * n
        pos["position"] += list(range(n))
        pos["unit"] += np.asarray(exp.unit_index).astype(int).tolist()
        pos["word"] += words
        pos["token"] += list(exp.tokens)
        pos["token_ids"] += [list(t) for t in exp.token_ids]
        for name, arr in scores.items():
            # importance has no class axis; the others have one for a joint multi-class fit.
            pos[name] += (arr if name == "importance" else _pick(arr, col)).astype(np.float64).tolist()
        pos["value_se"] += [None] * n if v_se is None else _pick(v_se, col).tolist()
        pos["importance_se"] += [None] * n if s_se is None else np.asarray(s_se, dtype=np.float64).tolist()
        row = tables.texts
        row["id"].append(text_id)
        row["explained_class"].append(label)
        row["gold_label"].append(None if item.gold is None else str(item.gold))
        row["text"].append(item.text)
        row["target"].append(exp.target)
        row["class_names"].append(class_names)
        row["class_index"].append(exp.class_index)
        row["n_positions"].append(n)
        row["n_units"].append(int(d["n_units"]))
        row["truncated_positions"].append(int(truncated))
        for name in ("base_value", "model_output", "surrogate_output", "full_text_gap"):
            row[name].append(float(_pick(getattr(exp, name), col)))
        row["heldout_r2"].append(float(d.get("heldout_r2", np.nan)))
        conv = d.get("fit_converged")
        row["converged"].append(None if conv is None else bool(conv))
        row["model_evaluations"].append(int(d["model_evaluations"]))
        row["tokens_evaluated"].append(int(d["tokens_evaluated"]))
        row["seconds"].append(float(d["total_seconds"]))
        row["model_seconds"].append(float(d["model_seconds"]))
        row["fit_seconds"].append(float(d["fit_seconds"]))
        row["method"].append(exp.method)
        # An amortized explanation draws no samples: its n_samples and seed are null.
        row["n_samples"].append(None if d.get("n_samples") is None else int(d["n_samples"]))
        row["seed"].append(None if d.get("seed") is None else int(d["seed"]))
        row["output"].append(str(d.get("output")))
        row["options"].append(options)
        row["diagnostics"].append(diagnostics)
        row["version"].append(version)
        # The out-of-distribution check of an amortized explanation (null for a per-text fit).
        row["ood"].append(None if d.get("ood") is None else json.dumps(plain(d["ood"]), sort_keys=True, default=str))


def explain_chunk(
    adapter: ModelAdapter,
    rows: list[Row],
    opts: CallOptions,
    *,
    call: CheckedCall | None = None,
    batch_size: int | None = None,
    version: str = "",
    explainer: object | None = None,
    show_progress: ProgressOption = False,
) -> ChunkTables:
    """Explain one chunk of rows; every row ends in the texts table or the failures table.

    Rows with a bad text (not a str, empty, longer than the model accepts without
    ``truncate``) fail alone, before any model call. The rest are
    explained in one :func:`~slalom_core.api.explain_checked` call (shared model batches); if
    that call fails, each text is retried alone so that one bad text cannot take its chunk
    down with it.

    Args:
        adapter: the model's adapter (segments the texts; explains them without ``explainer``).
        rows: the chunk's rows.
        opts: the run's options (as recorded per text).
        call: ``opts`` checked (:func:`~slalom_core.check_call`), once for the run; None:
            checked here (not used with ``explainer``).
        batch_size: texts per model batch (default: the adapter's).
        version: the library version recorded per text.
        explainer: an amortized explainer (anything with ``explain_batch(segmentations)``)
            that explains the texts instead of per-text fits; its ``adapter`` segments.
        show_progress: the engine's progress bar for the chunk's fits (not used with
            ``explainer``).

    Returns:
        The chunk's tables.

    Example:
        >>> tables = explain_chunk(adapter, rows, CallOptions(n_samples=300, seed=0))  # doctest: +SKIP
    """
    tables = ChunkTables()
    todo: list[tuple[Row, Segmentation, int, list]] = []
    for row in rows:
        if not isinstance(row.text, str):
            tables.fail(row.id, f"the text is {type(row.text).__name__}, not str", "TypeError")
            continue
        try:
            seg, truncated = _segment(adapter, row.text, opts)
            words = _word_index(adapter, row.text, seg, opts)
        except (ValueError, TypeError) as err:
            tables.fail(row.id, err)
            continue
        todo.append((row, seg, truncated, words))
    if not todo:
        return tables
    if explainer is None and call is None:
        call = check_call(opts)
    how = _ChunkCall(adapter, opts.seed, call, explainer, batch_size, show_progress)
    try:
        done = list(zip(todo, _explain_items(how, todo, tables)))
    except Exception:
        done = []
        for item in todo:
            try:
                done.append((item, _explain_items(how, [item], tables)[0]))
            except Exception as err:  # noqa: BLE001 - recorded per text, the run goes on
                tables.fail(item[0].id, err)
    for (row, _, truncated, words), exp in done:
        _add(tables, row, exp, words, truncated, opts, version)
    return tables


@dataclass(frozen=True)
class _ChunkCall:
    """How a chunk's texts are explained: per-text fits of the run's checked call, or its explainer."""

    adapter: ModelAdapter
    seed: int
    call: CheckedCall | None
    explainer: object | None
    batch_size: int | None
    show_progress: ProgressOption


def _explain_items(how: _ChunkCall, items: list, tables: ChunkTables) -> list[SlalomExplanation]:
    """The explanations of some of a chunk's segmented texts, in one call; their warnings in ``tables``."""
    segs = [seg for _, seg, _, _ in items]
    with warnings.catch_warnings(record=True) as caught:
        # Fit warnings name texts by their place in the chunk; the texts table keeps
        # what they say (convergence, held-out R², gap, OOD check) per id instead.
        warnings.simplefilter("always")
        if how.explainer is not None:
            exps = how.explainer.explain_batch(segs)
        else:
            # Each text's seed from its id; the texts come cut to the model's length (_segment).
            seeds = tuple(text_seed(how.seed, row.id) for row, _, _, _ in items)
            call = dataclasses.replace(how.call, seed=seeds, truncate=False)
            exps = explain_checked(
                how.adapter, segs, None, call, batch_size=how.batch_size, show_progress=how.show_progress
            )
    tables.warnings.extend(f"{w.category.__name__}: {w.message}" for w in caught)
    return exps
