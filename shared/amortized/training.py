"""Training labels from a corpus run, and the head's training loop.

A run's ``positions`` table holds, per position, the fitted value and importance and their
standard errors; its manifest says which model (by fingerprint), method and output reading
made them. :func:`read_labels` turns a run into per-unit targets (a repeated token's rows are
one unit, as in the fit) with inverse-variance weights, after refusing a run the explainer
cannot learn from. :func:`train_head` fits the head to them (noisy labels are fine: the
squared loss averages their noise out, as in stochastic amortization).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import torch

from ..corpus import CorpusRun, store
from ..link import OUTPUT_KINDS
from .head import EPOCHS, HIDDEN, AmortizedHead, pool_units

__all__ = ["RunLabels", "read_labels", "train_head", "MIN_TEXTS", "MEASURED_MIN_TEXTS", "SE_FLOOR"]

#: Fewer explained texts than this is too small a run to train on.
MIN_TEXTS = 8
#: The fewest training texts measured in docs/amortized.md ("How many labels": a head on 50
#: IMDB reviews agreed with 1,000-sample per-text fits at value Spearman 0.90); fewer train
#: with an ``AmortizedFewTextsWarning``. (It was the default label set's 200, so that one
#: failed label fit of a default pipeline warned of an untested head.)
MEASURED_MIN_TEXTS = 50
#: Standard errors below this are read as this: no single label may dominate the loss.
SE_FLOOR = 0.05


@dataclass
class RunLabels:
    """Per-text training targets read from a run.

    Attributes:
        ids: text ids.
        sequences: each text's token ids (one per position, no special tokens).
        unit_index: per text, (n,) each position's unique unit.
        value, importance: per text, (U,) the fit's targets per unit (importance mean-zero).
        value_weight, importance_weight: per text, (U,) inverse-variance weights.
        meta: what made the run: method, n_samples, output reading, model fingerprint, path and
            a digest of its finished chunks (:func:`~slalom_core.corpus.store.content_digest`).
    """

    ids: list[str]
    sequences: list[list[int]]
    unit_index: list[np.ndarray]
    value: list[np.ndarray]
    importance: list[np.ndarray]
    value_weight: list[np.ndarray]
    importance_weight: list[np.ndarray]
    meta: dict = field(default_factory=dict)


def _weights(se: np.ndarray) -> np.ndarray:
    se = np.where(np.isfinite(se), se, np.nan)
    w = 1.0 / np.maximum(se, SE_FLOOR) ** 2
    return np.where(np.isnan(w), 1.0 / SE_FLOOR**2, w)  # no SE stored: as sure as the surest


def _refuse(run: CorpusRun, why: str) -> ValueError:
    return ValueError(f"cannot train an amortized explainer on {str(run.path)!r}: {why}")


def _check_run(run: CorpusRun, digest: str, expect: dict) -> dict:
    """The run's method, budget and output reading, after refusing what cannot be learned."""
    opts, recorded = run.manifest["options"], run.manifest.get("model")
    if not isinstance(recorded, dict) or recorded.get("digest") != digest:
        said = recorded.get("digest") if isinstance(recorded, dict) else recorded
        name = recorded.get("name") if isinstance(recorded, dict) else None
        raise _refuse(
            run,
            f"it was explained with another model or tokenizer (the run's {name!r}, fingerprint {said}; this "
            f"explainer's fingerprint {digest}): train with the run's own model, or make a run with this one",
        )
    if opts.get("method") == "amortized":  # the explainer's METHOD (explainer.py imports this module)
        raise _refuse(
            run,
            "its explanations were predicted by an amortized explainer, not fitted per text: train on a run of "
            "per-text fits",
        )
    for key, want in (("granularity", "token"), ("reference", "empty"), ("target", None)):
        if opts.get(key) != want:
            raise _refuse(run, f"its {key} is {opts.get(key)!r}; an amortized explainer learns {key}={want!r} runs")
    texts = run.texts()
    if len(texts) and texts["id"].duplicated().any():
        raise _refuse(run, "it explains several labels per text (a multi-class model); only binary models")
    if len(texts) < expect.get("min_texts", MIN_TEXTS):
        raise _refuse(
            run,
            f"it holds {len(texts)} explained texts, too few to train on (at least {expect.get('min_texts', MIN_TEXTS)})",
        )
    kinds = sorted({str(o).split(" ")[0] for o in texts["output"]})
    if len(kinds) != 1 or kinds[0] not in OUTPUT_KINDS:
        raise _refuse(run, f"its texts were read as different outputs ({kinds})")
    meta = {
        "method": opts["method"],
        "n_samples": int(opts["n_samples"]),
        "output": kinds[0],
        "fit_options": opts.get("fit_options", {}),
        "model": recorded,
        "run": str(run.path),
        # Which finished chunks, as written (a pipeline retrains when a label chunk is redone).
        "chunks": store.content_digest(run.path),
    }
    for key in ("method", "output"):
        if expect.get(key) is not None and expect[key] != meta[key]:
            raise _refuse(
                run,
                f"its {key} is {meta[key]!r}, this explainer's is {expect[key]!r} (an explainer learns one "
                f"{key}); make a run with {key}={expect[key]!r}, or a new explainer",
            )
    return meta


