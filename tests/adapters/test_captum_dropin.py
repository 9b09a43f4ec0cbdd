"""SlalomAttribution as a drop-in for Captum's Lime: the calls Captum users already make.

Everything runs on tiny random transformers built from configs (nothing is downloaded).
The reference answer is always the engine's own ``slalom_core.explain`` on the same ids
with the same seed: an adapter call that means the same thing must give the same scores.
"""

from __future__ import annotations

import warnings

import pytest
import slalom_core  # noqa: E402
import torch
from captum.attr import Lime  # noqa: E402
from tiny_models import bert_tokenizer, gpt2_tokenizer, tiny_classifier  # noqa: E402

from captum_slalom import SlalomAttribution  # noqa: E402

TEXT = "the movie was not very good but the actor was great"


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    tok = bert_tokenizer(tmp_path_factory.mktemp("bert_tok"))
    return tiny_classifier("bert", tok, initializer_range=0.2), tok


def _tutorial_inputs(tok):
    """The inputs of Captum's BERT tutorial: ids, a [CLS] [PAD]... [SEP] baseline, and
    token type ids, position ids and attention mask as additional forward args."""
    ids = tok(TEXT, return_tensors="pt")["input_ids"]
    ref = torch.full_like(ids, tok.pad_token_id)
    ref[0, 0], ref[0, -1] = tok.cls_token_id, tok.sep_token_id
    token_type_ids = torch.zeros_like(ids)
    position_ids = torch.arange(ids.shape[1]).unsqueeze(0)
    attention_mask = torch.ones_like(ids)
    return ids, ref, (token_type_ids, position_ids, attention_mask)


def _engine_contribution(model, tok, ids, seed):
    content = ids[0, 1:-1].tolist()
    exp = slalom_core.explain(model, content, tokenizer=tok, n_samples=300, seed=seed)
    return torch.tensor(exp.contribution, dtype=torch.get_default_dtype()), exp


def test_tutorial_call_deletes_tokens_and_matches_the_engine(bert):
    model, tok = bert
    ids, ref, extra = _tutorial_inputs(tok)
    seen = []

    def predict(inputs, token_type_ids=None, position_ids=None, attention_mask=None):
        seen.append((inputs, token_type_ids, position_ids, attention_mask))
        return model(
            inputs, token_type_ids=token_type_ids, position_ids=position_ids, attention_mask=attention_mask
        ).logits

    attr = SlalomAttribution(predict).attribute(
        ids, baselines=ref, target=1, additional_forward_args=extra, n_samples=300, seed=0
    )
    expected, exp = _engine_contribution(model, tok, ids, seed=0)
    assert attr.shape == ids.shape
    assert attr[0, 0] == 0 and attr[0, -1] == 0  # [CLS]/[SEP] found from the baseline
    # tol: float32: the model read through Captum's forward (other batches and padding) differs by float32 rounding, which the fit passes on
    torch.testing.assert_close(attr[0, 1:-1], expected, atol=1e-4, rtol=1e-4)
    # Deletion, not replacement: the model saw short samples, never the baseline's [PAD],
    # with every per-position argument cut to the sample and positions renumbered.
    widths = [x[0].shape[1] for x in seen[1:]]
    assert min(widths) == 2 and sum(w < ids.shape[1] for w in widths) > len(widths) // 2  # 2: the reference
    for inputs, tt, pos, am in seen[1:]:
        assert not (inputs == tok.pad_token_id).any()
        assert tt.shape == inputs.shape and am.shape == inputs.shape and (am == 1).all()
        assert torch.equal(pos, torch.arange(inputs.shape[1]).expand_as(inputs))
    # Same cost as the engine on its own (plus Captum's one probe call on the real input).
    evaluations = sum(x[0].shape[0] for x in seen)
    assert evaluations == exp.diagnostics["model_evaluations"] + 1


