"""Ground truth for local fits: do SLALOM-eff's importances and standard errors recover the truth?

The Fig. 4 (c, d) setting (:func:`slalom_core.experiments.paper.run_fig4cd`'s defaults:
|V| = 50 words of the App. E.2 vocabulary, lengths up to 30, training on the true
probabilities): small transformers are trained on SLALOM data, then fresh texts of 10–30
words from the same distribution are explained one by one with SLALOM-eff (1000 samples,
the engine's defaults otherwise, a fixed seed). Per text, over its unique words:

* Spearman between the fitted importances and the true ones, and between the fitted ones
  and those of a *global* SLALOM fitted to the same model (what the model learned; the
  transformer only approximates the truth);
* coverage: the share of the importances the fit calls determined (and of all values,
  fitted with ``reference=0.0`` so that they are on the truth's scale) whose
  ``|estimate − truth| ≤ 2·SE``, against the truth and against the global SLALOM;
* the number of determined importances and the held-out R².

A control row explains the ground-truth SLALOM itself (plus Gaussian noise, so that the
standard errors have something to cover): what the local fits achieve when the model *is*
a SLALOM. Writes ``results.md`` and ``results.json`` (per-text rows included) to ``--out``.

    python -m slalom_core.experiments.benchmarks.local_ground_truth --out bench_output/local_gt
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import slalom_core as sc
import torch
from slalom_core.experiments.benchmarks.local_ground_truth_report import markdown
from slalom_core.experiments.evaluation import spearman
from slalom_core.experiments.paper.models import (
    ModelSpec,
    slalom_sampler,
    torch_threads,
    trained_runs,
    training_kwargs,
)
from slalom_core.experiments.paper.surrogates import fit_global_slalom
from slalom_core.experiments.synthetic import SPECIAL_TOKENS, make_slalom_vocabulary, sample_slalom_dataset

__all__ = [
    "SlalomTruthModel",
    "sample_texts",
    "text_metrics",
    "evaluate_texts",
    "summarise",
    "run_study",
]

Z = 2.0  # "within 2 standard errors"


class SlalomTruthModel(torch.nn.Module):
    """A model that *is* a SLALOM over word ids, optionally plus seeded Gaussian noise.

    ``forward(input_ids, attention_mask)`` returns the log-odds ``Σ softmax(s)_i v_i`` as
    one column (0 for an input with no words). Every call draws fresh noise, so a sample
    scored twice gets two independent draws (as the Laplace approximation assumes).
    """

    def __init__(self, value: np.ndarray, importance: np.ndarray, noise_sd: float = 0.0, seed: int = 0) -> None:
        super().__init__()
        self.register_buffer("value", torch.as_tensor(np.asarray(value), dtype=torch.float64))
        self.register_buffer("importance", torch.as_tensor(np.asarray(importance), dtype=torch.float64))
        self.noise_sd = float(noise_sd)
        self.gen = torch.Generator().manual_seed(int(seed))

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        w = torch.exp(self.importance[input_ids]) * attention_mask
        alpha = w / w.sum(dim=1, keepdim=True).clamp_min(1e-300)
        out = (alpha * self.value[input_ids]).sum(dim=1, keepdim=True)
        if self.noise_sd > 0:
            out = out + self.noise_sd * torch.randn(out.shape, generator=self.gen, dtype=out.dtype)
        return out


def sample_texts(vocab, n: int, seed: int | np.random.Generator, *, min_len: int = 10, max_len: int = 30):
    """``n`` texts (word-index arrays) of ``min_len``–``max_len`` words from the SLALOM data
    set's distribution (words uniform over ``vocab``, lengths uniform), with their true log-odds."""
    data = sample_slalom_dataset(n, seed, vocab=vocab, min_len=min_len, max_len=max_len)
    return data.sequences, data.log_odds


