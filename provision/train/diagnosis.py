"""Findings for a run, from the host's profile (provision/agent/train/summary.py), the host's
facts, and the host's latest benchmark report when there is one (its loader curve and measured
AMP speedup make the advice concrete). Same Finding shape and thresholds as the bench's rules
(provision/report/diagnosis.py), reused where they mean the same thing.

On a host without GPUs the GPU rules (gpu_idle, gpu_underused, no_amp, throttling,
memory_headroom) do not apply, and one info finding says so and why.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from provision.report.diagnosis import (
    AMP_WORTH_IT,
    THROTTLE_BAD,
    THROTTLE_MIN_FRACTION,
    Finding,
    loader_curve,
)

INPUT_WARN = 0.3  # the step waits on data 30% of the time: worth fixing
INPUT_CRITICAL = 0.5  # more than half: the GPU (or CPU) mostly waits
IO_WAIT_SHARE = 0.2  # data waits this much while reading from network storage: io_bound
GPU_IDLE_PCT = 10.0
GPU_UNDERUSED_PCT = 60.0
MEMORY_HEADROOM = 0.5  # peak GPU memory under half the card: the batch could grow
EPOCH_SLOWING = 1.2  # the last epochs 20% slower than the first ones
GPU_RULES = ("gpu_idle", "gpu_underused", "no_amp", "throttling", "memory_headroom")

Context = dict[str, Any]  # {"summary", "facts", "bench" (a report doc or None)}
RULES: list[Callable[[Context], Finding | None]] = []


def rule(fn: Callable[[Context], Finding | None]) -> Callable[[Context], Finding | None]:
    RULES.append(fn)
    return fn


def diagnose_run(summary: dict[str, Any], facts: dict[str, Any] | None = None,
                 bench: dict[str, Any] | None = None, host: str = "HOST") -> list[Finding]:
    """`bench`: the host's latest benchmark report, when there is one; `host`: its inventory name
    (for the commands the findings recommend)."""
    ctx = {"summary": summary, "facts": facts or {}, "bench": bench, "host": host}
    found = []
    for check in RULES:
        try:
            finding = check(ctx)
        except (TypeError, ValueError, KeyError, AttributeError, ZeroDivisionError):
            continue  # a malformed part of the profile must not hide the other findings
        if finding:
            found.append(finding)
    order = {"critical": 0, "warn": 1, "info": 2}
    return sorted(found, key=lambda f: order.get(f.severity, 3))


def usable_cpus(ctx: Context) -> int:
    cpu = ctx["facts"].get("cpu") or {}
    return int(cpu.get("usable_cpus") or cpu.get("logical_cpus") or ctx["summary"].get("cpu", {}).get("cpus") or 1)


def gpu_count(ctx: Context) -> int:
    return len(ctx["summary"].get("gpu", {}).get("per_gpu") or []) or len(ctx["facts"].get("gpus") or [])


def suggest_num_workers(cpus: int, gpus: int, current: int | None,
                        curve: list[tuple[int, float]] | None = None) -> tuple[int, str]:
    """(num_workers to try, why). The bench's measured curve wins; else the cores: one per
    usable CPU left after the main process(es), at least 2, shared among the GPUs' processes."""
    if curve:
        best = max(curve, key=lambda p: p[1])
        return best[0], f"the benchmark's loader curve peaks at num_workers={best[0]} ({best[1]:.0f} samples/s)"
    procs = max(1, gpus)
    n = max(2, (cpus - procs) // procs)
    return n, f"{cpus} usable CPUs less {procs} for the training process(es), at least 2"


def _share(summary: dict[str, Any]) -> float | None:
    value = summary.get("data_wait_fraction")
    return None if value is None else float(value)


@rule
def failed(ctx: Context) -> Finding | None:
    run = ctx["summary"].get("run") or {}
    if run.get("state") != "failed":
        return None
    tail = [line for line in ctx["summary"].get("tail") or [] if line.strip()][-10:]
    code = run.get("exit_code")
    return Finding(
        "failed", "critical", f"The command failed (exit code {code})",
        "last log lines:\n" + ("\n".join(tail) if tail else "(the log is empty)")
        + (f"\n{run['error']}" if run.get("error") else ""),
        f"fix what the log shows, then run it again; the whole log: {run.get('log')}",
    )


@rule
def input_bound(ctx: Context) -> Finding | None:
    s = ctx["summary"]
    share = _share(s)
    if share is None or share < INPUT_WARN:
        return None
    loader = s.get("loader") or {}
    current = loader.get("num_workers")
    cpus, gpus = usable_cpus(ctx), gpu_count(ctx)
    curve = loader_curve(ctx["bench"]) if ctx["bench"] else []
    n, why = suggest_num_workers(cpus, gpus, current, curve)
    evidence = (f"the training step waited on the DataLoader {share:.0%} of the time "
                f"({s.get('wait_s', 0):.1f} s waiting vs {s.get('step_s', 0):.1f} s computing over "
                f"{s.get('steps')} batches); num_workers={current}, "
                f"workers used {(s.get('cpu') or {}).get('cores_workers_mean')} cores on average")
    if current is not None and current >= n:
        advice = (f"more workers will not help (num_workers={current} already, {why}): make each "
                  "sample cheaper to load (decode less, pre-resize, stage the dataset as LMDB with "
                  "`provision stage`), or use persistent_workers=True and a larger prefetch_factor")
    else:
        advice = (f"set DataLoader(num_workers={n}, pin_memory=True, persistent_workers=True) "
                  f"({why}); measure the curve with `provision bench HOST --dataset ...`")
    severity = "critical" if share >= INPUT_CRITICAL else "warn"
    return Finding("input_bound", severity, f"The step waits on data {share:.0%} of the time", evidence, advice)


def _network_sources(s: dict[str, Any]) -> list[str]:
    io = s.get("io") or {}
    found = [f"{p['path']} ({p['fs_type']} at {p['mountpoint']})" for p in io.get("dataset_paths") or [] if p.get("network")]
    found += [f"files open on {m} in {share:.0%} of samples" for m, share in (io.get("network_open_share") or {}).items()]
    found += [f"NFS {m} read {rate} MB/s" for m, rate in (io.get("nfs_read_mb_s_mean") or {}).items() if rate]
    return found


@rule
def io_bound(ctx: Context) -> Finding | None:
    s = ctx["summary"]
    sources = _network_sources(s)
    if not sources:
        return None
    share = _share(s)
    iowait = (s.get("cpu") or {}).get("iowait_pct_mean")
    if share is not None and share < IO_WAIT_SHARE and not (iowait and iowait > 10):
        return None  # reads from the network, but they keep up
    paths = [p["path"] for p in (s.get("io") or {}).get("dataset_paths") or [] if p.get("network")]
    src = paths[0] if paths else "/PATH/TO/DATASET"
    name = src.rstrip("/").rsplit("/", 1)[-1] or "data"
    data_dir = ((ctx["facts"].get("data_dir") or {}).get("path")) or "<data_dir>"
    wait = "unknown (not instrumented)" if share is None else f"{share:.0%}"
    return Finding(
        "io_bound", "critical", "Training reads its data from network storage",
        f"{'; '.join(sources)}; data-wait share {wait}, iowait {iowait}%",
        f"copy it to the local disk once: `provision stage host:{src} {ctx.get('host', 'HOST')} "
        f"--name {name}`, then read {data_dir}/datasets/{name}.lmdb with provision.data.LMDBDataset",
    )


@rule
def gpu_not_present(ctx: Context) -> Finding | None:
    s = ctx["summary"]
    if gpu_count(ctx):
        return None
    reason = (s.get("gpu") or {}).get("reason") or "no GPU found"
    return Finding("gpu_rules_not_applied", "info", "GPU checks do not apply: this host has no GPU",
                   f"{reason}; not checked: {', '.join(GPU_RULES)}",
                   "run on a GPU host to get GPU utilization, AMP, throttling and memory findings")


def _gpus(ctx: Context) -> list[dict[str, Any]]:
    return [g for g in (ctx["summary"].get("gpu") or {}).get("per_gpu") or [] if g.get("samples")]


@rule
def gpu_idle(ctx: Context) -> Finding | None:
    gpus = _gpus(ctx)
    utils = [g["util_pct_mean"] for g in gpus if g.get("util_pct_mean") is not None]
    if not utils:
        return None
    idle = [g for g in gpus if (g.get("util_pct_mean") or 0) < GPU_IDLE_PCT]
    if idle:
        device = ctx["summary"].get("device")
        hint = ("the job never put anything on the GPU (device=cpu): move the model and batches "
                "with .to('cuda')") if device == "cpu" else "check the data-wait share and the DataLoader"
        return Finding("gpu_idle", "critical", f"{len(idle)} of {len(gpus)} GPU(s) idle during the run",
                       ", ".join(f"GPU {g['index']}: {g['util_pct_mean']}% mean utilization" for g in idle), hint)
    mean = sum(utils) / len(utils)
    if mean < GPU_UNDERUSED_PCT:
        share = _share(ctx["summary"])
        why = f"data-wait share {share:.0%}" if share is not None else "data-wait share unknown"
        return Finding("gpu_underused", "warn", f"GPUs busy only {mean:.0f}% of the time",
                       f"mean utilization {mean:.0f}% ({why})",
                       "feed it faster (see input_bound) or give it more work per step (a larger batch)")
    return None


@rule
def no_amp(ctx: Context) -> Finding | None:
    s = ctx["summary"]
    if not _gpus(ctx) or not s.get("instrumented") or s.get("amp"):
        return None
    if s.get("device") not in ("cuda", None):
        return None
    caps = [str(g.get("compute_capability") or "") for g in ctx["facts"].get("gpus") or []]
    if caps and all(c and float(c) < 7.0 for c in caps if c.replace(".", "").isdigit()):
        return None  # no tensor cores for fp16/bf16 autocast to use
    bench_amp = ((ctx["bench"] or {}).get("bench") or {}).get("amp") or {}
    speedup = bench_amp.get("speedup")
    measured = f"; the benchmark measured {speedup:.2f}x with {bench_amp.get('best_dtype')}" if speedup else ""
    if speedup and speedup < AMP_WORTH_IT:
        return None
    bf16 = any(c and c.replace(".", "").isdigit() and float(c) >= 8.0 for c in caps)
    how = ("torch.autocast('cuda', dtype=torch.bfloat16)" if bf16 else
           "torch.autocast('cuda', dtype=torch.float16) with torch.amp.GradScaler('cuda')")
    return Finding("no_amp", "warn", "Training runs in fp32 on a GPU with fast half precision",
                   f"no autocast seen in the run{measured}", f"wrap the forward pass and loss in {how}")


@rule
def throttling(ctx: Context) -> Finding | None:
    hits = []
    for g in _gpus(ctx):
        bad = {r: n for r, n in (g.get("throttle_reasons") or {}).items() if r in THROTTLE_BAD}
        if bad and max(bad.values()) >= THROTTLE_MIN_FRACTION * g["samples"]:
            hits.append(f"GPU {g['index']}: " + ", ".join(f"{r} in {n}/{g['samples']} samples" for r, n in bad.items()))
    if not hits:
        return None
    return Finding("throttling", "critical", "GPU clocks were cut by heat or power during the run",
                   "; ".join(hits), "ask the provider for another machine, or check cooling/power limits (nvidia-smi -q -d PERFORMANCE)")


@rule
def memory_headroom(ctx: Context) -> Finding | None:
    rows = []
    for g in _gpus(ctx):
        used, total = g.get("memory_used_mb_max"), g.get("memory_total_mb")
        if used and total and used < MEMORY_HEADROOM * total:
            rows.append((g["index"], used, total))
    if not rows:
        return None
    batch = (ctx["summary"].get("loader") or {}).get("batch_size")
    factor = min(total / max(used, 1) for _, used, total in rows)
    grow = f"batch_size={batch} could grow toward ~{int(batch * factor * 0.8)}" if batch else "the batch could grow"
    return Finding("memory_headroom", "info", "GPU memory mostly unused",
                   "; ".join(f"GPU {i}: peak {u} of {t} MiB" for i, u, t in rows),
                   f"{grow} (scale the learning rate with it), or use the room for a larger model")


@rule
def epoch_slowing(ctx: Context) -> Finding | None:
    epochs = [e for e in ctx["summary"].get("epochs") or [] if e.get("seconds")]
    if len(epochs) < 3:
        return None
    times = [float(e["seconds"]) for e in epochs]
    half = max(1, len(times) // 3)
    first, last = sum(times[:half]) / half, sum(times[-half:]) / half
    if first <= 0 or last < EPOCH_SLOWING * first:
        return None
    return Finding("epoch_slowing", "warn", f"Epochs got {last / first:.1f}x slower during the run",
                   "epoch seconds: " + ", ".join(f"{t:.1f}" for t in times[:20])
                   + f" (from the {ctx['summary'].get('epoch_source')})",
                   "look for growing work per epoch: a list that keeps tensors (loss instead of loss.item()), "
                   "a cache filling memory, a dataset on a disk that filled up, or thermal throttling")


@rule
def not_instrumented(ctx: Context) -> Finding | None:
    s = ctx["summary"]
    if s.get("data_wait_fraction") is not None or (s.get("run") or {}).get("state") == "failed":
        return None
    why = "instrumentation was off (--no-instrument)" if not (s.get("run") or {}).get("instrument") else \
        "the job never iterated a torch DataLoader"
    return Finding("data_wait_unknown", "info", "Data-wait share not measured", why,
                   "run without --no-instrument, with a torch DataLoader, to measure it")
