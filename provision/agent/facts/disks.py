"""Every real mount (kind of storage, size, free space, local or network) and the block devices.

Why it matters: a dataset staged onto network storage (AutoDL's autodl-fs, a RunPod network
volume, NFS) reads small files 10-100x slower than local NVMe, and an HDD is no better.
"""

from __future__ import annotations

import os

from provision.agent.facts import setup_mounts
from provision.agent.facts._util import call_with_timeout, read_text
from provision.agent.facts.mounts import is_network_fs, is_pseudo_fs, mount_for, read_mounts

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, List, Optional

STATVFS_TIMEOUT_S = 1.0  # a dead NFS server blocks statvfs forever; don't let it block facts


def gather(root: str = "/", mounts: Optional[List[Dict[str, object]]] = None) -> Dict[str, Any]:
    """`mounts`: /proc/self/mountinfo already parsed (facts reads it once per call)."""
    if mounts is None:
        mounts = read_mounts(os.path.join(root, "proc/self/mountinfo"))
    sys_root = os.path.join(root, "sys")
    return {
        "mounts": [describe(m, mounts, sys_root) for m in real_mounts(mounts)],
        "block_devices": block_devices(sys_root),
        # Ansible's setup view (ansible_mounts), which differs from ours on purpose
        "setup_mounts": setup_mounts.gather(root),
    }


def real_mounts(mounts: List[Dict[str, object]]) -> List[Dict[str, object]]:
    """Mounts that can hold data: no pseudo filesystems, no single files bind-mounted by
    Docker (/etc/hosts, /etc/resolv.conf), and for a mountpoint mounted over, only the top."""
    top: Dict[str, Dict[str, object]] = {}
    for mount in mounts:
        if is_pseudo_fs(str(mount["fs_type"])):
            continue
        point = str(mount["mountpoint"])
        # (stat on a network mount can hang; those are never single-file bind mounts anyway)
        if (
            not is_network_fs(str(mount["fs_type"]))
            and os.path.exists(point)
            and not os.path.isdir(point)
        ):
            continue
        top[point] = mount  # later lines mount over earlier ones
    return list(top.values())


def describe(
    mount: Dict[str, object], mounts: List[Dict[str, object]], sys_root: str = "/sys"
) -> Dict[str, Any]:
    fs_type = str(mount["fs_type"])
    network = is_network_fs(fs_type)
    point = str(mount["mountpoint"])
    entry: Dict[str, Any] = {
        "mountpoint": point,
        "fs_type": fs_type,
        "source": _mask_source(str(mount["source"])),
        "network": network,
        "read_only": "ro" in mount["options"],  # type: ignore[operator]
    }
    entry.update(space(point, timeout=STATVFS_TIMEOUT_S if network else None))
    entry["writable"] = (
        (not entry["read_only"]) and "error" not in entry and os.access(point, os.W_OK)
    )
    if network:
        entry["device"] = None
    elif fs_type == "overlay":
        entry["device"] = overlay_backing(mount, mounts, sys_root)
    else:
        entry["device"] = block_device(mount["major"], mount["minor"], sys_root)  # type: ignore[arg-type]
    return entry


def space(path: str, timeout: Optional[float] = None) -> Dict[str, Any]:
    """{"total_bytes", "free_bytes"} (free = what an unprivileged user may still write)."""
    if timeout is None:
        try:
            st = os.statvfs(path)
        except OSError as exc:
            return {"total_bytes": None, "free_bytes": None, "error": str(exc)}
    else:
        finished, st = call_with_timeout(lambda: os.statvfs(path), timeout)
        if not finished:
            return {
                "total_bytes": None,
                "free_bytes": None,
                "error": "statvfs did not answer in %ss (stale network mount?)" % timeout,
            }
        if isinstance(st, Exception):
            return {"total_bytes": None, "free_bytes": None, "error": str(st)}
    return {"total_bytes": st.f_blocks * st.f_frsize, "free_bytes": st.f_bavail * st.f_frsize}


