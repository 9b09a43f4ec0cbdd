"""The benchmark run: explain every selected text with every method, score each explanation
and collect the results (see :mod:`slalom_core.experiments.bench` for the conventions).
"""

from __future__ import annotations

import os
import platform
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from ...api import explain_batch
from ...fitting import get_fitter
from ...models import model_session
from .. import evaluation as ev
from ..baselines import RUNNERS, MethodSkipped, check_available
from ..bench_config import METHODS, METRICS, SLALOM_SCORES, BenchConfig, MethodInfo, fitter_options
from ..bench_context import BenchContext, Instance, Scores
from ..data import read_jsonl
from .instances import build_nb_table, load_model, select_instances
from .report import format_markdown, summarise, write_outputs

__all__ = ["BenchResult", "run_benchmark", "run_slalom"]


def run_slalom(ctx: BenchContext, insts: Sequence[Instance], method: str) -> list[tuple[Scores, dict]]:
    """Explain texts with one of this engine's SLALOM fitters, in one ``explain_batch`` call.

    Args:
        ctx: the benchmark's model and configuration.
        insts: the texts (one text: per-text timing); texts of a multi-class model with
            different targets are explained one at a time.
        method: the fitter (``"eff"``, ``"fidel"``, ``"hybrid"``, ``"ana"``).

    Returns:
        Per text, ``({score name: per-position array}, diagnostics)`` with the model
        evaluations, the held-out R² and the seconds spent in the model and in the fit.

    Example:
        >>> ((scores, extra),) = run_slalom(ctx, [inst], "eff")  # doctest: +SKIP
        >>> sorted(scores)  # doctest: +SKIP
        ['importance', 'lin', 'removal', 'value']
    """
    target = ctx.explained_class(insts[0])
    if not ctx.binary and len({i.target for i in insts}) > 1:
        # One-vs-rest targets differ per text: a batch needs one target; run singly.
        return [r for inst in insts for r in run_slalom(ctx, [inst], method)]
    # A fitter of short samples only (eff, eff-slope, ana) gets the short-sample batch size.
    short = get_fitter(method, **fitter_options(method, ctx.config.slalom_options)).samples_short
    adapter = ctx.slalom_adapter if short else ctx.adapter
    exps = explain_batch(
        adapter,
        [i.token_ids for i in insts],
        method=method,
        n_samples=ctx.config.n_samples,
        target=target,
        seed=ctx.config.seed,
        **fitter_options(method, ctx.config.slalom_options),
    )
    out = []
    for e in exps:
        scores = {name: np.asarray(e.scores(name), dtype=float) for name in SLALOM_SCORES}
        d = e.diagnostics
        # Where the time went (model passes vs the engine's own work), for the tables' notes.
        out.append(
            (
                scores,
                {
                    "model_evaluations": int(d["model_evaluations"]),
                    "heldout_r2": float(d.get("heldout_r2", float("nan"))),
                    "model_seconds": float(d.get("model_seconds", float("nan"))),
                    "fit_seconds": float(d.get("fit_seconds", float("nan"))),
                },
            )
        )
    return out


def _warm_up(ctx: BenchContext, key: str, inst: Instance) -> None:
    """Run ``key`` once, untimed, on the first few words of ``inst`` with a small budget."""
    import dataclasses

    text = " ".join(inst.text.split()[:4])
    ids = list(ctx.tokenizer(text, add_special_tokens=False)["input_ids"])
    if not ids:
        return
    dummy = dataclasses.replace(inst, index=-1, text=text, token_ids=ids, tokens=[str(i) for i in ids], attention=None)
    config = ctx.config
    ctx.config = dataclasses.replace(config, n_samples=min(config.n_samples, max(16, 2 * len(ids) + 2)), lig_steps=2)
    try:
        if METHODS[key].family == "slalom":
            run_slalom(ctx, [dummy], key.split("-", 1)[1])
        else:
            RUNNERS[key](ctx, dummy)
    except Exception:
        pass  # a real failure shows up, with its message, in the timed run
    finally:
        ctx.config = config
        ctx.evaluations = 0


def _evaluate(
    ctx: BenchContext,
    inst: Instance,
    info: MethodInfo,
    score: str,
    values: np.ndarray,
    predict: Callable,
    nb_table: dict[int, float] | None,
) -> tuple[dict[str, float], dict[str, Any]]:
    values = np.asarray(values, dtype=float).reshape(-1)
    if values.shape[0] != inst.n_tokens:
        raise RuntimeError(f"{info.row_name(score)} gave {values.shape[0]} scores for {inst.n_tokens} tokens")
    unsigned = score in info.unsigned
    # Towards the predicted class; unsigned scores have no direction to flip.
    oriented = values if unsigned else ctx.sign(inst) * values
    if not np.all(np.isfinite(oriented)):
        # A degenerate explanation (e.g. a failed fit) cannot be ranked: record nan.
        return {m: float("nan") for m in METRICS}, {"error": "non-finite scores"}
    rep = ev.faithfulness_metrics(
        _predict_target(predict, inst.target),
        inst.token_ids,
        oriented,
        bins=ctx.config.bins,
        curve_fractions=ctx.config.curve_fractions,
        strategy=ctx.strategy,
        replacement_id=ctx.replacement_id,
    )
    metrics = rep.as_metrics()
    if inst.attention is not None:
        agr = ev.human_attention_agreement(values, inst.attention, absolute=not unsigned)
        metrics["hat_auc"], metrics["hat_auprc"] = agr.roc_auc, agr.auprc
    if nb_table is not None and ctx.binary:
        # NB log-ratios point to class 1, like the explained output before the flip.
        rho = ev.nb_spearman(inst.token_ids, values, nb_table, absolute_nb=unsigned)
        metrics["nb_spearman"] = rho.rho
    curves = {"deletion": rep.deletion_curve, "insertion": rep.insertion_curve}
    return metrics, curves


