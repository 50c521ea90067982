"""The `facts` agent command: everything about a host in one call, in well under a second.

Each key comes from one small source function. A source that fails gives its key
`{"error": "..."}` and the others go on. The GPU query, when it will call into the driver
(NVML or nvidia-smi, seconds on a busy GPU), runs in a thread with the CUDA-library scan while
the file-reading sources run here; on a host without either, everything runs here. Nothing
imports torch. docs/facts.md documents every key.

CPU is the cost that matters: each call is a fresh interpreter, and on a small host (or a test
fleet sharing one machine) facts for many hosts compete for the same cores. So /proc/self/mountinfo
is parsed once and handed to every source that needs it, and no module imported on the way
(here or in protocol.py) pulls in typing, re, subprocess, threading, socket or json unless a
source actually needs it: on a host without a GPU a call is an interpreter start and file reads.

Request (all optional):
  only: [keys]               gather just these keys
  data_dir: "/path"          use this data directory instead of choosing one
  nvidia_smi_timeout: 20     seconds before a hung nvidia-smi is given up on
"""

from __future__ import annotations

import time

from provision.agent import nvidia
from provision.agent.facts import (
    cpu,
    cuda_libs,
    data_dir,
    disks,
    memory,
    mounts,
    network,
    python_env,
    system,
    torch_info,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Dict, List, Optional

SCHEMA_VERSION = 1
KEYS = ("hostname", "os", "cpu", "memory", "disks", "data_dir", "network", "python", "torch", "nvidia", "gpus")


class _Background(object):
    """Runs one source in a thread (or, with threaded=False, right here and now); `result()`
    waits for it and raises what the source raised."""

    def __init__(self, func: Callable[[], Any], threaded: bool = True) -> None:
        self._func = func
        self._value: Any = None
        self._error: Optional[BaseException] = None
        self._seconds = 0.0
        self._thread: Any = None
        if not threaded:
            self._run()
            return
        import threading

        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        started = time.time()
        try:
            self._value = self._func()
        except Exception as exc:
            self._error = exc
        self._seconds = time.time() - started

    def result(self, timeout: float) -> Any:
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                raise TimeoutError("did not finish in %ss" % timeout)
        if self._error is not None:
            raise self._error
        return self._value

    @property
    def milliseconds(self) -> int:
        return int(self._seconds * 1000)


def _error(exc: BaseException) -> Dict[str, str]:
    return {"error": "%s: %s" % (type(exc).__name__, exc)}


def gather(request: Dict[str, Any], ctx: Any) -> Dict[str, Any]:
    started = time.time()
    only = request.get("only") or list(KEYS)
    unknown = sorted(set(only) - set(KEYS))
    if unknown:
        raise ValueError(
            "unknown fact key(s) %s in the request's 'only'; known: %s" % (unknown, ", ".join(KEYS))
        )
    smi_timeout = float(request.get("nvidia_smi_timeout", 20))
    wanted = set(only)
    if "torch" in wanted:
        wanted.add("python")  # torch looks into the conda envs python finds
    if "data_dir" in wanted:
        wanted.add("disks")

    background: Dict[str, _Background] = {}
    if wanted & {"nvidia", "gpus"}:
        threaded = nvidia.query_may_block()
        background["nvidia"] = _Background(
            lambda: nvidia.collect(with_processes=False, smi_timeout=smi_timeout), threaded
        )
        if "nvidia" in wanted:  # may run nvcc --version where no file names its version
            background["cuda_libs"] = _Background(cuda_libs.gather, threaded)

    facts: Dict[str, Any] = {"schema": SCHEMA_VERSION}
    timings: Dict[str, int] = {}
    mount_table: List[Any] = []
    if wanted & {"os", "cpu", "memory", "disks", "data_dir"}:
        mount_table = mounts.read_mounts()  # once: each of those sources looks through it
    sources: List[Any] = [
        ("hostname", system.hostname),
        ("os", lambda: system.os_info(mounts=mount_table)),
        ("cpu", lambda: cpu.gather(mounts=mount_table)),
        ("memory", lambda: memory.gather(mounts=mount_table)),
        ("disks", lambda: disks.gather(mounts=mount_table)),
        ("data_dir", lambda: data_dir.choose(request, mounts=mount_table)),
        ("network", network.gather),
        ("python", python_env.gather),
        ("torch", lambda: torch_info.gather(_conda_envs(facts.get("python")))),
    ]
    for key, func in sources:
        if key not in wanted:
            continue
        began = time.time()
        try:
            facts[key] = func()
        except Exception as exc:
            facts[key] = _error(exc)
        timings[key] = int((time.time() - began) * 1000)

    if "nvidia" in background:
        wait = smi_timeout * 3 + 15  # XML, CSV and topology each have their own timeout
        try:
            gpu_state = background["nvidia"].result(wait)
            facts["nvidia"], facts["gpus"] = _split_nvidia(gpu_state)
        except Exception as exc:
            facts["nvidia"], facts["gpus"] = _error(exc), _error(exc)
        timings["nvidia"] = background["nvidia"].milliseconds
    if (
        "cuda_libs" in background
        and isinstance(facts.get("nvidia"), dict)
        and "error" not in facts["nvidia"]
    ):
        try:
            facts["nvidia"].update(background["cuda_libs"].result(30))
        except Exception as exc:
            facts["nvidia"]["cuda_libs_error"] = _error(exc)["error"]
        timings["cuda_libs"] = background["cuda_libs"].milliseconds

    for key in list(facts):
        if key not in only and key != "schema":
            del facts[key]
    facts["timings_ms"] = timings
    facts["seconds"] = round(time.time() - started, 3)
    return facts


def _conda_envs(python: Any) -> List[Dict[str, Any]]:
    if isinstance(python, dict) and isinstance(python.get("conda"), dict):
        return python["conda"].get("envs") or []
    return []


def _split_nvidia(state: Dict[str, Any]) -> Any:
    gpus = state.get("gpus") or []
    summary = {
        "driver_version": state.get("driver_version"),
        "cuda_driver_version": state.get("cuda_driver_version"),
        "kernel_module_version": state.get("kernel_module_version"),
        "source": state.get("source"),
        "gpu_count": len(gpus),
        "nvlink": state.get("nvlink"),
        "pci_devices": state.get("pci_devices"),
        "attempts": state.get("attempts"),
    }
    if state.get("lost_gpus"):
        summary["lost_gpus"] = state["lost_gpus"]
    if state.get("reason"):
        summary["reason"] = state["reason"]
    return summary, gpus
