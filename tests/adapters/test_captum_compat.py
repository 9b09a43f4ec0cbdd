"""Captum's private names come through one module, with a tested version range and a pin."""

import ast
import configparser
import subprocess
import sys
from pathlib import Path

import captum
import pytest

import captum_slalom
from captum_slalom import _compat

ADAPTER = Path(captum_slalom.__file__).parent
ROOT = ADAPTER.parent


def test_installed_captum_is_in_the_supported_range():
    assert _compat.is_supported(captum.__version__), (captum.__version__, _compat.SUPPORTED_TEXT)


@pytest.mark.parametrize(
    "version, ok", [("0.8.0", True), ("0.9.1", True), ("0.7.9", False), ("0.10.0", False), ("1.0.0", False)]
)
def test_range_bounds(version, ok):
    assert _compat.is_supported(version) is ok


def test_setup_pins_captum_to_the_supported_range():
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    for extra in ("captum", "dev"):
        pins = [r.strip() for r in cfg["options.extras_require"][extra].splitlines() if r.strip().startswith("captum")]
        assert pins == [f"captum{_compat.SUPPORTED_TEXT}"], extra


def test_only_the_compat_module_imports_captum_private_names():
    private = []
    for path in sorted(ADAPTER.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            for name in names:
                if name.startswith("captum") and any(p.startswith("_") for p in name.split(".")):
                    private.append(f"{path.name}:{node.lineno} {name}")
    assert private and all(p.startswith("_compat.py:") for p in private), private


def test_captum_outside_the_range_warns_naming_it():
    # A stand-in captum of version 0.99 (the private names still there): a warning, not an error.
    code = (
        "import warnings, captum; captum.__version__ = '0.99.0'; warnings.simplefilter('error')\n"
        "try:\n    import captum_slalom._compat\nexcept UserWarning as w:\n    print(w)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "captum 0.99.0 is outside the range" in out.stdout and _compat.SUPPORTED_TEXT in out.stdout
