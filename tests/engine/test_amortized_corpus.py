"""A corpus explained by an amortized explainer: the same tables, its OOD column, resume checks."""

import json
import warnings

import numpy as np
import pytest
from slalom_core.amortized import AmortizedExplainer, AmortizedOODWarning, CorpusHead
from slalom_core.corpus import CorpusRun, explain_corpus
from tiny_models import SHORT_REVIEWS, bert_tokenizer, tiny_classifier, write_jsonl

pytest.importorskip("pyarrow")
pytest.importorskip("safetensors")

TRAIN = list(SHORT_REVIEWS[:10])
# New texts: an empty one (fails, as a per-text explanation does) and one of unseen tokens.
NEW = ["the film was great fun", "", "a bad plot , a boring film", "films boringly", "i loved the actor"]
QUIET = dict(show_progress=False)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("amortized-corpus")
    tok = bert_tokenizer(tmp)
    model = tiny_classifier("bert", tok, initializer_range=0.2)
    run = explain_corpus(model, write_jsonl(tmp / "train.jsonl", TRAIN), tmp / "run", tok, n_samples=150, **QUIET)
    head = AmortizedExplainer(model, tok, epochs=20, hidden=16).fit(run)
    other = AmortizedExplainer(model, tok, epochs=20, hidden=16, seed=1).fit(run)
    return model, tok, head.save(tmp / "head"), other.save(tmp / "other"), write_jsonl(tmp / "new.jsonl", NEW)


def test_amortized_run_tables_equal_the_explainers_own_explanations(setup, tmp_path):
    model, tok, folder, _, data = setup
    explainer = AmortizedExplainer.load(folder, model, tok)
    with pytest.warns(AmortizedOODWarning, match="1 of 4 texts are unlike"):
        run = explain_corpus(model, data, tmp_path / "out", tok, amortized=CorpusHead(folder), chunk_size=2, **QUIET)
    assert run.complete and run.manifest["options"]["method"] == "amortized"
    assert run.manifest["amortized"]["digest"] == explainer.digest
    assert run.manifest["amortized"]["folder"] == str(folder.resolve())
    assert run.failures()["id"].tolist() == ["r1"]  # the empty text
    ids = [f"r{i}" for i, t in enumerate(NEW) if t]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AmortizedOODWarning)
        direct = dict(zip(ids, explainer.explain_batch([t for t in NEW if t])))
    texts, positions = run.texts().set_index("id"), run.positions()
    for text_id, exp in direct.items():
        pos = positions[positions["id"] == text_id].sort_values("position")
        assert pos["token"].tolist() == list(exp.tokens)
        for name in ("value", "importance", "lin", "contribution", "removal"):
            # tol: float32 hidden states: the run batches its chunk's texts otherwise than this call
            np.testing.assert_allclose(pos[name], exp.scores(name), atol=1e-5, err_msg=name)
        assert pos["value_se"].isna().all()
        row = texts.loc[text_id]
        assert row["method"] == "amortized" and row["model_evaluations"] == 2
        # tol: float32 logits of the same empty input and text in other batches
        assert row["base_value"] == pytest.approx(exp.base_value, abs=1e-6)
        assert row["model_output"] == pytest.approx(exp.model_output, abs=1e-6)
        assert json.loads(row["ood"]) == json.loads(json.dumps(exp.diagnostics["ood"]))
        stored = run.explanation(text_id)
        # tol: float32 hidden states in other batches, as above
        np.testing.assert_allclose(stored.lin, exp.lin, atol=1e-5)
        assert stored.method == "amortized"
    # The OOD column says which text is unlike the training texts, and why.
    assert "never occur in the training texts" in json.loads(texts.loc["r3", "ood"])["warning"]
    assert json.loads(texts.loc["r0", "ood"])["warning"] is None


def test_a_per_text_run_has_no_ood_and_an_amortized_run_cannot_be_trained_on(setup, tmp_path):
    model, tok, folder, _, data = setup
    per_text = explain_corpus(model, data, tmp_path / "fits", tok, n_samples=150, **QUIET)
    assert per_text.texts()["ood"].isna().all()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        amortized = explain_corpus(
            model, write_jsonl(tmp_path / "t.jsonl", TRAIN), tmp_path / "am", tok, amortized=CorpusHead(folder), **QUIET
        )
    with pytest.raises(ValueError, match="predicted by an amortized explainer, not fitted per text"):
        AmortizedExplainer(model, tok).fit(amortized)