@pytest.mark.parametrize("form", ["tensor", "1-tuple", "2-tuple", "3-tuple"])
def test_input_tuples_of_one_to_three_tensors(bert, form):
    model, tok = bert
    enc = tok(TEXT, return_tensors="pt")
    ids, mask, tt = enc["input_ids"], enc["attention_mask"], enc["token_type_ids"]
    if form in ("tensor", "1-tuple"):
        inputs = ids if form == "tensor" else (ids,)

        def f(i):
            return model(input_ids=i).logits
    elif form == "2-tuple":
        inputs = (ids, mask)

        def f(i, m):
            return model(input_ids=i, attention_mask=m).logits
    else:
        inputs = (ids, tt, mask)  # the order of tokenizer(...).values() for BERT

        def f(i, t, m):
            return model(input_ids=i, token_type_ids=t, attention_mask=m).logits

    out = SlalomAttribution(f, tokenizer=tok).attribute(inputs, target=1, n_samples=300, seed=0)
    expected, _ = _engine_contribution(model, tok, ids, seed=0)
    if form == "tensor":
        assert isinstance(out, torch.Tensor)
        attr = out
    else:
        assert isinstance(out, tuple) and len(out) == len(inputs)
        assert all(o.shape == t.shape for o, t in zip(out, inputs))
        assert all((o == 0).all() for o in out[1:])
        attr = out[0]
    # tol: float32: the model read through Captum's forward (other batches and padding) differs by float32 rounding, which the fit passes on
    torch.testing.assert_close(attr[0, 1:-1], expected, atol=1e-4, rtol=1e-4)


def test_lime_positional_order_and_return_input_shape(bert):
    model, tok = bert
    ids = tok(TEXT, return_tensors="pt")["input_ids"]

    def f(i):
        return model(input_ids=i).logits

    slalom = SlalomAttribution(f, tokenizer=tok)
    # inputs, baselines, target, additional_forward_args, feature_mask, n_samples,
    # perturbations_per_eval, return_input_shape: Lime's positions.
    torch.manual_seed(1)
    flat = slalom.attribute(ids, None, 1, None, None, 200, 16, False)
    torch.manual_seed(1)
    full = slalom.attribute(ids, None, 1, None, None, 200, 16, True)
    assert flat.shape == (1, ids.shape[1])  # one example: (1, positions), as Lime's
    torch.testing.assert_close(flat, full)
    lime = Lime(f).attribute(ids, baselines=0, target=1, n_samples=10, return_input_shape=False)
    assert flat.shape == lime.shape
    # With a feature mask: one score per feature id, as Lime's coefficients.
    words = torch.tensor([[0, 1, 1, 2, 3, 4, 5, 6, 6, 7, 8, 9, 10]])[:, : ids.shape[1]]
    words[0, -1] = 0  # [SEP] shares [CLS]'s feature id 0 (no feature: special)
    words[0, 0] = 0
    per_feature = slalom.attribute(ids, target=1, feature_mask=words, return_input_shape=False, n_samples=200, seed=0)
    shaped = slalom.attribute(ids, target=1, feature_mask=words, n_samples=200, seed=0)
    assert per_feature.shape == (1, int(words.max()) + 1)
    for fid in range(1, int(words.max()) + 1):
        assert torch.allclose(shaped[words == fid], per_feature[0, fid])
    # Batch of two: batch x features, as Lime.
    two = slalom.attribute(ids.repeat(2, 1), target=1, return_input_shape=False, n_samples=200, seed=0)
    assert two.shape == (2, ids.shape[1])


def test_manual_seed_reproduces_like_lime(bert):
    model, tok = bert
    ids = tok(TEXT, return_tensors="pt")["input_ids"]

    def f(i):
        return model(input_ids=i).logits

    for explainer in (Lime(f), SlalomAttribution(f, tokenizer=tok)):
        torch.manual_seed(3)
        a = explainer.attribute(ids, target=1, n_samples=60)
        torch.manual_seed(3)
        b = explainer.attribute(ids, target=1, n_samples=60)
        c = explainer.attribute(ids, target=1, n_samples=60)
        assert torch.equal(a, b)
        assert not torch.equal(a, c)


