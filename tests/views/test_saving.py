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


def _unversioned(exp: sc.SlalomExplanation) -> dict:
    """``exp.to_dict()`` as the previous release wrote it (no version, no surrogate, no unit_index)."""
    old = exp.to_dict()
    for key in ("format", "format_version", "text", "class_index", "unit_index", "surrogate"):
        old.pop(key)
    old.pop("unit_value_se"), old.pop("unit_importance_se")
    return old


@pytest.fixture(scope="module")
def gamma_exp() -> sc.SlalomExplanation:
    """A fit whose importances sum to gamma = 2 (not the default 0): lin depends on it."""
    return sc.explain(slalom_model(), WORD_TEXT, method="eff", n_samples=300, seed=0, gamma=2.0)


def test_unversioned_dict_of_a_gamma_fit_keeps_its_gamma(gamma_exp):
    # The previous release's dict has no gamma field: it loaded as gamma 0 and lin moved by
    # up to 2.19. The unit table's importances sum to the fit's gamma (they are normalised
    # so); reading gamma from them gives every score back to rounding of that sum (1e-12).
    again = sc.SlalomExplanation.from_dict(_unversioned(gamma_exp))
    assert again.surrogate.gamma == pytest.approx(2.0, abs=1e-9)  # tol: float64 rounding of a sum of importances
    for name in ("value", "importance", "lin", "contribution", "removal"):
        # tol: float64 rounding of that sum (see above)
        np.testing.assert_allclose(again.scores(name), gamma_exp.scores(name), rtol=0, atol=1e-12)


def test_unversioned_dict_whose_scores_disagree_is_refused(gamma_exp):
    old = _unversioned(gamma_exp)
    old["lin"] = (np.asarray(old["lin"]) + 0.5).tolist()
    with pytest.raises(ValueError, match="'lin'"):
        sc.SlalomExplanation.from_dict(old)


@pytest.mark.parametrize(
    "tamper, field",
    [
        (lambda d: d.__setitem__("unit_index", [-1] + d["unit_index"][1:]), "unit_index"),
        (lambda d: d.__setitem__("unit_index", [0] * len(d["unit_index"])), "unit_index"),
        (lambda d: d.__setitem__("unit_index", d["unit_index"][:-1]), "unit_index"),
        (lambda d: d.__setitem__("unit_index", [0.5] * len(d["unit_index"])), "unit_index"),
        (lambda d: d["surrogate"].__setitem__("gamma", 1.0), "gamma"),
        (lambda d: d["surrogate"].__setitem__("value", d["surrogate"]["value"][:-1]), "surrogate"),
        (lambda d: d.__setitem__("lin", (np.asarray(d["lin"]) * 2).tolist()), "'lin'"),
    ],
)
def test_tampered_file_is_refused_naming_the_field(gamma_exp, tmp_path, tamper, field):
    d = json.loads(json.dumps(gamma_exp.to_dict()))
    tamper(d)
    path = tmp_path / "tampered.json"
    path.write_text(json.dumps(d), encoding="utf-8")
    with pytest.raises(ValueError, match=field) as err:
        sc.load_explanation(path)
    assert "tampered.json" in str(err.value)


def test_save_over_a_file_keeps_it_when_the_text_cannot_be_encoded(word_exp, tmp_path):
    path = tmp_path / "kept.json"
    path.write_text("the user's own file", encoding="utf-8")
    bad = sc.SlalomExplanation.from_dict({**word_exp.to_dict(), "text": "a lone surrogate \ud800"})
    with pytest.raises(ValueError, match="kept.json"):
        bad.save(path)
    assert path.read_text(encoding="utf-8") == "the user's own file"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept.json"]  # nothing left beside it


def test_save_replaces_an_existing_file_whole(word_exp, multi_exp, tmp_path):
    path = multi_exp.save(tmp_path / "e.json")
    word_exp.save(path)
    assert_same(word_exp, sc.load_explanation(path))


@pytest.mark.parametrize(
    "content",
    [
        lambda d: json.dumps(d, ensure_ascii=False).replace("the", "thé").encode("latin-1"),
        lambda d: json.dumps(d).encode("utf-16"),
        lambda d: b"[" * 100_000 + b"]" * 100_000,
        lambda d: b"\xff\xfe\x00",
    ],
)
def test_file_errors_name_the_file(word_exp, tmp_path, content):
    path = tmp_path / "odd-file.json"
    path.write_bytes(content(word_exp.to_dict()))
    with pytest.raises(ValueError, match="odd-file.json"):
        sc.load_explanation(path)


def test_missing_file_names_it(tmp_path):
    with pytest.raises(FileNotFoundError, match="nowhere.json"):
        sc.load_explanation(tmp_path / "nowhere.json")
