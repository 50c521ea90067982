"""NVML access shared by the sampler, transfer and distributed sections (pynvml if present).

CUDA and NVML may number GPUs differently (CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER), so a
CUDA device is matched to its NVML handle by PCI bus id when torch exposes it.
"""

from provision.agent.nvidia.gpu_model import CLOCK_EVENT_REASON_BITS as THROTTLE_REASONS

# Reasons that mean the GPU is slowed by something wrong (heat, power, a hardware signal);
# idle and configured clocks are normal.
HARMFUL_REASONS = (
    "sw_power_cap",
    "hw_slowdown",
    "sw_thermal_slowdown",
    "hw_thermal_slowdown",
    "hw_power_brake_slowdown",
)


def decode_throttle(mask):
    return [name for bit, name in THROTTLE_REASONS if mask & bit]


_state = {"nvml": None, "error": None}


def load():
    """(pynvml module, None) once initialized, or (None, reason it is unavailable)."""
    if _state["nvml"] is not None or _state["error"] is not None:
        return _state["nvml"], _state["error"]
    try:
        import pynvml
    except ImportError:
        _state["error"] = "pynvml (nvidia-ml-py) is not installed"
        return None, _state["error"]
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # NVMLError: no driver, no GPU, library missing
        _state["error"] = "NVML unavailable: %s" % exc
        return None, _state["error"]
    _state["nvml"] = pynvml
    return pynvml, None


def _text(value):
    return value.decode() if isinstance(value, bytes) else value


def handle_for_cuda(torch, index):
    """The NVML handle of CUDA device `index`, or None."""
    nvml, _ = load()
    if nvml is None:
        return None
    props = torch.cuda.get_device_properties(index)
    bus = getattr(props, "pci_bus_id", None)
    if bus is not None:
        # nvidia-smi's spelling, e.g. 00000000:3B:00.0 (pynvml calls the _v2 entry point).
        bus_id = "%08X:%02X:%02X.0" % (
            getattr(props, "pci_domain_id", 0),
            bus,
            getattr(props, "pci_device_id", 0),
        )
        try:
            return nvml.nvmlDeviceGetHandleByPciBusId(bus_id.encode())
        except Exception:
            pass
    try:
        return nvml.nvmlDeviceGetHandleByIndex(index)
    except Exception:
        return None


def call(fn, *args):
    """An NVML query that may be unsupported on this GPU/driver: None instead of an error."""
    try:
        return fn(*args)
    except Exception:
        return None


def pcie_link(handle):
    nvml, _ = load()
    if nvml is None or handle is None:
        return None
    link = {
        "gen": call(nvml.nvmlDeviceGetCurrPcieLinkGeneration, handle),
        "width": call(nvml.nvmlDeviceGetCurrPcieLinkWidth, handle),
        "max_gen": call(nvml.nvmlDeviceGetMaxPcieLinkGeneration, handle),
        "max_width": call(nvml.nvmlDeviceGetMaxPcieLinkWidth, handle),
    }
    return link if any(v is not None for v in link.values()) else None


def active_nvlinks(handle, max_links=18):
    nvml, _ = load()
    if nvml is None or handle is None:
        return None
    active = 0
    for link in range(max_links):
        state = call(nvml.nvmlDeviceGetNvLinkState, handle, link)
        if state is None:
            break  # past the last link this GPU has (or NVLink unsupported)
        if state:
            active += 1
    return active


def device_name(handle):
    nvml, _ = load()
    if nvml is None or handle is None:
        return None
    return _text(call(nvml.nvmlDeviceGetName, handle))
