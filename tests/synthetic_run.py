"""A corpus run of N texts written without a model, fast: for scale tests of its readers.

``synthetic_run(path, n)`` writes a folder that :class:`slalom_core.corpus.CorpusRun` reads
like any run ``slalom-xai explain`` leaves: manifest, the three tables per chunk through the
store's own :func:`~slalom_core.corpus.store.write_chunk`, ``done`` markers. Each text is a
real :class:`~slalom_core.SlalomExplanation` made from a :class:`~slalom_core.SlalomSurrogate`
with random values and importances, so the stored scores (lin, removal, contribution) are the
library's own formulas, and a text's page rebuilds from the tables as a real one does.

The texts are 50 to 400 tokens drawn (Zipf-like) from a vocabulary of about 5,000 made-up
words, some split into a stem and a "##" continuation piece as an uncased WordPiece tokenizer
gives them. Each word has a fixed effect, so the word summary has a signal to find.

``amortized=True`` writes an amortized run (method "amortized", no samples, the OOD check in
the texts table's ``ood`` column); ``quality=True`` adds the amortized pipeline's
``quality.parquet`` and ``manifest["auto"]`` (docs: the issue-43 contract).

    >>> run = synthetic_run(tmp_path / "run", 1000)  # doctest: +SKIP
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
from slalom_core import SlalomExplanation, SlalomSurrogate
from slalom_core.amortized.audit import ood_check
from slalom_core.corpus import CorpusRun, store
from slalom_core.corpus.rows import ChunkTables
from slalom_core.scores import STORED_SCORES

_ONSETS = ("b", "br", "c", "ch", "d", "dr", "f", "g", "gr", "h", "j", "k", "l", "m", "n", "p", "pl", "r", "s", "st")
_ONSETS += ("t", "tr", "v", "w", "z", "sh", "th", "cl", "fl", "sp")
_VOWELS = ("a", "e", "i", "o", "u", "ea", "ai", "ou")
_CODAS = ("", "n", "r", "l", "s", "t", "m", "nd", "st", "ck")
#: Continuation pieces, as WordPiece writes them.
PIECES = ("##ing", "##ed", "##ly", "##s", "##er", "##ness", "##ful", "##less")
PUNCTUATION = (".", ",", "!", "?")
#: Words of known sign: a test can look for them in the word summary.
POSITIVE = ("wonderful", "great", "brilliant")
NEGATIVE = ("awful", "boring", "dreadful")


def vocabulary(size: int = 5000, seed: int = 0) -> list[str]:
    """``size`` distinct tokens: punctuation, the signed words, continuation pieces, made-up words.

    Example:
        >>> len(vocabulary(100)), vocabulary(100)[:2]
        (100, ['.', ','])
    """
    rng = random.Random(seed)  # the stdlib's: numpy's choice() converts the tuples at every draw
    words = [*PUNCTUATION, *POSITIVE, *NEGATIVE, *PIECES]
    seen = set(words)
    while len(words) < size:
        n_syl = rng.randint(1, 3)
        w = "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) for _ in range(n_syl)) + rng.choice(_CODAS)
        if w not in seen:
            seen.add(w)
            words.append(w)
    return words


class _Corpus:
    """The vocabulary, its draw probabilities and each token's fixed effect on the output."""

    def __init__(self, size: int, seed: int) -> None:
        self.vocab = np.array(vocabulary(size, seed), dtype=object)
        rng = np.random.default_rng(seed + 1)
        rank = np.arange(1, size + 1, dtype=np.float64)
        self.p = 1.0 / rank**1.05  # Zipf-like: punctuation and the first words are frequent
        self.cdf = np.cumsum(self.p / self.p.sum())
        self.effect = rng.normal(0.0, 0.3, size)
        n_sign = len(PUNCTUATION)
        self.effect[n_sign : n_sign + len(POSITIVE)] = 2.0
        self.effect[n_sign + len(POSITIVE) : n_sign + len(POSITIVE) + len(NEGATIVE)] = -2.0
        self.is_piece = np.array([str(w).startswith("##") for w in self.vocab])
        self.is_piece[0] = False


