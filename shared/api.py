"""``explain`` and ``explain_batch``: text in, :class:`SlalomExplanation` out.

The driver segments each text, hands the fitters' sample requests to the model adapter in
shared batches, converts raw outputs to log-odds (:mod:`.link`) and assembles the results.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from typing_extensions import TypedDict, Unpack

from .diagnostics import Diagnostics
from .explanation import SlalomExplanation
from .fitting import FITTERS, FitRequest, FitResult, Fitter, get_fitter, single_threaded_fits
from .inputs import text_batch
from .link import (
    MULTICLASS_MODES,
    OUTPUT_KINDS,
    OutputLink,
    SlalomOutputWarning,
    declared_output,
    resolve_output,
    warn_user,
)
from .models import GRANULARITIES, ModelAdapter, Segmentation, as_adapter
from .options import Interval, check_option_names, check_options
from .surrogate import SlalomSurrogate

__all__ = [
    "explain",
    "explain_batch",
    "estimate_cost",
    "check_call",
    "CheckedCall",
    "FitOptions",
    "CallOptions",
    "ExplainOptions",
    "DEFAULT_N_SAMPLES",
    "DEFAULT_METHOD",
    "SlalomFitWarning",
    "NoEmptyInputError",
    "FULL_TEXT_GAP_BOUND",
    "MIN_HELDOUT_R2",
]

DEFAULT_N_SAMPLES = 1000
#: The fitting method when none is named: chosen from the cost/quality front of the designs
#: (docs/results.md §19), by explain, explain_batch, estimate_cost and both adapters alike.
DEFAULT_METHOD = "eff-slope"

TextLike = str | Sequence[int] | torch.Tensor | Segmentation
# show_progress: True for the engine's own tqdm bar, or a factory ``total -> bar`` so that a
# host framework (e.g. Captum) can report into its own bar. The bar needs ``update(n)``,
# ``close()`` and a settable ``total`` (raised when a fitter asks for a second round).
ProgressOption = bool | Callable[[int], object]
ReferenceOption = str | float | Sequence[float] | np.ndarray


class FitOptions(TypedDict, total=False, extra_items=object):
    """What is fitted and to which output: options every entry point hands to the engine as
    they are (:func:`explain`, :func:`explain_batch`, :func:`~slalom_core.explain_rows`,
    the adapters).

    Documented once, in :func:`explain`'s Args; the defaults are :func:`check_call`'s. Any
    other key is an option of the fitter (``sample_length``, ``prior_sd``, ...), checked
    by it (:func:`~slalom_core.get_fitter`).

    Example:
        >>> opts: FitOptions = {"method": "eff", "n_samples": 300, "sample_length": 3}
        >>> check_call(**opts).fitter.sample_length
        3
    """

    method: str | Fitter
    n_samples: int
    output: str
    reference: ReferenceOption
    multiclass: str
    gamma: float


class CallOptions(FitOptions, total=False, extra_items=object):
    """:class:`FitOptions` plus what is explained in each text: what :func:`check_call` takes.

    Example:
        >>> sorted(CallOptions.__optional_keys__ - FitOptions.__optional_keys__)
        ['granularity', 'seed', 'target']
    """

    target: int | None
    granularity: str
    seed: int | Sequence[int] | None


class ExplainOptions(CallOptions, total=False, extra_items=object):
    """:class:`CallOptions` plus how the model is run: every keyword of :func:`explain`.

    Example:
        >>> sorted(ExplainOptions.__optional_keys__ - CallOptions.__optional_keys__)
        ['batch_size', 'device', 'show_progress']
    """

    batch_size: int | None
    device: torch.device | str | None
    show_progress: ProgressOption


class _Plan:
    """One text's positions, unique units and running bookkeeping."""

    def __init__(self, seg: Segmentation) -> None:
        self.seg = seg
        index: dict[tuple[int, ...], int] = {}
        self.position_units = np.array([index.setdefault(u, len(index)) for u in seg.unit_ids], dtype=np.int64)
        self.units: list[tuple[int, ...]] = list(index)
        # Token granularity: one id per unit, so a sample maps to ids by one gather.
        self.single_token_units = all(len(u) == 1 for u in self.units)
        self.unit_first = np.array([u[0] for u in self.units], dtype=np.int64)
        self.model_evaluations = 0
        self.tokens_evaluated = 0
        self.model_seconds = 0.0
        self.fit_seconds = 0.0
        self.text: str | None = seg.text
        #: The model's output on the full text, in fitted units (set by the first round).
        self.model_output: np.ndarray | None = None

    def token_sequence(self, sample: np.ndarray) -> list[int]:
        if self.single_token_units:
            return self.unit_first[sample].tolist()
        out: list[int] = []
        for u in sample.tolist():
            out.extend(self.units[u])
        return out

    def token_sequences(self, samples: list[np.ndarray]) -> list[list[int]]:
        """Token ids of many samples; at token granularity one gather for all of them."""
        if not self.single_token_units or not samples:
            return [self.token_sequence(s) for s in samples]
        lengths = np.fromiter((len(s) for s in samples), dtype=np.int64, count=len(samples))
        ids = self.unit_first[np.concatenate(samples)].tolist()
        bounds = np.concatenate([[0], np.cumsum(lengths)]).tolist()
        return [ids[a:b] for a, b in zip(bounds[:-1], bounds[1:])]

    def book_model(self, n_evaluations: int, tokens: int, seconds: float) -> None:
        """Count model evaluations against this text: its diagnostics report what it cost."""
        self.model_evaluations += n_evaluations
        self.tokens_evaluated += tokens
        self.model_seconds += seconds


