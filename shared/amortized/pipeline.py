"""``explain_corpus_amortized``: a whole dataset in one call, from raw texts to an audited run.

The stages, each resumable (a killed call, restarted with ``resume=True``, keeps what
finished and gives the same scores):

1. **labels**: per-text fits of a random label set (``RUN/auto/labels``, a corpus run);
2. **head**: an :class:`AmortizedExplainer` trained on them (``RUN/auto/head``);
3. **explain**: every text explained by the head (``RUN`` itself: the usual tables);
4. **audit**: per-text fits of a random share of the other texts (``RUN/auto/audit``);
5. **quality**: per text, the audit's agreement, the out-of-distribution check and a flag
   (``RUN/quality.parquet``, :meth:`CorpusRun.quality`), and the totals in the manifest
   (``manifest["auto"]``).

The label and audit sets are drawn once from the run's seed and recorded in
``RUN/auto/plan.json``; a resume with other data or options is refused. Labels and audit are
ordinary corpus runs with the run's seed, so each of their texts has the scores a per-text
run of the whole corpus gives it.

Example:
    >>> run = explain_corpus_amortized(model, "reviews.jsonl", "runs/reviews", tok)  # doctest: +SKIP
    >>> run.manifest["auto"]["audit"]["value_spearman"]["mean"]  # doctest: +SKIP
    >>> run.quality().query("flagged")  # doctest: +SKIP
"""

from __future__ import annotations

import json
import math
import numbers
import shutil
import time
from pathlib import Path

import numpy as np
import torch

from ..api import DEFAULT_METHOD, DEFAULT_N_SAMPLES
from ..corpus import CorpusRun, CorpusSource, explain_corpus, store
from ..corpus.loading import ModelLoader, load_model, model_name
from ..files import has_manifest, read_json, set_manifest_key, write_json
from ..warn import warn_user
from .corpus_run import CorpusHead
from .explainer import AmortizedExplainer
from .quality import POOR_AUDIT, write_quality
from .sizes import AUDIT_SHARE, LABEL_TEXTS, check_pays, label_set_size

__all__ = [
    "explain_corpus_amortized",
    "read_plan",
    "label_set_size",
    "check_pays",
    "LABEL_TEXTS",
    "AUDIT_SHARE",
    "POOR_AUDIT",
    "AUTO",
]

#: The pipeline's folder inside the run.
AUTO = store.SIDECARS[0]
_PLAN = "plan.json"
_STATE = "state.json"


def _check(name: str, value: object, low: float, high: float | None = None, integer: bool = False) -> None:
    kind = numbers.Integral if integer else numbers.Real
    ok = not isinstance(value, bool) and isinstance(value, kind) and math.isfinite(value) and value >= low
    if not ok or (high is not None and value > high):
        span = f"at least {low}" if high is None else f"in [{low}, {high}]"
        raise ValueError(f"{name} must be {'an int' if integer else 'a number'} {span}, got {value!r}")


