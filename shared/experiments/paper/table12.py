"""Table 12 (App. F.7): deletion AOPC of SLALOM-eff ``lin`` scores against the number of
samples, on IMDB reviews and a real classifier (the packaged MiniLM by default).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from ..data import data_dir
from .models import torch_threads
from .output import markdown_table, mean_se, new_figure, output_dir, plus_minus, write_csv

__all__ = ["DEFAULT_IMDB_TEST", "run_table12"]


#: The IMDB test reviews' file name inside the data folder (:mod:`slalom_core.experiments.data`).
DEFAULT_IMDB_TEST = "imdb_test.jsonl"


def _load_table12_model(model) -> tuple[torch.nn.Module, object, str]:
    """A packaged demo model's name (``"default"``), a local Hugging Face folder, or ``(model, tokenizer)``."""
    if isinstance(model, tuple):
        if len(model) != 2:
            raise ValueError("model=(model, tokenizer) needs exactly two items")
        m, tok = model
        return m.eval(), tok, getattr(getattr(m, "config", None), "model_type", None) or type(m).__name__
    from ...packaged.demo_model import MODEL_NAMES, load_model

    if model not in (None, "", "default", *MODEL_NAMES) and not Path(model).exists():
        raise FileNotFoundError(f"no local classifier at {model} (nothing is downloaded)")
    return load_model(model, local_files_only=True)


def _class_probabilities(logits: torch.Tensor) -> np.ndarray:
    if logits.shape[1] == 1:
        p1 = torch.sigmoid(logits[:, 0])
        return torch.stack([1 - p1, p1], dim=1).numpy()
    return torch.softmax(logits, dim=1).numpy()


