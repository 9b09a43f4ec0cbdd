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
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from functools import partial
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
from .head import EPOCHS, HIDDEN
from .quality import POOR_AUDIT, write_quality
from .sizes import AUDIT_SHARE, LABEL_TEXTS, audit_budget, check_pays, label_set_size

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
    audit_samples: int | None = None,
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
    epochs: int = EPOCHS,
    hidden: int = HIDDEN,
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
        method, n_samples: the per-text fits' method and budget (the labels'; the audit's
            method too).
        audit_samples: the audit's per-text budget. Default: None, that is ``n_samples`` but
            at least :data:`~.sizes.AUDIT_SAMPLES` (an audit agrees no better than its own
            fits repeat: cheap labels, a steady audit).
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
    _check_options(audit, poor_audit, label_texts, n_samples, epochs, hidden, audit_samples)
    out = Path(out)
    seed = _pipeline_seed(out, resume, seed)
    source = CorpusSource(
        data, text_column=text_column, id_column=id_column, limit=limit, label_column=label_column
    ).scan()
    check_pays(len(set(source.row_ids()) - set(source.duplicate_ids)), audit, label_texts)
    # Loaded once here for the head's training; the local stages reuse this copy, Ray's
    # workers load their own from the path or loader.
    loaded, loaded_tok = load_model(model, tokenizer)
    # Every stage's corpus-run settings (how it runs; the options are the stages' own).
    reading = dict(text_column=text_column, id_column=id_column, label_column=label_column, limit=limit)
    running = dict(chunk_size=chunk_size, truncate=truncate, engine=engine, batch_size=batch_size, device=device)
    ray = dict(ray_address=ray_address, num_workers=num_workers, num_gpus_per_worker=num_gpus_per_worker)
    settings = {**reading, **running, **ray, "show_progress": show_progress}
    stage_model, stage_tok = _stage_model(model, tokenizer, loaded, loaded_tok, engine)
    stages = _Stages(stage_model, stage_tok, data, out, settings, method=method, n_samples=n_samples, seed=seed)
    audit_n = audit_budget(n_samples, audit_samples)
    options = _PlanOptions(label_texts, audit, method, n_samples, seed, epochs, hidden, poor_audit, limit, audit_n)
    with store.run_lock(out / AUTO):  # one pipeline per run folder (each stage locks its own)
        _run_stages(stages, options, source, resume, loaded, loaded_tok)
    return CorpusRun(out)


@dataclass(frozen=True)
class _PlanOptions:
    """The pipeline's options as its plan records them (a resume with others is refused)."""

    label_texts: int | None
    audit: float
    method: str
    n_samples: int
    seed: int
    epochs: int
    hidden: int
    poor_audit: float
    limit: int | None
    audit_samples: int

    @property
    def head(self) -> dict:
        """The head's training options (:class:`AmortizedExplainer`)."""
        return {"epochs": self.epochs, "hidden": self.hidden}


def _pipeline_seed(out: Path, resume: bool, seed: int | None) -> int:
    """The run's seed (None: the plan's, on a resume, or a new draw), once ``out`` may be
    written: a folder holding results is refused without ``resume``."""
    auto = out / AUTO
    if not resume and not store.holds_no_results(out) or (not resume and (auto / _PLAN).exists()):
        raise FileExistsError(
            f"{str(out)!r} exists and is not empty; pass resume=True (--resume) to continue that run, or choose "
            "another output path (nothing was overwritten)"
        )
    if seed is None:
        old = read_json(auto / _PLAN) if resume else None
        seed = old["options"]["seed"] if old else int(torch.randint(0, 2**31 - 1, (1,)).item())
    return seed


def _stage_model(model: object, tokenizer: object, loaded: object, loaded_tok: object, engine: str) -> tuple:
    """The model as every stage's corpus run takes it: the pipeline's loaded copy (local), or
    as given (Ray's workers load their own)."""
    if engine == "local":
        return ModelLoader(partial(_loaded, loaded, loaded_tok), name=model_name(model)), None
    return model, tokenizer


def _run_stages(
    stages: _Stages, options: _PlanOptions, source: CorpusSource, resume: bool, loaded: object, loaded_tok: object
) -> None:
    """The plan, then labels, head, explain, audit and quality, each resumable and timed."""
    auto = stages.out / AUTO
    plan = _plan(auto, source, options, resume)
    state = read_json(auto / _STATE) or {}
    with _stage(auto, state, "labels"):
        labels = _per_text_stage(stages, auto / "labels", plan["label_ids"], stages.n_samples)
    with _stage(auto, state, "head"):
        head = _train_head(loaded, loaded_tok, labels, auto / "head", stages.out, seed=stages.seed, **options.head)
    with _stage(auto, state, "explain"):
        run = _head_stage(stages, auto / "head")
    audited = None
    if plan["audit_ids"]:
        with _stage(auto, state, "audit"):
            audited = _per_text_stage(stages, auto / "audit", plan["audit_ids"], options.audit_samples)
    _quality_stage(stages, options, plan, state, labels, head, run, audited)


