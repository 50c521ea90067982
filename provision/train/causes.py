"""Why a run died, from its last log lines (the traceback): the container limits rentals are
known for (a small /dev/shm kills DataLoader workers with SIGBUS; a low open-files limit breaks
many workers) and CUDA-only code on a host without a GPU. Plus the shared-memory check before it
happens: a loader whose workers x prefetch_factor x batch bytes will not fit in /dev/shm.

Each function takes the diagnosis context ({"summary", "facts", ...}) and returns a Finding or None;
provision/train/diagnosis.py registers them as rules."""

from __future__ import annotations

import re
from typing import Any

from provision.report.schema import Finding
from provision.train.frameworks import device_flag, user_path

RANK_PREFIX = re.compile(r"^\[(?:rank|default)\d+\]:")
BUS_ERROR = re.compile(r"DataLoader worker \(pid (\d+)\) is killed by signal: Bus error"
                       r"|Unexpected bus error encountered in worker|insufficient shared memory \(shm\)"
                       r"|unable to allocate shared memory\(shm\)")  # newer torch reserves the space first
NOFILE = re.compile(r"Too many open files|received 0 items of ancdata")
NO_CUDA = re.compile(
    r"Torch not compiled with CUDA enabled|Found no NVIDIA driver on your system|No CUDA GPUs are available"
    r"|no CUDA-capable device is detected|CUDA driver initialization failed"
    r"|ProcessGroupNCCL is only supported with GPUs|torch\.cuda\.is_available\(\) is False"
    r"|NCCL Error.*no GPUs? (?:found|available)|Cannot access accelerator device when none is available"
    r"|module 'torch\._C' has no attribute '_cuda_")  # a CPU build's torch.cuda.set_device
FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+), in (\S+)')
SHM_SHARE = 0.9  # the batches in flight may use this much of /dev/shm before workers die of it


def log_lines(summary: dict[str, Any]) -> list[str]:
    """The run's last lines without torchrun's `[rankN]:` prefixes (the failure's own window
    when the host sent one)."""
    lines = summary.get("failure_lines") or summary.get("tail") or []
    return [RANK_PREFIX.sub("", line) for line in lines]


def user_frame(lines: list[str], upto: int) -> str | None:
    """`file:line: code` of the last traceback frame before line `upto` that is the user's own
    (not torch's, not the standard library's): the call that needed what the host lacks."""
    found = None
    for i, line in enumerate(lines[:upto]):
        m = FRAME.match(line)
        if not m:
            continue
        path = m.group(1)
        if "/site-packages/" in path or "/dist-packages/" in path or "/lib/python3" in path or path.startswith("<"):
            continue
        code = lines[i + 1].strip() if i + 1 < len(lines) and not FRAME.match(lines[i + 1]) else ""
        found = f"{path}:{m.group(2)}" + (f": {code}" if code else "")
    return found


def _first(pattern: re.Pattern[str], lines: list[str]) -> int | None:
    return next((i for i, line in enumerate(lines) if pattern.search(line)), None)


def _failed(ctx: dict[str, Any]) -> bool:
    return ((ctx["summary"].get("run") or {}).get("state")) == "failed"


def _gib(n: float | None) -> str:
    return "?" if n is None else f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / 2**20:.0f} MiB"


def _shm(ctx: dict[str, Any]) -> dict[str, Any]:
    """/dev/shm as the run saw it (the host's summary), else from the facts (memory.shm)."""
    if ctx["summary"].get("shm"):
        return ctx["summary"]["shm"]
    facts = (ctx["facts"].get("memory") or {}).get("shm") or {}
    return {"size_bytes": facts.get("total_bytes"), "free_bytes": facts.get("free_bytes")} if facts else {}


SHM_FIX = ("give the container a bigger /dev/shm where the provider allows it (docker: `--shm-size=8g` or "
           "`--ipc=host`; a template/image setting on rentals), or put "
           "`torch.multiprocessing.set_sharing_strategy('file_system')` at the top of the script, or use "
           "fewer num_workers / a smaller prefetch_factor or batch")


def shm_exhausted(ctx: dict[str, Any]) -> Finding | None:
    if not _failed(ctx):
        return None
    lines = log_lines(ctx["summary"])
    at = _first(BUS_ERROR, lines)
    if at is None:
        return None
    shm = _shm(ctx)
    size = f"/dev/shm is {_gib(shm.get('size_bytes'))}" if shm.get("size_bytes") else "/dev/shm size unknown"
    return Finding("shm_exhausted", "critical", "DataLoader workers ran out of /dev/shm",
                   f"{lines[at].strip()}; {size}: workers hand every batch to the main process through "
                   "shared memory, and a container's default 64 MB fills at once", SHM_FIX)


