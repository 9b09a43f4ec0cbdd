"""Tests of slalom_core.experiments.evaluation on hand-made cases with known answers."""

from __future__ import annotations

import math

import numpy as np
import pytest
from slalom_core.experiments import evaluation as ev

# ----------------------------------------------------------------------------------------
# A toy additive model: p(y=1 | t) = sigmoid(b + Σ_i w[t_i]). Removing a token with a large
# positive weight lowers the score most, so ranking by w is the perfect explanation.
# ----------------------------------------------------------------------------------------

WEIGHTS = {10: 3.0, 11: -2.0, 12: 1.5, 13: 0.5, 14: -0.5, 15: 2.2, 16: 0.1, 17: -1.0, 18: 0.8, 19: 1.1}
MASK_ID = 0  # weight 0: replacing a token by the mask removes its evidence
BIAS = -0.3


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def _score(seq) -> float:
    return _sigmoid(BIAS + sum(WEIGHTS.get(t, 0.0) for t in seq))


class Recorder:
    """predict() for the toy model that records every batch it is given."""

    def __init__(self):
        self.batches: list[list[list[int]]] = []

    def __call__(self, seqs):
        self.batches.append([list(s) for s in seqs])
        return np.array([_score(s) for s in seqs])


IDS = list(WEIGHTS)  # 10 tokens
PERFECT = np.array([WEIGHTS[t] for t in IDS])


# ----------------------------------------------------------------------------------------
# Ranking and bins
# ----------------------------------------------------------------------------------------


def test_rank_tokens_descending_signed_and_absolute_with_ties():
    a = [0.5, 2.0, -3.0, 2.0, 0.0, 0.5]
    # Signed: 2.0 (pos 1), 2.0 (pos 3), 0.5 (pos 0), 0.5 (pos 5), 0.0, -3.0; ties by position.
    assert ev.rank_tokens(a).tolist() == [1, 3, 0, 5, 4, 2]
    assert ev.rank_tokens(a, absolute=True).tolist() == [2, 1, 3, 0, 5, 4]
    # All tied: identity order.
    assert ev.rank_tokens([1.0] * 5).tolist() == [0, 1, 2, 3, 4]


def test_rank_tokens_rejects_nan():
    with pytest.raises(ValueError):
        ev.rank_tokens([1.0, float("nan")])


@pytest.mark.parametrize(
    "fraction,n,k",
    [
        (0.0, 10, 0),
        (0.01, 10, 1),
        (0.05, 10, 1),
        (0.2, 10, 2),
        (0.5, 10, 5),
        (0.1, 30, 3),  # 0.1 * 30 = 3.0000000000000004 in floats: must not round up to 4
        (0.05, 200, 10),
        (0.01, 150, 2),
        (0.5, 7, 4),
        (1.0, 7, 7),
        (0.01, 1, 1),
        (0.5, 1, 1),
        # rounding up, not to nearest: 2.4 -> 3, 1.25 -> 2, 2.5 -> 3
        (0.2, 12, 3),
        (0.05, 25, 2),
        (0.5, 5, 3),
    ],
)
def test_tokens_for_fraction(fraction, n, k):
    assert ev.tokens_for_fraction(fraction, n) == k


def test_tokens_for_fraction_rejects_out_of_range():
    with pytest.raises(ValueError):
        ev.tokens_for_fraction(1.5, 10)


def test_perturb_sequence_modes_and_strategies():
    ids = [10, 11, 12, 13]
    order = [2, 0, 3, 1]
    assert ev.perturb_sequence(ids, order, 2) == [11, 13]
    assert ev.perturb_sequence(ids, order, 2, mode="insertion") == [10, 12]  # original order
    assert ev.perturb_sequence(ids, order, 2, strategy="replace", replacement_id=0) == [0, 11, 0, 13]
    assert ev.perturb_sequence(ids, order, 2, mode="insertion", strategy="replace", replacement_id=0) == [10, 0, 12, 0]
    assert ev.perturb_sequence(ids, order, 0) == ids
    assert ev.perturb_sequence(ids, order, 4) == []


# ----------------------------------------------------------------------------------------
# Comprehensiveness / sufficiency / AOPC
# ----------------------------------------------------------------------------------------