def test_train_mode_explained_in_eval_and_every_submodule_restored(bert):
    model, tok = bert
    ids = tok(TEXT, return_tensors="pt")["input_ids"]
    expected = SlalomAttribution(model.forward, tokenizer=tok).attribute(ids, target=1, n_samples=200, seed=0)
    model.train()
    model.bert.embeddings.eval()  # a frozen part, kept in eval mode by the user
    before = {name: m.training for name, m in model.named_modules()}
    try:
        got = SlalomAttribution(model.forward, tokenizer=tok).attribute(ids, target=1, n_samples=200, seed=0)
        torch.testing.assert_close(got, expected)  # dropout was off
        assert {name: m.training for name, m in model.named_modules()} == before
        # Also when the call fails half-way.
        with pytest.raises(ValueError):
            SlalomAttribution(model.forward, tokenizer=tok).attribute(ids, target=7, n_samples=200)
        assert {name: m.training for name, m in model.named_modules()} == before
    finally:
        model.eval()


def test_gpt2_without_pad_token_works_with_the_defaults(tok_dir):
    tok = gpt2_tokenizer(tok_dir / "gpt2_dropin")
    model = tiny_classifier("gpt2", tok, initializer_range=0.2)
    assert model.config.pad_token_id is None
    ids = tok("the movie was great but the plot was boring", return_tensors="pt")["input_ids"]

    def f(i):
        return model(input_ids=i).logits

    lime = Lime(f).attribute(ids, target=1, n_samples=20)  # Lime's defaults work
    assert torch.isfinite(lime).all()
    # The reference input is GPT-2's end-of-text token, read from the tokenizer; without
    # one there is no input without tokens, and the error says to pass the tokenizer.
    with pytest.raises(ValueError, match="tokenizer="):
        SlalomAttribution(model.forward).attribute(ids, target=1, n_samples=100)
    # A closure: batches > 1 fail inside GPT-2, so SLALOM falls back to one per call.
    with pytest.warns(UserWarning, match="one sample per call"):
        closure = SlalomAttribution(f, tokenizer=tok).attribute(ids, target=1, n_samples=100, seed=0)
    # The module itself (or model.forward): same-length batches, no fallback needed.
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*one sample per call.*")
        direct = SlalomAttribution(model.forward, tokenizer=tok).attribute(ids, target=1, n_samples=100, seed=0)
    # tol: float32: a closure and the module read in other batches differ by float32 rounding, which the fit passes on
    torch.testing.assert_close(closure, direct, atol=1e-4, rtol=1e-4)
    assert model.config.pad_token_id is None  # the config comes back unchanged
    # (ids, attention_mask) without any padding in the inputs: the pad id is unknown, so
    # nothing is padded and the model is never asked to pool over padding.
    mask = torch.ones_like(ids)
    seen_pad = []

    def g(i, m):
        seen_pad.append(bool((m == 0).any()))
        return model(input_ids=i, attention_mask=m).logits

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the closure falls back to one sample per call
        pair = SlalomAttribution(g, tokenizer=tok).attribute((ids, mask), target=1, n_samples=100, seed=0)
    # tol: float32: a closure and the module read in other batches differ by float32 rounding, which the fit passes on
    torch.testing.assert_close(pair[0], direct, atol=1e-4, rtol=1e-4)
    assert not any(seen_pad)