def _explanation(corpus: _Corpus, rng, n: int, *, amortized: bool) -> tuple[SlalomExplanation, str, list, dict]:
    draw = np.minimum(np.searchsorted(corpus.cdf, rng.random(n)), len(corpus.vocab) - 1)
    if corpus.is_piece[draw[0]]:
        draw[0] = len(PUNCTUATION)  # a text does not start with a continuation piece
    # Units in order of first occurrence, as the engine numbers them.
    sorted_ids, first, inverse = np.unique(draw, return_index=True, return_inverse=True)
    order = np.argsort(first)
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    unit, uniq = rank[inverse], sorted_ids[order]
    value = corpus.effect[uniq] + rng.normal(0.0, 0.5, len(uniq))
    importance = rng.normal(0.0, 1.0, len(uniq))
    tokens = corpus.vocab[draw].tolist()
    text = " ".join(tokens).replace(" ##", "")  # "##" pieces glued to the word before
    words = np.cumsum(~corpus.is_piece[draw]) - 1
    surrogate = SlalomSurrogate(value, importance)
    base = -0.2
    exp = SlalomExplanation(
        tokens=tokens,
        token_ids=[(1000 + int(t),) for t in draw],
        unit_index=unit,
        surrogate=surrogate,
        method="amortized" if amortized else "hybrid",
        model_output=0.0,
        base_value=base,
        unit_value_se=None if amortized else np.abs(rng.normal(0.2, 0.05, len(uniq))),
        unit_importance_se=None if amortized else np.abs(rng.normal(0.3, 0.05, len(uniq))),
        text=text,
    )
    scores = {name: np.asarray(exp.scores(name), dtype=np.float64) for name in STORED_SCORES}
    # The model's output: the surrogate's (base + contributions, as exp.surrogate_output) and noise.
    exp.model_output = base + float(scores["contribution"].sum()) + float(rng.normal(0.0, 0.4))
    return exp, text, words, scores