def _check_options(
    audit: float,
    poor_audit: float,
    label_texts: int | None,
    n_samples: int,
    epochs: int,
    hidden: int,
    audit_samples: int | None,
) -> None:
    """The pipeline's own options, and the head's too, before the labels' minutes are spent."""
    _check("audit", audit, 0.0, 1.0)
    _check("poor_audit", poor_audit, -1.0, 1.0)
    for name, value in (("n_samples", n_samples), ("epochs", epochs), ("hidden", hidden)):
        _check(name, value, 1, integer=True)
    for name, value in (("label_texts", label_texts), ("audit_samples", audit_samples)):
        if value is not None:
            _check(name, value, 1, integer=True)


def _loaded(model: object, tokenizer: object) -> tuple[object, object]:
    """The model loaded once by the pipeline, as its local stages' loader hands it over."""
    return model, tokenizer


@dataclass(frozen=True)
class _Stages:
    """What the pipeline's corpus runs share: the model as each stage loads it, the data, the
    run folder, the corpus-run settings, and the per-text fits' options."""

    model: object
    tokenizer: object | None
    data: str | Path
    out: Path
    settings: dict
    method: str
    n_samples: int
    seed: int


@contextmanager
def _stage(auto: Path, state: dict, name: str) -> Iterator[None]:
    """Time one stage; the call that finished it records its seconds (a resumed one: its part)."""
    t0 = time.perf_counter()
    yield
    if name not in state:
        state[name] = {"seconds": time.perf_counter() - t0}
        write_json(auto / _STATE, state)


def _per_text_stage(stages: _Stages, folder: Path, ids: list[str], n_samples: int) -> CorpusRun:
    """Per-text fits of a subset (the labels, the audit) at ``n_samples``: a corpus run with the run's seed."""
    return explain_corpus(
        stages.model,
        stages.data,
        folder,
        stages.tokenizer,
        ids=ids,
        resume=has_manifest(folder),
        method=stages.method,
        n_samples=n_samples,
        seed=stages.seed,
        **stages.settings,
    )


def _head_stage(stages: _Stages, head_dir: Path) -> CorpusRun:
    """Every text explained by the head: the run itself."""
    out = stages.out
    return explain_corpus(
        stages.model,
        stages.data,
        out,
        stages.tokenizer,
        resume=has_manifest(out),
        seed=stages.seed,
        amortized=CorpusHead(head_dir),
        **stages.settings,
    )


def _quality_stage(
    stages: _Stages, options: _PlanOptions, plan: dict, state: dict, labels, explainer, run, audited
) -> None:
    """Per text, the audit's agreement, the OOD check and a flag; the totals in the manifest."""
    out = stages.out
    auto = out / AUTO
    t0 = time.perf_counter()
    # The label set as fitted: a label text whose per-text fit failed taught the head nothing.
    fitted = set(labels.texts()["id"].astype(str))
    summary = write_quality(run, audited, fitted, poor_audit=options.poor_audit)
    n_run = int(run.texts()["id"].nunique())
    state["quality"] = {"seconds": time.perf_counter() - t0}
    write_json(auto / _STATE, state)
    record = {
        "labels": {
            "run": f"{AUTO}/labels",
            "n_texts": len(plan["label_ids"]),
            "n_explained": int(labels.texts()["id"].nunique()),
            "method": options.method,
            "n_samples": options.n_samples,
            "chosen_by": "label_texts"
            if options.label_texts is not None
            else f"LABEL_TEXTS={LABEL_TEXTS} (measured curve)",
        },
        "head": {
            "folder": f"{AUTO}/head",
            "digest": explainer.digest,
            "epochs": options.epochs,
            "hidden": options.hidden,
        },
        # The share is what the audit covered (audited / texts in the run); the option asked for share_asked.
        "audit": dict(
            summary["audit"],
            run=f"{AUTO}/audit" if audited is not None else None,
            n_texts=n_run,
            share=summary["audit"]["n_audited"] / max(n_run, 1),
            share_asked=options.audit,
            n_samples=options.audit_samples,
        ),
        "flags": summary["flags"],
        "stages": state,
    }
    set_manifest_key(out, "auto", record)


def _plan(auto: Path, source: CorpusSource, options: _PlanOptions, resume: bool) -> dict:
    """The label and audit sets (drawn once from the seed), written first and checked on resume."""
    ids = source.row_ids()
    dup = source.duplicate_ids
    unique = [i for i in ids if i not in dup]
    n_labels, n_audit = label_set_size(len(unique), options.audit, options.label_texts)
    if n_labels < 1:
        raise ValueError(f"the corpus has {len(unique)} texts with unique ids: too few to train a head on")
    order = np.random.default_rng(options.seed).permutation(len(unique))
    plan = {
        "options": asdict(options),
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