def test_replacement_is_explicit_and_keeps_the_length(bert):
    model, tok = bert
    ids, ref, extra = _tutorial_inputs(tok)
    widths = set()

    def predict(inputs, token_type_ids, position_ids, attention_mask):
        widths.add(inputs.shape[1])
        return model(
            inputs, token_type_ids=token_type_ids, position_ids=position_ids, attention_mask=attention_mask
        ).logits

    attr = SlalomAttribution(predict).attribute(
        ids, baselines=ref, target=1, additional_forward_args=extra, perturbation="replace", n_samples=200, seed=0
    )
    assert widths == {ids.shape[1]}
    # Replacing, the baseline is what absent features take, not a list of special tokens:
    # [CLS]/[SEP] (replaced by themselves) are features that never change the input, as in
    # Lime: they do nothing alone (value ~0), and carry only their weight's share of the
    # surrogate's length term p(1 − A(n)) (contribution α_i·(p + A(n)(v_i − p))), small beside
    # the tokens that move the output; the tokenizer names them special (attribution exactly 0).
    assert max(abs(attr[0, 0]), abs(attr[0, -1])) < 0.1 * attr.abs().max()
    named = SlalomAttribution(predict, tokenizer=tok).attribute(
        ids, baselines=ref, target=1, additional_forward_args=extra, perturbation="replace", n_samples=200, seed=0
    )
    assert named[0, 0] == 0 and named[0, -1] == 0


def test_probabilities_are_detected_and_explained_in_log_odds(bert):
    model, tok = bert
    ids = tok(TEXT, return_tensors="pt")["input_ids"]

    def logits(i):
        return model(input_ids=i).logits

    def probs(i):
        return torch.softmax(model(input_ids=i).logits, dim=-1)

    expected = SlalomAttribution(logits, tokenizer=tok).attribute(ids, target=1, n_samples=200, seed=0)
    with pytest.warns(slalom_core.SlalomOutputWarning, match="probabilit") as rec:
        got = SlalomAttribution(probs, tokenizer=tok).attribute(ids, target=1, n_samples=200, seed=0)
    assert rec[0].filename == __file__  # the user's line, not the adapter's or Captum's
    # tol: float32 probabilities turned into log-odds keep float32 rounding, which the fit passes on
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)
    with pytest.raises(ValueError, match="probs"):
        SlalomAttribution(logits, tokenizer=tok).attribute(ids, target=1, n_samples=200, output="probs")


def test_result_tokens_are_the_tokenizers_strings(bert):
    model, tok = bert
    ids = tok(TEXT, return_tensors="pt")["input_ids"]
    res = SlalomAttribution(lambda i: model(input_ids=i).logits, tokenizer=tok).attribute(
        ids, target=1, n_samples=200, seed=0, return_all=True
    )
    assert res.explanations[0].tokens == tok.convert_ids_to_tokens(ids[0, 1:-1].tolist())
    words = torch.tensor([[0, 1, 1, 2, 3, 4, 5, 6, 6, 7, 8, 9, 0]])[:, : ids.shape[1]]
    grouped = SlalomAttribution(lambda i: model(input_ids=i).logits, tokenizer=tok).attribute(
        ids, target=1, n_samples=200, seed=0, return_all=True, feature_mask=words, perturbation="replace", baselines=0
    )
    first = tok.convert_ids_to_tokens(ids[0, 1:3].tolist())
    assert grouped.explanations[0].tokens[0] == " ".join(first)


def test_over_length_input_is_a_clear_error(bert):
    model, tok = bert
    calls = []

    def f(i):
        calls.append(i.shape)
        return model(input_ids=i).logits

    limit = model.config.max_position_embeddings
    ids = torch.full((1, limit + 5), tok.convert_tokens_to_ids("good"))
    ids[0, 0], ids[0, -1] = tok.cls_token_id, tok.sep_token_id
    # The model is reachable (a module, or a tokenizer with a limit): refused before any call.
    with pytest.raises(ValueError, match=f"at most {limit}"):
        SlalomAttribution(model, tokenizer=tok).attribute(ids, target=1, n_samples=50, seed=0)
    # Behind a closure nothing declares the limit: the probe call's failure, in one line.
    with pytest.raises(ValueError, match="fails on the first example of inputs as given.*longer than") as err:
        SlalomAttribution(f, tokenizer=tok).attribute(ids, target=1, n_samples=50, seed=0)
    assert "\n" not in str(err.value)
    assert len(calls) == 1


