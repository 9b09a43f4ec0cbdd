"""The experiments on the SLALOM data set (App. E.2): Fig. 4 (c, d) with Tables 7–8 (SLALOM
fitted post hoc to trained transformers) and Fig. 9 (SLALOM-ana against SLALOM-SGD as the
vocabulary and the sequence length grow).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ...surrogate import SlalomSurrogate
from ..evaluation import spearman
from ..synthetic import (
    make_slalom_vocabulary,
    sample_slalom_dataset,
)
from .models import (
    ARCH_LABELS,
    ARCHITECTURES,
    ModelSpec,
    slalom_sampler,
    torch_threads,
    trained_runs,
    training_kwargs,
)
from .output import (
    identity_scatter,
    markdown_table,
    mean_se,
    new_figure,
    output_dir,
    plus_minus,
    runs_phrase,
    write_csv,
)
from .surrogates import fit_global_slalom, fit_slalom_ana, fit_with_engine, mse

__all__ = ["run_fig4cd", "run_fig9"]


_T7_KEYS = ("logit_mse", "logit_mse_truth", "model_vs_truth")


_T8_KEYS = ("param_mse", "value_mse", "importance_mse", "importance_spearman")


# =========================================================================================
# Fig. 4 (c, d), Tables 7–8
# =========================================================================================
def run_fig4cd(
    out_dir: str | Path,
    *,
    seed: int = 0,
    archs: Sequence[str] = ARCHITECTURES,
    layers: Sequence[int] = (1, 2),
    n_runs: int = 1,
    n_words: int = 50,
    max_len: int = 30,
    n_fit: int = 10000,
    n_test: int = 200,
    epochs: int = 6,
    samples_per_epoch: int = 5000,
    batch_size: int = 20,
    lr: float = 1e-3,
    hidden_size: int = 64,
    n_heads: int = 4,
    vocab_seed: int = 0,
    soft_labels: bool = True,
    num_threads: int | None = 1,
) -> dict:
    """Fig. 4 (c, d) and Tables 7–8: recovering a SLALOM learned by a transformer.

    The ground truth is :func:`make_slalom_vocabulary` (App. E.2, Eq. 75) restricted to the
    first ``n_words`` words; lengths are uniform in ``[1, max_len]``. For each model: train
    on this data set (by default on the true probabilities, ``soft_labels=True``: with
    sampled labels a CPU-sized budget of 30k samples leaves the model far from the SLALOM
    it should learn, whereas the paper trained on 400k samples), fit a global SLALOM to the model's log-odds on ``n_fit`` fresh samples,
    and report

    * logit MSE (Table 7): fitted SLALOM vs the model on ``n_test`` new samples (also vs the
      ground-truth log-odds, and the model vs the ground truth, for context);
    * parameter MSE (Table 8): fitted vs true values and (mean-zero) importances, pooled
      (also separately).

    Writes ``table7.csv/.md``, ``table8.csv/.md`` and ``fig4cd.png`` (c: model vs recovered
    log-odds; d: true vs recovered parameters) for the first model.
    """
    out = output_dir(out_dir)
    vocab = make_slalom_vocabulary(200 if n_words <= 200 else n_words, vocab_seed).first(n_words)
    rows, results, first = [], {}, None
    for arch in archs:
        for n_layers in layers:
            spec = ModelSpec(arch=arch, n_layers=n_layers, hidden_size=hidden_size, n_heads=n_heads, max_len=max_len)
            keys = _T7_KEYS + _T8_KEYS
            per_run = {k: [] for k in keys}
            label = None
            train = training_kwargs(epochs, samples_per_epoch, batch_size, lr, num_threads)
            for run, run_seed, clf in trained_runs(
                spec,
                slalom_sampler(vocab, max_len),
                n_runs=n_runs,
                seed=seed,
                train=train,
                cache_key=("slalom", n_words, max_len, vocab_seed),
                soft_labels=soft_labels,
            ):
                label = clf.label
                rng = np.random.default_rng([run_seed, 7])
                fit = sample_slalom_dataset(n_fit, rng, vocab=vocab, max_len=max_len)
                test = sample_slalom_dataset(n_test, rng, vocab=vocab, max_len=max_len)
                with torch_threads(num_threads):
                    y_fit = clf.log_odds(fit.sequences)
                    y_test = clf.log_odds(test.sequences)
                    sur = fit_global_slalom(fit.sequences, y_fit, n_words)
                pred = sur.predict(test.counts())
                res = {
                    "logit_mse": mse(pred, y_test),
                    "value_mse": mse(sur.value, vocab.value),
                    "importance_mse": mse(sur.importance, vocab.importance),
                    "param_mse": mse(
                        np.concatenate([sur.value, sur.importance]),
                        np.concatenate([vocab.value, vocab.importance]),
                    ),
                    "logit_mse_truth": mse(pred, test.log_odds),
                    "model_vs_truth": mse(y_test, test.log_odds),
                    "importance_spearman": spearman(sur.importance, vocab.importance),
                }
                for k in keys:
                    per_run[k].append(res[k])
                rows.append([arch, n_layers, run] + [res[k] for k in keys])
                if first is None:
                    first = {"label": label, "y_test": y_test, "pred": pred, "sur": sur}
            results[label] = {k: mean_se(per_run[k]) for k in keys}

    n7 = 3 + len(_T7_KEYS)
    write_csv(out / "table7.csv", ["arch", "layers", "run", *_T7_KEYS], [r[:n7] for r in rows])
    write_csv(out / "table8.csv", ["arch", "layers", "run", *_T8_KEYS], [r[:3] + r[n7:] for r in rows])
    note = f"({runs_phrase(n_runs)}; |V| = {n_words}, lengths uniform in [1, {max_len}])"
    md7 = (
        f"Logit-space MSE (×100) of the SLALOM fitted post hoc to transformers trained on SLALOM data, "
        f"on {n_test} held-out samples {note}.\n\n"
        + markdown_table(
            ["model", "SLALOM vs model", "SLALOM vs ground truth", "model vs ground truth"],
            [
                [
                    lab,
                    *(
                        plus_minus(*results[lab][k], n_runs, scale=100, digits=3)
                        for k in ("logit_mse", "logit_mse_truth", "model_vs_truth")
                    ),
                ]
                for lab in results
            ],
        )
    )
    md8 = (
        f"Parameter-space MSE (×100) between the recovered and the true SLALOM {note}.\n\n"
        + markdown_table(
            ["model", "values and importances", "values", "importances", "Spearman(s, s_true)"],
            [
                [
                    lab,
                    *(
                        plus_minus(*results[lab][k], n_runs, scale=100, digits=3)
                        for k in ("param_mse", "value_mse", "importance_mse")
                    ),
                    plus_minus(*results[lab]["importance_spearman"], n_runs, digits=3),
                ]
                for lab in results
            ],
        )
        + "\nImportances of words that dominate the softmax (s far above the rest) are only weakly "
        "identified: once a word takes almost all the attention, raising its s further barely "
        "changes F, so their errors dominate the importance MSE; the rank correlation is robust "
        "to this.\n"
    )
    (out / "table7.md").write_text(md7)
    (out / "table8.md").write_text(md8)
    files = [str(out / f) for f in ("table7.csv", "table7.md", "table8.csv", "table8.md")]
    if first is not None:
        fig, axes = new_figure(1, 3, (10.0, 3.2))
        ax = axes[0, 0]
        identity_scatter(ax, first["y_test"], first["pred"], size=6)
        ax.set_xlabel(f"log-odds ({first['label']})")
        ax.set_ylabel("recovered SLALOM")
        ax.set_title("(c) recovering log-odds", fontsize="medium")
        for ax, name, true, est in (
            (axes[0, 1], "values v", vocab.value, first["sur"].value),
            (axes[0, 2], "importances s", vocab.importance, first["sur"].importance),
        ):
            identity_scatter(ax, true, est, size=8)
            ax.set_xlabel(f"true {name}")
            ax.set_ylabel(f"recovered {name}")
            ax.set_title(f"(d) {name}", fontsize="medium")
        png = out / "fig4cd.png"
        fig.savefig(png, dpi=120)
        files.insert(0, str(png))
    means = {lab: {k: v[0] for k, v in results[lab].items()} for lab in results}
    return {"results": means, "n_words": n_words, "max_len": max_len, "n_runs": n_runs, "files": files}


# =========================================================================================
# Fig. 9
# =========================================================================================
def run_fig9(
    out_dir: str | Path,
    *,
    seed: int = 0,
    arch: str = "distilbert",
    n_layers: int = 2,
    vocab_sizes: Sequence[int] = (8, 16, 32, 64),
    lengths: Sequence[int] = (2, 4, 8, 16, 30),
    base_vocab: int = 16,
    base_length: int = 8,
    n_runs: int = 1,
    methods: Sequence[str] = ("ana", "eff", "sgd"),
    n_samples: int = 5000,
    eff_length: int = 2,
    n_test: int = 500,
    epochs: int = 4,
    samples_per_epoch: int = 5000,
    batch_size: int = 20,
    lr: float = 1e-3,
    hidden_size: int = 64,
    n_heads: int = 4,
    vocab_seed: int = 0,
    soft_labels: bool = True,
    num_threads: int | None = 1,
) -> dict:
    """Fig. 9: SLALOM-ana vs gradient-fitted SLALOM as |V| and the context length C grow.

    For each setting (``vocab_sizes`` at C = ``base_length``, and ``lengths`` at |V| =
    ``base_vocab``) a transformer is trained on the SLALOM data set with |V| words and
    lengths uniform in [1, C] (soft labels by default, see :func:`train_classifier`). Then a
    SLALOM over the whole vocabulary is fitted to the model by each of ``methods``:

    * ``ana``: the engine's SLALOM-ana, exactly 2|V| − 1 queries (singles and pairs);
    * ``eff``: the engine's SLALOM-eff, ``n_samples`` random sequences of ``eff_length``
      words, gradient fit;
    * ``sgd``: gradient fit on ``n_samples`` samples of the data distribution (lengths up to
      C) — the paper's "SLALOM-SGD" fitted as in Fig. 4 (c, d).

    Errors: logit MSE vs the model on ``n_test`` samples of the data distribution and
    parameter MSE (values and importances pooled) vs the ground-truth SLALOM. Writes
    ``fig9.csv``, ``fig9.md`` and ``fig9.png``.
    """
    out = output_dir(out_dir)
    full = make_slalom_vocabulary(max(200, max(vocab_sizes, default=1), base_vocab), vocab_seed)
    settings = [("vocab", v, base_length) for v in vocab_sizes] + [("length", base_vocab, c) for c in lengths]
    rows = []
    agg: dict[tuple, dict[str, list[float]]] = {}
    for sweep, n_words, max_len in settings:
        vocab = full.first(n_words)
        spec = ModelSpec(
            arch=arch, n_layers=n_layers, hidden_size=hidden_size, n_heads=n_heads, max_len=max(max_len, 2)
        )
        train = training_kwargs(epochs, samples_per_epoch, batch_size, lr, num_threads)
        for run, run_seed, clf in trained_runs(
            spec,
            slalom_sampler(vocab, max_len),
            n_runs=n_runs,
            seed=seed,
            train=train,
            cache_key=("slalom", n_words, max_len, vocab_seed),
            soft_labels=soft_labels,
        ):
            rng = np.random.default_rng([run_seed, 9, n_words, max_len])
            test = sample_slalom_dataset(n_test, rng, vocab=vocab, max_len=max_len)
            fitted: dict[str, SlalomSurrogate] = {}
            with torch_threads(num_threads):
                y_test = clf.log_odds(test.sequences)
                for method in methods:
                    if method == "ana":
                        fitted[method] = fit_slalom_ana(clf.log_odds, n_words)
                    elif method == "eff":
                        fitted[method] = fit_with_engine(
                            "eff", clf.log_odds, n_words, n_samples, rng, sample_length=eff_length
                        )[0]
                    elif method == "sgd":
                        seqs = sample_slalom_dataset(n_samples, rng, vocab=vocab, max_len=max_len).sequences
                        fitted[method] = fit_global_slalom(seqs, clf.log_odds(seqs), n_words)
                    else:
                        raise ValueError(f"unknown method {method!r}; use 'ana', 'eff' or 'sgd'")
            true_params = np.concatenate([vocab.value, vocab.importance])
            for method, sur in fitted.items():
                logit = mse(sur.predict(test.counts()), y_test)
                param = mse(np.concatenate([sur.value, sur.importance]), true_params)
                rows.append([sweep, n_words, max_len, run, method, logit, param])
                d = agg.setdefault((sweep, n_words, max_len, method), {"logit": [], "param": []})
                d["logit"].append(logit)
                d["param"].append(param)

    csv_path = write_csv(
        out / "fig9.csv", ["sweep", "n_words", "max_len", "run", "method", "logit_mse", "param_mse"], rows
    )
    md_rows = []
    for (sweep, n_words, max_len, method), d in agg.items():
        md_rows.append([sweep, n_words, max_len, method, float(np.mean(d["logit"])), float(np.mean(d["param"]))])
    md = (
        f"SLALOM-ana vs gradient fits (eff: random {eff_length}-word sequences, sgd: data samples; "
        f"{n_samples} samples each) on {ARCH_LABELS.get(arch, arch)} (L={n_layers}) trained on SLALOM data "
        f"({n_runs} run(s)); logit MSE vs the model on {n_test} samples, parameter MSE vs the ground truth.\n\n"
        + markdown_table(["sweep", "|V|", "C", "method", "logit MSE", "param MSE"], md_rows, fmt="{:.4g}")
    )
    (out / "fig9.md").write_text(md)

    fig, axes = new_figure(2, 2, (8.0, 6.0))
    for col, (sweep, xkey, xlabel) in enumerate(
        (("vocab", 1, "vocabulary size |V|"), ("length", 2, "context length C"))
    ):
        for row, (metric, mlabel) in enumerate((("logit", "logit MSE"), ("param", "parameter MSE"))):
            ax = axes[row, col]
            for method in methods:
                pts = sorted(
                    (k[xkey], float(np.mean(d[metric]))) for k, d in agg.items() if k[0] == sweep and k[3] == method
                )
                if pts:
                    xs, ys = zip(*pts)
                    ax.plot(xs, ys, "-o", label=f"SLALOM-{method}")
            ax.set_xlabel(xlabel)
            ax.set_ylabel(mlabel)
            if ax.has_data():
                ax.set_yscale("log")
            ax.legend(fontsize="small")
    png = out / "fig9.png"
    fig.savefig(png, dpi=120)
    summary = {
        f"{sweep}:{n_words}:{max_len}:{method}": {
            "logit_mse": float(np.mean(d["logit"])),
            "param_mse": float(np.mean(d["param"])),
        }
        for (sweep, n_words, max_len, method), d in agg.items()
    }
    return {"results": summary, "files": [str(png), str(csv_path), str(out / "fig9.md")]}
