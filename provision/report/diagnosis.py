"""Findings with evidence and a concrete recommendation, from one report document.

Each rule is a small function: report -> Finding or None, reading the real result schemas
(bench: docs/bench.md, facts: docs/facts.md, compat: `provision check`'s host result).
Thresholds are named constants so docs/reports.md and the code say the same thing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from provision.report.schema import Finding, cudnn_text, get, loader_curve, loader_source

# The agent's own DataLoader verdict calls loading "ok" from 1.2x the training rate
# (provision/agent/bench/dataloader.py): a loader only just as fast stalls on every hiccup.
LOADER_MARGIN = 1.2
LOADER_CRITICAL = 0.5  # loading under half the training rate: the GPU idles most of the time
WORKERS_GAIN = 1.3  # recommend num_workers when the best setting beats num_workers=0 by 30%
AMP_WORTH_IT = 1.15  # recommend mixed precision from this measured speedup
DISK_CRITICAL_BYTES = 1 << 30  # as `provision health`: under 1 GiB free fails
DISK_WARN_BYTES = 10 << 30  # and under 10 GiB (or 5% of the disk) is nearly full
DISK_WARN_FRACTION = 0.05
LOW_PEAK_PCT = 40.0  # half-precision matmul under 40% of the datasheet's dense peak
PCIE_LOW_PCT = 50.0  # pinned copies under half of the link's theoretical rate
THROTTLE_MIN_FRACTION = 0.05  # a slowdown in at least 5% of the samples, not a one-sample blip
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
# NVML clock-event reasons that mean heat, power or hardware slowed the GPU. The power cap
# (sw_power_cap) is normal at full load and is not in this list.
THROTTLE_BAD = (
    "hw_slowdown",
    "hw_thermal_slowdown",
    "hw_power_brake_slowdown",
    "sw_thermal_slowdown",
)


Rule = Callable[[dict[str, Any]], "Finding | None"]
RULES: list[Rule] = []


def rule(fn: Rule) -> Rule:
    RULES.append(fn)
    return fn


def diagnose(doc: dict[str, Any]) -> list[Finding]:
    """Every rule's finding, most severe first. A malformed section skips that rule only."""
    findings = []
    for check in RULES:
        try:
            found = check(doc)
        except (TypeError, ValueError, KeyError, AttributeError, ZeroDivisionError):
            continue  # a malformed section must not hide the other findings
        if found:
            findings.append(found)
    order = {"critical": 0, "warn": 1, "info": 2}
    return sorted(findings, key=lambda f: order.get(f.severity, 3))


def _ok(section: Any) -> bool:
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


@rule
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


# -- data loading --------------------------------------------------------------------------------


@rule
def loader_bottleneck(doc: dict[str, Any]) -> Finding | None:
    loader = get(doc, "bench.dataloader")
    if not _ok(loader):
        return None
    train = get(doc, "bench.amp.train_samples_per_s") or loader.get("train_samples_per_s")
    best = loader.get("best_samples_per_s")
    workers = loader.get("best_num_workers")
    if not train or not best or best >= train * LOADER_MARGIN:
        return None
    verdict = loader.get("verdict") or {}
    cores = loader.get("cores")
    needed = verdict.get("workers_needed")
    source = (loader_source(doc) or {}).get("source") or {}
    on_network = source.get("role") == "network" or _dataset_on_network(doc) is not None
    ratio = best / train
    raise_workers = bool(needed and cores and workers is not None and workers < needed <= cores)
    if raise_workers:
        steps = [
            f"raise num_workers to {needed} (best measured: {workers}; {cores} cores): "
            f"DataLoader(..., num_workers={needed}, pin_memory=True, persistent_workers=True)"
        ]
    else:
        steps = [
            f"DataLoader(..., num_workers={workers}, pin_memory=True, persistent_workers=True)"
        ]
    if on_network:
        steps.append(
            f"stage the dataset to the local SSD as LMDB: provision stage SRC {doc.get('host')}"
        )
    elif not raise_workers:
        steps.append(
            f"decoding is CPU-bound at {cores or '?'} cores: pre-resize the images, store them as "
            "LMDB on the local SSD (provision stage), or decode on the GPU (NVIDIA DALI)"
        )
    return Finding(
        "loader_bottleneck",
        "critical" if ratio < LOADER_CRITICAL else "warn",
        "The DataLoader cannot feed the GPU"
        if get(doc, "bench.amp.device", "").startswith("cuda")
        else "The DataLoader cannot keep up with training",
        f"best loader {best:.0f} samples/s (num_workers={workers}, source "
        f"{source.get('name') or '?'} {source.get('format') or ''}) vs training "
        f"{train:.0f} samples/s: {ratio:.2f}x, needs {LOADER_MARGIN}x"
        + (f"; the agent's verdict: {verdict['verdict']}" if verdict.get("verdict") else ""),
        "; ".join(steps),
    )


