"""Per-GPU samples while a run goes: utilization, memory, power, SM clock, throttle reasons.

NVML first (the bench's access in provision/agent/bench/nvml.py: microseconds per query); where
pynvml is missing but nvidia-smi is there, one `nvidia-smi --query-gpu` call per sample, at most
every SMI_MIN_INTERVAL seconds (each call costs tens of ms of CPU). No GPU: `reason` says why.
"""

from __future__ import annotations

import time

from provision.agent.bench import nvml

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, List, Optional

SMI_MIN_INTERVAL = 5.0
SMI_FIELDS = "index,utilization.gpu,memory.used,memory.total,power.draw,clocks.sm,clocks_throttle_reasons.active"


class GpuProbe(object):
    def __init__(self) -> None:
        self.reason = None  # type: Optional[str]
        self.source = None  # type: Optional[str]
        self.handles = []  # type: List[Any]
        self.static = {}  # type: Dict[int, Dict[str, Any]]
        self._smi = None  # type: Optional[str]
        self._last_smi = 0.0
        self._last_rows = []  # type: List[Dict[str, Any]]
        lib, why = nvml.load()
        if lib is not None:
            try:
                self.handles = [lib.nvmlDeviceGetHandleByIndex(i) for i in range(lib.nvmlDeviceGetCount())]
            except Exception as exc:
                why = "NVML device query failed: %s" % exc
            if self.handles:
                self.source = "nvml"
                for i, h in enumerate(self.handles):
                    mem = nvml.call(lib.nvmlDeviceGetMemoryInfo, h)
                    self.static[i] = {
                        "name": nvml.device_name(h),
                        "memory_total_mb": None if mem is None else round(mem.total / float(1 << 20)),
                        "max_sm_mhz": nvml.call(lib.nvmlDeviceGetMaxClockInfo, h, 1),
                    }
                return
        # looked up at call time: tests replace nvidia.find_nvidia_smi
        from provision.agent.nvidia import find_nvidia_smi

        self._smi = find_nvidia_smi()
        if self._smi:
            self.source = "nvidia-smi"
            return
        self.reason = no_gpu_reason(why)


    def sample(self) -> List[Dict[str, Any]]:
        if self.source == "nvml":
            return self._nvml()
        if self.source == "nvidia-smi":
            now = time.time()
            if now - self._last_smi >= SMI_MIN_INTERVAL:
                self._last_smi = now
                self._last_rows = self._nvidia_smi()
            return self._last_rows
        return []

    def _nvml(self) -> List[Dict[str, Any]]:
        lib, _ = nvml.load()
        rows = []
        for i, h in enumerate(self.handles):
            util = nvml.call(lib.nvmlDeviceGetUtilizationRates, h)
            mem = nvml.call(lib.nvmlDeviceGetMemoryInfo, h)
            power = nvml.call(lib.nvmlDeviceGetPowerUsage, h)
            mask = None
            for fn in ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"):
                if hasattr(lib, fn):
                    mask = nvml.call(getattr(lib, fn), h)
                    if mask is not None:
                        break
            rows.append({
                "i": i,
                "util": None if util is None else util.gpu,
                "mem_mb": None if mem is None else round(mem.used / float(1 << 20)),
                "mem_total_mb": None if mem is None else round(mem.total / float(1 << 20)),
                "power_w": None if power is None else round(power / 1000.0, 1),
                "sm_mhz": nvml.call(lib.nvmlDeviceGetClockInfo, h, 1),
                "throttle": [] if mask is None else nvml.decode_throttle(mask),
            })
        return rows

    def _nvidia_smi(self) -> List[Dict[str, Any]]:
        from provision.agent.nvidia import run  # looked up at call time, as find_nvidia_smi above

        code, out = run([str(self._smi), "--query-gpu=" + SMI_FIELDS, "--format=csv,noheader,nounits"], 10.0)
        if code != 0:
            return []
        return parse_smi_rows(out)


def parse_smi_rows(text: str) -> List[Dict[str, Any]]:
    """`nvidia-smi --query-gpu=SMI_FIELDS --format=csv,noheader,nounits` -> sample rows."""
    rows = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) < 7 or not cells[0].isdigit():
            continue

        def num(text):
            try:
                return float(text)
            except ValueError:
                return None

        mask = None
        try:
            mask = int(cells[6], 16)
        except ValueError:
            pass
        util, mem, total, power, sm = (num(c) for c in cells[1:6])
        rows.append({
            "i": int(cells[0]),
            "util": None if util is None else int(util),
            "mem_mb": None if mem is None else int(mem),
            "mem_total_mb": None if total is None else int(total),
            "power_w": power,
            "sm_mhz": None if sm is None else int(sm),
            "throttle": [] if mask is None else nvml.decode_throttle(mask),
        })
    return rows


def no_gpu_reason(nvml_why: Optional[str]) -> str:
    """Why there are no GPU samples, in the host's terms: with no sign of an NVIDIA driver (no
    /dev/nvidiactl, no /proc/driver/nvidia, no nvidia-smi) there is simply no GPU here, whatever
    pynvml's state; with a driver, what kept NVML from answering."""
    import os

    if not (os.path.exists("/dev/nvidiactl") or os.path.exists("/proc/driver/nvidia")):
        return "no GPU here (no NVIDIA driver: no /dev/nvidiactl, no /proc/driver/nvidia, no nvidia-smi)"
    return "an NVIDIA driver is present but no GPU could be read: %s; no nvidia-smi" % (
        nvml_why or "NVML unavailable")
