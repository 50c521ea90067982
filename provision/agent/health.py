"""The `health` agent command: is this host's GPU hardware fit to use right now?

Per GPU: utilization, memory, temperature, power, clocks and clock event (throttle) reasons,
ECC errors, retired pages, remapped rows, PCIe link, processes, and Xid events from the kernel
log. Per host: load, memory, /dev/shm, free space in the data directory. Each finding raises the
verdict to `degraded` or `failing` with a reason, or is a note that leaves the verdict alone.
The rules are the functions below; docs/facts.md ("Health") lists them with their thresholds.

Request (all optional):
  expect_gpus: 8            fewer GPUs than this is a failure (a GPU fell off the bus)
  data_dir: "/path"         the directory whose free space to check (default: facts' choice)
  kernel_log: true          read dmesg/journalctl for Xid events
  nvidia_smi_timeout: 20
"""

import os
import shutil
import time
from typing import Any, Dict, Iterable, List, Optional

from provision.agent import nvidia
from provision.agent.facts import cpu, data_dir, memory
from provision.agent.facts._util import run
from provision.agent.nvidia import xid
from provision.agent.nvidia.gpu_model import normalize_pci_bus_id

HEALTHY, DEGRADED, FAILING = "healthy", "degraded", "failing"
_RANK = {HEALTHY: 0, DEGRADED: 1, FAILING: 2}

# Thresholds, each with the reason it is what it is.
RETIRED_PAGES_LIMIT = 60  # DCGM's default retired-pages limit; NVIDIA suggests service beyond it
POWER_LIMIT_FRACTION = 0.95  # a limit under 95% of the default means someone capped the card
BUSY_UTILIZATION_PCT = 50  # PCIe links drop generation when idle; judge them only under load
LOAD_PER_CPU = 2.0  # load average above 2x the usable CPUs: the CPU side will starve the GPU
MEMORY_AVAILABLE_FRACTION = 0.05
SHM_MIN_BYTES = 1 << 30  # PyTorch DataLoader workers pass batches through /dev/shm
DATA_DIR_FAILING_BYTES = 1 << 30
DATA_DIR_DEGRADED_BYTES = 10 << 30
HW_SLOWDOWN_REASONS = (
    "hw_slowdown",
    "hw_thermal_slowdown",
    "hw_power_brake_slowdown",
    "sw_thermal_slowdown",
)


class Finding(object):
    """Accumulates one subject's verdict, reasons and notes."""

    def __init__(self) -> None:
        self.verdict = HEALTHY
        self.reasons: List[str] = []
        self.notes: List[str] = []

    def fail(self, reason: str) -> None:
        self._raise(FAILING, reason)

    def degrade(self, reason: str) -> None:
        self._raise(DEGRADED, reason)

    def note(self, text: str) -> None:
        self.notes.append(text)

    def _raise(self, verdict: str, reason: str) -> None:
        self.reasons.append(reason)
        if _RANK[verdict] > _RANK[self.verdict]:
            self.verdict = verdict

    def as_dict(self) -> Dict[str, Any]:
        return {"verdict": self.verdict, "reasons": self.reasons, "notes": self.notes}


def worst(verdicts: Iterable[str]) -> str:
    result = HEALTHY
    for verdict in verdicts:
        if _RANK[verdict] > _RANK[result]:
            result = verdict
    return result


