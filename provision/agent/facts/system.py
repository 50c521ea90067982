"""Hostname, distribution, kernel, and whether this is a container, a VM, or a rental platform."""

from __future__ import annotations

import os

from provision.agent.facts._util import parse_key_values, read_text, run, which
from provision.agent.facts.mounts import read_mounts

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, List, Optional

# Words in /proc/1/cgroup that mean a container runtime started PID 1.
_CONTAINER_CGROUP_WORDS = (
    "docker",
    "kubepods",
    "containerd",
    "libpod",
    "podman",
    "lxc",
    "crio",
    "garden",
)


def hostname() -> str:
    # What socket.gethostname() returns (the UTS node name), without importing socket; the FQDN
    # (socket.getfqdn) may wait on DNS and the plain name is enough.
    return os.uname().nodename


def os_info(root: str = "/", mounts: Optional[List[Dict[str, object]]] = None) -> Dict[str, Any]:
    """`mounts`: /proc/self/mountinfo already parsed (facts reads it once per call)."""
    release = parse_key_values(read_text(os.path.join(root, "etc/os-release")) or "")
    uname = os.uname()
    uptime = read_text(os.path.join(root, "proc/uptime"))
    return {
        "id": release.get("ID"),
        "version_id": release.get("VERSION_ID"),
        "pretty_name": release.get("PRETTY_NAME"),
        "id_like": release.get("ID_LIKE"),
        "kernel": uname.release,
        "arch": uname.machine,
        "libc": _libc(),
        "uptime_s": int(float(uptime.split()[0])) if uptime else None,
        "container": detect_container(root, mounts),
        "virtualization": detect_vm(root),
        "provider": detect_provider(root),
    }


def _libc() -> Optional[str]:
    try:
        return os.confstr(
            "CS_GNU_LIBC_VERSION"
        )  # "glibc 2.35"; instant, unlike platform.libc_ver()
    except (ValueError, OSError, AttributeError):
        import platform

        return platform.libc_ver()[0] or None


def detect_container(
    root: str = "/", mounts: Optional[List[Dict[str, object]]] = None
) -> Dict[str, Any]:
    """{"is_container", "type", "evidence": [...]}; every clue found is listed."""
    evidence: List[str] = []
    kind = None
    if os.path.exists(os.path.join(root, ".dockerenv")):
        evidence.append("/.dockerenv exists")
        kind = "docker"
    if os.path.exists(os.path.join(root, "run/.containerenv")):
        evidence.append("/run/.containerenv exists")
        kind = kind or "podman"
    cgroup = read_text(os.path.join(root, "proc/1/cgroup")) or ""
    word = _first_word(cgroup, _CONTAINER_CGROUP_WORDS)
    if word:
        evidence.append("/proc/1/cgroup mentions %s" % word)
        kind = kind or {"kubepods": "kubernetes", "libpod": "podman", "crio": "cri-o"}.get(
            word, word
        )
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        evidence.append("KUBERNETES_SERVICE_HOST is set")
        kind = kind or "kubernetes"
    if mounts is None:
        mounts = read_mounts(os.path.join(root, "proc/self/mountinfo"))
    for mount in mounts:
        if mount["mountpoint"] == "/" and mount["fs_type"] == "overlay":
            evidence.append("/ is an overlay filesystem")
            break
    # Ask systemd only when the cheap clues found nothing (each run costs ~10-20 ms).
    if not evidence and root == "/" and which("systemd-detect-virt"):
        code, out = run(["systemd-detect-virt", "--container"], timeout=2)
        if code == 0 and out.strip() and out.strip() != "none":
            evidence.append("systemd-detect-virt --container: %s" % out.strip())
            kind = kind or out.strip()
    return {"is_container": bool(kind), "type": kind, "evidence": evidence}


def detect_vm(root: str = "/") -> Dict[str, Any]:
    """{"is_vm", "hypervisor", "evidence"}; a container on a VM is both."""
    evidence: List[str] = []
    hypervisor = None
    cpuinfo = read_text(os.path.join(root, "proc/cpuinfo"), limit=1 << 16) or ""
    if "hypervisor" in _first_flags(cpuinfo).split():
        evidence.append("cpu flag 'hypervisor'")
    vendor = (read_text(os.path.join(root, "sys/class/dmi/id/sys_vendor")) or "").strip()
    product = (read_text(os.path.join(root, "sys/class/dmi/id/product_name")) or "").strip()
    if vendor or product:
        dmi = "%s %s" % (vendor, product)
        for needle, name in (
            ("QEMU", "kvm"),
            ("KVM", "kvm"),
            ("VMware", "vmware"),
            ("VirtualBox", "oracle"),
            ("Xen", "xen"),
            ("Amazon EC2", "amazon"),
            ("Google Compute Engine", "google"),
            ("Microsoft Corporation Virtual", "microsoft"),
            ("Alibaba Cloud", "alibaba"),
            ("OpenStack", "openstack"),
        ):
            if needle.lower() in dmi.lower():
                evidence.append("DMI: %s" % dmi.strip())
                hypervisor = name
                break
    if not evidence and root == "/" and which("systemd-detect-virt"):
        code, out = run(["systemd-detect-virt", "--vm"], timeout=2)
        if code == 0 and out.strip() and out.strip() != "none":
            evidence.append("systemd-detect-virt --vm: %s" % out.strip())
            hypervisor = hypervisor or out.strip()
    return {"is_vm": bool(evidence), "hypervisor": hypervisor, "evidence": evidence}


def detect_provider(root: str = "/") -> Dict[str, Any]:
    """Which GPU rental platform this looks like, from the layouts each one is known for."""
    clues = (
        ("autodl", "root/autodl-tmp"),
        ("autodl", "root/autodl-fs"),
        ("autodl", "root/autodl-pub"),
        ("gpushare", "hy-tmp"),  # 恒源云
    )
    evidence: List[str] = []
    provider = None
    for name, path in clues:
        if os.path.exists(os.path.join(root, path)):
            evidence.append("/%s exists" % path)
            provider = provider or name
    for name, variable in (("runpod", "RUNPOD_POD_ID"), ("vast", "VAST_CONTAINERLABEL")):
        if os.environ.get(variable):
            evidence.append("%s is set" % variable)
            provider = provider or name
    return {"name": provider, "evidence": evidence}


def _first_word(text: str, words: Any) -> Optional[str]:
    """The word of `words` that occurs first in `text` (what a regex alternation finds)."""
    found = [(text.find(word), word) for word in words if word in text]
    return min(found)[1] if found else None


def _first_flags(cpuinfo: str) -> str:
    """The value of the first `flags : ...` line of /proc/cpuinfo ("" when there is none)."""
    for line in cpuinfo.splitlines():
        if line.startswith("flags"):
            key, sep, value = line.partition(":")
            if sep and key.strip() == "flags":
                return value
    return ""
