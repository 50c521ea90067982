"""Xid (and NVSwitch SXid) events from the kernel log, with what each code means.

The driver logs GPU faults as
    NVRM: Xid (PCI:0000:3b:00): 79, pid=0, GPU has fallen off the bus.
(older drivers: `NVRM: Xid (PCI:0000:01:00): 32, Channel ID 00000009 intr 00800000`), behind
whatever prefix dmesg or journalctl adds. Recent drivers may instead log a multi-line
"NVRM: The NVIDIA GPU 0000:b3:00.0 ... has fallen off the bus" without an Xid; that counts as 79.

Meanings and severities follow NVIDIA's Xid catalog (docs.nvidia.com/deploy/xid-errors):
`fatal` = the GPU needs a reset or service (health: failing), `warning` = the GPU is suspect or
needs a reset to apply a repair (degraded), `app` = usually the application's own fault (a note).
"""

import re
from typing import Any, Dict, Iterable, List, Optional, Tuple

from provision.agent.nvidia.gpu_model import normalize_pci_bus_id

XID_MEANINGS: Dict[int, Tuple[str, str]] = {
    8: ("GPU stopped processing (channel idle timeout)", "warning"),
    13: ("graphics engine exception (usually the application, can be hardware)", "app"),
    31: ("GPU memory page fault (usually an application bug: illegal address)", "app"),
    32: ("invalid or corrupted push buffer stream", "app"),
    38: ("driver firmware error", "warning"),
    43: ("GPU stopped processing: channel reset (usually the application)", "app"),
    44: ("graphics engine fault during context switch", "warning"),
    45: ("preemptive cleanup after earlier errors (process ended)", "app"),
    48: ("double-bit (uncorrectable) ECC error", "fatal"),
    61: ("internal micro-controller breakpoint/warning", "warning"),
    62: ("internal micro-controller halt", "fatal"),
    63: ("ECC page retirement or row remapping recorded (reset the GPU to apply)", "warning"),
    64: ("ECC page retirement or row remapping failed", "fatal"),
    68: ("video processor exception", "app"),
    69: ("graphics engine class error", "app"),
    74: ("NVLink error", "fatal"),
    79: ("GPU has fallen off the bus", "fatal"),
    92: ("high single-bit ECC error rate", "warning"),
    94: ("contained ECC error (the affected application was stopped)", "warning"),
    95: ("uncontained ECC error (every application on the GPU affected; reset needed)", "fatal"),
    109: ("context switch timeout", "warning"),
    119: ("GSP RPC timeout", "fatal"),
    120: ("GSP error", "fatal"),
    121: ("C2C link corrected error", "warning"),
    140: ("unrecovered ECC error", "fatal"),
    143: ("GPU initialization failure", "fatal"),
    154: ("GPU recovery action changed (reset or reboot may be required)", "warning"),
}

_XID = re.compile(r"NVRM: Xid \(PCI:([0-9a-fA-F:.]+)\): (\d+),?\s*(.*)")
_SXID = re.compile(
    r"nvidia-nvswitch(\d+): SXid \(PCI:([0-9a-fA-F:.]+)\): (\d+),\s*([\w-]+)?,?\s*(.*)"
)
_PCI = r"([0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.\d)"
# "NVRM: The NVIDIA GPU 0000:b3:00.0" (first of a multi-line message, 570+) and
# "NVRM: GPU 0000:47:00.0: GPU has fallen off the bus." (next to the Xid 79 line).
_FELL_OFF = re.compile(
    r"NVRM: (?:The NVIDIA GPU %s\s*$|GPU %s: GPU has fallen off the bus)" % (_PCI, _PCI)
)
_GPU_AT = re.compile(r"NVRM: GPU at PCI:([0-9a-fA-F:.]+): (GPU-[0-9a-fA-F-]+)")


def meaning(code: int) -> Tuple[str, str]:
    return XID_MEANINGS.get(code, ("Xid %d (look it up in NVIDIA's Xid catalog)" % code, "warning"))


def parse_kernel_log(lines: Iterable[str]) -> Dict[str, Any]:
    """Xid events grouped by (GPU, code), NVSwitch SXid events, and PCI -> UUID hints."""
    events: Dict[Tuple[Optional[str], int], Dict[str, Any]] = {}
    sxid: List[Dict[str, Any]] = []
    uuids: Dict[str, str] = {}
    for raw in lines:
        line = raw.rstrip("\n")
        if "NVRM" not in line and "SXid" not in line:
            continue
        match = _XID.search(line)
        if match:
            _add(
                events,
                normalize_pci_bus_id(match.group(1)),
                int(match.group(2)),
                match.group(3),
                line,
            )
            continue
        match = _FELL_OFF.search(line)
        if match:
            pci = normalize_pci_bus_id(match.group(1) or match.group(2))
            _add(events, pci, 79, "GPU has fallen off the bus", line)
            continue
        match = _GPU_AT.search(line)
        if match:
            pci = normalize_pci_bus_id(match.group(1))
            if pci:
                uuids[pci] = match.group(2)
            continue
        match = _SXID.search(line)
        if match:
            sxid.append(
                {
                    "switch": int(match.group(1)),
                    "pci": normalize_pci_bus_id(match.group(2)),
                    "sxid": int(match.group(3)),
                    "fatal": (match.group(4) or "").lower() == "fatal",
                    "line": line.strip(),
                }
            )
    return {"events": list(events.values()), "sxid": sxid, "uuids": uuids}


def _add(
    events: Dict[Tuple[Optional[str], int], Dict[str, Any]],
    pci: Optional[str],
    code: int,
    detail: str,
    line: str,
) -> None:
    key = (pci, code)
    if key in events:
        events[key]["count"] += 1
        events[key]["last"] = line.strip()
        return
    text, severity = meaning(code)
    events[key] = {
        "xid": code,
        "pci": pci,
        "meaning": text,
        "severity": severity,
        "detail": detail.strip(),
        "count": 1,
        "first": line.strip(),
        "last": line.strip(),
    }
