"""The benchmark's baselines: Captum's Lime, KernelShap, LayerIntegratedGradients and
gradient methods, shap's Partition, shapiq's KernelSHAP-IQ and SVARM-IQ (through
:mod:`.shapiq_games`), the reference SLALOM implementation and a random ranking, each run on
one text of the benchmark and returning per-position scores.

This is the one module of the harness that calls Captum and shap (besides the shap
benchmark helper :func:`sequential` at the end); both are imported inside the functions
that use them, so importing the harness never needs them.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from . import evaluation as ev
from .bench_config import SLALOM_SCORES
from .bench_context import BenchContext, Instance, Scores

if TYPE_CHECKING:  # annotations only: shap is an optional extra
    import shap

__all__ = [
    "RUNNERS",
    "MethodSkipped",
    "check_available",
    "embedding_layer",
    "quiet_reference",
    "run_reference",
    "sequential",
]

#: Captum's perturbation methods replace absent features by the baseline; the benchmark
#: passes this value as the baseline and drops it before the model call, which turns
#: "replace by baseline" into real token deletion. -1 is never a token id.
DELETED = -1


class MethodSkipped(RuntimeError):
    """A method cannot run here (library missing, model not supported); the message says why."""


def embedding_layer(model: torch.nn.Module) -> torch.nn.Module:
    """The word-embedding module (HF ``get_input_embeddings``, also on a wrapped encoder)."""
    for obj in (model, getattr(model, "encoder", None), getattr(model, "base_model", None)):
        getter = getattr(obj, "get_input_embeddings", None)
        if getter is not None:
            with contextlib.suppress(NotImplementedError, AttributeError):
                layer = getter()
                if layer is not None:
                    return layer
    for name, mod in model.named_modules():
        if isinstance(mod, torch.nn.Embedding) and name.endswith(("word_embeddings", "wte", "embed_tokens")):
            return mod
    raise MethodSkipped("cannot find the model's word-embedding layer for gradient methods")


class _CountingModel(torch.nn.Module):
    """The model as the reference implementation calls it: ``m(ids, attention_mask=)``
    returning ``{"logits": ...}``; counts rows and adds token-type ids where needed."""

    def __init__(self, ctx: BenchContext) -> None:
        super().__init__()
        self.inner = ctx.model
        self._ctx = ctx

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> dict:
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        with torch.no_grad():
            logits = self._ctx.forward_logits(input_ids, attention_mask)
        return {"logits": logits.float()}


@contextlib.contextmanager
def quiet_reference() -> Iterator[None]:
    """Silence the reference implementation's tqdm bar over its epochs (it would print
    inside the benchmark's own bar); needs ``slalom-explanations`` installed.

    Returns:
        A context manager; the reference's bar is restored on exit.

    Example:
        >>> with quiet_reference():  # doctest: +SKIP
        ...     scores = explainer.get_signed_importance_for_tokens(ids)
    """
    import slalom_explanations.slalom_helpers as helpers

    old = helpers.tqdm
    helpers.tqdm = lambda it, *a, **k: it
    try:
        yield
    finally:
        helpers.tqdm = old


def _reference_check(ctx: BenchContext) -> None:
    try:
        import slalom_explanations  # noqa: F401
    except ImportError as err:
        raise MethodSkipped(
            "the reference implementation (PyPI slalom-explanations 0.1.2) is not installed: "
            "pip install 'slalom-xai[benchmark]' to include it"
        ) from err
    # The reference hard-codes BERT's [CLS]=101 / [SEP]=102 around every sample.
    if ctx.adapter.prefix_ids != (101,) or ctx.adapter.suffix_ids != (102,):
        raise MethodSkipped(
            "the reference implementation hard-codes [CLS]=101/[SEP]=102, but this tokenizer "
            f"frames texts with {list(ctx.adapter.prefix_ids)} ... {list(ctx.adapter.suffix_ids)}"
        )


def run_reference(ctx: BenchContext, inst: Instance, epochs: int | None = None) -> tuple[Scores, dict]:
    """The reference implementation's four scores for one text (PyPI ``slalom-explanations``).

    Args:
        ctx: the benchmark's model (every call is counted there).
        inst: the text.
        epochs: the reference's SGD epochs (None: its own default, 60).

    Returns:
        ``({score name: per-position array}, {})``, the scores named as in :data:`SLALOM_SCORES`.

    Example:
        >>> scores, _ = run_reference(ctx, inst)  # doctest: +SKIP
        >>> sorted(scores)  # doctest: +SKIP
        ['importance', 'lin', 'removal', 'value']
    """
    # The reference package's only public explainer class (its spelling): benchmarking the
    # authors' implementation means calling it, so its name appears here.
    from slalom_explanations import SLALOMLocalExplanantions

    dev = str(ctx.device)
    explainer = SLALOMLocalExplanantions(
        _CountingModel(ctx),
        ctx.tokenizer,
        n_samples=ctx.config.n_samples,
        device=dev,
        modes=["value", "imp", "lin", "removal"],
        pad_token_id=int(ctx.adapter.pad_id),
        target_class=None if ctx.binary else inst.target,
        **({} if epochs is None else {"sgd_epochs": int(epochs)}),
    )
    torch.manual_seed(ctx.config.seed)
    with quiet_reference():
        out = explainer.get_signed_importance_for_tokens(list(inst.token_ids))
    out = np.asarray(out, dtype=float)
    return dict(zip(SLALOM_SCORES, out)), {}


def _perturbation_forward(ctx: BenchContext, inst: Instance) -> Callable[[torch.Tensor], torch.Tensor]:
    """Captum forward on the (B, n) perturbed id matrix: deleted positions are dropped."""

    def forward(ids: torch.Tensor) -> torch.Tensor:
        rows = ids.detach().round().long().cpu().tolist()
        if ctx.strategy == "delete":
            rows = [[t for t in r if t != DELETED] for r in rows]
        return torch.as_tensor(ctx.log_odds(rows, inst), dtype=torch.float32)

    return forward


def _lime_similarity(original_inp, perturbed_inp, perturbed_interpretable_inp, **kwargs):
    """The LIME package's text kernel on the binary keep vector: cosine distance to the
    all-kept vector (×100) in a kernel of width 25, ``sqrt(exp(-d² / 25²))``."""
    z = perturbed_interpretable_inp.float().reshape(-1)
    norm = z.norm()
    cos = (z.sum() / (math.sqrt(z.numel()) * norm)) if norm > 0 else torch.tensor(0.0)
    d = (1.0 - cos) * 100.0
    return torch.sqrt(torch.exp(-(d**2) / 25.0**2))


def _captum_attribution(ctx: BenchContext, inst: Instance, explainer) -> tuple[Scores, dict]:
    """Run a Captum perturbation explainer (Lime, KernelShap) the same way for both."""
    torch.manual_seed(ctx.config.seed)
    attr = explainer.attribute(
        torch.tensor([inst.token_ids], dtype=torch.long),
        baselines=DELETED if ctx.strategy == "delete" else ctx.replacement_id,
        n_samples=ctx.config.n_samples,
        perturbations_per_eval=ctx.config.batch_size,
    )
    return {"attribution": attr.detach().double().numpy().reshape(-1)}, {}


def _run_lime(ctx: BenchContext, inst: Instance) -> tuple[Scores, dict]:
    from captum._utils.models.linear_model import SkLearnRidge
    from captum.attr import Lime

    lime = Lime(
        _perturbation_forward(ctx, inst), interpretable_model=SkLearnRidge(alpha=1.0), similarity_func=_lime_similarity
    )
    return _captum_attribution(ctx, inst, lime)


def _run_kernelshap(ctx: BenchContext, inst: Instance) -> tuple[Scores, dict]:
    from captum.attr import KernelShap

    return _captum_attribution(ctx, inst, KernelShap(_perturbation_forward(ctx, inst)))


def _run_partition(ctx: BenchContext, inst: Instance) -> tuple[Scores, dict]:
    import shap

    tok = ctx.tokenizer
    mask_token = {"delete": "", "mask": getattr(tok, "mask_token", None), "pad": getattr(tok, "pad_token", None)}[
        ctx.config.removal
    ]
    # collapse_mask_token=False: one removed token = one removed (or replaced) token.
    masker = shap.maskers.Text(tok, mask_token=mask_token, collapse_mask_token=False)

    def f(texts) -> np.ndarray:
        ids = tok([str(t) for t in list(texts)], add_special_tokens=False)["input_ids"]
        return ctx.log_odds(ids, inst)

    explainer = shap.explainers.Partition(f, masker)
    np.random.seed(ctx.config.seed)
    exp = explainer([inst.text], max_evals=ctx.config.n_samples, batch_size=ctx.config.batch_size, silent=True)
    values = np.asarray(exp.values[0], dtype=float).reshape(-1)
    pre, suf = len(ctx.adapter.prefix_ids), len(ctx.adapter.suffix_ids)
    if values.shape[0] != pre + inst.n_tokens + suf:
        raise RuntimeError(
            f"shap's masker split the text into {values.shape[0]} tokens, expected {pre + inst.n_tokens + suf}"
        )
    return {"attribution": values[pre : pre + inst.n_tokens]}, {}


def _run_shapiq(ctx: BenchContext, inst: Instance, name: str) -> tuple[Scores, dict]:
    """A shapiq approximator on the model at the run's budget: the explained output of the
    text with the absent tokens removed the run's way, every coalition a counted model row."""
    from .shapiq_games import approximate, deletion_game, first_order

    game = deletion_game(lambda rows: ctx.log_odds(rows, inst), inst.token_ids, ctx.replacement_id)
    values = approximate(name, game, inst.n_tokens, ctx.config.n_samples, seed=ctx.config.seed)
    return {"attribution": first_order(values, inst.n_tokens)}, {}