def test_comprehensiveness_known_value_by_hand():
    pred = Recorder()
    res = ev.comprehensiveness(pred, IDS, PERFECT)
    # n = 10: bins 1, 5, 10, 20, 50 % -> k = 1, 1, 1, 2, 5 (ceil, at least one token).
    assert res.k.tolist() == [1, 1, 1, 2, 5]
    full = _score(IDS)
    # Top tokens by weight: 10 (3.0), 15 (2.2), 12 (1.5), 19 (1.1), 18 (0.8).
    without1 = _score([t for t in IDS if t != 10])
    without2 = _score([t for t in IDS if t not in (10, 15)])
    without5 = _score([t for t in IDS if t not in (10, 15, 12, 19, 18)])
    expected = np.mean([full - without1] * 3 + [full - without2, full - without5])
    # tol: float64 rounding of a mean of differences of float64 scores
    assert res.value == pytest.approx(expected, abs=1e-12)
    assert res.full_score == pytest.approx(full)
    assert res.strategy == "delete" and res.replacement_id is None
    # One predict call for the whole text; duplicates (k=1 three times) sent once.
    assert len(pred.batches) == 1
    assert res.model_evaluations == len(pred.batches[0]) == 4  # full + k=1, 2, 5


def test_sufficiency_known_value_by_hand():
    pred = Recorder()
    res = ev.sufficiency(pred, IDS, PERFECT, bins=(0.1, 0.3))
    full = _score(IDS)
    keep1 = _score([10])
    keep3 = _score([10, 12, 15])
    # tol: float64 rounding of a mean of differences of float64 scores
    assert res.value == pytest.approx(np.mean([full - keep1, full - keep3]), abs=1e-12)
    # Kept tokens keep their original order (10, 12, 15), not the ranking order.
    assert [10, 12, 15] in pred.batches[0]


def test_perfect_beats_random_beats_reversed():
    rand = ev.random_attributions(len(IDS), seed=3)
    # Guard: the random ranking is neither the perfect nor the reversed one.
    assert ev.rank_tokens(rand).tolist() not in (ev.rank_tokens(PERFECT).tolist(), ev.rank_tokens(-PERFECT).tolist())
    bins = ev.CURVE_FRACTIONS[1:]
    comp = {
        name: ev.comprehensiveness(Recorder(), IDS, a, bins=bins).value
        for name, a in [("perfect", PERFECT), ("random", rand), ("reversed", -PERFECT)]
    }
    assert comp["perfect"] > comp["random"] > comp["reversed"]
    # On ERASER's bins (at most half the text removed) the reversed ranking removes only
    # negative evidence, so the score rises: negative comprehensiveness.
    assert ev.comprehensiveness(Recorder(), IDS, PERFECT).value > 0
    assert ev.comprehensiveness(Recorder(), IDS, -PERFECT).value < 0
    suff = {
        name: ev.sufficiency(Recorder(), IDS, a, bins=bins).value
        for name, a in [("perfect", PERFECT), ("random", rand), ("reversed", -PERFECT)]
    }
    # Sufficiency: lower is better.
    assert suff["perfect"] < suff["random"] < suff["reversed"]
    # The AOPC helpers agree with the result objects.
    assert ev.deletion_aopc(Recorder(), IDS, PERFECT, fractions=bins) == pytest.approx(comp["perfect"])
    assert ev.insertion_aopc(Recorder(), IDS, PERFECT, fractions=bins) == pytest.approx(suff["perfect"])


def test_default_aopc_equals_eraser_metrics():
    assert ev.deletion_aopc(Recorder(), IDS, PERFECT) == pytest.approx(
        ev.comprehensiveness(Recorder(), IDS, PERFECT).value
    )
    assert ev.insertion_aopc(Recorder(), IDS, PERFECT) == pytest.approx(ev.sufficiency(Recorder(), IDS, PERFECT).value)


def test_absolute_ranking_changes_result():
    # Token 11 has the most negative weight; with absolute=True it is ranked first.
    a = PERFECT.copy()
    signed = ev.comprehensiveness(Recorder(), IDS, a, bins=(0.1,))
    unsigned = ev.comprehensiveness(Recorder(), IDS, a, bins=(0.1,), absolute=True)
    full = _score(IDS)
    assert signed.value == pytest.approx(full - _score([t for t in IDS if t != 10]))
    # 10 (|3.0|) still outranks 11 (|-2.0|); use a case where the negative one wins:
    a2 = np.array([0.1, -5.0, 0.2])
    r = ev.comprehensiveness(Recorder(), [13, 11, 16], a2, bins=(0.3,), absolute=True)
    assert r.value == pytest.approx(_score([13, 11, 16]) - _score([13, 16]))
    assert unsigned.absolute and not signed.absolute


