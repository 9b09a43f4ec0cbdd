"""``explain`` and ``explain_batch``: text in, :class:`SlalomExplanation` out.

The driver segments each text, hands the fitters' sample requests to the model adapter in
shared batches, converts raw outputs to log-odds (:mod:`.link`) and assembles the results.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import numpy as np
import torch

from .explanation import SlalomExplanation
from .fitting import FitRequest, FitResult, Fitter, get_fitter, single_threaded_fits
from .link import OutputLink, SlalomOutputWarning, config_output_kind, resolve_output, warn_user
from .models import ModelAdapter, Segmentation, as_adapter
from .options import Interval, check_options
from .surrogate import SlalomSurrogate

__all__ = [
    "explain",
    "explain_batch",
    "estimate_cost",
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
DEFAULT_METHOD = "eff"

TextLike = str | Sequence[int] | torch.Tensor | Segmentation
# show_progress: True for the engine's own tqdm bar, or a factory ``total -> bar`` so that a
# host framework (e.g. Captum) can report into its own bar. The bar needs ``update(n)``,
# ``close()`` and a settable ``total`` (raised when a fitter asks for a second round).
ProgressOption = bool | Callable[[int], object]


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
    method: str | Fitter = DEFAULT_METHOD,
    n_samples: int = DEFAULT_N_SAMPLES,
    target: int | None = None,
    output: str = "auto",
    reference: ReferenceOption = "empty",
    multiclass: str = "joint",
    granularity: str = "token",
    seed: int | Sequence[int] | None = None,
    batch_size: int | None = None,
    device: torch.device | str | None = None,
    gamma: float = 0.0,
    show_progress: ProgressOption = False,
    **fit_options,
) -> list[SlalomExplanation]:
    """Explain several texts; their model calls share batches.

    Each text gets the random stream of ``seed``, so ``explain_batch(m, texts, seed=s)[i]``
    is ``explain(m, texts[i], seed=s)`` up to floating-point effects of batching (the fits
    are unique optima, so these stay within the fit's tolerance). A sequence of seeds gives
    text i the stream of ``seed[i]`` (what a corpus run uses, so that a text's scores do not
    depend on which texts share its batch). The input with no tokens is scored once for all
    texts. Other arguments are those of :func:`explain`.

    Example:
        >>> exps = explain_batch(model, ["great fun", "dull"], tokenizer=tok, seed=0)  # doctest: +SKIP
    """
    target = _check_target(target)
    check_options("explain", _CALL_OPTIONS, {"gamma": gamma})
    adapter, fitter, plans, fixed_reference = _prepare(
        model, texts, tokenizer, method, n_samples, reference, granularity, batch_size, device, fit_options
    )
    seeds = _text_seeds(seed, len(plans))
    if not plans:
        return []
    usage_before = adapter.usage()
    estimate = None
    if usage_before is not None:
        # A model that costs per call: what this call will cost, refused before any call
        # if over budget.
        estimate = _estimate(adapter, fitter, plans, n_samples, seeds, fixed_reference)
        adapter.check_budget(
            estimate, f"method {fitter.name!r} with n_samples={n_samples} on {len(plans)} text(s), seed={seed}"
        )

    results: list[FitResult | None] = [None] * len(plans)
    with adapter.session():
        # Round zero: every full text (the outputs being explained) and, once for all, the
        # input with no tokens (the default reference point).
        empty = adapter.empty_sequence() if fixed_reference is None else None
        if fixed_reference is None and empty is None:
            raise NoEmptyInputError(_NO_EMPTY_INPUT.format(why="this model has no input without tokens"))
        seqs = [p.token_sequence(p.position_units) for p in plans] + ([empty] if empty is not None else [])
        bar = _progress(len(seqs), show_progress, "SLALOM samples")
        t0 = time.perf_counter()
        try:
            raw = adapter.score(seqs)
        except Exception as err:
            if empty is None:
                raise
            # Not every model can be called on an input with no tokens: learn whether the
            # texts alone work, so that the error names the real problem.
            adapter.score(seqs[:-1])
            raise NoEmptyInputError(
                _NO_EMPTY_INPUT.format(why=f"scoring it failed ({type(err).__name__}: {err})")
            ) from err
        _check_rows(raw, len(seqs))
        if bar is not None:
            bar.update(len(seqs))
        # What the outputs are is decided once, from round zero, for every text of the call.
        kind, output_how, note = resolve_output(output, raw, config_output_kind(adapter), adapter.output_dtype)
        if note is not None:
            warn_user(note, SlalomOutputWarning)
        link = OutputLink(raw.shape[1], kind, target, adapter.class_names, multiclass, adapter.output_dtype)
        if link.multilabel and raw.shape[1] > 1 and target is None:
            raise ValueError(
                f"a multi-label model ({raw.shape[1]} independent labels, output={kind!r}) is explained one "
                "label at a time: give target=<label index>"
            )
        if empty is not None and not torch.isfinite(raw[-1]).all():
            raise NoEmptyInputError(_NO_EMPTY_INPUT.format(why="the model's output on it is not finite"))
        y0 = _as_2d(link.transform(raw))
        elapsed = time.perf_counter() - t0
        base = y0[-1] if empty is not None else _reference_vector(fixed_reference, y0.shape[1], link)
        model_outputs = y0[: len(plans)]
        tokens0 = max(adapter.n_tokens_scored(seqs), 1)
        for i, p in enumerate(plans):
            toks = adapter.n_tokens_scored(seqs[i : i + 1])
            p.model_evaluations += 1
            p.tokens_evaluated += toks
            p.model_seconds += elapsed * toks / tokens0

        # Fits run where the model runs (float64 there too); a black box fits on the CPU.
        fit_device = adapter.fit_device
        gens = [
            fitter.steps(
                np.random.default_rng(seeds[i]), p.position_units, len(p.units), n_samples, model_outputs[i] - base
            )
            for i, p in enumerate(plans)
        ]
        requests = {}
        for i, g in enumerate(gens):
            t0 = time.perf_counter()
            requests[i] = next(g)
            plans[i].fit_seconds += time.perf_counter() - t0
        while requests:
            # A round answers every open request: the fits of all texts that asked for one
            # in one batched optimisation, the samples of all others in shared model batches.
            fits = sorted(i for i, r in requests.items() if isinstance(r, FitRequest))
            answers: dict[int, object] = {}
            if fits:
                t0 = time.perf_counter()
                with single_threaded_fits():
                    solved = fitter.solve_batch([requests[i] for i in fits], device=fit_device)
                share = (time.perf_counter() - t0) / len(fits)
                for i, sol in zip(fits, solved):
                    answers[i] = sol
                    plans[i].fit_seconds += share
            order = sorted(i for i in requests if i not in answers)
            if order:
                if bar is not None:
                    bar.total += sum(len(requests[i]) for i in order)
                seqs = []
                owners: list[tuple[int, int]] = []  # (text, start offset) per text block
                for i in order:
                    owners.append((i, len(seqs)))
                    seqs.extend(plans[i].token_sequences(requests[i]))
                t0 = time.perf_counter()
                raw = _score_in_chunks(adapter, seqs, bar)
                elapsed = time.perf_counter() - t0
                _check_rows(raw, len(seqs))
                y_all = _as_2d(link.transform(raw)) - base
                total_tokens = max(adapter.n_tokens_scored(seqs), 1)
                for i, start in owners:
                    n_req = len(requests[i])
                    toks = adapter.n_tokens_scored(seqs[start : start + n_req])
                    p = plans[i]
                    p.model_evaluations += n_req
                    p.tokens_evaluated += toks
                    p.model_seconds += elapsed * toks / total_tokens
                    answers[i] = y_all[start : start + n_req]
            new_requests = {}
            with single_threaded_fits():  # the fitters' own steps: held-out checks, standard errors
                for i in sorted(answers):
                    t1 = time.perf_counter()
                    try:
                        new_requests[i] = gens[i].send(answers[i])
                    except StopIteration as stop:
                        results[i] = stop.value
                    plans[i].fit_seconds += time.perf_counter() - t1
            requests = new_requests
        if bar is not None:
            bar.close()

    call_usage = None
    if usage_before is not None:
        after = adapter.usage() or {}
        call_usage = {k: v - usage_before.get(k, 0) for k, v in after.items() if isinstance(v, int)}
        asked = call_usage.get("calls", 0) + call_usage.get("cache_hits", 0)
        call_usage["hit_rate"] = call_usage.get("cache_hits", 0) / asked if asked else 0.0
        call_usage["estimate"] = estimate

    col = link.column
    select = (lambda a: a[col]) if col is not None else (lambda a: a if link.joint else a[0])
    out = []
    for i, p in enumerate(plans):
        fit = results[i]
        value = fit.value if link.joint else fit.value[:, 0]
        se_v = None if fit.value_se is None else (fit.value_se if link.joint else fit.value_se[:, 0])
        diag = {
            "method": fitter.name,
            "seed": seeds[i],
            "n_samples": int(n_samples) if fitter.name != "ana" else int(2 * len(p.units) - 1),
            "n_positions": len(p.seg.unit_ids),
            "n_units": len(p.units),
            # The shared empty-input call is booked on the first text.
            "model_evaluations": p.model_evaluations + (1 if empty is not None and i == 0 else 0),
            "tokens_evaluated": p.tokens_evaluated
            + (adapter.n_tokens_scored([empty]) if empty is not None and i == 0 else 0),
            "model_seconds": p.model_seconds,
            "fit_seconds": p.fit_seconds,
            "total_seconds": p.model_seconds + p.fit_seconds,
            "reference": "empty input" if empty is not None else "given",
            "output": output_how,
            # What the raw outputs were read as (an OUTPUT_KINDS entry), for callers that
            # keep the decision for later calls; "output" says how it was decided.
            "output_kind": kind,
            "prior_sd": fitter.prior_sd,
        }
        if call_usage is not None:
            # What the whole call cost (shared by its texts): calls made, cache hits,
            # input tokens sent, retries, and the estimate checked before the first call.
            diag["api_usage"] = dict(call_usage)
        diag.update(fit.diagnostics)
        exp = SlalomExplanation(
            tokens=list(p.seg.tokens),
            token_ids=list(p.seg.unit_ids),
            unit_index=p.position_units,
            surrogate=SlalomSurrogate(value, fit.importance, gamma=gamma),
            method=fitter.name,
            granularity=granularity,
            target=target,
            class_names=link.fitted_class_names,
            model_output=_plain(select(model_outputs[i])),
            base_value=_plain(select(base)),
            class_index=col,
            unit_value_se=se_v,
            unit_importance_se=fit.importance_se,
            diagnostics=diag,
        )
        diag["model_output"] = exp.model_output
        diag["surrogate_output"] = exp.surrogate_output
        diag["full_text_gap"] = exp.full_text_gap
        out.append(exp)
    _warn_about_fits(out)
    return out


def _prepare(model, texts, tokenizer, method, n_samples, reference, granularity, batch_size, device, fit_options):
    """Checks and segmentation before any model call: (adapter, fitter, plans, fixed reference)."""
    if isinstance(texts, (str, Segmentation)):
        raise TypeError("explain_batch takes a list of texts; use explain() for one text")
    adapter: ModelAdapter = as_adapter(model, tokenizer, batch_size=batch_size, device=device)
    fitter = get_fitter(method, **fit_options)
    if isinstance(n_samples, bool) or not isinstance(n_samples, (int, np.integer)) or n_samples < 1:
        raise ValueError(f"n_samples must be a positive int, got {n_samples!r}")
    fixed_reference = _check_reference(reference)
    plans = []
    for t in texts:
        seg = t if isinstance(t, Segmentation) else adapter.segment(t, granularity)
        if isinstance(t, Segmentation):
            adapter.check_length(seg.n_tokens)
        plan = _Plan(seg)
        need = fitter.min_samples(len(plan.units))
        if n_samples < need:
            raise ValueError(
                f"n_samples={n_samples} is too few to fit method {fitter.name!r} on a text with "
                f"{len(plan.units)} unique units: use at least {need} (a few times more is better)"
            )
        plans.append(plan)
    if plans:
        _check_memory(fitter.name, n_samples, max(len(p.units) for p in plans))
    return adapter, fitter, plans, fixed_reference


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
    adapter, fitter, plans, fixed_reference = _prepare(
        model, batch, tokenizer, method, n_samples, reference, granularity, None, None, fit_options
    )
    if not plans:
        return {"calls": 0, "cache_hits": 0, "input_tokens": 0}
    return _estimate(adapter, fitter, plans, n_samples, _text_seeds(seed, len(plans)), fixed_reference)


ReferenceOption = str | float | Sequence[float] | np.ndarray


class NoEmptyInputError(ValueError):
    """The default reference point (the model's output on the input with no tokens) cannot
    be had: the model fails on it, returns a non-finite output, or has no such input.

    A typed error so that an adapter can give the advice that fits its own arguments (the
    Captum adapter: name the special tokens, rather than pass a reference).
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


def _text_seeds(seed: int | Sequence[int] | None, n_texts: int) -> list[int]:
    """One seed per text: ``seed`` for all, one of a sequence each, or (None) one draw."""
    if seed is None:
        # Drawn from torch's global generator, as Captum does, so that torch.manual_seed
        # reproduces; recorded so that any explanation can be reproduced on its own.
        return [int(torch.randint(0, 2**31 - 1, (1,)).item())] * n_texts
    many = not isinstance(seed, (int, np.integer)) and isinstance(seed, (Sequence, np.ndarray))
    seeds = list(seed) if many else [seed] * n_texts
    if many and len(seeds) != n_texts:
        raise ValueError(f"seed has {len(seeds)} entries for {n_texts} texts; give one seed, or one per text")
    for s in seeds:
        if isinstance(s, (bool, np.bool_)) or not isinstance(s, (int, np.integer)) or s < 0:
            raise TypeError(f"seed must be a non-negative int (or one per text), got {s!r}")
    return [int(s) for s in seeds]


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
    model: object,
    text_or_ids: TextLike,
    tokenizer: object | None = None,
    *,
    method: str | Fitter = DEFAULT_METHOD,
    n_samples: int = DEFAULT_N_SAMPLES,
    target: int | None = None,
    output: str = "auto",
    reference: ReferenceOption = "empty",
    multiclass: str = "joint",
    granularity: str = "token",
    seed: int | None = None,
    batch_size: int | None = None,
    device: torch.device | str | None = None,
    gamma: float = 0.0,
    show_progress: ProgressOption = False,
    **fit_options,
) -> SlalomExplanation:
    """Explain one text (or sequence of token ids) with a local SLALOM.

    Args:
        model: a Hugging Face sequence classifier (give ``tokenizer``), a pipeline, a
            ``torch.nn.Module`` called as ``f(input_ids, attention_mask)``, or a
            :class:`ModelAdapter` (:class:`TorchClassifier`, :class:`StringClassifier`).
        text_or_ids: the text, or its token ids without special tokens.
        tokenizer: the model's tokenizer (special tokens and padding are read from it).
        method: "eff" (short random samples, gradient fit; fast), "fidel" (deletions
            from the full text, quasi-Newton fit with a prior on the importances, or
            ``solver="als"`` for alternating least squares; faithful near the input) or
            "ana" (2U − 1 evaluations, closed form). Default: "eff".
        n_samples: model evaluations to fit on (ignored by "ana"). Default: 1000.
        target: None explains the log-odds of class 1 of a binary model (0: of class 0).
            With k > 2 classes the fit is joint (App. C.1: shared importances, per-class
            values summing to zero) and ``target=c`` reports class c's column of it; None
            reports every class. Multi-label outputs: the label to explain (required when
            the model has several).
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
        **fit_options: passed to the fitter, e.g. ``sample_length=2``, ``solver="adam"``
            (eff), ``max_delete_fraction=0.5`` (fidel), ``holdout_fraction=0.1``,
            ``prior_sd=0.25``, ``anchor_weight``, ``check_samples`` (eff, fidel).

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
    return explain_batch(
        model,
        [text_or_ids],
        tokenizer,
        method=method,
        n_samples=n_samples,
        target=target,
        output=output,
        reference=reference,
        multiclass=multiclass,
        granularity=granularity,
        seed=seed,
        batch_size=batch_size,
        device=device,
        gamma=gamma,
        show_progress=show_progress,
        **fit_options,
    )[0]