def _gradient_forward(ctx: BenchContext, inst: Instance):
    target = ctx.explained_class(inst) or 0

    def forward(input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return ctx.explained_from_logits(ctx.forward_logits(input_ids, attention_mask), target)

    return forward


def _run_lig(ctx: BenchContext, inst: Instance) -> tuple[Scores, dict]:
    from captum.attr import LayerIntegratedGradients

    ids, start = ctx.framed(inst.token_ids)
    mask = torch.ones_like(ids)
    # Reference input: the same frame with every text token replaced by padding.
    ref = ids.clone()
    ref[:, start : start + inst.n_tokens] = ctx.adapter.pad_id
    lig = LayerIntegratedGradients(_gradient_forward(ctx, inst), embedding_layer(ctx.model))
    attr = lig.attribute(
        ids,
        baselines=ref,
        additional_forward_args=(mask,),
        n_steps=ctx.config.lig_steps,
        internal_batch_size=ctx.config.batch_size,
    )
    a = attr.sum(-1)[0, start : start + inst.n_tokens]
    return {"attribution": a.detach().double().cpu().numpy()}, {}


def _run_layer_gradient(ctx: BenchContext, inst: Instance, *, times_input: bool) -> tuple[Scores, dict]:
    from captum.attr import LayerGradientXActivation

    ids, start = ctx.framed(inst.token_ids)
    mask = torch.ones_like(ids)
    # On the embedding layer's output: gradient × embedding (input × gradient on the
    # embeddings), or the plain gradient whose L2 norm per token is the saliency.
    method = LayerGradientXActivation(
        _gradient_forward(ctx, inst), embedding_layer(ctx.model), multiply_by_inputs=times_input
    )
    attr = method.attribute(ids, additional_forward_args=(mask,))[0, start : start + inst.n_tokens]
    a = attr.sum(-1) if times_input else attr.norm(dim=-1)
    return {"attribution": a.detach().double().cpu().numpy()}, {}


def _run_random(ctx: BenchContext, inst: Instance) -> tuple[Scores, dict]:
    return {"attribution": ev.random_attributions(inst.n_tokens, seed=ctx.config.seed + inst.index)}, {}


RUNNERS: dict[str, Callable[[BenchContext, Instance], tuple[Scores, dict]]] = {
    "reference": run_reference,
    "lime": _run_lime,
    "kernelshap": _run_kernelshap,
    "partition": _run_partition,
    "lig": _run_lig,
    "ixg": lambda ctx, inst: _run_layer_gradient(ctx, inst, times_input=True),
    "saliency": lambda ctx, inst: _run_layer_gradient(ctx, inst, times_input=False),
    "random": _run_random,
    "kernelshapiq": lambda ctx, inst: _run_shapiq(ctx, inst, "kernelshapiq"),
    "svarmiq": lambda ctx, inst: _run_shapiq(ctx, inst, "svarmiq"),
}


def check_available(key: str, family: str, ctx: BenchContext) -> None:
    """Raise :class:`MethodSkipped` if ``key`` cannot run in this environment."""
    fam = family
    if key == "reference":
        _reference_check(ctx)
    elif fam == "captum":
        try:
            import captum.attr  # noqa: F401
        except ImportError as err:
            raise MethodSkipped("captum is not installed: pip install 'slalom-xai[captum]'") from err
        if key in ("lig", "ixg", "saliency"):
            embedding_layer(ctx.model)
        if key == "lime":
            # Captum imports scikit-learn on the first fit: import it now, outside the timing.
            import sklearn.linear_model  # noqa: F401
    elif fam == "shap":
        try:
            import shap  # noqa: F401
        except ImportError as err:
            raise MethodSkipped("shap is not installed: pip install 'slalom-xai[shap]'") from err
        if not getattr(ctx.tokenizer, "is_fast", False):
            raise MethodSkipped("shap's Text masker needs a fast tokenizer (offsets)")
    elif fam == "shapiq":
        from .shapiq_games import require_shapiq

        try:
            require_shapiq()
        except ImportError as err:
            raise MethodSkipped(str(err)) from err


# ----------------------------------------------------------------------------------------
# Scoring any shap.Explanation with shap.benchmark, one text at a time
# ----------------------------------------------------------------------------------------
# ``SequentialMasker`` keeps (or removes) tokens in the order an explanation ranks them and
# records the model output after each step. Under numpy 2 it stacks the curves of all rows
# into one array and crashes on texts of different lengths: every text gets its own masker
# call here, and the curves (interpolated to a common grid by shap) are averaged after.


def _single_output(model: Callable, index: int | None) -> Callable:
    """The benchmark needs a model with one output per text."""

    def f(texts: Any) -> np.ndarray:
        out = np.asarray(model(list(texts)), dtype=np.float64)
        if out.ndim == 1:
            return out
        if index is None:
            if out.shape[1] != 1:
                raise ValueError(f"the model has {out.shape[1]} outputs: choose one with output=")
            return out[:, 0]
        return out[:, index]

    return f


def _output_index(e: shap.Explanation, output: int | str | None) -> int | None:
    if output is None or isinstance(output, int):
        return output
    names = list(e.output_names) if e.output_names is not None else []
    if output not in names:
        raise ValueError(f"output {output!r} is not among the explanation's outputs {names}")
    return names.index(output)


def sequential(
    explanations: Mapping[str, shap.Explanation],
    texts: Sequence[str],
    model: Callable,
    masker: shap.maskers.Text,
    *,
    output: int | str | None = None,
    mask_type: str = "keep",
    sort_order: str = "positive",
    percent: float = 0.01,
) -> dict[str, Any]:
    """Keep/remove benchmark of several explanations of the same texts.

    Args:
        explanations: ``{method name: Explanation}``, each with one row per text of
            ``texts`` and tokens from ``masker``.
        texts: the explained texts.
        model: ``f(list[str]) -> outputs``, the model whose outputs were explained (use
            ``explainer.model`` for SLALOM and give the same to Partition).
        masker: the Text masker used to hide tokens (shap's own: mask token or "...").
        output: which output column (name or index) when the explanations have several.
        mask_type: "keep" (start from all hidden, reveal the top tokens first; higher is
            better) or "remove" (start from the full text, hide the top tokens first; lower
            is better).
        sort_order: "positive", "negative" or "absolute" (shap's orders).
        percent: fraction of tokens changed per step.

    Returns:
        ``{method name: shap.benchmark.BenchmarkResult}`` with the mean curve over texts
        and its area in ``.value`` (``.value_sign`` says whether higher is better); pass
        ``list(result.values())`` to ``shap.plots.benchmark``.

    Example:
        >>> res = sequential({"SLALOM": sv_slalom, "Partition": sv_part}, texts,
        ...                  explainer.model, explainer.masker, output="POSITIVE")  # doctest: +SKIP
        >>> {k: r.value for k, r in res.items()}  # doctest: +SKIP
    """
    import shap
    import shap.benchmark  # not imported by `import shap`

    texts = list(texts)
    results = {}
    for name, e in explanations.items():
        if len(e) != len(texts):
            raise ValueError(f"{name!r} has {len(e)} rows but {len(texts)} texts were given")
        index = _output_index(e, output)
        f = _single_output(model, index)
        curves, xs = [], None
        for i, text in enumerate(texts):
            values = np.asarray(e[i].values, dtype=np.float64)
            if values.ndim == 2:
                if index is None:
                    raise ValueError(f"{name!r} has several outputs: choose one with output=")
                values = values[:, index]
            # One row per SequentialMasker: its numpy-2 stacking never sees ragged rows.
            smasker = shap.benchmark.SequentialMasker(mask_type, sort_order, masker, f, np.array([text], dtype=object))
            res = smasker(values[None, :], name, percent=percent, silent=True)
            xs = res.curve_x
            curves.append(np.asarray(res.curve_y, dtype=np.float64))
        curves_arr = np.array(curves)
        std = curves_arr.std(0) / np.sqrt(len(curves_arr)) if len(curves_arr) > 1 else np.zeros(curves_arr.shape[1])
        results[name] = shap.benchmark.BenchmarkResult(
            f"{mask_type} {sort_order}", name, curve_x=xs, curve_y=curves_arr.mean(0), curve_y_std=std
        )
    return results
