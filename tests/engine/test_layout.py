"""The engine core stands apart: it never imports the harness, Captum or SHAP, not even lazily."""

import ast
import importlib.util
import io
import tokenize
from pathlib import Path

import pytest
import slalom_core

import captum_slalom
import shap_slalom

CORE = Path(slalom_core.__file__).resolve().parent
FORBIDDEN = ("captum", "shap", "inseq", "captum_slalom", "shap_slalom", "inseq_slalom", "slalom_core.experiments")


def _core_files() -> list[Path]:
    """Every file of the engine core: the package but its harness (experiments/)."""
    return sorted(p for p in CORE.rglob("*.py") if "experiments" not in p.relative_to(CORE).parts)


def _imported_modules(path: Path, package: tuple[str, ...] = ("slalom_core",)) -> list[tuple[int, str]]:
    """Every module an ``import`` statement anywhere in the file names (function bodies too),
    with relative imports resolved against ``package`` (the file's own package)."""
    out = []
    tree = ast.parse(path.read_text(), filename=str(path))
    # Imports under ``if TYPE_CHECKING:`` count too: they never run, but an annotation that
    # names a higher layer is a reader's arrow up all the same (farm-studio draws it).
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                base = node.module or ""
            else:
                # Level 1 is the file's own package, each further level one up.
                parent = list(package[: max(0, len(package) + 1 - node.level)])
                base = ".".join(parent + ([node.module] if node.module else []))
            # ``from . import experiments`` names the sub-package in the alias; then the
            # import is of the submodules alone, not of the package's __init__ (as
            # farm-studio reads it).
            subs = [f"{base}.{alias.name}" for alias in node.names]
            if not all(_is_core_module(m) for m in subs):
                out.append((node.lineno, base))
            out += [(node.lineno, m) for m in subs]
    return out + _imported_by_string(tree)


#: Functions that import a module named by a string.
STRING_IMPORTERS = ("import_module", "__import__")
#: Packages whose names a string may spell.
PROJECT_PACKAGES = ("slalom_core", "captum_slalom", "shap_slalom", "inseq_slalom", "captum", "shap", "inseq")


def _imported_by_string(tree: ast.AST) -> list[tuple[int, str]]:
    """Modules a file imports by name (``importlib.import_module("...")``): in a file that
    calls such a function, every string that spells a module of the project or of the
    adapters' hosts counts as imported, wherever it stands (a table of names, a constant)."""
    calls = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and getattr(n.func, "attr", getattr(n.func, "id", None)) in STRING_IMPORTERS
    ]
    if not calls:
        return []
    return [
        (n.lineno, n.value)
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant)
        and isinstance(n.value, str)
        and any(n.value == p or n.value.startswith(p + ".") for p in PROJECT_PACKAGES)
        and all(part.isidentifier() for part in n.value.split("."))
    ]


def _is_core_module(module: str) -> bool:
    """Whether a dotted name is a module or package of the core's tree."""
    if module != "slalom_core" and not module.startswith("slalom_core."):
        return False
    where = CORE.joinpath(*module.split(".")[1:])
    return where.with_suffix(".py").exists() or (where / "__init__.py").exists()


def _package_of(path: Path) -> tuple[str, ...]:
    return ("slalom_core", *path.parent.relative_to(CORE).parts)


def _is_forbidden(module: str) -> bool:
    return any(module == f or module.startswith(f + ".") for f in FORBIDDEN)


def test_core_files_found():
    names = {str(p.relative_to(CORE).with_suffix("")) for p in _core_files()}
    assert {"surrogate", "scores", "link", "options", "explanation"} <= names
    assert {"api/driver", "api/call", "api/rows", "models/base", "models/torch_models"} <= names
    assert {"fitting/eff", "fitting/objective", "fitting/laplace", "corpus/run", "corpus/store"} <= names
    assert not any(n.startswith("experiments") for n in names)


#: The one place the core names the harness: ``slalom-xai bench`` / ``paper`` load it by
#: name when asked for (and say how to get it when it is absent).
HARNESS_LOADERS = {
    "cli/command.py": {
        "slalom_core.experiments",
        "slalom_core.experiments.bench_cli",
        "slalom_core.experiments.paper_cli",
    }
}


