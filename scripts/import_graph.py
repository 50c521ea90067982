"""The import graph of provision/, read from its own source with `ast` (nothing is imported).

    python3 scripts/import_graph.py            # the figures
    python3 scripts/import_graph.py --detail   # plus every cycle, edge up and function-level import

Nodes are the packages and top-level modules right under provision/ (`report`, `cli`,
`shell`...). A file-level edge is one `import` statement naming another provision module.
Layers come from the module-level imports only (a sink is layer 0, each node one above the
highest it imports; the nodes of one cycle share a layer); an edge points up when it reaches a
higher layer, function-level imports included. A cycle is a set of files (more than one) that
reach each other through module- or function-level imports. tests/unit/test_layout.py uses
the same functions.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "provision"


@dataclass(frozen=True)
class Import:
    source: str  # dotted module that imports
    target: str  # dotted provision module imported
    line: int
    in_function: bool
    comment: str  # the text after `#` on the import's line(s), '' if none


@dataclass
class Graph:
    modules: set[str] = field(default_factory=set)
    packages: set[str] = field(default_factory=set)
    imports: list[Import] = field(default_factory=list)


def module_name(path: Path, root: Path = ROOT) -> str:
    rel = path.relative_to(root.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve(current: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = current.split(".")
    if not is_package:
        base = base[:-1]
    if node.level > 1:
        base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _comment(lines: list[str], node: ast.stmt) -> str:
    """The comment on the import's own line(s), else the comment lines right above it."""
    end = getattr(node, "end_lineno", node.lineno) or node.lineno
    text = " ".join(lines[node.lineno - 1 : end])
    if "#" in text:
        return text.split("#", 1)[1].strip()
    above: list[str] = []
    i = node.lineno - 2
    while i >= 0 and lines[i].lstrip().startswith("#"):
        above.insert(0, lines[i].lstrip()[1:].strip())
        i -= 1
    return " ".join(above)


def _type_checking(tree: ast.AST) -> set[int]:
    """Import statements under `if TYPE_CHECKING:` (for annotations only: no runtime edge)."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.dump(node.test):
            for stmt in node.body:
                for sub in ast.walk(stmt):
                    if isinstance(sub, (ast.Import, ast.ImportFrom)):
                        out.add(id(sub))
    return out


def _function_lines(tree: ast.AST) -> set[int]:
    """Import statements (by id) that sit inside a function body."""
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for sub in ast.walk(node):
                if isinstance(sub, (ast.Import, ast.ImportFrom)):
                    inside.add(id(sub))
    return inside


def read(root: Path = ROOT) -> Graph:
    graph = Graph()
    files = sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts)
    for path in files:
        graph.modules.add(module_name(path, root))
        if path.name == "__init__.py":
            graph.packages.add(module_name(path, root))
    for path in files:
        name = module_name(path, root)
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text, filename=str(path))
        lines = text.splitlines()
        inside = _function_lines(tree)
        typing_only = _type_checking(tree)
        # a block of imports shares the comment above its first one
        block_comment: dict[int, str] = {}
        for node in sorted(
            (n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))), key=lambda n: n.lineno
        ):
            own = _comment(lines, node)
            prev = block_comment.get(node.lineno - 1)
            block_comment[getattr(node, "end_lineno", node.lineno) or node.lineno] = own or prev or ""
            block_comment[-node.lineno] = own or prev or ""
        for node in ast.walk(tree):
            targets: list[str] = []
            if id(node) in typing_only:
                continue
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(name, path.name == "__init__.py", node)
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    targets.append(sub if sub in graph.modules else base)
            else:
                continue
            for target in targets:
                while target and target not in graph.modules:
                    target = target.rpartition(".")[0]
                if not target.startswith("provision.") or target == name:
                    continue
                # importing a.b.c runs a/__init__ and a/b/__init__ first: edges to those too
                parents = target.split(".")
                chain = [".".join(parents[:k]) for k in range(2, len(parents))] + [target]
                for hop in chain:
                    if hop == name or (hop != target and hop not in graph.packages):
                        continue
                    if hop != target and name.startswith(hop + "."):
                        continue  # a parent of the importer itself: its __init__ already ran
                    imp = Import(name, hop, node.lineno, id(node) in inside, block_comment[-node.lineno])
                    graph.imports.append(imp)
    return graph


def top(module: str) -> str:
    """provision.report.render -> report; provision.shell -> shell."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def folder(module: str, packages: set[str]) -> str:
    """The folder a module's file sits in: provision.report.render -> provision.report."""
    return module if module in packages else module.rpartition(".")[0]