def _centred(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    return x - x.mean()


def _share(mask: np.ndarray) -> float:
    return float(np.mean(mask)) if mask.size else float("nan")


def text_metrics(
    importance: np.ndarray,
    importance_se: np.ndarray,
    determined: np.ndarray,
    value: np.ndarray | None,
    value_se: np.ndarray | None,
    true_value: np.ndarray,
    true_importance: np.ndarray,
    *,
    learned_value: np.ndarray | None = None,
    learned_importance: np.ndarray | None = None,
    short_value: np.ndarray | None = None,
    short_importance: np.ndarray | None = None,
    z: float = Z,
) -> dict:
    """The study's numbers for one text, from per-unique-word arrays.

    ``importance`` (mean zero over the text's unique words, as the engine reports it),
    ``importance_se`` and ``determined`` come from one fit; ``value`` / ``value_se`` from a fit
    with ``reference=0.0`` (None: skipped). ``true_*``, ``learned_*`` (a global SLALOM fitted
    to the model) and ``short_*`` (one fitted to the model on 2-word inputs) are the same
    words' parameters; importances are re-centred over these words
    (softmax is shift-invariant), so the comparison is on the engine's scale.
    """
    imp = np.asarray(importance, dtype=np.float64)
    se = np.asarray(importance_se, dtype=np.float64)
    det = np.asarray(determined, dtype=bool)
    out: dict = {"n_units": int(imp.size), "n_determined": int(det.sum())}
    refs = {"truth": (true_value, true_importance)}
    if learned_importance is not None:
        refs["learned"] = (learned_value, learned_importance)
    if short_importance is not None:
        refs["short"] = (short_value, short_importance)
    for name, (ref_v, ref_s) in refs.items():
        ref_s = _centred(ref_s)
        z_s = np.abs(imp - ref_s) / se
        out[f"spearman_{name}"] = spearman(imp, ref_s)
        out[f"spearman_{name}_determined"] = spearman(imp[det], ref_s[det]) if det.sum() >= 3 else float("nan")
        out[f"cover_s_{name}"] = _share(z_s[det] <= z)
        out[f"cover_s_all_{name}"] = _share(z_s <= z)
        out[f"n_cover_s_{name}"] = int(np.sum(z_s[det] <= z))
        out[f"median_abs_err_s_{name}"] = float(np.median(np.abs(imp - ref_s)))
        if value is not None and ref_v is not None:
            z_v = np.abs(np.asarray(value, dtype=np.float64) - np.asarray(ref_v, dtype=np.float64)) / np.asarray(
                value_se
            )
            out[f"cover_v_{name}"] = _share(z_v <= z)
            out[f"n_cover_v_{name}"] = int(np.sum(z_v <= z))
    if learned_importance is not None:
        # the ceiling set by the model: how well the global SLALOM ranks the true importances
        out["spearman_learned_vs_truth"] = spearman(_centred(learned_importance), _centred(true_importance))
    out["median_se_s_determined"] = float(np.median(se[det])) if det.any() else float("nan")
    return out


def _per_unit(exp, id_offset: int) -> dict:
    """Per unique unit (in the surrogate's order): its word index and the reported numbers."""
    first = np.array([int(np.flatnonzero(exp.unit_index == u)[0]) for u in range(len(exp.surrogate.importance))])
    return {
        "word": np.array([exp.token_ids[p][0] - id_offset for p in first], dtype=np.int64),
        "importance": exp.importance[first],
        "importance_se": exp.importance_se[first],
        "determined": exp.importance_determined[first],
        "value": exp.value[first],
        "value_se": exp.value_se[first],
    }


def evaluate_texts(
    model: object,
    sequences: Sequence[Sequence[int]],
    true_value: np.ndarray,
    true_importance: np.ndarray,
    *,
    tokenizer: object | None = None,
    id_offset: int = 0,
    learned: sc.SlalomSurrogate | None = None,
    learned_short: sc.SlalomSurrogate | None = None,
    n_samples: int = 1000,
    seed: int = 0,
    method: str = "eff",
    repeat_seed: int | None = None,
    **fit_options,
) -> list[dict]:
    """Explain each text locally and compare with the truth (and the learned global SLALOM).

    ``model`` and ``tokenizer`` are passed to :func:`slalom_core.explain_batch`; a text's
    token ids are its word indices plus ``id_offset``. Each text is explained twice with the
    same seed: with the default reference (importances, their SEs, held-out R²) and with
    ``reference=0.0`` (values on the truth's scale). With ``repeat_seed``, a third fit with
    that seed checks the SEs against the fit's own sampling spread: the share of importances
    determined in both fits whose difference is within 2·sqrt(SE₁² + SE₂²).
    """
    ids = [[int(w) + id_offset for w in seq] for seq in sequences]
    kw = dict(tokenizer=tokenizer, method=method, n_samples=n_samples, seed=seed, **fit_options)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # fit quality is measured here, not warned about
        exps = sc.explain_batch(model, ids, **kw)
        exps0 = sc.explain_batch(model, ids, reference=0.0, **kw)
        again = [None] * len(ids)
        if repeat_seed is not None:
            again = sc.explain_batch(model, ids, **{**kw, "seed": repeat_seed})
    rows = []
    for seq, exp, exp0, exp1 in zip(sequences, exps, exps0, again):
        a, b = _per_unit(exp, id_offset), _per_unit(exp0, id_offset)
        if not np.array_equal(a["word"], b["word"]) or not np.array_equal(np.sort(a["word"]), np.unique(seq)):
            raise AssertionError("unit order differs between the two fits")
        words = a["word"]
        row = text_metrics(
            a["importance"],
            a["importance_se"],
            a["determined"],
            b["value"],
            b["value_se"],
            np.asarray(true_value)[words],
            np.asarray(true_importance)[words],
            learned_value=None if learned is None else learned.value[words],
            learned_importance=None if learned is None else learned.importance[words],
            short_value=None if learned_short is None else learned_short.value[words],
            short_importance=None if learned_short is None else learned_short.importance[words],
        )
        # the same importance numbers from the reference-0 fit (the value prior may move them)
        row["spearman_truth_ref0"] = spearman(b["importance"], _centred(np.asarray(true_importance)[words]))
        row["n_words"] = len(seq)
        row["heldout_r2"] = float(exp.diagnostics.get("heldout_r2", float("nan")))
        row["fit_converged"] = bool(exp.diagnostics.get("fit_converged", True))
        row["prior_sd"] = exp.diagnostics.get("prior_sd")
        true_s = _centred(np.asarray(true_importance)[words])
        row["slope_truth"] = _slope(a["importance"], true_s)
        units = {
            "word": words,
            "importance": a["importance"],
            "importance_se": a["importance_se"],
            "determined": a["determined"],
            "value": b["value"],
            "value_se": b["value_se"],
            "true_importance": true_s,
            "true_value": np.asarray(true_value)[words],
        }
        if learned is not None:
            row["slope_learned"] = _slope(a["importance"], _centred(learned.importance[words]))
            units["learned_importance"] = _centred(learned.importance[words])
            units["learned_value"] = learned.value[words]
        if learned_short is not None:
            row["slope_short"] = _slope(a["importance"], _centred(learned_short.importance[words]))
            units["short_importance"] = _centred(learned_short.importance[words])
        if exp1 is not None:
            c = _per_unit(exp1, id_offset)
            both = a["determined"] & c["determined"]
            z = np.abs(a["importance"] - c["importance"]) / np.hypot(a["importance_se"], c["importance_se"])
            row["n_det_both"] = int(both.sum())
            row["n_cover_s_repeat"] = int(np.sum(z[both] <= Z))
            units["importance_repeat"] = c["importance"]
        row["units"] = {k: np.asarray(v).tolist() for k, v in units.items()}
        rows.append(row)
    return rows


def _slope(est: np.ndarray, ref: np.ndarray) -> float:
    """Least-squares slope of the estimates on the reference (both mean zero): 1 = same scale."""
    den = float(np.sum(ref**2))
    return float(np.sum(est * ref) / den) if den > 0 else float("nan")


def _nanmean(x) -> float:
    x = np.asarray(x, dtype=np.float64)
    return float(np.nanmean(x)) if np.isfinite(x).any() else float("nan")


def summarise(rows: list[dict], threshold: float = 0.9) -> dict:
    """Mean, median and share ≥ ``threshold`` of the per-text Spearman; pooled coverage
    (every determined importance, every value, over all texts) and per-text means."""
    out: dict = {"n_texts": len(rows)}
    for key in (
        "spearman_truth",
        "spearman_learned",
        "spearman_short",
        "spearman_truth_ref0",
        "spearman_learned_vs_truth",
    ):
        if rows and key in rows[0]:
            x = np.array([r[key] for r in rows], dtype=np.float64)
            out[key] = {
                "mean": _nanmean(x),
                "median": float(np.nanmedian(x)) if np.isfinite(x).any() else float("nan"),
                "share_ge": float(np.mean(x >= threshold)),
            }
    n_det = np.array([r["n_determined"] for r in rows])
    n_units = np.array([r["n_units"] for r in rows])
    out["n_determined"] = {"total": int(n_det.sum()), "units": int(n_units.sum()), "mean_per_text": _nanmean(n_det)}
    for ref in ("truth", "learned", "short"):
        if rows and f"cover_s_{ref}" in rows[0]:
            out[f"cover_s_{ref}"] = float(sum(r[f"n_cover_s_{ref}"] for r in rows) / max(1, n_det.sum()))
            out[f"cover_s_all_{ref}"] = _nanmean([r[f"cover_s_all_{ref}"] for r in rows])
            out[f"spearman_{ref}_determined"] = _nanmean([r[f"spearman_{ref}_determined"] for r in rows])
            out[f"median_abs_err_s_{ref}"] = _nanmean([r[f"median_abs_err_s_{ref}"] for r in rows])
        if rows and f"cover_v_{ref}" in rows[0]:
            out[f"cover_v_{ref}"] = float(sum(r[f"n_cover_v_{ref}"] for r in rows) / max(1, n_units.sum()))
    for ref in ("truth", "learned", "short"):
        if rows and f"slope_{ref}" in rows[0]:
            out[f"slope_{ref}_median"] = float(np.nanmedian([r[f"slope_{ref}"] for r in rows]))
    if rows and "n_det_both" in rows[0]:
        both = sum(r["n_det_both"] for r in rows)
        out["cover_s_repeat"] = float(sum(r["n_cover_s_repeat"] for r in rows) / both) if both else float("nan")
    r2 = np.array([r.get("heldout_r2", np.nan) for r in rows], dtype=np.float64)
    out["heldout_r2"] = {
        "mean": _nanmean(r2),
        "median": float(np.nanmedian(r2)) if np.isfinite(r2).any() else float("nan"),
    }
    out["share_converged"] = float(np.mean([r.get("fit_converged", True) for r in rows]))
    out["median_se_s_determined"] = _nanmean([r["median_se_s_determined"] for r in rows])
    return out


def _mse(a, b) -> float:
    return float(np.mean((np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)) ** 2))


