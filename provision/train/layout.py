"""Before a distributed run: where each host will keep the run (data dir, workdir, the disk under
them, its free space), and the host whose layout differs from the others' (another filesystem
or mount, network storage, at its free-space floor): a rank whose checkpoints land on a slow
network disk, or on a disk about to fill, holds every other rank at each save."""

from __future__ import annotations

from collections import Counter
from typing import Any

LOW_FREE_BYTES = 10 << 30  # the health check's "degraded" floor: a checkpoint or two fill it


def _gib(n: Any) -> str:
    return "?" if n is None else f"{float(n) / (1 << 30):.1f} GiB"


def host_layout(facts: dict[str, Any], run_id: str, workdir: str | None) -> dict[str, Any]:
    d = facts.get("data_dir") or {}
    path = d.get("path")
    return {"data_dir": path, "mountpoint": d.get("mountpoint"), "fs_type": d.get("fs_type"),
            "media": d.get("media"), "network": bool(d.get("network")), "free_bytes": d.get("free_bytes"),
            "workdir": workdir or (f"{str(path).rstrip('/')}/runs/{run_id}/code" if path else None)}


def odd_hosts(layouts: dict[str, dict[str, Any]]) -> dict[str, str]:
    """{host: why its layout differs} (empty when all look alike)."""
    out: dict[str, list[str]] = {}
    if len(layouts) >= 2:
        for key, what in (("mountpoint", "mount"), ("fs_type", "filesystem"), ("network", "network storage")):
            counts = Counter(str(v.get(key)) for v in layouts.values())
            if len(counts) < 2:
                continue
            usual, n = counts.most_common(1)[0]
            if n * 2 <= len(layouts) and len(layouts) > 2:
                usual = None  # no majority: name each host's own
            for host, v in layouts.items():
                if usual is not None and str(v.get(key)) == usual:
                    continue
                mine = v.get(key)
                if key == "network":
                    text = "its data dir is on network storage" if mine else "its data dir is local"
                else:
                    text = f"{what} {mine}" + (f" (the others: {usual})" if usual else "")
                out.setdefault(host, []).append(text)
    for host, v in layouts.items():
        free = v.get("free_bytes")
        if free is not None and free < LOW_FREE_BYTES:
            out.setdefault(host, []).append(f"only {_gib(free)} free (floor {_gib(LOW_FREE_BYTES)})")
    return {h: "; ".join(reasons) for h, reasons in out.items()}


def describe(host: str, v: dict[str, Any]) -> str:
    disk = ", ".join(str(x) for x in (v.get("fs_type"), v.get("media")) if x)
    return (f"{host}: data dir {v.get('data_dir')} ({disk} at {v.get('mountpoint')}"
            f"{', network storage' if v.get('network') else ''}; {_gib(v.get('free_bytes'))} free); "
            f"workdir {v.get('workdir')}")
