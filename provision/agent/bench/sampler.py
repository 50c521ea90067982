"""What the machine did while the benchmark ran: a background thread sampling GPU and CPU.

GPU (through NVML, when present): utilization, memory used, SM/memory clocks, temperature,
power and clock-event ("throttle") reasons. CPU (always, from /proc): busy and iowait percent
of all CPUs since the previous sample, load average, and this process's own CPU use. Sections
mark when they start, so the summary can say e.g. how busy the GPU was during AMP training.
"""

import os
import threading
import time

from provision.agent.bench import nvml

NVML_CLOCK_SM = 1
NVML_CLOCK_MEM = 2
NVML_TEMPERATURE_GPU = 0


def read_proc_stat(path="/proc/stat"):
    """(busy, iowait, total) jiffies of the aggregate `cpu` line, or None."""
    try:
        with open(path) as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    # user nice system idle iowait irq softirq steal [guest guest_nice: already in user/nice]
    fields = (fields + [0] * 8)[:8]
    idle, iowait = fields[3], fields[4]
    total = sum(fields)
    return total - idle - iowait, iowait, total


def cpu_percent(before, after):
    """(busy %, iowait %) between two read_proc_stat() readings."""
    if not before or not after or after[2] <= before[2]:
        return None, None
    total = float(after[2] - before[2])
    return (
        round(100.0 * (after[0] - before[0]) / total, 1),
        round(100.0 * (after[1] - before[1]) / total, 1),
    )


def _loadavg():
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


class Sampler(object):
    """Start, mark sections, stop, summarize. Sampling errors never stop the benchmark."""

    def __init__(self, interval=0.5, torch=None):
        self.interval = interval
        self.cpu = []  # (t, busy %, iowait %, load1, process cores busy)
        self.gpu = {}  # index -> [(t, util, mem_used_mb, sm_mhz, mem_mhz, temp_c, power_w, reasons)]
        self.marks = []  # (t, section)
        self.gpu_reason = None
        self.handles = []  # (index, handle)
        self.static = {}
        self._stop = threading.Event()
        self._thread = None
        self._torch = torch
        self._last_stat = None
        self._last_cpu_time = None

    def _discover(self):
        lib, reason = nvml.load()
        if lib is None:
            self.gpu_reason = reason
            return
        torch = self._torch
        try:
            if torch is not None and torch.cuda.is_available():
                self.handles = [
                    (i, nvml.handle_for_cuda(torch, i)) for i in range(torch.cuda.device_count())
                ]
            else:
                self.handles = [
                    (i, lib.nvmlDeviceGetHandleByIndex(i)) for i in range(lib.nvmlDeviceGetCount())
                ]
        except Exception as exc:
            self.gpu_reason = "NVML device query failed: %s" % exc
            self.handles = []
            return
        self.handles = [(i, h) for i, h in self.handles if h is not None]
        if not self.handles:
            self.gpu_reason = "NVML sees no GPU"
        for i, h in self.handles:
            limit = nvml.call(lib.nvmlDeviceGetEnforcedPowerLimit, h)
            self.static[i] = {
                "name": nvml.device_name(h),
                "max_sm_mhz": nvml.call(lib.nvmlDeviceGetMaxClockInfo, h, NVML_CLOCK_SM),
                "power_limit_w": None if limit is None else round(limit / 1000.0, 1),
            }
            self.gpu[i] = []

    def start(self):
        self._discover()
        self._last_stat = read_proc_stat()
        self._last_cpu_time = (time.monotonic(), _process_cpu_seconds())
        self._thread = threading.Thread(target=self._loop, name="bench-sampler")
        self._thread.daemon = True
        self._thread.start()
        return self

    def mark(self, section):
        self.marks.append((time.monotonic(), section))

    def stop(self):
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.sample()  # a last point, so even a short run has one

    def _loop(self):
        while not self._stop.wait(self.interval):
            try:
                self.sample()
            except Exception:  # noqa: BLE001 - a sampling hiccup must not end the benchmark
                pass

    def sample(self):
        now = time.monotonic()
        stat = read_proc_stat()
        busy, iowait = cpu_percent(self._last_stat, stat)
        self._last_stat = stat
        cpu_s = _process_cpu_seconds()
        last_t, last_cpu = self._last_cpu_time
        cores_busy = round((cpu_s - last_cpu) / (now - last_t), 2) if now > last_t else None
        self._last_cpu_time = (now, cpu_s)
        self.cpu.append((now, busy, iowait, _loadavg(), cores_busy))
        lib, _ = nvml.load()
        for i, h in self.handles:
            util = nvml.call(lib.nvmlDeviceGetUtilizationRates, h)
            mem = nvml.call(lib.nvmlDeviceGetMemoryInfo, h)
            power = nvml.call(lib.nvmlDeviceGetPowerUsage, h)
            reasons = _throttle_mask(lib, h)
            self.gpu[i].append(
                (
                    now,
                    None if util is None else util.gpu,
                    None if mem is None else round(mem.used / float(1 << 20)),
                    nvml.call(lib.nvmlDeviceGetClockInfo, h, NVML_CLOCK_SM),
                    nvml.call(lib.nvmlDeviceGetClockInfo, h, NVML_CLOCK_MEM),
                    nvml.call(lib.nvmlDeviceGetTemperature, h, NVML_TEMPERATURE_GPU),
                    None if power is None else round(power / 1000.0, 1),
                    reasons,
                )
            )

    # -- summaries ------------------------------------------------------------------------------

    def summary(self):
        out = {
            "interval_s": self.interval,
            "samples": len(self.cpu),
            "cpu": summarize_cpu(self.cpu),
        }
        if self.gpu_reason and not self.handles:
            out["gpu"] = {"status": "skipped", "reason": self.gpu_reason}
        else:
            out["gpu"] = {
                "status": "ok",
                "per_gpu": [
                    summarize_gpu(i, self.gpu[i], self.static.get(i, {})) for i in sorted(self.gpu)
                ],
            }
        out["by_section"] = self._by_section()
        return out

    def _by_section(self):
        spans = []
        for n, (t, name) in enumerate(self.marks):
            end = self.marks[n + 1][0] if n + 1 < len(self.marks) else float("inf")
            spans.append((name, t, end))
        out = {}
        for name, start, end in spans:
            cpu = [s for s in self.cpu if start <= s[0] < end]
            entry = {"cpu_busy_pct": _mean([s[1] for s in cpu])}
            for i, rows in self.gpu.items():
                inside = [r for r in rows if start <= r[0] < end]
                utils = [r[1] for r in inside if r[1] is not None]
                entry["gpu%d_util_pct" % i] = _mean(utils)
            out[name] = entry
        return out


