"""Findings for a run, from the host's profile (provision/agent/train/summary.py), the host's
facts, and the host's latest benchmark report when there is one (its loader curve and measured
AMP speedup make the advice concrete). Same Finding shape and thresholds as the bench's rules
(provision/report/diagnosis.py), reused where they mean the same thing.

On a host without GPUs the GPU rules (gpu_idle, gpu_underused, no_amp, throttling,
memory_headroom) do not apply, and one info finding says so and why.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from provision.bench.diagnosis import AMP_WORTH_IT, THROTTLE_BAD, THROTTLE_MIN_FRACTION
from provision.report.schema import Finding, loader_curve
from provision.train.causes import CAUSES, log_lines
from provision.train.distributed import split_rank_line
from provision.train.frameworks import user_path, workers_knob

INPUT_WARN = 0.3  # the step waits on data 30% of the time: worth fixing
INPUT_CRITICAL = 0.5  # more than half: the GPU (or CPU) mostly waits
IO_WAIT_SHARE = 0.2  # data waits this much while reading from network storage: io_bound
GPU_IDLE_PCT = 10.0
GPU_UNDERUSED_PCT = 60.0
MEMORY_HEADROOM = 0.5  # peak GPU memory under half the card: the batch could grow
EPOCH_SLOWING = 1.2  # the last epochs 20% slower than the first ones
EPOCH_MIN_S = 0.5  # epochs shorter than this are noise, not a trend
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
    evidence += _other_loaders(s)
    missing = _missing_settings(loader, gpus > 0)
    if current is not None and current >= n:
        extra = f", or use {', '.join(missing)} and a larger prefetch_factor" if missing else \
            ", or a larger prefetch_factor"
        advice = (f"more workers will not help (num_workers={current} already, {why}): make each "
                  "sample cheaper to load (decode less, pre-resize, stage the dataset as LMDB with "
                  f"`provision stage`){extra}")
    else:
        advice = (f"{workers_knob(loader, n, missing, _workdir(s))} "
                  f"({why}); measure the curve with `provision bench HOST --dataset ...`")
    severity = "critical" if share >= INPUT_CRITICAL else "warn"
    return Finding("input_bound", severity, f"The step waits on data {share:.0%} of the time", evidence, advice)


def _missing_settings(loader: dict[str, Any], cuda: bool) -> list[str]:
    """The loader settings worth adding that are not already in effect (pin_memory only feeds a GPU)."""
    out = []
    if cuda and loader.get("pin_memory") is False:
        out.append("pin_memory=True")
    if loader.get("persistent_workers") is False:
        out.append("persistent_workers=True")
    return out


def _workdir(s: dict[str, Any]) -> str | None:
    return (s.get("run") or {}).get("workdir")


def _other_loaders(s: dict[str, Any]) -> str:
    others = [x for x in s.get("loaders") or [] if x.get("role") == "eval"]
    if not others:
        return ""
    sites = sorted({str(user_path(x.get("site"), _workdir(s)) or "?") for x in others})
    train_site = user_path((s.get("loader") or {}).get("site"), _workdir(s))
    return (f"; the training loader is {train_site or '?'} (its batches fed the backward "
            f"passes); not counted: {len(sites)} evaluation loader(s) at {', '.join(sites[:3])}")


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
    if first < EPOCH_MIN_S or last < EPOCH_SLOWING * first:
        return None  # epochs too short to time (an evaluation pass, a tiny loader)
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
    if not (s.get("run") or {}).get("instrument"):
        return Finding("data_wait_unknown", "info", "Data-wait share not measured",
                       "instrumentation was off (--no-instrument)",
                       "run without --no-instrument to measure how long each step waits on its DataLoader")
    steps = s.get("optimizer_steps")
    return Finding("data_wait_unknown", "info", "Data-wait share not measured: no torch DataLoader",
                   "the job never iterated a torch DataLoader"
                   + (f" ({steps} optimizer steps seen: it makes its batches itself)" if steps else ""),
                   "nothing to change for provision; if you suspect the input, time how long the script "
                   "takes to make each batch (a torch DataLoader is measured automatically)")


for _cause in CAUSES:  # why a run died (container limits, CUDA on a CPU host) and the shm check
    rule(_cause)


# -- across the hosts of one distributed run ----------------------------------------------------

STRAGGLER_MARGIN = 1.2  # one host's step 20% slower than the median of the others
STRAGGLER_WAIT_GAP = 0.2  # or its data-wait share 20 points above the others' (it holds them all)
NETWORK_WARN = 0.5  # the gradient all-reduce alone takes half the step at the measured bandwidth
NETWORK_CRITICAL = 1.0  # ... or longer than the whole step


def step_seconds(summary: dict[str, Any]) -> float | None:
    """Seconds per training step on a host: from the instrumentation (time in and between
    batches), else the run's seconds over its steps."""
    steps = summary.get("steps")
    if not steps:
        return None
    busy = float(summary.get("wait_s") or 0) + float(summary.get("step_s") or 0)
    if busy > 0:
        return busy / float(steps)
    seconds = (summary.get("run") or {}).get("seconds")
    return float(seconds) / float(steps) if seconds else None