def _progress(total: int, show: ProgressOption, desc: str):
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
    batch_size: int | None = None,
    device: torch.device | str | None = None,
    show_progress: ProgressOption = False,
    **options: Unpack[CallOptions],
) -> list[SlalomExplanation]:
    """Explain several texts; their model calls share batches.

    Each text gets the random stream of ``seed``, so ``explain_batch(m, texts, seed=s)[i]``
    is ``explain(m, texts[i], seed=s)`` up to floating-point effects of batching (the fits
    are unique optima, so these stay within the fit's tolerance). A sequence of seeds gives
    text i the stream of ``seed[i]`` (what a corpus run uses, so that a text's scores do not
    depend on which texts share its batch). The input with no tokens is scored once for all
    texts. Other arguments are those of :func:`explain`.

    The steps: :func:`check_call` and :func:`_prepare` (every check and the segmentation,
    before any model call), :func:`_round_zero` (the full texts and the empty input: what
    the outputs are, the reference point), :func:`_run_fits` (the fitters' rounds of model
    calls and batched fits) and :func:`_assemble` (one explanation per text).

    Example:
        >>> exps = explain_batch(model, ["great fun", "dull"], tokenizer=tok, seed=0)  # doctest: +SKIP
    """
    call = check_call(**options)
    adapter, plans = _prepare(model, texts, tokenizer, call, batch_size, device)
    seeds = _text_seeds(call.seed, len(plans))
    if not plans:
        return []
    meter = _UsageMeter(adapter, call, plans, seeds)
    with adapter.session():
        empty = _empty_input(adapter, call.reference)
        bar = _progress(len(plans) + (empty is not None), show_progress, "SLALOM samples")
        first = _round_zero(adapter, plans, empty, call, bar)
        results = _run_fits(adapter, call, plans, seeds, first, bar)
        if bar is not None:
            bar.close()
    api_usage = meter.call_usage()
    out = [_assemble(p, results[i], seeds[i], call, first, api_usage) for i, p in enumerate(plans)]
    _warn_about_fits(out)
    return out


@dataclass(frozen=True)
class CheckedCall:
    """The options of one explain call, checked and normalised (what :func:`check_call` returns).

    Attributes:
        fitter: the configured :class:`Fitter`.
        n_samples, output, multiclass, granularity, gamma: as given (checked).
        target: a plain int, or None.
        reference: None for "empty" (the empty input is scored), else the given reference
            point as a float array (0-d, or one entry per class).
        seed: None (draw one), an int for every text, or a tuple of one per text.

    Example:
        >>> call = check_call(method="ana", target=1, seed=[3, 4])
        >>> call.fitter.name, call.target, call.reference, call.seed
        ('ana', 1, None, (3, 4))
    """

    fitter: Fitter
    n_samples: int
    target: int | None
    output: str
    reference: np.ndarray | None
    multiclass: str
    granularity: str
    seed: int | tuple[int, ...] | None
    gamma: float


