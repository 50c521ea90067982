"""Small pieces every section shares: the Skip signal, torch/device lookup, host limits.

Host limits read the cgroup as well as /proc: rented machines are usually containers whose
CPU quota and memory limit are far below what /proc/cpuinfo and MemAvailable show.
"""

import math
import os
import sys


class Skip(Exception):
    """Raised by a section that cannot run here; its message is the reason shown to the user."""


def import_torch():
    """torch, or Skip with the reason (the agent runs on hosts where torch may be missing)."""
    try:
        import torch
    except Exception as exc:  # ImportError, or a broken install raising OSError on a .so
        raise Skip(
            "torch is not importable in %s (Python %s): %s; install it first (provision install)"
            % (sys.executable, sys.version.split()[0], exc)
        ) from None
    return torch


def cuda_available(torch):
    try:
        return bool(torch.cuda.is_available()) and torch.cuda.device_count() > 0
    except Exception:
        return False


def cpu_quota_cores(root="/sys/fs/cgroup"):
    """CPU quota of this cgroup in cores (float), or None when unlimited/unknown."""
    try:  # cgroup v2: "max 100000" or "200000 100000"
        with open(os.path.join(root, "cpu.max")) as f:
            quota, period = f.read().split()[:2]
        if quota != "max":
            return float(quota) / float(period)
        return None
    except (OSError, ValueError):
        pass
    try:  # cgroup v1
        with open(os.path.join(root, "cpu", "cpu.cfs_quota_us")) as f:
            quota = int(f.read().strip())
        with open(os.path.join(root, "cpu", "cpu.cfs_period_us")) as f:
            period = int(f.read().strip())
        if quota > 0 and period > 0:
            return float(quota) / float(period)
    except (OSError, ValueError):
        pass
    return None


def effective_cores():
    """Cores this process may really use: affinity mask, capped by the cgroup quota."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    quota = cpu_quota_cores()
    if quota is not None:
        cores = min(cores, max(1, int(math.ceil(quota))))
    return max(1, cores)


def _cpu_times(stat="/proc/stat"):
    """(busy, total) jiffies of all CPUs from the first line of /proc/stat, or None."""
    try:
        with open(stat) as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    if len(fields) < 4:
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    total = sum(fields[:8])  # guest time is already in user
    return total - idle, total


def busy_cores(interval=0.3, stat="/proc/stat", sleep=None):
    """How many cores other work keeps busy, measured over `interval` seconds while this
    process sleeps: on a shared or noisy host that many are not really ours. None if unknown."""
    import time

    before = _cpu_times(stat)
    (sleep or time.sleep)(interval)
    after = _cpu_times(stat)
    if before is None or after is None or after[1] <= before[1]:
        return None
    share = (after[0] - before[0]) / float(after[1] - before[1])
    return share * (os.cpu_count() or 1)


def threads_for_cpu(cores, busy):
    """torch threads for CPU work: the cores left free by other work (at least one). More
    threads than free cores make every parallel region wait for a descheduled thread: on a
    2-core host with the other core busy, a small convnet step took 14x as long with 2 threads
    as with 1."""
    if busy is None or busy < 0.5:
        return cores
    return max(1, min(cores, int(round(cores - busy))))


def _read_int(path):
    try:
        with open(path) as f:
            text = f.read().strip()
        return None if text == "max" else int(text)
    except (OSError, ValueError):
        return None


def available_memory_bytes():
    """MemAvailable, capped by the cgroup's remaining allowance (limit - current usage)."""
    avail = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    avail = int(line.split()[1]) * 1024
                    break
    except OSError:
        pass
    limit = _read_int("/sys/fs/cgroup/memory.max")
    usage = _read_int("/sys/fs/cgroup/memory.current")
    if limit is None:
        limit = _read_int("/sys/fs/cgroup/memory/memory.limit_in_bytes")
        usage = _read_int("/sys/fs/cgroup/memory/memory.usage_in_bytes")
        if limit is not None and limit >= 1 << 60:  # v1 reports "unlimited" as a huge number
            limit = None
    if limit is not None and usage is not None:
        room = max(0, limit - usage)
        avail = room if avail is None else min(avail, room)
    return avail


def rss_bytes(field="VmRSS"):
    """VmRSS or VmHWM of this process from /proc/self/status, or None."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def release_free_memory():
    """Hand freed heap pages back to the OS (glibc malloc_trim) so RSS growth means new use."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
        return True
    except (OSError, AttributeError):  # not glibc (musl, macOS)
        return False


def reset_peak_rss():
    """Reset VmHWM (Linux >= 4.0: write 5 to clear_refs) so the next peak is ours alone."""
    release_free_memory()
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def mb(nbytes):
    return None if nbytes is None else round(nbytes / float(1 << 20), 1)


def sig(value, digits=4):
    """A figure rounded to `digits` significant digits: measurements are not more precise."""
    if value is None:
        return None
    return float("%.*g" % (digits, value))