def test_ties_are_broken_by_position():
    ids = [10, 15, 11]  # weights 3.0, 2.2, -2.0
    tied = [1.0, 1.0, 1.0]
    r = ev.comprehensiveness(Recorder(), ids, tied, bins=(0.3,))
    # k = 1: the first position (token 10) is removed.
    assert r.value == pytest.approx(_score(ids) - _score([15, 11]))
    # A tie between positions 1 and 2 only: position 1 goes first.
    r2 = ev.comprehensiveness(Recorder(), ids, [0.0, 2.0, 2.0], bins=(0.3,))
    assert r2.value == pytest.approx(_score(ids) - _score([10, 11]))
    # Deterministic across calls.
    assert ev.comprehensiveness(Recorder(), ids, tied).value == ev.comprehensiveness(Recorder(), ids, tied).value


def test_one_token_text():
    pred = Recorder()
    comp = ev.comprehensiveness(pred, [10], [0.7])
    assert comp.k.tolist() == [1, 1, 1, 1, 1]
    assert comp.value == pytest.approx(_score([10]) - _score([]))
    assert pred.batches == [[[10], []]]
    suff = ev.sufficiency(Recorder(), [10], [0.7])
    assert suff.value == pytest.approx(0.0)
    curve = ev.insertion_curve(Recorder(), [10], [-0.2])
    assert curve.k.tolist() == [0] + [1] * 10
    assert curve.scores[0] == pytest.approx(_score([]))
    assert np.allclose(curve.scores[1:], _score([10]))


def test_empty_text_and_length_mismatch_raise():
    with pytest.raises(ValueError):
        ev.comprehensiveness(Recorder(), [], [])
    with pytest.raises(ValueError):
        ev.comprehensiveness(Recorder(), [10, 11], [1.0])


def test_replace_strategy_keeps_length_and_is_recorded():
    ids = [10, 11, 15, 13]
    a = [WEIGHTS[t] for t in ids]
    pred = Recorder()
    res = ev.comprehensiveness(pred, ids, a, bins=(0.25, 0.5), strategy="replace", replacement_id=MASK_ID)
    assert res.strategy == "replace" and res.replacement_id == MASK_ID
    batch = pred.batches[0]
    assert all(len(s) == 4 for s in batch)
    assert [0, 11, 15, 13] in batch and [0, 11, 0, 13] in batch
    # Replacing by a weight-0 token is equivalent to deleting in this additive model ...
    deleted = ev.comprehensiveness(Recorder(), ids, a, bins=(0.25, 0.5))
    assert res.value == pytest.approx(deleted.value)
    # ... but not for a length-sensitive model: the mask still counts as a token.
    by_len = lambda seqs: np.array([1.0 / (1 + len(s)) for s in seqs])  # noqa: E731
    assert ev.comprehensiveness(
        by_len, ids, a, bins=(0.5,), strategy="replace", replacement_id=MASK_ID
    ).value == pytest.approx(0.0)
    assert ev.comprehensiveness(by_len, ids, a, bins=(0.5,)).value == pytest.approx(0.2 - 1 / 3)
    # Insertion with replace starts from the all-mask sequence.
    pred = Recorder()
    ev.insertion_curve(pred, ids, a, fractions=(0.0,), strategy="replace", replacement_id=MASK_ID)
    assert [MASK_ID] * 4 in pred.batches[0]


def test_strategy_arguments_are_checked():
    with pytest.raises(ValueError, match="replacement_id"):
        ev.comprehensiveness(Recorder(), IDS, PERFECT, strategy="replace")
    with pytest.raises(ValueError, match="replacement_id"):
        ev.comprehensiveness(Recorder(), IDS, PERFECT, replacement_id=0)
    with pytest.raises(ValueError):
        ev.comprehensiveness(Recorder(), IDS, PERFECT, strategy="mask")  # type: ignore[arg-type]