def check(request: Dict[str, Any], ctx: Any) -> Dict[str, Any]:
    started = time.time()
    state = nvidia.collect(
        with_processes=True, smi_timeout=float(request.get("nvidia_smi_timeout", 20))
    )
    log = (
        read_kernel_log()
        if request.get("kernel_log", True)
        else {"source": None, "lines": None, "reason": "skipped"}
    )
    kernel = xid.parse_kernel_log(log["lines"] or [])
    _attach_xids(state["gpus"], kernel)

    gpus = []
    for gpu in state["gpus"]:
        finding = evaluate_gpu(gpu)
        gpus.append(dict(gpu, **finding.as_dict()))

    host_facts = {
        "load_average": _load_average(),
        "cpu": _safe(cpu.gather),
        "memory": _safe(memory.gather),
        "data_dir": _safe(lambda: data_dir.choose({"data_dir": request.get("data_dir")})),
    }
    host = evaluate_host(host_facts, state, kernel, request.get("expect_gpus"))
    unmatched = [e for e in kernel["events"] if e.get("gpu_index") is None]
    verdict = worst([host.verdict] + [g["verdict"] for g in gpus])
    reasons = ["host: %s" % r for r in host.reasons]
    for gpu in gpus:
        reasons.extend("GPU %s: %s" % (gpu["index"], r) for r in gpu["reasons"])
    return {
        "verdict": verdict,
        "reasons": reasons,
        "gpus": gpus,
        "host": dict(host_facts, **host.as_dict()),
        "nvidia": {
            "source": state.get("source"),
            "driver_version": state.get("driver_version"),
            "cuda_driver_version": state.get("cuda_driver_version"),
            "reason": state.get("reason"),
            "attempts": state.get("attempts"),
        },
        "kernel_log": {
            "source": log["source"],
            "readable": log["lines"] is not None,
            "reason": log.get("reason"),
            "unmatched_xid": unmatched,
            "sxid": kernel["sxid"],
        },
        "seconds": round(time.time() - started, 3),
    }


def _safe(func: Any) -> Any:
    try:
        return func()
    except Exception as exc:
        return {"error": "%s: %s" % (type(exc).__name__, exc)}


def _load_average() -> Optional[List[float]]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def _attach_xids(gpus: List[Dict[str, Any]], kernel: Dict[str, Any]) -> None:
    """Give each GPU the Xid events logged for its PCI address (or UUID, via "GPU at PCI" lines)."""
    by_pci = {normalize_pci_bus_id(g.get("pci_bus_id")): g for g in gpus}
    by_uuid = {g.get("uuid"): g for g in gpus if g.get("uuid")}
    for gpu in gpus:
        gpu["xid_events"] = []
    for event in kernel["events"]:
        gpu = by_pci.get(event["pci"]) or by_uuid.get(kernel["uuids"].get(event["pci"] or ""))
        event["gpu_index"] = gpu["index"] if gpu is not None else None
        if gpu is not None:
            gpu["xid_events"].append(event)


def evaluate_gpu(gpu: Dict[str, Any]) -> Finding:
    f = Finding()
    for error in gpu.get("errors") or []:
        f.fail("the driver reports %s" % error)

    ecc = gpu["ecc"]
    if (ecc["volatile"]["uncorrected"] or 0) > 0:
        f.fail(
            "%d uncorrectable ECC error(s) since the driver loaded" % ecc["volatile"]["uncorrected"]
        )
    elif (ecc["aggregate"]["uncorrected"] or 0) > 0:
        f.degrade(
            "%d uncorrectable ECC error(s) in the GPU's lifetime" % ecc["aggregate"]["uncorrected"]
        )
    if (ecc["volatile"]["corrected"] or 0) > 0:
        f.note("%d corrected ECC error(s) since the driver loaded" % ecc["volatile"]["corrected"])
    if ecc["enabled"] is False:
        f.note("ECC is disabled")

    rows = gpu["remapped_rows"]
    if rows["failure"]:
        f.fail("row remapping failed: the GPU has run out of spare memory rows (needs service)")
    if rows["pending"]:
        f.degrade("a memory row remap is pending: reset the GPU to apply it")
    if (rows["uncorrectable"] or 0) > 0 and not rows["failure"]:
        f.note("%d row(s) remapped after uncorrectable errors" % rows["uncorrectable"])

    pages = gpu["retired_pages"]
    retired = (pages["single_bit"] or 0) + (pages["double_bit"] or 0)
    if retired >= RETIRED_PAGES_LIMIT:
        f.fail("%d retired memory pages (limit %d)" % (retired, RETIRED_PAGES_LIMIT))
    elif (pages["double_bit"] or 0) > 0:
        f.degrade("%d page(s) retired after double-bit errors" % pages["double_bit"])
    if pages["pending"]:
        f.degrade("page retirement pending: reset the GPU to apply it")

    _thermal_and_power(gpu, f)
    _pcie(gpu, f)

    for event in gpu.get("xid_events") or []:
        text = "Xid %d x%d: %s" % (event["xid"], event["count"], event["meaning"])
        if event["severity"] == "fatal":
            f.fail(text)
        elif event["severity"] == "warning":
            f.degrade(text)
        else:
            f.note(text)

    mig = gpu["mig"]
    if mig["enabled"]:
        f.note(
            "MIG is enabled (%s instance(s)); each process sees a slice" % (mig["devices"] or "?")
        )
    if gpu.get("persistence_mode") is False:
        f.note("persistence mode is off (the first CUDA call after idle is slower)")
    used = gpu["memory"]["used_mib"]
    procs = gpu.get("processes")
    if used and used > 1024:
        listed = len(procs) if procs is not None else "unknown"
        f.note("%d MiB of GPU memory in use, %s process(es) visible here" % (used, listed))
    if (gpu["utilization"]["gpu_pct"] or 0) >= BUSY_UTILIZATION_PCT:
        f.note("GPU is busy (%d%% utilization)" % gpu["utilization"]["gpu_pct"])
    return f


