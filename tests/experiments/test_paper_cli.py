"""``slalom-xai paper``: argument parsing and one toy-size experiment through the real CLI."""

from __future__ import annotations

import csv

import pytest
from slalom_core import cli
from slalom_core.cli.command import build_parser
from slalom_core.experiments import paper_cli

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_parser_knows_every_experiment():
    parser = build_parser()
    for name in (*paper_cli.NAMES, "all"):
        args = parser.parse_args(["paper", name, "--out", "x"])
        assert args.experiment == name and args.func is paper_cli.run_paper
        assert args.seed == 0 and not args.small
    args = parser.parse_args(["paper", "fig9", "--out", "x", "--seed", "3", "--small"])
    assert args.seed == 3 and args.small
    with pytest.raises(SystemExit):
        parser.parse_args(["paper", "fig5", "--out", "x"])
    with pytest.raises(SystemExit):
        parser.parse_args(["paper", "fig3"])  # --out is required
    assert set(paper_cli.SMALL_SIZES) == set(paper_cli.NAMES)


def test_small_sizes_match_the_functions():
    import inspect

    experiments = paper_cli._experiments()
    for name, kwargs in paper_cli.SMALL_SIZES.items():
        params = inspect.signature(experiments[name]).parameters
        assert set(kwargs) <= set(params), name


def test_paper_fig3_small_writes_files(tmp_path, capsys):
    out = tmp_path / "fig3"
    assert cli.main(["paper", "fig3", "--out", str(out), "--small"]) == 0
    for name in ("fig3.png", "fig3.csv", "fig3.md"):
        assert (out / name).stat().st_size > 0
    with open(out / "fig3.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == paper_cli.SMALL_SIZES["fig3"]["k_max"]
    assert set(rows[0]) == {"k", "linear_truth", "ReLU net (counts) (L=1)", "BERT (L=1)"}
    printed = capsys.readouterr().out
    assert "| BERT (L=1) |" in printed and f"wrote {out / 'fig3.png'}" in printed


def test_table12_without_data_is_skipped(tmp_path, capsys):
    missing = tmp_path / "nope.jsonl"
    status = cli.main(["paper", "table12", "--out", str(tmp_path / "t12"), "--small", "--data", str(missing)])
    assert status == 1
    assert "skipped table12" in capsys.readouterr().err
    assert not (tmp_path / "t12").exists()
