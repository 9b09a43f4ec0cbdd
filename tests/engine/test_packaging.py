"""The engine's wheel carries no harness; without it, ``bench`` and ``paper`` say how to get it."""

import configparser
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: A child interpreter in which ``slalom_core.experiments`` cannot be found, as after
#: ``pip install slalom-xai`` (the wheel), then the command line with the given words.
WITHOUT_HARNESS = """
import sys

class NoHarness:
    def find_spec(self, name, path=None, target=None):
        if name == "slalom_core.experiments" or name.startswith("slalom_core.experiments."):
            raise ModuleNotFoundError(name)
        return None

sys.meta_path.insert(0, NoHarness())
from slalom_core.cli.command import main
sys.exit(main(sys.argv[1:]))
"""


def _listed_packages() -> set[str]:
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    return set(cfg["options"]["packages"].split())


def test_setup_lists_no_harness_package():
    listed = _listed_packages()
    assert "slalom_core" in listed and "captum_slalom" in listed
    assert sorted(p for p in listed if p.startswith("slalom_core.experiments")) == []


@pytest.mark.parametrize("words", [["bench"], ["bench", "--help"], ["paper", "fig3", "--out", "x"]])
def test_harness_commands_without_the_harness_say_how_to_get_it(words):
    out = subprocess.run([sys.executable, "-c", WITHOUT_HARNESS, *words], capture_output=True, text=True)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "harness is not installed" in lines[0] and "make install" in lines[0]
    assert lines[0].startswith(f"slalom-xai {words[0]}: error:")


def test_product_commands_run_without_the_harness():
    out = subprocess.run([sys.executable, "-c", WITHOUT_HARNESS, "explain", "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "--data" in out.stdout


def test_harness_commands_with_the_harness_load_it():
    # This checkout is installed for development: the harness is there.
    out = subprocess.run(
        [sys.executable, "-m", "slalom_core.cli", "bench", "--help"], capture_output=True, text=True, cwd=ROOT
    )
    assert out.returncode == 0 and "--data" in out.stdout


def test_what_the_wheel_would_hold_has_no_harness(tmp_path):
    # ``build_py`` is the step of a wheel build that copies the packages (setup.cfg's list,
    # its package_dir and package_data) into the wheel's tree; it needs no network.
    subprocess.run(
        [sys.executable, "-c", "from setuptools import setup; setup()", "-q", "build_py", "--build-lib", str(tmp_path)],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    files = {p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file()}
    assert {"slalom_core/api/driver.py", "slalom_core/cli/command.py", "captum_slalom/__init__.py"} <= files
    assert any(f.startswith("slalom_core/packaged/weights/") for f in files)  # package_data came along
    assert sorted(f for f in files if f.startswith("slalom_core/experiments")) == []