def too_many_open_files(ctx: dict[str, Any]) -> Finding | None:
    if not _failed(ctx):
        return None
    lines = log_lines(ctx["summary"])
    at = _first(NOFILE, lines)
    if at is None:
        return None
    nofile = ((ctx["facts"].get("memory") or {}).get("open_files") or {}).get("soft")
    return Finding("too_many_open_files", "critical", "The run hit the open-files limit (Too many open files)",
                   f"{lines[at].strip()}; open-files limit (ulimit -n): {nofile if nofile else 'unknown'} — "
                   "each batch a worker shares holds a file descriptor until it is used",
                   "raise it before the command (`ulimit -n 65536`, or LimitNOFILE / the container's "
                   "--ulimit nofile=65536:65536), or put `torch.multiprocessing.set_sharing_strategy('file_system')` "
                   "at the top of the script, or use fewer num_workers")


# device='cuda', .cuda(), torch/cuda/, "CUDA is not available", Lightning's `CUDAAccelerator` and
# (a CPU-only torch) "No supported gpu backend found!", nccl
CUDA_WORD = re.compile(r"(?<![A-Za-z])(?:cuda|gpu|nccl)", re.I)


def _last_traceback(lines: list[str]) -> tuple[int, int] | None:
    """(first line, exception line) of the log's last Python traceback."""
    start = next((i for i in range(len(lines) - 1, -1, -1) if lines[i].startswith("Traceback (most recent")), None)
    if start is None:
        return None
    end = next((i for i in range(start + 1, len(lines)) if lines[i].strip() and not lines[i][:1].isspace()), None)
    return None if end is None else (start, end)


def _no_usable_gpu(ctx: dict[str, Any]) -> bool:
    return not ((ctx["summary"].get("gpu") or {}).get("per_gpu") or ctx["facts"].get("gpus"))


def cuda_unavailable(ctx: dict[str, Any]) -> Finding | None:
    """By what happened: the run failed on a host without a usable GPU and its exception or
    traceback is about CUDA (timm's `CUDA is not available but cuda was specified.`, a
    framework's own assert); or the failure is one of CUDA's own "no device" errors anywhere."""
    if not _failed(ctx):
        return None
    lines = log_lines(ctx["summary"])
    at = _first(NO_CUDA, lines)
    block = _last_traceback(lines)
    if at is None and block is not None and _no_usable_gpu(ctx):
        start, end = block
        if any(CUDA_WORD.search(line) for line in lines[start:end + 1]):
            at = end
    if at is None:
        return None
    host_has = "this host has no GPU" if _no_usable_gpu(ctx) else "CUDA is not usable on this host"
    workdir = (ctx["summary"].get("run") or {}).get("workdir")
    frame = user_frame(lines, at)
    where = (f"the call at {user_path(frame, workdir)}" if frame else
             "a CUDA-only call (torch.cuda.set_device, .cuda(), device='cuda', nccl)")
    first = block[0] if block is not None and block[0] < at else 0
    flag = device_flag([m.group(1) for line in lines[first:at] for m in [FRAME.match(line)] if m])
    advice = ("run it on a GPU host, or make it choose the device: "
              "`device = 'cuda' if torch.cuda.is_available() else 'cpu'` (and the gloo backend "
              "instead of nccl without GPUs); many scripts have a flag for it (--device cpu, --no-cuda)")
    if flag:
        advice = flag
    return Finding("cuda_unavailable", "critical", f"The script needs CUDA but {host_has}",
                   f"{where} raised: {lines[at].strip()}", advice)


def shm_too_small(ctx: dict[str, Any]) -> Finding | None:
    """Before it dies (or when it ran anyway): the batches the workers keep in flight vs /dev/shm."""
    shm = _shm(ctx)
    size = shm.get("size_bytes")
    if not size:
        return None
    worst = None
    for loader in ctx["summary"].get("loaders") or [ctx["summary"].get("loader") or {}]:
        need = shm_need(loader)
        if need and need > SHM_SHARE * size and (worst is None or need > worst[0]):
            worst = (need, loader)
    if worst is None:
        return None
    need, loader = worst
    return Finding("shm_too_small", "critical" if _failed(ctx) else "warn",
                   "The DataLoader's batches in flight do not fit in /dev/shm",
                   f"{user_path(loader.get('site'), (ctx['summary'].get('run') or {}).get('workdir')) or 'a loader'}: num_workers={loader.get('num_workers')} x "
                   f"prefetch_factor={loader.get('prefetch_factor') or 2} x {_gib(loader.get('batch_bytes'))} "
                   f"per batch = {_gib(need)}; /dev/shm is {_gib(size)}", SHM_FIX)


def shm_need(loader: dict[str, Any]) -> int | None:
    """Bytes of shared memory a loader's workers hold at once: workers x prefetch x batch bytes."""
    workers, batch = loader.get("num_workers") or 0, loader.get("batch_bytes")
    if workers <= 0 or not batch:
        return None
    return int(workers) * int(loader.get("prefetch_factor") or 2) * int(batch)


CAUSES = (shm_exhausted, too_many_open_files, cuda_unavailable, shm_too_small)