def check_call(
    *,
    method: str | Fitter = DEFAULT_METHOD,
    n_samples: int = DEFAULT_N_SAMPLES,
    target: int | None = None,
    output: str = "auto",
    reference: ReferenceOption = "empty",
    multiclass: str = "joint",
    granularity: str = "token",
    seed: int | Sequence[int] | None = None,
    gamma: float = 0.0,
    **fit_options,
) -> CheckedCall:
    """Check the options of an explain call, with no model and no text at hand.

    Every option that would fail every text is refused here, with one error naming it:
    :func:`explain_batch` calls this before it touches the model, and a corpus run
    (:func:`~slalom_core.corpus.explain_corpus`) before it scans its data or loads its
    model, so both refuse the same options with the same errors. What depends on a text
    (too few samples for its units, its length, the memory its fit needs) is checked per
    text, still before the first model call.

    The arguments are those of :func:`explain` (``**fit_options`` are the fitter's).

    Example:
        >>> call = check_call(method="fidel", n_samples=200, reference=0.0, prior_sd=0.5)
        >>> call.fitter.name, call.fitter.prior_sd, float(call.reference)
        ('fidel', 0.5, 0.0)
        >>> check_call(n_samples=0)
        Traceback (most recent call last):
        ...
        ValueError: n_samples must be a positive int, got 0
    """
    if isinstance(n_samples, bool) or not isinstance(n_samples, (int, np.integer)) or n_samples < 1:
        raise ValueError(f"n_samples must be a positive int, got {n_samples!r}")
    seed = _check_seed(seed)
    target = _check_target(target)
    if output not in OUTPUT_KINDS:
        raise ValueError(f"unknown output {output!r}; choose one of {OUTPUT_KINDS}")
    if multiclass not in MULTICLASS_MODES:
        raise ValueError(f"unknown multiclass {multiclass!r}; choose one of {MULTICLASS_MODES}")
    if granularity not in GRANULARITIES:
        raise ValueError(f"unknown granularity {granularity!r}; choose one of {GRANULARITIES}")
    fixed_reference = _check_reference(reference)
    check_options("explain", _CALL_OPTIONS, {"gamma": gamma})
    if isinstance(method, str) and method in FITTERS:
        # A misspelt keyword of explain itself lands here: suggest the call's names too.
        check_option_names(
            method, FITTERS[method].OPTIONS, fit_options, also=[*ExplainOptions.__optional_keys__, "tokenizer"]
        )
    fitter = get_fitter(method, **fit_options)
    return CheckedCall(fitter, n_samples, target, output, fixed_reference, multiclass, granularity, seed, gamma)


def _prepare(
    model: object,
    texts: Sequence[TextLike],
    tokenizer: object | None,
    call: CheckedCall,
    batch_size: int | None,
    device: torch.device | str | None,
) -> tuple[ModelAdapter, list[_Plan]]:
    """The adapter and each text's plan; the per-text checks, all before any model call."""
    if isinstance(texts, (str, Segmentation)):
        raise TypeError("explain_batch takes a list of texts; use explain() for one text")
    texts = text_batch(texts, only_str=False)  # a DataFrame or {"text": ...}: its texts, not its keys
    adapter: ModelAdapter = as_adapter(model, tokenizer, batch_size=batch_size, device=device)
    fitter, n_samples = call.fitter, call.n_samples
    plans = []
    for t in texts:
        if isinstance(t, Segmentation):
            adapter.check_length(t.n_tokens)
            seg = adapter.relabel(t)  # the ids the adapter scores (a string model's own pieces)
        else:
            seg = adapter.segment(t, call.granularity)
        plan = _Plan(seg)
        plan.text = t if isinstance(t, str) else seg.text  # kept on the explanation, for views
        need = fitter.min_samples(len(plan.units))
        if n_samples < need:
            raise ValueError(
                f"n_samples={n_samples} is too few to fit method {fitter.name!r} on a text with "
                f"{len(plan.units)} unique units: use at least {need} (a few times more is better)"
            )
        plans.append(plan)
    if plans:
        _check_memory(fitter.name, n_samples, max(len(p.units) for p in plans))
    return adapter, plans


