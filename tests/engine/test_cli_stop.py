"""A clean stop of ``slalom-xai explain``: Ctrl-C ends with one line (what was kept, the command
that resumes) and exit status 130, and that command finishes the run; a rerun into a folder
that holds results is refused at once, before the data are scanned or the model loads."""

from __future__ import annotations

import shlex
import time

import pytest
from slalom_core.cli import command, corpus
from slalom_core.cli.command import main
from slalom_core.corpus import CorpusRun, store
from slalom_core.corpus.source import CorpusSource
from tiny_models import write_jsonl

pytest.importorskip("pyarrow")

TEXTS = ["a wonderful film", "dull", "the plot was thin", "great acting", "i loved it", "too long"]


def test_ctrl_c_ends_with_one_line_and_the_command_that_resumes(tmp_path, monkeypatch, capsys):
    data, out = write_jsonl(tmp_path / "c.jsonl", TEXTS), tmp_path / "run"
    argv = ["explain", "--data", str(data), "--out", str(out), "--n-samples", "40", "--chunk-size", "2"]
    written = store.write_chunk

    def stop_after_the_first_chunk(*args, **kwargs):
        if store.markers(out):  # the explain stage, a chunk later: as if the user pressed Ctrl-C
            raise KeyboardInterrupt
        return written(*args, **kwargs)

    monkeypatch.setattr(store, "write_chunk", stop_after_the_first_chunk)
    assert main([*argv, "--no-progress"]) == 130
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("slalom-xai explain: stopped (Ctrl-C); 2 texts explained and kept in")
    resume = lines[0].split("to continue: ", 1)[1]
    assert resume.startswith("slalom-xai explain ") and resume.endswith("--resume")
    monkeypatch.setattr(store, "write_chunk", written)
    assert main(shlex.split(resume)[1:]) == 0
    assert sorted(CorpusRun(out).texts()["id"]) == [f"r{i}" for i in range(len(TEXTS))]


def test_other_commands_stop_with_one_line_too(monkeypatch, capsys):
    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(command, "build_parser", lambda _: _Parser(interrupted))
    assert main(["report", "runs/r"]) == 130
    assert capsys.readouterr().err == "slalom-xai report: stopped (Ctrl-C)\n"


class _Parser:
    def __init__(self, func) -> None:
        self.func = func

    def parse_args(self, argv):
        import argparse

        return argparse.Namespace(command=argv[0], func=self.func)


def test_a_folder_with_results_is_refused_before_the_data_scan_and_the_model_load(tmp_path, monkeypatch, capsys):
    data, out = write_jsonl(tmp_path / "c.jsonl", TEXTS), tmp_path / "full"
    (out / "texts").mkdir(parents=True)
    (out / "texts" / "part-0.parquet").write_bytes(b"results of an earlier run")

    def loaded(*args, **kwargs):
        raise AssertionError("the data were scanned or the model loaded before the output folder was checked")

    monkeypatch.setattr(corpus, "load_pair", loaded)
    monkeypatch.setattr(CorpusSource, "scan", loaded)
    start = time.perf_counter()
    assert main(["explain", "--data", str(data), "--out", str(out)]) == 2
    seconds = time.perf_counter() - start
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "exists and is not empty" in err and "--resume" in err
    assert seconds < 5, seconds  # the imports are done: this is the check alone
