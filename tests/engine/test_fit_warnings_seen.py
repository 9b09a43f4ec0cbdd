"""Every flagged explanation is seen: a SlalomFitWarning per flagged text in a user's loop
(Python's default filter shows a warning once per line *and message*), one summary naming
the flagged texts per ``explain_batch`` call, attributed to the user's line."""

from __future__ import annotations

import warnings

import numpy as np
import slalom_core as sc
import torch
from slalom_core.experiments.synthetic import make_word_tokenizer
from tiny_models import SlalomModel

WORDS = ["the", "film", "was", "great", "awful", "dull", "plot", "and", "very", "fun"]
#: Two texts of 9 words (the model turns against its own SLALOM on a full 9-word text) and
#: one of 5 (a SLALOM throughout: nothing to flag).
TEXTS = ["the film was great and the plot was fun", "the film was very fun", "the plot was dull and the film was awful"]
FLAGGED = [0, 2]


class AgainstOnNineWords(SlalomModel):
    """A SLALOM on every sub-text, mirrored about the empty input's 0 on a full 9-word text."""

    def forward(self, input_ids, attention_mask):
        out = super().forward(input_ids, attention_mask)
        return torch.where((attention_mask.sum(dim=1) == 9)[:, None], -out, out)


def _model() -> sc.TorchClassifier:
    rng = np.random.default_rng(1)
    value, importance = rng.normal(0, 1.5, 5 + len(WORDS)), rng.normal(0, 1.0, 5 + len(WORDS))
    tok = make_word_tokenizer(WORDS, add_cls_sep=False)
    return sc.TorchClassifier(AgainstOnNineWords(value, importance), tokenizer=tok)


def test_a_loop_shows_a_warning_for_each_flagged_text():
    model = _model()
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("default")  # Python's own: once per code line and message
        for text in TEXTS:
            sc.explain(model, text, n_samples=300, seed=0)
    fit = [w for w in seen if issubclass(w.category, sc.SlalomFitWarning)]
    assert len(fit) == len(FLAGGED)
    for w, i in zip(fit, FLAGGED):
        assert TEXTS[i][:30] in str(w.message) and "against the model" in str(w.message)
        assert w.filename == __file__  # the user's line, not the library's


def test_explain_batch_names_every_flagged_text_in_one_summary():
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("default")
        exps = sc.explain_batch(_model(), TEXTS, n_samples=300, seed=0)
    fit = [w for w in seen if issubclass(w.category, sc.SlalomFitWarning)]
    assert len(fit) == 1 and fit[0].filename == __file__
    message = str(fit[0].message)
    assert message.startswith(f"SLALOM fit flagged {len(FLAGGED)} of {len(TEXTS)} texts")
    for i in FLAGGED:
        assert f'text {i} "{TEXTS[i][:30]}' in message
    assert TEXTS[1] not in message
    assert [bool(sc.fit_quality.fit_flags(e)) for e in exps] == [i in FLAGGED for i in range(len(TEXTS))]
