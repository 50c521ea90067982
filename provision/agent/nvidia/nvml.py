"""GPU records from NVML through pynvml (the `nvidia-ml-py` package), where the host has it.

The first choice: one in-process library call per field, no subprocess, and NVML's API is
stable across drivers where nvidia-smi's text is not. Kept thin: each field is one call through
`_get`, which turns "not supported on this GPU" into None and "the GPU is lost" into an entry
in the record's `errors`.
"""

from typing import Any, Dict, List, Optional

from provision.agent.nvidia.gpu_model import (
    compute_capability_from_name,
    new_gpu,
    reasons_from_bits,
)

# NVML return codes that mean the GPU itself is in trouble (nvml.h), as opposed to a field
# this GPU or driver does not support.
_GPU_TROUBLE = {
    15: "GPU is lost",  # NVML_ERROR_GPU_IS_LOST
    16: "GPU requires reset",  # NVML_ERROR_RESET_REQUIRED
    999: "Unknown Error",  # NVML_ERROR_UNKNOWN
}
_ARCHITECTURES = {
    2: "Kepler",
    3: "Maxwell",
    4: "Pascal",
    5: "Volta",
    6: "Turing",
    7: "Ampere",
    8: "Ada Lovelace",
    9: "Hopper",
    10: "Blackwell",
}


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class _Reader(object):
    """Calls into one pynvml-shaped module, recording GPU trouble instead of raising it."""

    def __init__(self, nv: Any) -> None:
        self.nv = nv
        self.errors: List[str] = []

    def get(self, what: str, func_name: str, *args: Any) -> Any:
        func = getattr(self.nv, func_name, None)
        if func is None:  # an older pynvml without this call
            return None
        try:
            return func(*args)
        except self.nv.NVMLError as exc:
            code = getattr(exc, "value", None)
            if code in _GPU_TROUBLE:
                self.errors.append("%s: %s" % (what, _GPU_TROUBLE[code]))
            return None


