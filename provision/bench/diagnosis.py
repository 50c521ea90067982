"""The bench's diagnosis rules: findings with evidence and a concrete recommendation from the
bench's sections of a report (docs/bench.md's schemas): the DataLoader, mixed precision, VRAM
headroom, host-GPU copies, throttling, matmul peak. Registered with the report's rules
(report/diagnosis.py) when provision.bench is imported; facts, compat and disk rules stay there.
Thresholds are named constants so docs/reports.md and the code say the same thing."""

from __future__ import annotations

from typing import Any

from provision.report.diagnosis import dataset_on_network, ok_section, rule
from provision.report.schema import Finding, get, loader_curve, loader_source

# The agent's own DataLoader verdict calls loading "ok" from 1.2x the training rate
# (provision/agent/bench/dataloader.py): a loader only just as fast stalls on every hiccup.
LOADER_MARGIN = 1.2
LOADER_CRITICAL = 0.5  # loading under half the training rate: the GPU idles most of the time
WORKERS_GAIN = 1.3  # recommend num_workers when the best setting beats num_workers=0 by 30%
AMP_WORTH_IT = 1.15  # recommend mixed precision from this measured speedup
LOW_PEAK_PCT = 40.0  # half-precision matmul under 40% of the datasheet's dense peak
PCIE_LOW_PCT = 50.0  # pinned copies under half of the link's theoretical rate
THROTTLE_MIN_FRACTION = 0.05  # a slowdown in at least 5% of the samples, not a one-sample blip
# NVML clock-event reasons that mean heat, power or hardware slowed the GPU. The power cap
# (sw_power_cap) is normal at full load and is not in this list.
THROTTLE_BAD = (
    "hw_slowdown",
    "hw_thermal_slowdown",
    "hw_power_brake_slowdown",
    "sw_thermal_slowdown",
)


# -- data loading --------------------------------------------------------------------------------


@rule(20)
def loader_bottleneck(doc: dict[str, Any]) -> Finding | None:
    loader = get(doc, "bench.dataloader")
    if not ok_section(loader):
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
    on_network = source.get("role") == "network" or dataset_on_network(doc) is not None
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


@rule(30)
def num_workers(doc: dict[str, Any]) -> Finding | None:
    """The setting to copy into the training script, when it matters and loading keeps up."""
    loader = get(doc, "bench.dataloader")
    if not ok_section(loader) or (loader.get("verdict") or {}).get("verdict") in (
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


@rule(40)
def loader_shm(doc: dict[str, Any]) -> Finding | None:
    """The recommended num_workers' batches in flight (workers x prefetch_factor 2 x batch bytes)
    against /dev/shm: past it the workers die with "Bus error" (Docker's default shm is 64 MB)."""
    loader = get(doc, "bench.dataloader")
    if not ok_section(loader):
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


# -- GPU use -------------------------------------------------------------------------------------


@rule(60)
def amp_unused(doc: dict[str, Any]) -> Finding | None:
    amp = get(doc, "bench.amp")
    if not ok_section(amp):
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


@rule(70)
def vram_headroom(doc: dict[str, Any]) -> Finding | None:
    """The largest batch that fits and the accumulation to reach the target batch."""
    mem = get(doc, "bench.memory")
    if not ok_section(mem):
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


@rule(80)
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


@rule(90)
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


@rule(100)
def low_matmul_peak(doc: dict[str, Any]) -> Finding | None:
    if not ok_section(get(doc, "bench.compute")):
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