def test_curves_shape_endpoints_and_aopc():
    dc = ev.deletion_curve(Recorder(), IDS, PERFECT)
    ic = ev.insertion_curve(Recorder(), IDS, PERFECT)
    assert dc.fractions == ev.CURVE_FRACTIONS and len(dc.scores) == 11
    assert dc.k.tolist() == list(range(11))
    assert dc.scores[0] == pytest.approx(_score(IDS)) and dc.scores[-1] == pytest.approx(_score([]))
    assert ic.scores[0] == pytest.approx(_score([])) and ic.scores[-1] == pytest.approx(_score(IDS))
    # The perfect deletion curve is monotone decreasing while positive tokens are removed.
    n_pos = int(np.sum(PERFECT > 0))
    assert np.all(np.diff(dc.scores[: n_pos + 1]) < 0)
    assert dc.aopc == pytest.approx(np.mean(_score(IDS) - dc.scores))
    np.testing.assert_allclose(dc.actual_fractions, np.arange(11) / 10)


def test_faithfulness_metrics_one_call_matches_single_metrics():
    pred = Recorder()
    rep = ev.faithfulness_metrics(pred, IDS, PERFECT, curve_fractions=ev.CURVE_FRACTIONS)
    assert len(pred.batches) == 1
    batch = pred.batches[0]
    assert len({tuple(s) for s in batch}) == len(batch) == rep.model_evaluations
    assert rep.comprehensiveness.value == pytest.approx(ev.comprehensiveness(Recorder(), IDS, PERFECT).value)
    assert rep.sufficiency.value == pytest.approx(ev.sufficiency(Recorder(), IDS, PERFECT).value)
    np.testing.assert_allclose(rep.deletion_curve.scores, ev.deletion_curve(Recorder(), IDS, PERFECT).scores)
    m = rep.as_metrics()
    assert set(m) == {"comprehensiveness", "sufficiency", "deletion_curve_aopc", "insertion_curve_aopc"}


def test_full_score_given_skips_the_full_pass():
    pred = Recorder()
    res = ev.comprehensiveness(pred, IDS, PERFECT, bins=(0.1,), full_score=0.5)
    assert pred.batches == [[[t for t in IDS if t != 10]]]
    assert res.value == pytest.approx(0.5 - _score([t for t in IDS if t != 10]))
    # Insertion of everything is the full text: no pass needed for it either.
    pred = Recorder()
    res = ev.insertion_curve(pred, [10, 11], [1.0, 0.0], fractions=(1.0,), full_score=0.25)
    assert pred.batches == [] and res.scores.tolist() == [0.25]


def test_predict_output_shape_is_checked():
    with pytest.raises(ValueError, match="shape"):
        ev.comprehensiveness(lambda s: np.zeros((len(s), 2)), IDS, PERFECT)


def test_mean_curve():
    c1 = ev.deletion_curve(Recorder(), IDS, PERFECT, fractions=(0.0, 0.5, 1.0))
    c2 = ev.deletion_curve(Recorder(), IDS[:4], PERFECT[:4], fractions=(0.0, 0.5, 1.0))
    mc = ev.mean_curve([c1, c2])
    np.testing.assert_allclose(mc["mean"], (c1.scores + c2.scores) / 2)
    np.testing.assert_allclose(mc["se"], np.abs(c1.scores - c2.scores) / 2)
    rel = ev.mean_curve([c1, c2], relative=True)
    assert rel["mean"][0] == pytest.approx(1.0)
    with pytest.raises(ValueError):
        ev.mean_curve([c1, ev.insertion_curve(Recorder(), IDS, PERFECT, fractions=(0.0, 0.5, 1.0))])


# ----------------------------------------------------------------------------------------
# Human attention: AUC, AUPRC, word <-> token mapping
# ----------------------------------------------------------------------------------------


def test_auc_and_ap_known_tiny_case():
    y, s = [0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8]
    assert ev.roc_auc(y, s) == pytest.approx(0.75)
    # Ranking by score: 0.8 (pos), 0.4 (neg), 0.35 (pos), 0.1 (neg):
    # AP = 0.5 * 1/1 + 0.5 * 2/3.
    assert ev.average_precision(y, s) == pytest.approx(0.5 + 1 / 3)