def collect(nv: Any, with_processes: bool = True) -> Dict[str, Any]:
    """Driver, CUDA and one record per GPU. `nv` is the pynvml module (or a stand-in)."""
    nv.nvmlInit()
    try:
        driver = _text(nv.nvmlSystemGetDriverVersion())
        cuda = None
        try:
            version = nv.nvmlSystemGetCudaDriverVersion()  # e.g. 12020 for 12.2
            cuda = "%d.%d" % (version // 1000, (version % 1000) // 10)
        except nv.NVMLError:
            pass
        gpus = []
        for index in range(nv.nvmlDeviceGetCount()):
            gpus.append(_device(nv, index, with_processes))
        return {
            "driver_version": driver,
            "cuda_version": cuda,
            "gpus": gpus,
            "nvlink": _nvlink(nv, gpus),
        }
    finally:
        try:
            nv.nvmlShutdown()
        except Exception:
            pass


def _device(nv: Any, index: int, with_processes: bool) -> Dict[str, Any]:
    gpu = new_gpu("nvml")
    gpu["index"] = index
    try:
        handle = nv.nvmlDeviceGetHandleByIndex(index)
    except nv.NVMLError as exc:
        gpu["errors"].append("handle: %s" % _GPU_TROUBLE.get(getattr(exc, "value", None), exc))
        return gpu
    gpu["_handle"] = handle  # used by _nvlink, removed before returning
    r = _Reader(nv)
    name = r.get("name", "nvmlDeviceGetName", handle)
    gpu["name"] = _text(name) if name is not None else None
    uuid = r.get("uuid", "nvmlDeviceGetUUID", handle)
    gpu["uuid"] = _text(uuid) if uuid is not None else None
    pci = r.get("pci", "nvmlDeviceGetPciInfo", handle)
    gpu["pci_bus_id"] = _text(pci.busId) if pci is not None else None
    arch = r.get("architecture", "nvmlDeviceGetArchitecture", handle)
    gpu["architecture"] = _ARCHITECTURES.get(arch) if arch is not None else None
    cc = r.get("compute capability", "nvmlDeviceGetCudaComputeCapability", handle)
    gpu["compute_capability"] = (
        "%d.%d" % tuple(cc) if cc else compute_capability_from_name(gpu["name"])
    )

    memory = r.get("memory", "nvmlDeviceGetMemoryInfo", handle)
    if memory is not None:
        mib = 1024 * 1024
        gpu["memory"].update(
            total_mib=memory.total // mib,
            used_mib=memory.used // mib,
            free_mib=memory.free // mib,
            # only the v2 memory struct has `reserved`; pynvml returns v1 on older drivers
            reserved_mib=memory.reserved // mib
            if getattr(memory, "reserved", None) is not None
            else None,
        )
    util = r.get("utilization", "nvmlDeviceGetUtilizationRates", handle)
    if util is not None:
        gpu["utilization"].update(gpu_pct=util.gpu, memory_pct=util.memory)

    t = gpu["temperature"]
    t["gpu_c"] = r.get("temperature", "nvmlDeviceGetTemperature", handle, nv.NVML_TEMPERATURE_GPU)
    t["slowdown_c"] = r.get(
        "slowdown threshold",
        "nvmlDeviceGetTemperatureThreshold",
        handle,
        nv.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN,
    )
    t["shutdown_c"] = r.get(
        "shutdown threshold",
        "nvmlDeviceGetTemperatureThreshold",
        handle,
        nv.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN,
    )
    t["max_operating_c"] = r.get(
        "max operating",
        "nvmlDeviceGetTemperatureThreshold",
        handle,
        nv.NVML_TEMPERATURE_THRESHOLD_GPU_MAX,
    )

    p = gpu["power"]
    draw = r.get("power draw", "nvmlDeviceGetPowerUsage", handle)  # milliwatts
    limit = r.get("power limit", "nvmlDeviceGetEnforcedPowerLimit", handle)
    default = r.get("default power limit", "nvmlDeviceGetPowerManagementDefaultLimit", handle)
    constraints = r.get("power limits", "nvmlDeviceGetPowerManagementLimitConstraints", handle)
    p["draw_w"] = draw / 1000.0 if draw is not None else None
    p["limit_w"] = limit / 1000.0 if limit is not None else None
    p["default_limit_w"] = default / 1000.0 if default is not None else None
    p["max_limit_w"] = constraints[1] / 1000.0 if constraints else None

    c = gpu["clocks"]
    c["graphics_mhz"] = r.get("clock", "nvmlDeviceGetClockInfo", handle, nv.NVML_CLOCK_GRAPHICS)
    c["sm_mhz"] = r.get("clock", "nvmlDeviceGetClockInfo", handle, nv.NVML_CLOCK_SM)
    c["memory_mhz"] = r.get("clock", "nvmlDeviceGetClockInfo", handle, nv.NVML_CLOCK_MEM)
    c["max_sm_mhz"] = r.get("max clock", "nvmlDeviceGetMaxClockInfo", handle, nv.NVML_CLOCK_SM)
    c["max_memory_mhz"] = r.get("max clock", "nvmlDeviceGetMaxClockInfo", handle, nv.NVML_CLOCK_MEM)

    gpu["pcie"].update(
        gen_current=r.get("pcie", "nvmlDeviceGetCurrPcieLinkGeneration", handle),
        gen_max=r.get("pcie", "nvmlDeviceGetMaxPcieLinkGeneration", handle),
        width_current=r.get("pcie", "nvmlDeviceGetCurrPcieLinkWidth", handle),
        width_max=r.get("pcie", "nvmlDeviceGetMaxPcieLinkWidth", handle),
        replay_counter=r.get("pcie", "nvmlDeviceGetPcieReplayCounter", handle),
    )

    ecc = r.get("ecc mode", "nvmlDeviceGetEccMode", handle)  # (current, pending)
    if ecc is not None:
        gpu["ecc"]["enabled"], gpu["ecc"]["pending_enabled"] = bool(ecc[0]), bool(ecc[1])
    if gpu["ecc"]["enabled"]:
        for scope, counter in (
            ("volatile", nv.NVML_VOLATILE_ECC),
            ("aggregate", nv.NVML_AGGREGATE_ECC),
        ):
            gpu["ecc"][scope] = {
                "corrected": r.get(
                    "ecc",
                    "nvmlDeviceGetTotalEccErrors",
                    handle,
                    nv.NVML_MEMORY_ERROR_TYPE_CORRECTED,
                    counter,
                ),
                "uncorrected": r.get(
                    "ecc",
                    "nvmlDeviceGetTotalEccErrors",
                    handle,
                    nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
                    counter,
                ),
            }
        sbe = r.get(
            "retired pages",
            "nvmlDeviceGetRetiredPages",
            handle,
            nv.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS,
        )
        dbe = r.get(
            "retired pages",
            "nvmlDeviceGetRetiredPages",
            handle,
            nv.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR,
        )
        pending = r.get("retired pages", "nvmlDeviceGetRetiredPagesPendingStatus", handle)
        gpu["retired_pages"].update(
            single_bit=len(sbe) if sbe is not None else None,
            double_bit=len(dbe) if dbe is not None else None,
            pending=bool(pending) if pending is not None else None,
        )
        rows = r.get("remapped rows", "nvmlDeviceGetRemappedRows", handle)  # Ampere+ only
        if rows is not None:
            gpu["remapped_rows"].update(
                correctable=rows[0],
                uncorrectable=rows[1],
                pending=bool(rows[2]),
                failure=bool(rows[3]),
            )

    reasons = r.get("clock event reasons", "nvmlDeviceGetCurrentClocksEventReasons", handle)
    if reasons is None:
        reasons = r.get("clock event reasons", "nvmlDeviceGetCurrentClocksThrottleReasons", handle)
    gpu["clock_event_reasons"] = reasons_from_bits(reasons)

    mig = r.get("mig mode", "nvmlDeviceGetMigMode", handle)  # (current, pending)
    if mig is not None:
        gpu["mig"].update(enabled=bool(mig[0]), pending_enabled=bool(mig[1]))
        if mig[0]:
            gpu["mig"]["devices"] = r.get("mig", "nvmlDeviceGetMaxMigDeviceCount", handle)
    persistence = r.get("persistence", "nvmlDeviceGetPersistenceMode", handle)
    gpu["persistence_mode"] = bool(persistence) if persistence is not None else None
    pstate = r.get("pstate", "nvmlDeviceGetPerformanceState", handle)
    gpu["performance_state"] = "P%d" % pstate if pstate is not None else None
    gpu["fan_pct"] = r.get("fan", "nvmlDeviceGetFanSpeed", handle)
    if with_processes:
        gpu["processes"] = _processes(r, handle)
    gpu["errors"] = r.errors
    return gpu


def _processes(r: _Reader, handle: Any) -> Optional[List[Dict[str, Any]]]:
    procs = r.get("processes", "nvmlDeviceGetComputeRunningProcesses", handle)
    if procs is None:  # pynvml calls the _v3 symbol, which drivers before ~510 lack
        procs = r.get("processes", "nvmlDeviceGetComputeRunningProcesses_v2", handle)
    if procs is None:
        return None
    result = []
    for proc in procs:
        used = getattr(proc, "usedGpuMemory", None)
        result.append(
            {
                "pid": proc.pid,
                "name": _process_name(proc.pid),
                "type": "C",
                "used_mib": used // (1024 * 1024) if used is not None else None,
            }
        )
    return result


def _process_name(pid: int) -> Optional[str]:
    # In a container the PID is often the host's and has no /proc entry here.
    try:
        with open("/proc/%d/comm" % pid) as f:
            return f.read().strip() or None
    except OSError:
        return None


def _nvlink(nv: Any, gpus: List[Dict[str, Any]]) -> Dict[str, Any]:
    """Active NVLink links per GPU and, where the far end is another GPU, which one."""
    by_bus = {}
    for gpu in gpus:
        if gpu.get("pci_bus_id"):
            by_bus[gpu["pci_bus_id"].lower()] = gpu["index"]
    max_links = getattr(nv, "NVML_NVLINK_MAX_LINKS", 18)
    active: Dict[str, int] = {}
    peers: Dict[str, Dict[str, int]] = {}
    via_switch = False
    for gpu in gpus:
        handle = gpu.pop("_handle", None)
        if handle is None:
            continue
        count = 0
        for link in range(max_links):
            try:
                if not nv.nvmlDeviceGetNvLinkState(handle, link):
                    continue
            except nv.NVMLError:
                if link == 0:
                    break  # no NVLink on this GPU
                continue
            count += 1
            try:
                remote = _text(nv.nvmlDeviceGetNvLinkRemotePciInfo(handle, link).busId).lower()
            except nv.NVMLError:
                continue
            if remote in by_bus:
                key = str(by_bus[remote])
                peers.setdefault(str(gpu["index"]), {})
                peers[str(gpu["index"])][key] = peers[str(gpu["index"])].get(key, 0) + 1
            else:
                via_switch = True  # the far end is an NVSwitch (or a CPU), not a listed GPU
        active[str(gpu["index"])] = count
    return {
        "source": "nvml",
        "active_links": active,
        "peers": peers,
        "via_nvswitch": via_switch,
        "connected": any(active.values()),
    }
