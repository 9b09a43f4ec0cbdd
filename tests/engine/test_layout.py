"""The engine core stands apart: it never imports the harness, Captum or SHAP, not even lazily."""

import ast
from pathlib import Path

import slalom_core

CORE = Path(slalom_core.__file__).resolve().parent
FORBIDDEN = ("captum", "shap", "captum_slalom", "shap_slalom", "slalom_core.experiments")


# Sub-packages held to the core's rules (the harness, experiments/, is not): the fitting
# package, and the corpus runner, which the adapters use as they use the core.
CORE_PACKAGES = ("fitting", "corpus", "amortized")


def _core_files() -> list[Path]:
    files = list(CORE.glob("*.py"))
    for pkg in CORE_PACKAGES:
        files += CORE.joinpath(pkg).glob("*.py")
    return sorted(files)


def _imported_modules(path: Path, package: tuple[str, ...] = ("slalom_core",)) -> list[tuple[int, str]]:
    """Every module an ``import`` statement anywhere in the file names (function bodies too),
    with relative imports resolved against ``package`` (the file's own package)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                base = node.module or ""
            else:
                # Level 1 is the file's own package, each further level one up.
                parent = list(package[: max(0, len(package) + 1 - node.level)])
                base = ".".join(parent + ([node.module] if node.module else []))
            out.append((node.lineno, base))
            # ``from . import experiments`` names the sub-package in the alias.
            out += [(node.lineno, f"{base}.{alias.name}") for alias in node.names]
    return out


def _package_of(path: Path) -> tuple[str, ...]:
    return ("slalom_core", *path.parent.relative_to(CORE).parts)


def _is_forbidden(module: str) -> bool:
    return any(module == f or module.startswith(f + ".") for f in FORBIDDEN)


def test_core_files_found():
    names = {p.stem for p in _core_files()}
    assert {"api", "surrogate", "scores", "link", "models", "plots", "options"} <= names
    assert {"eff", "fidel", "ana", "objective", "solvers", "laplace"} <= names  # fitting/
    assert {"run", "rows", "source", "store", "summary", "ray_engine"} <= names  # corpus/
    assert "bench" not in names and "evaluation" not in names


def test_core_imports_no_harness_captum_or_shap():
    bad = [
        f"{p.name}:{line} imports {mod}"
        for p in _core_files()
        for line, mod in _imported_modules(p, _package_of(p))
        if _is_forbidden(mod)
    ]
    assert bad == []


def test_boundary_check_sees_lazy_and_relative_imports(tmp_path):
    # The walker must catch what a top-level-only check would miss.
    src = tmp_path / "probe.py"
    src.write_text("def f():\n    import shap\n    from .experiments import bench\n    from . import experiments\n")
    found = [m for _, m in _imported_modules(src)]
    assert "shap" in found and "slalom_core.experiments" in found
    assert sum(_is_forbidden(m) for m in found) >= 3
    # In a sub-package of the core, ``..experiments`` is the harness too.
    nested = tmp_path / "nested.py"
    nested.write_text("from ..experiments import bench\nfrom .objective import _pack\n")
    found = [m for _, m in _imported_modules(nested, ("slalom_core", "fitting"))]
    assert "slalom_core.experiments" in found and "slalom_core.fitting.objective" in found


def test_harness_calls_captum_and_shap_only_from_its_baselines():
    harness = CORE / "experiments"
    bad = []
    for path in sorted(harness.rglob("*.py")):
        if path.name == "baselines.py":
            continue
        for line, mod in _imported_modules(path):
            if any(mod == f or mod.startswith(f + ".") for f in ("captum", "shap")):
                bad.append(f"{path.relative_to(harness)}:{line} imports {mod}")
    assert bad == []
