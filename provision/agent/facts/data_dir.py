"""Where datasets should go on this host: a local (ideally NVMe) directory with room.

Order: the request's `data_dir` variable; then the directory a rental platform documents as its
local data disk, if present, local and writable; then the local writable filesystem with the
most free space. The reason for the choice, and why each known directory was passed over, are
part of the answer so a report can say it.
"""

from __future__ import annotations

import os

from provision.agent.facts.disks import describe, real_mounts
from provision.agent.facts.mounts import is_network_fs, mount_for, read_mounts

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, List, Optional

MIN_FREE_BYTES = 1 << 30

# Platform data directories, in order. Sources: AutoDL and 恒源云 (gpushare) docs name their
# local data disks; RunPod and vast.ai images use /workspace (on RunPod it may be a network
# volume, which the "local" test below catches).
KNOWN_LAYOUTS = [
    ("/root/autodl-tmp", "AutoDL local data disk"),
    ("/hy-tmp", "恒源云 (gpushare) local data disk"),
    ("/workspace", "RunPod / vast.ai workspace"),
]
KNOWN_NETWORK_DIRS = [
    ("/root/autodl-fs", "AutoDL network storage: kept after release, slow for many small files"),
    ("/root/autodl-pub", "AutoDL public datasets (read-only)"),
]


def choose(
    request: Dict[str, Any], root: str = "/", mounts: Optional[List[Dict[str, object]]] = None
) -> Dict[str, Any]:
    """`mounts`: /proc/self/mountinfo already parsed (facts reads it once per call)."""
    if mounts is None:
        mounts = read_mounts(os.path.join(root, "proc/self/mountinfo"))
    sys_root = os.path.join(root, "sys")
    rejected: List[Dict[str, str]] = []
    requested = request.get("data_dir")
    if requested:
        result = inspect(str(requested), mounts, sys_root)
        result["reason"] = "requested with the data_dir variable"
        if result["network"]:
            result["warning"] = "%s is network storage (%s); staging there will be slow" % (
                requested,
                result["fs_type"],
            )
    else:
        result = None
        for known, label in KNOWN_LAYOUTS:
            path = os.path.join(root, known.lstrip("/"))
            if not os.path.isdir(path):
                continue
            info = inspect(path, mounts, sys_root)
            why = _unsuitable(info)
            if why:
                rejected.append({"path": path, "why": why})
                continue
            result = info
            result["reason"] = "%s: %s exists, is local and writable" % (label, path)
            break
        if result is None:
            result = _largest_local(mounts, sys_root, rejected)
    result["rejected"] = rejected
    result["network_dirs"] = network_dirs(mounts, root)
    return result


def inspect(path: str, mounts: List[Dict[str, object]], sys_root: str = "/sys") -> Dict[str, Any]:
    """What kind of storage `path` is on. A path that does not exist yet is judged by its
    nearest existing parent, which is where it would be created."""
    existing = path
    while not os.path.exists(existing) and os.path.dirname(existing) != existing:
        existing = os.path.dirname(existing)
    mount = mount_for(existing, mounts)
    if mount is None:
        return {
            "path": path,
            "exists": False,
            "network": False,
            "fs_type": None,
            "error": "no mount found",
        }
    info = describe(mount, mounts, sys_root)
    device = info.pop("device") or {}
    return {
        "path": path,
        "exists": os.path.exists(path),
        "mountpoint": info["mountpoint"],
        "fs_type": info["fs_type"],
        "network": info["network"],
        "media": device.get("media"),
        "free_bytes": info.get("free_bytes"),
        "total_bytes": info.get("total_bytes"),
        "writable": os.access(existing, os.W_OK) and not info["read_only"],
    }


def _unsuitable(info: Dict[str, Any]) -> Optional[str]:
    if info["network"]:
        return "network storage (%s)" % info["fs_type"]
    if not info["writable"]:
        return "not writable"
    if (info.get("free_bytes") or 0) < MIN_FREE_BYTES:
        return "less than 1 GiB free"
    return None


def _largest_local(
    mounts: List[Dict[str, object]], sys_root: str, rejected: List[Dict[str, str]]
) -> Dict[str, Any]:
    best = None
    best_key = None
    for mount in real_mounts(mounts):
        point = str(mount["mountpoint"])
        if point.startswith("/boot") or point.startswith("/snap"):
            continue
        info = describe(mount, mounts, sys_root)
        if (
            info["network"]
            or not info["writable"]
            or (info.get("free_bytes") or 0) < MIN_FREE_BYTES
        ):
            continue
        # Most free space wins; on a tie prefer a whole filesystem over a bind mount of part of it.
        key = (info["free_bytes"], str(mount["root"]) == "/", -len(point))
        if best_key is None or key > best_key:
            best, best_key = mount, key
    if best is None:
        return {
            "path": None,
            "exists": False,
            "network": None,
            "fs_type": None,
            "reason": "no local writable filesystem with at least 1 GiB free",
        }
    point = str(best["mountpoint"])
    path = point
    if point == "/":
        # The root filesystem itself is no place to scatter data; the home directory on it is.
        home = os.path.expanduser("~")
        path = home if os.access(home, os.W_OK) else "/var/tmp"
    info = inspect(path, mounts, sys_root)
    info["reason"] = "largest local writable filesystem: %s (%s, %s)" % (
        point,
        info["fs_type"],
        _gib(info.get("free_bytes")),
    )
    if rejected:
        info["reason"] += "; passed over " + ", ".join("%(path)s (%(why)s)" % r for r in rejected)
    return info


def network_dirs(mounts: List[Dict[str, object]], root: str = "/") -> List[Dict[str, Any]]:
    """Known platform network directories present, plus every network mount."""
    found: List[Dict[str, Any]] = []
    seen = set()
    for known, description in KNOWN_NETWORK_DIRS:
        path = os.path.join(root, known.lstrip("/"))
        if os.path.isdir(path):
            mount = mount_for(path, mounts)
            found.append(
                {
                    "path": path,
                    "fs_type": mount["fs_type"] if mount else None,
                    "description": description,
                }
            )
            seen.add(path)
    for mount in mounts:
        point = str(mount["mountpoint"])
        if is_network_fs(str(mount["fs_type"])) and point not in seen:
            found.append(
                {"path": point, "fs_type": mount["fs_type"], "description": "network mount"}
            )
            seen.add(point)
    return found


def _gib(value: Optional[int]) -> str:
    return "unknown free" if value is None else "%.1f GiB free" % (value / float(1 << 30))
