"""The bench's multi-host all-reduce meets where select_fabric chose: two local agents are two
"hosts" on loopback; the fabric's port, interface and env reach both rank processes."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from provision.connection.local import LocalConnection
from provision.distributed.fabric import select_fabric
from provision.inventory.model import Host
from provision.remote.agent import Agent
from provision.remote.bench import allreduce_specs

pytestmark = pytest.mark.slow  # real gloo process groups: seconds

pytest.importorskip("torch.distributed")


def _facts() -> dict[str, Any]:
    lo = {"name": "lo", "kind": "loopback", "operstate": "unknown", "mtu": 65536,
          "ipv4": [{"address": "127.0.0.1", "prefix": 8}], "ipv6": []}  # fmt: skip
    return {"network": {"interfaces": [lo], "default_routes": [], "ib_devices": []}}


def test_allreduce_specs_follow_the_fabric() -> None:
    agents = {n: Agent(LocalConnection(Host(name=n, local=True))) for n in ("a", "b")}
    fabric = select_fabric(agents, {"a": _facts(), "b": _facts()}, master="b", iface="lo", timeout_s=2)
    specs = allreduce_specs(fabric)
    assert specs["b"]["rank"] == 0 and specs["a"]["rank"] == 1
    assert {s["master_port"] for s in specs.values()} == {fabric.master_port}
    assert specs["a"]["env"]["GLOO_SOCKET_IFNAME"] == "lo" and specs["a"]["env"]["NCCL_IB_DISABLE"] == "1"
    results: dict[str, Any] = {}

    def rank(name: str) -> None:
        spec = dict(specs[name], sizes_mb=[1], timeout_s=60)
        try:
            results[name] = agents[name].call("bench", {"quick": True, "sections": ["distributed"],
                                                        "allreduce": spec}, timeout=240)  # fmt: skip
        except Exception as exc:  # surfaced by the assertions below
            results[name] = exc

    threads = [threading.Thread(target=rank, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    for name in ("a", "b"):
        multi = results[name]["distributed"]["multi_host"]
        assert multi["status"] == "ok", multi
        assert multi["master"] == f"127.0.0.1:{fabric.master_port}" and multi["rank"] == specs[name]["rank"]
        assert multi["interface"] == "lo" and multi["fabric_env"]["GLOO_SOCKET_IFNAME"] == "lo"