class _UsageMeter:
    """What a call costs a model that bills per call (an API black box), else nothing.

    Made before the first model call: the call's estimate is checked against the adapter's
    budget then, so an over-budget call is refused before it spends anything. After the
    call, :meth:`call_usage` is what it spent (the adapter's running totals, differenced).
    """

    def __init__(self, adapter: ModelAdapter, call: CheckedCall, plans: list[_Plan], seeds: list[int]) -> None:
        self.adapter = adapter
        self.before = adapter.usage()
        self.estimate = None
        if self.before is not None:
            self.estimate = _estimate(adapter, call.fitter, plans, call.n_samples, seeds, call.reference)
            what = f"method {call.fitter.name!r} with n_samples={call.n_samples} on {len(plans)} text(s)"
            adapter.check_budget(self.estimate, f"{what}, seed={call.seed}")

    def call_usage(self) -> dict | None:
        """Calls made, cache hits, input tokens, retries and the estimate (None: a free model)."""
        if self.before is None:
            return None
        after = self.adapter.usage() or {}
        usage = {k: v - self.before.get(k, 0) for k, v in after.items() if isinstance(v, int)}
        asked = usage.get("calls", 0) + usage.get("cache_hits", 0)
        usage["hit_rate"] = usage.get("cache_hits", 0) / asked if asked else 0.0
        usage["estimate"] = self.estimate
        return usage


@dataclass(frozen=True)
class _RoundZero:
    """What the first model round decided, once for every text of the call.

    Every later round is read through it: ``link`` turns raw outputs into the fitted units
    (log-odds, centred logits) and ``base`` is the reference point every target is
    measured from, so the texts of one call are never read in different units.
    """

    link: OutputLink
    kind: str  # what the raw outputs were read as, an OUTPUT_KINDS entry
    how: str  # and how that was decided, e.g. "probs (detected)"
    base: np.ndarray  # (K,) the reference point, in fitted units


def _empty_input(adapter: ModelAdapter, reference: np.ndarray | None) -> list[int] | None:
    """The input with no tokens when it is the reference point; None when one is given."""
    if reference is not None:
        return None
    empty = adapter.empty_sequence()
    if empty is None:
        raise NoEmptyInputError(_NO_EMPTY_INPUT.format(why="this model has no input without tokens"))
    return empty


def _round_zero(
    adapter: ModelAdapter, plans: list[_Plan], empty: list[int] | None, call: CheckedCall, bar
) -> _RoundZero:
    """Score every full text and, once for all, the empty input; decide what the outputs are.

    These are the outputs being explained (kept as each plan's ``model_output``) and the
    default reference point, so they come before any sample. What the model returns is
    decided from all of them together (see :func:`resolve_output`), once per call. The
    empty input's evaluation is booked on the first text.
    """
    seqs = [p.token_sequence(p.position_units) for p in plans] + ([empty] if empty is not None else [])
    t0 = time.perf_counter()
    try:
        raw = adapter.score(seqs)
    except Exception as err:
        if empty is None:
            raise
        # Not every model can be called on an input with no tokens: learn whether the
        # texts alone work, so that the error names the real problem.
        adapter.score(seqs[:-1])
        raise NoEmptyInputError(_NO_EMPTY_INPUT.format(why=f"scoring it failed ({type(err).__name__}: {err})")) from err
    _check_rows(raw, len(seqs))
    if bar is not None:
        bar.update(len(seqs))
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
        raise NoEmptyInputError(_NO_EMPTY_INPUT.format(why="the model's output on it is not finite"))
    y0 = _as_2d(link.transform(raw))
    elapsed = time.perf_counter() - t0
    base = y0[-1] if empty is not None else _reference_vector(call.reference, y0.shape[1], link)
    for i, p in enumerate(plans):
        p.model_output = y0[i]
    # The empty input is the last sequence; its evaluation and time go on the first text.
    blocks = [(i, i, 1) for i in range(len(plans))] + ([(0, len(plans), 1)] if empty is not None else [])
    _book_round(adapter, plans, blocks, seqs, elapsed)
    return _RoundZero(link, kind, how, base)


def _book_round(
    adapter: ModelAdapter, plans: list[_Plan], blocks: list[tuple[int, int, int]], seqs: list, elapsed: float
) -> None:
    """Book one model round on the texts whose sequences it scored, ``(text, start, count)`` each.

    The round's time is shared in proportion to the tokens each text's sequences hold: one
    text's near-full-length deletions cost more than another's short samples.
    """
    total_tokens = max(adapter.n_tokens_scored(seqs), 1)
    for i, start, n in blocks:
        toks = adapter.n_tokens_scored(seqs[start : start + n])
        plans[i].book_model(n, toks, elapsed * toks / total_tokens)


