"""The synthetic generators match App. E.1 / E.2 of the paper.

Statistical checks use fixed seeds and tolerances of about 5 standard errors, so a
correct generator passes with overwhelming probability for any seed; a wrong
probability, weight or length law fails by many standard errors.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from slalom_core.experiments import synthetic as syn


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def test_table3_constants():
    assert syn.LINEAR_WORDS == ("the", "we", "movie", "watch", "good", "best", "perfect", "ok", "bad", "worst")
    w = dict(zip(syn.LINEAR_WORDS, syn.LINEAR_WEIGHTS))
    assert w["perfect"] == 1.5 and w["worst"] == -1.5 and w["good"] == 0.6 and w["ok"] == -0.6
    assert w["best"] == 1.0 and w["bad"] == -1.0 and w["the"] == w["we"] == w["movie"] == w["watch"] == 0.0
    p = dict(zip(syn.LINEAR_WORDS, syn.LINEAR_PROBS))
    assert (
        p["the"] == pytest.approx(1 / 6) and p["good"] == pytest.approx(1 / 15) and p["best"] == pytest.approx(1 / 20)
    )
    assert sum(syn.LINEAR_PROBS) == pytest.approx(1.0)


@pytest.fixture(scope="module")
def linear_data():
    return syn.sample_linear_dataset(20000, seed=123)


def test_linear_lengths_binomial(linear_data):
    n = len(linear_data)
    lengths = linear_data.lengths
    assert lengths.min() >= 1 and lengths.max() <= 30
    # Bin(30, 0.5): mean 15, variance 7.5
    assert abs(lengths.mean() - 15.0) < 5 * math.sqrt(7.5 / n)
    assert abs(lengths.var() - 7.5) < 5 * math.sqrt(2 * 7.5**2 / n) + 0.05
    # pmf at a few lengths
    from scipy.stats import binom

    for k in (10, 15, 20):
        p = binom.pmf(k, 30, 0.5)
        assert abs(np.mean(lengths == k) - p) < 5 * math.sqrt(p * (1 - p) / n)


def test_linear_word_frequencies(linear_data):
    counts = linear_data.counts().sum(axis=0)
    total = counts.sum()
    freq = counts / total
    for f, p in zip(freq, syn.LINEAR_PROBS):
        assert abs(f - p) < 5 * math.sqrt(p * (1 - p) / total)


def test_linear_log_odds_and_labels(linear_data):
    w = np.asarray(syn.LINEAR_WEIGHTS)
    for i in range(50):
        assert linear_data.log_odds[i] == pytest.approx(w[linear_data.sequences[i]].sum())
    assert set(np.unique(linear_data.labels)) <= {0, 1}
    p = _sigmoid(linear_data.log_odds)
    n = len(linear_data)
    # overall calibration: E[y - p] = 0, Var <= Σ p(1-p)
    sd = math.sqrt(np.sum(p * (1 - p)))
    assert abs(np.sum(linear_data.labels - p)) < 5 * sd
    # calibration within bins of the true probability
    bins = np.quantile(p, np.linspace(0, 1, 6))
    idx = np.clip(np.searchsorted(bins, p, side="right") - 1, 0, 4)
    for b in range(5):
        m = idx == b
        sd_b = math.sqrt(np.sum(p[m] * (1 - p[m])))
        assert abs(np.sum(linear_data.labels[m] - p[m])) < 5 * sd_b + 1e-9
    assert 0.3 < linear_data.labels.mean() < 0.7 and n == 20000


def test_linear_seeded_and_generator():
    a = syn.sample_linear_dataset(50, seed=7)
    b = syn.sample_linear_dataset(50, seed=7)
    c = syn.sample_linear_dataset(50, seed=8)
    assert all(np.array_equal(x, y) for x, y in zip(a.sequences, b.sequences))
    assert np.array_equal(a.labels, b.labels)
    assert not all(len(x) == len(y) and np.array_equal(x, y) for x, y in zip(a.sequences, c.sequences))
    rng = np.random.default_rng(7)
    d = syn.sample_linear_dataset(50, rng)
    assert all(np.array_equal(x, y) for x, y in zip(a.sequences, d.sequences))


def test_features_counts_and_positions():
    d = syn.sample_linear_dataset(30, seed=1)
    cnt = d.counts()
    assert cnt.shape == (30, 10)
    assert np.array_equal(cnt.sum(axis=1), d.lengths)
    oh = d.position_onehot(30)
    assert oh.shape == (30, 300)
    assert np.array_equal(oh.sum(axis=1), d.lengths)
    # word j at position p -> column p*V + j
    seq = d.sequences[0]
    for p, j in enumerate(seq):
        assert oh[0, p * 10 + j] == 1.0
    # summing the position blocks gives back the counts
    assert np.array_equal(oh.reshape(30, 30, 10).sum(axis=1), cnt)
    assert d.texts()[0].split() == d.tokens(0)
    sub = d.subset([2, 0])
    assert np.array_equal(sub.sequences[1], d.sequences[0]) and sub.labels[0] == d.labels[2]


# --- App. E.2 ----------------------------------------------------------------------------
def test_slalom_vocabulary_eq75():
    voc = syn.make_slalom_vocabulary(2000, seed=3)
    assert len(voc) == 2000 and len(set(voc.words)) == 2000
    # tol: float64 rounding: importances are centred by construction
    assert voc.importance.mean() == pytest.approx(0.0, abs=1e-12)
    # s = 5|v|^1.5 + N(0, 1)/2 up to a constant shift
    resid = voc.importance - 5 * np.abs(voc.value) ** 1.5
    resid = resid - resid.mean()
    n = len(voc)
    assert abs(resid.std() - 0.5) < 5 * 0.5 / math.sqrt(2 * n)
    # residuals are independent of v (no leftover trend)
    assert abs(np.corrcoef(resid, np.abs(voc.value))[0, 1]) < 5 / math.sqrt(n)
    # values: doubled Laplace(0, 0.133): median |v| = 2·0.133·ln 2
    # tol: sampling noise of 2,000 draws: a median's relative sd is ~3 %
    assert np.median(np.abs(voc.value)) == pytest.approx(2 * 0.133 * math.log(2), rel=0.1)
    # seeded
    again = syn.make_slalom_vocabulary(2000, seed=3)
    assert np.array_equal(again.value, voc.value) and np.array_equal(again.importance, voc.importance)


def test_slalom_vocabulary_custom_values_and_first():
    voc = syn.make_slalom_vocabulary(seed=0, values=[1.0, -1.0, 0.0], noise_std=0.0)
    assert np.allclose(voc.importance, np.array([5.0, 5.0, 0.0]) - 10 / 3)
    sub = syn.make_slalom_vocabulary(50, seed=0).first(10)
    # tol: float64 rounding: importances are centred by construction
    assert len(sub) == 10 and sub.importance.mean() == pytest.approx(0.0, abs=1e-12)


def test_slalom_log_odds_formula():
    v = np.array([1.0, -2.0, 0.5])
    s = np.array([0.0, 1.0, -1.0])
    seq = [0, 1, 1, 2]
    w = np.exp(s[seq])
    expect = float((w * v[seq]).sum() / w.sum())
    assert syn.slalom_log_odds([seq], v, s)[0] == pytest.approx(expect)
    # single token: F = v; shift invariance of s
    assert syn.slalom_log_odds([[1]], v, s)[0] == pytest.approx(-2.0)
    assert syn.slalom_log_odds([seq], v, s + 3.0)[0] == pytest.approx(expect)


@pytest.fixture(scope="module")
def slalom_data():
    return syn.sample_slalom_dataset(20000, seed=11, n_words=40)


def test_slalom_lengths_uniform(slalom_data):
    lengths = slalom_data.lengths
    n = len(lengths)
    assert lengths.min() == 1 and lengths.max() == 30
    p = 1 / 30
    for k in range(1, 31):
        assert abs(np.mean(lengths == k) - p) < 5 * math.sqrt(p * (1 - p) / n)


def test_slalom_words_uniform_and_first_vocab(slalom_data):
    counts = slalom_data.counts().sum(axis=0)
    assert counts.shape == (40,)
    total = counts.sum()
    p = 1 / 40
    assert np.all(np.abs(counts / total - p) < 5 * math.sqrt(p * (1 - p) / total))
    full = syn.make_slalom_vocabulary(200, 0)
    assert slalom_data.words == full.words[:40]
    assert np.array_equal(slalom_data.params["value"], full.value[:40])


def test_slalom_log_odds_and_labels(slalom_data):
    v, s = slalom_data.params["value"], slalom_data.params["importance"]
    assert np.allclose(slalom_data.log_odds[:100], syn.slalom_log_odds(slalom_data.sequences[:100], v, s))
    p = _sigmoid(slalom_data.log_odds)
    sd = math.sqrt(np.sum(p * (1 - p)))
    assert abs(np.sum(slalom_data.labels - p)) < 5 * sd
    hi, lo = p > 0.7, p < 0.3
    assert hi.sum() > 100 and lo.sum() > 100
    assert abs(np.sum(slalom_data.labels[hi] - p[hi])) < 5 * math.sqrt(np.sum(p[hi] * (1 - p[hi])))
    assert abs(np.sum(slalom_data.labels[lo] - p[lo])) < 5 * math.sqrt(np.sum(p[lo] * (1 - p[lo])))


def test_slalom_custom_max_len():
    d = syn.sample_slalom_dataset(500, seed=0, n_words=8, max_len=3)
    assert set(np.unique(d.lengths)) == {1, 2, 3}
    assert max(int(seq.max()) for seq in d.sequences) < 8


# --- tokenizer ---------------------------------------------------------------------------
def test_word_tokenizer_bert_style():
    tok = syn.make_word_tokenizer(syn.LINEAR_WORDS)
    assert len(tok) == 15
    assert tok.convert_tokens_to_ids(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]) == [0, 1, 2, 3, 4]
    assert tok.convert_tokens_to_ids(list(syn.LINEAR_WORDS)) == list(range(5, 15))
    enc = tok(["perfect perfect", "the zebra"], padding=True)
    assert enc["input_ids"][0] == [2, 11, 11, 3]
    assert enc["input_ids"][1] == [2, 5, 1, 3]  # unknown word -> [UNK]
    assert tok.pad_token_id == 0 and tok.cls_token_id == 2 and tok.sep_token_id == 3
    assert tok.decode(enc["input_ids"][0], skip_special_tokens=True) == "perfect perfect"
    d = syn.sample_linear_dataset(5, seed=0)
    ids = d.token_ids(tok)
    assert [tok.convert_ids_to_tokens(list(map(int, x))) for x in ids] == [d.tokens(i) for i in range(5)]


def test_word_tokenizer_gpt2_style():
    tok = syn.make_word_tokenizer(syn.LINEAR_WORDS, add_cls_sep=False)
    enc = tok(["perfect the", "ok"], padding=True)
    assert enc["input_ids"] == [[11, 5], [12, 0]]
    assert enc["attention_mask"] == [[1, 1], [1, 0]]
    assert tok.cls_token is None and tok.pad_token == "[PAD]"


def test_word_tokenizer_rejects_bad_vocab():
    with pytest.raises(ValueError):
        syn.make_word_tokenizer(["a", "a"])
    with pytest.raises(ValueError):
        syn.make_word_tokenizer(["a", "[CLS]"])


def test_module_imports_no_captum_or_shap():
    import subprocess
    import sys

    code = (
        "import sys, slalom_core.experiments.synthetic, slalom_core.experiments.paper; "
        "bad = [m for m in sys.modules if m.split('.')[0] in ('captum', 'shap')]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
