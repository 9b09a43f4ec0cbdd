"""``refit_flagged``: the texts a pipeline's run flagged, explained per text, once the model
and the data have been checked to be the run's own.

A refit re-reads two things the run used: its model and its data file. Both are checked
before any text is explained:

* the model, by its fingerprint (:func:`~slalom_core.models.fingerprint.model_fingerprint`:
  weights, config and tokenizer): another model is refused, whatever its name;
* the data, by the texts the run explained: every finished chunk's ids and text digests
  (the marker fingerprints a resume checks) must still be in the file, and the file must
  hold as many rows. An edited, shortened or longer file is refused, naming the texts.
"""

from __future__ import annotations

from pathlib import Path

from ..corpus import CorpusRun, CorpusSource, explain_corpus
from ..corpus.loading import ModelLoader, load_model, model_name
from ..corpus.resume import changed_texts
from ..models.fingerprint import model_fingerprint
from .pipeline import AUTO, read_plan

__all__ = ["refit_flagged"]


def refit_flagged(
    model: object,
    run: CorpusRun | str | Path,
    tokenizer: object | None = None,
    *,
    out: str | Path | None = None,
    resume: bool = False,
    **options,
) -> CorpusRun | None:
    """Explain per text the texts a pipeline's run flagged (out of distribution or a poor
    audit), with the labels' method, budget and seed, into a run of their own.

    Args:
        model, tokenizer: the run's own model. Its fingerprint (weights, config, tokenizer)
            must equal the one the run's manifest records; another model is refused.
        run: a run written by :func:`~.pipeline.explain_corpus_amortized`.
        out: where to write. Default: ``RUN/auto/refit``.
        resume: continue an interrupted refit.
        **options: more options of :func:`~slalom_core.corpus.explain_corpus` (engine,
            batch_size, device, show_progress, ...).

    Returns:
        The per-text run of the flagged texts; None when none was flagged (then no run is
        written).

    Raises:
        ValueError: ``run`` is no pipeline run, ``model`` is not the run's model, or the
            data file no longer holds the texts the run explained (edited, rows added or
            removed): nothing is written.

    Example:
        >>> refit = refit_flagged(model, "runs/reviews", tok)  # doctest: +SKIP
        >>> refit.explanation(refit.texts().id[0])  # doctest: +SKIP
    """
    run = run if isinstance(run, CorpusRun) else CorpusRun(run)
    quality = run.quality()
    plan = read_plan(run.path / AUTO)
    if quality is None or plan is None:
        raise ValueError(f"{str(run.path)!r} is not a run of explain_corpus_amortized (no quality table or plan)")
    flagged = quality.loc[quality["flagged"], "id"].astype(str).tolist()
    if not flagged:
        return None
    loaded, loaded_tok = load_model(model, tokenizer)
    name = model_name(model)
    check_model(run, model_fingerprint(loaded, loaded_tok, name=name))
    inp, opts = run.manifest["input"], plan["options"]
    columns = dict(text_column=inp["text_column"], id_column=inp["id_column"], label_column=inp["label_column"])
    check_data(run, CorpusSource(inp["data"], limit=inp["limit"], **columns).scan())
    if options.get("engine", "local") == "local":  # this copy, not a second load
        model, tokenizer = ModelLoader(lambda: (loaded, loaded_tok), name=name), None
    return explain_corpus(
        model,
        inp["data"],
        out if out is not None else run.path / AUTO / "refit",
        tokenizer,
        **columns,
        limit=inp["limit"],
        ids=flagged,
        method=opts["method"],
        n_samples=opts["n_samples"],
        seed=opts["seed"],
        truncate=run.manifest["options"].get("truncate", True),
        resume=resume,
        **options,
    )


def check_model(run: CorpusRun, fingerprint: dict) -> None:
    """Refuse a model whose fingerprint is not the one ``run`` was explained with.

    Example:
        >>> check_model(CorpusRun("runs/r"), model_fingerprint(model, tok))  # doctest: +SKIP
    """
    recorded = run.manifest.get("model")
    if not isinstance(recorded, dict) or "digest" not in recorded:
        raise ValueError(
            f"{str(run.path)!r} records its model without a fingerprint (an older slalom-xai): a refit cannot check "
            "that it uses the run's model; explain the flagged ids with explain_corpus(ids=...) into a new folder"
        )
    if recorded["digest"] != fingerprint["digest"]:
        raise ValueError(
            f"cannot refit {str(run.path)!r}: it was explained with the model {recorded.get('name')!r} "
            f"(fingerprint {recorded['digest']}), this call's is {fingerprint['name']!r} (fingerprint "
            f"{fingerprint['digest']}); their weights, config or tokenizer differ. Refit with the run's own model "
            "(leave out --model to load the one its manifest names); nothing was written"
        )


def check_data(run: CorpusRun, source: CorpusSource) -> None:
    """Refuse data that no longer hold the texts ``run`` explained (``source``: the run's
    data file as it is now, scanned with the run's columns and limit).

    Example:
        >>> check_data(CorpusRun("runs/r"), CorpusSource("reviews.jsonl").scan())  # doctest: +SKIP
    """
    was = run.manifest["input"].get("n_rows")
    changed, unchecked = changed_texts(run.path, source)
    ids = sorted({i for chunk in changed.values() for i in chunk})
    if was != source.n_rows or ids or unchecked:
        said = [f"it held {was} rows, it now holds {source.n_rows}"] if was != source.n_rows else []
        if ids:
            shown = ", ".join(repr(i) for i in ids[:5]) + (", ..." if len(ids) > 5 else "")
            said.append(f"the chunks of {len(ids)} explained texts ({shown}) hold ids or texts it no longer has")
        if unchecked:
            said.append(f"{len(unchecked)} chunks were written without a fingerprint and cannot be checked")
        raise ValueError(
            f"cannot refit {str(run.path)!r}: its data file {str(source.data)!r} changed since the run "
            f"({'; '.join(said)}); the flags are those of the old texts. Explain the data again into a new "
            "folder, or restore the file; nothing was written"
        )