def test_auc_and_ap_match_sklearn_with_ties():
    sk = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(0)
    for _ in range(50):
        n = int(rng.integers(2, 40))
        y = rng.integers(0, 2, n)
        if y.min() == y.max():
            y[0] = 1 - y[0]
        s = np.round(rng.normal(size=n), 1)  # rounding creates ties
        # tol: float64 rounding: the same rank statistics as scikit-learn, summed in another order
        assert ev.roc_auc(y, s) == pytest.approx(sk.roc_auc_score(y, s), abs=1e-12)
        assert ev.average_precision(y, s) == pytest.approx(sk.average_precision_score(y, s), abs=1e-12)


def test_human_attention_agreement_uses_unsigned_scores_and_skips_unmapped():
    labels = [np.nan, 1, 0, 1, 0, np.nan]
    scores = [100.0, -0.9, 0.2, 0.7, -0.1, -100.0]
    r = ev.human_attention_agreement(scores, labels)
    assert r.ok and r.n_positive == 2 and r.n_negative == 2
    assert r.roc_auc == pytest.approx(1.0) and r.auprc == pytest.approx(1.0)
    signed = ev.human_attention_agreement(scores, labels, absolute=False)
    assert signed.roc_auc == pytest.approx(0.5)  # -0.9 is then the lowest score


@pytest.mark.parametrize(
    "labels,reason",
    [
        ([0, 0, 0], "no positive labels"),
        ([1, 1, 1], "no negative labels"),
        ([np.nan, np.nan, np.nan], "no labelled tokens"),
    ],
)
def test_human_attention_degenerate_labels(labels, reason):
    r = ev.human_attention_agreement([0.1, 0.2, 0.3], labels)
    assert math.isnan(r.roc_auc) and math.isnan(r.auprc)
    assert r.degenerate == reason and not r.ok


def test_word_labels_to_tokens_with_subwords_and_punctuation_by_hand():
    # words:  "The"  "food,"  "was"  "unbelievable!"
    # tokens: [CLS] the food , was un ##believ ##able ! [SEP]
    words_labels = [0, 0, 1, 1]
    word_ids = [None, 0, 1, 1, 2, 3, 3, 3, 3, None]
    tl = ev.word_labels_to_tokens(words_labels, word_ids)
    np.testing.assert_array_equal(tl, [np.nan, 0, 0, 0, 1, 1, 1, 1, 1, np.nan])
    with pytest.raises(ValueError):
        ev.word_labels_to_tokens([0, 1], [0, 1, 2])


def test_token_scores_to_words_max_sum_mean():
    word_ids = [None, 0, 1, 1, 2, 3, 3, 3, 3, None]
    s = [9.0, 0.1, 0.2, -0.7, 0.3, 0.4, -0.5, 0.05, 0.0, -9.0]
    np.testing.assert_allclose(ev.token_scores_to_words(s, word_ids), [0.1, 0.2, 0.3, 0.4])
    np.testing.assert_allclose(ev.token_scores_to_words(s, word_ids, absolute=True), [0.1, 0.7, 0.3, 0.5])
    np.testing.assert_allclose(ev.token_scores_to_words(s, word_ids, reduce="sum"), [0.1, -0.5, 0.3, -0.05])
    np.testing.assert_allclose(ev.token_scores_to_words(s, word_ids, reduce="mean"), [0.1, -0.25, 0.3, -0.0125])
    # A word with no token left (truncation) is NaN.
    out = ev.token_scores_to_words([1.0, 2.0], [0, 0], n_words=2)
    assert out[0] == 2.0 and math.isnan(out[1])


def test_word_ids_from_offsets_by_hand():
    text = 'The "food," was unbelievable!'
    #        0123456789012345678901234567 8
    offsets = [
        (0, 0),
        (0, 3),
        (4, 5),
        (5, 9),
        (9, 10),
        (10, 11),
        (12, 15),
        (16, 18),
        (18, 24),
        (24, 28),
        (28, 29),
        (0, 0),
    ]
    assert ev.word_ids_from_offsets(offsets, text) == [None, 0, 1, 1, 1, 1, 2, 3, 3, 3, 3, None]


