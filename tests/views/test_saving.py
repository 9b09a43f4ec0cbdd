"""Explanations saved and loaded: exact round trips, old and newer formats, the table."""

from __future__ import annotations

import json

import numpy as np
import pytest
import slalom_core as sc
from conftest import WORD_TEXT, slalom_model
from slalom_core.scores import SCORES


def assert_same(a: sc.SlalomExplanation, b: sc.SlalomExplanation) -> None:
    """Every array and score of ``b`` equals ``a``'s exactly."""
    for name in SCORES:
        assert np.array_equal(a.scores(name), b.scores(name)), name
    for attr in ("value_se", "importance_se", "unit_index", "base_value", "model_output", "surrogate_output"):
        x, y = getattr(a, attr), getattr(b, attr)
        assert (x is None and y is None) or np.array_equal(x, y, equal_nan=True), attr
    assert np.array_equal(a.surrogate.value, b.surrogate.value)
    assert np.array_equal(a.surrogate.importance, b.surrogate.importance)
    assert a.tokens == b.tokens and a.token_ids == b.token_ids and a.text == b.text
    assert (a.method, a.granularity, a.target, a.class_names, a.class_index) == (
        b.method,
        b.granularity,
        b.target,
        b.class_names,
        b.class_index,
    )
    assert set(a.diagnostics) == set(b.diagnostics)
    for k, v in a.diagnostics.items():
        w = b.diagnostics[k]
        if isinstance(v, (np.ndarray, float)):
            assert np.array_equal(v, w, equal_nan=True), k
        else:
            assert v == w, k


@pytest.fixture(scope="module")
def several(word_exp, multi_exp) -> list[sc.SlalomExplanation]:
    model = slalom_model(n_classes=3)
    return [
        word_exp,  # standard errors
        multi_exp,  # a joint fit of three classes
        sc.explain(model, WORD_TEXT, method="eff", n_samples=300, target=2, seed=0),  # one class of a joint fit
        sc.explain(slalom_model(), WORD_TEXT, method="ana", seed=0),  # no standard errors
    ]


def test_save_load_round_trip_is_exact(several, tmp_path):
    for i, exp in enumerate(several):
        path = exp.save(tmp_path / f"e{i}.json")
        assert_same(exp, sc.load_explanation(path))
        assert_same(exp, sc.SlalomExplanation.from_dict(exp.to_dict()))
        assert_same(exp, sc.SlalomExplanation.from_dict(json.loads(json.dumps(exp.to_dict()))))


def test_loaded_explanation_renders_the_same_page(word_exp, tmp_path):
    again = sc.load_explanation(word_exp.save(tmp_path / "e.json"))
    assert again.to_html() == word_exp.to_html()


def test_file_of_the_earlier_unversioned_to_dict_loads(several):
    for exp in (several[0], several[3]):
        old = exp.to_dict()
        for key in ("format", "format_version", "text", "class_index", "unit_index", "surrogate"):
            old.pop(key)
        old.pop("unit_value_se"), old.pop("unit_importance_se")
        again = sc.SlalomExplanation.from_dict(old)
        for name in ("value", "importance", "lin", "contribution", "removal"):
            # tol: float64 rounding: scores recomputed from the same stored float64 parameters
            np.testing.assert_allclose(again.scores(name), exp.scores(name), rtol=0, atol=1e-12)
        assert again.text is None and np.array_equal(again.unit_index, exp.unit_index)


def test_unreadable_files_say_why(word_exp, tmp_path):
    newer = {**word_exp.to_dict(), "format_version": sc.FORMAT_VERSION + 1}
    with pytest.raises(ValueError, match="upgrade"):
        sc.SlalomExplanation.from_dict(newer)
    with pytest.raises(ValueError, match="not a SLALOM explanation"):
        sc.SlalomExplanation.from_dict({**word_exp.to_dict(), "format": "other"})
    old = {k: v for k, v in word_exp.to_dict().items() if k not in ("format", "format_version", "units")}
    with pytest.raises(ValueError, match="no unit table"):
        sc.SlalomExplanation.from_dict(old)
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(ValueError, match="not a JSON file"):
        sc.load_explanation(bad)
    with pytest.raises(TypeError):
        sc.save_explanation("not an explanation", tmp_path / "x.json")


def test_to_pandas_one_row_per_position_every_score_and_se(word_exp, multi_exp):
    df = word_exp.to_pandas()
    assert len(df) == word_exp.n_positions and list(df["token"]) == word_exp.tokens
    for name in SCORES:
        assert np.array_equal(df[name].to_numpy(), word_exp.scores(name)), name
    assert np.array_equal(df["value_se"].to_numpy(), word_exp.value_se)
    assert np.array_equal(df["importance_se"].to_numpy(), word_exp.importance_se)
    multi = multi_exp.to_pandas()
    for c, label in enumerate(multi_exp.class_names):
        assert np.array_equal(multi[f"value[{label}]"].to_numpy(), multi_exp.value[:, c])
    assert np.array_equal(multi["importance"].to_numpy(), multi_exp.importance)
