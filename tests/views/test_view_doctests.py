"""The examples in the views' docstrings run (the engine's doctest test reads top-level modules only)."""

import doctest
import importlib
import pkgutil

import pytest
import slalom_core.views

MODULES = sorted(f"slalom_core.views.{m.name}" for m in pkgutil.iter_modules(slalom_core.views.__path__))


@pytest.mark.parametrize("name", MODULES)
def test_view_examples_run(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS, report=True)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples in {name} failed"