def _root_causes(tail: list[str]) -> list[dict[str, Any]]:
    """torchrun's failure summary (`rank : 1 (local_rank: 0)`, `exitcode : 3 (pid: 123)`)."""
    import re

    out: list[dict[str, Any]] = []
    for line in tail:
        m = re.match(r"^\s*(?:\[rank\d+\]:)?\s*(rank|exitcode|host)\s*:\s*(\S+)", line)
        if not m:
            continue
        key, value = m.group(1), m.group(2)
        if key == "host" or (key == "rank" and (not out or "rank" in out[-1])):
            out.append({})
        out[-1][key] = value if key == "host" else int(value) if value.lstrip("-").isdigit() else value
    return [c for c in out if "rank" in c]


ERROR_LINE = re.compile(r"^\s*([A-Za-z_][\w.]*(?:Error|Exception|Interrupt)\b.*)$")
BROKEN_LINK = ("Connection closed by peer", "Connection reset", "Broken pipe", "ECONNRESET",
               "RendezvousClosedError", "RendezvousConnectionError", "connection to the C10d store has failed",
               "NCCL communicator was aborted", "Timed out", "timed out")


def last_error(summary: dict[str, Any]) -> str | None:
    """The last `SomethingError: message` line of a host's log (rank prefixes stripped)."""
    found = None
    for line in log_lines(summary):
        m = ERROR_LINE.match(line)
        if m and not m.group(1).startswith("torch.distributed.elastic.multiprocessing.errors.ChildFailedError"):
            found = m.group(1).strip()
    return found


def rank_failed(host: str, summary: dict[str, Any], others: dict[str, dict[str, Any]] | None = None,
                first: str | None = None) -> Finding | None:
    """A host whose ranks failed: which rank, its exit code, its last log lines, and what really
    happened to the rest: `others` (the other hosts' summaries) and `first` (the host that failed
    first) say whether this one failed on its own, failed because the first one broke the
    connection, or was the one that failed while provision stopped the rest."""
    run = summary.get("run") or {}
    if run.get("state") != "failed":
        return None
    tail = [line for line in summary.get("tail") or [] if line.strip()]
    causes = _root_causes(tail)
    rank = causes[0].get("rank") if causes else None
    code = causes[0].get("exitcode") if causes else run.get("exit_code")
    own = [text for r, text in (split_rank_line(line) for line in tail) if rank is not None and r == rank]
    shown = (own or tail)[-10:]
    who = f"{host}/rank{rank}" if rank is not None else host
    others = {h: s for h, s in (others or {}).items() if h != host}
    states = {h: (s.get("run") or {}).get("state") for h, s in others.items()}
    stopped = sorted(h for h, st in states.items() if st == "stopped")
    failed = sorted(h for h, st in states.items() if st == "failed")
    error = last_error(summary)
    if first is None or first == host:
        what = f"{who} exited with code {code}" + (f" ({error})" if error else "") + "; torchrun ended this host's ranks"
        if stopped:
            what += f"; provision stopped the run on {', '.join(stopped)} when it failed"
        if failed:
            what += f"; {', '.join(failed)} failed too (see their own findings)"
    else:
        first_error = last_error(others.get(first) or {})
        if error and first_error and error == first_error:
            what = f"{who} exited with code {code}: it failed on its own, with the same error as {first} ({error})"
        elif error and any(k in error for k in BROKEN_LINK) or any(
                k in line for line in (summary.get("tail") or [])[-40:] for k in BROKEN_LINK):
            what = (f"{who} exited with code {code} after {first} failed: its connection to the failed "
                    f"rank broke ({error or 'a collective lost its peer'}); fix {first} first")
        elif error:  # its own error, not a lost peer (the first's error is not known here)
            what = f"{who} exited with code {code}: it failed on its own ({error}), after {first} failed"
        else:
            what = f"{who} exited with code {code}, after {first} failed: look at both"
    return Finding(
        "rank_failed", "critical", f"{who} failed (exit code {code})",
        what + ". Last lines" + (f" of rank {rank}" if own else "") + ":\n" + "\n".join(shown),
        f"fix what {who}'s log shows (`provision logs {host} {run.get('run_id')}`; per-rank files under "
        f"{str(run.get('log') or '').rsplit('/', 1)[0]}/ranks), then run it again",
    )


def collective_job(summary: dict[str, Any]) -> bool:
    """The instrumentation saw a process group and collectives (DDP's all-reduce, or calls to
    torch.distributed's collectives): only then do ranks wait for each other."""
    return bool(summary.get("dist")) and bool(summary.get("grad_bytes") or summary.get("collectives"))