def _thermal_and_power(gpu: Dict[str, Any], f: Finding) -> None:
    reasons = gpu.get("clock_event_reasons") or []
    slowed = [r for r in HW_SLOWDOWN_REASONS if r in reasons]
    if slowed:
        f.degrade("clocks slowed by %s" % ", ".join(slowed))
    if "sw_power_cap" in reasons:
        f.note("clocks held by the power cap (normal at full load)")
    t = gpu["temperature"]
    if t["gpu_c"] is not None:
        for key, label in (("slowdown_c", "slowdown"), ("max_operating_c", "max operating")):
            if t[key] is not None and t["gpu_c"] >= t[key]:
                f.degrade(
                    "%d C is at or above the %s temperature (%d C)" % (t["gpu_c"], label, t[key])
                )
                break
    if t["margin_c"] is not None and t["margin_c"] <= 0:
        f.degrade("no thermal headroom left (T.Limit margin %d C)" % t["margin_c"])
    p = gpu["power"]
    if (
        p["limit_w"]
        and p["default_limit_w"]
        and p["limit_w"] < p["default_limit_w"] * POWER_LIMIT_FRACTION
    ):
        f.degrade(
            "power limit lowered to %.0f W (default %.0f W)" % (p["limit_w"], p["default_limit_w"])
        )


def _pcie(gpu: Dict[str, Any], f: Finding) -> None:
    link = gpu["pcie"]
    if link["width_current"] and link["width_max"] and link["width_current"] < link["width_max"]:
        f.degrade("PCIe link runs x%d of x%d" % (link["width_current"], link["width_max"]))
    if link["gen_current"] and link["gen_max"] and link["gen_current"] < link["gen_max"]:
        busy = (gpu["utilization"]["gpu_pct"] or 0) >= BUSY_UTILIZATION_PCT
        if busy:
            f.degrade(
                "PCIe link runs gen %d of %d under load" % (link["gen_current"], link["gen_max"])
            )
        else:
            f.note(
                "PCIe gen %d of %d while idle (normal power saving)"
                % (link["gen_current"], link["gen_max"])
            )