def test_embeddings_as_inputs_get_a_hint(bert):
    model, tok = bert
    ids = tok(TEXT, return_tensors="pt")["input_ids"]
    embeds = model.get_input_embeddings()(ids)
    with pytest.raises(ValueError, match="embeddings") as err:
        SlalomAttribution(lambda e: model(inputs_embeds=e).logits).attribute(embeds, target=1)
    assert "unsqueeze" not in str(err.value)
    with pytest.raises(ValueError, match="unsqueeze"):
        SlalomAttribution(lambda i: model(input_ids=i).logits).attribute(ids[0], target=1)


def test_without_tokenizer_the_hf_models_own_tokenizer_is_found(bert, tmp_path):
    # An HF model as the forward function, no tokenizer=: its tokenizer is reachable from
    # its config (saved model), so [CLS]/[SEP] stay in place as with tokenizer=tok.
    from transformers import AutoModelForSequenceClassification

    model, tok = bert
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    loaded = AutoModelForSequenceClassification.from_pretrained(tmp_path).eval()
    ids = tok(TEXT, return_tensors="pt")["input_ids"]
    got = SlalomAttribution(loaded).attribute(ids, target=1, n_samples=300, seed=0)
    expected, _ = _engine_contribution(model, tok, ids, seed=0)
    assert got[0, 0] == 0 and got[0, -1] == 0
    # tol: float32: the model read through Captum's forward (other batches and padding) differs by float32 rounding, which the fit passes on
    torch.testing.assert_close(got[0, 1:-1], expected, atol=1e-4, rtol=1e-4)


def test_without_any_special_token_source_the_error_says_tokenizer(bert):
    # Nothing says which ids are [CLS]/[SEP] and the model cannot read an input without
    # tokens: the advice is tokenizer=, not reference= (which would make [CLS]/[SEP]
    # features and change every score).
    model, tok = bert
    ids = tok(TEXT, return_tensors="pt")["input_ids"]
    with pytest.raises(ValueError, match="tokenizer=") as err:
        SlalomAttribution(lambda i: model(input_ids=i).logits).attribute(ids, target=1, n_samples=100, seed=0)
    assert "reference=<number>" not in str(err.value)


def test_sentence_pair_token_type_ids_are_not_read_as_an_attention_mask(bert):
    model, tok = bert
    enc = tok("the movie was good", "the actor was bad", return_tensors="pt")
    ids, tt = enc["input_ids"], enc["token_type_ids"]  # 0s on [CLS] A [SEP], 1s on B [SEP]

    def pair(i, t):
        return model(input_ids=i, token_type_ids=t).logits

    slalom = SlalomAttribution(pair, tokenizer=tok)
    kw = dict(target=1, n_samples=200, seed=0, perturbation="replace", baselines=(tok.pad_token_id, None))
    attr, tt_attr = slalom.attribute((ids, tt), **kw)
    # Sentence A is explained (it was padding, attribution exactly 0, before), and token
    # types are passed as given, exactly as when they are an extra forward argument.
    first = (tt[0] == 0) & ~torch.isin(ids[0], torch.tensor(tok.all_special_ids))
    assert (attr[0, first] != 0).all()
    alone = slalom.attribute(ids, additional_forward_args=(tt,), **{**kw, "baselines": tok.pad_token_id})
    torch.testing.assert_close(attr, alone)
    assert (tt_attr == 0).all()
    # Deleting cannot keep the middle [SEP] in place: a clear error, not sentence B alone.
    with pytest.raises(ValueError, match="between content tokens"):
        slalom.attribute((ids, tt), target=1, n_samples=200, seed=0)
    # A real attention mask, with padding, is still read as one (pad id known or not).
    batch = tok(["the movie was good", "a bad plot"], return_tensors="pt", padding=True)
    ids2, mask = batch["input_ids"], batch["attention_mask"]
    assert (mask == 0).any()

    def masked(i, m):
        return model(input_ids=i, attention_mask=m).logits

    for s in (SlalomAttribution(masked, tokenizer=tok), SlalomAttribution(masked, special_token_ids=[2, 3])):
        out, _ = s.attribute((ids2, mask), target=1, n_samples=100, seed=0)
        assert (out[mask == 0] == 0).all() and (out[1, 1:4] != 0).all()
