"""NVIDIA driver and GPU state, shared by the `facts` and `health` agent commands.

`collect()` tries the sources in order and keeps the first that answers:
NVML through pynvml (in-process, stable API) -> `nvidia-smi -q -x` -> `nvidia-smi --query-gpu`
CSV. When none answers it says why (no driver, no GPU, nvidia-smi missing or hung), and
whether NVIDIA devices sit on the PCI bus anyway, which is the difference between "this is a
CPU box" and "the driver is broken".

On a host without NVIDIA this costs a few file reads and no program run: the parsers (and re,
xml.etree, subprocess, ctypes) are imported only when a source that needs them is tried, and
libcuda is only asked where there is a sign of an NVIDIA driver or device.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, List, Optional, Tuple

NVIDIA_PCI_VENDOR = "0x10de"
NVIDIA_SMI_PLACES = (
    "/usr/bin/nvidia-smi",
    "/usr/local/bin/nvidia-smi",
    "/usr/local/nvidia/bin/nvidia-smi",
)


def import_pynvml() -> Optional[Any]:
    """The pynvml module, or None where the host's Python does not have it."""
    if os.environ.get("PROVISION_AGENT_NO_NVML"):  # lets tests and users force the smi path
        return None
    try:
        import pynvml  # type: ignore

        return pynvml
    except Exception:
        return None


def query_may_block() -> bool:
    """Whether collect() will call into the driver (NVML or nvidia-smi), which can take seconds
    on a busy or broken GPU; without either it is a few file reads. Facts runs the query in a
    thread only when this is True. Looks for pynvml on sys.path without importing it."""
    if find_nvidia_smi() is not None:
        return True
    if os.environ.get("PROVISION_AGENT_NO_NVML"):
        return False
    for entry in sys.path:
        folder = entry or os.curdir
        if os.path.isfile(os.path.join(folder, "pynvml.py")) or os.path.isdir(
            os.path.join(folder, "pynvml")
        ):
            return True
    return False


def collect(
    with_processes: bool = True, smi_timeout: float = 20.0, topology_timeout: float = 10.0
) -> Dict[str, Any]:
    """{"source", "driver_version", "cuda_driver_version", "gpus", "nvlink", "attempts", "reason"}."""
    attempts: List[Dict[str, str]] = []
    result: Optional[Dict[str, Any]] = None

    module = import_pynvml()
    if module is None:
        attempts.append(
            {"source": "nvml", "error": "pynvml (nvidia-ml-py) is not importable by this Python"}
        )
    else:
        # lazy: nvml.py imports typing; facts on a host without pynvml import nothing expensive
        from provision.agent.nvidia import nvml

        try:
            result = nvml.collect(module, with_processes=with_processes)
            result["source"] = "nvml"
        except Exception as exc:
            attempts.append({"source": "nvml", "error": "%s: %s" % (type(exc).__name__, exc)})

    smi = find_nvidia_smi()
    if result is None and smi is None:
        attempts.append(
            {"source": "nvidia-smi", "error": "nvidia-smi not found on PATH or in /usr/bin"}
        )
    if result is None and smi is not None:
        result = _from_xml(smi, smi_timeout, attempts)
    if result is None and smi is not None:
        result = _from_csv(smi, smi_timeout, with_processes, attempts)

    if result is None:
        result = {
            "source": None,
            "driver_version": None,
            "cuda_version": None,
            "gpus": [],
            "nvlink": None,
        }
    result["attempts"] = attempts
    result["kernel_module_version"] = kernel_module_version()
    result["pci_devices"] = nvidia_pci_devices()
    cuda = result.pop("cuda_version", None)
    if not cuda and _driver_signs(result):
        cuda = cuda_version_from_libcuda()
    result["cuda_driver_version"] = cuda
    if not result.get("driver_version"):
        result["driver_version"] = result["kernel_module_version"]
    if result.get("nvlink") is None and smi is not None and len(result["gpus"]) > 1:
        result["nvlink"] = _topology(smi, topology_timeout)
    if not result["gpus"]:
        result["reason"] = no_gpu_reason(
            attempts, result["pci_devices"], result["kernel_module_version"]
        )
    return result