def explain_corpus_amortized(
    model: object,
    data: str | Path,
    out: str | Path,
    tokenizer: object | None = None,
    *,
    label_texts: int | None = None,
    audit: float = AUDIT_SHARE,
    method: str = DEFAULT_METHOD,
    n_samples: int = DEFAULT_N_SAMPLES,
    poor_audit: float = POOR_AUDIT,
    text_column: str = "text",
    id_column: str | None = "auto",
    label_column: str | None = "auto",
    limit: int | None = None,
    chunk_size: int = 64,
    resume: bool = False,
    truncate: bool = True,
    engine: str = "local",
    ray_address: str | None = None,
    num_workers: int | None = None,
    num_gpus_per_worker: float | None = None,
    seed: int | None = 0,
    batch_size: int | None = None,
    device: torch.device | str | None = None,
    epochs: int = 60,
    hidden: int = 256,
    show_progress: bool = True,
) -> CorpusRun:
    """Explain every text of a corpus with an amortized head trained and audited on the way.

    The one-call form of: a per-text run of a label set, ``AmortizedExplainer.fit`` on it,
    ``explain_corpus(amortized=...)`` over every text, and per-text fits of an audit share
    compared with the head's explanations of the same texts (``slalom-xai explain
    --amortized auto``). See the module's docstring for the stages and the folder's layout.

    Args:
        model, data, out, tokenizer: as in :func:`~slalom_core.corpus.explain_corpus`.
        label_texts: texts fitted per text to train the head on. Default: None, that is
            :data:`LABEL_TEXTS` (a smaller corpus: what the audit leaves).
        audit: share of the texts outside the label set fitted per text to check the head
            (0 to 1; at least :data:`MIN_AUDIT` texts when positive; 0: no audit).
            Default: :data:`AUDIT_SHARE`.
        method, n_samples: the per-text fits' method and budget (labels and audit).
        poor_audit: an audited text whose value Spearman against its per-text fit is below
            this is flagged. Default: :data:`POOR_AUDIT`.
        text_column, id_column, label_column, limit, chunk_size, truncate, engine,
            ray_address, num_workers, num_gpus_per_worker, batch_size, device,
            show_progress: as in :func:`~slalom_core.corpus.explain_corpus`, for every stage.
        resume: continue an interrupted call in ``out`` (every finished stage and chunk kept).
        seed: draws the label and audit sets, seeds the per-text fits and the head.
            None: drawn from torch's global generator and recorded (a resume reuses it).
        epochs, hidden: the head's training (:class:`AmortizedExplainer`).

    Returns:
        The run of every text (:class:`~slalom_core.corpus.CorpusRun`), with
        :meth:`~slalom_core.corpus.CorpusRun.quality` and ``manifest["auto"]``.

    Raises:
        ValueError: an option out of range, or a resume whose data or options differ.
        FileExistsError: ``out`` holds results and ``resume`` is False.

    Example:
        >>> run = explain_corpus_amortized("models/minilm-imdb", "reviews.jsonl", "runs/r")  # doctest: +SKIP
        >>> run.manifest["auto"]["audit"]["n_audited"]  # doctest: +SKIP
    """
    _check("audit", audit, 0.0, 1.0)
    _check("poor_audit", poor_audit, -1.0, 1.0)
    # The head's options too, before the labels' minutes are spent.
    for name, value in (("n_samples", n_samples), ("epochs", epochs), ("hidden", hidden)):
        _check(name, value, 1, integer=True)
    if label_texts is not None:
        _check("label_texts", label_texts, 1, integer=True)
    out = Path(out)
    auto = out / AUTO
    if not resume and not store.holds_no_results(out) or (not resume and (auto / _PLAN).exists()):
        raise FileExistsError(
            f"{str(out)!r} exists and is not empty; pass resume=True (--resume) to continue that run, or choose "
            "another output path (nothing was overwritten)"
        )
    if seed is None:
        old = read_json(auto / _PLAN) if resume else None
        seed = old["options"]["seed"] if old else int(torch.randint(0, 2**31 - 1, (1,)).item())
    source = CorpusSource(
        data, text_column=text_column, id_column=id_column, limit=limit, label_column=label_column
    ).scan()
    check_pays(len(set(source.row_ids()) - set(source.duplicate_ids)), audit, label_texts)
    # Loaded once here for the head's training; the local stages reuse this copy, Ray's
    # workers load their own from the path or loader.
    loaded, loaded_tok = load_model(model, tokenizer)
    if engine == "local":
        name = model_name(model)
        stage_model, stage_tok = ModelLoader(lambda: (loaded, loaded_tok), name=name), None
    else:
        stage_model, stage_tok = model, tokenizer
    common = dict(
        text_column=text_column,
        id_column=id_column,
        label_column=label_column,
        limit=limit,
        chunk_size=chunk_size,
        truncate=truncate,
        engine=engine,
        ray_address=ray_address,
        num_workers=num_workers,
        num_gpus_per_worker=num_gpus_per_worker,
        batch_size=batch_size,
        device=device,
        show_progress=show_progress,
    )
    options = {
        "label_texts": label_texts,
        "audit": audit,
        "method": method,
        "n_samples": n_samples,
        "seed": seed,
        "epochs": epochs,
        "hidden": hidden,
        "poor_audit": poor_audit,
        "limit": limit,
    }
    with store.run_lock(auto):  # one pipeline per run folder (each stage locks its own)
        plan = _plan(auto, source, options, resume)
        state = read_json(auto / _STATE) or {}
        fits = dict(method=method, n_samples=n_samples, seed=seed)

        def stage(name: str, work):
            t0 = time.perf_counter()
            result = work()
            if name not in state:  # the call that finished the stage (a resumed one: its part)
                state[name] = {"seconds": time.perf_counter() - t0}
                write_json(auto / _STATE, state)
            return result

        labels = stage(
            "labels",
            lambda: explain_corpus(
                stage_model,
                data,
                auto / "labels",
                stage_tok,
                ids=plan["label_ids"],
                resume=has_manifest(auto / "labels"),
                **fits,
                **common,
            ),
        )
        head_dir = auto / "head"
        explainer = stage(
            "head",
            lambda: _train_head(loaded, loaded_tok, labels, head_dir, out, seed=seed, epochs=epochs, hidden=hidden),
        )
        run = stage(
            "explain",
            lambda: explain_corpus(
                stage_model,
                data,
                out,
                stage_tok,
                resume=has_manifest(out),
                seed=seed,
                amortized=CorpusHead(head_dir),
                **common,
            ),
        )
        audited = None
        if plan["audit_ids"]:
            audited = stage(
                "audit",
                lambda: explain_corpus(
                    stage_model,
                    data,
                    auto / "audit",
                    stage_tok,
                    ids=plan["audit_ids"],
                    resume=has_manifest(auto / "audit"),
                    **fits,
                    **common,
                ),
            )
        t0 = time.perf_counter()
        # The label set as fitted: a label text whose per-text fit failed taught the head nothing.
        fitted = set(labels.texts()["id"].astype(str))
        summary = write_quality(run, audited, fitted, poor_audit=poor_audit)
        n_run = int(run.texts()["id"].nunique())
        state["quality"] = {"seconds": time.perf_counter() - t0}
        write_json(auto / _STATE, state)
        record = {
            "labels": {
                "run": f"{AUTO}/labels",
                "n_texts": len(plan["label_ids"]),
                "n_explained": int(labels.texts()["id"].nunique()),
                "method": method,
                "n_samples": n_samples,
                "chosen_by": "label_texts"
                if label_texts is not None
                else f"LABEL_TEXTS={LABEL_TEXTS} (measured curve)",
            },
            "head": {"folder": f"{AUTO}/head", "digest": explainer.digest, "epochs": epochs, "hidden": hidden},
            # The share is what the audit covered (audited / texts in the run); the option asked for share_asked.
            "audit": dict(
                summary["audit"],
                run=f"{AUTO}/audit" if audited is not None else None,
                n_texts=n_run,
                share=summary["audit"]["n_audited"] / max(n_run, 1),
                share_asked=audit,
            ),
            "flags": summary["flags"],
            "stages": state,
        }
        set_manifest_key(out, "auto", record)
    return CorpusRun(out)