def evaluate_host(
    host: Dict[str, Any], state: Dict[str, Any], kernel: Dict[str, Any], expect_gpus: Optional[int]
) -> Finding:
    f = Finding()
    gpus = state.get("gpus") or []
    if expect_gpus is not None and len(gpus) < int(expect_gpus):
        f.fail("%d GPU(s) visible, %d expected" % (len(gpus), int(expect_gpus)))
    for lost in state.get("lost_gpus") or []:
        f.fail("GPU %s: %s" % (lost.get("pci_bus_id"), lost.get("error")))
    if not gpus and state.get("pci_devices"):
        f.fail(state.get("reason") or "NVIDIA devices on the PCI bus but no GPU readable")
    elif not gpus:
        f.note(state.get("reason") or "no NVIDIA GPU")
    for event in kernel["events"]:
        if event.get("gpu_index") is None:
            # A GPU not visible here: one that fell off the bus, or (in a shared host's log) not ours.
            text = "Xid %d on %s, not a visible GPU, x%d: %s" % (
                event["xid"],
                event["pci"],
                event["count"],
                event["meaning"],
            )
            (f.degrade if event["severity"] == "fatal" else f.note)(text)
    for event in kernel["sxid"]:
        text = "NVSwitch %d SXid %d: %s" % (event["switch"], event["sxid"], event["line"][-120:])
        (f.fail if event["fatal"] else f.note)(text)

    cpus = host.get("cpu") or {}
    load = host.get("load_average")
    usable = cpus.get("effective_cpus") if isinstance(cpus, dict) else None
    if load and usable and load[0] > LOAD_PER_CPU * usable:
        f.degrade("load average %.1f on %s usable CPU(s)" % (load[0], usable))
    mem = host.get("memory") or {}
    total, available = mem.get("effective_total_bytes"), mem.get("effective_available_bytes")
    if total and available is not None and available < total * MEMORY_AVAILABLE_FRACTION:
        f.degrade("only %s of %s memory available" % (_gib(available), _gib(total)))
    shm = mem.get("shm") or {}
    if shm.get("total_bytes") is not None and shm["total_bytes"] < SHM_MIN_BYTES:
        f.degrade(
            "/dev/shm is only %s: PyTorch DataLoader workers will fail (docker run --shm-size=16g)"
            % _gib(shm["total_bytes"])
        )
    chosen = host.get("data_dir") or {}
    free = chosen.get("free_bytes")
    if free is not None:
        if free < DATA_DIR_FAILING_BYTES:
            f.fail("data dir %s has only %s free" % (chosen.get("path"), _gib(free)))
        elif free < DATA_DIR_DEGRADED_BYTES:
            f.degrade("data dir %s has only %s free" % (chosen.get("path"), _gib(free)))
    if chosen.get("network"):
        f.note("data dir %s is network storage (%s)" % (chosen.get("path"), chosen.get("fs_type")))
    return f


def _gib(value: Optional[float]) -> str:
    return "?" if value is None else "%.1f GiB" % (value / float(1 << 30))


LOG_FILES = ("/var/log/kern.log", "/var/log/messages", "/var/log/syslog")


def read_kernel_log(timeout: float = 10.0, log_files: Iterable[str] = LOG_FILES) -> Dict[str, Any]:
    """{"source", "lines" (None when unreadable), "reason"}. dmesg needs root or
    kernel.dmesg_restrict=0 and is often blocked in containers; journalctl needs the journal."""
    tried = []
    if shutil.which("dmesg"):
        code, out = run(["dmesg"], timeout)
        if code == 0 and out.strip():
            return {"source": "dmesg", "lines": out.splitlines()}
        tried.append("dmesg: %s" % (" ".join(out.split())[:120] or "exit %d" % code))
    if shutil.which("journalctl"):
        code, out = run(["journalctl", "-k", "-b", "--no-pager", "-q", "-o", "short-iso"], timeout)
        if code == 0 and out.strip() and "No journal files" not in out:
            return {"source": "journalctl -k -b", "lines": out.splitlines()}
        tried.append("journalctl: %s" % (" ".join(out.split())[:120] or "exit %d" % code))
    for path in log_files:
        text = _tail(path, 8 << 20)
        if text is not None:
            return {"source": path, "lines": text.splitlines()}
    tried.append("no readable %s" % ", ".join(log_files))
    return {"source": None, "lines": None, "reason": "; ".join(tried)}


def _tail(path: str, size: int) -> Optional[str]:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - size))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return None
