"""Shapley interactions of the surrogate game (slalom_core.interactions) and their shapiq object."""

from __future__ import annotations

import builtins
import math

import numpy as np
import pytest
import slalom_core as sc
import torch
from slalom_core.experiments.synthetic import make_word_tokenizer
from slalom_core.interactions import coalition_values, shapley_interactions, surrogate_game
from slalom_core.scores import shapley
from tiny_models import SlalomModel

WORDS = ["the", "film", "was", "great", "awful", "dull", "plot", "fun"]
TEXT = "the film was great but the plot was dull"  # "but" is [UNK]: 9 positions, one repeated
OFFSET = 0.7  # the model's output on the empty input: a reference point away from 0


class Shifted(torch.nn.Module):
    """A SLALOM over word ids plus a constant, so that the reference point is not 0."""

    def __init__(self, n_classes: int = 1, seed: int = 0) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        vocab = 5 + len(WORDS)
        v = torch.randn(vocab, n_classes, generator=g, dtype=torch.float64) * 2
        self.inner = SlalomModel(v.numpy(), torch.randn(vocab, generator=g, dtype=torch.float64).numpy())

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.inner(input_ids, attention_mask) + OFFSET


def _explain(n_classes: int = 1, text: str = TEXT) -> sc.SlalomExplanation:
    model = sc.TorchClassifier(Shifted(n_classes), tokenizer=make_word_tokenizer(WORDS, add_cls_sep=False))
    options = {"method": "eff"} if n_classes > 1 else {}  # else the default method, whichever it is
    return sc.explain(model, text, n_samples=300, seed=0, output="logits", **options)


@pytest.fixture(scope="module")
def exp() -> sc.SlalomExplanation:
    return _explain()


def test_sii_order_one_is_the_shapley_value_and_pairs_follow_the_definition():
    rng = np.random.default_rng(0)
    v, s = rng.normal(size=6), rng.normal(size=6)
    iv = shapley_interactions(v, s, max_order=2)
    np.testing.assert_allclose(
        [iv[(i,)] for i in range(6)], shapley(v, s), atol=1e-12
    )  # tol: float64 rounding of sums over 2^n coalitions
    # Pair (0, 1) by its definition, from four coalition values per subset of the others.
    n, total = 6, 0.0
    for code in range(2**4):
        rest = [2 + j for j in range(4) if code >> j & 1]
        masks = np.zeros((4, n))
        masks[:, rest] = 1
        masks[1, 0] = masks[2, 1] = masks[3, [0, 1]] = 1
        f = coalition_values(v, s, masks)
        weight = math.factorial(len(rest)) * math.factorial(n - len(rest) - 2) / math.factorial(n - 1)
        total += weight * (f[3] - f[1] - f[2] + f[0])
    assert iv[(0, 1)] == pytest.approx(total, abs=1e-12)  # tol: float64 rounding


def test_k_sii_is_efficient_and_equals_sii_at_the_top_order():
    rng = np.random.default_rng(1)
    v, s = rng.normal(size=5), rng.normal(size=5)
    sii = shapley_interactions(v, s, max_order=2, empty_value=0.3)
    ksii = shapley_interactions(v, s, max_order=2, index="k-SII", empty_value=0.3)
    full = coalition_values(v, s, np.ones((1, 5)))[0]
    assert ksii[()] == 0.3
    assert sum(val for c, val in ksii.items() if c) == pytest.approx(full, abs=1e-12)  # tol: float64 rounding
    assert all(ksii[c] == pytest.approx(sii[c]) for c in sii if len(c) == 2)


def test_long_texts_and_bad_options_are_clear_errors():
    with pytest.raises(ValueError, match="17 positions.*surrogate_game"):
        shapley_interactions(np.zeros(17), np.zeros(17))
    with pytest.raises(ValueError, match="index must be one of"):
        shapley_interactions(np.zeros(3), np.zeros(3), index="STII")
    with pytest.raises(ValueError, match="max_order"):
        shapley_interactions(np.zeros(3), np.zeros(3), max_order=0)