def _run_fits(
    adapter: ModelAdapter, call: CheckedCall, plans: list[_Plan], seeds: list[int], first: _RoundZero, bar
) -> list[FitResult]:
    """Drive every text's fitter generator (:meth:`Fitter.steps`) to its result.

    A round answers every open request at once: the fit requests of all texts in one
    batched solve (:func:`_solve_fits`), the sample requests of all others in shared model
    batches (:func:`_score_samples`). So n texts cost about the solver calls and model
    batches of one text, not n times as many.
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
        answers = _solve_fits(fitter, plans, requests, adapter.fit_device)
        samples = {i: r for i, r in requests.items() if i not in answers}
        answers.update(_score_samples(adapter, plans, samples, first, bar))
        requests = _advance(gens, plans, answers, results)
    return results  # type: ignore[return-value]  # every generator has returned


def _solve_fits(
    fitter: Fitter, plans: list[_Plan], requests: dict[int, object], device: torch.device | None
) -> dict[int, object]:
    """Answer this round's fit requests in one batched solve, each text booked an equal share.

    Fits run where the model runs (float64 there too); a black box fits on the CPU.
    """
    fits = sorted(i for i, r in requests.items() if isinstance(r, FitRequest))
    if not fits:
        return {}
    t0 = time.perf_counter()
    with single_threaded_fits():
        solved = fitter.solve_batch([requests[i] for i in fits], device=device)
    share = (time.perf_counter() - t0) / len(fits)
    for i in fits:
        plans[i].fit_seconds += share
    return dict(zip(fits, solved))


def _score_samples(
    adapter: ModelAdapter, plans: list[_Plan], requests: dict[int, list[np.ndarray]], first: _RoundZero, bar
) -> dict[int, np.ndarray]:
    """Score this round's sample requests in shared model batches: targets measured from the reference."""
    order = sorted(requests)
    if not order:
        return {}
    if bar is not None:
        bar.total += sum(len(requests[i]) for i in order)
    seqs: list[list[int]] = []
    blocks: list[tuple[int, int, int]] = []  # (text, start offset, count) per text block
    for i in order:
        blocks.append((i, len(seqs), len(requests[i])))
        seqs.extend(plans[i].token_sequences(requests[i]))
    t0 = time.perf_counter()
    raw = _score_in_chunks(adapter, seqs, bar)
    elapsed = time.perf_counter() - t0
    _check_rows(raw, len(seqs))
    y_all = _as_2d(first.link.transform(raw)) - first.base
    _book_round(adapter, plans, blocks, seqs, elapsed)
    return {i: y_all[start : start + n] for i, start, n in blocks}


def _advance(gens: list, plans: list[_Plan], answers: dict[int, object], results: list) -> dict[int, object]:
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


def _assemble(
    plan: _Plan, fit: FitResult, seed: int, call: CheckedCall, first: _RoundZero, api_usage: dict | None
) -> SlalomExplanation:
    """One text's explanation: its fit, read in the explained output's units, and its diagnostics."""
    link, fitter = first.link, call.fitter
    col = link.column
    select = (lambda a: a[col]) if col is not None else (lambda a: a if link.joint else a[0])
    value = fit.value if link.joint else fit.value[:, 0]
    se_v = None if fit.value_se is None else (fit.value_se if link.joint else fit.value_se[:, 0])
    # The core fields (see Diagnostics), then the fitter's own entries; a fitter's entry
    # replaces a core one (the prior sd that prior_sd="evidence" chose).
    diag = Diagnostics(
        method=fitter.name,
        seed=seed,
        n_samples=int(call.n_samples) if fitter.name != "ana" else int(2 * len(plan.units) - 1),
        n_positions=len(plan.seg.unit_ids),
        n_units=len(plan.units),
        model_evaluations=plan.model_evaluations,
        tokens_evaluated=plan.tokens_evaluated,
        model_seconds=plan.model_seconds,
        fit_seconds=plan.fit_seconds,
        total_seconds=plan.model_seconds + plan.fit_seconds,
        reference="empty input" if call.reference is None else "given",
        output=first.how,
        output_kind=first.kind,
        n_outputs=first.link.n_outputs,
        prior_sd=fitter.prior_sd,
    )
    if api_usage is not None:
        # Shared by the call's texts: a copy each, so that one can be edited alone.
        diag.api_usage = dict(api_usage)
    diag.update(fit.diagnostics)
    exp = SlalomExplanation(
        tokens=list(plan.seg.tokens),
        token_ids=list(plan.seg.tokenizer_ids),  # the tokenizer's, not an adapter's own
        unit_index=plan.position_units,
        surrogate=SlalomSurrogate(value, fit.importance, gamma=call.gamma),
        method=fitter.name,
        granularity=call.granularity,
        target=call.target,
        class_names=link.fitted_class_names,
        model_output=_plain(select(plan.model_output)),
        base_value=_plain(select(first.base)),
        class_index=col,
        unit_value_se=se_v,
        unit_importance_se=fit.importance_se,
        diagnostics=diag,
        text=plan.text,
    )
    diag.model_output = exp.model_output
    diag.surrogate_output = exp.surrogate_output
    diag.full_text_gap = exp.full_text_gap
    return exp


