"""Findings with evidence and a concrete recommendation, from one report document.

Each rule is a small function: report -> Finding or None, reading the real result schemas
(bench: docs/bench.md, facts: docs/facts.md, compat: `provision check`'s host result).
Thresholds are named constants so docs/reports.md and the code say the same thing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from provision.report.schema import Finding, cudnn_text, get, loader_source

DISK_CRITICAL_BYTES = 1 << 30  # as `provision health`: under 1 GiB free fails
DISK_WARN_BYTES = 10 << 30  # and under 10 GiB (or 5% of the disk) is nearly full
DISK_WARN_FRACTION = 0.05
NETWORK_FS = (
    "nfs",
    "cifs",
    "smb",
    "fuse",
    "ceph",
    "gluster",
    "lustre",
    "beegfs",
    "9p",
    "juicefs",
)


Rule = Callable[[dict[str, Any]], "Finding | None"]
RULES: list[tuple[int, Rule]] = []  # (order, rule): findings of one severity in this order


def rule(order: int) -> Callable[[Rule], Rule]:
    """Registers a rule, here or from the package that owns its section (provision/bench/):
    `order` places its finding among those of the same severity, whatever the import order."""

    def add(fn: Rule) -> Rule:
        RULES.append((order, fn))
        RULES.sort(key=lambda entry: entry[0])
        return fn

    return add


def diagnose(doc: dict[str, Any]) -> list[Finding]:
    """Every rule's finding, most severe first. A malformed section skips that rule only."""
    findings = []
    for _, check in RULES:
        try:
            found = check(doc)
        except (TypeError, ValueError, KeyError, AttributeError, ZeroDivisionError):
            continue  # a malformed section must not hide the other findings
        if found:
            findings.append(found)
    order = {"critical": 0, "warn": 1, "info": 2}
    return sorted(findings, key=lambda f: order.get(f.severity, 3))


def ok_section(section: Any) -> bool:
    return isinstance(section, dict) and section.get("status", "ok") == "ok"


def _version_tuple(text: Any) -> tuple[int, ...]:
    parts = []
    for piece in str(text or "").split("."):
        digits = "".join(c for c in piece if c.isdigit())
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)


# -- compatibility -------------------------------------------------------------------------------


@rule(10)
def compat_mismatch(doc: dict[str, Any]) -> Finding | None:
    """`provision check`'s verdict, plus what the bench itself saw: torch built for a newer CUDA
    than the driver, a cuDNN other than the build's, GPUs present but torch on the CPU."""
    evidence: list[str] = []
    severity = None
    verdict = get(doc, "compat.verdict")
    if verdict in ("WARN", "BROKEN"):
        severity = "critical" if verdict == "BROKEN" else "warn"
        items = list(get(doc, "compat.problems") or []) + list(get(doc, "compat.warnings") or [])
        evidence.append(
            f"provision check: {verdict}" + (": " + "; ".join(map(str, items)) if items else "")
        )
    torch_cuda = get(doc, "compat.verify.torch.cuda") or get(doc, "bench.host.cuda")
    driver_cuda = get(doc, "compat.host.cuda_max") or get(doc, "facts.nvidia.cuda_driver_version")
    gpus = get(doc, "facts.gpus") or []
    if torch_cuda and driver_cuda:
        built, driver = _version_tuple(torch_cuda)[:2], _version_tuple(driver_cuda)[:2]
        if built and driver and built > driver:
            if built[0] > driver[0]:
                severity = "critical"
                evidence.append(
                    f"torch is built for CUDA {torch_cuda} but the driver supports CUDA {driver_cuda} at most"
                    " (a newer major version cannot run)"
                )
            else:
                severity = severity or "warn"
                evidence.append(
                    f"torch is built for CUDA {torch_cuda}, the driver supports {driver_cuda}: runs through"
                    " minor-version compatibility (no PTX JIT, some libraries refuse)"
                )
    planned = get(doc, "compat.plan.cudnn")
    loaded = cudnn_text(get(doc, "compat.verify.torch.cudnn") or get(doc, "bench.host.cudnn"))
    if (
        planned
        and loaded
        and get(doc, "compat.plan.action") == "keep"
        and _version_tuple(planned)[:1] != _version_tuple(loaded)[:1]
    ):
        severity = severity or "warn"
        evidence.append(
            f"cuDNN {loaded} is loaded but this torch build ships cuDNN {planned}"
            " (another cuDNN earlier on LD_LIBRARY_PATH?)"
        )
    if gpus and get(doc, "bench.host.device") == "cpu":
        severity = "critical"
        evidence.append(
            f"{len(gpus)} NVIDIA GPU(s) in the facts, but the benchmark's torch "
            f"{get(doc, 'bench.host.torch') or '?'} ran on the CPU (CPU-only build or CUDA unusable)"
        )
    if severity is None:
        return None
    fix = get(doc, "compat.fix") or (
        f"run `provision check {doc.get('host')}` for the matched build, then "
        f"`provision install {doc.get('host')}`"
    )
    return Finding(
        "compat_mismatch",
        severity,
        "Driver / CUDA / cuDNN / PyTorch mismatch",
        "; ".join(evidence),
        str(fix),
    )


def _mount_of(doc: dict[str, Any], path: str) -> dict[str, Any] | None:
    best = None
    for m in get(doc, "facts.disks.mounts") or []:
        point = str(m.get("mountpoint") or "")
        inside = path == point or path.startswith(point.rstrip("/") + "/")
        if point and inside and (best is None or len(point) > len(best["mountpoint"])):
            best = m
    return best