def overlay_backing(
    mount: Dict[str, object], mounts: List[Dict[str, object]], sys_root: str
) -> Dict[str, Any]:
    """The device under an overlay's upper (writable) dir. On the host the upper dir is visible
    and resolves through mountinfo; inside a container it belongs to the host's namespace, so
    the backing disk cannot be named from here and the block_devices list is the best clue."""
    upper = None
    for option in mount["super_options"]:  # type: ignore[union-attr]
        if str(option).startswith("upperdir="):
            upper = str(option)[len("upperdir=") :]
    if upper and os.path.isdir(upper):
        backing = mount_for(
            upper, [m for m in mounts if m is not mount and m["fs_type"] != "overlay"]
        )
        if backing is not None:
            info = block_device(backing["major"], backing["minor"], sys_root)  # type: ignore[arg-type]
            info["via"] = "overlay upperdir on %s" % backing["mountpoint"]
            return info
    return {
        "name": None,
        "media": "unknown",
        "rotational": None,
        "via": "overlay; upper dir not visible here (container), see block_devices",
    }


def block_device(
    major: Optional[int], minor: Optional[int], sys_root: str = "/sys"
) -> Dict[str, Any]:
    """Name, media (nvme/ssd/hdd/virtio/...), rotational flag and model of the disk under
    a major:minor, following partitions up to their disk and device-mapper/md down to theirs."""
    unknown = {"name": None, "media": "unknown", "rotational": None, "model": None}
    if major is None or minor is None or major == 0:
        return unknown
    link = os.path.join(sys_root, "dev/block/%d:%d" % (major, minor))
    if not os.path.exists(link):
        return unknown
    path = os.path.realpath(link)
    if os.path.exists(os.path.join(path, "partition")):
        path = os.path.dirname(path)
    return disk_info(path, sys_root)


def disk_info(path: str, sys_root: str = "/sys", depth: int = 0) -> Dict[str, Any]:
    name = os.path.basename(path)
    slaves_dir = os.path.join(path, "slaves")
    slaves = sorted(os.listdir(slaves_dir)) if os.path.isdir(slaves_dir) else []
    if slaves and depth < 4:  # dm-crypt, LVM, md RAID: describe what they are built on
        parts = [
            disk_info(_disk_dir(os.path.join(sys_root, "class/block", s)), sys_root, depth + 1)
            for s in slaves
        ]
        medias = sorted({p["media"] for p in parts})
        return {
            "name": name,
            "media": medias[0] if len(medias) == 1 else "mixed",
            "rotational": any(p["rotational"] for p in parts),
            "model": None,
            "built_on": [p["name"] for p in parts],
        }
    rotational = (read_text(os.path.join(path, "queue/rotational")) or "").strip()
    model = (read_text(os.path.join(path, "device/model")) or "").strip() or None
    return {
        "name": name,
        "media": media(name, rotational == "1" if rotational else None),
        "rotational": rotational == "1" if rotational else None,
        "model": model,
    }


def _disk_dir(path: str) -> str:
    real = os.path.realpath(path)
    return os.path.dirname(real) if os.path.exists(os.path.join(real, "partition")) else real


def media(name: str, rotational: Optional[bool]) -> str:
    if name.startswith("nvme"):
        return "nvme"
    if name.startswith(("vd", "xvd")):
        # virtio and Xen disks report rotational=1 by default whatever backs them.
        return "virtio"
    if name.startswith(("loop", "ram", "zram")):
        return "memory" if name.startswith(("ram", "zram")) else "loop"
    if rotational is None:
        return "unknown"
    return "hdd" if rotational else "ssd"


def block_devices(sys_root: str = "/sys") -> List[Dict[str, Any]]:
    """Whole disks the kernel knows (in a container: the host's), for the overlay case."""
    result = []
    base = os.path.join(sys_root, "block")
    try:
        names = sorted(os.listdir(base))
    except OSError:
        return result
    for name in names:
        if name.startswith(("loop", "ram", "zram", "sr", "fd")):
            continue
        path = os.path.realpath(os.path.join(base, name))
        info = disk_info(path, sys_root)
        size = (read_text(os.path.join(path, "size")) or "").strip()
        info["size_bytes"] = int(size) * 512 if size.isdigit() else None
        result.append(info)
    return result


def _mask_source(source: str) -> str:
    # Network sources can carry credentials: "user:pass@host:/export" or s3fs "bucket:/key".
    if "@" in source:
        return "***@" + source.rsplit("@", 1)[1]
    return source