def _predict_target(predict: Callable, target: int) -> Callable[[list[list[int]]], np.ndarray]:
    """The metric's ``predict`` for one class from a memoised all-class predictor."""
    return lambda seqs: predict(seqs)[:, target]


@dataclass
class BenchResult:
    """What :func:`run_benchmark` produced.

    Attributes:
        config: the configuration (as run).
        instances: the selected texts.
        results: one :class:`slalom_core.experiments.evaluation.InstanceResult` per (row, text).
        summary: one dict per row (see :func:`summarise`).
        skipped: ``{method key: reason}`` for methods that could not run.
        errors: ``[(row, instance id, message)]`` for single runs that failed.
        markdown: the results table as markdown.
        files: output paths by name.
        info: model name, machine, accuracy on the selected texts, ...
    """

    config: BenchConfig
    instances: list[Instance]
    results: list[ev.InstanceResult]
    summary: list[dict[str, Any]]
    skipped: dict[str, str]
    errors: list[tuple[str, Any, str]]
    markdown: str
    files: dict[str, str]
    info: dict[str, Any] = field(default_factory=dict)


def _machine_info(ctx: BenchContext) -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "device": str(ctx.device),
        "load_average": os.getloadavg() if hasattr(os, "getloadavg") else None,
    }


def run_benchmark(
    config: BenchConfig,
    *,
    model: torch.nn.Module | None = None,
    tokenizer: object | None = None,
    model_name: str | None = None,
    write: bool = True,
) -> BenchResult:
    """Explain ``config.n`` texts with every method, score them, write tables and plots.

    Args:
        config: see :class:`BenchConfig`.
        model / tokenizer: an already loaded classifier (then ``config.model`` is only a
            label); default: :func:`load_model` of ``config.model``.
        model_name: display name for a model passed directly.
        write: write ``results.csv``, ``instances.csv``, ``results.md``, ``results.json``,
            ``deletion_curves.png``, ``insertion_curves.png`` and ``time_vs_aopc.png``
            into ``config.out``.

    Returns:
        A :class:`BenchResult`.

    Example:
        >>> res = run_benchmark(BenchConfig(model="default", data="imdb_test.jsonl",
        ...                                 n=3, n_samples=300, methods=("slalom-eff", "random")))  # doctest: +SKIP
        >>> [r["method"] for r in res.summary][:2]  # doctest: +SKIP
        ['slalom-eff/value', 'slalom-eff/importance']
    """
    config.validate()
    config.methods = tuple(dict.fromkeys(config.methods))
    if config.threads:
        torch.set_num_threads(int(config.threads))
    if model is None:
        model, tokenizer, name = load_model(config.model, device=config.device)
        return _run(config, model, tokenizer, name, write)
    if tokenizer is None:
        raise ValueError("a model passed directly needs its tokenizer")
    # The caller's model: run in eval mode (on config.device) and given back as it came,
    # every submodule's mode and its device restored, even if the benchmark fails.
    with model_session(model, config.device):
        return _run(config, model, tokenizer, model_name or config.model, write)