@rule
def num_workers(doc: dict[str, Any]) -> Finding | None:
    """The setting to copy into the training script, when it matters and loading keeps up."""
    loader = get(doc, "bench.dataloader")
    if not _ok(loader) or (loader.get("verdict") or {}).get("verdict") in (
        "marginal",
        "bottleneck",
    ):
        return None  # loader_bottleneck says it, with more
    curve = dict(loader_curve(doc))
    best = loader.get("best_num_workers")
    top = loader.get("best_samples_per_s")
    zero = curve.get(0)
    if not best or not zero or not top or top < WORKERS_GAIN * zero:
        return None
    return Finding(
        "num_workers",
        "info",
        f"Use DataLoader num_workers={best}",
        f"{top:.0f} samples/s with num_workers={best} vs {zero:.0f} with 0 ({top / zero:.1f}x); "
        "curve " + ", ".join(f"{w}: {v:.0f}" for w, v in sorted(curve.items())),
        f"DataLoader(..., num_workers={best}, pin_memory=True, persistent_workers=True)",
    )


@rule
def loader_shm(doc: dict[str, Any]) -> Finding | None:
    """The recommended num_workers' batches in flight (workers x prefetch_factor 2 x batch bytes)
    against /dev/shm: past it the workers die with "Bus error" (Docker's default shm is 64 MB)."""
    loader = get(doc, "bench.dataloader")
    if not _ok(loader):
        return None
    shm_mb, workers = loader.get("shm_mb"), loader.get("best_num_workers")
    batch, size = loader.get("batch_size"), loader.get("image_size")
    if not shm_mb or not workers or not batch or not size:
        return None
    batch_mb = batch * 3 * size * size / 2**20  # the bench's batches: uint8 CHW images
    need = workers * 2 * batch_mb
    if need <= 0.9 * shm_mb:
        return None
    return Finding(
        "loader_shm", "warn", f"num_workers={workers} will not fit in /dev/shm ({shm_mb} MB)",
        f"{workers} workers x prefetch_factor 2 x {batch_mb:.1f} MB per batch of {batch} uint8 "
        f"{size}px images = {need:.0f} MB in shared memory at once (float32 batches: 4x that); "
        f"/dev/shm is {shm_mb} MB, and workers past it die with \"Bus error\"",
        "give the container a bigger /dev/shm where the provider allows it (docker `--shm-size=8g` or "
        "`--ipc=host`), or `torch.multiprocessing.set_sharing_strategy('file_system')`, or fewer "
        "workers / a smaller prefetch_factor",
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


def _dataset_on_network(doc: dict[str, Any]) -> str | None:
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


@rule
def dataset_on_network_disk(doc: dict[str, Any]) -> Finding | None:
    why = _dataset_on_network(doc)
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


# -- GPU use -------------------------------------------------------------------------------------


@rule
def amp_unused(doc: dict[str, Any]) -> Finding | None:
    amp = get(doc, "bench.amp")
    if not _ok(amp):
        return None
    speedup = amp.get("speedup")
    if not speedup or speedup < AMP_WORTH_IT:
        return None
    dtype = amp.get("best_dtype") or "bf16"
    device = "cuda" if str(amp.get("device") or "").startswith("cuda") else "cpu"
    runs = get(amp, "models.convnet.runs") or {}
    fp32, fast = get(runs, "fp32.samples_per_s"), get(runs, f"{dtype}.samples_per_s")
    figures = f" ({fp32:.0f} -> {fast:.0f} samples/s)" if fp32 and fast else ""
    if dtype == "fp16":
        how = (
            f"torch.autocast('{device}', dtype=torch.float16) with torch.amp.GradScaler('{device}') "
            "(fp16 needs loss scaling)"
        )
    else:
        how = f"torch.autocast('{device}', dtype=torch.bfloat16) (no GradScaler needed)"
    return Finding(
        "amp_unused",
        "warn",
        f"Mixed precision trains {speedup:.2f}x faster here",
        f"measured {dtype} AMP vs fp32 on the bench convnet: {speedup:.2f}x{figures}",
        f"train with {how}",
    )


@rule
def vram_headroom(doc: dict[str, Any]) -> Finding | None:
    """The largest batch that fits and the accumulation to reach the target batch."""
    mem = get(doc, "bench.memory")
    if not _ok(mem):
        return None
    models = mem.get("models") or {}
    name = "convnet" if "convnet" in models else next(iter(models), None)
    m = models.get(name) or {}
    max_batch = m.get("max_batch")
    if not max_batch:
        return None
    accum = m.get("grad_accumulation") or {}
    target, steps, micro = accum.get("target_batch"), accum.get("steps"), accum.get("micro_batch")
    where = "GPU memory" if str(mem.get("device") or "").startswith("cuda") else "the memory budget"
    bound = {
        "oom": "the next size ran out of memory",
        "budget": "the next size would exceed the memory budget",
        "time": "the search ran out of time, so more may fit",
        "cap": "the search cap",
    }.get(str(m.get("bounded_by")), str(m.get("bounded_by") or "?"))
    evidence = f"{name} ({mem.get('dtype')}): batch {max_batch} fits in {where} ({bound})" + (
        f"; a target batch of {target} needs {steps} accumulation steps of {micro}"
        if target and steps and steps > 1
        else ""
    )
    if m.get("per_sample_mb"):
        evidence += f"; about {m['per_sample_mb']} MB per sample"
    gpu_total = _gpu_memory_mib(doc)
    bench_batch = get(doc, f"bench.amp.models.{name}.batch")
    peak = max(
        [
            r.get("peak_memory_mb") or 0
            for r in (get(doc, f"bench.amp.models.{name}.runs") or {}).values()
        ]
        or [0]
    )
    if gpu_total and peak and where == "GPU memory":
        evidence += f"; the bench's batch {bench_batch} peaked at {peak:.0f} of {gpu_total:.0f} MiB"
    at_least = "" if m.get("exact") or m.get("bounded_by") != "time" else "at least "
    rec = f"batches up to {at_least}{max_batch} fit per step"
    if steps and steps > 1:
        rec += (
            f"; for an effective batch of {target}: {steps} gradient-accumulation steps of {micro}"
        )
    elif target:
        rec += f"; the target batch of {target} fits without gradient accumulation"
    rec += " (scale the learning rate with the effective batch)"
    return Finding(
        "vram_headroom",
        "info",
        f"Batch size: up to {at_least}{max_batch} per step ({name})",
        evidence,
        rec,
    )


def _gpu_memory_mib(doc: dict[str, Any]) -> float | None:
    gpu = get(doc, "facts.gpus.0") or {}
    total = get(gpu, "memory.total_mib")
    if total:
        return float(total)
    if gpu.get("memory_total_bytes"):
        return gpu["memory_total_bytes"] / 2**20
    return None


@rule
def pcie_below_max(doc: dict[str, Any]) -> Finding | None:
    """Judged under load: an idle link trains down to a lower generation to save power."""
    low = []
    measured = set()
    for t in get(doc, "bench.transfer.per_gpu") or []:
        link = t.get("link") or {}
        idx = t.get("index")
        measured.add(idx)
        if t.get("link_below_max"):
            low.append(
                f"GPU {idx}: gen{link.get('gen')} x{link.get('width')} of gen{link.get('max_gen')} "
                f"x{link.get('max_width')} right after the copies"
            )
        pct = t.get("pct_of_theoretical")
        if pct is not None and pct < PCIE_LOW_PCT:
            pinned = get(t, "h2d_gbs.pinned")
            low.append(
                f"GPU {idx}: pinned H2D {pinned} GB/s = {pct:.0f}% of the link's "
                f"{t.get('theoretical_max_gbs') or t.get('theoretical_gbs')} GB/s"
            )
    for g in get(doc, "facts.gpus") or []:
        pcie = g.get("pcie") or {}
        wc, wm = pcie.get("width_current"), pcie.get("width_max")
        # Width does not drop for power saving the way the generation does: a narrower link is
        # a seating or riser problem even when read idle.
        if g.get("index") not in measured and wc and wm and wc < wm:
            low.append(f"GPU {g.get('index')}: link width x{wc} of x{wm} (facts)")
    if not low:
        return None
    return Finding(
        "pcie_below_max",
        "warn",
        "PCIe link below its maximum",
        "; ".join(low),
        "host<->GPU copies (every batch) run slower: check `nvidia-smi -q -d PCIE` under load; if it "
        "persists, ask the provider to reseat the card or move to another machine",
    )


@rule
def throttling(doc: dict[str, Any]) -> Finding | None:
    seen = []
    for g in get(doc, "bench.under_load.gpu.per_gpu") or []:
        samples = g.get("samples") or 0
        counts = g.get("throttle_reasons") or {}
        bad = {r: n for r, n in counts.items() if r in THROTTLE_BAD}
        if not bad or not samples:
            continue
        if max(bad.values()) < max(1.0, THROTTLE_MIN_FRACTION * samples):
            continue
        clocks = ""
        if g.get("sm_mhz_min") and g.get("max_sm_mhz"):
            clocks = f", SM clock down to {g['sm_mhz_min']} of {g['max_sm_mhz']} MHz"
        seen.append(
            f"GPU {g.get('index')}: "
            + ", ".join(f"{r} in {n}/{samples} samples" for r, n in sorted(bad.items()))
            + f" (max {g.get('temperature_c_max', '?')} C{clocks})"
        )
    if not seen:
        return None
    return Finding(
        "throttling",
        "critical",
        "GPU throttled during the benchmark",
        "; ".join(seen),
        "thermal or power slowdown: check cooling and the power limit (nvidia-smi -q -d "
        "PERFORMANCE,TEMPERATURE; provision health); ask for another machine if it persists",
    )


@rule
def low_matmul_peak(doc: dict[str, Any]) -> Finding | None:
    if not _ok(get(doc, "bench.compute")):
        return None
    for g in get(doc, "bench.compute.per_gpu") or []:
        pcts = g.get("pct_of_peak") or {}
        dtype = "bf16" if pcts.get("bf16") is not None else "fp16"
        pct = pcts.get(dtype)
        if pct is not None and pct < LOW_PEAK_PCT:
            return Finding(
                "low_matmul_peak",
                "warn",
                f"GPU {g.get('index')} reaches {pct:.0f}% of its dense peak",
                f"{g.get('name')}: {dtype} matmul {get(g, 'tflops.' + dtype)} TFLOPS = {pct:.0f}% of the "
                f"datasheet's dense {get(g, 'peak_tflops.' + dtype)} TFLOPS (expect 60-80%)",
                "check clocks and throttling (provision health) and other processes on the GPU",
            )
    return None


# -- disk ----------------------------------------------------------------------------------------


@rule
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