def _process_cpu_seconds():
    t = os.times()
    return t.user + t.system


def _throttle_mask(lib, handle):
    for fn in (
        "nvmlDeviceGetCurrentClocksEventReasons",
        "nvmlDeviceGetCurrentClocksThrottleReasons",
    ):
        if hasattr(lib, fn):
            value = nvml.call(getattr(lib, fn), handle)
            if value is not None:
                return value
    return None


def _mean(values):
    values = [v for v in values if v is not None]
    return round(sum(values) / float(len(values)), 1) if values else None


def _max(values):
    values = [v for v in values if v is not None]
    return max(values) if values else None


def _min(values):
    values = [v for v in values if v is not None]
    return min(values) if values else None


def summarize_cpu(rows, cpus=None):
    """CPU summary; `others_busy_pct_mean` is the busy share NOT explained by this process (its
    workers excluded until they exit): other tenants or jobs competing for the CPUs."""
    cpus = cpus or os.cpu_count() or 1
    others = [
        max(0.0, r[1] - 100.0 * r[4] / cpus) for r in rows if r[1] is not None and r[4] is not None
    ]
    return {
        "others_busy_pct_mean": _mean(others),
        "busy_pct_mean": _mean([r[1] for r in rows]),
        "busy_pct_max": _max([r[1] for r in rows]),
        "iowait_pct_mean": _mean([r[2] for r in rows]),
        "load1_max": _max([r[3] for r in rows]),
        "process_cores_busy_mean": _mean([r[4] for r in rows]),
        "scope": "busy/iowait: all CPUs in /proc/stat (the whole machine, even in a container)",
    }


def summarize_gpu(index, rows, static):
    seen = {}
    for r in rows:
        if r[7] is not None:
            for name in nvml.decode_throttle(r[7]):
                seen[name] = seen.get(name, 0) + 1
    harmful = sorted(name for name in seen if name in nvml.HARMFUL_REASONS)
    return {
        "index": index,
        "name": static.get("name"),
        "samples": len(rows),
        "util_pct_mean": _mean([r[1] for r in rows]),
        "util_pct_max": _max([r[1] for r in rows]),
        "memory_used_mb_max": _max([r[2] for r in rows]),
        "sm_mhz_min": _min([r[3] for r in rows]),
        "sm_mhz_max": _max([r[3] for r in rows]),
        "max_sm_mhz": static.get("max_sm_mhz"),
        "mem_mhz_max": _max([r[4] for r in rows]),
        "temperature_c_max": _max([r[5] for r in rows]),
        "power_w_mean": _mean([r[6] for r in rows]),
        "power_w_max": _max([r[6] for r in rows]),
        "power_limit_w": static.get("power_limit_w"),
        "throttle_reasons": seen,  # reason -> samples it was active in
        "throttled": harmful,
    }
