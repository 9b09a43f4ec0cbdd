"""The amortized pipeline's command line: ``explain --amortized auto`` (what it prints) and
``refit`` (the flagged texts of such a run, per text)."""

from __future__ import annotations

import argparse
from functools import partial

from ..models.quiet import quiet_transformers
from .common import load_pair, one_line_errors, quiet_weight_loading, run_model_name, spec_name
from .format import subcommand

__all__ = ["explain_auto", "add_refit", "run_refit"]


def explain_auto(args: argparse.Namespace, model, options: dict) -> int:
    """``explain --amortized auto``: the pipeline (``options``: :func:`~.common.run_options`),
    then its audit and flags in a few lines."""
    from ..amortized.pipeline import AUDIT_SHARE, explain_corpus_amortized
    from ..corpus.card import audit_coverage

    if args.option or args.granularity != "token" or args.target is not None:
        raise ValueError(
            "--amortized auto explains tokens of class 1 as its head is trained: leave out --option, "
            "--target and --granularity"
        )
    run = explain_corpus_amortized(
        model,
        args.data,
        args.out,
        method=args.method,
        n_samples=args.n_samples,
        seed=args.seed,
        label_texts=args.label_texts,
        audit=AUDIT_SHARE if args.audit is None else args.audit,
        audit_samples=args.audit_samples,
        **options,
    )
    auto = run.manifest["auto"]
    aud, flags = auto["audit"], auto["flags"]
    n = run.texts()["id"].nunique()
    rho = aud["value_spearman"]["mean"]
    print(
        f"{run.path}: {n} texts explained by a head trained on {auto['labels']['n_explained']} per-text fits; "
        f"audit of {audit_coverage(aud, n)}: value Spearman "
        + ("n/a" if rho is None else f"{rho:.3f} mean, {aud['value_spearman']['p10']:.3f} at the 10th percentile")
        + f"; {flags['n_flagged']} flagged ({flags['n_ood']} out of distribution, {flags['n_poor_audit']} poor audit, "
        f"{flags.get('n_fit_flags', 0)} by the fit-quality rule)"
    )
    order = ("labels", "head", "explain", "audit", "quality")  # the pipeline's, not the file's
    stages = ", ".join(f"{k} {auto['stages'][k]['seconds']:.0f} s" for k in order if k in auto["stages"])
    print(f"stages: {stages}; re-explain the flagged texts per text: slalom-xai refit {run.path}")
    return 0


def add_refit(sub) -> None:
    p = subcommand(
        sub,
        "refit",
        "explain per text the texts an '--amortized auto' run flagged (out of distribution, poor audit)",
        "Fit the flagged texts of RUN per text, with the labels' method, budget and seed, into a run "
        "of their own (default RUN/auto/refit). The run's model (by fingerprint) and data (the texts it explained) "
        "are checked first: another model, or a data file changed since the run, is refused.",
    )
    p.add_argument("run", help="a folder written by `slalom-xai explain --amortized auto`")
    p.add_argument(
        "--model",
        default=None,
        help="the run's model (default: the one its manifest names); another model is refused by its fingerprint",
    )
    p.add_argument("--out", default=None, help="where to write (default: RUN/auto/refit)")
    p.add_argument("--resume", action="store_true", help="continue an interrupted refit")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run_refit)


@one_line_errors
def run_refit(args: argparse.Namespace) -> int:
    from ..amortized.refit import refit_flagged
    from ..corpus import CorpusRun, ModelLoader

    quiet_weight_loading()
    run = CorpusRun(args.run)
    spec = args.model if args.model is not None else run_model_name(run)
    model = ModelLoader(partial(load_pair, spec), name=spec_name(spec))
    with quiet_transformers():
        refit = refit_flagged(model, run, out=args.out, resume=args.resume, show_progress=not args.no_progress)
    if refit is None:
        print(f"{run.path}: no text is flagged; nothing to refit")
        return 0
    print(f"{refit.path}: {refit.texts()['id'].nunique()} flagged texts explained per text")
    return 0