def test_core_imports_no_harness_captum_or_shap():
    bad = [
        f"{p.name}:{line} imports {mod}"
        for p in _core_files()
        for line, mod in _imported_modules(p, _package_of(p))
        if _is_forbidden(mod) and mod not in HARNESS_LOADERS.get(p.relative_to(CORE).as_posix(), ())
    ]
    assert bad == []


def test_string_imports_are_seen_and_spelled_out(tmp_path):
    # The walker reads imports by name, as the circle check must ...
    src = tmp_path / "probe.py"
    src.write_text('import importlib\nMODS = {"x": "slalom_core.corpus.run"}\nimportlib.import_module(MODS["x"])\n')
    assert (2, "slalom_core.corpus.run") in _imported_modules(src)
    # ... and the engine spells every such name out (no f-string a reader cannot follow).
    composed = []
    for path in _all_engine_files():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) in (
                STRING_IMPORTERS
            ):
                if node.args and isinstance(node.args[0], (ast.JoinedStr, ast.BinOp)):
                    composed.append(f"{path.relative_to(CORE)}:{node.lineno}")
    assert composed == []
    command = CORE / "cli" / "command.py"
    assert set(HARNESS_LOADERS["cli/command.py"]) <= {m for _, m in _imported_modules(command)}


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
    assert "slalom_core.experiments.bench" in found and "slalom_core.fitting.objective" in found
    assert _is_forbidden("slalom_core.experiments.bench")


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


# -- the layout fence: small rooms, no circles, no borrowed privates -----------------------
# inseq_slalom is found without being imported (importing it imports inseq, an optional extra).
ADAPTERS = [
    Path(captum_slalom.__file__).parent,
    Path(shap_slalom.__file__).parent,
    Path(importlib.util.find_spec("inseq_slalom").origin).parent,
]
#: Code lines (no docstrings, comments or blank lines) a file of each layer may hold.
CORE_LIMIT, ADAPTER_LIMIT = 300, 300


def _counted_lines(source: str) -> set[int]:
    """The line numbers :func:`code_lines` counts."""
    tree = ast.parse(source)
    docs: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body:
            first = body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                docs.update(range(first.lineno, first.end_lineno + 1))
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER}
    lines: set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type not in skip:
            lines.update(n for n in range(tok.start[0], tok.end[0] + 1) if n not in docs)
    return lines


def code_lines(source: str) -> int:
    """Lines holding code: docstrings, comments and blank lines are not counted."""
    return len(_counted_lines(source))


def test_code_line_count_ignores_docstrings_comments_and_blank_lines():
    src = 'def f():\n    """Doc.\n\n    More."""\n    # why\n\n    x = (1,\n         2)\n    return x\n'
    assert code_lines(src) == 4  # def, the two lines of x, return


@pytest.mark.parametrize(
    "files, limit",
    [(_core_files, CORE_LIMIT), (lambda: sorted(p for d in ADAPTERS for p in d.rglob("*.py")), ADAPTER_LIMIT)],
    ids=["core", "adapters"],
)
def test_every_file_is_one_room_of_bounded_size(files, limit):
    big = {str(p): n for p in files() if (n := code_lines(p.read_text())) > limit}
    assert big == {}, f"files over {limit} code lines: split them by concern"


# -- the function fence: orchestrators as named stages, no function over FUNCTION_LIMIT ------
#: Code lines (as :func:`code_lines` counts them, from ``def`` to the function's last line;
#: a nested function counts inside its parent) a function of the core may hold: a longer one
#: is split into named private stages (as sklearn's ``_solve_*``), each of one concern.
FUNCTION_LIMIT = 60

#: Functions allowed over the limit while a change shortens them (none now); the fence fails
#: on a listed function that is already within the limit, so the list cannot go stale.
PENDING: set[str] = set()


