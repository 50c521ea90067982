"""Checked after renting: a bench report on a GPU host carries the prediction for that GPU
next to what it measured; recorded in the history, the gap calibrates the next `choose`."""

from __future__ import annotations

from pathlib import Path

import pytest

import provision.bench  # noqa: F401  (registers the bench's section of the report)
from provision.choose import calibrate, catalogue, graph, models, plan
from provision.report import history
from provision.report.render import render_html, render_markdown
from tests.unit.report_support import h100_bench, h100_report

SMALL = {"arch": "resnet", "width": 64, "blocks": [2, 2, 2, 2], "image_size": 224}  # the GPU workload


def _bench_report() -> dict:
    bench = h100_bench()
    bench["amp"]["models"]["convnet"]["model"] = dict(SMALL)
    return h100_report(bench=bench)


def test_a_bench_report_shows_predicted_next_to_measured(tmp_path: Path) -> None:
    doc = _bench_report()
    section = doc["prediction"]
    assert section["gpu"] == "NVIDIA H100 80GB HBM3"
    runs = doc["bench"]["amp"]["models"]["convnet"]["runs"]
    assert {c["precision"] for c in section["checks"]} == set(runs)
    for c in section["checks"]:
        measured = runs[c["precision"]]["samples_per_s"]
        assert c["measured_samples_per_s"] == pytest.approx(measured, rel=1e-3)
        assert c["ratio"] == pytest.approx(measured / c["predicted_samples_per_s"], rel=2e-3)
    html, md = render_html([doc]), render_markdown([doc])
    assert "Predicted by `provision choose` vs measured (NVIDIA H100 80GB HBM3)" in html
    assert "measured ÷ predicted" in md


def test_a_report_without_the_workload_shapes_has_no_prediction() -> None:
    assert "prediction" not in h100_report()  # the fixture's convnet lacks width/blocks


def test_the_gap_feeds_the_next_prediction(tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite"
    doc = _bench_report()
    assert history.record(doc, db)
    cal = calibrate.from_history(db)
    gpu = catalogue.require("H100 SXM")
    ratios = sorted(c["ratio"] for c in doc["prediction"]["checks"])
    assert cal.factors[gpu.name] == (ratios[len(ratios) // 2], len(ratios))
    spec = models.resolve("resnet18", image_size=64)
    profile = graph.measure(spec)
    entry = plan.build(spec, profile, plan.Request(batch=64), [gpu], [], cal)["gpus"][0]
    assert "calibrated by 3 provision measurements" in entry["basis"]


def test_the_html_report_charts_the_offers_choose_ranked(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PROVISION_HOME", str(tmp_path))
    spec = models.resolve("resnet18", image_size=64)
    profile = graph.measure(spec)
    from provision.choose.offers import Offer

    choice = plan.build(spec, profile, plan.Request(batch=64, samples=100000, epochs=2), [],
                        [Offer("cheap", "T4", 1, 0.1), Offer("fast", "H100 SXM", 8, 20.0)])
    calibrate.remember(choice)
    doc = _bench_report()
    assert [o["id"] for o in doc["prediction"]["offers"]] == [o["id"] for o in choice["offers"]]
    html = render_html([doc])
    assert 'data-chart="choose"' in html and "cost vs hours" in html and "fast (8× H100 SXM)" in html
