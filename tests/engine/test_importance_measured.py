"""Every explanation says which importance the user sees: each token alone, or in this text.

A transformer weighs a token differently beside two others than inside the review
(docs/results.md), so the diagnostics and the pages name what the method's samples measured.
"""

import pytest
import slalom_core as sc
from slalom_core.diagnostics import IMPORTANCE_MEASURED
from slalom_core.views.describe import fit_line
from tiny_models import bert_tokenizer, tiny_classifier

TEXT = "the movie was great fun and the actors were good"

# What each method's samples are: short samples of a few tokens (eff, ana), deletions of
# the text (fidel), short samples with a prior from the values (eff-slope), short samples
# carried unchanged to every scale by a length law (hybrid, the default).
EXPECTED = {
    "eff": "alone",
    "ana": "alone",
    "fidel": "in context",
    "eff-slope": "prior from the values",
    "hybrid": "alone",
}


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    tok = bert_tokenizer(tmp_path_factory.mktemp("bert"))
    return tiny_classifier("bert", tok, initializer_range=0.2), tok


@pytest.mark.parametrize("method", sorted(EXPECTED))
def test_each_method_says_what_its_importances_measure(bert, method):
    model, tok = bert
    exp = sc.explain(model, TEXT, tokenizer=tok, n_samples=300, seed=0, method=method)
    key = exp.diagnostics.importance_measured
    assert key == EXPECTED[method]
    # The page's fit line prints the sentence, so the user reads it beside the scores.
    assert f"importances {IMPORTANCE_MEASURED[key]}" in fit_line(exp)


def test_options_that_change_the_samples_change_the_statement(bert):
    model, tok = bert

    def measured(method, **options):
        return sc.explain(model, TEXT, tokenizer=tok, n_samples=200, seed=0, method=method, **options).diagnostics[
            "importance_measured"
        ]

    assert measured("hybrid", context_share=0.0) == "alone"
    assert measured("eff", deletion_share=0.5) == "alone and in context"
    assert measured("eff-slope", importance_slope=False, value_sd=None) == "alone"


def test_a_one_token_text_has_no_context_to_measure_in(bert):
    model, tok = bert
    exp = sc.explain(model, "great", tokenizer=tok, n_samples=50, seed=0)
    assert exp.diagnostics.method == "hybrid" and exp.diagnostics.importance_measured == "alone"