def _driver_signs(state: Dict[str, Any]) -> bool:
    """A GPU read, the kernel module loaded, an NVIDIA device on the PCI bus, or the driver's
    device node: only then is loading libcuda (ctypes, a dlopen) worth it."""
    return bool(
        state.get("gpus")
        or state.get("kernel_module_version")
        or state.get("pci_devices")
        or os.path.exists("/dev/nvidiactl")
    )


def _from_xml(smi: str, timeout: float, attempts: List[Dict[str, str]]) -> Optional[Dict[str, Any]]:
    # lazy: each nvidia-smi parser only when that fallback is tried (the agent starts per call)
    from provision.agent.nvidia import smi_xml

    code, out = run([smi, "-q", "-x"], timeout)
    if code != 0:
        attempts.append({"source": "nvidia-smi -q -x", "error": _smi_error(code, out)})
        return None
    try:
        parsed = smi_xml.parse(out)
    except smi_xml.SmiXmlError as exc:
        attempts.append({"source": "nvidia-smi -q -x", "error": str(exc)})
        return None
    parsed["source"] = "nvidia-smi-xml"
    parsed["nvlink"] = None
    return parsed


def _from_csv(
    smi: str, timeout: float, with_processes: bool, attempts: List[Dict[str, str]]
) -> Optional[Dict[str, Any]]:
    # lazy: each nvidia-smi parser only when that fallback is tried (the agent starts per call)
    from provision.agent.nvidia import smi_csv

    fields = list(smi_csv.DEFAULT_FIELDS)
    for _ in range(len(smi_csv.DEFAULT_FIELDS)):  # at most one retry per field
        cmd = [smi, "--query-gpu=" + ",".join(fields), "--format=csv,noheader,nounits"]
        code, out = run(cmd, timeout)
        rejected = smi_csv.invalid_field(out)
        if rejected and rejected in fields:
            fields = smi_csv.next_fields(fields, rejected)
            continue
        parsed = smi_csv.parse(out, fields)
        if code != 0 and not parsed["gpus"]:
            attempts.append({"source": "nvidia-smi --query-gpu", "error": _smi_error(code, out)})
            return None
        break
    else:
        attempts.append({"source": "nvidia-smi --query-gpu", "error": "every field was rejected"})
        return None
    for error in parsed["errors"]:
        attempts.append(
            {"source": "nvidia-smi --query-gpu", "error": "%(pci_bus_id)s: %(error)s" % error}
        )
    if with_processes:
        code, out = run(
            [
                smi,
                "--query-compute-apps=" + ",".join(smi_csv.PROCESS_FIELDS),
                "--format=csv,noheader,nounits",
            ],
            timeout,
        )
        by_uuid = smi_csv.parse_processes(out) if code == 0 else {}
        for gpu in parsed["gpus"]:
            gpu["processes"] = by_uuid.get(gpu["uuid"], []) if code == 0 else None
    return {
        "source": "nvidia-smi-csv",
        "driver_version": parsed["driver_version"],
        "cuda_version": None,
        "gpus": parsed["gpus"],
        "lost_gpus": parsed["errors"],
        "nvlink": None,
    }


def _topology(smi: str, timeout: float) -> Dict[str, Any]:
    # lazy: the topology query only when asked for (the agent starts per call)
    from provision.agent.nvidia import topology

    code, out = run([smi, "topo", "-m"], timeout)
    if code != 0:
        return {"source": "nvidia-smi topo -m", "error": _smi_error(code, out)}
    return topology.parse_topo_matrix(out)


def _smi_error(code: int, out: str) -> str:
    text = " ".join(out.split())[:300]
    if code == 124:
        return "timed out (%s); the driver or a GPU may be hung" % text
    return "exit %d: %s" % (code, text or "(no output)")