def _estimate(adapter, fitter, plans, n_samples, seeds, fixed_reference) -> dict[str, int]:
    """The adapter's cost estimate for the samples explain_batch will score (no model call)."""
    known = [p.token_sequence(p.position_units) for p in plans]
    if fixed_reference is None:
        empty = adapter.empty_sequence()
        known += [empty] if empty is not None else []
    bounds: list[list[int]] = []
    for p, seed in zip(plans, seeds):
        lengths = np.array([len(u) for u in p.units])
        # The same generator state as the fit's own: eff's and fidel's samples exactly.
        k, b = fitter.planned_samples(np.random.default_rng(seed), p.position_units, len(p.units), n_samples, lengths)
        known += p.token_sequences(list(k))
        bounds += p.token_sequences(list(b))
    return adapter.estimate_cost(known, bounds)


def estimate_cost(
    model: object,
    texts: TextLike | Sequence[TextLike],
    tokenizer: object | None = None,
    *,
    method: str | Fitter = DEFAULT_METHOD,
    n_samples: int = DEFAULT_N_SAMPLES,
    seed: int | Sequence[int] = 0,
    reference: ReferenceOption = "empty",
    granularity: str = "token",
    **fit_options,
) -> dict[str, int]:
    """What ``explain_batch`` with these arguments would cost, without calling the model.

    Returns ``calls`` (model evaluations; for a cached API black box, new sample strings
    plus the samples a method only decides on later, e.g. ana's pairs), ``cache_hits``
    and ``input_tokens`` (the adapter's count: tokens the model reads, or what an API
    black box's ``count_tokens`` says it is sent). eff's and fidel's samples are known
    exactly for a given ``seed``; later samples are counted at an upper bound.

    Example:
        >>> est = estimate_cost(api_model, review, method="eff", n_samples=1000, seed=0)  # doctest: +SKIP
        >>> est["calls"], est["input_tokens"]  # doctest: +SKIP
    """
    batch = [texts] if isinstance(texts, (str, Segmentation, torch.Tensor)) else list(texts)
    if batch and not isinstance(batch[0], (str, Segmentation, torch.Tensor, Sequence)):
        batch = [texts]  # one sequence of token ids
    call = check_call(
        method=method, n_samples=n_samples, reference=reference, granularity=granularity, seed=seed, **fit_options
    )
    adapter, plans = _prepare(model, batch, tokenizer, call, None, None)
    if not plans:
        return {"calls": 0, "cache_hits": 0, "input_tokens": 0}
    return _estimate(adapter, call.fitter, plans, n_samples, _text_seeds(call.seed, len(plans)), call.reference)


class NoEmptyInputError(ValueError):
    """The default reference point (the model's output on the input with no tokens) cannot
    be had: the model fails on it, returns a non-finite output, or has no such input.

    A typed error so that an adapter can give the advice that fits its own arguments (the
    Captum adapter: name the special tokens, rather than pass a reference).

    Example:
        >>> try:  # doctest: +SKIP
        ...     exp = explain(model, ids)
        ... except NoEmptyInputError:
        ...     exp = explain(model, ids, reference=0.0)
    """


_NO_EMPTY_INPUT = (
    "the default reference point is the model's output on the input with no tokens, but {why}; "
    "pass reference=<number> (the output the scores are measured from, in log-odds; "
    "reference=0.0 gives the paper's raw scores)"
)

#: A SlalomFitWarning is raised when the surrogate misses the model's output on the
#: explained text by more than this many log-odds (a factor e on the odds).
FULL_TEXT_GAP_BOUND = 1.0
#: ... or when its held-out R² on the design's samples is below this.
MIN_HELDOUT_R2 = 0.5


class SlalomFitWarning(UserWarning):
    """A fitted surrogate that should not be read at face value (not converged, poor fit,
    far from the model on the explained text, or invalid pairs in ana)."""


