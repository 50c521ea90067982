"""Multi-host all-reduce: two agent invocations (rank 0 and 1) form one real gloo group on
loopback, the way two CPU hosts would with the first host as rendezvous."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from provision.agent.bench.distributed import free_port
from provision.connection.local import LocalConnection
from provision.remote.agent import Agent

pytestmark = pytest.mark.slow  # real training steps / process groups: seconds, not millis

pytest.importorskip("torch.distributed")


def test_gloo_allreduce_across_two_agent_processes() -> None:
    port = free_port()
    results: dict[int, Any] = {}

    def rank(r: int) -> None:
        request = {
            "quick": True,
            "sections": ["distributed"],
            "allreduce": {
                "master_addr": "127.0.0.1",
                "master_port": port,
                "world_size": 2,
                "rank": r,
                "sizes_mb": [1, 8],
                "timeout_s": 60,
            },
        }
        try:
            results[r] = Agent(LocalConnection()).call("bench", request, timeout=240)
        except Exception as exc:  # surfaced by the assertions below
            results[r] = exc

    threads = [threading.Thread(target=rank, args=(r,)) for r in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not any(t.is_alive() for t in threads)
    parts = [results[r]["distributed"] for r in (0, 1)]
    for r, part in enumerate(parts):
        assert part["status"] == "ok", part
        mh = part["multi_host"]
        assert mh["status"] == "ok", mh
        assert (mh["backend"], mh["world_size"], mh["rank"], mh["interface"]) == (
            "gloo",
            2,
            r,
            "lo",
        )
        assert [row["size_mb"] for row in mh["sizes"]] == [1, 8]
        for row in mh["sizes"]:
            assert row["time_ms"] > 0 and row["algbw_gbs"] > 0
            assert row["busbw_gbs"] == pytest.approx(row["algbw_gbs"], rel=0.01)  # 2(n-1)/n = 1
        assert part["local"]["status"] == "skipped"
    # Both ranks report the slowest rank's time (agreed with an all-reduce MAX).
    assert [r["time_ms"] for r in parts[0]["multi_host"]["sizes"]] == [
        r["time_ms"] for r in parts[1]["multi_host"]["sizes"]
    ]


def test_missing_peer_ends_at_the_timeout() -> None:
    request = {
        "sections": ["distributed"],
        "allreduce": {
            "master_addr": "127.0.0.1",
            "master_port": free_port(),
            "world_size": 2,
            "rank": 1,
            "timeout_s": 3,
        },
    }
    r = Agent(LocalConnection()).call("bench", request, timeout=120)
    mh = r["distributed"]["multi_host"]
    assert mh["status"] == "error" and mh["reason"]
    assert r["distributed"]["status"] == "error"
    assert r["distributed"]["reason"].startswith("multi_host: ")
    print(r["distributed"]["reason"])
