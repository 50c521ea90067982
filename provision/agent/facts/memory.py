"""RAM as this process sees it: the host's /proc/meminfo capped by the cgroup limit, plus the two
container limits DataLoader workers hit: /dev/shm (Docker's default 64 MiB shm is what makes
PyTorch DataLoader workers die with "bus error") and the open-files limit (`ulimit -n`: workers
share each batch through a file descriptor; a low one gives "Too many open files")."""

from __future__ import annotations

import os

from provision.agent.facts import cgroup
from provision.agent.facts._util import read_text

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, List, Optional


def parse_meminfo(text: str) -> Dict[str, int]:
    """Field -> bytes (the file says kB, meaning KiB)."""
    values = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            scale = 1024 if len(parts) > 1 and parts[1].lower() == "kb" else 1
            values[key.strip()] = int(parts[0]) * scale
    return values


def gather(root: str = "/", mounts: Optional[List[Dict[str, object]]] = None) -> Dict[str, Any]:
    """`mounts`: /proc/self/mountinfo already parsed, for the cgroup lookup."""
    info = parse_meminfo(read_text(os.path.join(root, "proc/meminfo")) or "")
    total = info.get("MemTotal")
    available = info.get("MemAvailable", info.get("MemFree"))
    limits = cgroup.memory_limit(root, mounts)
    limit = limits["limit_bytes"]
    effective_total = min(total, limit) if total and limit else (limit or total)
    effective_available = available
    if limit is not None and limits["usage_bytes"] is not None:
        room = max(0, limit - limits["usage_bytes"])
        effective_available = min(available, room) if available is not None else room
    return {
        "total_bytes": total,
        "available_bytes": available,
        "swap_total_bytes": info.get("SwapTotal"),
        # the raw fields Ansible's memory_mb fact is made of (facts_ansible.py)
        "free_bytes": info.get("MemFree"),
        "buffers_bytes": info.get("Buffers"),
        "cached_bytes": info.get("Cached"),
        "swap_free_bytes": info.get("SwapFree"),
        "swap_cached_bytes": info.get("SwapCached"),
        "cgroup_limit_bytes": limit,
        "cgroup_usage_bytes": limits["usage_bytes"],
        "cgroup_version": limits["version"],
        "effective_total_bytes": effective_total,
        "effective_available_bytes": effective_available,
        "shm": _shm(os.path.join(root, "dev/shm")),
        "open_files": _nofile(),
    }


def _nofile() -> Optional[Dict[str, Optional[int]]]:
    """This login's open-files limit (soft, hard; None: unlimited), what a job started from it gets."""
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (ImportError, OSError, ValueError):
        return None
    inf = resource.RLIM_INFINITY
    return {"soft": None if soft == inf else int(soft), "hard": None if hard == inf else int(hard)}


def _shm(path: str) -> Optional[Dict[str, int]]:
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return {"total_bytes": st.f_blocks * st.f_frsize, "free_bytes": st.f_bavail * st.f_frsize}
