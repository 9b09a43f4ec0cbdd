"""The one fit-quality rule (``slalom_core.fit_quality``) on models with a known answer, and
every place that marks a fit asking it: the call's warning, the page, a corpus run's rows."""

from __future__ import annotations

import dataclasses
import html
import json
import warnings

import numpy as np
import pytest
import slalom_core as sc
import torch
from slalom_core.api.fit_warnings import fit_problems
from slalom_core.experiments.synthetic import make_word_tokenizer
from slalom_core.fit_quality import HELDOUT_R2_LABEL, FitFacts, fit_flags, flags_of, row_flags
from tiny_models import SlalomModel

WORDS = ["the", "film", "was", "great", "awful", "dull", "plot", "and", "very", "fun"]
TEXT = "the film was great and the plot was fun"
#: The word tokenizer's ids start after [PAD] [UNK] [CLS] [SEP] [MASK].
VOCAB = 5 + len(WORDS)


def _slalom(seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.normal(0, 1.5, VOCAB), rng.normal(0, 1.0, VOCAB)


class AgainstOnTheText(SlalomModel):
    """A SLALOM on every sub-text, but on the full text (its ``n`` tokens, all present) its
    output is mirrored about the empty input's 0: whatever the fit learns from sub-texts moves
    from the reference point the other way than this model on the text."""

    def __init__(self, value, importance, n: int) -> None:
        super().__init__(value, importance)
        self.n = n

    def forward(self, input_ids, attention_mask):
        out = super().forward(input_ids, attention_mask)
        full = attention_mask.sum(dim=1) == self.n
        return torch.where(full[:, None], -out, out)


def _model(module) -> sc.TorchClassifier:
    return sc.TorchClassifier(module, tokenizer=make_word_tokenizer(WORDS, add_cls_sep=False))


@pytest.fixture(scope="module")
def true_slalom_exp() -> sc.SlalomExplanation:
    with warnings.catch_warnings():
        warnings.simplefilter("error", sc.SlalomFitWarning)  # the model is a SLALOM: nothing to warn of
        return sc.explain(_model(SlalomModel(*_slalom())), TEXT, n_samples=600, seed=0)


def test_a_model_that_is_a_slalom_raises_no_flag(true_slalom_exp):
    exp = true_slalom_exp
    assert fit_flags(exp) == [] and fit_problems(exp) == []
    page = exp.to_html()
    assert "Fit check: no flag" in page and "Read with care" not in page


def test_a_surrogate_against_the_model_is_flagged_everywhere():
    n = len(TEXT.split())
    with pytest.warns(sc.SlalomFitWarning, match="against the model"):
        exp = sc.explain(_model(AgainstOnTheText(*_slalom(), n=n)), TEXT, n_samples=600, seed=0)
    # The model's move and the surrogate's have opposite signs (the construction's point).
    assert np.sign(exp.model_output - exp.base_value) == -np.sign(exp.surrogate_output - exp.base_value)
    assert "against" in [f.code for f in fit_flags(exp)]
    page = exp.to_html()
    assert "Read with care" in page and "against the model" in page
    # In the reader's terms: the two outputs lie on different sides of 0, and the page says so.
    said = sc.views.describe.sides(exp, None, float(exp.model_output), float(exp.surrogate_output))
    assert said is not None and html.escape(said) in page
    # A corpus run's rows of the same explanation: the same verdict.
    rows = [_row(exp)]
    assert [f.code for f in row_flags(rows)] == [f.code for f in fit_flags(exp)]


def _row(exp) -> dict:
    """A text's row of the texts table, as corpus.rows writes it (the fields the rule reads)."""
    d = exp.diagnostics
    return {
        "model_output": exp.model_output,
        "surrogate_output": exp.surrogate_output,
        "base_value": exp.base_value,
        "converged": d.get("fit_converged"),
        "n_units": d.n_units,
        "diagnostics": json.dumps({k: v for k, v in d.items() if isinstance(v, (int, float, str, bool, type(None)))}),
    }


def test_held_out_r2_alone_is_no_flag_but_is_named(true_slalom_exp):
    # A short-only design (no context samples) of held-out R² −0.146 whose surrogate meets the
    # model on the text: the old rule flagged it as a poor fit; nothing here misleads a reader.
    d = sc.Diagnostics(true_slalom_exp.diagnostics)
    d["heldout_r2"], d["n_context"] = -0.146, 0
    exp = dataclasses.replace(true_slalom_exp, diagnostics=d)
    assert fit_problems(exp) == []
    assert f"{HELDOUT_R2_LABEL} -0.146" in sc.views.describe.fit_line(exp)


@pytest.mark.parametrize(
    "f, big_f, flagged",
    [
        (2.0, 1.2, False),  # misses 0.8 of a move of 2: under half
        (2.0, 0.9, True),  # misses 1.1: over half the move and over 0.5 log-odds
        (0.6, 0.05, True),  # misses 0.55 of 0.6: over half, over 0.5
        (0.4, 0.01, False),  # misses 0.39 of 0.4: over half, but under 0.5 log-odds (12.5 points of probability)
        (0.0, 0.8, True),  # the model does not move, the surrogate moves 0.8
    ],
)
def test_missed_is_half_the_models_move_and_half_a_log_odds(f, big_f, flagged):
    codes = [x.code for x in flags_of(FitFacts(model_output=f, surrogate_output=big_f, base_value=0.0))]
    assert ("missed" in codes) == flagged


def test_undetermined_unstable_and_not_converged_are_what_the_fitter_and_the_check_report():
    ok = dict(model_output=2.0, surrogate_output=1.9, base_value=0.0)
    assert flags_of(FitFacts(**ok, units_determined=0, n_units=5))[0].code == "undetermined"
    assert flags_of(FitFacts(**ok, units_determined=0, n_units=1)) == []  # one token: nothing to split
    assert flags_of(FitFacts(**ok, units_determined=None, n_units=5)) == []  # no standard errors: not judged
    assert flags_of(FitFacts(**ok, agreement=0.3))[0].code == "unstable"
    assert flags_of(FitFacts(**ok, agreement=float("nan"))) == []  # a constant ranking is no evidence
    assert flags_of(FitFacts(**ok, converged=False))[0].code == "not converged"
    # A joint fit's outputs are centred logits: the move and the miss are vector norms.
    joint = FitFacts(model_output=[1.0, -1.0], surrogate_output=[-0.5, 0.5], base_value=[0.0, 0.0])
    assert [x.code for x in flags_of(joint)] == ["against", "missed"]


def test_a_corpus_run_and_its_report_flag_the_text_the_rule_flags(tmp_path):
    from slalom_core.corpus import explain_corpus
    from slalom_core.corpus.report import INDEX_COLUMNS, write_report

    other = "the dull plot was very awful"  # a length the model answers as the SLALOM it is
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in (("against", TEXT), ("true", other))))
    model = _model(AgainstOnTheText(*_slalom(), n=len(TEXT.split())))
    with pytest.warns(sc.SlalomFitWarning, match="1 the surrogate moves from the reference point against"):
        run = explain_corpus(model, data, tmp_path / "run", n_samples=600, show_progress=False)
    index = write_report(run, tmp_path / "site", text_pages=True)
    script = (index.parent / "data" / "rows-000.js").read_text(encoding="utf-8")
    rows = json.loads(script[script.index("...[") + 3 : script.rindex(");")])
    status = {r[0]: r[INDEX_COLUMNS.index("status")] for r in rows}
    assert status["true"] == "ok" and status["against"].startswith("fit flagged (against")
    # The text's page says the same, from the explanation rebuilt from the tables.
    page = next(p for p in (index.parent / "texts").rglob("*.html") if "text against" in p.read_text(encoding="utf-8"))
    assert "Read with care" in page.read_text(encoding="utf-8")
