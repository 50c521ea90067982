"""The report document: built from the REAL quick bench of this machine (through the agent),
validated, written and read back; `validate` names the key at fault; the crafted GPU documents
the other report tests use keep to the real schema."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from report_support import h100_bench, h100_report, real_facts_and_bench

import provision.bench  # noqa: F401  (registers the bench's section of the report)
from provision.errors import ConfigError
from provision.report.document import (
    REQUIRED_KEYS,
    SCHEMA,
    build_report,
    get,
    headline,
    load_report,
    validate,
    write_report,
)

pytest.importorskip("torch")
pytest.importorskip("PIL")


@pytest.fixture(scope="module")
def real_doc() -> dict[str, Any]:
    facts, bench = real_facts_and_bench()
    install = {
        "python": bench["host"]["executable"],
        "torch": bench["host"]["torch"],
        "managed": False,
    }
    return build_report("localhost", facts=facts, install=install, bench=bench, price_per_hour=0.4)


# -- from the real benchmark -----------------------------------------------------------------------


@pytest.mark.slow
def test_report_from_the_real_quick_bench_is_valid_and_complete(real_doc):
    validate(real_doc)
    assert real_doc["schema"] == SCHEMA
    for key in REQUIRED_KEYS:
        assert key in real_doc
    assert Path(real_doc["install"]["python"]).exists()
    assert real_doc["facts"]["hostname"]
    amp, loader = real_doc["bench"]["amp"], real_doc["bench"]["dataloader"]
    assert amp["status"] == "ok" and loader["status"] == "ok"
    assert amp["speedup"] > 0 and amp["train_samples_per_s"] > 0
    assert loader["best_num_workers"] in loader["num_workers_tried"]
    assert loader["best_samples_per_s"] > 0
    for finding in real_doc["diagnosis"]:
        assert set(finding) == {"id", "severity", "title", "evidence", "recommendation"}


@pytest.mark.slow
def test_headline_of_the_real_report(real_doc):
    h = headline(real_doc)
    train = real_doc["bench"]["amp"]["train_samples_per_s"]
    loader = real_doc["bench"]["dataloader"]["best_samples_per_s"]
    assert h["effective_samples_per_s"] == min(train, loader)
    assert h["bottleneck"] == ("loader" if loader < train else "training")
    assert h["samples_per_money"] == pytest.approx(min(train, loader) * 3600 / 0.4)
    assert h["gpu"] == "CPU" and h["gpu_count"] == 0
    assert h["best_num_workers"] == real_doc["bench"]["dataloader"]["best_num_workers"]


@pytest.mark.slow
def test_every_path_the_rules_read_exists_in_the_real_bench(real_doc):
    """The diagnosis was written before the bench schema: these are the paths it reads."""
    for path in (
        "bench.host.device",
        "bench.compute.per_gpu",
        "bench.amp.device",
        "bench.amp.speedup",
        "bench.amp.best_dtype",
        "bench.amp.train_samples_per_s",
        "bench.amp.image_size",
        "bench.amp.models.convnet.runs.fp32.samples_per_s",
        "bench.memory.dtype",
        "bench.memory.models.convnet.max_batch",
        "bench.memory.models.convnet.bounded_by",
        "bench.memory.models.convnet.grad_accumulation.steps",
        "bench.dataloader.cores",
        "bench.dataloader.primary",
        "bench.dataloader.best_num_workers",
        "bench.dataloader.best_samples_per_s",
        "bench.dataloader.verdict.verdict",
        "bench.dataloader.sources.0.settings.0.num_workers",
        "bench.dataloader.sources.0.source.role",
        "bench.storage.dirs.0.seq_read.mb_s",
        "bench.storage.dirs.0.random_read.iops",
        "bench.under_load.cpu.busy_pct_mean",
        "bench.under_load.gpu.status",
        "facts.data_dir.free_bytes",
        "facts.data_dir.network",
        "facts.disks.mounts.0.mountpoint",
        "facts.nvidia",
    ):
        assert get(real_doc, path) is not None, f"{path} missing from the real report"


def _keys(d: Any) -> set[str]:
    return set(d) if isinstance(d, dict) else set()


@pytest.mark.slow
def test_crafted_gpu_bench_uses_only_real_keys(real_doc):
    """Schema drift guard: every key of the crafted GPU bench also appears in the real run
    (GPU-only keys the CPU run cannot have are listed, each from the agent's GPU code path)."""
    real, crafted = real_doc["bench"], h100_bench()
    gpu_only = {"capability", "memory_gb"}  # compute._gpu
    # storage.measure adds the ratios only when a network dir was measured too
    with_network_dir = {"seq_read_ratio_data_vs_network", "random_iops_ratio_data_vs_network"}
    assert _keys(crafted) - {"transfer"} <= _keys(real)
    for section in ("amp", "memory", "dataloader", "storage", "under_load"):
        assert _keys(crafted[section]) - with_network_dir <= _keys(real[section]), section
    assert _keys(crafted["compute"]["per_gpu"][0]) - gpu_only <= _keys(
        real["compute"]["per_gpu"][0]
    )
    assert _keys(crafted["amp"]["models"]["convnet"]) <= _keys(real["amp"]["models"]["convnet"])
    assert _keys(crafted["memory"]["models"]["convnet"]) <= _keys(
        real["memory"]["models"]["convnet"]
    )
    src_real, src_crafted = real["dataloader"]["sources"][0], crafted["dataloader"]["sources"][0]
    assert _keys(src_crafted) <= _keys(src_real)
    assert _keys(src_crafted["settings"][2]) <= _keys(src_real["settings"][-1])
    assert _keys(crafted["storage"]["dirs"][0]) <= _keys(real["storage"]["dirs"][0])


@pytest.mark.slow
def test_write_and_load_round_trip(real_doc, tmp_path):
    paths = write_report(real_doc, tmp_path / "out")
    assert {Path(p).suffix for p in paths.values()} == {".json", ".md", ".html"}
    assert load_report(paths["json"]) == json.loads(json.dumps(real_doc, default=str))
    assert Path(paths["html"]).read_text().startswith("<!DOCTYPE html>")


def test_file_names_keep_dotted_host_names(tmp_path):
    doc = h100_report(host="10.0.0.7", created="2025-03-01T10:00:00+00:00")
    paths = write_report(doc, tmp_path)
    assert Path(paths["json"]).name == "10.0.0.7-2025-03-01T100000Z.json"
    assert Path(paths["html"]).name == "10.0.0.7-2025-03-01T100000Z.html"


# -- validation --------------------------------------------------------------------------------------


@pytest.fixture
def doc() -> dict[str, Any]:
    return h100_report(created="2025-03-01T10:00:00+00:00")


def test_crafted_gpu_report_is_valid(doc):
    validate(doc)
    assert doc["install"]["python"] == "/root/.provision/env/bin/python"


@pytest.mark.parametrize("key", REQUIRED_KEYS)
def test_missing_key_is_named(doc, key):
    del doc[key]
    with pytest.raises(ValueError, match=f"where: missing key '{key}'|where: schema"):
        validate(doc, "where")


@pytest.mark.parametrize(
    "change, message",
    [
        (
            lambda d: d.update(schema="provision.report/v0"),
            "schema 'provision.report/v0', expected",
        ),
        (lambda d: d.update(created="yesterday"), "created must be an ISO 8601 time"),
        (lambda d: d.update(created="2025-03-01T10:00:00"), "has no time zone"),
        (lambda d: d.update(host=""), "host must be a non-empty string"),
        (lambda d: d.update(bench=[]), "bench must be an object"),
        (lambda d: d.update(datasets={"a": 1}), "datasets must be a list of objects"),
        (lambda d: d["install"].pop("python"), "install lacks 'python'"),
        (
            lambda d: d["bench"]["amp"].update(speedup="fast"),
            "bench.amp.speedup must be a number or null",
        ),
        (
            lambda d: d["bench"]["dataloader"].update(best_num_workers=True),
            "best_num_workers must be a number",
        ),
        (lambda d: d.update(price_per_hour=0), "price_per_hour must be positive"),
        (lambda d: d.update(diagnosis={}), "diagnosis must be a list"),
        (lambda d: d["diagnosis"][0].pop("evidence"), r"diagnosis\[0\] lacks 'evidence'"),
        (
            lambda d: d["diagnosis"][0].update(severity="bad"),
            r"diagnosis\[0\].severity 'bad' is not one of",
        ),
    ],
)
def test_validate_names_the_problem(doc, change, message):
    change(doc)
    with pytest.raises(ValueError, match=message):
        validate(doc, "r.json")


def test_build_report_keeps_install_python_key():
    doc = build_report("h", install={"torch": "2.5.1"})
    assert doc["install"] == {"torch": "2.5.1", "python": None}
    assert build_report("h")["install"] == {}


def test_load_report_errors_name_the_file(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": "provision.report/v1",\n "host": }')
    with pytest.raises(ConfigError, match=r"bad.json:2:\d+: not valid JSON"):
        load_report(bad)
    with pytest.raises(ConfigError, match="no such report file"):
        load_report(tmp_path / "missing.json")
    with pytest.raises(ConfigError, match="is a directory"):
        load_report(tmp_path)
    other = tmp_path / "facts.json"
    other.write_text('{"schema": 1, "hostname": "x"}')
    with pytest.raises(ConfigError, match=r"facts.json: schema 1, expected 'provision.report/v1'"):
        load_report(other)


def test_get_walks_dicts_and_lists(doc):
    assert get(doc, "facts.gpus.0.name") == "NVIDIA H100 80GB HBM3"
    assert get(doc, "facts.gpus.5.name") is None
    assert get(doc, "bench.amp.nothing", 7) == 7
    assert get({"a": None}, "a", []) == []