def _run(config: BenchConfig, model: torch.nn.Module, tokenizer: object, name: str, write: bool) -> BenchResult:
    """The body of :func:`run_benchmark` once the model is loaded (and in eval mode)."""
    ctx = BenchContext(config, model, tokenizer)

    limit = None
    if ctx.adapter.max_length is not None:
        limit = ctx.adapter.max_length - len(ctx.adapter.prefix_ids) - len(ctx.adapter.suffix_ids)
    max_tokens = (
        limit if config.max_tokens is None else (config.max_tokens if limit is None else min(config.max_tokens, limit))
    )
    rows = read_jsonl(config.data)
    instances = select_instances(
        rows,
        tokenizer,
        n=config.n,
        min_tokens=config.min_tokens,
        max_tokens=max_tokens,
        seed=config.seed,
        attention_field=config.attention_field,
    )
    if not instances:
        raise ValueError(f"no text in {config.data} has between {config.min_tokens} and {max_tokens} tokens")
    if len(instances) < config.n:
        print(f"note: only {len(instances)} texts fit the token window", file=sys.stderr)

    nb_table = None
    if config.nb_train:
        if ctx.binary:
            nb_table = build_nb_table(config.nb_train, tokenizer, alpha=config.nb_alpha, max_docs=config.nb_max_docs)
        else:
            print("note: NB Spearman needs a binary model; skipped", file=sys.stderr)

    predictors = {}
    # Warm-up (thread pools, lazy init) so that the first timed method is not penalised,
    # and the target of every text: the class the model predicts on the full text.
    for inst in instances:
        predictors[inst.index] = ctx.metric_predictor()
        p = predictors[inst.index]([inst.token_ids])[0]
        inst.target = int(np.argmax(p))
        inst.full_probability = float(p[inst.target])
    ctx.adapter.score([inst.token_ids[:3] for inst in instances[:8]])

    skipped: dict[str, str] = {}
    runnable = []
    for key in config.methods:
        try:
            check_available(key, METHODS[key].family, ctx)
            runnable.append(key)
        except MethodSkipped as err:
            skipped[key] = str(err)
            print(f"skipping {key}: {err}", file=sys.stderr)

    # First calls pay one-off costs (shap's numba JIT takes ~10 s, lazy imports, autograd
    # set-up): run every method once on a few words, untimed, so no method is charged.
    for key in list(runnable):
        _warm_up(ctx, key, instances[0])

    results: list[ev.InstanceResult] = []
    curves: dict[str, dict[str, list]] = {}
    errors: list[tuple[str, Any, str]] = []
    from tqdm.auto import tqdm

    bar = tqdm(total=len(instances) * len(runnable), desc="bench", disable=not config.progress, unit="run")

    def record(key: str, inst: Instance, scores: Scores, seconds: float, n_eval: int | None, extra: dict) -> None:
        info = METHODS[key]
        for score in info.scores:
            row = info.row_name(score)
            try:
                metrics, cur = _evaluate(ctx, inst, info, score, scores[score], predictors[inst.index], nb_table)
            except Exception as err:  # one bad row must not end a long run
                errors.append((row, inst.id, f"{type(err).__name__}: {err}"))
                continue
            for mode, c in cur.items():
                if c is not None:
                    curves.setdefault(row, {}).setdefault(mode, []).append(c)
            results.append(
                ev.InstanceResult(
                    row,
                    metrics,
                    seconds=seconds,
                    model_evaluations=n_eval,
                    instance_id=inst.id,
                    extra={"n_tokens": inst.n_tokens, "target": inst.target, **extra},
                )
            )

    for key in runnable:
        if METHODS[key].family != "slalom":
            continue
        method = key.split("-", 1)[1]
        for start in range(0, len(instances), config.slalom_batch):
            group = instances[start : start + config.slalom_batch]
            bar.set_postfix_str(key)
            t0 = time.perf_counter()
            try:
                outs = run_slalom(ctx, group, method)
            except Exception as err:
                for inst in group:
                    errors.append((key, inst.id, f"{type(err).__name__}: {err}"))
                bar.update(len(group))
                continue
            per_text = (time.perf_counter() - t0) / len(group)
            for inst, (scores, extra) in zip(group, outs):
                record(key, inst, scores, per_text, extra.pop("model_evaluations"), extra)
            bar.update(len(group))

    for inst in instances:
        for key in runnable:
            if METHODS[key].family == "slalom":
                continue
            bar.set_postfix_str(key)
            ctx.evaluations = 0
            t0 = time.perf_counter()
            try:
                scores, extra = RUNNERS[key](ctx, inst)
            except MethodSkipped as err:
                skipped.setdefault(key, str(err))
                bar.update(1)
                continue
            except Exception as err:
                errors.append((key, inst.id, f"{type(err).__name__}: {err}"))
                bar.update(1)
                continue
            seconds = time.perf_counter() - t0
            record(key, inst, scores, seconds, ctx.evaluations, extra)
            bar.update(1)
    bar.close()
    for row, iid, msg in errors:
        print(f"error: {row} on {iid}: {msg}", file=sys.stderr)

    info = {
        "model_name": name,
        "n_classes": ctx.n_classes,
        "explained_output": "log-odds of class 1, flipped towards the predicted class"
        if ctx.binary
        else "one-vs-rest log-odds of the predicted class",
        "removal": {"strategy": ctx.strategy, "replacement_id": ctx.replacement_id, "name": config.removal},
        "n_instances": len(instances),
        "mean_tokens": float(np.mean([i.n_tokens for i in instances])),
        "accuracy": _accuracy(instances),
        "has_attention": any(i.attention is not None for i in instances),
        "nb_table_size": None if nb_table is None else len(nb_table),
        "machine": _machine_info(ctx),
    }
    summary = summarise(results)
    markdown = format_markdown(summary, config=config, info=info, skipped=skipped, errors=errors)
    files: dict[str, str] = {}
    if write:
        files = write_outputs(
            config,
            summary=summary,
            results=results,
            curves=curves,
            markdown=markdown,
            info=info,
            skipped=skipped,
            errors=errors,
            instances=instances,
        )
    return BenchResult(config, instances, results, summary, skipped, errors, markdown, files, info)


def _accuracy(instances: Sequence[Instance]) -> float | None:
    labelled = [i for i in instances if i.label is not None]
    if not labelled:
        return None
    return float(np.mean([i.target == i.label for i in labelled]))
