"""The one GPU record that every source (NVML, `nvidia-smi -q -x`, `nvidia-smi --query-gpu`)
fills in, plus the value parsers the nvidia-smi parsers share.

The record is a plain dict rather than a dataclass because it goes straight into the facts JSON
and the health report; `new_gpu()` is its schema (docs/facts.md documents every key). Sources
leave a key None when the driver or GPU cannot say, never 0: 0 errors and "unknown" differ.
"""

import re
from typing import Any, Dict, Iterable, List, Optional

# Bit -> name, from nvml.h (nvmlClocksEventReason* / the older nvmlClocksThrottleReason*).
# Names match nvidia-smi's field suffixes (`clocks_event_reasons.sw_power_cap`) so the three
# sources agree.
CLOCK_EVENT_REASON_BITS = [
    (0x1, "gpu_idle"),
    (0x2, "applications_clocks_setting"),
    (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "sw_thermal_slowdown"),
    (0x40, "hw_thermal_slowdown"),
    (0x80, "hw_power_brake_slowdown"),
    (0x100, "display_clocks_setting"),
    (0x200, "board_limit"),
    (0x400, "reliability"),
]

# What nvidia-smi prints instead of a value. Bracketed forms come from --query-gpu,
# bare ones from the XML; "Requested functionality has been deprecated" from driver 580+.
_NOT_A_VALUE = {
    "",
    "n/a",
    "not supported",
    "requested functionality has been deprecated",
    "none",
    "unknown",
}
# Texts that mean the driver lost the GPU, not merely that a field is unsupported.
GPU_ERROR_MARKERS = ("gpu is lost", "unknown error", "fallen off the bus", "gpu requires reset")

_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?")


def new_gpu(source: str) -> Dict[str, Any]:
    """An empty GPU record: every key present, every value unknown."""
    return {
        "index": None,
        "name": None,
        "uuid": None,
        "pci_bus_id": None,
        "architecture": None,
        "compute_capability": None,
        "memory": {"total_mib": None, "used_mib": None, "free_mib": None, "reserved_mib": None},
        "utilization": {"gpu_pct": None, "memory_pct": None},
        "temperature": {
            "gpu_c": None,
            "memory_c": None,
            "slowdown_c": None,
            "shutdown_c": None,
            "max_operating_c": None,
            "margin_c": None,
        },
        "power": {"draw_w": None, "limit_w": None, "default_limit_w": None, "max_limit_w": None},
        "clocks": {
            "graphics_mhz": None,
            "sm_mhz": None,
            "memory_mhz": None,
            "max_sm_mhz": None,
            "max_memory_mhz": None,
        },
        "pcie": {
            "gen_current": None,
            "gen_max": None,
            "width_current": None,
            "width_max": None,
            "replay_counter": None,
        },
        "ecc": {
            "enabled": None,
            "pending_enabled": None,
            "volatile": {"corrected": None, "uncorrected": None},
            "aggregate": {"corrected": None, "uncorrected": None},
        },
        "retired_pages": {"single_bit": None, "double_bit": None, "pending": None},
        "remapped_rows": {
            "correctable": None,
            "uncorrectable": None,
            "pending": None,
            "failure": None,
        },
        "clock_event_reasons": None,
        "mig": {"enabled": None, "pending_enabled": None, "devices": None},
        "persistence_mode": None,
        "performance_state": None,
        "fan_pct": None,
        "processes": None,
        "errors": [],
        "source": source,
    }


def clean(text: Optional[str]) -> Optional[str]:
    """The text of a value, or None where nvidia-smi printed a placeholder ("[N/A]", "N/A", ...)."""
    if text is None:
        return None
    value = " ".join(text.split())  # XML values sometimes carry newlines and indentation
    bare = value[1:-1] if value.startswith("[") and value.endswith("]") else value
    if bare.lower() in _NOT_A_VALUE or is_gpu_error(bare):
        return None
    return value


def is_gpu_error(text: Optional[str]) -> bool:
    low = (text or "").lower()
    return any(marker in low for marker in GPU_ERROR_MARKERS)


def number(text: Optional[str]) -> Optional[float]:
    """First number in a value: "66.92 W" -> 66.92, "16x" -> 16, "[N/A]" -> None."""
    value = clean(text)
    if value is None:
        return None
    match = _NUMBER.search(value.replace(",", ""))
    return float(match.group(0)) if match else None


def integer(text: Optional[str]) -> Optional[int]:
    value = number(text)
    return None if value is None else int(round(value))


def flag(text: Optional[str]) -> Optional[bool]:
    """Enabled/Yes/Active -> True, Disabled/No/Not Active -> False, anything else -> None."""
    value = clean(text)
    if value is None:
        return None
    low = value.lower()
    if low in ("enabled", "yes", "active", "on", "true", "1"):
        return True
    if low in ("disabled", "no", "not active", "off", "false", "0"):
        return False
    return None


def reasons_from_bits(mask: Optional[int]) -> Optional[List[str]]:
    if mask is None:
        return None
    return [name for bit, name in CLOCK_EVENT_REASON_BITS if mask & bit]


def add_counts(values: Iterable[Optional[float]]) -> Optional[int]:
    """Sum of the known counts; None when none is known (an unsupported counter is not a 0)."""
    known = [v for v in values if v is not None]
    return int(sum(known)) if known else None


# Compute capability by product name, for sources that do not report it (the XML). Ordered:
# the first pattern found in the name wins, so longer names come before their prefixes.
# Source: NVIDIA's CUDA GPUs table (developer.nvidia.com/cuda-gpus).
_CC_BY_NAME = [
    ("GH200", "9.0"),
    ("H100", "9.0"),
    ("H200", "9.0"),
    ("H800", "9.0"),
    ("H20", "9.0"),
    ("GB200", "10.0"),
    ("B200", "10.0"),
    ("B100", "10.0"),
    ("RTX PRO 6000 BLACKWELL", "12.0"),
    ("RTX 50", "12.0"),
    ("A100", "8.0"),
    ("A800", "8.0"),
    ("A30", "8.0"),
    ("A40", "8.6"),
    ("A10", "8.6"),
    ("A16", "8.6"),
    ("A2", "8.6"),
    ("RTX A", "8.6"),
    ("RTX 30", "8.6"),
    ("L40", "8.9"),
    ("L20", "8.9"),
    ("L4", "8.9"),
    ("RTX 40", "8.9"),
    ("ADA GENERATION", "8.9"),
    ("T4", "7.5"),
    ("RTX 20", "7.5"),
    ("QUADRO RTX", "7.5"),
    ("TITAN RTX", "7.5"),
    ("GTX 16", "7.5"),
    ("V100", "7.0"),
    ("TITAN V", "7.0"),
    ("P100", "6.0"),
    ("P40", "6.1"),
    ("P4", "6.1"),
    ("GTX 10", "6.1"),
    ("K80", "3.7"),
]


def compute_capability_from_name(name: Optional[str]) -> Optional[str]:
    upper = (name or "").upper()
    for pattern, capability in _CC_BY_NAME:
        if re.search(r"(?<![A-Z0-9])" + re.escape(pattern), upper):
            return capability
    return None


def normalize_pci_bus_id(bus_id: Optional[str]) -> Optional[str]:
    """ "00000000:3B:00.0", "0000:3b:00" or "0000:3b:00.0" -> "0000:3b:00" (domain:bus:device)."""
    if not bus_id:
        return None
    match = re.search(r"([0-9a-fA-F]{4,8}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})", bus_id)
    if not match:
        return None
    domain, bus, device = (int(part, 16) for part in match.groups())
    return "%04x:%02x:%02x" % (domain, bus, device)
