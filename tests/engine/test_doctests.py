"""The examples in the docstrings of the engine core and both adapters run and print what
they show, and every public function or class has one."""

import doctest
import importlib
import inspect
import pkgutil

import pytest
import slalom_core

import captum_slalom
import shap_slalom

PACKAGES = (slalom_core, captum_slalom, shap_slalom)
try:  # an optional extra (in dev): its examples are checked where it is installed
    import inseq_slalom

    PACKAGES += (inseq_slalom,)
except ImportError:
    pass
MODULES = sorted(
    f"{pkg.__name__}.{m.name}"
    for pkg in PACKAGES
    for m in pkgutil.iter_modules(pkg.__path__)
    if m.name != "experiments"
)
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def _run(name: str) -> doctest.TestResults:
    module = importlib.import_module(name)
    return doctest.testmod(module, optionflags=FLAGS, report=True, verbose=False)


@pytest.mark.parametrize("name", MODULES)
def test_module_examples_run(name):
    result = _run(name)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples in {name} failed (see the output)"


def test_examples_are_not_all_skipped():
    # +SKIP examples count as not attempted: most examples must really run.
    attempted = sum(_run(name).attempted for name in MODULES)
    assert attempted >= 40, attempted


def test_public_api_documented_with_an_example():
    missing = []
    for pkg in PACKAGES:
        for name in pkg.__all__:
            obj = getattr(pkg, name)
            is_warning = inspect.isclass(obj) and issubclass(obj, Warning)
            if (inspect.isfunction(obj) or inspect.isclass(obj)) and not is_warning:
                if ">>>" not in (inspect.getdoc(obj) or ""):
                    missing.append(f"{pkg.__name__}.{name}")
    assert missing == []
