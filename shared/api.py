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
from .fitting import Fitter, get_fitter
from .link import OutputLink
from .models import ModelAdapter, Segmentation, as_adapter
from .surrogate import SlalomSurrogate

__all__ = ["explain", "explain_batch", "DEFAULT_N_SAMPLES"]

DEFAULT_N_SAMPLES = 1000

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
    method: str | Fitter = "eff",
    n_samples: int = DEFAULT_N_SAMPLES,
    target: int | None = None,
    output: str = "logits",
    granularity: str = "token",
    seed: int | None = None,
    batch_size: int | None = None,
    device: torch.device | str | None = None,
    gamma: float = 0.0,
    empty_value: float = 0.0,
    show_progress: ProgressOption = False,
    **method_options,
) -> list[SlalomExplanation]:
    """Explain several texts; their model calls share batches.

    Each text gets the random stream of ``seed``, so ``explain_batch(m, texts, seed=s)[i]``
    equals ``explain(m, texts[i], seed=s)`` up to floating-point effects of batching.
    Arguments are those of :func:`explain`.

    Example:
        >>> exps = explain_batch(model, ["great fun", "dull"], tokenizer=tok, seed=0)  # doctest: +SKIP
    """
    if isinstance(texts, (str, Segmentation)):
        raise TypeError("explain_batch takes a list of texts; use explain() for one text")
    adapter: ModelAdapter = as_adapter(model, tokenizer, batch_size=batch_size, device=device)
    fitter = get_fitter(method, **method_options)
    if isinstance(n_samples, bool) or not isinstance(n_samples, (int, np.integer)) or n_samples < 1:
        raise ValueError(f"n_samples must be a positive int, got {n_samples!r}")
    if seed is None:
        # Record the seed actually used so that any explanation can be reproduced.
        seed = int(np.random.SeedSequence().entropy % (2**31))

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
    if not plans:
        return []

    link: OutputLink | None = None
    results: list[SlalomExplanation | None] = [None] * len(plans)
    model_outputs: list[np.ndarray | None] = [None] * len(plans)
    with adapter.session():
        gens = [fitter.run(np.random.default_rng(seed), p.position_units, len(p.units), n_samples) for p in plans]
        requests = {}
        for i, g in enumerate(gens):
            t0 = time.perf_counter()
            requests[i] = next(g)
            plans[i].fit_seconds += time.perf_counter() - t0
        first_round = True
        # The first round also scores each full text once (the model output being explained).
        bar = _progress(sum(len(r) + 1 for r in requests.values()), show_progress, "SLALOM samples")
        while requests:
            order = sorted(requests)
            seqs: list[list[int]] = []
            owners: list[tuple[int, int]] = []  # (text, start offset) per text block
            for i in order:
                owners.append((i, len(seqs)))
                seqs.extend(plans[i].token_sequence(s) for s in requests[i])
                if first_round:
                    # The full text: the model output the explanation is about (diagnostic).
                    seqs.append(plans[i].token_sequence(plans[i].position_units))
            t0 = time.perf_counter()
            raw = _score_in_chunks(adapter, seqs, bar)
            elapsed = time.perf_counter() - t0
            if link is None:
                link = OutputLink(raw.shape[1], output, target, adapter.class_names)
            y_all = link.transform(raw).numpy()
            if y_all.ndim == 1:
                y_all = y_all[:, None]
            total_tokens = max(adapter.n_tokens_scored(seqs), 1)
            new_requests = {}
            for i, start in owners:
                n_req = len(requests[i]) + (1 if first_round else 0)
                block = seqs[start : start + n_req]
                toks = adapter.n_tokens_scored(block)
                p = plans[i]
                p.model_evaluations += n_req
                p.tokens_evaluated += toks
                p.model_seconds += elapsed * toks / total_tokens
                y = y_all[start : start + n_req]
                if first_round:
                    model_outputs[i] = y[-1]
                    y = y[:-1]
                t1 = time.perf_counter()
                try:
                    new_requests[i] = gens[i].send(y)
                except StopIteration as stop:
                    results[i] = stop.value
                p.fit_seconds += time.perf_counter() - t1
            requests = new_requests
            if bar is not None and requests:
                bar.total += sum(len(r) for r in requests.values())
            first_round = False
        if bar is not None:
            bar.close()

    assert link is not None
    out = []
    for i, p in enumerate(plans):
        fit = results[i]
        value = fit.value[:, 0] if not link.joint else fit.value
        sur = SlalomSurrogate(value, fit.importance, gamma=gamma)
        mo = model_outputs[i]
        diag = {
            "method": fitter.name,
            "seed": seed,
            "n_samples": int(n_samples) if fitter.name != "ana" else int(2 * len(p.units) - 1),
            "n_positions": len(p.seg.unit_ids),
            "n_units": len(p.units),
            "model_evaluations": p.model_evaluations,
            "tokens_evaluated": p.tokens_evaluated,
            "model_seconds": p.model_seconds,
            "fit_seconds": p.fit_seconds,
            "total_seconds": p.model_seconds + p.fit_seconds,
        }
        diag.update(fit.diagnostics)
        out.append(
            SlalomExplanation(
                tokens=list(p.seg.tokens),
                token_ids=list(p.seg.unit_ids),
                unit_index=p.position_units,
                surrogate=sur,
                method=fitter.name,
                granularity=granularity,
                target=target,
                class_names=link.fitted_class_names,
                model_output=(mo if link.joint else float(mo[0])),
                empty_value=empty_value,
                diagnostics=diag,
            )
        )
    return out


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
    method: str | Fitter = "eff",
    n_samples: int = DEFAULT_N_SAMPLES,
    target: int | None = None,
    output: str = "logits",
    granularity: str = "token",
    seed: int | None = None,
    batch_size: int | None = None,
    device: torch.device | str | None = None,
    gamma: float = 0.0,
    empty_value: float = 0.0,
    show_progress: ProgressOption = False,
    **method_options,
) -> SlalomExplanation:
    """Explain one text (or sequence of token ids) with a local SLALOM.

    Args:
        model: a Hugging Face sequence classifier (give ``tokenizer``), a pipeline, a
            ``torch.nn.Module`` called as ``f(input_ids, attention_mask)``, or a
            :class:`ModelAdapter` (:class:`TorchClassifier`, :class:`StringClassifier`).
        text_or_ids: the text, or its token ids without special tokens.
        tokenizer: the model's tokenizer (special tokens and padding are read from it).
        method: "eff" (short random samples, gradient descent; fast), "fidel" (deletions
            from the full text, alternating least squares; faithful near the input) or
            "ana" (2U − 1 evaluations, closed form). Default: "eff".
        n_samples: model evaluations to fit on (ignored by "ana"). Default: 1000.
        target: None explains the log-odds of class 1 of a binary model, or fits all
            classes jointly for k > 2 classes; an int explains that class (one-vs-rest).
        output: "logits" (default) or "probs" if the model returns probabilities.
        granularity: "token" (default) or "word" (a word's sub-tokens are sampled,
            deleted and scored together as one unit).
        seed: random seed; the same seed gives the same explanation.
        batch_size: sequences per forward pass (default: the adapter's, 64).
        device: run the model here (it is moved back afterwards).
        gamma: importances are normalised to sum to ``gamma`` (0: mean-zero).
        empty_value: output attributed to the empty text (used by removal of the only
            token and by Shapley values).
        show_progress: a tqdm bar over model evaluations; or a callable ``total -> bar``
            (with ``update(n)``, ``close()`` and a settable ``total``) that supplies the bar.
        **method_options: passed to the fitter, e.g. ``sample_length=2``, ``solver="adam"``
            (eff), ``max_delete_fraction=0.5`` (fidel), ``holdout_fraction=0.1``.

    Returns:
        A :class:`SlalomExplanation`.

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
        granularity=granularity,
        seed=seed,
        batch_size=batch_size,
        device=device,
        gamma=gamma,
        empty_value=empty_value,
        show_progress=show_progress,
        **method_options,
    )[0]
