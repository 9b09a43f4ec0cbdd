"""Where a text's importances do not matter, the page says so once, in words."""

from __future__ import annotations

import copy

import numpy as np
import slalom_core as sc
from slalom_core.views.describe import importance_note
from tiny_models import SlalomModel


def test_a_true_slalom_s_importances_matter_and_the_page_stays_quiet(word_exp):
    # The model's own importances (sd 1) fix its deletions far better than equal weights.
    assert word_exp.diagnostics["importance_gain"] > 0.5
    assert importance_note(word_exp) is None


def test_importances_that_do_not_help_are_named_once_on_the_page(word_exp):
    exp = copy.deepcopy(word_exp)
    exp.diagnostics["importance_gain"] = -0.02  # equal weights fit the deletions better
    note = importance_note(exp)
    assert note and "do not matter" in note
    assert exp.to_html().count("the importances do not matter") == 1


def test_a_model_that_weighs_every_token_alike_is_measured_so():
    # Equal importances: the fitted ones help nothing on the text's deletions.
    rng = np.random.default_rng(0)
    net = SlalomModel(rng.normal(0, 1.5, 60), np.zeros(60))
    exp = sc.explain(sc.TorchClassifier(net), rng.choice(60, 40, replace=False).tolist(), seed=0)
    # tol: exact data; the fitted importances are 0 within ~1e-4 (the short stage's EXACT_FIT),
    # so both context fits are exact to ~1e-9 of the variance, under the gain's 1e-6 floor
    assert abs(exp.diagnostics["importance_gain"]) < 1e-2
