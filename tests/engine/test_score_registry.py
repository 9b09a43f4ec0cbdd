"""One score registry: a score added with register_score reaches every entry point."""

import json

import numpy as np
import pytest
import slalom_core as sc
from tiny_models import bert_tokenizer, tiny_classifier

from captum_slalom import SlalomAttribution
from shap_slalom import SlalomExplainer

TEXT = "the movie was great but the plot was boring"


def _odds_weight(v: np.ndarray, s: np.ndarray) -> np.ndarray:
    # A made-up score with a per-position formula no built-in score shares.
    return np.tanh(v) * (1.0 + sc.scores.attention(s)[:, None] if np.ndim(v) == 2 else 1.0 + sc.scores.attention(s))


@pytest.fixture
def registered():
    row = sc.Score(
        "odds_weight",
        "tanh(v_i)·(1 + α_i)",
        "unit-free",
        additive=False,
        from_base=False,
        class0_sign=-1,
        per="position",
        compute=_odds_weight,
    )
    sc.register_score(row)
    yield row
    sc.unregister_score("odds_weight")


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    tok = bert_tokenizer(tmp_path_factory.mktemp("bert"))
    return tiny_classifier("bert", tok, initializer_range=0.2), tok


def test_a_registered_score_reaches_explanations_captum_and_shap(registered, bert):
    model, tok = bert
    assert "odds_weight" in sc.SCORE_NAMES and "odds_weight" in sc.STORED_SCORES
    assert "odds_weight" not in sc.ADDITIVE_SCORES
    exp = sc.explain(model, TEXT, tok, n_samples=150, seed=0)
    expected = np.tanh(exp.value) * (1.0 + sc.scores.attention(exp.importance))
    np.testing.assert_allclose(exp.scores("odds_weight"), expected)
    assert json.loads(json.dumps(exp.to_dict()))["odds_weight"] == pytest.approx(expected.tolist())
    np.testing.assert_allclose(exp.per_class("odds_weight")[:, 0], -expected)  # class0_sign

    ids = tok(TEXT, return_tensors="pt")["input_ids"]
    captum = SlalomAttribution(model, tokenizer=tok)
    attr = captum.attribute(ids, target=1, n_samples=150, seed=0, score="odds_weight")
    every = captum.attribute(ids, target=1, n_samples=150, seed=0, return_all=True)
    np.testing.assert_allclose(attr[0, 1:-1].numpy(), every.explanations[0].scores("odds_weight"))
    assert "odds_weight" in every.keys()

    sv = SlalomExplainer(model, tok, n_samples=150, seed=0)([TEXT], score="odds_weight")
    fit = SlalomExplainer(model, tok, n_samples=150, seed=0).fit([TEXT])[0]
    np.testing.assert_allclose(sv.values[0][1:-1, 1], fit.scores("odds_weight"))


def test_unregistered_scores_are_gone_and_built_ins_stay(bert):
    row = sc.Score(
        "tmp_score", "v", "u", additive=False, from_base=True, class0_sign=-1, per="token", compute=lambda v, s: v
    )
    sc.register_score(row)
    with pytest.raises(ValueError, match="exists"):
        sc.register_score(row)
    sc.unregister_score("tmp_score")
    assert "tmp_score" not in sc.SCORE_NAMES
    with pytest.raises(ValueError, match="unknown score"):
        sc.check_score("tmp_score")
    with pytest.raises(ValueError, match="built-in"):
        sc.unregister_score("lin")


def test_a_score_row_is_checked():
    with pytest.raises(ValueError, match="identifier"):
        sc.Score("two words", "", "", False, True, -1, "token", lambda v, s: v)
    with pytest.raises(ValueError, match="per"):
        sc.Score("x", "", "", False, True, -1, "word", lambda v, s: v)
    with pytest.raises(TypeError, match="compute"):
        sc.Score("x", "", "", False, True, -1, "token", None)
    with pytest.raises(TypeError, match="Score"):
        sc.register_score({"name": "x"})


def test_builtin_rows_compute_what_the_explanation_reports(bert):
    model, tok = bert
    exp = sc.explain(model, TEXT, tok, n_samples=150, seed=1)
    v, s = exp.value, exp.importance
    np.testing.assert_allclose(exp.scores("lin"), v * np.exp(s))
    a = np.exp(s) / np.exp(s).sum()
    # Each value read at the text's length by the fit's length law (p + A(n)(v − p)).
    law, n = exp.surrogate.law, exp.n_positions
    amp = n ** (law.exponent + law.curvature * np.log(n))
    np.testing.assert_allclose(exp.scores("contribution"), a * (law.pivot + amp * (v - law.pivot)))
    np.testing.assert_allclose(exp.scores("contribution").sum() + exp.base_value, exp.surrogate_output)


def test_a_registered_score_reaches_corpus_tables_and_summaries(registered, bert, tmp_path):
    pytest.importorskip("pyarrow")
    from slalom_core.corpus import CorpusRun, cohort_matrix, explain_corpus, word_summary

    model, tok = bert
    data = tmp_path / "texts.jsonl"
    texts = [TEXT, "a great film , not boring at all", "the plot was bad but the actor was good"]
    data.write_text("".join(json.dumps({"id": str(i), "text": t}) + "\n" for i, t in enumerate(texts)))
    run = explain_corpus(model, data, tmp_path / "run", tok, n_samples=150, seed=0, show_progress=False)
    pos = CorpusRun(run.path).positions()
    first = pos[pos["id"] == "0"]
    direct = sc.explain(model, TEXT, tok, n_samples=150, seed=int(run.texts()["seed"].iloc[0]))
    # tol: float64 rounding: the run's stored float64 scores against the same fit's (the same seed)
    np.testing.assert_allclose(first["odds_weight"].to_numpy(), direct.scores("odds_weight"), rtol=1e-6, atol=1e-9)
    summary = word_summary(run, sort_by="odds_weight")
    assert "odds_weight_mean" in summary.columns
    _, tokens, values, _, _ = cohort_matrix(run, score="odds_weight", top=3, min_texts=2)
    assert len(tokens) > 0 and np.isfinite(values).all()