def test_interaction_values_match_shapiqs_exact_computer(exp):
    shapiq = pytest.importorskip("shapiq")
    iv = exp.to_interaction_values(max_order=2)
    assert isinstance(iv, shapiq.InteractionValues)
    assert iv.n_players == exp.n_positions == 9 and not iv.estimated
    assert iv.baseline_value == pytest.approx(float(exp.base_value)) and exp.base_value == pytest.approx(OFFSET)
    exact = shapiq.ExactComputer(n_players=exp.n_positions, game=surrogate_game(exp))
    for index in ("SII", "k-SII"):
        theirs = exact(index, order=2)
        ours = exp.to_interaction_values(max_order=2, index=index)
        assert ours.index == theirs.index and ours.baseline_value == pytest.approx(theirs.baseline_value)
        for coalition, pos in theirs.interaction_lookup.items():
            assert ours[coalition] == pytest.approx(theirs.values[pos], abs=1e-10), (
                index,
                coalition,
            )  # tol: float64 rounding of two exact enumerations


def test_order_one_is_exp_shapley_and_sums_to_the_surrogates_move(exp):
    pytest.importorskip("shapiq")
    iv = exp.to_interaction_values(max_order=2)
    first = np.array([iv[(i,)] for i in range(exp.n_positions)])
    np.testing.assert_allclose(first, exp.shapley(), atol=1e-10)  # tol: float64 rounding
    assert first.sum() == pytest.approx(exp.surrogate_output - exp.base_value, abs=1e-10)  # tol: float64 rounding
    # The game's value on the whole text is the surrogate's output (the model's, less the residual).
    assert surrogate_game(exp)(np.ones((1, exp.n_positions)))[0] == pytest.approx(exp.surrogate_output)
    # The two copies of "the" (positions 0 and 5) are symmetric players.
    assert iv[(0,)] == pytest.approx(iv[(5,)]) and iv[(0, 1)] == pytest.approx(iv[(1, 5)])
    ksii = exp.to_interaction_values(max_order=2, index="k-SII")
    total = ksii.baseline_value + sum(ksii[c] for c in ksii.interaction_lookup if c)
    assert total == pytest.approx(exp.surrogate_output, abs=1e-10)  # tol: float64 rounding


def test_shapiq_plots_draw_it(exp):
    pytest.importorskip("shapiq")
    import matplotlib.pyplot as plt

    iv = exp.to_interaction_values(max_order=2, index="k-SII")
    for plot in (iv.plot_force, iv.plot_network):
        fig = plot(feature_names=exp.tokens, show=False)
        assert fig is not None
        plt.close("all")


def test_a_joint_fit_needs_an_output():
    pytest.importorskip("shapiq")
    exp = _explain(n_classes=3, text="the film was dull")
    with pytest.raises(ValueError, match="output="):
        exp.to_interaction_values()
    iv = exp.to_interaction_values(output=2)
    base = np.asarray(exp.base_value).reshape(-1)[2]
    assert iv.baseline_value == pytest.approx(base)
    np.testing.assert_allclose([iv[(i,)] for i in range(4)], exp.shapley()[:, 2], atol=1e-10)  # tol: float64 rounding


@pytest.mark.parametrize("output", [3, -1, True, "no such class"])
def test_an_output_that_is_not_one_of_the_fits_classes_is_refused_by_name(output):
    # output=3 of 3 classes raised a bare IndexError; output=-1 silently meant the last class.
    pytest.importorskip("shapiq")
    exp = _explain(n_classes=3, text="the film was dull")
    with pytest.raises(ValueError, match=r"explains 3 outputs: choose one with output= .*index 0\.\.2, not"):
        exp.to_interaction_values(output=output)
    with pytest.raises(ValueError, match=r"index 0\.\.2, not"):
        surrogate_game(exp, output=output)
    everything = np.ones((1, 4), dtype=bool)
    assert surrogate_game(exp, output=2)(everything) == surrogate_game(exp, output=np.int64(2))(everything)


def test_without_shapiq_the_error_says_how_to_install(exp, monkeypatch):
    real = builtins.__import__

    def no_shapiq(name, *args, **kwargs):
        if name == "shapiq" or name.startswith("shapiq."):
            raise ImportError("No module named 'shapiq'")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_shapiq)
    with pytest.raises(ImportError, match=r"pip install 'slalom-xai\[shapiq\]'"):
        exp.to_interaction_values()