def function_code_lines(source: str) -> dict[str, int]:
    """``name`` (``Class.name`` for a method, ``outer.inner`` nested) -> its code lines: the
    lines from ``def`` to its end that :func:`code_lines` counts (no docstring, comment or
    blank line), nested functions' lines included in their parent's."""
    tree = ast.parse(source)
    lines = _counted_lines(source)
    out: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = prefix + child.name
                # Same-named definitions (a property's getter and setter) keep the longest.
                n = sum(1 for k in range(child.lineno, child.end_lineno + 1) if k in lines)
                out[name] = max(n, out.get(name, 0))
                visit(child, name + ".")
            elif isinstance(child, ast.ClassDef):
                visit(child, prefix + child.name + ".")
            else:
                visit(child, prefix)

    visit(tree, "")
    return out


def test_function_code_lines_count_nested_functions_in_their_parent():
    src = (
        "class A:\n"
        "    def m(self):\n"
        '        """Doc."""\n'
        "        # why\n"
        "        def inner():\n"
        '            """Inner doc."""\n'
        "            return 1\n"
        "\n"
        "        return inner()\n"
        "def f(\n"
        "    x,\n"
        "):\n"
        "    return x\n"
    )
    # A.m: def, def inner, return 1, return inner(); f: the signature's three lines and return.
    assert function_code_lines(src) == {"A.m": 4, "A.m.inner": 2, "f": 4}
    assert code_lines(src) == 1 + sum(function_code_lines(src)[k] for k in ("A.m", "f"))  # + class A


def test_no_core_function_is_over_the_limit():
    # (file:function as PENDING names it, qualified name, code lines) of every function.
    sizes = [
        (f"{p.relative_to(CORE).as_posix()}:{name.split('.')[-1]}", name, n)
        for p in _core_files()
        for name, n in function_code_lines(p.read_text()).items()
    ]
    over = [(key, name, n) for key, name, n in sizes if n > FUNCTION_LIMIT]
    unlisted = sorted(f"{key.partition(':')[0]}:{name} ({n})" for key, name, n in over if key not in PENDING)
    assert unlisted == [], f"functions over {FUNCTION_LIMIT} code lines: split them into named private stages"
    stale = sorted(PENDING - {key for key, _, _ in over})
    assert stale == [], "PENDING names functions within the limit (or gone): take them off the list"


def _module_name(path: Path) -> str:
    parts = path.relative_to(CORE).with_suffix("").parts
    return ".".join(("slalom_core", *(parts[:-1] if parts[-1] == "__init__" else parts)))


def _import_graph(files: list[Path]) -> dict[str, set[str]]:
    """module -> project modules it imports (a ``from pkg import name`` of a submodule
    counts as importing that submodule; of anything else, the package itself, whose
    ``__init__`` is a node like any module: importing through it imports what it imports)."""
    known = {_module_name(p): p for p in files}
    graph: dict[str, set[str]] = {}
    for name, path in known.items():
        pkg = tuple(name.split(".")) if path.name == "__init__.py" else tuple(name.split(".")[:-1])
        edges = set()
        for _, mod in _imported_modules(path, pkg):
            while mod and mod not in known:
                mod = mod.rpartition(".")[0]  # a name inside a module: the module
            if mod and mod != name:
                edges.add(mod)
        graph[name] = edges
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _all_engine_files() -> list[Path]:
    return sorted(CORE.rglob("*.py"))


def test_no_import_circles_between_modules():
    # Package __init__ files are nodes: "a imports the package that holds b, b imports a"
    # is a circle, as `farm-studio look` draws it; imports by string and under
    # TYPE_CHECKING count too (an annotation that names a higher layer looks up).
    graph = _import_graph(_all_engine_files())
    assert _cycles(graph) == []