def _suffix(cfg: dict) -> str:
    return f" [{json.dumps(cfg)}]" if cfg else ""


def run_study(
    *,
    archs: Sequence[str] = ("bert",),
    layers: Sequence[int] = (1,),
    n_texts: int = 50,
    min_len: int = 10,
    max_len: int = 30,
    n_words: int = 50,
    n_samples: int = 1000,
    seed: int = 0,
    fit_seed: int = 0,
    n_fit: int = 10000,
    epochs: int = 6,
    samples_per_epoch: int = 5000,
    batch_size: int = 20,
    lr: float = 1e-3,
    hidden_size: int = 64,
    n_heads: int = 4,
    vocab_seed: int = 0,
    control_noise: float | None = 0.1,
    num_threads: int | None = 1,
    log=print,
    fit_configs: Sequence[dict] = ({},),
    repeat_seed: int | None = None,
) -> dict:
    """Train each model (run_fig4cd's settings and training cache), fit its global SLALOM,
    explain ``n_texts`` fresh texts locally and compare. Returns a JSON-serialisable dict.

    ``fit_configs``: fitter options, one study row per model and entry (``{}``: the engine's
    defaults); every configuration explains the same texts with the same trained model.
    """
    if "gpt2" in archs:
        raise ValueError("gpt2 is not supported here: word i is assumed to be token id i + 5 in a [CLS] … [SEP] frame")
    vocab = make_slalom_vocabulary(200 if n_words <= 200 else n_words, vocab_seed).first(n_words)
    seqs, true_log_odds = sample_texts(
        vocab, n_texts, np.random.default_rng([seed, 11]), min_len=min_len, max_len=max_len
    )
    models = []
    if control_noise is not None:
        for cfg in fit_configs:
            t0 = time.perf_counter()
            # its noise is a fresh draw per sample, as the Laplace standard errors assume
            truth = sc.TorchClassifier(
                SlalomTruthModel(vocab.value, vocab.importance, control_noise, seed=seed), deterministic=False
            )
            rows = evaluate_texts(
                truth,
                seqs,
                vocab.value,
                vocab.importance,
                n_samples=n_samples,
                seed=fit_seed,
                repeat_seed=repeat_seed,
                **cfg,
            )
            models.append(
                {
                    "label": f"ground-truth SLALOM + N(0, {control_noise:g}²) noise (control){_suffix(cfg)}",
                    "fit_options": cfg,
                    "summary": summarise(rows),
                    "rows": rows,
                    "explain_seconds": time.perf_counter() - t0,
                }
            )
            log(f"control{_suffix(cfg)} done in {time.perf_counter() - t0:.0f}s")
    train = training_kwargs(epochs, samples_per_epoch, batch_size, lr, num_threads)
    for arch in archs:
        for n_layers in layers:
            spec = ModelSpec(arch=arch, n_layers=n_layers, hidden_size=hidden_size, n_heads=n_heads, max_len=max_len)
            t0 = time.perf_counter()
            _, run_seed, clf = next(
                trained_runs(
                    spec,
                    slalom_sampler(vocab, max_len),
                    n_runs=1,
                    seed=seed,
                    train=train,
                    cache_key=("slalom", n_words, max_len, vocab_seed),
                    soft_labels=True,
                )
            )
            train_s = time.perf_counter() - t0
            log(f"{clf.label}: trained in {train_s:.0f}s")
            fit = sample_slalom_dataset(n_fit, np.random.default_rng([run_seed, 7]), vocab=vocab, max_len=max_len)
            with torch_threads(num_threads):
                t0 = time.perf_counter()
                learned = fit_global_slalom(fit.sequences, clf.log_odds(fit.sequences), n_words)
                y_model = clf.log_odds(seqs)
                # what eff's samples probe: the model on 2 words drawn uniformly with replacement
                pairs = list(np.random.default_rng([run_seed, 13]).integers(0, n_words, size=(n_fit, 2)))
                learned_short = fit_global_slalom(pairs, clf.log_odds(pairs), n_words)
                global_s = time.perf_counter() - t0
                for cfg in fit_configs:
                    t0 = time.perf_counter()
                    rows = evaluate_texts(
                        clf.model,
                        seqs,
                        vocab.value,
                        vocab.importance,
                        tokenizer=clf.tokenizer,
                        id_offset=len(SPECIAL_TOKENS),
                        learned=learned,
                        learned_short=learned_short,
                        n_samples=n_samples,
                        seed=fit_seed,
                        repeat_seed=repeat_seed,
                        **cfg,
                    )
                    y_learned = learned.predict(np.stack([np.bincount(s, minlength=n_words) for s in seqs]))
                    models.append(
                        {
                            "label": clf.label + _suffix(cfg),
                            "arch": arch,
                            "n_layers": n_layers,
                            "fit_options": cfg,
                            "summary": summarise(rows),
                            "model_vs_truth_mse": _mse(y_model, true_log_odds),
                            "global_vs_model_mse": _mse(y_learned, y_model),
                            "global_importance_spearman_vs_truth": spearman(learned.importance, vocab.importance),
                            "short_importance_spearman_vs_truth": spearman(learned_short.importance, vocab.importance),
                            "short_importance_spearman_vs_global": spearman(
                                learned_short.importance, learned.importance
                            ),
                            "train_seconds": train_s,
                            "global_fit_seconds": global_s,
                            "explain_seconds": time.perf_counter() - t0,
                            "rows": rows,
                        }
                    )
                    log(f"{clf.label}{_suffix(cfg)}: explained in {time.perf_counter() - t0:.0f}s")
    return {
        "settings": {
            "n_texts": n_texts,
            "lengths": [min_len, max_len],
            "n_words": n_words,
            "n_samples": n_samples,
            # A fit config may name its method ({"method": "hybrid"}); eff otherwise.
            "method": sorted({cfg.get("method", "eff") for cfg in fit_configs}),
            "fit_configs": list(fit_configs),
            "seed": seed,
            "fit_seed": fit_seed,
            "repeat_seed": repeat_seed,
            "n_fit": n_fit,
            "training": {**train, "soft_labels": True, "hidden_size": hidden_size, "n_heads": n_heads},
            "vocab_seed": vocab_seed,
            "z": Z,
        },
        "models": models,
    }


