"""The real quick benchmark on this CPU, end to end through the agent protocol (LocalConnection).

Real torch training steps, a real LMDB staged by the agent's own `stage` command, real
DataLoader workers, real disk reads and a real HTTP download from a loopback server. Figures
are checked for sanity (positive, consistent), never against a speed threshold.
"""

from __future__ import annotations

import functools
import http.server
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from provision.agent.bench.dataloader import make_sample_folder
from provision.connection.local import LocalConnection
from provision.errors import AgentError
from provision.remote.agent import Agent

pytestmark = pytest.mark.slow  # real training steps / process groups: seconds, not millis

pytest.importorskip("torch")
pytest.importorskip("PIL")

STATUSES = {"ok", "skipped", "error"}
SECTIONS = [
    "compute",
    "amp",
    "memory",
    "transfer",
    "dataloader",
    "storage",
    "network",
    "distributed",
]


@pytest.fixture(scope="module")
def http_blob(tmp_path_factory: pytest.TempPathFactory):
    """A loopback HTTP server with a 4 MiB file: the stand-in for an index or mirror."""
    root = tmp_path_factory.mktemp("mirror")
    (root / "blob.bin").write_bytes(os.urandom(4 << 20))
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *a, **k: None  # type: ignore[attr-defined]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    # The bench stops reading at its byte limit: the server's broken pipe is expected.
    server.handle_error = lambda request, client_address: None  # type: ignore[method-assign]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/blob.bin"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory, http_blob: str) -> dict[str, Any]:
    base = tmp_path_factory.mktemp("bench")
    data_dir, net_dir = base / "ssd", base / "netdisk"
    data_dir.mkdir()
    net_dir.mkdir()
    raw = Path(make_sample_folder(str(data_dir / "raw"), 96, 40))
    net_copy = Path(make_sample_folder(str(net_dir / "raw"), 96, 40))
    agent = Agent(LocalConnection())
    staged = agent.call(
        "stage",
        {"path": str(data_dir / "sample.lmdb"), "source": {"kind": "host", "path": str(raw)}},
    )
    assert staged["count"] == 96
    events: list[dict[str, Any]] = []
    request = {
        "quick": True,
        "data_dir": str(data_dir),
        "network_dir": str(net_dir),
        "datasets": [
            {"path": staged["path"], "name": "sample"},
            {"path": str(raw), "role": "raw", "name": "raw"},
            {"path": str(net_copy), "role": "network", "name": "netcopy"},
        ],
        "network": {"url": http_blob, "max_bytes": 2 << 20},
        "gpu_peaks": {"cpu": {"fp32": 1.0, "bf16": 2.0}},
    }
    result = agent.call("bench", request, on_event=events.append, timeout=600)
    result["_events"] = events
    result["_data_dir"] = str(data_dir)
    print(f"\nquick bench wall time: {result['wall_s']} s")
    return result


def test_schema_every_section_has_a_status(quick_run: dict[str, Any]) -> None:
    r = quick_run
    assert r["schema"] == 1 and r["quick"] is True and r["wall_s"] > 0
    assert r["sections"] == SECTIONS
    for name in SECTIONS + ["under_load"]:
        assert r[name]["status"] in STATUSES, name
        assert "reason" in r[name], name
    expected = {"compute": "ok", "amp": "ok", "memory": "ok", "dataloader": "ok", "storage": "ok"}
    expected.update(network="ok", under_load="ok", transfer="skipped", distributed="skipped")
    assert {k: r[k]["status"] for k in expected} == expected, {
        k: r[k].get("reason") for k in expected
    }
    assert "no CUDA device" in r["transfer"]["reason"]
    assert r["host"]["device"] == "cpu" and r["host"]["torch"]
    progress = [(e["section"], e["status"]) for e in r["_events"] if e.get("step") == "bench"]
    assert [s for s, st in progress if st == "running"] == SECTIONS


def test_compute_figures(quick_run: dict[str, Any]) -> None:
    (cpu,) = quick_run["compute"]["per_gpu"]
    assert set(cpu["tflops"]) == {"fp32", "tf32", "fp16", "bf16"}
    assert cpu["tflops"]["fp32"] > 0 and cpu["tflops"]["bf16"] > 0
    assert cpu["tflops"]["tf32"] is None and "tf32" in cpu["skipped"]
    # pct_of_peak has one decimal: 0.9557 TFLOPS of a 1.0 peak reads 1.0 (%).
    assert cpu["pct_of_peak"]["fp32"] == pytest.approx(100 * cpu["tflops"]["fp32"], abs=0.06)
    assert cpu["pct_of_peak"]["fp16"] is None  # no peak given for it