def test_the_circle_check_sees_imports_through_a_package_init(tmp_path):
    # corpus/run.py -> amortized/__init__ -> amortized/explainer -> corpus/__init__ -> corpus/run
    root = tmp_path / "slalom_core"
    files = {
        "__init__.py": "",
        "corpus/__init__.py": "from .run import explain_corpus\n",
        "corpus/run.py": "def explain_corpus():\n    from ..amortized import AmortizedExplainer\n",
        "amortized/__init__.py": "from .explainer import AmortizedExplainer\n",
        "amortized/explainer.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..corpus import CorpusRun\n",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    graph = _import_graph_under(root)
    assert _cycles(graph) == [
        ["slalom_core.amortized", "slalom_core.amortized.explainer", "slalom_core.corpus", "slalom_core.corpus.run"]
    ]


def _import_graph_under(root: Path) -> dict[str, set[str]]:
    """:func:`_import_graph` of a tree laid out as the core (for the check's own test)."""
    global CORE
    saved, CORE = CORE, root
    try:
        return _import_graph(sorted(root.rglob("*.py")))
    finally:
        CORE = saved


def test_the_circle_check_finds_a_circle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_module_imports_another_modules_private_names():
    bad = []
    for path in _all_engine_files():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.level > 0 or (node.module or "").startswith("slalom_core")):
                privates = [a.name for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
                if privates:
                    bad.append(f"{path.relative_to(CORE)}:{node.lineno} imports {privates} from {node.module}")
    assert bad == []


def test_every_package_is_installed():
    # setup.cfg lists packages by name: a new room missing there works in an editable
    # install and is absent from a wheel.
    import configparser

    cfg = configparser.ConfigParser()
    cfg.read(CORE.parent / "setup.cfg")
    listed = set(cfg["options"]["packages"].split())
    found = {_module_name(p) for p in CORE.rglob("__init__.py")}
    found |= {d.name for d in ADAPTERS}
    # The harness stays out of the wheel (tests/engine/test_packaging.py); all else is in.
    harness = {m for m in found if m == "slalom_core.experiments" or m.startswith("slalom_core.experiments.")}
    assert harness and found - harness - listed == set()


def test_the_product_command_does_not_import_the_harness():
    import subprocess
    import sys

    code = (
        "import sys; from slalom_core.cli.command import build_parser; build_parser('explain'); "
        "print(sorted(m for m in sys.modules if m.startswith('slalom_core.experiments')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# -- the run folder's room: one module renames files over others and names the manifest ----
#: The one module that writes files in place (temp file, then ``os.replace``) and names a
#: corpus run's manifest.
FILES_ROOM = "files.py"


def _docstring_nodes(tree: ast.AST) -> set[int]:
    """ids of the string constants that are docstrings (prose may name the manifest)."""
    found = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body:
            first = body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def _file_writes_outside_the_room(path: Path) -> list[str]:
    """Where a file calls ``os.replace``/``os.rename`` (or imports them) or spells ``manifest.json``."""
    tree = ast.parse(path.read_text())
    docs = _docstring_nodes(tree)
    bad = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and node.attr in ("replace", "rename")
            and isinstance(node.value, ast.Name)
            and node.value.id == "os"
        ):
            bad.append(f"{path.name}:{node.lineno} os.{node.attr}")
        elif isinstance(node, ast.ImportFrom) and node.module == "os":
            bad += [
                f"{path.name}:{node.lineno} from os import {a.name}"
                for a in node.names
                if a.name in ("replace", "rename")
            ]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            if "manifest.json" in node.value:
                bad.append(f"{path.name}:{node.lineno} names manifest.json")
    return bad


def test_only_the_files_room_replaces_files_or_names_the_manifest():
    bad = [
        hit
        for p in _core_files()
        if p.relative_to(CORE).as_posix() != FILES_ROOM
        for hit in _file_writes_outside_the_room(p)
    ]
    assert bad == [], "write through slalom_core.files (replace_with, write_json, the manifest's functions)"


def test_the_files_fence_sees_replaces_and_the_manifest(tmp_path):
    src = tmp_path / "probe.py"
    src.write_text(
        '"""Writes manifest.json (prose may say so)."""\nimport os\nfrom os import replace\n'
        'def f(a, b):\n    os.replace(a, b)\n    return f"{a}/manifest.json"\n'
    )
    found = _file_writes_outside_the_room(src)
    assert [h.split(" ", 1)[1] for h in found] == ["from os import replace", "os.replace", "names manifest.json"]
    assert (CORE / FILES_ROOM).exists() and _file_writes_outside_the_room(CORE / FILES_ROOM)
