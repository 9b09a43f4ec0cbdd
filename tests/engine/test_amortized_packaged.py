"""The amortized explainer on the packaged demo model, end to end, as a newcomer runs it:
train on a corpus run, save, load, explain (a text over 512 tokens cut as `explain` cuts
it), explain a corpus with the head, on the command line too; class names kept."""

import json
import warnings

import numpy as np
import pytest
import torch
from slalom_core.amortized import AmortizedExplainer, AmortizedFewTextsWarning, AmortizedOODWarning
from slalom_core.cli.command import main
from slalom_core.corpus import CorpusRun, explain_corpus
from slalom_core.packaged.demo_model import load_default_model
from tiny_models import write_jsonl

pytest.importorskip("pyarrow")
pytest.importorskip("safetensors")

TRAIN = [
    "a wonderful film",
    "a dull plot",
    "the acting was great",
    "boring and far too long",
    "i loved every minute",
    "the worst film of the year",
    "a fine cast",
    "it was awful",
    "very good fun",
    "a weak story",
]
LONG = "a wonderful film , " * 160  # about 640 tokens: over the model's 512


@pytest.mark.slow
def test_the_whole_amortized_path_on_the_packaged_model(tmp_path, capsys, one_torch_thread):
    model, tok = load_default_model()
    per_text = explain_corpus(
        model, write_jsonl(tmp_path / "train.jsonl", TRAIN), tmp_path / "run", tok, n_samples=40, show_progress=False
    )
    with pytest.warns(AmortizedFewTextsWarning, match="training on 10 texts.*fewest measured.* 50 texts"):
        explainer = AmortizedExplainer(model, tok, epochs=2, hidden=16).fit(per_text)
    folder = explainer.save(tmp_path / "head")
    loaded = AmortizedExplainer.load(folder, model, tok)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AmortizedOODWarning)
        short, long = loaded.explain_batch(["a wonderful film", LONG])
    # Trained, saved and reloaded: the same head (its weights bit for bit, then one forward).
    for name, w in explainer.head.state_dict().items():
        assert torch.equal(w, loaded.head.state_dict()[name]), name
    alone = loaded.explain("a wonderful film")
    # tol: float32 forward of the same weights on the same text: rounding at most
    np.testing.assert_allclose(alone.value, explainer.explain("a wonderful film").value, rtol=0, atol=1e-6)
    # tol: float32 attention: a row padded beside a 512-token text sums in another order
    np.testing.assert_allclose(short.value, alone.value, atol=1e-5)
    # Cut as every entry point cuts; class names as a per-text explanation names them.
    seg, n_cut = loaded.adapter.segment_within_length(LONG)
    assert n_cut > 0 and long.tokens == seg.tokens and long.diagnostics["truncated_positions"] == n_cut
    first = per_text.explanation("r0")
    for key in ("class_names", "n_outputs"):
        assert short.diagnostics[key] == first.diagnostics[key]
    assert short.diagnostics["class_names"] == ["NEGATIVE", "POSITIVE"]

    # The command line: a corpus with the long text, explained with the saved head.
    data = write_jsonl(tmp_path / "new.jsonl", ["a wonderful film", LONG, "a dull plot"])
    args = ["explain", "--amortized", str(folder), "--data", str(data), "--out", str(tmp_path / "out")]
    assert main([*args, "--no-progress"]) == 0
    run = CorpusRun(tmp_path / "out")
    texts = run.texts().set_index("id")
    assert len(run.failures()) == 0 and set(texts["method"]) == {"amortized"}
    assert int(texts.loc["r1", "truncated_positions"]) == n_cut
    stored = run.explanation("r1")
    assert stored.tokens == long.tokens
    np.testing.assert_allclose(stored.value, long.value, atol=1e-6)  # tol: float32 head outputs, stored as float64
    assert json.loads(texts.loc["r0", "diagnostics"])["class_names"] == ["NEGATIVE", "POSITIVE"]
    # The deprecated name cuts the same way and says what to use instead.
    out = tmp_path / "old.jsonl"
    assert (
        main(
            [
                "explain-amortized",
                "--amortized",
                str(folder),
                "--model",
                "default",
                "--data",
                str(data),
                "--out",
                str(out),
            ]
        )
        == 0
    )
    assert "explain --amortized" in capsys.readouterr().err
    rows = {r["id"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert "error" not in rows["r1"] and rows["r1"]["truncated_positions"] == n_cut
    assert rows["r0"]["predicted"] in ("NEGATIVE", "POSITIVE") and rows["r0"]["class_names"] == ["NEGATIVE", "POSITIVE"]


@pytest.mark.slow
def test_the_command_line_takes_a_class_name_as_target(tmp_path):
    data = write_jsonl(tmp_path / "d.jsonl", ["a wonderful film"])
    args = ["explain", "--data", str(data), "--n-samples", "30", "--no-progress", "--method", "ana"]
    assert main([*args, "--out", str(tmp_path / "name"), "--target", "NEGATIVE"]) == 0
    assert main([*args, "--out", str(tmp_path / "index"), "--target", "0"]) == 0
    by_name, by_index = (CorpusRun(tmp_path / d).positions()["value"].to_numpy() for d in ("name", "index"))
    np.testing.assert_array_equal(by_name, by_index)  # exact: the same call once the name is read
    main([*args, "--out", str(tmp_path / "bad"), "--target", "GOOD"])  # fails its text, which says why
    message = CorpusRun(tmp_path / "bad").failures()["message"].iloc[0]
    assert "'GOOD' is not a class of this model" in message and "'NEGATIVE', 'POSITIVE'" in message
