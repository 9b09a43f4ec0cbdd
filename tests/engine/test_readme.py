"""The README as a newcomer follows it: its commands and code blocks run, as written, on the
packaged model, offline; blocks that cannot run here say why in their first line."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
#: The first line of a block the tests leave alone, with the reason after the colon.
NOT_RUN = "# not run by tests:"
#: The two commands a clone starts with, verbatim (the Makefile's entry points).
SET_UP = [
    "make demo   # creates .venv (CPU torch 2.13.0), installs, explains example sentences with the packaged MiniLM",
    "make test   # same install, then ruff (lint + format check) and the offline test suite (pytest)",
]
MAX_LINES = 250


def blocks(text: str) -> list[tuple[int, str, str]]:
    """Every fenced block: (line of its opening fence, language, code)."""
    out = []
    for m in re.finditer(r"^```(\w*)\n(.*?)^```$", text, flags=re.S | re.M):
        out.append((text[: m.start()].count("\n") + 1, m[1], m[2]))
    return out


def _runnable(language: str) -> list[tuple[int, str]]:
    text = README.read_text(encoding="utf-8")
    return [
        (line, code)
        for line, lang, code in blocks(text)
        if lang == language and not code.startswith(NOT_RUN) and code.strip().splitlines() != SET_UP
    ]


def test_block_parser_finds_fences_and_languages():
    text = "intro\n```python\nx = 1\n```\ntext\n```bash\nls\n```\n"
    assert blocks(text) == [(2, "python", "x = 1\n"), (6, "bash", "ls\n")]


def test_readme_starts_with_the_two_commands_and_stays_short():
    text = README.read_text(encoding="utf-8")
    first = blocks(text)[0]
    assert first[0] == 1 and first[1] == "bash" and first[2].strip().splitlines() == SET_UP
    assert len(text.splitlines()) <= MAX_LINES
    # Measured figures live in docs/results.md, linked once (no section numbers of it here).
    assert text.count("](docs/results.md)") == 1 and re.sub(r"\]\([^)]*\)", "]", text).count("results.md") == 1
    assert "§" not in text


def test_the_command_line_works_from_any_folder():
    # `.venv/bin/slalom-xai` works only from the clone's root; the activated venv (or an
    # install) puts `slalom-xai` on PATH wherever the reader is.
    text = README.read_text(encoding="utf-8")
    assert ".venv/bin/slalom-xai" not in text and "source .venv/bin/activate" in text
    assert "--model PATH" in text and "from_pretrained(" in text  # the reader's own model


def test_docs_speak_of_the_project_not_of_its_tracker():
    # A reader has no issue tracker: "issue 47" or "the setting" names nothing to them.
    for page in [README, *sorted((ROOT / "docs").glob("*.md"))]:
        found = re.findall(r"\b[Ii]ssue(?:s|'s)?\b(?: #?\d+)?|(?<![\w.])#\d+\b", page.read_text(encoding="utf-8"))
        assert not found, (page.name, found)


def test_readme_links_point_at_files_that_exist():
    text = README.read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)#]+)\)", text)
    assert targets
    missing = [t for t in targets if "://" not in t and not (ROOT / t).exists()]
    assert missing == []


def test_every_block_is_run_or_says_why_not():
    text = README.read_text(encoding="utf-8")
    for line, lang, code in blocks(text):
        assert lang in ("python", "bash"), f"README.md:{line}: a block without a language"
        if code.startswith(NOT_RUN):
            assert len(code.splitlines()[0]) > len(NOT_RUN) + 3, f"README.md:{line}: say why it is not run"
    assert len(_runnable("python")) >= 3 and len(_runnable("bash")) >= 1


def _offline_env() -> dict[str, str]:
    return {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "MPLBACKEND": "Agg"}


@pytest.mark.slow
def test_readme_python_blocks_run_in_order(tmp_path):
    # The blocks continue one another (the later ones use the first's model and tokenizer),
    # as a reader pastes them into one session: run them so, in one child interpreter.
    script = "\n".join(f"# README.md:{line}\n{code}" for line, code in _runnable("python"))
    out = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, env=_offline_env(), capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert (tmp_path / "review.json").exists() and (tmp_path / "review.html").exists()


@pytest.mark.slow
def test_readme_shell_blocks_run_in_a_fresh_folder(tmp_path):
    # `source .venv/bin/activate` puts the clone's command on PATH after `make demo`: here,
    # this environment's (the blocks run in a fresh folder, where no .venv is).
    activate = f"export PATH={shlex.quote(str(Path(sys.executable).parent))}:$PATH"
    for line, code in _runnable("bash"):
        script = "set -euo pipefail\n" + code.replace("source .venv/bin/activate", activate)
        out = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=_offline_env(), capture_output=True, text=True)
        assert out.returncode == 0, f"README.md:{line}: {out.stderr[-3000:]}"
    assert (tmp_path / "runs/reviews-site/index.html").exists()