def _diagnostics(exp: SlalomExplanation, rng, *, amortized: bool, ood: dict | None, surrogate_output: float) -> dict:
    n, n_units = exp.n_positions, int(exp.surrogate.n_units)
    d = {
        "method": exp.method,
        "n_positions": n,
        "n_units": n_units,
        "n_outputs": 2,
        "class_names": ["negative", "positive"],
        "output": "log-odds",
        "model_output": float(exp.model_output),
        "surrogate_output": surrogate_output,
        "full_text_gap": float(exp.model_output) - surrogate_output,
    }
    if amortized:
        d.update(model_evaluations=2, tokens_evaluated=n + 4, n_samples=None, seed=None, ood=ood)
        d.update(total_seconds=0.002, model_seconds=0.0015, fit_seconds=0.0005)
    else:
        d.update(model_evaluations=1000, tokens_evaluated=1000 * n // 2, n_samples=1000, seed=0)
        d.update(heldout_r2=float(rng.beta(5, 2)), fit_converged=True)
        d.update(total_seconds=1.2, model_seconds=1.0, fit_seconds=0.2)
    return d


def _chunk(corpus: _Corpus, ids: list[str], rng, *, amortized: bool, lengths: tuple[int, int]) -> ChunkTables:
    """One chunk's tables, columns built as arrays (the store writes them as given)."""
    import pyarrow as pa

    tables = ChunkTables()
    pos: dict[str, list] = {c: [] for c in ("unit", "word", "token", "token_ids", *STORED_SCORES)}
    pos.update(value_se=[], importance_se=[], n=[])
    t = tables.texts
    train_range = [60, 380]  # an amortized head's training lengths: shorter and longer texts are flagged
    vocab_ids = set(range(1000, 1000 + int(0.97 * len(corpus.vocab))))
    for text_id in ids:
        n = int(rng.integers(lengths[0], lengths[1] + 1))
        exp, text, words, scores = _explanation(corpus, rng, n, amortized=amortized)
        surrogate_output = float(exp.base_value) + float(scores["contribution"].sum())
        ood = None
        if amortized:
            ids_flat = [u[0] for u in exp.token_ids]
            ood = ood_check(n, ids_flat, {"length_range": train_range, "vocabulary": vocab_ids}, max_unseen=0.02)
        d = _diagnostics(exp, rng, amortized=amortized, ood=ood, surrogate_output=surrogate_output)
        pos["n"].append(n)
        pos["unit"].append(np.asarray(exp.unit_index))
        pos["word"].append(np.asarray(words))
        pos["token"] += exp.tokens
        pos["token_ids"] += [u[0] for u in exp.token_ids]
        for name in STORED_SCORES:
            pos[name].append(scores[name])
        pos["value_se"].append(np.full(n, np.nan) if exp.value_se is None else np.asarray(exp.value_se))
        pos["importance_se"].append(np.full(n, np.nan) if exp.importance_se is None else np.asarray(exp.importance_se))
        gold = str(int(rng.random() < 0.5))
        for name, value in dict(
            id=text_id, explained_class="1", gold_label=gold, text=text, target=None, class_names=None,
            class_index=None, n_positions=n, n_units=d["n_units"], truncated_positions=0,
            base_value=float(exp.base_value), model_output=float(exp.model_output),
            surrogate_output=surrogate_output, full_text_gap=d["full_text_gap"],
            heldout_r2=d.get("heldout_r2", float("nan")), converged=d.get("fit_converged"),
            model_evaluations=d["model_evaluations"], tokens_evaluated=d["tokens_evaluated"],
            seconds=d["total_seconds"], model_seconds=d["model_seconds"], fit_seconds=d["fit_seconds"],
            method=exp.method, n_samples=d["n_samples"], seed=d["seed"], output="log-odds",
            options=json.dumps({"method": exp.method, "granularity": "token"}), diagnostics=json.dumps(d),
            version="synthetic", ood=None if ood is None else json.dumps(ood, sort_keys=True),
        ).items():  # fmt: skip
            t[name].append(value)
    counts = np.asarray(pos["n"])
    total = int(counts.sum())
    # Numeric columns as numpy arrays and the list column as one Arrow array: a chunk of
    # 60,000 positions is written in milliseconds, not as 60,000 Python lists.
    p = tables.positions
    p["id"] = np.repeat(np.asarray(ids, dtype=object), counts)
    p["explained_class"] = np.full(total, "1", dtype=object)
    p["position"] = np.concatenate([np.arange(c) for c in counts])
    for name in ("unit", "word", *STORED_SCORES, "value_se", "importance_se"):
        p[name] = np.concatenate(pos[name])
    p["token"] = np.asarray(pos["token"], dtype=object)
    p["token_ids"] = pa.ListArray.from_arrays(
        pa.array(np.arange(total + 1), pa.int32()), pa.array(pos["token_ids"], pa.int64())
    )
    return tables


def _quality(run: Path, texts, rng, *, label_share: float, audit_share: float, poor_below: float):
    """The amortized pipeline's per-text table (contract of issue 43) and its manifest record."""
    import pandas as pd

    n = len(texts)
    ood_why = [json.loads(s).get("warning") if isinstance(s, str) else None for s in texts["ood"]]
    in_label = rng.random(n) < label_share
    audited = (~in_label) & (rng.random(n) < audit_share)
    value_rho = np.where(audited, np.clip(rng.normal(0.82, 0.12, n), -1, 1), np.nan)
    imp_rho = np.where(audited, np.clip(rng.normal(0.6, 0.15, n), -1, 1), np.nan)
    poor = audited & (value_rho < poor_below)
    ood = np.array([w is not None for w in ood_why])
    reasons = []
    for i in range(n):
        why = []
        if ood[i]:
            why.append(f"out of distribution: {ood_why[i]}")
        if poor[i]:
            why.append(f"audit: value Spearman {value_rho[i]:.2f} < {poor_below}")
        reasons.append("; ".join(why))
    table = pd.DataFrame(
        {
            "id": texts["id"].astype(str).to_numpy(),
            "in_label_set": in_label,
            "audited": audited,
            "audit_value_spearman": value_rho,
            "audit_importance_spearman": imp_rho,
            "ood": ood,
            "poor_audit": poor,
            "flagged": ood | poor,
            "flag_reason": reasons,
        }
    )
    table.to_parquet(run / store.QUALITY, index=False)

    def stats(x):
        x = x[~np.isnan(x)]
        return {"mean": float(x.mean()), "median": float(np.median(x)), "p10": float(np.quantile(x, 0.1))}

    return {
        "labels": {"run": "auto/labels", "n_texts": int(in_label.sum()), "method": "hybrid", "n_samples": 1000,
                   "chosen_by": "synthetic"},
        "head": {"folder": "auto/head", "digest": "synthetic"},
        "audit": {"run": "auto/audit", "share": int(audited.sum()) / n, "n_texts": n, "share_asked": audit_share,
                  "n_audited": int(audited.sum()),
                  "value_spearman": stats(value_rho), "importance_spearman": stats(imp_rho),
                  "poor_below": poor_below, "n_poor": int(poor.sum())},
        "flags": {"n_ood": int(ood.sum()), "n_poor_audit": int(poor.sum()), "n_flagged": int((ood | poor).sum())},
        "stages": {s: {"seconds": 1.0, "texts": n} for s in ("labels", "head", "explain", "audit")},
    }  # fmt: skip


def synthetic_run(
    path: str | Path,
    n: int,
    *,
    seed: int = 0,
    chunk_size: int = 500,
    vocab_size: int = 5000,
    lengths: tuple[int, int] = (50, 400),
    amortized: bool = False,
    quality: bool = False,
    failures: int = 0,
) -> CorpusRun:
    """Write a run of ``n`` texts (ids "0" .. "n-1") into the new folder ``path``; no model.

    Args:
        path: the run's folder (must not hold a run).
        n: how many texts.
        seed: everything drawn follows from it.
        chunk_size: texts per chunk (a run's parts).
        vocab_size: tokens in the vocabulary.
        lengths: the fewest and most tokens of a text.
        amortized: an amortized run (see the module's docstring).
        quality: also the amortized pipeline's quality table and ``manifest["auto"]``
            (implies ``amortized``).
        failures: this many more ids ("fail-0", ...) fail, in a chunk of their own.

    Returns:
        The run.
    """
    path = Path(path)
    amortized = amortized or quality
    path.mkdir(parents=True)
    corpus = _Corpus(vocab_size, seed)
    rng = np.random.default_rng(seed + 2)
    method = "amortized" if amortized else "hybrid"
    manifest = {
        "version": "synthetic",
        "input": {"data": "/data/synthetic.jsonl", "text_column": "text", "id_column": "id",
                  "label_column": "label", "limit": None, "n_rows": n + failures},
        "options": {"method": method, "n_samples": None if amortized else 1000, "seed": seed, "target": None,
                    "output": "auto", "reference": "empty", "multiclass": "joint", "granularity": "token",
                    "truncate": True, "fit_options": {}},
        "model": {"name": "synthetic-model", "class": "tests.synthetic_run", "digest": "0" * 16,
                  "class_names": ["negative", "positive"]},
    }  # fmt: skip
    if amortized:
        manifest["amortized"] = {
            "folder": None,
            "digest": "synthetic",
            "trained_on": {"method": "hybrid", "n_samples": 1000, "output": "log-odds", "run": "auto/labels"},
        }
    (path / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    for start in range(0, n, chunk_size):
        ids = [str(i) for i in range(start, min(start + chunk_size, n))]
        tables = _chunk(corpus, ids, rng, amortized=amortized, lengths=lengths)
        store.write_chunk(path, ids, tables, ["synthetic"] * len(ids))
    if failures:
        tables = ChunkTables()
        ids = [f"fail-{i}" for i in range(failures)]
        for i in ids:
            tables.fail(i, "the text is float, not str", "TypeError")
        store.write_chunk(path, ids, tables, ["synthetic"] * len(ids))
    if quality:
        texts = CorpusRun(path).texts()[["id", "ood"]]
        manifest["auto"] = _quality(path, texts, rng, label_share=0.04, audit_share=0.05, poor_below=0.7)
        (path / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    return CorpusRun(path)


def index_rows(site: Path) -> list[list]:
    """The rows a report's index loads (every ``data/rows-*.js`` file's pushed array, in order)."""
    rows = []
    for f in sorted((site / "data").glob("rows-*.js")):
        text = f.read_text(encoding="utf-8")
        rows += json.loads(text[text.index("push(...") + len("push(...") : text.rindex(");")])
    return rows
