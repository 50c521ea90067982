"""CPU and memory limits of the cgroup this process runs in (v2 and v1).

Rented GPU containers get a share of the host: 8 CPUs of a 128-core machine, 60 GB of 1 TB.
`os.cpu_count()` and /proc/meminfo show the host, so the real numbers come from here.

Where the cgroup files are: /proc/self/cgroup names our cgroup path per hierarchy (v2:
`0::/path`; v1: `4:cpu,cpuacct:/path`), and /proc/self/mountinfo says where each hierarchy is
mounted and which part of it (its root; inside a container with a cgroup namespace the path is
`/` and the mount shows only our part). A limit set on any ancestor applies too, so every
directory from ours up to the mount is read and the smallest limit wins.
"""

from __future__ import annotations

import os

from provision.agent.facts._util import read_text
from provision.agent.facts.mounts import read_mounts

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Dict, List, Optional

# v1 memory.limit_in_bytes when unlimited is PAGE_COUNTER_MAX (~2^63 rounded to pages).
_V1_UNLIMITED = 1 << 62


def parse_proc_cgroup(text: str) -> Dict[str, str]:
    """controller -> path; the v2 unified hierarchy is under key ""."""
    paths = {}
    for line in text.splitlines():
        parts = line.strip().split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if controllers == "":
            paths[""] = path
        for controller in controllers.split(","):
            if controller:
                paths[controller] = path
    return paths


def cgroup_dirs(
    controller: str, root: str = "/", mounts: Optional[List[Dict[str, object]]] = None
) -> List[str]:
    """Directories holding `controller`'s files for this process, ours first, then ancestors.
    `mounts`: /proc/self/mountinfo already parsed (facts reads it once per call)."""
    paths = parse_proc_cgroup(read_text(os.path.join(root, "proc/self/cgroup")) or "")
    if mounts is None:
        mounts = read_mounts(os.path.join(root, "proc/self/mountinfo"))
    found = []
    for mount in mounts:
        if mount["fs_type"] == "cgroup2" and "" in paths:
            path = paths[""]
        elif (
            mount["fs_type"] == "cgroup"
            and controller in mount["super_options"]
            and controller in paths
        ):
            path = paths[controller]
        else:
            continue
        mount_root = str(mount["root"])
        relative = path[len(mount_root) :] if path.startswith(mount_root) else path
        point = os.path.join(root, str(mount["mountpoint"]).lstrip("/"))
        current = os.path.normpath(os.path.join(point, relative.lstrip("/")))
        chain = []
        while True:
            chain.append(current)
            if current == os.path.normpath(point) or len(current) <= len(point):
                break
            current = os.path.dirname(current)
        kind = "v2" if mount["fs_type"] == "cgroup2" else "v1"
        found.extend("%s:%s" % (kind, d) for d in chain)
    return found


def cpu_quota(
    root: str = "/", mounts: Optional[List[Dict[str, object]]] = None
) -> Dict[str, Optional[object]]:
    """{"cpus": quota in CPUs or None when unlimited, "version", "path"}."""
    best: Optional[float] = None
    best_path = None
    version = None
    for entry in cgroup_dirs("cpu", root, mounts):
        kind, _, directory = entry.partition(":")
        if kind == "v2":
            text = read_text(os.path.join(directory, "cpu.max"))
            if text is None:
                continue
            version = "v2"
            quota, _, period = text.strip().partition(" ")
            if quota == "max" or not period:
                continue
            cpus = int(quota) / float(period)
        else:
            quota_text = read_text(os.path.join(directory, "cpu.cfs_quota_us"))
            period_text = read_text(os.path.join(directory, "cpu.cfs_period_us"))
            if quota_text is None or period_text is None:
                continue
            version = version or "v1"
            quota = int(quota_text.strip())
            if quota <= 0:
                continue
            cpus = quota / float(period_text.strip())
        if best is None or cpus < best:
            best, best_path = cpus, directory
    return {
        "cpus": round(best, 2) if best is not None else None,
        "version": version,
        "path": best_path,
    }


def memory_limit(
    root: str = "/", mounts: Optional[List[Dict[str, object]]] = None
) -> Dict[str, Optional[object]]:
    """{"limit_bytes", "usage_bytes", "version", "path"}; limit None when unlimited."""
    best: Optional[int] = None
    best_path = None
    usage = None
    version = None
    for entry in cgroup_dirs("memory", root, mounts):
        kind, _, directory = entry.partition(":")
        limit_file, usage_file = (
            ("memory.max", "memory.current")
            if kind == "v2"
            else ("memory.limit_in_bytes", "memory.usage_in_bytes")
        )
        text = read_text(os.path.join(directory, limit_file))
        if text is None:
            continue
        version = version or kind
        if usage is None:  # our own cgroup's usage: the first directory that has one
            usage = _working_set(directory, usage_file)
        value = text.strip()
        if value == "max" or not value.isdigit() or int(value) >= _V1_UNLIMITED:
            continue
        if best is None or int(value) < best:
            best, best_path = int(value), directory
    return {"limit_bytes": best, "usage_bytes": usage, "version": version, "path": best_path}


def _working_set(directory: str, usage_file: str) -> Optional[int]:
    """Usage minus inactive file cache, as `docker stats` reports it: the kernel reclaims that
    cache before it hits the limit, so counting it would make a box look fuller than it is."""
    used = (read_text(os.path.join(directory, usage_file)) or "").strip()
    if not used.isdigit():
        return None
    inactive = 0
    for line in (read_text(os.path.join(directory, "memory.stat")) or "").splitlines():
        key, _, value = line.partition(" ")
        if key in ("inactive_file", "total_inactive_file") and value.strip().isdigit():
            inactive = int(value)
            if key == "total_inactive_file":  # v1: the hierarchical figure is the one to use
                break
    return max(0, int(used) - inactive)