def read_labels(run: CorpusRun | str, *, digest: str, expect: dict | None = None) -> RunLabels:
    """Per-unit targets and weights of every explained text of a run.

    Args:
        run: a :class:`~slalom_core.corpus.CorpusRun` or its folder.
        digest: the explainer's model fingerprint (the run's must be the same).
        expect: what the explainer already holds (method, output, min_texts), checked.

    Returns:
        A :class:`RunLabels`.

    Example:
        >>> labels = read_labels("runs/imdb", digest=model_fingerprint(model, tok)["digest"])  # doctest: +SKIP
    """
    run = run if isinstance(run, CorpusRun) else CorpusRun(run)
    meta = _check_run(run, digest, expect or {})
    pos = run.positions()
    out = RunLabels([], [], [], [], [], [], [], meta)
    for text_id, rows in pos.groupby("id", sort=False):
        rows = rows.sort_values("position")
        tids = [tuple(int(t) for t in ids) for ids in rows["token_ids"]]
        index: dict[tuple[int, ...], int] = {}
        units = np.array([index.setdefault(t, len(index)) for t in tids], dtype=np.int64)
        first = np.array([int(np.argmax(units == u)) for u in range(len(index))])
        out.ids.append(str(text_id))
        out.sequences.append([i for t in tids for i in t])
        out.unit_index.append(units)
        out.value.append(rows["value"].to_numpy(np.float64)[first])
        s = rows["importance"].to_numpy(np.float64)[first]
        out.importance.append(s - s.mean())
        out.value_weight.append(_weights(rows["value_se"].to_numpy(np.float64)[first]))
        out.importance_weight.append(_weights(rows["importance_se"].to_numpy(np.float64)[first]))
    return out


def _batch(features, labels: RunLabels, texts: list[int]):
    """Concatenate texts for one step: states, unit numbering across texts, targets, weights."""
    states, units, group, offset = [], [], [], 0
    for g, i in enumerate(texts):
        states.append(features[i].float())
        units.append(torch.as_tensor(labels.unit_index[i]) + offset)
        n_units = len(labels.value[i])
        group.append(torch.full((n_units,), g, dtype=torch.long))
        offset += n_units
    cat = lambda xs: torch.as_tensor(np.concatenate([xs[i] for i in texts]), dtype=torch.float32)
    return (
        torch.cat(states),
        torch.cat(units),
        offset,
        torch.cat(group),
        cat(labels.value),
        cat(labels.importance),
        cat(labels.value_weight),
        cat(labels.importance_weight),
    )


def _loss(head, batch, n_texts: int) -> torch.Tensor:
    states, units, n_units, group, v, s, wv, ws = batch
    pv, ps = pool_units(head(states), units, n_units, group, n_texts)
    return (wv * (pv - v) ** 2).sum() / wv.sum() + (ws * (ps - s) ** 2).sum() / ws.sum()


def train_head(
    features: list[torch.Tensor],
    labels: RunLabels,
    *,
    hidden: int = HIDDEN,
    epochs: int = EPOCHS,
    lr: float = 1e-3,
    batch_texts: int = 16,
    validation: float = 0.1,
    patience: int = 10,
    seed: int = 0,
) -> tuple[AmortizedHead, dict]:
    """Fit a head to a run's labels; the epoch with the lowest validation loss is kept.

    Args:
        features: per text, its (n, L, D) hidden states (:func:`~.features.encode`).
        labels: the run's targets (:func:`read_labels`), text by text as ``features``.
        hidden: the MLP's width.
        epochs: passes over the training texts.
        lr: Adam's learning rate.
        batch_texts: texts per step.
        validation: share of texts held out to pick the epoch (none below 10 texts).
        patience: stop after this many epochs without a better validation loss.
        seed: initialisation, split and order of texts.

    Returns:
        ``(head, report)``: the report has the texts used, the validation loss, the epoch
        kept and the seconds taken.

    Example:
        >>> head, report = train_head(features, labels, epochs=20)  # doctest: +SKIP
    """
    if len(features) != len(labels.ids):
        raise ValueError(f"{len(features)} texts' features for {len(labels.ids)} texts' labels")
    t0 = time.perf_counter()
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    n = len(features)
    order = torch.randperm(n, generator=gen).tolist()
    n_val = int(round(validation * n)) if n >= 10 else 0
    val, train = order[:n_val], order[n_val:]
    head = AmortizedHead(n_layers=features[0].shape[1], width=features[0].shape[2], hidden=hidden)
    opt = torch.optim.AdamW(head.parameters(), lr=lr, weight_decay=1e-4)
    val_batch = _batch(features, labels, val) if val else None
    best, best_state, best_epoch = float("inf"), None, 0
    for epoch in range(epochs):
        head.train()
        perm = torch.randperm(len(train), generator=gen).tolist()
        for start in range(0, len(train), batch_texts):
            texts = [train[i] for i in perm[start : start + batch_texts]]
            loss = _loss(head, _batch(features, labels, texts), len(texts))
            opt.zero_grad()
            loss.backward()
            opt.step()
        if val_batch is not None:
            head.eval()
            with torch.no_grad():
                current = float(_loss(head, val_batch, len(val)))
            if current < best:
                best, best_epoch = current, epoch + 1
                best_state = {k: t.detach().clone() for k, t in head.state_dict().items()}
            elif epoch + 1 - best_epoch >= patience:
                break
    if best_state is not None:
        head.load_state_dict(best_state)
    head.eval()
    report = {
        "n_texts": n,
        "n_validation": len(val),
        "validation_loss": best if val else None,
        "epoch_kept": best_epoch if val else epochs,
        "epochs_run": epoch + 1 if epochs else 0,
        "seconds": time.perf_counter() - t0,
    }
    return head, report