def _plan(auto: Path, source: CorpusSource, options: dict, resume: bool) -> dict:
    """The label and audit sets (drawn once from the seed), written first and checked on resume."""
    ids = source.row_ids()
    dup = source.duplicate_ids
    unique = [i for i in ids if i not in dup]
    n_labels, n_audit = label_set_size(len(unique), options["audit"], options["label_texts"])
    if n_labels < 1:
        raise ValueError(f"the corpus has {len(unique)} texts with unique ids: too few to train a head on")
    order = np.random.default_rng(options["seed"]).permutation(len(unique))
    plan = {
        "options": options,
        "n_rows": source.n_rows,
        "label_ids": [unique[i] for i in order[:n_labels]],
        "audit_ids": [unique[i] for i in order[n_labels : n_labels + n_audit]],
    }
    plan = json.loads(json.dumps(plan))
    old = read_json(auto / _PLAN)
    if old is not None:
        if not resume:
            raise FileExistsError(f"{str(auto.parent)!r} holds a pipeline's run; pass resume=True to continue it")
        if old != plan:
            differ = [k for k in ("options", "n_rows") if old.get(k) != plan[k]] or ["texts (their ids)"]
            raise ValueError(
                f"cannot resume {str(auto.parent)!r}: its {', '.join(differ)} differ from this call's "
                f"(was {json.dumps(old.get('options'))}); use the same command, or another output path"
            )
        return old
    write_json(auto / _PLAN, plan)
    return plan


def _train_head(model, tok, labels: CorpusRun, folder: Path, out: Path, *, seed: int, epochs: int, hidden: int):
    """The head trained on the label run, or the one a previous call saved (a kill during
    training leaves no head: the save writes both files beside and renames them). A saved
    head whose label chunks were redone since (the data changed, a budget stop) is trained
    again, and the run's texts it explained are explained again."""
    if (folder / "config.json").exists():
        explainer = AmortizedExplainer.load(folder, model, tok)
        trained = explainer.config["trained_on"]
        if Path(trained["run"]).resolve() != labels.path.resolve():
            raise ValueError(
                f"{str(folder)!r} holds a head trained on another run ({trained['run']!r}): "
                "remove it, or start the pipeline in a new folder"
            )
        if trained.get("chunks") == store.content_digest(labels.path):
            return explainer
        warn_user(
            f"the label run {str(labels.path)!r} changed since its head was trained (label chunks were explained "
            "again: the data changed, or a budget stop was redone): the head is trained again and every text "
            "explained again with it",
            UserWarning,
        )
        for key in store.markers(out):  # the old head's explanations
            store.remove_chunk(out, key)
        (out / store.QUALITY).unlink(missing_ok=True)
        shutil.rmtree(folder)
    explainer = AmortizedExplainer(model, tok, epochs=epochs, hidden=hidden, seed=seed).fit(labels)
    explainer.save(folder)
    return explainer


def read_plan(auto: Path) -> dict | None:
    """The label and audit sets a pipeline's run drew (``RUN/auto/plan.json``), or None.

    Example:
        >>> read_plan(Path("runs/reviews") / AUTO)["label_ids"][:2]  # doctest: +SKIP
    """
    return read_json(auto / _PLAN)