def test_amp_and_memory(quick_run: dict[str, Any]) -> None:
    amp = quick_run["amp"]
    assert amp["precisions"] == ["fp32", "bf16"]
    assert amp["speedup"] > 0 and amp["best_dtype"] == "bf16"
    for name in ("convnet", "transformer"):
        runs = amp["models"][name]["runs"]
        assert runs["fp32"]["samples_per_s"] > 0 and runs["bf16"]["samples_per_s"] > 0
        assert runs["fp32"]["peak_memory_mb"] is not None
        ratio = runs["bf16"]["samples_per_s"] / runs["fp32"]["samples_per_s"]
        assert amp["models"][name]["speedup"] == pytest.approx(ratio, rel=0.01)
    assert amp["train_samples_per_s"] == amp["models"]["convnet"]["best_samples_per_s"]
    mem = quick_run["memory"]
    # the memory search trains in what AMP found fastest: fp32 where bf16 is slower (emulated)
    assert (
        mem["dtype"] == ("fp32" if amp["speedup"] < 1 else "bf16")
        and mem["budget_mb"] > 0
        and "available memory" in mem["budget_source"]
    )
    for name in ("convnet", "transformer"):
        m = mem["models"][name]
        assert m["max_batch"] >= 8 and m["bounded_by"] in ("budget", "time", "cap")
        assert m["grad_accumulation"]["steps"] >= 1
        assert m["grad_accumulation"]["micro_batch"] <= max(m["max_batch"], 1)


def test_dataloader_sweep_and_verdict(quick_run: dict[str, Any]) -> None:
    dl = quick_run["dataloader"]
    assert dl["num_workers_tried"][0] == 0 and dl["num_workers_tried"][-1] == dl["cores"]
    assert dl["best_num_workers"] in dl["num_workers_tried"]
    assert dl["primary"] == "sample" and dl["best_samples_per_s"] > 0
    by_name = {s["source"]["name"]: s for s in dl["sources"]}
    assert (
        by_name["sample"]["source"]["format"] == "lmdb"
        and by_name["raw"]["source"]["format"] == "folder"
    )
    assert by_name["netcopy"]["source"]["role"] == "network"
    for source in dl["sources"]:
        assert source["status"] == "ok"
        tried = [s["num_workers"] for s in source["settings"] if s.get("samples_per_s")]
        assert tried and all(
            s["samples_per_s"] > 0 for s in source["settings"] if "samples_per_s" in s
        )
        assert source["best"]["num_workers"] in tried
    assert dl["verdict"]["verdict"] in ("ok", "marginal", "bottleneck")
    assert dl["verdict"]["train_samples_per_s"] == quick_run["amp"]["train_samples_per_s"]


def test_storage_and_network(quick_run: dict[str, Any]) -> None:
    st = quick_run["storage"]
    assert [d["role"] for d in st["dirs"]] == ["data", "network"]
    for d in st["dirs"]:
        assert d["status"] == "ok" and d["free_gb"] > 0
        assert (
            d["seq_read"]["mb_s"] > 0 and d["random_read"]["iops"] > 0 and d["seq_write_mb_s"] > 0
        )
    assert st["seq_read_ratio_data_vs_network"] > 0
    leftovers = [p for p in os.listdir(quick_run["_data_dir"]) if p.startswith(".provision-bench")]
    assert leftovers == []
    (target,) = quick_run["network"]["targets"]
    assert target["status"] == "ok" and target["http_status"] == 200
    assert 0 < target["bytes"] <= 2 << 20 and target["mb_s"] > 0 and target["connect_ms"] >= 0


def test_under_load_sampled_the_cpu(quick_run: dict[str, Any]) -> None:
    ul = quick_run["under_load"]
    assert ul["samples"] >= 1 and ul["cpu"]["busy_pct_max"] is not None
    assert ul["gpu"]["status"] in ("ok", "skipped")
    assert set(ul["by_section"]) == set(SECTIONS)


def test_a_failing_section_does_not_stop_the_others(tmp_path: Path) -> None:
    request = {
        "quick": True,
        "sections": ["compute", "storage", "network", "distributed"],
        "data_dir": str(tmp_path),
        "network": {"url": "ftp://mirror.invalid/simple"},
        "allreduce": {"world_size": 2},
    }
    r = Agent(LocalConnection()).call("bench", request, timeout=300)
    assert r["compute"]["status"] == "ok" and r["storage"]["status"] == "ok"
    assert r["network"]["status"] == "error" and "expected http" in r["network"]["reason"]
    assert r["distributed"]["status"] == "error"
    assert "master_addr" in r["distributed"]["reason"] and "rank" in r["distributed"]["reason"]
    assert r["amp"] == {"status": "skipped", "reason": "not requested (sections)"}


def test_bad_request_is_a_clear_agent_error() -> None:
    with pytest.raises(AgentError, match="unknown gpu_burn; known: compute"):
        Agent(LocalConnection()).call("bench", {"sections": ["gpu_burn"]}, timeout=120)


PY38 = Path("/root/.pyenv/versions/3.8.18/bin/python3")


@pytest.mark.skipif(not PY38.exists(), reason="no Python 3.8 interpreter on this machine")
def test_runs_on_python38_without_torch(tmp_path: Path) -> None:
    """The host's Python may be 3.8 with no torch yet: torch sections skip, the rest runs."""
    r = Agent(LocalConnection(), python=str(PY38)).call(
        "bench", {"quick": True, "data_dir": str(tmp_path)}, timeout=120
    )
    assert r["host"]["python"].startswith("3.8") and r["host"]["torch"] is None
    for name in ("compute", "amp", "memory", "transfer", "dataloader", "distributed"):
        assert r[name]["status"] == "skipped" and "torch is not importable" in r[name]["reason"]
    assert r["storage"]["status"] == "ok" and r["storage"]["dirs"][0]["seq_read"]["mb_s"] > 0
    assert r["under_load"]["samples"] >= 1
