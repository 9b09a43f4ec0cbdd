"""One fit-quality rule, one vocabulary: the docs, the page, a dataset's card and the report
state the rule in the words :mod:`slalom_core.fit_quality` renders from its constants, and
their numbers are the constants' (read back from the docs, so a hand edit cannot drift)."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import pytest
import slalom_core as sc
from slalom_core import fit_quality as fq
from slalom_core.corpus import card
from slalom_core.diagnostics import MIN_MOVE
from slalom_core.views import describe

DOCS = Path(__file__).resolve().parents[2] / "docs"
README = DOCS.parent / "README.md"


def _flat(path: Path) -> str:
    """A doc's text with line breaks and runs of spaces as one space (the docs wrap)."""
    return " ".join(path.read_text(encoding="utf-8").split())


def test_the_guides_table_is_the_rules_own_statement():
    text = (DOCS / "guide.md").read_text(encoding="utf-8")
    start = text.index("| flag | raised when |")
    table = text[start : text.index("\n\n", start)]
    rows = dict(re.findall(r"^\| `([a-z ]+)` \| (.*) \|$", table, flags=re.M))
    assert {code: rule.replace("\\|", "|") for code, rule in rows.items()} == fq.FLAG_RULES
    assert fq.DETERMINED_RULE in _flat(DOCS / "guide.md")


@pytest.mark.parametrize("doc", ["engine_api.md", "corpus.md"])
def test_the_api_and_corpus_docs_state_the_rule_in_its_words(doc):
    assert fq.RULE_SUMMARY in _flat(DOCS / doc)


def test_importance_determined_is_stated_once_in_the_same_words():
    assert fq.DETERMINED_RULE in _flat(DOCS / "engine_api.md")
    assert fq.DETERMINED_RULE in card.COLUMN_MEANINGS["importance_determined"]
    assert fq.RULE_SUMMARY in card.COLUMN_MEANINGS["status"]
    assert fq.HELDOUT_R2_NOTE in card.COLUMN_MEANINGS["heldout_r2"]


def test_the_docs_numbers_are_the_constants():
    text = _flat(DOCS / "guide.md") + " " + _flat(DOCS / "engine_api.md")
    shares = {float(x) / 100 for x in re.findall(r"more than (\d+) ?% of the model's move", text)}
    shares |= {float(x) / 100 for x in re.findall(r"> (\d+) ?% of the model's move", text)}
    assert shares == {fq.MISSED_SHARE}
    assert {float(x) for x in re.findall(r"and (?:more than |> )([\d.]+) log-odds", text)} == {fq.MISSED_FLOOR}
    assert {float(x) for x in re.findall(r"moves at least ([\d.]+) log-odds", text)} == {MIN_MOVE}
    assert {float(x) for x in re.findall(r"Spearman (?:below )?([\d.]+)", text)} == {fq.MIN_AGREEMENT}
    assert {float(x) for x in re.findall(r"below ([\d.]+) × the prior's sd", text)} == {fq.DETERMINED_SE_RATIO}


@pytest.mark.parametrize("doc", ["engine_api.md", "guide.md", "corpus.md", "shap.md", "README.md"])
def test_no_doc_states_an_old_rule(doc):
    text = _flat(README if doc == "README.md" else DOCS / doc)
    for old in (
        r"held-out R² (?:is )?(?:below|<) 0\.5",
        r"more than 1 log-odds",
        r"half the prior's sd",
        r"SE ≥ 0\.8",
        r"gap > 1 log-odds",
    ):
        # A measurement of the old rule may name it, as the old one.
        found = [m for m in re.finditer(old, text) if "old" not in text[max(0, m.start() - 40) : m.start()]]
        assert not found, (doc, old)


def test_a_page_says_which_class_each_side_says_where_their_signs_differ():
    d = sc.Diagnostics({"n_outputs": 2, "output_kind": "logits", "class_names": ["NEGATIVE", "POSITIVE"]})
    exp = SimpleNamespace(diagnostics=d, target=None, class_names=None, class_index=None)
    said = describe.sides(exp, None, 0.80, -0.14)
    assert said == "the model says POSITIVE (+0.8), the surrogate NEGATIVE (-0.14)"
    assert describe.sides(exp, None, 0.80, 0.3) is None  # same class: nothing to say
    one = SimpleNamespace(diagnostics=sc.Diagnostics({"n_outputs": 1}), target=None, class_names=None, class_index=None)
    assert describe.sides(one, None, -0.5, 0.4).startswith(
        "the model's output is negative (-0.5), the surrogate's positive"
    )
