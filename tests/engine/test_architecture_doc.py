"""docs/architecture.md against the tree: every file it names exists, every module of the
engine is named in it, and each "where to add" names rooms and names that are there."""

import re
from pathlib import Path

import slalom_core

CORE = Path(slalom_core.__file__).resolve().parent
ROOT = CORE.parent
DOC = ROOT / "docs" / "architecture.md"
#: Files every package has, named by the layout rather than by the doc.
PLUMBING = {"__init__.py"}


def _engine_modules() -> list[str]:
    """Every module of the engine (not the harness), as a path under shared/."""
    return sorted(
        p.relative_to(CORE).as_posix()
        for p in CORE.rglob("*.py")
        if p.name not in PLUMBING and "experiments" not in p.relative_to(CORE).parts
    )


def _sections(text: str) -> list[tuple[str, list[str]]]:
    """(heading, lines) of each part of the doc, the part before the first heading too."""
    out: list[tuple[str, list[str]]] = [("", [])]
    for line in text.splitlines():
        if line.startswith("#"):
            out.append((line, []))
        else:
            out[-1][1].append(line)
    return out


def named_modules(text: str) -> set[str]:
    """The engine modules a doc names: a path (``corpus/store.py``), or a file name on a
    line or under a heading that names its folder (``| corpus | `corpus/` | `run.py` ...``)."""
    found = set()
    modules = _engine_modules()
    for heading, lines in _sections(text):
        for line in [heading, *lines]:
            for module in modules:
                folder, _, name = module.rpartition("/")
                if module in line and re.search(rf"(?<![\w/]){re.escape(module)}", line):
                    found.add(module)
                elif f"`{name}`" in line and (
                    not folder or f"`{folder}/`" in line or f"`{folder}/`" in heading or f"{folder}/" in line
                ):
                    found.add(module)
    return found


def named_files(text: str) -> set[str]:
    """Every ``name.py`` or ``path/name.py`` the doc puts in backticks."""
    return set(re.findall(r"`([\w/]+\.py)`", text))


def test_every_file_the_doc_names_exists():
    text = DOC.read_text(encoding="utf-8")
    names = named_files(text)
    assert len(names) > 40
    # Named by path from the repository (tests, adapters) or from the engine's folder.
    rooms = ("shared", "captum_slalom", "shap_slalom", "inseq_slalom", "tests", "notebooks")
    tree = [p.relative_to(ROOT).as_posix() for d in rooms for p in (ROOT / d).rglob("*.py")]
    tree += [p.relative_to(CORE).as_posix() for p in CORE.rglob("*.py")]
    missing = sorted(n for n in names if not any(t == n or t.endswith("/" + n) for t in tree))
    assert missing == []


def test_every_engine_module_is_named():
    text = DOC.read_text(encoding="utf-8")
    assert sorted(set(_engine_modules()) - named_modules(text)) == []


def test_the_module_check_reads_folders_from_lines_and_headings():
    text = "| corpus | `corpus/` | `run.py` (runs) |\n### `api/`: the driver\n| `rows.py` | rows |\n"
    found = named_modules(text)
    assert {"corpus/run.py", "api/rows.py"} <= found
    assert "corpus/rows.py" not in found  # rows.py is named under api/, not corpus/


def test_where_to_add_names_what_is_there():
    import slalom_core as sc
    from slalom_core.amortized import CorpusHead
    from slalom_core.corpus import EXPORTERS, export_run  # noqa: F401 - the export seam
    from slalom_core.corpus.protocol import ChunkExplainerSource
    from slalom_core.fitting import FITTERS

    text = DOC.read_text(encoding="utf-8")
    where = text[text.index("## Where to add") :]
    for name in (
        "FITTERS",
        "register_score",
        "TorchModel",
        "ModelAdapter",
        "EXPORTERS",
        "CorpusRun",
        "ChunkExplainerSource",
    ):
        assert f"{name}" in where, name
    assert FITTERS and callable(sc.register_score) and {"csv", "jsonl"} <= set(EXPORTERS)
    assert isinstance(CorpusHead("heads/x"), ChunkExplainerSource)
    # The corpus writes its tables in one place: no engine writes Parquet itself. The one
    # other writer is the dataset export, whose shards are a dataset to share, never a run's table.
    writers = sorted(
        p.relative_to(CORE).as_posix()
        for p in (CORE / "corpus").glob("*.py")
        if re.search(r"\bpq\.write_table|\.to_parquet\(|ParquetWriter\(", p.read_text())
    )
    assert writers == ["corpus/export.py", "corpus/store.py"]
    # Readers of a finished run go through CorpusRun: only stored.py calls store's readers.
    readers = sorted(
        p.relative_to(CORE).as_posix()
        for p in CORE.rglob("*.py")
        if "experiments" not in p.parts and re.search(r"store\.read_(parts|table)\(", p.read_text())
    )
    assert readers == ["corpus/stored.py"]