def _tiny_bert_tokenizer(tmp_path):
    transformers = pytest.importorskip("transformers")
    vocab = [
        "[PAD]",
        "[UNK]",
        "[CLS]",
        "[SEP]",
        "[MASK]",
        "the",
        "food",
        "was",
        "un",
        "##believ",
        "##able",
        "!",
        ",",
        '"',
        ".",
        "good",
        "service",
        "slow",
        "##ly",
    ]
    (tmp_path / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    tok = transformers.BertTokenizerFast.from_pretrained(str(tmp_path))
    assert tok.is_fast
    return tok


def test_word_mapping_with_a_real_fast_tokenizer(tmp_path):
    tok = _tiny_bert_tokenizer(tmp_path)
    words = ["The", '"food,"', "was", "unbelievable!", "Service", "slowly."]
    labels = [0, 1, 0, 1, 0, 1]
    text = " ".join(words)

    enc_words = tok(words, is_split_into_words=True)
    enc_text = tok(text, return_offsets_mapping=True)
    tokens = enc_text.tokens()
    assert tokens == [
        "[CLS]",
        "the",
        '"',
        "food",
        ",",
        '"',
        "was",
        "un",
        "##believ",
        "##able",
        "!",
        "service",
        "slow",
        "##ly",
        ".",
        "[SEP]",
    ]
    # The tokenizer's own word_ids on the raw text split punctuation into extra words ...
    assert max(w for w in enc_text.word_ids() if w is not None) > len(words) - 1
    # ... the offset mapping recovers the whitespace words, as is_split_into_words does.
    from_offsets = ev.word_ids_from_offsets(enc_text["offset_mapping"], text, words)
    assert from_offsets == enc_words.word_ids()
    expected = [None, 0, 1, 1, 1, 1, 2, 3, 3, 3, 3, 4, 5, 5, 5, None]
    assert from_offsets == expected

    token_labels = ev.word_labels_to_tokens(labels, from_offsets)
    np.testing.assert_array_equal(token_labels, [np.nan, 0, 1, 1, 1, 1, 0, 1, 1, 1, 1, 0, 1, 1, 1, np.nan])

    # Scores that put the labelled words' sub-tokens first give AUC 1 after the mapping,
    # and words recovered by max aggregation are perfectly separated too.
    scores = np.where(np.nan_to_num(token_labels, nan=0.0) == 1, -2.0, 0.5)  # signed
    assert ev.human_attention_agreement(scores, token_labels).roc_auc == pytest.approx(1.0)
    word_scores = ev.token_scores_to_words(scores, from_offsets, len(words), absolute=True)
    assert ev.roc_auc(labels, word_scores) == pytest.approx(1.0)


# ----------------------------------------------------------------------------------------
# Naive Bayes and Spearman
# ----------------------------------------------------------------------------------------

CORPUS = [["good", "good", "film"], ["good", "bad"], ["bad", "bad", "film"], ["boring"]]
CORPUS_Y = [1, 1, 0, 0]
# Counts: class 1: good 3, film 1, bad 1 (N1 = 5); class 0: bad 2, film 1, boring 1 (N0 = 4).


def test_naive_bayes_log_ratios_by_hand():
    nb = ev.naive_bayes_log_ratios(CORPUS, CORPUS_Y, alpha=1.0)
    assert set(nb) == {"good", "film", "bad", "boring"}
    assert nb["good"] == pytest.approx(math.log(4 / 1))
    assert nb["film"] == pytest.approx(0.0)
    assert nb["bad"] == pytest.approx(math.log(2 / 3))
    assert nb["boring"] == pytest.approx(math.log(1 / 2))
    # Default alpha = 40 (App. E.3).
    nb40 = ev.naive_bayes_log_ratios(CORPUS, CORPUS_Y)
    assert nb40["good"] == pytest.approx(math.log(43 / 40))
    assert nb40["bad"] == pytest.approx(math.log(41 / 42))
    # Normalised: p(w|y) = (c + a) / (N_y + a|V|), |V| = 4.
    nbn = ev.naive_bayes_log_ratios(CORPUS, CORPUS_Y, alpha=1.0, normalize=True)
    assert nbn["good"] == pytest.approx(math.log((4 / 9) / (1 / 8)))
    assert nbn["boring"] == pytest.approx(math.log((1 / 9) / (2 / 8)))


def test_naive_bayes_rejects_bad_labels():
    with pytest.raises(ValueError):
        ev.naive_bayes_log_ratios([["a"]], [2])
    with pytest.raises(ValueError):
        ev.naive_bayes_log_ratios([["a"], ["b"]], [1])  # length mismatch


def test_spearman_matches_scipy_with_ties():
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(1)
    for _ in range(30):
        n = int(rng.integers(3, 25))
        x = np.round(rng.normal(size=n), 1)
        y = np.round(x + rng.normal(size=n), 1)
        # tol: float64 rounding: the same rank correlation as scipy, summed in another order
        assert ev.spearman(x, y) == pytest.approx(stats.spearmanr(x, y).statistic, abs=1e-12)
    assert ev.spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert math.isnan(ev.spearman([1.0], [2.0]))
    assert math.isnan(ev.spearman([1.0, 1.0, 1.0], [1.0, 2.0, 3.0]))


def test_nb_spearman_unique_tokens_and_missing_ones():
    nb = ev.naive_bayes_log_ratios(CORPUS, CORPUS_Y, alpha=1.0)
    # good: mean(3, 1) = 2; film 0.5; bad -1; "unseen" is not in the NB table.
    tokens = ["good", "film", "bad", "good", "unseen"]
    scores = [3.0, 0.5, -1.0, 1.0, 99.0]
    r = ev.nb_spearman(tokens, scores, nb)
    assert r.n_tokens == 3 and r.rho == pytest.approx(1.0) and r.degenerate is None
    # With "first" the repeated token gets 3.0; still the same order here. With "max" over
    # an order-changing repeat the correlation changes:
    r2 = ev.nb_spearman(["good", "film", "good"], [-5.0, 0.0, 1.0], nb, reduce="mean")
    assert r2.rho == pytest.approx(-1.0)
    r3 = ev.nb_spearman(["good", "film", "good"], [-5.0, 0.0, 1.0], nb, reduce="max")
    assert r3.rho == pytest.approx(1.0)
    # |NB| for unsigned scores: |log 4| > |log 0.5| > |log 2/3| > 0.
    r4 = ev.nb_spearman(["good", "boring", "bad", "film"], [0.9, 0.5, 0.3, 0.0], nb, absolute_nb=True)
    assert r4.rho == pytest.approx(1.0)
    assert ev.nb_spearman(["good", "boring", "bad", "film"], [0.9, 0.5, 0.3, 0.0], nb).rho < 1.0


def test_nb_spearman_degenerate():
    nb = {"a": 1.0, "b": -1.0}
    r = ev.nb_spearman(["a", "a", "zzz"], [1.0, 2.0, 3.0], nb)
    assert math.isnan(r.rho) and r.n_tokens == 1 and r.degenerate
    r = ev.nb_spearman(["a", "b"], [1.0, 1.0], nb)
    assert math.isnan(r.rho) and r.degenerate == "constant scores"


# ----------------------------------------------------------------------------------------
# Bookkeeping
# ----------------------------------------------------------------------------------------


def test_counting_predictor(monkeypatch):
    # A clock that advances 0.25 s per reading: each call is timed as exactly one tick.
    ticks = iter(0.25 * i for i in range(1000))
    monkeypatch.setattr(ev.results.time, "perf_counter", lambda: next(ticks))
    cp = ev.CountingPredictor(Recorder())
    rep = ev.faithfulness_metrics(cp, IDS, PERFECT)
    assert cp.calls == 1 and cp.sequences == rep.model_evaluations
    assert cp.tokens == sum(len(s) for s in cp.predict.batches[0])
    assert cp.seconds == pytest.approx(0.25)
    cp.reset()
    assert (cp.calls, cp.sequences, cp.tokens) == (0, 0, 0)


def test_aggregate_mean_and_standard_error():
    results = [
        ev.InstanceResult("slalom", {"comp": 1.0, "auc": 0.5}, seconds=1.0, model_evaluations=100),
        ev.InstanceResult("slalom", {"comp": 2.0, "auc": float("nan")}, seconds=2.0, model_evaluations=100),
        ev.InstanceResult("slalom", {"comp": 3.0, "auc": 0.7}, seconds=6.0, model_evaluations=100),
        ev.InstanceResult("lime", {"comp": 0.5}, seconds=10.0),
    ]
    rows = ev.aggregate_results(results)
    table = {(r["method"], r["metric"]): r for r in rows}
    assert [r["method"] for r in rows][:1] == ["slalom"]
    assert [r["metric"] for r in rows if r["method"] == "slalom"] == ["comp", "auc", "seconds", "model_evaluations"]
    c = table[("slalom", "comp")]
    assert c["n"] == 3 and c["mean"] == pytest.approx(2.0)
    assert c["se"] == pytest.approx(1.0 / math.sqrt(3))  # std(ddof=1) = 1
    a = table[("slalom", "auc")]
    assert a["n"] == 2 and a["n_missing"] == 1 and a["mean"] == pytest.approx(0.6)
    assert a["se"] == pytest.approx(np.std([0.5, 0.7], ddof=1) / math.sqrt(2))
    s = table[("slalom", "seconds")]
    assert s["mean"] == pytest.approx(3.0) and s["median"] == pytest.approx(2.0)
    assert table[("slalom", "model_evaluations")]["se"] == pytest.approx(0.0)
    # One instance: mean defined, s.e. not; a metric a method never reported: n = 0.
    lime = table[("lime", "comp")]
    assert lime["mean"] == 0.5 and math.isnan(lime["se"])
    assert table[("lime", "auc")]["n"] == 0 and math.isnan(table[("lime", "auc")]["mean"])
    assert table[("lime", "model_evaluations")]["n_missing"] == 1
    # Selected metrics only.
    only = ev.aggregate_results(results, metrics=["comp"])
    assert [(r["method"], r["metric"]) for r in only] == [("slalom", "comp"), ("lime", "comp")]


def test_standard_error():
    assert ev.standard_error([2.0, 4.0]) == pytest.approx(1.0)
    assert math.isnan(ev.standard_error([1.0]))
    assert ev.standard_error([1.0, float("nan"), 3.0]) == pytest.approx(1.0)


def test_module_does_not_import_captum_or_shap():
    import subprocess
    import sys

    code = (
        "import sys, slalom_core.experiments.evaluation; "
        "print(any(m.split('.')[0] in ('captum', 'shap') for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_named_removal_metrics_are_removal_metric_with_fixed_mode():
    import inspect

    pred = Recorder()
    for name, mode, keyword, default, number in (
        ("comprehensiveness", "deletion", "bins", ev.ERASER_BINS, False),
        ("sufficiency", "insertion", "bins", ev.ERASER_BINS, False),
        ("deletion_aopc", "deletion", "fractions", ev.ERASER_BINS, True),
        ("insertion_aopc", "insertion", "fractions", ev.ERASER_BINS, True),
        ("deletion_curve", "deletion", "fractions", ev.CURVE_FRACTIONS, False),
        ("insertion_curve", "insertion", "fractions", ev.CURVE_FRACTIONS, False),
    ):
        fn = getattr(ev, name)
        params = inspect.signature(fn).parameters
        assert fn.__name__ == name and params[keyword].default == default and ">>>" in fn.__doc__
        assert "mode" not in params and ("bins" if keyword == "fractions" else "fractions") not in params
        ref = ev.removal_metric(pred, IDS, PERFECT, mode=mode, fractions=(0.1, 0.3), absolute=True)
        got = fn(pred, IDS, PERFECT, **{keyword: (0.1, 0.3)}, absolute=True)
        assert (got == ref.aopc) if number else np.array_equal(got.scores, ref.scores) and got.mode == mode
        other = "fractions" if keyword == "bins" else "bins"
        with pytest.raises(TypeError, match=other):
            fn(pred, IDS, PERFECT, **{other: (0.1,)})


def test_word_ids_from_offsets_byte_level_bpe(tmp_path):
    """GPT-2's offsets put the space before a word inside the word's first token: every
    token still maps to its whitespace word, as is_split_into_words gives it."""
    from tiny_models import gpt2_tokenizer

    tok = gpt2_tokenizer(tmp_path / "gpt2")
    text = "the movie was great, i loved  the plot"
    words = text.split()
    enc = tok(text, return_offsets_mapping=True)
    assert any(text[a].isspace() for a, b in enc["offset_mapping"] if b > a)  # spaces inside spans
    got = ev.word_ids_from_offsets(enc["offset_mapping"], text, words)
    # only a token that is whitespace alone belongs to no word
    assert [k is None for k in got] == [tok.decode([t]).strip() == "" for t in enc["input_ids"]]
    # each word's tokens are consecutive and cover the word's characters
    for j, w in enumerate(words):
        pieces = [tok.decode([t]) for t, k in zip(enc["input_ids"], got) if k == j]
        assert "".join(pieces).strip() == w
