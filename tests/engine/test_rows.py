"""explain_rows and the decisions it holds: deletion with companion tensors, replacement by
baselines, rows sharing one engine call, per-row seeds and targets; plus the torch adapter's
one-sample-per-call fallback and the engine's typed call options."""

from __future__ import annotations

import dataclasses
import inspect
import re
import warnings

import numpy as np
import pytest
import slalom_core as sc
import torch

CLS, SEP, PAD = 1, 2, 0
VOCAB = 30


def _weights(seed: int = 0) -> torch.Tensor:
    w = torch.randn(VOCAB, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    w[[PAD, CLS, SEP]] = 0.0  # special tokens and padding carry nothing
    return w


def _additive(seed: int = 0):
    """A single-logit model: the sum of per-token weights over the unmasked tokens."""
    w = _weights(seed)
    return lambda ids, mask=None: (w[ids] * (1 if mask is None else mask)).sum(dim=1)


def _rows() -> tuple[torch.Tensor, torch.Tensor]:
    ids = torch.tensor([[CLS, 7, 8, 9, 7, SEP, PAD], [CLS, 11, 12, 13, 14, 15, SEP]])
    return ids, (ids != PAD).long()


def _features(ids: torch.Tensor) -> list[list[list[int]]]:
    """Every position that is not [CLS], [SEP] or padding is its own feature."""
    return [[[p] for p in range(ids.shape[1]) if int(ids[r, p]) not in (CLS, SEP, PAD)] for r in range(len(ids))]


# ----------------------------------------------------------------------------------------
# Deletion
# ----------------------------------------------------------------------------------------
def test_deletion_keeps_the_frame_and_companions_follow():
    ids, mask = _rows()
    w = _weights()
    types = torch.tensor([[0, 0, 0, 1, 1, 1, 0], [0, 1, 1, 1, 0, 0, 0]])
    positions = torch.arange(7).expand(2, 7).contiguous()
    seen = []

    def f(i, m, t, p):
        seen.append((i.clone(), m.clone(), t.clone(), p.clone()))
        return (w[i] * m + 0.1 * t * m).sum(dim=1)

    exps = sc.explain_rows(
        f,
        (ids, mask),
        _features(ids),
        padding=mask == 0,
        forward_args=(types, positions),
        per_row_args=(True, True),
        pad_id=PAD,
        method="ana",
    )
    assert [len(e.tokens) for e in exps] == [4, 5]
    assert exps[0].token_ids == [(7,), (8,), (9,), (7,)]  # the row's own ids (repeated token 7 shares a unit)
    for i, m, t, p in seen[1:]:  # after the probe: engine samples
        n = m.sum(dim=1)
        for r in range(len(i)):
            k = int(n[r])
            assert i[r, 0] == CLS and i[r, k - 1] == SEP  # the frame stays in place
            assert (m[r, k:] == 0).all() and (i[r, k:] == PAD).all()  # padded only after the row
            assert p[r, :k].tolist() == list(range(k))  # position ids that were a range: renumbered
            # token types follow their tokens (row 0: 7 and 8 are type 0, 9 type 1; row 1: 11-13 type 1)
            for tok, typ in zip(i[r, 1 : k - 1].tolist(), t[r, 1 : k - 1].tolist()):
                assert typ == (1 if tok in (9, 11, 12, 13) else 0)
    # ana on an additive model: each value is the token's effect alone.
    np.testing.assert_allclose(exps[1].value, (w[[11, 12, 13, 14, 15]] + 0.1 * np.array([1, 1, 1, 0, 0])).numpy())


def test_deletion_errors_before_any_model_call():
    calls = []
    f = lambda i: calls.append(1) or _additive()(i)
    ids = torch.tensor([[CLS, 5, SEP, 6, SEP]])
    with pytest.raises(ValueError, match="between content tokens"):
        sc.explain_rows(f, ids, [[[1], [3]]], method="ana")
    with pytest.raises(ValueError, match="not a contiguous span"):
        sc.explain_rows(f, torch.tensor([[CLS, 5, 6, 7, SEP]]), [[[1, 3], [2]]], method="ana")
    with pytest.raises(ValueError, match="padding must sit at the start or end"):
        sc.explain_rows(f, torch.tensor([[5, PAD, 6]]), [[[0], [2]]], padding=torch.tensor([[False, True, False]]))
    with pytest.raises(ValueError, match="unknown perturbation"):
        sc.explain_rows(f, ids, perturbation="mask")
    with pytest.raises(ValueError, match="needs baselines"):
        sc.explain_rows(f, ids, perturbation="replace")
    with pytest.raises(ValueError, match="sample_length <= 2"):
        sc.explain_rows(f, ids, perturbation="replace", baselines=[ids * 0], method="eff", sample_length=3)
    # (hybrid and eff-slope draw the units of a sample without replacement: a set is fine)
    for fitter in (sc.get_fitter("eff", sample_length=3), sc.get_fitter("eff", sample_length=(2, 4))):
        with pytest.raises(ValueError, match="sample_length <= 2"):
            sc.explain_rows(f, ids, perturbation="replace", baselines=[ids * 0], method=fitter)
    with pytest.raises(TypeError, match="fit options"):
        sc.explain_rows(f, ids, device="cpu")
    assert calls == []
    # A range within 2 is fine (the default design's samples are pairs).
    ok = sc.explain_rows(
        f, ids, perturbation="replace", baselines=[ids * 0], method="eff", sample_length=(1, 2), n_samples=60, seed=0
    )
    assert len(ok) == len(ids)


# ----------------------------------------------------------------------------------------
# Replacement
# ----------------------------------------------------------------------------------------
def test_replacement_keeps_the_length_and_uses_the_baselines():
    ids, _ = _rows()
    model = _additive()
    widths, seen = set(), []

    def f(i):
        widths.add(i.shape[1])
        seen.append(i.clone())
        return model(i)

    base = torch.full_like(ids, 3)
    exps = sc.explain_rows(f, ids, _features(ids), perturbation="replace", baselines=[base], method="ana")
    assert widths == {ids.shape[1]}
    for batch in seen[1:]:
        # Every position holds its own id or the baseline's; [CLS], [SEP], padding never change.
        assert ((batch == ids[1]) | (batch == 3)).all(dim=1).any() or ((batch == ids[0]) | (batch == 3)).all()
        assert (batch[:, 0] == CLS).all() and set(batch[:, 6].tolist()) <= {PAD, SEP}
    assert any((b == 3).any() for b in seen[1:])
    # Replacement switches positions: the two 7s of row 0 are two features.
    assert exps[0].tokens == ["7", "8", "9", "7"] and exps[0].token_ids == [(0,), (1,), (2,), (3,)]
    # With a baseline the model ignores (weight 0), replacing is deleting: row 1's answer is the same.
    zero = sc.explain_rows(f, ids, _features(ids), perturbation="replace", baselines=[ids * 0], method="ana")
    deleted = sc.explain_rows(f, ids, _features(ids), padding=ids == PAD, method="ana")
    # tol: float64 rounding: ana's closed form on the same float64 outputs
    np.testing.assert_allclose(zero[1].value, deleted[1].value, atol=1e-12)
    np.testing.assert_allclose(zero[1].importance, deleted[1].importance, atol=1e-12)
    assert not np.allclose(exps[1].value, zero[1].value)  # the baseline's id matters


# ----------------------------------------------------------------------------------------
# Several rows: one engine call, one answer per row as if alone
# ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("perturbation", ["delete", "replace"])
def test_rows_are_read_apart_and_match_one_row_at_a_time(perturbation):
    ids, mask = _rows()
    model = _additive(1)
    batches = []

    def f(i, m):
        batches.append(i.clone())
        return torch.stack([torch.zeros(len(i), dtype=torch.float64), model(i, m)], dim=1)

    kw = dict(perturbation=perturbation, n_samples=80, method="eff", pad_id=PAD)
    if perturbation == "replace":
        kw["baselines"] = [torch.zeros_like(ids), None]
    torch.manual_seed(5)
    both = sc.explain_rows(f, (ids, mask), _features(ids), padding=mask == 0, target=1, **kw)
    torch.manual_seed(5)
    draws = [int(torch.randint(0, 2**31 - 1, (1,))) for _ in range(2)]
    assert [e.diagnostics["seed"] for e in both] == draws  # row r: the r-th draw of torch's generator
    first, second = {7, 8, 9}, {11, 12, 13, 14, 15}
    if perturbation == "delete":
        # Each row's samples are read in model calls of their own: a row's scores must not
        # depend on the rows beside it (a forward's rounding moves with its batch).
        assert not any(
            any(set(x.tolist()) & first for x in b) and any(set(x.tolist()) & second for x in b) for b in batches
        )
    for r in range(2):
        k = kw.copy()
        if perturbation == "replace":
            k["baselines"] = [torch.zeros_like(ids[r : r + 1]), None]
        alone = sc.explain_rows(
            f, (ids[r : r + 1], mask[r : r + 1]), _features(ids[r : r + 1]), padding=mask[r : r + 1] == 0,
            target=1, seed=draws[r], **k
        )[0]  # fmt: skip
        # tol: float64 rounding: the same seeds and the same float64 outputs, fitted alone or in a batch
        np.testing.assert_allclose(both[r].lin, alone.lin, atol=1e-9, rtol=0)
        np.testing.assert_allclose(both[r].importance, alone.importance, atol=1e-9, rtol=0)


def test_one_progress_bar_across_engine_calls():
    ids, _ = _rows()
    bars = []

    class Bar:
        def __init__(self, total):
            self.total, self.n, self.closed = total, 0, 0
            bars.append(self)

        def update(self, n):
            self.n += n

        def close(self):
            self.closed += 1

    read = []

    def m3(i):
        read.append(len(i))
        return torch.stack([_additive(0)(i), _additive(1)(i), _additive(2)(i)], dim=1)

    # Two targets: two engine calls, one bar, counting the samples the fits ask for (its
    # total known before they read the model: 40 samples, the full text, the empty input per
    # call), of which the model reads each distinct one once.
    sc.explain_rows(m3, ids, _features(ids), padding=ids == PAD, target=[0, 2], n_samples=40, seed=0, show_progress=Bar)
    assert len(bars) == 1 and bars[0].n == bars[0].total == 2 * (40 + 2) and bars[0].closed == 1
    # (the first read, one row, is explain_rows' probe of the output's shape, before any bar)
    assert sum(read) - 1 < bars[0].total


# ----------------------------------------------------------------------------------------
# Targets
# ----------------------------------------------------------------------------------------
def test_one_output_target_means_the_output_itself():
    assert sc.link.check_target(None, 1) is None and sc.link.check_target(0, 1) is None
    with pytest.raises(ValueError, match="target 1 does not exist: the model returns one score per example"):
        sc.link.check_target(1, 1)
    clf = sc.TorchClassifier(lambda i, m: _additive()(i, m))
    plain = sc.explain(clf, [5, 6, 7], method="ana")
    zero = sc.explain(clf, [5, 6, 7], method="ana", target=np.int64(0))
    np.testing.assert_allclose(zero.value, plain.value)  # no sign flip
    assert plain.value[0] == pytest.approx(float(_weights()[5]))
    # Two outputs: target 0 is still class 0's log-odds, the negated class-1 log-odds.
    two = sc.TorchClassifier(lambda i, m: torch.stack([torch.zeros(len(i), dtype=torch.float64), _additive()(i, m)], 1))
    np.testing.assert_allclose(sc.explain(two, [5, 6, 7], method="ana", target=0).value, -plain.value)
    with pytest.raises(ValueError, match="not a class of this model"):
        sc.explain(two, [5, 6, 7], method="ana", target=2)


def test_row_targets_checked_against_the_first_output():
    ids = torch.tensor([[CLS, 5, 6, SEP]])
    feats = [[[1], [2]]]
    m3 = lambda i: torch.stack([_additive(0)(i), _additive(1)(i), _additive(2)(i)], dim=1)
    with pytest.raises(ValueError, match="returns 3 class scores per example: give target="):
        sc.explain_rows(m3, ids, feats, method="ana")
    with pytest.raises(ValueError, match="does not exist"):
        sc.explain_rows(_additive(), ids, feats, target=1, method="ana")
    heads = lambda i: torch.stack([m3(i), 2 * m3(i)], dim=1)  # (B, 2 heads, 3 classes)
    with pytest.raises(ValueError, match="tuple target"):
        sc.explain_rows(heads, ids, feats, target=1, method="ana")
    a = sc.explain_rows(heads, ids, feats, target=(1, 2), method="ana")[0]
    b = sc.explain_rows(m3, ids, feats, target=2, method="ana")[0]
    np.testing.assert_allclose(a.value, 2 * b.value)


# ----------------------------------------------------------------------------------------
# A forward that fails on batches but runs on one sample
# ----------------------------------------------------------------------------------------
def test_batch_failure_falls_back_to_one_sample_per_call():
    model = _additive()
    sizes = []

    def one_at_a_time(i, m):
        sizes.append(len(i))
        if len(i) > 1:
            raise ValueError("Cannot handle batch sizes > 1 if no padding token is defined.")
        return model(i, m)

    with pytest.warns(UserWarning, match="one sample per call") as rec:
        got = sc.explain(sc.TorchClassifier(one_at_a_time), [5, 6, 7, 8], n_samples=60, seed=0)
    assert len([w for w in rec if "one sample per call" in str(w.message)]) == 1  # warned once
    assert sizes.count(1) > sizes.count(3) and max(sizes) > 1  # one failed batch, then one by one
    ref = sc.explain(sc.TorchClassifier(model, batch_size=1), [5, 6, 7, 8], n_samples=60, seed=0)
    # tol: float64 rounding: the same float64 outputs, read one by one or in batches
    np.testing.assert_allclose(got.lin, ref.lin, atol=1e-12)


def test_one_sample_calls_drop_the_batch_padding():
    # A padding-blind model that reads its last column (as GPT-2's classifier reads its last
    # token) and refuses batches: each sample alone must be scored without the padding its
    # batch gave it, as if scored in a call of its own.
    emb = torch.nn.Embedding(20, 2)

    def last_token(ids, mask):
        if len(ids) > 1:
            raise ValueError("Cannot handle batch sizes > 1 if no padding token is defined.")
        return emb(ids[:, -1])

    seqs = [[5, 6, 7], [8], [9, 3]]
    with pytest.warns(UserWarning, match="one sample per call"):
        together = sc.TorchClassifier(last_token, pad_id=0).score(seqs)
    alone = torch.cat([sc.TorchClassifier(last_token, pad_id=0).score([s]) for s in seqs])
    torch.testing.assert_close(together, alone)


def test_no_fallback_for_model_errors():
    def always(i, m):
        raise RuntimeError("broken model")

    with pytest.raises(RuntimeError, match="broken model"):
        sc.explain(sc.TorchClassifier(always), [5, 6, 7], method="ana", reference=0.0)
    nan = lambda i, m: torch.where((i == 6).any(1), torch.nan, 1.0).double()
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*one sample per call.*")
        with pytest.raises(FloatingPointError):
            sc.explain(sc.TorchClassifier(nan), [5, 6, 7], method="ana", reference=0.0)
        # A model that drops rows is wrong, not limited to one sample.
        drop = lambda i, m: torch.zeros(max(len(i) - 1, 1), 2, dtype=torch.float64)
        with pytest.raises(ValueError, match="one row per input"):
            sc.explain(sc.TorchClassifier(drop), [5, 6, 7], method="ana", reference=0.0)


# ----------------------------------------------------------------------------------------
# Typed call options
# ----------------------------------------------------------------------------------------
def test_typed_options_are_the_keywords_explain_takes():
    table = {f.name for f in dataclasses.fields(sc.CallOptions)} - {"fit_options"}  # CallOptions holds the defaults
    keywords = {n for n, p in inspect.signature(sc.explain_batch).parameters.items() if p.kind is p.KEYWORD_ONLY}
    assert table < keywords
    assert set(sc.ExplainOptions.__optional_keys__) == keywords
    documented = set(re.findall(r"^    (\w+):", inspect.getdoc(sc.explain), re.M))
    assert set(sc.ExplainOptions.__optional_keys__) <= documented  # explain's Args cover every option


def test_explain_and_explain_batch_read_the_same_options():
    clf = sc.TorchClassifier(lambda i, m: _additive()(i, m))
    kw = dict(method="eff", n_samples=60, seed=3, reference=0.0, gamma=0.5, sample_length=3, batch_size=7)
    one = sc.explain(clf, [5, 6, 7], **kw)
    many = sc.explain_batch(clf, [[5, 6, 7]], **kw)[0]
    np.testing.assert_allclose(one.lin, many.lin)
    assert one.diagnostics["seed"] == 3 and one.base_value == 0.0
    with pytest.raises(TypeError, match="invalid option"):
        sc.explain(clf, [5, 6, 7], sample_lenght=3)