def run_table12(
    out_dir: str | Path,
    *,
    seed: int = 0,
    model="default",
    data: str | Path | None = None,
    n_texts: int = 5,
    n_samples_grid: Sequence[int] = (250, 500, 1000, 2000),
    min_tokens: int = 60,
    max_tokens: int = 120,
    method: str = "eff",
    bins: Sequence[float] | None = None,
    batch_size: int = 64,
    num_threads: int | None = 1,
) -> dict:
    """Table 12 (App. F.7): deletion AOPC of SLALOM ``lin`` scores against ``n_samples``.

    ``n_texts`` reviews with ``min_tokens``–``max_tokens`` tokens are drawn (seeded) from
    ``data`` (JSON lines with a ``text`` field; by default ``imdb_test.jsonl`` in the data
    folder that :func:`slalom_core.experiments.data.data_dir` finds). Each is explained with SLALOM-``method`` at every budget in
    ``n_samples_grid``; the ``lin`` scores, oriented towards the class the model predicts on
    the full text, rank the tokens for ERASER comprehensiveness (deletion AOPC, bins 1, 5,
    10, 20, 50 %, tokens deleted; higher is better) of that class's probability
    (:func:`slalom_core.experiments.evaluation.comprehensiveness`). A random ranking gives the floor.

    ``model`` is a packaged demo model's name (``"default"``: the all-MiniLM-L6-v2 with its
    trained IMDB adapter; ``"zeroshot"``; see :mod:`slalom_core.packaged.demo_model`), a
    local Hugging Face classifier folder, or a ``(model, tokenizer)`` tuple. The paper used a fine-tuned
    6-layer BERT and compared with KernelSHAP; ``slalom-xai bench`` runs the SHAP
    baselines on the same data.

    Writes ``table12.csv`` (one row per text and budget), ``table12.md`` (mean ± s.e. over
    texts, seconds per explanation) and ``table12.png``. If ``data`` is missing (or the
    default model's package is not installed) nothing is written and the result is
    ``{"skipped": reason, "files": []}``.
    """
    from ...api import explain
    from ...models import HFClassifier
    from .. import evaluation as ev
    from ..bench import read_jsonl, select_instances

    if data is None:
        folder = data_dir()
        data = Path(DEFAULT_IMDB_TEST) if folder is None else folder / DEFAULT_IMDB_TEST
    data = Path(data)
    if not data.exists():
        return {
            "skipped": f"data file {data} not found: Table 12 needs the IMDB test reviews (JSON lines)",
            "files": [],
        }
    try:
        clf, tok, model_name = _load_table12_model(model)
    except (ImportError, FileNotFoundError) as err:
        return {"skipped": f"model unavailable: {err}", "files": []}
    grid = sorted({int(n) for n in n_samples_grid})
    if not grid or grid[0] < 1:
        raise ValueError("n_samples_grid needs positive budgets")
    bins = tuple(ev.ERASER_BINS if bins is None else bins)
    out = output_dir(out_dir)

    rows_raw = read_jsonl(data)
    rows: list[list] = []
    per_budget: dict[int, dict[str, list[float]]] = {n: {"aopc": [], "seconds": [], "r2": []} for n in grid}
    random_aopc: list[float] = []
    with torch_threads(num_threads):
        adapter = HFClassifier(clf, tok, batch_size=batch_size)
        limit = None
        if adapter.max_length is not None:
            limit = adapter.max_length - len(adapter.prefix_ids) - len(adapter.suffix_ids)
        hi = max_tokens if limit is None else min(max_tokens, limit)
        insts = select_instances(rows_raw, tok, n=n_texts, min_tokens=min_tokens, max_tokens=hi, seed=seed)
        if not insts:
            raise ValueError(f"no text in {data} has between {min_tokens} and {hi} tokens")
        for inst in insts:
            cache: dict[tuple[int, ...], np.ndarray] = {}

            def probs(seqs: list[list[int]], cache: dict = cache) -> np.ndarray:
                missing = [s for s in dict.fromkeys(tuple(s) for s in seqs) if s not in cache]
                if missing:
                    for s, row in zip(missing, _class_probabilities(adapter.score([list(m) for m in missing]))):
                        cache[s] = row
                return np.stack([cache[tuple(s)] for s in seqs])

            p_full = probs([inst.token_ids])[0]
            n_classes = p_full.shape[0]
            target = int(np.argmax(p_full))
            # binary: SLALOM explains the log-odds of class 1; flip to face the predicted class
            sign = -1.0 if n_classes == 2 and target == 0 else 1.0
            explained = None if n_classes == 2 else target

            def predict(seqs, _t=target):
                return probs(seqs)[:, _t]

            common = dict(bins=bins, strategy="delete", full_score=float(p_full[target]))
            rnd = ev.comprehensiveness(
                predict, inst.token_ids, ev.random_attributions(inst.n_tokens, seed), **common
            ).value
            random_aopc.append(rnd)
            rows.append([inst.index, inst.id, inst.n_tokens, target, "random", 0, rnd, 0.0, float("nan")])
            for n in grid:
                t0 = time.perf_counter()
                exp = explain(adapter, inst.token_ids, method=method, n_samples=n, target=explained, seed=seed)
                seconds = time.perf_counter() - t0
                lin = np.asarray(exp.scores("lin"), dtype=np.float64).reshape(inst.n_tokens, -1)[:, 0]
                aopc = ev.comprehensiveness(predict, inst.token_ids, sign * lin, **common).value
                r2 = float(exp.diagnostics.get("heldout_r2", float("nan")))
                per_budget[n]["aopc"].append(aopc)
                per_budget[n]["seconds"].append(seconds)
                per_budget[n]["r2"].append(r2)
                rows.append([inst.index, inst.id, inst.n_tokens, target, f"slalom-{method}", n, aopc, seconds, r2])

    csv_path = write_csv(
        out / "table12.csv",
        ["text", "id", "n_tokens", "target", "method", "n_samples", "deletion_aopc", "seconds", "heldout_r2"],
        rows,
    )
    n_done = len(random_aopc)
    summary = {n: {k: mean_se(v) for k, v in d.items()} for n, d in per_budget.items()}
    rand = mean_se(random_aopc)
    md_rows = [
        [
            f"SLALOM-{method} lin, {n} samples",
            plus_minus(*summary[n]["aopc"], n_done, digits=4),
            f"{summary[n]['seconds'][0]:.2f}",
            f"{summary[n]['r2'][0]:.3f}",
        ]
        for n in grid
    ]
    md_rows.append(["random ranking", plus_minus(*rand, n_done, digits=4), "–", "–"])
    md = (
        f"Deletion AOPC (ERASER comprehensiveness, bins {', '.join(f'{b:g}' for b in bins)}, tokens deleted; "
        f"higher is better) of the predicted class's probability, {n_done} review(s) from {data.name} with "
        f"{min_tokens}–{hi} tokens, model: {model_name}; mean{' ± s.e.' if n_done > 1 else ''} over texts, "
        f"seed {seed}.\n\n"
        + markdown_table(["explanation", "deletion AOPC", "seconds / explanation", "held-out R²"], md_rows)
    )
    (out / "table12.md").write_text(md)

    fig, axes = new_figure(1, 1, (5.0, 3.4))
    ax = axes[0, 0]
    means = [summary[n]["aopc"][0] for n in grid]
    ses = [summary[n]["aopc"][1] for n in grid]
    ax.errorbar(grid, means, yerr=ses, fmt="-o", capsize=3, label=f"SLALOM-{method} lin")
    ax.axhline(rand[0], color="gray", linestyle="--", label="random ranking")
    ax.set_xscale("log")
    ax.minorticks_off()
    ax.set_xticks(grid)
    ax.set_xticklabels([str(n) for n in grid])
    ax.set_xlabel("number of samples")
    ax.set_ylabel("deletion AOPC (higher is better)")
    ax.set_title(f"Table 12: {n_done} text(s) from {data.name}", fontsize="medium")
    ax.legend(fontsize="small")
    png = out / "table12.png"
    fig.savefig(png, dpi=120)
    return {
        "results": {
            str(n): {
                "deletion_aopc": summary[n]["aopc"][0],
                "se": summary[n]["aopc"][1],
                "seconds": summary[n]["seconds"][0],
                "heldout_r2": summary[n]["r2"][0],
            }
            for n in grid
        },
        "random": {"deletion_aopc": rand[0], "se": rand[1]},
        "n_texts": n_done,
        "model": model_name,
        "files": [str(png), str(csv_path), str(out / "table12.md")],
    }
