"""NVML -> GPU record conversion, against a stand-in shaped like pynvml.

Only the conversion is tested here (units, tuples, bitmasks, error handling); calling a real
NVML needs a GPU. The stand-in raises like pynvml does: NVMLError subclasses with `.value`.
"""

from types import SimpleNamespace

from provision.agent.nvidia import nvml
from provision.agent.nvidia.gpu_model import new_gpu

MIB = 1024 * 1024


class NVMLError(Exception):
    def __init__(self, value):
        super().__init__(f"NVML error {value}")
        self.value = value


NOT_SUPPORTED, GPU_IS_LOST = 3, 15


class FakeNVML:
    NVMLError = NVMLError
    NVML_TEMPERATURE_GPU = 0
    NVML_TEMPERATURE_THRESHOLD_SHUTDOWN = 0
    NVML_TEMPERATURE_THRESHOLD_SLOWDOWN = 1
    NVML_TEMPERATURE_THRESHOLD_GPU_MAX = 3
    NVML_CLOCK_GRAPHICS, NVML_CLOCK_SM, NVML_CLOCK_MEM = 0, 1, 2
    NVML_VOLATILE_ECC, NVML_AGGREGATE_ECC = 0, 1
    NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 0, 1
    NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS = 0
    NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR = 1
    NVML_NVLINK_MAX_LINKS = 18

    def __init__(self, devices):
        self.devices = devices
        self.calls = []

    def nvmlInit(self):
        self.calls.append("init")

    def nvmlShutdown(self):
        self.calls.append("shutdown")

    def nvmlSystemGetDriverVersion(self):
        return b"535.129.03"  # old pynvml returns bytes

    def nvmlSystemGetCudaDriverVersion(self):
        return 12020

    def nvmlDeviceGetCount(self):
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, index):
        device = self.devices[index]
        if device.get("lost"):
            raise NVMLError(GPU_IS_LOST)
        return device

    def __getattr__(self, name):
        # Every other nvmlDeviceGet* call reads the device dict; a missing key means the
        # GPU does not support it, an exception instance in the dict is raised.
        if not name.startswith("nvmlDeviceGet"):
            raise AttributeError(name)
        key = name[len("nvmlDeviceGet") :]

        def call(handle, *args):
            value = handle.get((key,) + args, handle.get(key, NVMLError(NOT_SUPPORTED)))
            if isinstance(value, Exception):
                raise value
            return value

        return call


def a100(bus, links_to=()):
    device = {
        "Name": "NVIDIA A100-SXM4-80GB",
        "UUID": "GPU-" + bus,
        "PciInfo": SimpleNamespace(busId=b"00000000:%s:00.0" % bus.encode()),
        "Architecture": 7,
        "CudaComputeCapability": (8, 0),
        "MemoryInfo": SimpleNamespace(total=81920 * MIB, used=1024 * MIB, free=80896 * MIB),
        "UtilizationRates": SimpleNamespace(gpu=87, memory=40),
        ("Temperature", 0): 61,
        ("TemperatureThreshold", 1): 90,
        ("TemperatureThreshold", 0): 95,
        ("TemperatureThreshold", 3): 87,
        "PowerUsage": 312500,
        "EnforcedPowerLimit": 300000,
        "PowerManagementDefaultLimit": 400000,
        "PowerManagementLimitConstraints": (100000, 400000),
        ("ClockInfo", 0): 1410,
        ("ClockInfo", 1): 1410,
        ("ClockInfo", 2): 1593,
        ("MaxClockInfo", 1): 1410,
        ("MaxClockInfo", 2): 1593,
        "CurrPcieLinkGeneration": 4,
        "MaxPcieLinkGeneration": 4,
        "CurrPcieLinkWidth": 16,
        "MaxPcieLinkWidth": 16,
        "PcieReplayCounter": 0,
        "EccMode": (1, 1),
        ("TotalEccErrors", 0, 0): 2,
        ("TotalEccErrors", 1, 0): 0,
        ("TotalEccErrors", 0, 1): 5,
        ("TotalEccErrors", 1, 1): 0,
        ("RetiredPages", 0): [],
        ("RetiredPages", 1): [],
        "RetiredPagesPendingStatus": 0,
        "RemappedRows": (0, 1, 1, 0),
        "CurrentClocksEventReasons": 0x4 | 0x40,
        "MigMode": (0, 0),
        "PersistenceMode": 1,
        "PerformanceState": 0,
        "FanSpeed": NVMLError(NOT_SUPPORTED),
        "ComputeRunningProcesses": [SimpleNamespace(pid=999999999, usedGpuMemory=900 * MIB)],
    }
    for link, peer in enumerate(links_to):
        device[("NvLinkState", link)] = 1
        device[("NvLinkRemotePciInfo", link)] = SimpleNamespace(busId=f"00000000:{peer}:00.0")
    return device


