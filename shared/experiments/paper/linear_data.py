"""The experiments on the linear data set (App. E.1): Fig. 3 (transformers answer k copies
of a word almost constantly) and Fig. 4 (a, b) with Table 6 (linear, GAM and SLALOM
surrogates of the trained models).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..synthetic import (
    LINEAR_WEIGHTS,
    LINEAR_WORDS,
    SyntheticDataset,
    counts_matrix,
    sample_linear_dataset,
)
from .models import (
    ARCH_LABELS,
    ARCHITECTURES,
    ModelSpec,
    SyntheticClassifier,
    linear_sampler,
    torch_threads,
    train_classifier,
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
from .surrogates import SURROGATE_LABELS, SURROGATES, fit_gam_surrogate, fit_global_slalom, fit_linear_surrogate, mse

__all__ = ["run_fig3", "run_fig4ab"]


def _repeat_word_sequences(word_index: int, k_max: int) -> list[np.ndarray]:
    return [np.full(k, word_index, dtype=np.int64) for k in range(1, k_max + 1)]


# =========================================================================================
# Fig. 3
# =========================================================================================
def run_fig3(
    out_dir: str | Path,
    *,
    seed: int = 0,
    archs: Sequence[str] = ("mlp",) + ARCHITECTURES,
    layers: Sequence[int] = (1, 2),
    k_max: int = 30,
    word: str = "perfect",
    epochs: int = 5,
    samples_per_epoch: int = 5000,
    batch_size: int = 20,
    lr: float = 1e-3,
    hidden_size: int = 64,
    n_heads: int = 4,
    num_threads: int | None = 1,
) -> dict:
    """Fig. 3: log-odds for k copies of ``word`` (k = 1…k_max) vs the linear model's.

    Trains every ``arch`` × ``layers`` on the linear data set (App. E.1) and queries it with
    ``[word] * k`` (BERT-style models get ``[CLS] … [SEP]`` as in training). ``"mlp"`` is the
    fully connected baseline of Fig. 3a (ReLU network on word counts). The ground truth is
    ``w(word)·k`` (1.5·k for "perfect").

    Writes ``fig3.png``, ``fig3.csv`` (one row per k) and ``fig3.md`` (summary per model).

    Returns:
        ``{"k": [...], "linear": [...], "models": {label: [...]}, "summary": {label:
        {"at_1", "at_k_max", "slope", "mse_vs_linear"}}, "files": [...]}``.
    """
    out = output_dir(out_dir)
    widx = LINEAR_WORDS.index(word)
    seqs = _repeat_word_sequences(widx, k_max)
    ks = np.arange(1, k_max + 1)
    truth = LINEAR_WEIGHTS[widx] * ks
    curves: dict[str, np.ndarray] = {}
    archs_layers: list[tuple[str, int, str]] = []
    for arch in archs:
        for n_layers in layers:
            spec = ModelSpec(arch=arch, n_layers=n_layers, hidden_size=hidden_size, n_heads=n_heads)
            clf = train_classifier(
                spec,
                linear_sampler(),
                seed=seed,
                cache_key=("linear",),
                **training_kwargs(epochs, samples_per_epoch, batch_size, lr, num_threads),
            )
            with torch_threads(num_threads):
                curves[clf.label] = clf.log_odds(seqs)
            archs_layers.append((arch, n_layers, clf.label))

    header = ["k", "linear_truth"] + [lab for _, _, lab in archs_layers]
    rows = [[int(k), float(truth[i])] + [float(curves[lab][i]) for _, _, lab in archs_layers] for i, k in enumerate(ks)]
    csv_path = write_csv(out / "fig3.csv", header, rows)

    summary = {}
    md_rows = []
    for _, _, lab in archs_layers:
        c = curves[lab]
        slope = float(np.polyfit(ks, c, 1)[0]) if len(ks) > 1 else float("nan")
        summary[lab] = {
            "at_1": float(c[0]),
            "at_k_max": float(c[-1]),
            "slope": slope,
            "mse_vs_linear": mse(c, truth),
        }
        md_rows.append([lab, float(c[0]), float(c[-1]), slope, mse(c, truth)])
    md = (
        f'Log-odds for k copies of "{word}" (k = 1…{k_max}); the linear ground truth is '
        f"{LINEAR_WEIGHTS[widx]}·k (slope {LINEAR_WEIGHTS[widx]}).\n\n"
        + markdown_table(["model", "F(k=1)", f"F(k={k_max})", "slope", "MSE vs linear"], md_rows)
    )
    (out / "fig3.md").write_text(md)

    panel_archs = list(dict.fromkeys(a for a, _, _ in archs_layers))
    fig, axes = new_figure(1, len(panel_archs), (3.2 * len(panel_archs), 3.0))
    for ax, arch in zip(axes[0], panel_archs):
        ax.plot(ks, truth, "--k", label="linear model")
        for a, n_layers, lab in archs_layers:
            if a == arch:
                ax.plot(ks, curves[lab], "-o", markersize=3, label=f"L={n_layers}")
        ax.set_title(ARCH_LABELS.get(arch, arch))
        ax.set_xlabel(f'k (copies of "{word}")')
        ax.set_ylabel("log-odds")
        ax.legend(fontsize="small")
    png = out / "fig3.png"
    fig.savefig(png, dpi=120)
    return {
        "k": ks.tolist(),
        "linear": truth.tolist(),
        "models": {lab: curves[lab].tolist() for _, _, lab in archs_layers},
        "summary": summary,
        "files": [str(png), str(csv_path), str(out / "fig3.md")],
    }


# =========================================================================================
# Fig. 4 (a, b), Table 6
# =========================================================================================
def _fit_three(clf: SyntheticClassifier, fit: SyntheticDataset, test: SyntheticDataset, max_len: int, gam_alpha: float):
    y_fit = clf.log_odds(fit.sequences)
    y_test = clf.log_odds(test.sequences)
    lin = fit_linear_surrogate(fit.counts(), y_fit)
    gam = fit_gam_surrogate(fit.position_onehot(max_len), y_fit, alpha=gam_alpha)
    sla = fit_global_slalom(fit.sequences, y_fit, fit.n_words)
    preds = {
        "linear": lin.predict(test.counts()),
        "gam": gam.predict(test.position_onehot(max_len)),
        "slalom": sla.predict(test.counts()),
    }
    return y_test, preds, {"linear": lin, "gam": gam, "slalom": sla}


def run_fig4ab(
    out_dir: str | Path,
    *,
    seed: int = 0,
    archs: Sequence[str] = ARCHITECTURES,
    layers: Sequence[int] = (1, 2),
    n_runs: int = 1,
    n_fit: int = 10000,
    n_test: int = 2000,
    gam_alpha: float = 0.01,
    k_max: int = 30,
    epochs: int = 5,
    samples_per_epoch: int = 5000,
    batch_size: int = 20,
    lr: float = 1e-3,
    hidden_size: int = 64,
    n_heads: int = 4,
    num_threads: int | None = 1,
) -> dict:
    """Fig. 4 (a, b) and Table 6: which surrogate describes a transformer best?

    For each ``arch`` × ``layers`` × run: train on the linear data set (App. E.1), draw
    ``n_fit`` fresh samples and ``n_test`` held-out samples, record the model's log-odds,
    fit a linear model (OLS on counts), a GAM (LASSO on 30·10 position × word one-hots,
    λ = ``gam_alpha``) and a global SLALOM on the ``n_fit`` samples and report the MSE of
    each on the held-out samples (×100 in the markdown table, as in Table 6).

    Writes ``table6.csv`` (one row per model and run), ``table6.md`` (mean ± s.e. over runs),
    ``fig4ab_scatter.png`` (surrogate vs model log-odds on the held-out samples) and
    ``fig4ab_lines.png`` (k copies of "perfect": model and surrogates).

    Returns:
        ``{"mse": {label: {"linear", "gam", "slalom"}} (means over runs),
        "slalom_best": bool (SLALOM lowest for every model), "files": [...]}``.
    """
    out = output_dir(out_dir)
    max_len = 30
    perfect = _repeat_word_sequences(LINEAR_WORDS.index("perfect"), k_max)
    rows, results = [], {}
    first_of_arch: dict[str, dict] = {}
    for arch in archs:
        for n_layers in layers:
            spec = ModelSpec(arch=arch, n_layers=n_layers, hidden_size=hidden_size, n_heads=n_heads)
            per_run = {s: [] for s in SURROGATES}
            label = None
            train = training_kwargs(epochs, samples_per_epoch, batch_size, lr, num_threads)
            for run, run_seed, clf in trained_runs(
                spec, linear_sampler(), n_runs=n_runs, seed=seed, train=train, cache_key=("linear",)
            ):
                label = clf.label
                rng = np.random.default_rng([run_seed, 4])
                fit = sample_linear_dataset(n_fit, rng)
                test = sample_linear_dataset(n_test, rng)
                with torch_threads(num_threads):
                    y_test, preds, fitted = _fit_three(clf, fit, test, max_len, gam_alpha)
                    mses = {s: mse(preds[s], y_test) for s in SURROGATES}
                    for s in SURROGATES:
                        per_run[s].append(mses[s])
                    rows.append([arch, n_layers, run] + [mses[s] for s in SURROGATES] + [mse(y_test, test.log_odds)])
                    if arch not in first_of_arch:
                        onehot_perfect = SyntheticDataset(
                            LINEAR_WORDS, perfect, np.zeros(k_max), np.zeros(k_max)
                        ).position_onehot(max_len)
                        cnt_perfect = counts_matrix(perfect, len(LINEAR_WORDS))
                        first_of_arch[arch] = {
                            "label": label,
                            "y_test": y_test,
                            "preds": preds,
                            "perfect": {
                                "model": clf.log_odds(perfect),
                                "linear": fitted["linear"].predict(cnt_perfect),
                                "gam": fitted["gam"].predict(onehot_perfect),
                                "slalom": fitted["slalom"].predict(cnt_perfect),
                            },
                        }
            results[label] = {s: mean_se(per_run[s]) for s in SURROGATES}

    header = ["arch", "layers", "run"] + [f"mse_{s}" for s in SURROGATES] + ["mse_model_vs_truth"]
    csv_path = write_csv(out / "table6.csv", header, rows)
    md_rows = [[lab] + [plus_minus(*results[lab][s], n_runs, scale=100) for s in SURROGATES] for lab in results]
    md = (
        f"Held-out MSE (×100) of surrogates fitted to the transformers' log-odds on {n_fit} "
        f"fresh samples of the linear data set, evaluated on {n_test} new samples "
        f"({runs_phrase(n_runs)}).\n\n" + markdown_table(["model", "linear", "GAM", "SLALOM"], md_rows)
    )
    (out / "table6.md").write_text(md)

    # scatter: rows = architectures, columns = surrogates
    arch_list = list(first_of_arch)
    files = [str(csv_path), str(out / "table6.md")]
    if arch_list:
        fig, axes = new_figure(len(arch_list), 3, (9.0, 3.0 * len(arch_list)))
        for r, arch in enumerate(arch_list):
            d = first_of_arch[arch]
            # one range per row, so the three surrogates of a model share their axes
            lims = (
                float(min(d["y_test"].min(), *(p.min() for p in d["preds"].values()))),
                float(max(d["y_test"].max(), *(p.max() for p in d["preds"].values()))),
            )
            for c, s in enumerate(SURROGATES):
                ax = axes[r, c]
                identity_scatter(ax, d["y_test"], d["preds"][s], size=3, lims=lims, alpha=0.5)
                ax.set_xlabel(f"log-odds ({d['label']})")
                ax.set_ylabel(f"fitted {SURROGATE_LABELS[s]}")
                ax.set_title(f"{SURROGATE_LABELS[s]}: MSE={mse(d['preds'][s], d['y_test']):.3f}", fontsize="medium")
        png1 = out / "fig4ab_scatter.png"
        fig.savefig(png1, dpi=110)
        fig, axes = new_figure(1, len(arch_list), (3.4 * len(arch_list), 3.0))
        ks = np.arange(1, k_max + 1)
        for ax, arch in zip(axes[0], arch_list):
            d = first_of_arch[arch]["perfect"]
            for s in SURROGATES:
                ax.plot(ks, d[s], "-s", markersize=3, label=SURROGATE_LABELS[s])
            ax.plot(ks, d["model"], "-ok", markersize=3, label=first_of_arch[arch]["label"])
            ax.set_xlabel('k (copies of "perfect")')
            ax.set_ylabel("log-odds")
            ax.legend(fontsize="small")
        png2 = out / "fig4ab_lines.png"
        fig.savefig(png2, dpi=120)
        files = [str(png1), str(png2)] + files
    means = {lab: {s: results[lab][s][0] for s in SURROGATES} for lab in results}
    best = all(m["slalom"] < min(m["linear"], m["gam"]) for m in means.values())
    return {"mse": means, "slalom_best": bool(best), "n_runs": n_runs, "files": files}
