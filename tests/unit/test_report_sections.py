"""Report sections are providers registered from their own packages (provision/report/sections.py):
report/ itself imports nothing of the packages above it, the layout keeps its order whatever the
import order, and `provision report`, in a fresh process, renders every section a report carries
(the bench's, choose's prediction, a run's timings) because the command imports their packages."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

from report_support import h100_bench, h100_report

import provision.bench  # noqa: F401  (registers the bench's section of the report)
import provision.choose  # noqa: F401  (registers the prediction section: the document carries one)
from provision.engine.timings import host_timings
from provision.report import sections
from provision.report.document import validate
from provision.strict_json import dumps

ROOT = Path(__file__).resolve().parents[2]
# what report/ may import from the rest of provision: the bottom layer's helpers, nothing else
REPORT_MAY_IMPORT = {"provision.errors", "provision.paths", "provision.secrets", "provision.strict_json",
                     "provision.terminal"}  # fmt: skip


def _provision_imports(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module == "provision":
            out |= {f"provision.{a.name}" for a in node.names}  # from provision import paths
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module)
    return {m for m in out if m == "provision" or m.startswith("provision.")}


def test_report_imports_only_itself_and_the_bottom_helpers() -> None:
    found = {
        f"{p.name}: {m}"
        for p in sorted((ROOT / "provision" / "report").glob("*.py"))
        for m in _provision_imports(p)
        if not (m == "provision.report" or m.startswith("provision.report.") or m in REPORT_MAY_IMPORT)
    }
    assert not found, f"report/ reaches above itself (make it a registered section instead): {sorted(found)}"


def test_the_layout_follows_order_not_import_order() -> None:
    late = sections.register(
        sections.Section(name="_test_first", order=0, table=lambda d: ("first", ["a"], [["1"]]))
    )
    try:
        names = [s.name for s in sections.registered()]
        assert names[0] == "_test_first"
        assert names.index("bench") < names.index("prediction") < names.index("timings")
        assert sections.tables(h100_report())[0][0] == "first"
    finally:
        sections._SECTIONS.pop(late.name)


def _results() -> list[dict]:
    return [
        {"host": "h100-box", "task": "install matched torch", "action": "install_torch", "status": "ok",
         "seconds": 20.0, "result": {"install": {"seconds": {"index": 1.5, "pip": 15.0}}}},
    ]  # fmt: skip


def test_the_report_command_renders_every_section_in_a_fresh_process(tmp_path: Path) -> None:
    bench = h100_bench()  # with the workload's shapes, so choose predicts for it (test_choose_check)
    bench["amp"]["models"]["convnet"]["model"] = {"arch": "resnet", "width": 64, "blocks": [2, 2, 2, 2], "image_size": 224}
    doc = h100_report(bench=bench)
    assert doc.get("prediction"), "the document carries choose's prediction"
    doc["timings"] = host_timings(_results(), total_seconds=30.0)["h100-box"]
    validate(doc)
    src = tmp_path / "h100.json"
    src.write_text(dumps(doc, indent=2))
    out = tmp_path / "report.md"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    run = subprocess.run(
        [sys.executable, "-m", "provision", "report", str(src), "--no-history", "--markdown", str(out)],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    md = out.read_text()
    bench_at = md.index("Matmul throughput")
    prediction_at = md.index("Predicted")
    timings_at = md.index("Timings")
    assert bench_at < prediction_at < timings_at
    assert "| install matched torch — index 1.5s, pip 15.0s | 20.00 | 66.7% |" in md
    assert "GPUs" in md  # the bench's overview rows