def test_conversion_of_units_tuples_and_bitmasks():
    fake = FakeNVML([a100("07", links_to=["0F", "0F"]), a100("0F", links_to=["07", "07"])])
    state = nvml.collect(fake)
    assert fake.calls == ["init", "shutdown"]
    assert state["driver_version"] == "535.129.03" and state["cuda_version"] == "12.2"
    gpu = state["gpus"][0]
    assert gpu.keys() == new_gpu("nvml").keys()
    assert gpu["compute_capability"] == "8.0" and gpu["architecture"] == "Ampere"
    assert gpu["memory"]["total_mib"] == 81920 and gpu["memory"]["reserved_mib"] is None
    assert gpu["power"] == {
        "draw_w": 312.5,
        "limit_w": 300.0,
        "default_limit_w": 400.0,
        "max_limit_w": 400.0,
    }
    assert gpu["temperature"]["slowdown_c"] == 90 and gpu["temperature"]["max_operating_c"] == 87
    assert gpu["ecc"]["volatile"] == {"corrected": 2, "uncorrected": 0}
    assert gpu["ecc"]["aggregate"] == {"corrected": 5, "uncorrected": 0}
    assert gpu["retired_pages"] == {"single_bit": 0, "double_bit": 0, "pending": False}
    assert gpu["remapped_rows"] == {
        "correctable": 0,
        "uncorrectable": 1,
        "pending": True,
        "failure": False,
    }
    assert gpu["clock_event_reasons"] == ["sw_power_cap", "hw_thermal_slowdown"]
    assert gpu["performance_state"] == "P0" and gpu["fan_pct"] is None
    assert gpu["processes"] == [{"pid": 999999999, "name": None, "type": "C", "used_mib": 900}]
    assert "_handle" not in gpu
    assert state["nvlink"]["active_links"] == {"0": 2, "1": 2}
    assert state["nvlink"]["peers"] == {"0": {"1": 2}, "1": {"0": 2}}
    assert state["nvlink"]["via_nvswitch"] is False


def test_old_driver_without_event_reason_call_uses_throttle_reasons():
    device = a100("07")
    del device["CurrentClocksEventReasons"]
    device["CurrentClocksThrottleReasons"] = 0x1
    (gpu,) = nvml.collect(FakeNVML([device]))["gpus"]
    assert gpu["clock_event_reasons"] == ["gpu_idle"]


def test_lost_gpu_is_an_error_and_the_rest_still_read():
    broken = a100("0F")
    broken["Temperature", 0] = NVMLError(GPU_IS_LOST)
    state = nvml.collect(FakeNVML([a100("07"), broken, {"lost": True}]))
    assert state["gpus"][0]["errors"] == []
    assert state["gpus"][1]["errors"] == ["temperature: GPU is lost"]
    assert state["gpus"][1]["temperature"]["gpu_c"] is None
    assert state["gpus"][2]["errors"] == ["handle: GPU is lost"]
    assert state["nvlink"]["connected"] is False


def test_ecc_disabled_skips_error_counters():
    device = a100("07")
    device["EccMode"] = (0, 0)
    (gpu,) = nvml.collect(FakeNVML([device]))["gpus"]
    assert gpu["ecc"]["enabled"] is False
    assert gpu["ecc"]["volatile"] == {"corrected": None, "uncorrected": None}
