"""An amortized head's files: never written over a user's files, checked when read.

Each case was found by the hidden suite of issue 41 (the head's command line and files):
the command wrote a head into the model's folder, emptied its own input, trained heads of
no epochs or no width, and loaded swapped, cut, foreign or NaN weights without a word.
"""

import hashlib
import json
import warnings

import pytest
import torch
from slalom_core.amortized import AmortizedExplainer
from slalom_core.cli.command import main
from slalom_core.cli.corpus import load_pair
from slalom_core.corpus import explain_corpus
from tiny_models import SHORT_REVIEWS, bert_tokenizer, tiny_classifier, write_jsonl

pytest.importorskip("pyarrow")
safetensors = pytest.importorskip("safetensors.torch")


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """A tiny model saved in a folder (as a user's model is), a run of it and two heads."""
    tmp = tmp_path_factory.mktemp("amortized-files")
    tok = bert_tokenizer(tmp)
    model = tiny_classifier("bert", tok, initializer_range=0.2)
    folder = tmp / "model"
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    # The model as the command line loads it (its fingerprint is the folder's).
    model, tok = load_pair(str(folder))
    data = write_jsonl(tmp / "train.jsonl", SHORT_REVIEWS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = explain_corpus(model, data, tmp / "run", tok, n_samples=100, show_progress=False)
        head = AmortizedExplainer(model, tok, epochs=3, hidden=8).fit(run).save(tmp / "head")
        other = AmortizedExplainer(model, tok, epochs=3, hidden=8, seed=1).fit(run).save(tmp / "other")
    return {"model": model, "tok": tok, "folder": folder, "data": data, "run": run.path, "head": head, "other": other}


def snapshot(folder):
    """Every file under a folder with its bytes."""
    return {p.relative_to(folder): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def amortize(setup, *extra):
    return main(["amortize", str(setup["run"]), "--model", str(setup["folder"]), *extra])


def test_amortize_refuses_to_write_into_the_models_folder(setup, capsys):
    before = snapshot(setup["folder"])
    assert amortize(setup, "--out", str(setup["folder"]), "--epochs", "1") != 0
    assert "model's folder" in capsys.readouterr().err
    assert snapshot(setup["folder"]) == before
    # Nor a folder inside it, nor the run it reads.
    assert amortize(setup, "--out", str(setup["folder"] / "heads"), "--epochs", "1") != 0
    assert not (setup["folder"] / "heads").exists()
    run_before = snapshot(setup["run"])
    assert amortize(setup, "--out", str(setup["run"]), "--epochs", "1") != 0
    assert snapshot(setup["run"]) == run_before


def test_save_refuses_a_folder_it_did_not_write(setup, tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "config.json").write_text('{"a user": "file"}')
    (mine / "notes.txt").write_text("keep me")
    explainer = AmortizedExplainer.load(setup["head"], setup["model"], setup["tok"])
    with pytest.raises(FileExistsError, match="notes.txt"):
        explainer.save(mine)
    assert (mine / "config.json").read_text() == '{"a user": "file"}'
    # A folder holding only a head it wrote before is rewritten (save twice works).
    again = explainer.save(tmp_path / "again")
    assert explainer.save(again) == again


@pytest.mark.parametrize("command", ["explain-amortized", "explain"])
def test_out_equal_to_data_is_refused_before_touching_the_data(setup, tmp_path, command, capsys):
    data = write_jsonl(tmp_path / "new.jsonl", ["the movie was great", "a bad plot"])
    before = data.read_bytes()
    args = [command, "--amortized", str(setup["head"]), "--model", str(setup["folder"]), "--data", str(data)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        status = main([*args, "--out", str(data)])
    assert status != 0
    assert "--data" in capsys.readouterr().err
    assert data.read_bytes() == before


@pytest.mark.parametrize("option", ["--epochs", "--hidden"])
def test_no_epochs_or_no_width_is_refused(setup, tmp_path, option, capsys):
    out = tmp_path / "head"
    assert amortize(setup, "--out", str(out), option, "0") != 0
    err = capsys.readouterr().err
    assert option.lstrip("-") in err and "at least 1" in err
    assert not out.exists()
    with pytest.raises(ValueError, match=f"{option.lstrip('-')} must be"):
        AmortizedExplainer(setup["model"], setup["tok"], **{option.lstrip("-"): 0})


def copy_head(src, dst):
    dst.mkdir()
    for name in ("config.json", "head.safetensors"):
        (dst / name).write_bytes((src / name).read_bytes())
    return dst


def test_the_config_holds_a_digest_of_the_weights(setup):
    config = json.loads((setup["head"] / "config.json").read_text())
    weights = (setup["head"] / "head.safetensors").read_bytes()
    assert config["weights_sha256"] == hashlib.sha256(weights).hexdigest()


def test_a_swapped_weights_file_is_refused_naming_it(setup, tmp_path):
    swapped = copy_head(setup["head"], tmp_path / "swapped")
    (swapped / "head.safetensors").write_bytes((setup["other"] / "head.safetensors").read_bytes())
    with pytest.raises(ValueError, match=r"head\.safetensors.*(digest|sha256)"):
        AmortizedExplainer.load(swapped, setup["model"], setup["tok"])


@pytest.mark.parametrize("damage", ["truncated", "foreign", "config"])
def test_cut_or_foreign_files_give_an_error_naming_the_file(setup, tmp_path, damage):
    head = copy_head(setup["head"], tmp_path / "head")
    config = json.loads((head / "config.json").read_text())
    if damage == "truncated":
        weights = (head / "head.safetensors").read_bytes()
        (head / "head.safetensors").write_bytes(weights[: len(weights) // 2])
        config.pop("weights_sha256")  # as a head saved before digests: the read itself must fail clearly
        name = "head.safetensors"
    elif damage == "foreign":
        safetensors.save_file({"something": torch.zeros(3)}, str(head / "head.safetensors"))
        config["weights_sha256"] = hashlib.sha256((head / "head.safetensors").read_bytes()).hexdigest()
        name = "head.safetensors"
    else:
        (head / "config.json").write_text('{"format": "slalom-amortized/1", "head": ')
        name = "config.json"
    if damage != "config":
        (head / "config.json").write_text(json.dumps(config))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match=name.replace(".", r"\.")):
            AmortizedExplainer.load(head, setup["model"], setup["tok"])


def test_nan_weights_are_refused_at_load_and_at_save(setup, tmp_path):
    head = copy_head(setup["head"], tmp_path / "nan")
    tensors = safetensors.load_file(str(head / "head.safetensors"))
    tensors["layer_logits"] = torch.full_like(tensors["layer_logits"], float("nan"))
    safetensors.save_file(tensors, str(head / "head.safetensors"))
    config = json.loads((head / "config.json").read_text())
    config["weights_sha256"] = hashlib.sha256((head / "head.safetensors").read_bytes()).hexdigest()
    (head / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match=r"head\.safetensors.*not finite.*layer_logits"):
        AmortizedExplainer.load(head, setup["model"], setup["tok"])
    explainer = AmortizedExplainer.load(setup["head"], setup["model"], setup["tok"])
    with torch.no_grad():
        explainer.head.layer_logits.fill_(float("nan"))
    with pytest.raises(ValueError, match="not finite"):
        explainer.save(tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_diverged_training_is_refused_not_explained_with(setup, monkeypatch):
    from slalom_core.amortized import explainer as module

    real = module.train_head

    def diverged(*args, **kwargs):
        head, report = real(*args, **kwargs)
        with torch.no_grad():
            head.mlp[0].weight.fill_(float("nan"))
        return head, report

    monkeypatch.setattr(module, "train_head", diverged)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match="trained amortized head.*not finite"):
            AmortizedExplainer(setup["model"], setup["tok"], epochs=1, hidden=8).fit(setup["run"])


def test_every_amortized_option_has_help_text():
    from slalom_core.cli.command import build_parser

    sub = build_parser("amortize")._subparsers._group_actions[0].choices
    for command in ("amortize", "explain-amortized"):
        missing = [a.dest for a in sub[command]._actions if a.dest != "help" and not a.help]
        assert not missing, (command, missing)
    assert "deprecated" in sub["explain-amortized"].description.lower()