def straggler(summaries: dict[str, dict[str, Any]]) -> Finding | None:
    """One host slower than the others: its steps take longer, or it waits on its own input
    while the others wait on it in the all-reduce."""
    if len(summaries) < 2 or not any(collective_job(s) for s in summaries.values()):
        return None  # without a process group and collectives no rank waits for another
    steps = {h: step_seconds(s) for h, s in summaries.items()}
    steps = {h: v for h, v in steps.items() if v}
    waits = {h: s.get("data_wait_fraction") for h, s in summaries.items() if s.get("data_wait_fraction") is not None}
    slow, why = None, ""
    if len(steps) >= 2:
        host = max(steps, key=lambda h: steps[h])
        others = sorted(v for h, v in steps.items() if h != host)
        median = others[len(others) // 2]
        if median > 0 and steps[host] >= STRAGGLER_MARGIN * median:
            slow, why = host, f"{steps[host] * 1000:.0f} ms per step vs {median * 1000:.0f} ms on the others"
    if slow is None and len(waits) >= 2:
        host = max(waits, key=lambda h: waits[h])
        rest = max(v for h, v in waits.items() if h != host)
        if waits[host] - rest >= STRAGGLER_WAIT_GAP:
            slow, why = host, f"waits on its DataLoader {waits[host]:.0%} of the time vs at most {rest:.0%} elsewhere"
    if slow is None:
        return None
    table = ", ".join(f"{h}: {steps[h] * 1000:.0f} ms/step" if h in steps else f"{h}: ?" for h in summaries)
    return Finding(
        "straggler", "warn", f"{slow} is the straggler: every rank waits for it at each all-reduce",
        f"{slow} {why} ({table})",
        f"look at {slow}'s own findings (input_bound, throttling, gpu_idle) and its report; give it more "
        "DataLoader workers or cheaper samples (`provision stage`), or leave it out of the job",
    )


def network_bound(summaries: dict[str, dict[str, Any]], allreduce: dict[str, Any] | None,
                  grad_bytes: int | None = None) -> Finding | None:
    """The measured all-reduce bandwidth vs what the gradients need each step (DDP all-reduces
    every gradient once per step: nccl-tests' bus traffic 2(n-1)/n x the bytes per rank)."""
    if not allreduce or allreduce.get("status") != "ok" or not allreduce.get("busbw_gbs"):
        return None
    size = grad_bytes or max([int(s.get("grad_bytes") or 0) for s in summaries.values()] or [0])
    steps = [v for v in (step_seconds(s) for s in summaries.values()) if v]
    nodes = int(allreduce.get("hosts") or len(summaries))
    measured = grad_bytes or any(collective_job(s) for s in summaries.values())  # --grad-mb: the user says so
    if not size or not steps or nodes < 2 or not measured:
        return None
    busbw = float(allreduce["busbw_gbs"]) * 1e9
    step = sorted(steps)[len(steps) // 2]
    comm = size * 2.0 * (nodes - 1) / nodes / busbw
    share = comm / step
    if share < NETWORK_WARN:
        return None
    need = size * 2.0 * (nodes - 1) / nodes / step / 1e9
    return Finding(
        "network_bound", "critical" if share >= NETWORK_CRITICAL else "warn",
        f"The network bounds the job: the gradient all-reduce needs {share:.0%} of a step",
        f"{size / 1e6:.1f} MB of gradients per step over {nodes} hosts at the measured "
        f"{busbw / 1e9:.2f} GB/s all-reduce bus bandwidth takes {comm * 1000:.0f} ms; a step takes "
        f"{step * 1000:.0f} ms (to hide it the link would need ~{need:.2f} GB/s)",
        "do more work per all-reduce (a larger batch per rank, or gradient accumulation with "
        "DDP's no_sync()), send bf16 gradients (register_comm_hook(None, bf16_compress_hook)), "
        "use fewer hosts with more GPUs each, or a faster fabric (InfiniBand/RoCE: --iface)",
    )


def diagnose_distributed(summaries: dict[str, dict[str, Any]], allreduce: dict[str, Any] | None = None,
                         grad_bytes: int | None = None) -> list[Finding]:
    """The findings about the run as a whole (each host's own come from diagnose_run)."""
    found: list[Finding] = []
    ordered = sorted(summaries, key=lambda h: float((summaries[h].get("run") or {}).get("ended") or 0))
    failed = [h for h in ordered if (summaries[h].get("run") or {}).get("state") == "failed"]
    for host in ordered:  # the first to fail first: the others usually failed because of it
        f = rank_failed(host, summaries[host], summaries, failed[0] if failed else None)
        if f:
            found.append(f)
    for check in (lambda: straggler(summaries), lambda: network_bound(summaries, allreduce, grad_bytes)):
        try:
            f = check()
        except (TypeError, ValueError, KeyError, ZeroDivisionError):
            continue
        if f:
            found.append(f)
    return found
