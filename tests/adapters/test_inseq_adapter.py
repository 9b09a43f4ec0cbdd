"""inseq_slalom: "slalom" as an inseq attribution method, on a tiny GPT-2 built from its config."""

from __future__ import annotations

import io
import warnings

import numpy as np
import pytest
import slalom_core as sc
import torch
from browser import needs_chromium, render
from PIL import Image
from tiny_models import gpt2_tokenizer, tiny_causal_lm

inseq = pytest.importorskip("inseq")
import inseq_slalom  # noqa: E402  (registers "slalom")

PROMPT = "the movie was great and"
GEN = {"max_new_tokens": 3, "do_sample": False}
N = 120


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    tok = gpt2_tokenizer(tmp_path_factory.mktemp("gpt2"))
    return tiny_causal_lm("gpt2", tok), tok


@pytest.fixture(scope="module")
def model(tiny):
    lm, tok = tiny
    return inseq.load_model(lm, "slalom", tokenizer=tok)


@pytest.fixture(scope="module")
def out(model):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sc.SlalomFitWarning)  # a random LM: poor fits, and they say so
        return model.attribute(PROMPT, generation_args=GEN, n_samples=N, show_progress=False)


def test_slalom_is_registered_as_inseq_registers_its_methods():
    assert "slalom" in inseq.list_feature_attribution_methods()
    assert inseq_slalom.SlalomInseqAttribution.method_name == "slalom"


def test_each_generated_token_is_attributed_to_the_prompt_and_earlier_tokens(out, tiny):
    _, tok = tiny
    seq = out.sequence_attributions[0]
    n_prompt = len(tok(PROMPT)["input_ids"])
    attr = seq.target_attributions
    assert attr.shape == (n_prompt + 3, 3)
    for step in range(3):
        context = n_prompt + step
        assert torch.isfinite(attr[:context, step]).all() and torch.isnan(attr[context:, step]).all()
    for name in inseq_slalom.EXTRA_MAPS:
        both = seq.sequence_scores[name]
        assert both.shape == attr.shape and torch.equal(torch.isnan(both), torch.isnan(attr))
    # The map is α_i·v_i: it sums, with the step's reference point, to the surrogate's log p.
    steps = seq.step_scores
    surrogate = steps["slalom_logprob"] - steps["slalom_residual"]
    # tol: an identity of the fit, exact in float64, but inseq stores each score as a float32
    # tensor: each of the < 20 entries and 3 step scores (log-probabilities, |x| < 20) is rounded
    # by at most 20 · 6e-8 ≈ 1.2e-6, so the sum is off by < 3e-5 on any CPU (bound 1e-4: 3×)
    torch.testing.assert_close(torch.nansum(attr, dim=0) + steps["slalom_reference"], surrogate, atol=1e-4, rtol=0)
    assert (steps["slalom_model_calls"] > 0).all() and (steps["slalom_model_calls"] <= N + 1).all()


def test_same_meaning_and_reference_point_as_explain(out, tiny):
    lm, tok = tiny
    seq = out.sequence_attributions[0]
    context = tok(PROMPT)["input_ids"]
    target = seq.target[len(context)].id
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sc.SlalomFitWarning)
        exp = sc.explain(
            inseq_slalom.NextTokenLogProb(lm, target, tokenizer=tok), context, n_samples=N, seed=0, output="logits"
        )
    # Two fits of the same samples, whose model calls may be batched differently: compare what
    # the data determine. tol: a tenth of each score's own standard error (tests/invariance.py's
    # rule) plus float32 storage in inseq's tensors (~1e-6 of scores of size ~10).
    for name, mine, se in (("value", exp.value, exp.value_se), ("importance", exp.importance, exp.importance_se)):
        theirs = np.asarray(seq.sequence_scores[f"slalom_{name}"][: len(context), 0], dtype=float)
        bound = 0.1 * np.ravel(se) + 1e-5
        assert np.all(np.abs(theirs - np.ravel(mine)) <= bound), name
    # The reference point: log p(token) after the BOS token alone; f(x): after the prompt.
    with torch.no_grad():
        alone = torch.log_softmax(lm(torch.tensor([[tok.bos_token_id]])).logits[0, -1], -1)[target]
        full = torch.log_softmax(lm(torch.tensor([context])).logits[0, -1], -1)[target]
    # tol: float32 forward passes of the same ids in batches of other shapes, whose kernels sum
    # in other orders (and differ between CPUs' instruction sets): float32's 6e-8 relative
    # rounding, accumulated through the tiny GPT-2's one layer of 32-wide sums, the softmax
    # over its vocabulary and the log, stays below 1e-5 relative; 1e-4 relative leaves 10×
    assert seq.step_scores["slalom_reference"][0] == pytest.approx(float(alone), rel=1e-4, abs=1e-5)
    # tol: as above
    assert seq.step_scores["slalom_logprob"][0] == pytest.approx(float(full), rel=1e-4, abs=1e-5)