#: Largest fitting state one text may need (bytes); checked before any model call.
MAX_FIT_BYTES = 4 * 2**30
# Memory a sampled fit holds per sample, measured (peak RSS growth, eff and fidel, 1e5
# samples, 3 and 20 units): ~1.0 KiB on 3 units, ~2.2 KiB on 20. Most of it is per-sample
# Python objects (the sample arrays, token-id lists, output rows), not the dense arrays, so
# a short text with 10**7 samples needs ~10 GiB although its dense state is 1 GiB.
_BYTES_PER_SAMPLE = 768
_BYTES_PER_SAMPLE_UNIT = 80


def _check_memory(method: str, n_samples: int, n_units: int) -> None:
    need = int(n_samples) * (_BYTES_PER_SAMPLE + _BYTES_PER_SAMPLE_UNIT * max(n_units, 1))
    if method != "ana" and need > MAX_FIT_BYTES:
        raise ValueError(
            f"n_samples={n_samples} on a text with {n_units} units needs about {need / 2**30:.1f} GiB "
            f"to fit (limit {MAX_FIT_BYTES / 2**30:.0f} GiB, slalom_core.api.MAX_FIT_BYTES); use fewer samples"
        )


# explain's own numeric options, checked with the fitters' (see .options).
_CALL_OPTIONS = {"gamma": (Interval(float, None, None),)}


def _check_target(target: object) -> int | None:
    """``target`` as a plain int (numpy and 0-d tensor integers too) or None, before any call."""
    if isinstance(target, torch.Tensor) and target.numel() == 1 and not target.dtype.is_floating_point:
        target = target.item()
    if target is None:
        return None
    if isinstance(target, (bool, np.bool_)) or not isinstance(target, (int, np.integer)):
        raise TypeError(f"target must be an int class index or None, got {target!r}")
    return int(target)


def _check_reference(reference: ReferenceOption) -> np.ndarray | None:
    """None for "empty" (score it), else the user's reference as a float array."""
    if isinstance(reference, str):
        if reference != "empty":
            raise ValueError(f"unknown reference {reference!r}; use 'empty' or a number")
        return None
    if isinstance(reference, bool):
        raise TypeError("reference must be 'empty' or a number, not a bool")
    ref = np.asarray(reference, dtype=np.float64)
    if ref.ndim > 1 or not np.isfinite(ref).all():
        raise ValueError(f"reference must be 'empty', a finite number or one per class, got {reference!r}")
    return ref


def _reference_vector(ref: np.ndarray, n_cols: int, link: OutputLink) -> np.ndarray:
    if ref.ndim == 0:
        return np.full(n_cols, float(ref))
    if link.joint and ref.shape[0] == n_cols:
        # Centred logits are what is fitted: centre a per-class reference the same way.
        return ref - ref.mean()
    raise ValueError(f"reference has {ref.shape[0]} entries; the explained output has {n_cols} column(s)")


def _check_seed(seed: object) -> int | tuple[int, ...] | None:
    """``seed`` as None, a plain int, or a tuple of one plain int per text; any of them >= 0."""
    if seed is None:
        return None
    many = not isinstance(seed, (int, np.integer)) and isinstance(seed, (Sequence, np.ndarray))
    for s in seed if many else [seed]:
        if isinstance(s, (bool, np.bool_)) or not isinstance(s, (int, np.integer)):
            raise TypeError(f"seed must be a non-negative int (or one per text), got {s!r}")
        if s < 0:
            raise ValueError(f"seed must be a non-negative int (or one per text), got {s!r}")
    return tuple(int(s) for s in seed) if many else int(seed)


def _text_seeds(seed: int | tuple[int, ...] | None, n_texts: int, what: str = "text") -> list[int]:
    """One seed per text from a checked ``seed`` (:func:`_check_seed`): ``seed`` for all, one
    of a tuple each, or (None) one draw."""
    if seed is None:
        # Drawn from torch's global generator, as Captum does, so that torch.manual_seed
        # reproduces; recorded so that any explanation can be reproduced on its own.
        return [int(torch.randint(0, 2**31 - 1, (1,)).item())] * n_texts
    if isinstance(seed, int):
        return [seed] * n_texts
    if len(seed) != n_texts:
        raise ValueError(f"seed has {len(seed)} entries for {n_texts} {what}s; give one seed, or one per {what}")
    return list(seed)


def _check_rows(raw: torch.Tensor, n: int) -> None:
    if raw.ndim != 2 or raw.shape[0] != n:
        raise ValueError(f"the model returned {tuple(raw.shape)} outputs for {n} inputs; expected one row per input")


