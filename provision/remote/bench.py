"""Controller side of the benchmark: build the agent's request from facts, run it in the managed
environment, and (for several hosts) form one torch.distributed group for all-reduce."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from provision.compat.gpus import find_gpu
from provision.distributed.fabric import Fabric
from provision.remote.agent import Agent


def gpu_peaks(facts: dict[str, Any]) -> dict[str, dict[str, float | None]]:
    """Dense datasheet peaks per GPU index from the compat GPU table (for "% of peak")."""
    peaks: dict[str, dict[str, float | None]] = {}
    for gpu in facts.get("gpus") or []:
        spec = find_gpu(str(gpu.get("name", "")), memory_mib=(gpu.get("memory") or {}).get("total_mib"))
        if spec is not None:
            peaks[str(gpu.get("index", len(peaks)))] = {
                "fp32": spec.fp32, "tf32": spec.tf32, "fp16": spec.fp16, "bf16": spec.bf16,
                "name": spec.name,  # type: ignore[dict-item]
            }
    return peaks


def dataset_sources(names: list[str], facts: dict[str, Any]) -> list[dict[str, Any]]:
    data_dir = (facts.get("data_dir") or {}).get("path") or "~"
    out = []
    for name in names:
        if "/" in name or name.startswith("~"):
            fmt = "lmdb" if name.rstrip("/").endswith(".lmdb") else "folder"
            out.append({"path": name, "format": fmt, "name": Path(name.rstrip("/")).name})
        else:
            out.append({"path": f"{data_dir.rstrip('/')}/datasets/{name}.lmdb", "format": "lmdb", "name": name})
    return out


def bench_request(
    facts: dict[str, Any],
    *,
    quick: bool = False,
    datasets: list[dict[str, Any]] | None = None,
    index_url: str | None = None,
    allreduce: dict[str, Any] | None = None,
    sections: list[str] | None = None,
) -> dict[str, Any]:
    """The agent request (docs/bench.md) for one host."""
    data_dir = (facts.get("data_dir") or {}).get("path")
    network_dirs = [d for d in ((facts.get("data_dir") or {}).get("network_dirs") or []) if d]
    request: dict[str, Any] = {
        "quick": quick,
        "gpu_peaks": gpu_peaks(facts),
        "pcie": {str(g.get("index")): g.get("pcie") or {} for g in facts.get("gpus") or []},
        "datasets": datasets or [],
        "data_dir": data_dir,
    }
    if network_dirs:
        first = network_dirs[0]
        request["network_dir"] = first.get("path") if isinstance(first, dict) else first
    if index_url:
        request["index_url"] = index_url
    if allreduce:
        request["allreduce"] = allreduce
    if sections:
        request["sections"] = sections
    return request


def run_bench(
    agent: Agent,
    request: dict[str, Any],
    *,
    python: str | None = None,
    on_event: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    return agent.call("bench", request, python=python, on_event=on_event)


def allreduce_specs(fabric: Fabric, backend: str | None = None) -> dict[str, dict[str, Any]]:
    """host -> its rank's spec for one multi-host all-reduce, meeting where select_fabric chose
    (the master's address and port on the network every host reached; ranks in fabric order),
    with the interface each host's gloo/NCCL must use."""
    spec: dict[str, Any] = {"master_addr": fabric.master_addr, "master_port": fabric.master_port,
                            "world_size": len(fabric.hosts)}  # fmt: skip
    if backend:
        spec["backend"] = backend
    return {host: dict(spec, rank=fabric.rank(host), env=fabric.env(host)) for host in fabric.hosts}