def _is_network(fs_type: Any) -> bool:
    return any(n in str(fs_type or "").lower() for n in NETWORK_FS)


def dataset_on_network(doc: dict[str, Any]) -> str | None:
    """Why the training data is on network storage, or None."""
    for ds in doc.get("datasets") or []:
        path = str(ds.get("path") or "")
        # The mount holding the path beats a dataset's own fs_type, which callers may have
        # copied from the data dir rather than looked up for this path.
        mount = _mount_of(doc, path) if path.startswith("/") else None
        fs = (mount or {}).get("fs_type") or ds.get("fs_type")
        network = (mount or {}).get("network") if mount else ds.get("network")
        if network or _is_network(fs):
            return f"dataset {ds.get('name') or path} at {path} is on {fs or 'network storage'}"
    source = (loader_source(doc) or {}).get("source") or {}
    if source.get("role") == "network":
        return f"the DataLoader's primary source {source.get('path')} is the network copy"
    data_dir = get(doc, "facts.data_dir") or {}
    if data_dir.get("network"):
        return f"the data dir {data_dir.get('path')} is on {data_dir.get('fs_type') or 'network storage'}"
    return None


@rule(50)
def dataset_on_network_disk(doc: dict[str, Any]) -> Finding | None:
    why = dataset_on_network(doc)
    if why is None:
        return None
    evidence = [why]
    dirs = {d.get("role"): d for d in get(doc, "bench.storage.dirs") or [] if isinstance(d, dict)}
    local, net = get(dirs, "data.seq_read.mb_s"), get(dirs, "network.seq_read.mb_s")
    if local and net:
        evidence.append(
            f"sequential read {net:.0f} MB/s there vs {local:.0f} MB/s on the local disk"
        )
    l_iops, n_iops = get(dirs, "data.random_read.iops"), get(dirs, "network.random_read.iops")
    if l_iops and n_iops:
        evidence.append(f"4 KiB random reads {n_iops:.0f} vs {l_iops:.0f} IOPS")
    by_role = {}
    for s in get(doc, "bench.dataloader.sources") or []:
        role = (s.get("source") or {}).get("role")
        if s.get("best") and role:
            by_role[role] = s["best"]["samples_per_s"]
    if by_role.get("network") and (by_role.get("local") or by_role.get("raw")):
        evidence.append(
            f"DataLoader {by_role['network']:.0f} samples/s from the network copy vs "
            f"{(by_role.get('local') or by_role.get('raw')):.0f} locally"
        )
    free = get(doc, "facts.data_dir.free_bytes")
    room = f" ({free / 2**30:.0f} GiB free on {get(doc, 'facts.data_dir.path')})" if free else ""
    return Finding(
        "dataset_on_network_disk",
        "warn",
        "Training data on a network disk",
        "; ".join(evidence),
        f"copy it to the local SSD as LMDB{room}: provision stage SRC {doc.get('host')} "
        "(resumable, verified), then read it with provision.data.LMDBDataset",
    )


# -- disk ----------------------------------------------------------------------------------------


@rule(110)
def disk_nearly_full(doc: dict[str, Any]) -> Finding | None:
    """Judged by percent of the disk and by what is about to be written there (the staged
    datasets), not by a fixed size: a 20 GiB disk that is all free is not "nearly full"."""
    dd = get(doc, "facts.data_dir") or {}
    free, total = dd.get("free_bytes"), dd.get("total_bytes")
    if free is None:
        data = next(
            (d for d in get(doc, "bench.storage.dirs") or [] if d.get("role") == "data"), {}
        )
        if data.get("free_gb") is None:
            return None
        free, total = data["free_gb"] * 1e9, (data.get("total_gb") or 0) * 1e9 or None
        dd = {"path": data.get("path")}
    need = _bytes_to_write(doc)
    low_fraction = bool(total) and free < DISK_WARN_FRACTION * total
    short = free < need
    # with no size known, only the absolute floor can judge
    unknown_and_low = not total and free < DISK_WARN_BYTES
    if not (low_fraction or short or unknown_and_low):
        return None
    critical = short or (free < DISK_CRITICAL_BYTES and (low_fraction or not total))
    share = f" ({100 * free / total:.0f}%)" if total else ""
    return Finding(
        "disk_nearly_full",
        "critical" if critical else "warn",
        f"Data disk nearly full: {free / 2**30:.1f} GiB free{share}",
        f"{dd.get('path')}: {free / 2**30:.1f} GiB free"
        + (f" of {total / 2**30:.0f} GiB ({100 * free / total:.0f}%)" if total else "")
        + (f"; the staged datasets take {need / 2**30:.1f} GiB" if need else ""),
        "free space (old checkpoints, pip/HF caches: pip cache purge, ~/.cache/huggingface) or "
        "rent a larger data disk before staging data or writing checkpoints",
    )


def _bytes_to_write(doc: dict[str, Any]) -> float:
    """What staging writes to the data disk: the datasets' LMDB sizes (0 when none is known)."""
    total = 0.0
    for ds in doc.get("datasets") or []:
        size = ds.get("bytes") if isinstance(ds, dict) else None
        if isinstance(size, (int, float)) and size > 0:
            total += float(size)
    return total
