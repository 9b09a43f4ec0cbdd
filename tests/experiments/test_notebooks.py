"""Executes the engine's notebooks top to bottom with small settings (offline)."""

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"

# Text each notebook must print when it ran through (besides having no error output).
EXPECTED_OUTPUT = {
    "quickstart.ipynb": ("held-out R²", "Spearman(lin eff-slope, lin fidel)"),
    "paper_synthetic.ipynb": ("(linear: 1.5)", "SLALOM lowest held-out MSE for every model:", "Spearman(s)"),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(EXPECTED_OUTPUT))
def test_notebook_executes(name, monkeypatch):
    monkeypatch.setenv("SLALOM_NOTEBOOK_SMALL", "1")
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()
    outputs = "".join(
        o.get("text", "")
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
        if o.get("output_type") == "stream"
    )
    for expected in EXPECTED_OUTPUT[name]:
        assert expected in outputs
    errors = [
        o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.get("output_type") == "error"
    ]
    assert not errors
