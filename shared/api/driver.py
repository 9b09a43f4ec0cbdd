"""``explain`` and ``explain_batch``: text in, :class:`SlalomExplanation` out.

The driver segments each text, hands the fitters' sample requests to the model adapter
(each text's in calls of its own), converts raw outputs to log-odds (:mod:`slalom_core.link`) and assembles
the results.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence

import numpy as np
import torch

from ..explanation import SlalomExplanation
from ..fitting import FitRequest, FitResult, Fitter, single_threaded_fits
from ..link import OutputLink, SlalomOutputWarning, declared_output, resolve_output, target_index
from ..models import ModelAdapter, OutputShapeError, Segmentation
from ..warn import warn_user
from .assemble import RoundZero, assemble
from .call import (
    DEFAULT_METHOD,
    DEFAULT_N_SAMPLES,
    CallOptions,
    CheckedCall,
    ProgressOption,
    ReferenceOption,
    check_call,
    reference_vector,
    text_seeds,
)
from .cost import UsageMeter
from .fit_warnings import NO_EMPTY_INPUT_ADVICE, NoEmptyInputError, warn_about_fits
from .plan import TextLike, TextPlan, prepare_texts
from .scoring import SampleProgress, SampleScorer, as_2d, book_round, check_rows

__all__ = ["explain", "explain_batch", "explain_checked", "progress_bar"]


def progress_bar(total: int, show: ProgressOption, desc: str):
    if not show:
        return None
    if callable(show):
        return show(total)
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc)


def explain_batch(
    model: object,
    texts: Sequence[TextLike],
    tokenizer: object | None = None,
    *,
    method: str | Fitter = DEFAULT_METHOD,
    n_samples: int = DEFAULT_N_SAMPLES,
    target: int | str | None = None,
    output: str = "auto",
    reference: ReferenceOption = "empty",
    multiclass: str = "joint",
    granularity: str = "token",
    seed: int | Sequence[int] | None = None,
    gamma: float = 0.0,
    truncate: bool = False,
    batch_size: int | None = None,
    device: torch.device | str | None = None,
    show_progress: ProgressOption = False,
    **fit_options: object,
) -> list[SlalomExplanation]:
    """Explain several texts in one call (one model session, one check of the options).

    Each text gets the random stream of ``seed``, so ``explain_batch(m, texts, seed=s)[i]``
    is ``explain(m, texts[i], seed=s)``: a text's samples are read in model calls of its
    own and its fit is solved alone, so its scores do not depend on the texts beside it
    (not even by float rounding, on one machine). A sequence of seeds gives text i the
    stream of ``seed[i]`` (what a corpus run uses, so that a text's scores do not depend on
    which chunk it falls in). The input with no tokens is scored once for all texts. Other
    arguments are those of :func:`explain`.

    The options are checked once (:func:`check_call`) and handed to :func:`explain_checked`.

    Example:
        >>> exps = explain_batch(model, ["great fun", "dull"], tokenizer=tok, seed=0)  # doctest: +SKIP
    """
    options = CallOptions(
        method=method,
        n_samples=n_samples,
        target=target,
        output=output,
        reference=reference,
        multiclass=multiclass,
        granularity=granularity,
        seed=seed,
        gamma=gamma,
        truncate=truncate,
        fit_options=fit_options,
    )
    return explain_checked(
        model, texts, tokenizer, check_call(options), batch_size=batch_size, device=device, show_progress=show_progress
    )


def explain_checked(
    model: object,
    texts: Sequence[TextLike],
    tokenizer: object | None,
    call: CheckedCall,
    *,
    batch_size: int | None = None,
    device: torch.device | str | None = None,
    show_progress: ProgressOption = False,
) -> list[SlalomExplanation]:
    """:func:`explain_batch` of options already checked (:func:`check_call`): what the entry
    points that check once for many calls hand on (a corpus run's chunks, a rows call's groups).

    The steps: :func:`~.plan.prepare_texts` (each text's checks and segmentation, before any
    model call), :func:`_round_zero` (the full texts and the empty input: what the outputs
    are, the reference point), :func:`_run_fits` (the fitters' rounds of model calls and
    batched fits) and :func:`~.assemble.assemble` (one explanation per text).

    Example:
        >>> call = check_call(CallOptions(method="eff", n_samples=200, seed=0))
        >>> exps = explain_checked(model, ["great fun", "dull"], tok, call)  # doctest: +SKIP
    """
    adapter, plans = prepare_texts(model, texts, tokenizer, call, batch_size, device)
    if isinstance(call.target, str):  # a class name: its index among the model's names
        call = dataclasses.replace(call, target=target_index(call.target, adapter.class_names))
    seeds = text_seeds(call.seed, len(plans))
    if not plans:
        return []
    meter = UsageMeter(adapter, call, plans, seeds)
    with adapter.session():
        empty = _empty_input(adapter, call.reference)
        # The bar counts the samples the fits ask for, a total known before the first model
        # call that never changes (SampleProgress); it moves as the model reads them (each
        # distinct sample once, so a short text's repeats move it at no cost).
        zero = len(plans) + (empty is not None)
        planned = zero + sum(call.fitter.samples_scored(len(p.units), call.n_samples) for p in plans)
        bar = progress_bar(planned, show_progress, "SLALOM samples")
        progress = None if bar is None else SampleProgress(bar, planned)
        scorer = SampleScorer(adapter, plans, progress)
        first = _round_zero(scorer, empty, call)
        results = _run_fits(scorer, call, plans, seeds, first)
        if progress is not None:
            progress.finish()
    api_usage = meter.call_usage()
    out = [assemble(p, results[i], seeds[i], call, first, api_usage) for i, p in enumerate(plans)]
    warn_about_fits(out)
    return out


def _empty_input(adapter: ModelAdapter, reference: np.ndarray | None) -> list[int] | None:
    """The input with no tokens when it is the reference point; None when one is given."""
    if reference is not None:
        return None
    empty = adapter.empty_sequence()
    if empty is None:
        raise NoEmptyInputError(NO_EMPTY_INPUT_ADVICE.format(why="this model has no input without tokens"))
    return empty


def _round_zero(scorer: SampleScorer, empty: list[int] | None, call: CheckedCall) -> RoundZero:
    """Score every full text and, once for all, the empty input; decide what the outputs are.

    These are the outputs being explained (kept as each plan's ``model_output``) and the
    default reference point, so they come before any sample. What the model returns is
    decided from all of them together (see :func:`resolve_output`), once per call. The
    empty input's evaluation is booked on the first text.
    """
    adapter, plans, progress = scorer.adapter, scorer.plans, scorer.progress
    seqs = [p.token_sequence(p.position_units) for p in plans] + ([empty] if empty is not None else [])
    t0 = time.perf_counter()
    # Each sequence in a model call of its own: a text's output (what it explains, and its
    # fit's anchor) must not depend on the texts beside it (see SampleScorer).
    parts = [adapter.score([s]) for s in seqs[: len(plans)]]
    if empty is not None:
        try:
            parts.append(adapter.score([empty]))
        except OutputShapeError:
            raise
        except Exception as err:
            raise NoEmptyInputError(
                NO_EMPTY_INPUT_ADVICE.format(why=f"scoring it failed ({type(err).__name__}: {err})")
            ) from err
    for part in parts:
        check_rows(part, 1)
    widths = sorted({tuple(part.shape[1:]) for part in parts})
    if len(widths) > 1:
        raise OutputShapeError(
            f"the model returned rows of different widths {[w[0] if len(w) == 1 else w for w in widths]} "
            f"for the {'texts and the input with no tokens' if empty is not None else 'texts'}: one score per "
            "class for every input is needed"
        )
    raw = torch.cat(parts)
    check_rows(raw, len(seqs))
    if progress is not None:
        progress.advance(len(seqs))
    kind, how, note = resolve_output(call.output, raw, declared_output(adapter), adapter.output_dtype)
    if note is not None:
        warn_user(note, SlalomOutputWarning)
    link = OutputLink(raw.shape[1], kind, call.target, adapter.class_names, call.multiclass, adapter.output_dtype)
    if link.multilabel and raw.shape[1] > 1 and call.target is None:
        raise ValueError(
            f"a multi-label model ({raw.shape[1]} independent labels, output={kind!r}) is explained one "
            "label at a time: give target=<label index>"
        )
    if empty is not None and not torch.isfinite(raw[-1]).all():
        raise NoEmptyInputError(NO_EMPTY_INPUT_ADVICE.format(why="the model's output on it is not finite"))
    y0 = as_2d(link.transform(raw))
    elapsed = time.perf_counter() - t0
    base = y0[-1] if empty is not None else reference_vector(call.reference, y0.shape[1], link)
    for i, p in enumerate(plans):
        p.model_output = y0[i]
    # The empty input is the last sequence; its evaluation and time go on the first text.
    paid = {i: [seqs[i]] for i in range(len(plans))}
    if empty is not None:
        paid[0].append(empty)
    book_round(adapter, plans, paid, elapsed)
    # A fitter that asks for its full text or the empty input again reuses them.
    for i in range(len(plans)):
        scorer.remember(i, seqs[i : i + 1], raw[i : i + 1])
    if empty is not None:
        scorer.remember(None, seqs[-1:], raw[-1:])
    return RoundZero(link, kind, how, base)


def _run_fits(
    scorer: SampleScorer, call: CheckedCall, plans: list[TextPlan], seeds: list[int], first: RoundZero
) -> list[FitResult]:
    """Drive every text's fitter generator (:meth:`Fitter.steps`) to its result.

    A round answers every open request: the fit requests each in a solve of its own
    (:func:`_solve_fits`), the sample requests each text's in model calls of its own
    (:func:`_score_samples`), so that a text's scores do not depend on the texts beside it.
    """
    fitter = call.fitter
    gens = [
        fitter.steps(
            np.random.default_rng(seeds[i]), p.position_units, len(p.units), call.n_samples, p.model_output - first.base
        )
        for i, p in enumerate(plans)
    ]
    requests = {}
    for i, g in enumerate(gens):
        t0 = time.perf_counter()
        requests[i] = next(g)
        plans[i].fit_seconds += time.perf_counter() - t0
    results: list[FitResult | None] = [None] * len(plans)
    while requests:
        answers = _solve_fits(fitter, plans, requests, scorer.adapter.fit_device)
        samples = {i: r for i, r in requests.items() if i not in answers}
        answers.update(_score_samples(scorer, plans, samples, first))
        requests = _advance(gens, plans, answers, results)
    return results  # type: ignore[return-value]  # every generator has returned


def _solve_fits(
    fitter: Fitter, plans: list[TextPlan], requests: dict[int, object], device: torch.device | None
) -> dict[int, object]:
    """Answer this round's fit requests, each text's in a solve of its own.

    Not one batched solve: padded beside other texts, a fit's float64 rounding changes, and
    the default fit carries such a change far along a flat direction (the value of a unit
    of low importance), so a text's scores depended on its neighbours by up to 1e-2. Fits
    run where the model runs (float64 there too); a black box fits on the CPU.
    """
    answers = {}
    with single_threaded_fits():
        for i in sorted(i for i, r in requests.items() if isinstance(r, FitRequest)):
            t0 = time.perf_counter()
            answers[i] = fitter.solve_batch([requests[i]], device=device)[0]
            plans[i].fit_seconds += time.perf_counter() - t0
    return answers


def _score_samples(
    scorer: SampleScorer, plans: list[TextPlan], requests: dict[int, list[np.ndarray]], first: RoundZero
) -> dict[int, np.ndarray]:
    """Score this round's sample requests, each text's apart: targets measured from the reference."""
    raw = scorer.score({i: plans[i].token_sequences(requests[i]) for i in sorted(requests)})
    return {i: as_2d(first.link.transform(r)) - first.base for i, r in raw.items()}


def _advance(gens: list, plans: list[TextPlan], answers: dict[int, object], results: list) -> dict[int, object]:
    """Send each text its answer: the next request of the texts that have one, in ``results`` the rest's fits."""
    new_requests = {}
    with single_threaded_fits():  # the fitters' own steps: held-out checks, standard errors
        for i in sorted(answers):
            t0 = time.perf_counter()
            try:
                new_requests[i] = gens[i].send(answers[i])
            except StopIteration as stop:
                results[i] = stop.value
            plans[i].fit_seconds += time.perf_counter() - t0
    return new_requests


def explain(
    model: object,
    text_or_ids: TextLike,
    tokenizer: object | None = None,
    *,
    method: str | Fitter = DEFAULT_METHOD,
    n_samples: int = DEFAULT_N_SAMPLES,
    target: int | str | None = None,
    output: str = "auto",
    reference: ReferenceOption = "empty",
    multiclass: str = "joint",
    granularity: str = "token",
    seed: int | Sequence[int] | None = None,
    gamma: float = 0.0,
    truncate: bool = False,
    batch_size: int | None = None,
    device: torch.device | str | None = None,
    show_progress: ProgressOption = False,
    **fit_options: object,
) -> SlalomExplanation:
    """Explain one text (or sequence of token ids) with a local SLALOM.

    Args:
        model: a Hugging Face sequence classifier (give ``tokenizer``), a pipeline, a
            ``torch.nn.Module`` called as ``f(input_ids, attention_mask)``, or a
            :class:`ModelAdapter` (:class:`TorchClassifier`, :class:`StringClassifier`).
        text_or_ids: the text, or its token ids without special tokens.
        tokenizer: the model's tokenizer (special tokens and padding are read from it).
        method: "hybrid" (the default, :data:`DEFAULT_METHOD`: 90 % of the budget on triples
            for each token's value and importance alone, 5 % on single tokens and 5 % on
            deletions of the text (and the text itself) for the values in the model's units
            and the length law that carries them to every scale; see
            :class:`~slalom_core.HybridFitter`),
            "eff-slope" (triples alone, the importances' prior following |value|: the
            fastest faithful ranking, but a surrogate that misses the text's output; see
            :class:`~slalom_core.EffSlopeFitter`), "eff"
            (short random samples, gradient fit; the paper's fastest), "fidel" (deletions
            from the full text, quasi-Newton fit with a prior on the importances, or
            ``solver="als"`` for alternating least squares; faithful near the input) or
            "ana" (2U − 1 evaluations, closed form). The method and its design on this
            text are recorded in ``diagnostics["method"]`` (and ``["design"]``).
        n_samples: model evaluations to fit on (ignored by "ana"). Default: 1000.
        target: None explains the log-odds of class 1 of a binary model (0: of class 0).
            A class name (``"POSITIVE"``) is read against the model's names (a Hugging
            Face model's ``config.id2label``); an unknown name raises, listing them.
            With k > 2 classes the fit is joint (App. C.1: shared importances, per-class
            values summing to zero) and ``target=c`` reports class c's column of it; None
            reports every class. Multi-label outputs: the label to explain (required when
            the model has several). One score per example: None or 0 explain that score
            itself (any other target is an error).
        output: what the model returns. "auto" (default): class probabilities if every
            row of the first outputs seen (the full texts and the empty input) is
            non-negative and sums to 1 (with a :class:`SlalomOutputWarning`), a model
            config's ``problem_type="multi_label_classification"`` as "multilabel_logits",
            otherwise logits; a single output per example is then read as a logit. Explicit:
            "logits", "probs" (class probabilities, or one probability of the positive
            class; checked), "multilabel_logits" / "multilabel_probs" (independent labels,
            each explained as its own log-odds, no softmax centring; give ``target``). The
            decision is made once per call and recorded in ``diagnostics["output"]``, e.g.
            "probs (detected)".
        reference: the point every score is measured from, reported as ``base_value``.
            "empty" (default): the model's output on the input with no tokens (special
            tokens only; the empty string for a string black box), one extra model call
            shared by all texts. A number (or one per class): that output, e.g. 0.0 for
            the paper's raw scores measured from even odds.
        multiclass: "joint" (default) or "ovr" (k > 2 classes: fit class ``target``'s
            one-vs-rest log-odds on its own; that is not a SLALOM even when the model is).
        granularity: "token" (default) or "word" (a word's sub-tokens are sampled,
            deleted and scored together as one unit).
        seed: random seed; the same seed gives the same explanation. None draws one from
            torch's global generator (so ``torch.manual_seed`` reproduces) and records it
            in ``diagnostics["seed"]``.
        batch_size: sequences per forward pass (default: the adapter's, 64).
        device: run the model here (it is moved back afterwards).
        gamma: importances are normalised to sum to ``gamma`` (0: mean-zero).
        truncate: False (default) refuses a text longer than the model accepts, with an
            error that says so; True keeps its first tokens that fit beside the special
            tokens (a word is never split), the rule of the command line and of corpus
            runs (:meth:`~slalom_core.ModelAdapter.segment_within_length`), and records
            how many positions were cut in ``diagnostics["truncated_positions"]``.
        show_progress: a tqdm bar over the samples the fits ask for (its total known
            before the first model call; it moves as the model reads them, each distinct
            sample once); or a callable ``total -> bar`` (with ``update(n)`` and ``close()``)
            that supplies the bar.
        **fit_options: passed to the fitter, e.g. ``context_share=0.2``, ``single_share=0.1``
            (hybrid), ``sample_length=2``, ``solver="adam"`` (eff,
            hybrid), ``max_delete_fraction=0.5`` (fidel, hybrid), ``holdout_fraction=0.1``,
            ``prior_sd=0.25``, ``check_samples`` (eff, hybrid, fidel), ``anchor_weight`` (eff, fidel).

    Returns:
        A :class:`SlalomExplanation`. Its diagnostics hold the model's and the surrogate's
        output on the full text and their gap; a :class:`SlalomFitWarning` says when a
        fit did not converge, fits its held-out samples badly (R² < 0.5), misses the full
        text by more than 1 log-odds, or (ana) meets invalid pairs.

    Example:
        >>> from transformers import AutoTokenizer, AutoModelForSequenceClassification
        >>> tok = AutoTokenizer.from_pretrained(path)  # doctest: +SKIP
        >>> clf = AutoModelForSequenceClassification.from_pretrained(path)  # doctest: +SKIP
        >>> exp = explain(clf, "a great movie", tokenizer=tok, seed=0)  # doctest: +SKIP
        >>> exp.tokens, exp.lin  # doctest: +SKIP
    """
    if not isinstance(text_or_ids, (str, Segmentation, torch.Tensor)) and not hasattr(text_or_ids, "__len__"):
        raise TypeError(f"cannot explain a {type(text_or_ids).__name__}: give a str or token ids")
    if isinstance(text_or_ids, (list, tuple)) and any(isinstance(t, str) for t in text_or_ids):
        raise TypeError(
            f"explain takes one text (a str) or its token ids; got a {type(text_or_ids).__name__} of "
            f"{len(text_or_ids)} strings: for several texts use explain_batch(model, texts, ...)"
        )
    options = CallOptions(
        method=method,
        n_samples=n_samples,
        target=target,
        output=output,
        reference=reference,
        multiclass=multiclass,
        granularity=granularity,
        seed=seed,
        gamma=gamma,
        truncate=truncate,
        fit_options=fit_options,
    )
    call = check_call(options)
    return explain_checked(
        model, [text_or_ids], tokenizer, call, batch_size=batch_size, device=device, show_progress=show_progress
    )[0]