def _as_2d(y: torch.Tensor) -> np.ndarray:
    y = y.numpy()
    return y[:, None] if y.ndim == 1 else y


def _plain(x: np.ndarray) -> np.ndarray | float:
    return float(x) if np.ndim(x) == 0 else np.asarray(x)


def _warn_about_fits(explanations: list[SlalomExplanation]) -> None:
    """One SlalomFitWarning per call, listing what went wrong in which texts."""
    problems: dict[str, list[int]] = {}
    for i, exp in enumerate(explanations):
        d = exp.diagnostics
        if d.get("fit_converged") is False:
            problems.setdefault("the fit did not converge", []).append(i)
        if np.isfinite(d.get("heldout_r2", np.nan)) and d["heldout_r2"] < MIN_HELDOUT_R2:
            problems.setdefault(f"held-out R² below {MIN_HELDOUT_R2}", []).append(i)
        if np.max(np.abs(exp.full_text_gap)) > FULL_TEXT_GAP_BOUND:
            problems.setdefault(
                f"the surrogate misses the model's output on the text by more than {FULL_TEXT_GAP_BOUND} log-odds", []
            ).append(i)
        if d.get("ana_invalid_pairs", 0):
            problems.setdefault(
                "ana met pairs whose importance ratio is not positive (the model is no SLALOM there)", []
            ).append(i)
    if problems:
        parts = [
            f"{what} (text{'s' if len(idx) > 1 else ''} {', '.join(map(str, idx[:10]))}{', …' if len(idx) > 10 else ''})"
            for what, idx in problems.items()
        ]
        warn_user("SLALOM fit: " + "; ".join(parts) + ". See each explanation's diagnostics.", SlalomFitWarning)


def _score_in_chunks(adapter: ModelAdapter, seqs: list[list[int]], bar) -> torch.Tensor:
    """Score all sequences; with a progress bar, in chunks so that it moves."""
    if bar is None:
        return adapter.score(seqs)
    chunk = max(adapter.batch_size * 4, 1)
    parts = []
    for start in range(0, len(seqs), chunk):
        parts.append(adapter.score(seqs[start : start + chunk]))
        bar.update(min(chunk, len(seqs) - start))
    return torch.cat(parts)


def explain(
    model: object, text_or_ids: TextLike, tokenizer: object | None = None, **options: Unpack[ExplainOptions]
) -> SlalomExplanation:
    """Explain one text (or sequence of token ids) with a local SLALOM.

    Args:
        model: a Hugging Face sequence classifier (give ``tokenizer``), a pipeline, a
            ``torch.nn.Module`` called as ``f(input_ids, attention_mask)``, or a
            :class:`ModelAdapter` (:class:`TorchClassifier`, :class:`StringClassifier`).
        text_or_ids: the text, or its token ids without special tokens.
        tokenizer: the model's tokenizer (special tokens and padding are read from it).
        method: "eff-slope" (the default, :data:`DEFAULT_METHOD`: eff's short random
            samples as triples, the importances' prior centred on a fitted slope of
            |value|; see :class:`~slalom_core.EffSlopeFitter`), "hybrid" (short samples
            for the values plus a few deletions from the full text for the importances
            and the text's own output; see :class:`~slalom_core.HybridFitter`), "eff"
            (short random samples, gradient fit; the paper's fastest), "fidel" (deletions
            from the full text, quasi-Newton fit with a prior on the importances, or
            ``solver="als"`` for alternating least squares; faithful near the input) or
            "ana" (2U − 1 evaluations, closed form). The method and its design on this
            text are recorded in ``diagnostics["method"]`` (and ``["design"]``).
        n_samples: model evaluations to fit on (ignored by "ana"). Default: 1000.
        target: None explains the log-odds of class 1 of a binary model (0: of class 0).
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
        show_progress: a tqdm bar over model evaluations; or a callable ``total -> bar``
            (with ``update(n)``, ``close()`` and a settable ``total``) that supplies the bar.
        **fit_options: passed to the fitter, e.g. ``context_share=0.04``,
            ``value_sd=0.1`` (hybrid), ``sample_length=2``, ``solver="adam"`` (eff,
            hybrid), ``max_delete_fraction=0.5`` (fidel, hybrid), ``holdout_fraction=0.1``,
            ``prior_sd=0.25``, ``anchor_weight``, ``check_samples`` (eff, hybrid, fidel).

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
    return explain_batch(model, [text_or_ids], tokenizer, **options)[0]