def strongly_connected(nodes: Iterable[str], edges: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's algorithm, iterative (the graph has hundreds of files)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[set[str]] = []
    counter = 0
    for start in sorted(nodes):
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                out.append(component)
    return out


def file_cycles(graph: Graph) -> list[set[str]]:
    edges: dict[str, set[str]] = defaultdict(set)
    for imp in graph.imports:
        edges[imp.source].add(imp.target)
    return [c for c in strongly_connected(graph.modules, edges) if len(c) > 1]


def layers(graph: Graph) -> dict[str, int]:
    """Layer of each top-level node from module-level imports (cycles share one layer)."""
    nodes = {top(m) for m in graph.modules if m != "provision"}
    edges: dict[str, set[str]] = defaultdict(set)
    for imp in graph.imports:
        a, b = top(imp.source), top(imp.target)
        if not imp.in_function and a != b and a in nodes and b in nodes:
            edges[a].add(b)
    components = strongly_connected(nodes, edges)
    owner = {n: i for i, comp in enumerate(components) for n in comp}
    level: dict[int, int] = {}
    for i, comp in enumerate(components):  # Tarjan emits sinks first
        below = [level[owner[b]] for n in comp for b in edges[n] if owner[b] != i]
        level[i] = 1 + max(below) if below else 0
    return {n: level[owner[n]] for n in nodes}


def figures(graph: Graph) -> dict[str, int]:
    layer = layers(graph)
    node_edges = {(top(i.source), top(i.target)) for i in graph.imports if top(i.source) != top(i.target)}
    up = {(a, b) for a, b in node_edges if a in layer and b in layer and layer[b] > layer[a]}
    cycles = file_cycles(graph)
    spanning = [c for c in cycles if len({folder(m, graph.packages) for m in c}) > 1]
    return {
        "files": len(graph.modules),
        "nodes (packages + top-level modules)": len(layer),
        "layers": 1 + max(layer.values()),
        "edges between nodes": len(node_edges),
        "edges pointing up a layer": len(up),
        "file cycles": len(cycles),
        "file cycles spanning two folders": len(spanning),
        "files in the largest cycle": max((len(c) for c in cycles), default=0),
        "import statements inside functions": len({(i.source, i.line) for i in graph.imports if i.in_function}),
        "  of them outside cli/": len(
            {(i.source, i.line) for i in graph.imports if i.in_function and top(i.source) != "cli"}
        ),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--detail", action="store_true", help="list cycles, edges up and function-level imports")
    args = parser.parse_args(argv)
    graph = read()
    for key, value in figures(graph).items():
        print(f"{key:40} {value}")
    if args.detail:
        layer = layers(graph)
        print("\nlayers:")
        for n in sorted(layer, key=lambda n: (layer[n], n)):
            print(f"  {layer[n]}  {n}")
        print("\nedges up:")
        for a, b in sorted({(top(i.source), top(i.target)) for i in graph.imports}):
            if a in layer and b in layer and layer[b] > layer[a]:
                print(f"  {a} ({layer[a]}) -> {b} ({layer[b]})")
        print("\ncycles:")
        for c in file_cycles(graph):
            print("  " + " ".join(sorted(m.removeprefix("provision.") for m in c)))
        print("\nimports inside functions outside cli/:")
        for source, line, comment in sorted(
            {(i.source, i.line, i.comment) for i in graph.imports if i.in_function and top(i.source) != "cli"}
        ):
            print(f"  {source}:{line}" + (f"  # {comment}" if comment else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
