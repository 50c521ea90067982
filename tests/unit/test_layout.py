"""The layout of provision/, read from its own source with `ast` (scripts/import_graph.py): imports
point one way between folders, files stay small, and an import inside a function says why."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import import_graph  # noqa: E402  (scripts/ is not a package)

MAX_LINES = 600


def test_no_import_cycle_spans_two_folders() -> None:
    graph = import_graph.read(ROOT / "provision")
    spanning = [
        sorted(cycle)
        for cycle in import_graph.file_cycles(graph)
        if len({import_graph.folder(m, graph.packages) for m in cycle}) > 1
    ]
    assert not spanning, f"import cycles across folders (module- or function-level): {spanning}"


def test_the_reader_sees_a_cycle_across_folders(tmp_path: Path) -> None:
    """The check above can fail: two folders importing each other, one of them in a function."""
    pkg = tmp_path / "provision"
    for folder in ("a", "b"):
        (pkg / folder).mkdir(parents=True)
        (pkg / folder / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "a" / "x.py").write_text("from provision.b.y import g\n")
    (pkg / "b" / "y.py").write_text("def g():\n    from provision.a import x\n    return x\n")
    graph = import_graph.read(pkg)
    cycles = import_graph.file_cycles(graph)
    assert [sorted(c) for c in cycles] == [["provision.a.x", "provision.b.y"]]
    assert [i.in_function for i in graph.imports if i.source == "provision.b.y"] == [True, True]


def test_no_file_in_provision_is_over_600_lines() -> None:
    long = {
        str(p.relative_to(ROOT)): n
        for p in sorted((ROOT / "provision").rglob("*.py"))
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert not long, f"split along their seams (at most {MAX_LINES} lines): {long}"


def test_an_import_inside_a_function_outside_cli_says_why() -> None:
    """cli/ defers imports for start-up time as a rule; elsewhere each one carries its reason
    (start-up time, an optional dependency, a value looked up per call) as a comment on its
    line or right above it."""
    graph = import_graph.read(ROOT / "provision")
    silent = sorted(
        {
            f"{i.source}:{i.line}"
            for i in graph.imports
            if i.in_function and import_graph.top(i.source) != "cli" and not i.comment
        }
    )
    assert not silent, f"imports inside functions without a comment saying why: {silent}"