def _options(text: str) -> dict:
    """Fitter options from JSON; lists become tuples (``"sample_length": [1, 3]``)."""
    return {k: tuple(v) if isinstance(v, list) else v for k, v in json.loads(text).items()}


def main(argv: Sequence[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="folder for results.md / results.json")
    ap.add_argument("--archs", default="bert", help="comma-separated: bert, distilbert")
    ap.add_argument("--layers", default="1", help="comma-separated layer counts")
    ap.add_argument("--n-texts", type=int, default=50)
    ap.add_argument("--n-samples", type=int, default=1000)
    ap.add_argument("--min-len", type=int, default=10)
    ap.add_argument("--max-len", type=int, default=30)
    ap.add_argument("--seed", type=int, default=0, help="training and text seed")
    ap.add_argument("--fit-seed", type=int, default=0, help="seed of the local fits")
    ap.add_argument("--epochs", type=int, default=6)
    ap.add_argument("--samples-per-epoch", type=int, default=5000)
    ap.add_argument("--repeat-seed", type=int, default=1, help="seed of a repeat fit checking the SEs (<0: none)")
    ap.add_argument("--hidden-size", type=int, default=64)
    ap.add_argument("--n-fit", type=int, default=10000, help="samples for the global SLALOM")
    ap.add_argument("--control-noise", type=float, default=0.1, help="noise sd of the control (<0: no control)")
    ap.add_argument(
        "--fit-options",
        action="append",
        default=None,
        help="fitter options as JSON, e.g. '{\"prior_sd\": 1.0}'; repeat for more rows (default: {}, the engine defaults)",
    )
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    result = run_study(
        archs=[a for a in args.archs.split(",") if a],
        layers=[int(n) for n in args.layers.split(",") if n],
        n_texts=args.n_texts,
        n_samples=args.n_samples,
        min_len=args.min_len,
        max_len=args.max_len,
        seed=args.seed,
        fit_seed=args.fit_seed,
        epochs=args.epochs,
        samples_per_epoch=args.samples_per_epoch,
        hidden_size=args.hidden_size,
        n_fit=args.n_fit,
        repeat_seed=None if args.repeat_seed < 0 else args.repeat_seed,
        control_noise=None if args.control_noise < 0 else args.control_noise,
        num_threads=args.threads,
        fit_configs=[_options(c) for c in args.fit_options] if args.fit_options else [{}],
    )
    result["wall_seconds"] = time.perf_counter() - t0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    md = markdown(result)
    (out / "results.md").write_text(md + f"\nWall time: {result['wall_seconds']:.0f} s.\n")
    (out / "results.json").write_text(json.dumps(result, indent=1, default=float))
    print(md)
    return result


if __name__ == "__main__":
    main()
