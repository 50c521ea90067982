"""Findings with evidence and a concrete recommendation, from one report document.

Each rule is a small function: report → Finding or None. Thresholds are named constants so the
docs (docs/reports.md) and the code say the same thing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from provision.report.document import get

LOADER_MARGIN = 1.10  # the loader must beat training by 10% to keep the GPU fed
AMP_WORTH_IT = 1.15  # recommend AMP from this measured speedup
DISK_FULL_FRACTION = 0.10
DISK_FULL_BYTES = 20 * 2**30
LOW_PEAK_PCT = 40.0
NETWORK_FS = ("nfs", "cifs", "smb", "fuse", "ceph", "gluster", "lustre", "beegfs", "9p")
THROTTLE_BAD = ("hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "sw_thermal_slowdown")


@dataclass
class Finding:
    id: str
    severity: str  # info | warn | critical
    title: str
    evidence: str
    recommendation: str

    def as_dict(self) -> dict[str, str]:
        return asdict(self)


Rule = Callable[[dict[str, Any]], "Finding | None"]
RULES: list[Rule] = []


def rule(fn: Rule) -> Rule:
    RULES.append(fn)
    return fn


def diagnose(doc: dict[str, Any]) -> list[Finding]:
    findings = []
    for check in RULES:
        try:
            found = check(doc)
        except (TypeError, ValueError, KeyError, ZeroDivisionError):
            continue  # a malformed section must not hide the other findings
        if found:
            findings.append(found)
    order = {"critical": 0, "warn": 1, "info": 2}
    return sorted(findings, key=lambda f: order.get(f.severity, 3))


@rule
def compat_mismatch(doc: dict[str, Any]) -> Finding | None:
    verdict = get(doc, "compat.verdict")
    if verdict not in ("WARN", "BROKEN"):
        return None
    problems = get(doc, "compat.problems") or get(doc, "compat.warnings") or []
    fix = get(doc, "compat.fix") or "run `provision install HOST` to install a matched build"
    return Finding(
        "compat_mismatch", "critical" if verdict == "BROKEN" else "warn",
        "Driver / CUDA / cuDNN / GPU architecture mismatch",
        "; ".join(str(p) for p in problems) or f"verdict {verdict}", str(fix))


@rule
def loader_bottleneck(doc: dict[str, Any]) -> Finding | None:
    train = get(doc, "bench.amp.train_samples_per_s")
    loader = get(doc, "bench.dataloader.best_samples_per_s")
    workers = get(doc, "bench.dataloader.best_num_workers")
    if not train or not loader:
        return None
    if loader >= train * LOADER_MARGIN:
        return None
    on_ssd = not _dataset_on_network(doc)
    return Finding(
        "loader_bottleneck", "critical" if loader < 0.5 * train else "warn",
        "The DataLoader cannot feed the GPU",
        f"best loader {loader:.0f} samples/s (num_workers={workers}) vs training {train:.0f} samples/s",
        f"use num_workers={workers}, pin_memory=True, persistent_workers=True; "
        + ("decode on the GPU (torchvision.io.decode_jpeg(device='cuda') / DALI) or pre-resize images"
           if on_ssd else "stage the dataset to the local SSD: provision stage SRC HOST"),
    )


@rule
def num_workers_default(doc: dict[str, Any]) -> Finding | None:
    curve = get(doc, "bench.dataloader.curve") or []
    best = get(doc, "bench.dataloader.best_num_workers")
    zero = next((p.get("samples_per_s") for p in curve if p.get("num_workers") == 0), None)
    top = get(doc, "bench.dataloader.best_samples_per_s")
    if not best or not zero or not top or top < 1.3 * zero:
        return None
    return Finding(
        "num_workers", "info", f"Set DataLoader num_workers={best}",
        f"{top:.0f} samples/s with num_workers={best} vs {zero:.0f} with 0 ({top / zero:.1f}×)",
        f"DataLoader(..., num_workers={best}, pin_memory=True, persistent_workers=True)",
    )


def _dataset_on_network(doc: dict[str, Any]) -> bool:
    for ds in doc.get("datasets") or []:
        if ds.get("network") or any(n in str(ds.get("fs_type", "")) for n in NETWORK_FS):
            return True
    return bool(get(doc, "facts.data_dir.network"))


@rule
def dataset_on_network_disk(doc: dict[str, Any]) -> Finding | None:
    if not _dataset_on_network(doc):
        return None
    seq_local = get(doc, "bench.storage.data_dir.seq_read_mb_s")
    seq_net = get(doc, "bench.storage.network_dir.seq_read_mb_s")
    evidence = "the dataset or data dir is on a network filesystem"
    if seq_local and seq_net:
        evidence += f"; sequential read {seq_net:.0f} MB/s there vs {seq_local:.0f} MB/s on the local SSD"
    return Finding("dataset_on_network_disk", "warn", "Training data on a network disk", evidence,
                   "copy it to the local SSD as LMDB: provision stage SRC HOST (resumable, verified)")


@rule
def amp_unused(doc: dict[str, Any]) -> Finding | None:
    speedup = get(doc, "bench.amp.speedup")
    if not speedup or speedup < AMP_WORTH_IT:
        return None
    dtype = get(doc, "bench.amp.best_dtype") or "bf16"
    how = ("torch.autocast('cuda', dtype=torch.bfloat16) (no GradScaler needed)" if dtype == "bf16"
           else "torch.autocast('cuda', dtype=torch.float16) with torch.amp.GradScaler('cuda')")
    return Finding("amp", "warn", f"Mixed precision is {speedup:.2f}× faster here",
                   f"measured {dtype} AMP vs fp32 on the bench convnet: {speedup:.2f}×", f"train with {how}")


@rule
def vram_headroom(doc: dict[str, Any]) -> Finding | None:
    mem = get(doc, "bench.memory") or {}
    if mem.get("status") not in (None, "ok"):
        return None
    models = mem.get("models") or {}
    for name, m in models.items():
        max_batch = m.get("max_batch")
        accum = m.get("grad_accum_steps")
        target = m.get("target_batch") or mem.get("target_batch")
        if max_batch:
            return Finding(
                "vram_headroom", "info", f"Largest batch that fits ({name}): {max_batch}",
                f"batch search with OOM recovery found {max_batch} fits"
                + (f"; a target batch of {target} needs {accum} accumulation steps" if accum and target else ""),
                f"use batch {max_batch} per step" + (f" with gradient accumulation × {accum}" if accum and accum > 1 else ""),
            )
    return None


@rule
def pcie_below_max(doc: dict[str, Any]) -> Finding | None:
    low = []
    for g in get(doc, "facts.gpus") or []:
        pcie = g.get("pcie") or {}
        gc, gm = pcie.get("gen_current"), pcie.get("gen_max")
        wc, wm = pcie.get("width_current"), pcie.get("width_max")
        loaded = get(doc, f"bench.sampler.gpus.{g.get('index')}.pcie_gen_max_seen")
        if loaded:
            gc = loaded
        if (gc and gm and gc < gm) or (wc and wm and wc < wm):
            low.append(f"GPU {g.get('index')}: gen{gc}x{wc} of gen{gm}x{wm}")
    h2d = get(doc, "bench.transfer.pinned_h2d_gb_s")
    theo = get(doc, "bench.transfer.theoretical_gb_s")
    if h2d and theo and h2d < 0.5 * theo:
        low.append(f"pinned H2D {h2d:.1f} GB/s vs {theo:.1f} GB/s theoretical")
    if not low:
        return None
    return Finding("pcie_below_max", "warn", "PCIe link below its maximum", "; ".join(low),
                   "links drop speed when idle — this was read under load if the bench ran; if it persists, "
                   "ask the provider to reseat the card or move to another machine")


@rule
def throttling(doc: dict[str, Any]) -> Finding | None:
    seen = []
    for idx, g in (get(doc, "bench.sampler.gpus") or {}).items():
        reasons = [r for r in (g.get("throttle_reasons_seen") or []) if r in THROTTLE_BAD]
        if reasons:
            seen.append(f"GPU {idx}: {', '.join(reasons)} (max {g.get('temperature_max_c', '?')} °C)")
    if not seen:
        return None
    return Finding("throttling", "critical", "GPU throttled during the benchmark", "; ".join(seen),
                   "thermal/power slowdown: check cooling and power limit (nvidia-smi -q -d PERFORMANCE); "
                   "ask for another machine if it persists")


@rule
def disk_nearly_full(doc: dict[str, Any]) -> Finding | None:
    dd = get(doc, "facts.data_dir") or {}
    free, total = dd.get("free_bytes"), dd.get("total_bytes")
    if free is None:
        return None
    if free >= DISK_FULL_BYTES and (not total or free >= DISK_FULL_FRACTION * total):
        return None
    return Finding("disk_nearly_full", "warn", f"Data disk nearly full: {free / 2**30:.1f} GiB free",
                   f"{dd.get('path')}: {free / 2**30:.1f} GiB free" + (f" of {total / 2**30:.0f} GiB" if total else ""),
                   "free space (old checkpoints, pip/HF caches) or rent a larger data disk before staging data")


@rule
def low_matmul_peak(doc: dict[str, Any]) -> Finding | None:
    for g in get(doc, "bench.compute.per_gpu") or []:
        pct = (g.get("pct_of_peak") or {}).get("bf16") or (g.get("pct_of_peak") or {}).get("fp16")
        if pct is not None and pct < LOW_PEAK_PCT:
            return Finding("low_matmul_peak", "warn", f"GPU {g.get('index')} reaches {pct:.0f}% of its dense peak",
                           f"{g.get('name')}: half-precision matmul at {pct:.0f}% of the datasheet's dense peak",
                           "check clocks/throttling (provision health) and other processes on the GPU")
    return None