def test_a_resume_with_another_head_is_refused(setup, tmp_path):
    model, tok, folder, other, data = setup
    out = tmp_path / "out"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        first = explain_corpus(model, data, out, tok, amortized=CorpusHead(folder), limit=3, chunk_size=2, **QUIET)
        # The same head (here as an object) resumes.
        explain_corpus(
            model,
            data,
            out,
            tok,
            amortized=CorpusHead(AmortizedExplainer.load(folder, model, tok)),
            limit=3,
            chunk_size=2,
            resume=True,
            **QUIET,
        )
    for head, said in ((other, "with the amortized explainer"), (None, "explains per text")):
        with pytest.raises(ValueError, match=f"cannot resume .*{said}"):
            explain_corpus(
                model,
                data,
                out,
                tok,
                amortized=head and CorpusHead(head),
                limit=3,
                chunk_size=2,
                resume=True,
                **QUIET,
            )
    assert CorpusRun(out).n_done == first.n_done


def test_options_a_head_cannot_honour_are_refused(setup, tmp_path):
    model, tok, folder, _, data = setup
    for bad in (dict(method="eff"), dict(n_samples=300), dict(granularity="word"), dict(output="probability")):
        with pytest.raises(ValueError, match="cannot apply"):
            explain_corpus(model, data, tmp_path / "out", tok, amortized=CorpusHead(folder), **bad, **QUIET)
    other_model = tiny_classifier("bert", tok, seed=1, initializer_range=0.2)
    with pytest.raises(ValueError, match="trained for another model"):
        explain_corpus(other_model, data, tmp_path / "out", tok, amortized=CorpusHead(folder), **QUIET)
    assert not (tmp_path / "out").exists()


def test_the_corpus_takes_a_declared_chunk_explainer_source(setup, tmp_path):
    from slalom_core.corpus.protocol import ChunkExplainer, ChunkExplainerSource

    model, tok, folder, _, data = setup
    assert isinstance(CorpusHead(folder), ChunkExplainerSource)
    assert isinstance(AmortizedExplainer.load(folder, model, tok), ChunkExplainer)
    # A folder or an explainer handed over bare: the error names what to pass.
    for bare in (folder, AmortizedExplainer.load(folder, model, tok)):
        with pytest.raises(TypeError, match=r"CorpusHead\(head\)"):
            explain_corpus(model, data, tmp_path / "out", tok, amortized=bare, **QUIET)
    assert not (tmp_path / "out").exists()


@pytest.fixture(scope="module")
def saved(setup, tmp_path_factory):
    """The model in a folder, and a head trained for it with the command line, as a user would."""
    from slalom_core.cli.command import main

    model, tok, _, _, _ = setup
    tmp = tmp_path_factory.mktemp("saved")
    folder = tmp / "model"
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        explain_corpus(str(folder), write_jsonl(tmp / "train.jsonl", TRAIN), tmp / "run", n_samples=100, **QUIET)
    args = ["amortize", str(tmp / "run"), "--model", str(folder), "--out", str(tmp / "head"), "--epochs", "10"]
    assert main([*args, "--hidden", "8"]) == 0
    return str(folder), tmp / "head"


def test_command_line_explains_a_corpus_with_a_head(setup, saved, tmp_path, capsys):
    from slalom_core.cli.command import main

    folder, head = saved
    data = setup[4]
    args = ["explain", "--amortized", str(head), "--model", folder, "--data", str(data), "--no-progress"]
    assert main([*args, "--out", str(tmp_path / "out")]) == 0
    run = CorpusRun(tmp_path / "out")
    assert run.complete and set(run.texts()["method"]) == {"amortized"}
    assert run.texts()["ood"].notna().all()
    assert main([*args, "--out", str(tmp_path / "bad"), "--n-samples", "300"]) == 2
    assert "cannot apply to it: n_samples=300" in capsys.readouterr().err


def test_ray_engine_writes_the_local_engines_tables(setup, saved, tmp_path):
    ray = pytest.importorskip("ray")
    # A model object reaches Ray's workers pickled, and transformers then gives no hidden
    # states: the workers load the model from its folder, as the command line has them do.
    folder, head = saved
    data = setup[4]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        local = explain_corpus(folder, data, tmp_path / "local", amortized=CorpusHead(head), chunk_size=2, **QUIET)
        ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
        try:
            dist = explain_corpus(
                folder,
                data,
                tmp_path / "ray",
                amortized=CorpusHead(head),
                chunk_size=2,
                engine="ray",
                num_workers=1,
                **QUIET,
            )
        finally:
            ray.shutdown()
    assert dist.complete and dist.manifest["amortized"] == local.manifest["amortized"]
    assert dist.failures()["id"].tolist() == ["r1"]
    a, b = (r.positions().sort_values(["id", "position"]).reset_index(drop=True) for r in (local, dist))
    assert len(a) == len(b) > 0
    # tol: float32 hidden states: Ray's workers batch the texts otherwise than the local engine
    np.testing.assert_allclose(a["lin"], b["lin"], atol=1e-5)
    cols = ["id", "method", "ood", "model_evaluations"]
    assert local.texts().sort_values("id")[cols].values.tolist() == dist.texts().sort_values("id")[cols].values.tolist()
