"""The layout of provision/, read from its own source with `ast` (scripts/import_graph.py): imports
point one way between folders and down the layers, files stay small, and an import inside a
function outside cli/ is one of the few listed here with its reason."""

from __future__ import annotations

import functools
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import import_graph  # noqa: E402  (scripts/ is not a package)

MAX_LINES = 600

# The layers of provision/, bottom first (docs/ARCHITECTURE.md's map). An import -- module- or
# function-level -- may point down or stay within its layer, never up. A new package or
# top-level module goes into the lowest layer above everything it imports.
LAYERS: tuple[frozenset[str], ...] = tuple(
    frozenset(layer.split())
    for layer in (
        "agent errors paths samples secrets shell strict_json taint terminal",  # no provision imports
        "ansible_bridge compat config connection data distributed inventory report yamlpos",
        "bench choose parallel remote",
        "engine install modules staging train",
        "cli",
        "__main__",
    )
)

# The lazy ones: in the agent, what one command runs only
_AGENT = "the agent starts per call on the host: a command loads only what it runs"
_MODULES = "start-up time: a playbook loads every module; this one's stack only when it runs"
_TORCH = "torch is optional on the controller: imported only when a prediction is made"

# Every import inside a function outside cli/ (cli/ defers its imports for start-up time as a
# rule), by the module it sits in: the provision modules it may import there, and why. One not
# listed fails the test: import it at module level, or add it here with its reason. A cycle is
# never a reason: split the two modules along their seam instead.
DEFERRED: dict[str, tuple[str, tuple[str, ...]]] = {
    "provision.agent.bench.amp": (f"{_AGENT}: torch model code only where a section trains", ("provision.agent.bench.models",)),
    "provision.agent.bench.dataloader": (f"{_AGENT}: lmdb only for an LMDB source", ("provision.agent.datasets.reader",)),
    "provision.agent.bench.distributed": (
        f"{_AGENT}: the all-reduce section's timing, pynvml only where it samples the GPUs",
        ("provision.agent.bench.timing", "provision.agent.bench.nvml"),
    ),
    "provision.agent.bench.memory": (f"{_AGENT}: torch model code only when the memory section runs", ("provision.agent.bench.amp", "provision.agent.bench.models")),
    "provision.agent.bench.run": (
        f"{_AGENT}: each section imports torch; a quick or skipped bench loads only what runs",
        ("provision.agent.bench.amp", "provision.agent.bench.compute", "provision.agent.bench.dataloader",
         "provision.agent.bench.distributed", "provision.agent.bench.memory", "provision.agent.bench.network",
         "provision.agent.bench.storage", "provision.agent.bench.transfer", "provision.agent.bench.sampler"),
    ),
    "provision.agent.bootstrap": ("only once the bundle is unpacked onto sys.path: it may not exist before", ("provision.agent.protocol",)),
    "provision.agent.datasets.builder": (f"{_AGENT}: the source readers only for a path on the host", ("provision.agent.datasets.sources",)),
    "provision.agent.datasets.framing": ("looked up on each call: the controller's zstandard may be shipped while a stage runs", ("provision.agent.datasets.deps",)),
    "provision.agent.datasets.ingest": (f"{_AGENT}: the data-dir choice only without a destination", ("provision.agent.facts.data_dir",)),
    "provision.agent.facts.cuda_libs": (f"{_AGENT}: JSON parsing only for a version.json", ("provision.agent.protocol",)),
    "provision.agent.facts.network": (f"{_AGENT}: the protocol module only for `ip -j` output", ("provision.agent.protocol",)),
    "provision.agent.nvidia": (
        f"{_AGENT}: pynvml and each nvidia-smi parser only when that source is tried, the topology when asked",
        ("provision.agent.nvidia.nvml", "provision.agent.nvidia.smi_xml", "provision.agent.nvidia.smi_csv", "provision.agent.nvidia.topology"),
    ),
    "provision.agent.train.commands": (f"{_AGENT}: the summary's parsers for the summary command, torch facts where a run needs them", ("provision.agent.train.summary", "provision.agent.facts.torch_info")),
    "provision.agent.train.gpu": ("looked up at call time: tests replace nvidia.find_nvidia_smi", ("provision.agent.nvidia",)),
    "provision.agent.train.supervisor": ("the samplers load in the detached sampler process only", ("provision.agent.train.gpu", "provision.agent.train.sampler")),
    "provision.choose.check": (_TORCH, ("provision.agent.bench.models", "provision.choose.models", "provision.choose.graph", "provision.choose.speed", "provision.choose.calibrate")),
    "provision.connection.factory": ("start-up time: paramiko (~100 ms) only for an SSH host, the OpenSSH data plane only for staging", ("provision.connection.openssh", "provision.connection.ssh")),
    "provision.connection.openssh": ("start-up time: paramiko only when the fallback is needed", ("provision.connection.ssh",)),
    "provision.install.uv": ("looked up at call time: tests replace uv_binary.uv_for_platform (the download)", ("provision.install.uv_binary",)),
    "provision.inventory.loader": ("start-up time: PyYAML (~40 ms) only for a YAML inventory", ("provision.inventory.yaml_format",)),
    "provision.inventory.vars_files": ("start-up time: PyYAML with positions only when a vars file is read", ("provision.yamlpos",)),
    "provision.modules.base": ("the package itself, to list its module files once (registry loading)", ("provision.modules",)),
    "provision.modules.bench": (_MODULES, ("provision.remote.bench", "provision.remote.environment")),
    "provision.modules.compat": (_MODULES, ("provision.compat", "provision.remote.compat")),
    "provision.modules.datasets": (_MODULES, ("provision.samples", "provision.staging.stage")),
    "provision.modules.install_torch": (_MODULES, ("provision.install.installer", "provision.install.lockfile", "provision.install.mirrors")),
    "provision.modules.report": (f"{_MODULES} (the bench's and choose's report sections register on import)", ("provision.bench", "provision.choose", "provision.report.document", "provision.report.history")),
    "provision.modules.train": (_MODULES, ("provision.train", "provision.report.history")),
    "provision.staging": ("start-up time: `provision stage` lists its source while the SSH handshake runs", ("provision.staging.stage",)),
    "provision.staging.host_stage": ("start-up time: the host library's helpers are rarely needed, not on the start path", ("provision.staging.hostlib",)),
    "provision.staging.stage": (
        "start-up time: the OpenSSH master starts before the heavy imports; a local stage runs the agent's ingest in this process, a remote one never loads it",
        ("provision.connection.factory", "provision.agent.datasets.ingest", "provision.agent.datasets.download"),
    ),
}  # fmt: skip