def find_nvidia_smi() -> Optional[str]:
    # A non-login SSH shell may lack /usr/bin on PATH in minimal images; look there too.
    # (shutil.which, written out: importing shutil costs more than the lookup.)
    for directory in os.environ.get("PATH", os.defpath).split(os.pathsep):
        path = os.path.join(directory, "nvidia-smi")
        if os.access(path, os.X_OK) and not os.path.isdir(path):
            return path
    for path in NVIDIA_SMI_PLACES:
        if os.access(path, os.X_OK):
            return path
    return None


def run(cmd: List[str], timeout: float) -> Tuple[int, str]:
    """(exit code, stdout+stderr); 124 on timeout, 127 when the program is missing."""
    import subprocess

    try:
        proc = subprocess.run(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as exc:
        partial = exc.output or b""
        return 124, partial.decode("utf-8", "replace") + " [killed after %ss]" % timeout
    except OSError as exc:
        return 127, str(exc)
    return proc.returncode, proc.stdout.decode("utf-8", "replace")


def kernel_module_version(path: str = "/proc/driver/nvidia/version") -> Optional[str]:
    """Driver version from the loaded kernel module, readable even without nvidia-smi."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError:
        return None
    import re

    match = re.search(r"Kernel Module(?: for \S+)?\s+(\d+\.\d+(?:\.\d+)?)", text)
    return match.group(1) if match else None


def cuda_version_from_libcuda() -> Optional[str]:
    """The CUDA version the driver supports, from libcuda's cuDriverGetVersion (no cuInit needed)."""
    import ctypes

    for name in ("libcuda.so.1", "libcuda.so"):
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        version = ctypes.c_int(0)
        try:
            if lib.cuDriverGetVersion(ctypes.byref(version)) == 0 and version.value:
                return "%d.%d" % (version.value // 1000, (version.value % 1000) // 10)
        except AttributeError:
            return None
    return None


def nvidia_pci_devices(sys_root: str = "/sys") -> List[Dict[str, str]]:
    """NVIDIA display/3D controllers on the PCI bus, whether or not a driver is bound."""
    devices = []
    base = os.path.join(sys_root, "bus/pci/devices")
    try:
        addresses = sorted(os.listdir(base))
    except OSError:
        addresses = []
    for address in addresses:  # what glob("bus/pci/devices/*/vendor") finds, without glob
        device_dir = os.path.join(base, address)
        if _read(os.path.join(device_dir, "vendor")) != NVIDIA_PCI_VENDOR:
            continue
        pci_class = _read(os.path.join(device_dir, "class")) or ""
        if not pci_class.startswith(
            "0x03"
        ):  # 0x0300 VGA, 0x0302 3D controller; skip audio, bridges
            continue
        driver = os.path.join(device_dir, "driver")
        devices.append(
            {
                "address": os.path.basename(device_dir),
                "device_id": _read(os.path.join(device_dir, "device")) or "",
                "driver": os.path.basename(os.path.realpath(driver))
                if os.path.exists(driver)
                else "",
            }
        )
    return devices


def no_gpu_reason(
    attempts: List[Dict[str, str]], pci: List[Dict[str, str]], module: Optional[str]
) -> str:
    errors = " | ".join("%s: %s" % (a["source"], a["error"]) for a in attempts)
    if "No devices were found" in errors:
        return "the NVIDIA driver is loaded but sees no GPU (No devices were found)"
    if pci and not module:
        return "%d NVIDIA GPU(s) on the PCI bus but the NVIDIA kernel module is not loaded (%s)" % (
            len(pci),
            errors,
        )
    if pci:
        return "%d NVIDIA GPU(s) on the PCI bus but no source could read them (%s)" % (
            len(pci),
            errors,
        )
    if module:
        return "NVIDIA driver %s is loaded but no GPU could be read (%s)" % (module, errors)
    if os.path.exists("/dev/nvidiactl"):
        return "/dev/nvidiactl exists but no source could read a GPU (%s)" % errors
    return "no NVIDIA GPU or driver found (%s)" % errors


def _read(path: str) -> Optional[str]:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None
