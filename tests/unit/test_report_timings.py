"""Per-step timings of `up`: consistent (every step listed, steps + between == total, shares of
the total), rendered as the report's "Timings" table, and written into a report already on disk."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from report_support import h100_report

import provision.bench  # noqa: F401  (registers the bench's section of the report)
from provision.engine.timings import host_timings, timing_rows
from provision.report.document import add_timings, validate, write_report
from provision.report.render import render_html, render_markdown


def _results() -> list[dict[str, Any]]:
    """Two hosts' results as PlaybookResult.to_json() lists them (interleaved, as they finish)."""
    out = []
    for host, scale in (("a", 1.0), ("b", 2.0)):
        out += [
            {"host": host, "task": "Gathering Facts", "action": "gather_facts", "status": "ok",
             "seconds": 0.8 * scale},
            {"host": host, "task": "compatibility check", "action": "compat_check",
             "status": "ok", "seconds": 0.3 * scale},
            {"host": host, "task": "install matched torch", "action": "install_torch",
             "status": "changed", "seconds": 20.0 * scale,
             "result": {"install": {"seconds": {"facts": 0.1, "index": 1.5, "pip": 15.0,
                                                "verify": 3.0, "total": 19.9}}}},
            {"host": host, "task": "stage dataset", "action": "stage_dataset", "status": "changed",
             "seconds": 4.0 * scale,
             "result": {"results": [{"dataset": {"skipped": False,
                                                 "compression": {"codec": "zstd"}}}]}},
            {"host": host, "task": "benchmark", "action": "bench", "status": "skipped",
             "seconds": 0.0},
        ]  # fmt: skip
    return out


def test_every_step_is_listed_and_the_steps_add_up_to_the_total() -> None:
    results = _results()
    timings = host_timings(results, total_seconds=60.0)
    assert set(timings) == {"a", "b"}
    for host, t in timings.items():
        mine = [r for r in results if r["host"] == host]
        assert [s["step"] for s in t["steps"]] == [r["task"] for r in mine]  # in run order
        assert t["total_seconds"] == 60.0
        assert t["steps_seconds"] + t["between_steps_seconds"] == pytest.approx(60.0)
        assert sum(s["share"] for s in t["steps"]) == pytest.approx(
            t["steps_seconds"] / 60.0, abs=1e-3
        )
    install = timings["a"]["steps"][2]
    assert install["phases"] == {"facts": 0.1, "index": 1.5, "pip": 15.0, "verify": 3.0}
    assert any("index probes" in p for p in install["parallel"])
    stage = timings["a"]["steps"][3]
    assert stage["parallel"] and "zstd" in stage["parallel"][0]
    assert (
        timings["a"]["steps"][4]["status"] == "skipped" and timings["a"]["steps"][4]["seconds"] == 0
    )


def test_a_total_below_the_steps_sum_is_raised_to_it() -> None:
    # the run's clock and the steps' are read apart: never a negative time between steps
    t = host_timings(_results(), total_seconds=1.0)["a"]
    assert t["total_seconds"] == t["steps_seconds"] and t["between_steps_seconds"] == 0


def test_timings_table_in_markdown_and_html() -> None:
    doc = h100_report()
    doc["timings"] = host_timings(_results(), total_seconds=30.0)["a"]
    validate(doc)
    rows = timing_rows(doc["timings"])
    assert [r[0].split(" — ")[0] for r in rows[:5]] == [
        "Gathering Facts", "compatibility check", "install matched torch", "stage dataset",
        "benchmark (skipped)",
    ]  # fmt: skip
    assert rows[-1][:3] == ["total", "30.00", "100%"]
    assert rows[-2][0].startswith("between steps")
    md = render_markdown([doc])
    assert "Timings" in md
    assert (
        "| install matched torch — facts 0.1s, index 1.5s, pip 15.0s, verify 3.0s | 20.00 | 66.7% |"
        in md
    )
    html = render_html([doc])
    assert "Timings" in html and "index probes" in html


def test_no_timings_no_table_and_bad_timings_are_named() -> None:
    doc = h100_report()
    assert "Timings" not in render_markdown([doc])
    doc["timings"] = {"steps": "nope"}
    with pytest.raises(ValueError, match="timings must be an object with a steps list"):
        validate(doc, "r.json")


def test_add_timings_rewrites_the_written_report(tmp_path: Path) -> None:
    doc = h100_report()
    paths = write_report(doc, tmp_path)
    assert "Timings" not in Path(paths["markdown"]).read_text()
    timings = host_timings(_results(), total_seconds=30.0)["a"]
    add_timings(paths, timings)
    assert json.loads(Path(paths["json"]).read_text())["timings"] == timings
    assert "Timings" in Path(paths["markdown"]).read_text()
    assert "Timings" in Path(paths["html"]).read_text()


def test_background_work_is_listed_beside_the_steps_not_in_their_sum() -> None:
    t = host_timings(_results(), 60.0, {"embedded sample (controller)": 8.5})["a"]
    assert t["background"] == {"embedded sample (controller)": 8.5}
    assert t["steps_seconds"] + t["between_steps_seconds"] == pytest.approx(60.0)
    rows = timing_rows(t)
    assert ["in the background: embedded sample (controller)", "8.50", "—", "beside the steps above"] in rows
    assert rows[-1][0] == "total"