def test_batched_prompts_match_single_ones(model, tiny):
    _, tok = tiny
    prompts = [PROMPT, "a bad film"]
    generated = [p + " the" for p in prompts]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sc.SlalomFitWarning)
        both = model.attribute(prompts, generated, n_samples=N, show_progress=False)
        alone = model.attribute(prompts[1], generated[1], n_samples=N, show_progress=False)
    a, b = both.sequence_attributions[1], alone.sequence_attributions[0]
    assert [t.token for t in a.target] == [t.token for t in b.target]
    # A prompt batched with another and alone: its model calls are composed differently, so
    # compare what the data determine rather than fitted parameters.
    for key in ("slalom_logprob", "slalom_reference"):
        # tol: float32 forward passes of the same ids in differently padded batches: the same
        # bound as in test_same_meaning_and_reference_point_as_explain, 1e-4 relative
        torch.testing.assert_close(a.step_scores[key], b.step_scores[key], atol=1e-5, rtol=1e-4)
    for name in ("target_attributions", "slalom_importance"):
        x = a.target_attributions if name == "target_attributions" else a.sequence_scores[name]
        y = b.target_attributions if name == "target_attributions" else b.sequence_scores[name]
        assert torch.equal(torch.isnan(x), torch.isnan(y)), name  # the same positions, each step
    # Each step's surrogate output lies within its residual of the model's log p, in both runs:
    # by the triangle inequality the two differ by at most the sum of the residuals (exact),
    # plus the float32 storage of the maps (tol: ~1e-6 per entry, 1e-4 in all).
    out_a = torch.nansum(a.target_attributions, dim=0) + a.step_scores["slalom_reference"]
    out_b = torch.nansum(b.target_attributions, dim=0) + b.step_scores["slalom_reference"]
    bound = a.step_scores["slalom_residual"].abs() + b.step_scores["slalom_residual"].abs() + 1e-4
    assert bool(((out_a - out_b).abs() <= bound).all())


def test_show_and_aggregators_work_on_the_map_and_on_each_channel(out):
    html = out.show(display=False, return_html=True)
    assert "Ġmovie" in html or "movie" in html
    merged = out.aggregate("subwords", special_chars=("Ġ",))
    assert merged.sequence_attributions[0].target_attributions.shape[0] < out[0].target_attributions.shape[0]
    for name in ("value", "importance"):
        one = inseq_slalom.channel(out, name)
        assert torch.equal(
            one[0].target_attributions.nan_to_num(), out[0].sequence_scores[f"slalom_{name}"].nan_to_num()
        )
        assert "<" in one.show(display=False, return_html=True)
        one.aggregate("subwords", special_chars=("Ġ",))
    with pytest.raises(ValueError, match="value"):
        inseq_slalom.channel(out, "lin")


def test_options_and_wrong_uses_are_clear(model):
    with pytest.raises(ValueError, match="score must be one of"):
        model.attribute(PROMPT, generation_args=GEN, score="nope", show_progress=False)
    with pytest.raises(ValueError, match="log-probability"):
        model.attribute(PROMPT, generation_args=GEN, attributed_fn="logit", show_progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sc.SlalomFitWarning)
        value = model.attribute(PROMPT, generation_args={**GEN, "max_new_tokens": 1}, score="value", n_samples=N)
    seq = value.sequence_attributions[0]
    torch.testing.assert_close(seq.target_attributions, seq.sequence_scores["slalom_value"], equal_nan=True)


def test_a_prompt_longer_than_the_models_positions_is_refused_by_name(model, tiny):
    # It raised a bare IndexError inside GPT-2's position embedding (the tiny one has 128).
    lm, tok = tiny
    long = " ".join([PROMPT] * 40)
    n = len(tok(long)["input_ids"])
    assert n > lm.config.n_positions == 128
    with pytest.raises(
        ValueError,
        match=rf"the prompt has {n} tokens and 3 are to be generated, but the model reads "
        r"at most 128 positions: shorten the prompt to its last 126 tokens",
    ):
        model.attribute(long, generation_args=GEN, n_samples=N, show_progress=False)
    # A continuation given (no generation): the context of its first token is refused alike.
    with pytest.raises(ValueError, match=rf"context has {n} tokens, but the model reads at most 128 positions"):
        model.attribute(long, long + " great", n_samples=N, show_progress=False)
    # The scorer on its own, through the engine: refused by the engine's length check.
    scorer = inseq_slalom.NextTokenLogProb(lm, tok(" great")["input_ids"][0], tokenizer=tok)
    with pytest.raises(ValueError, match=rf"the text has {n} tokens .* accepts at most 128"):
        sc.explain(scorer, tok(long)["input_ids"], n_samples=N, seed=0, output="logits")
    # The check is the method's hook: another method takes the model's own generation back.
    assert "generate" in vars(model)
    model.get_attribution_method("saliency", override_default_attribution=True)
    assert "generate" not in vars(model)
    model.get_attribution_method("slalom", override_default_attribution=True)
    assert "generate" in vars(model)


@needs_chromium
def test_show_renders_in_headless_chromium_with_its_colours(out, tmp_path):
    # inseq_slalom.show: inseq's own show(), its cells' colours readable under numpy 2.
    html = inseq_slalom.show(out, display=False, return_html=True)
    assert "np.float" not in html and "rgba(" in html
    page = tmp_path / "inseq.html"
    page.write_text(html, encoding="utf-8")
    seen = render(page)
    assert "movie" in seen.dom
    rgb = np.asarray(Image.open(io.BytesIO(seen.png)).convert("RGB"), dtype=int)
    # Heatmap cells are tinted red or blue; CSS a browser drops leaves text and borders only.
    assert int((np.abs(rgb[..., 0] - rgb[..., 2]) > 40).sum()) > 500
    with pytest.raises(TypeError, match="inseq output"):
        inseq_slalom.show("not an output")


def test_a_fit_warning_points_at_the_users_line(model):
    # The warning names the user's call, not ``exp = sc.explain(`` inside the adapter.
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        model.attribute(PROMPT, generation_args={**GEN, "max_new_tokens": 1}, n_samples=N, show_progress=False)
    fit = [w for w in seen if issubclass(w.category, sc.SlalomFitWarning)]
    assert fit and all(w.filename == __file__ for w in fit), [(w.filename, w.lineno) for w in fit]