@functools.cache
def _graph() -> import_graph.Graph:
    """provision/'s graph, read once for the tests below (they only read it)."""
    return import_graph.read(ROOT / "provision")


def _layer_of() -> dict[str, int]:
    return {node: i for i, layer in enumerate(LAYERS) for node in layer}


def edges_up(graph: import_graph.Graph, layer_of: dict[str, int]) -> list[str]:
    """Every import (module- or function-level) from a node to one in a higher layer."""
    up = set()
    for imp in graph.imports:
        a, b = import_graph.top(imp.source), import_graph.top(imp.target)
        if a in layer_of and b in layer_of and layer_of[b] > layer_of[a]:
            up.add(f"{imp.source}:{imp.line} ({a}, layer {layer_of[a]}) -> {imp.target} ({b}, layer {layer_of[b]})")
    return sorted(up)


def undeclared_deferred(graph: import_graph.Graph, deferred: dict[str, tuple[str, tuple[str, ...]]]) -> list[str]:
    """Imports inside functions outside cli/ that DEFERRED does not list for their module. A
    statement's targets are the modules it names (not the packages on the way to them)."""
    statements: dict[tuple[str, int], set[str]] = {}
    for imp in graph.imports:
        if imp.in_function and import_graph.top(imp.source) != "cli":
            statements.setdefault((imp.source, imp.line), set()).add(imp.target)
    out = []
    for (source, line), targets in sorted(statements.items()):
        named = {t for t in targets if not any(o.startswith(t + ".") for o in targets)}
        allowed = deferred.get(source, ("", ()))[1]
        for target in sorted(named):
            if not any(target == a or target.startswith(a + ".") for a in allowed):
                out.append(f"{source}:{line} -> {target}")
    return out


def test_no_import_cycle_spans_two_folders() -> None:
    graph = _graph()
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
    graph = _graph()
    silent = sorted(
        {
            f"{i.source}:{i.line}"
            for i in graph.imports
            if i.in_function and import_graph.top(i.source) != "cli" and not i.comment
        }
    )
    assert not silent, f"imports inside functions without a comment saying why: {silent}"


def test_every_node_has_a_layer() -> None:
    graph = _graph()
    nodes = {import_graph.top(m) for m in graph.modules if m != "provision"}
    layer_of = _layer_of()
    assert len(layer_of) == sum(len(layer) for layer in LAYERS), "a node is in two layers"
    missing = sorted(nodes - set(layer_of))
    assert not missing, f"place these in LAYERS (the lowest layer above all they import): {missing}"


def test_no_import_points_up_a_layer() -> None:
    up = edges_up(_graph(), _layer_of())
    assert not up, f"imports pointing up a layer (move the shared piece down): {up}"


def test_the_layer_check_sees_an_import_up(tmp_path: Path) -> None:
    """The check above can fail: a lower folder importing a higher one inside a function."""
    pkg = tmp_path / "provision"
    for folder in ("low", "high"):
        (pkg / folder).mkdir(parents=True)
        (pkg / folder / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "high" / "x.py").write_text("from provision.low import y\n")
    (pkg / "low" / "y.py").write_text("def f():\n    from provision.high import x  # start-up time\n    return x\n")
    graph = import_graph.read(pkg)
    layer_of = {"low": 0, "high": 1}
    assert edges_up(graph, layer_of) == ["provision.low.y:2 (low, layer 0) -> provision.high (high, layer 1)",
                                         "provision.low.y:2 (low, layer 0) -> provision.high.x (high, layer 1)"]
    assert undeclared_deferred(graph, {}) == ["provision.low.y:2 -> provision.high.x"]
    assert undeclared_deferred(graph, {"provision.low.y": ("a reason", ("provision.high",))}) == []


def test_an_import_inside_a_function_outside_cli_is_a_listed_one() -> None:
    """No import inside a function to dodge a cycle: outside cli/ each one is in DEFERRED, with
    the reason it is deferred (start-up time, an optional dependency such as torch, the agent's
    per-call start, a value looked up per call)."""
    extra = undeclared_deferred(_graph(), DEFERRED)
    assert not extra, f"imports inside functions not in DEFERRED (import at module level, or list it with why): {extra}"
