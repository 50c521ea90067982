"""CPU model and how many CPUs this process may really use.

effective_cpus = min(CPUs in our affinity mask, cgroup CPU quota): a container pinned to 16
CPUs with a quota of 4 CPUs runs 4 CPUs' worth of work, so 4 is what sizes DataLoader workers.
"""

from __future__ import annotations

import os

from provision.agent.facts import cgroup
from provision.agent.facts._util import read_text

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, List, Optional


def gather(root: str = "/", mounts: Optional[List[Dict[str, object]]] = None) -> Dict[str, Any]:
    """`mounts`: /proc/self/mountinfo already parsed, for the cgroup lookup."""
    info = parse_cpuinfo(read_text(os.path.join(root, "proc/cpuinfo"), limit=8 << 20) or "")
    logical = os.cpu_count()
    affinity = _affinity()
    quota = cgroup.cpu_quota(root, mounts)
    limits = [n for n in (affinity, quota["cpus"]) if n is not None]
    effective: Optional[float] = min(limits) if limits else logical
    return {
        "model": info["model"],
        "vendor": info["vendor"],
        "sockets": info["sockets"],
        "physical_cores": info["physical_cores"],
        "logical_cpus": logical,
        "affinity_cpus": affinity,
        "cgroup_quota_cpus": quota["cpus"],
        "cgroup_version": quota["version"],
        "effective_cpus": _tidy(effective),
        # Whole CPUs to plan worker processes with: a 2.5-CPU quota runs 2 busy workers well.
        "usable_cpus": max(1, int(effective)) if effective else None,  # int() floors: > 0
        "hypervisor_flag": info["hypervisor"],
    }


def _affinity() -> Optional[int]:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None


def _tidy(value: Optional[float]) -> Optional[float]:
    if value is None:
        return None
    return int(value) if float(value).is_integer() else round(value, 2)


def parse_cpuinfo(text: str) -> Dict[str, Any]:
    """Model, vendor, sockets and physical cores from /proc/cpuinfo (x86 and Arm layouts)."""
    model = vendor = None
    cores = set()
    sockets = set()
    physical_id = core_id = None
    hypervisor = False
    for line in text.splitlines() + [""]:
        if not line.strip():  # a blank line ends one logical CPU's block
            if core_id is not None:
                cores.add((physical_id, core_id))
            if physical_id is not None:
                sockets.add(physical_id)
            physical_id = core_id = None
            continue
        key, _, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if key == "model name" and model is None:
            model = value
        elif key in ("Hardware", "Model") and model is None and value:  # Arm boards
            model = value
        elif key == "vendor_id" and vendor is None:
            vendor = value
        elif key == "CPU implementer" and vendor is None:
            vendor = "arm:%s" % value
        elif key == "physical id":
            physical_id = value
        elif key == "core id":
            core_id = value
        elif key == "flags" and "hypervisor" in value.split():
            hypervisor = True
    return {
        "model": model,
        "vendor": vendor,
        "sockets": len(sockets) or None,
        "physical_cores": len(cores) or None,
        "hypervisor": hypervisor,
    }
