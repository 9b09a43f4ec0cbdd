"""The benchmark's inputs: the classifier, the texts it explains and the Naive-Bayes table
its NB metric compares with.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np
import torch

from .. import evaluation as ev
from ..bench_context import Instance
from ..data import read_jsonl

__all__ = ["load_model", "select_instances", "build_nb_table"]


def load_model(spec: str, *, device: str | None = None) -> tuple[torch.nn.Module, object, str]:
    """The classifier, its tokenizer and a display name, in eval mode, offline.

    Args:
        spec: a packaged demo model's name ("default" = the MiniLM with its trained IMDB
            adapter, "zeroshot"), otherwise a local folder written by ``save_pretrained``
            (never downloaded).
        device: move the model there.

    Example:
        >>> model, tok, name = load_model("default")  # doctest: +SKIP
    """
    from ...packaged.demo_model import load_model as load

    return load(spec, device=device, local_files_only=True)


def select_instances(
    rows: Sequence[dict],
    tokenizer: object,
    *,
    n: int,
    min_tokens: int = 1,
    max_tokens: int | None = None,
    seed: int = 0,
    attention_field: str = "human_attention",
) -> list[Instance]:
    """Pick ``n`` rows whose token count lies in ``[min_tokens, max_tokens]``, at random.

    Rows are visited in a seeded random order and the first ``n`` that fit are kept (then
    put back in file order), so the choice is reproducible and the file is tokenized only as
    far as needed. Rows with ``words`` and ``attention_field`` get per-token attention labels
    (each sub-token inherits its word's label; needs a fast tokenizer for the offsets).

    Example:
        >>> inst = select_instances(rows, tok, n=5, min_tokens=120, max_tokens=250)  # doctest: +SKIP
    """
    rng = np.random.default_rng(seed)
    chosen: list[tuple[int, dict, list[int], list | None]] = []
    fast = bool(getattr(tokenizer, "is_fast", False))
    for i in rng.permutation(len(rows)).tolist():
        row = rows[i]
        text = row.get("text")
        if not isinstance(text, str) or not text.strip():
            continue
        enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=fast, verbose=False)
        ids = list(enc["input_ids"])
        if not (min_tokens <= len(ids) <= (max_tokens if max_tokens is not None else len(ids))):
            continue
        chosen.append((i, row, ids, list(enc["offset_mapping"]) if fast else None))
        if len(chosen) == n:
            break
    chosen.sort(key=lambda c: c[0])
    out = []
    for k, (i, row, ids, offsets) in enumerate(chosen):
        attention = None
        if attention_field in row and "words" in row and offsets is not None:
            word_ids = ev.word_ids_from_offsets(offsets, row["text"], row["words"])
            attention = ev.word_labels_to_tokens(row[attention_field], word_ids)
        label = row.get("label")
        out.append(
            Instance(
                index=k,
                id=row.get("id", i),
                text=row["text"],
                label=None if label is None else int(label),
                token_ids=ids,
                tokens=list(tokenizer.convert_ids_to_tokens(ids)),
                attention=attention,
            )
        )
    return out


def build_nb_table(
    path: str | os.PathLike,
    tokenizer: object,
    *,
    alpha: float = 40.0,
    max_docs: int | None = None,
) -> dict[int, float]:
    """Naive-Bayes log-count ratios of the tokenizer's ids on a labelled JSON-lines file.

    Example:
        >>> nb = build_nb_table("../shared/data/imdb_train.jsonl.gz", tok)  # doctest: +SKIP
        >>> nb[tok.convert_tokens_to_ids("great")] > 0  # doctest: +SKIP
        True
    """
    rows = read_jsonl(path)
    if max_docs is not None:
        rows = rows[:max_docs]
    texts = [r["text"] for r in rows]
    labels = [int(r["label"]) for r in rows]
    docs = tokenizer(texts, add_special_tokens=False, verbose=False)["input_ids"]
    return ev.naive_bayes_log_ratios(docs, labels, alpha=alpha)
