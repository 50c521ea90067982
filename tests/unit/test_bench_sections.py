"""Sections run directly on this CPU, with real files, real torch and a real loopback server."""

from __future__ import annotations

import functools
import http.server
import os
import threading
import time
from pathlib import Path

import pytest

from provision.agent.bench import dataloader, memory, network, sampler, storage

torch = pytest.importorskip("torch")
pytest.importorskip("PIL")


def test_storage_reads_bypass_the_cache_and_clean_up(tmp_path: Path) -> None:
    out = storage.measure_dir(str(tmp_path), quick=True)
    assert out["status"] == "ok"
    assert out["seq_read"]["method"] in ("O_DIRECT", "posix_fadvise DONTNEED")
    assert out["seq_read"]["bytes"] == out["file_mb"] << 20  # read the whole file back
    assert out["random_read"]["reads"] > 0 and out["random_read"]["latency_ms"] > 0
    assert list(tmp_path.iterdir()) == []


def test_storage_reports_a_missing_dir(tmp_path: Path) -> None:
    out = storage.measure_dir(str(tmp_path / "nope"), quick=True, role="network")
    assert out["status"] == "error" and "not a directory" in out["reason"]


def test_network_download_stops_at_the_byte_limit(tmp_path: Path) -> None:
    (tmp_path / "big.bin").write_bytes(os.urandom(8 << 20))
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))
    handler.log_message = lambda *a, **k: None  # type: ignore[attr-defined]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.handle_error = lambda request, client_address: None  # type: ignore[method-assign]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        port = server.server_address[1]
        out = network.probe(f"http://127.0.0.1:{port}/big.bin", max_bytes=1 << 20, max_seconds=10)
        assert out["status"] == "ok" and out["bytes"] == 1 << 20 and out["complete"] is False
        assert out["mb_s"] > 0 and out["ttfb_ms"] > 0
        missing = network.probe(f"http://127.0.0.1:{port}/nope", max_bytes=1 << 20, max_seconds=10)
        assert missing["status"] == "error" and "404" in missing["error"]
    finally:
        server.shutdown()
        server.server_close()


def test_network_skips_without_a_url() -> None:
    with pytest.raises(network.Skip, match="network.url"):
        network.measure({}, quick=True)


def test_memory_search_on_cpu_respects_a_small_budget() -> None:
    out = memory.measure({"memory_budget_mb": 48, "target_batch": 512}, quick=True)
    assert out["budget_mb"] == 48.0 and out["budget_source"] == "request memory_budget_mb=48"
    conv = out["models"]["convnet"]
    assert conv["bounded_by"] in ("budget", "time")
    if conv["bounded_by"] == "budget":
        assert conv["first_failing"] > conv["max_batch"] >= 1
        assert conv["estimated_max_batch"] < conv["first_failing"] * 2
    ga = conv["grad_accumulation"]
    assert ga["micro_batch"] <= conv["max_batch"] and ga["micro_batch"] * ga["steps"] >= 512


def test_dataloader_setting_yields_real_batches(tmp_path: Path) -> None:
    root = dataloader.make_sample_folder(str(tmp_path / "imgs"), 40, 24, classes=2)
    base = dataloader.FolderDataset(root)
    assert len(base) == 40 and base.classes == ["class0", "class1"]
    ds = dataloader.Decoded(base, dataloader.ImageTransform(16))
    image, label = ds[3]
    assert tuple(image.shape) == (3, 16, 16) and image.dtype == torch.uint8 and label in (0, 1)
    result = dataloader.run_setting(torch, ds, 8, 1, False, True, seconds=0.5, max_batches=10)
    assert result["samples_per_s"] > 0 and result["batches"] >= 1 and result["persistent_workers"]
    assert "next_epoch_first_batch_s" in result


def test_dataloader_reports_a_missing_source(tmp_path: Path) -> None:
    out = dataloader.measure({"quick": True, "datasets": [str(tmp_path / "gone")]}, quick=True)
    assert out["status"] == "error" and "does not exist" in out["reason"]


def test_sampler_samples_cpu_and_marks_sections() -> None:
    s = sampler.Sampler(interval=0.05).start()
    s.mark("a")
    end = time.monotonic() + 0.3
    while time.monotonic() < end:  # keep a core busy for the sampler to see
        sum(range(10000))
    s.mark("b")
    time.sleep(0.1)
    s.stop()
    summary = s.summary()
    assert summary["samples"] >= 3
    assert summary["cpu"]["busy_pct_max"] is not None and summary["cpu"]["busy_pct_max"] > 0
    assert set(summary["by_section"]) == {"a", "b"}
    assert summary["gpu"]["status"] in ("ok", "skipped")
