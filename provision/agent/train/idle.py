"""Stop paying for idle GPUs: once no run is active and every GPU stays idle for DURATION, run
the host's configured stop command (the `stop_command` var, sent by the controller; never a
guess), once, logged. Cancelled by a marker file; the watch itself ends after `max_wait`.

On a host without GPUs "idle" means no run is active (there is no GPU to watch), and the
log says so.
"""

from __future__ import annotations

import os
import subprocess
import time

from provision.agent.train import rundir

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Dict, Optional

GPU_IDLE_UTIL = 5  # % utilization at or under which a GPU counts as idle
COMMAND_TIMEOUT_S = 300
CANCEL = "cancel"


def idle_dir(data_dir: str) -> str:
    return os.path.join(rundir.runs_root(data_dir), ".idle")


def busy_reason(data_dir: str, gpu_probe: Any, exclude_run: Optional[str] = None) -> Optional[str]:
    """Why the host is not idle now, or None."""
    for run in rundir.list_runs(data_dir):
        if run.get("run_id") != exclude_run and run.get("state") in ("starting", "running"):
            return "run %s is %s" % (run.get("run_id"), run.get("state"))
    if gpu_probe is not None:
        for gpu in gpu_probe.sample():
            if gpu.get("util") is not None and gpu["util"] > GPU_IDLE_UTIL:
                return "GPU %s at %s%% utilization" % (gpu.get("i"), gpu["util"])
    return None


def watch(data_dir: str, duration: float, stop_command: str, state_dir: str,
          log: Callable[[str], None], gpu_probe: Any = None, poll: float = 1.0,
          max_wait: float = 7 * 86400.0, exclude_run: Optional[str] = None) -> Dict[str, Any]:
    """Wait for `duration` seconds of idleness, then run `stop_command` once. Returns what
    happened: {"status": "stopped"|"cancelled"|"gave_up"|"command_failed", ...}."""
    started = time.time()
    idle_since = None  # type: Optional[float]
    gpus = "no GPUs here: idle means no run is active" if gpu_probe is None or not gpu_probe.source else "GPUs via %s" % gpu_probe.source
    log("idle watch: stop after %gs idle (%s); command: %s" % (duration, gpus, stop_command))
    cancel = os.path.join(state_dir, CANCEL)
    last_reason = None
    while time.time() - started < max_wait:
        if os.path.exists(cancel):
            log("idle watch cancelled")
            return {"status": "cancelled", "at": time.time()}
        reason = busy_reason(data_dir, gpu_probe, exclude_run)
        now = time.time()
        if reason:
            if reason != last_reason:
                log("busy: %s" % reason)
            last_reason = reason
            idle_since = None
        else:
            if idle_since is None:
                idle_since = now
                log("idle since now")
                last_reason = None
            if now - idle_since >= duration:
                return run_stop_command(stop_command, log, idle_since)
        time.sleep(min(poll, max(0.05, duration / 4.0)))
    log("idle watch gave up after %gs" % max_wait)
    return {"status": "gave_up", "at": time.time()}


def run_stop_command(command: str, log: Callable[[str], None], idle_since: float) -> Dict[str, Any]:
    log("idle for %.1fs: running the stop command" % (time.time() - idle_since))
    try:
        proc = subprocess.run(["/bin/sh", "-c", command], stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              timeout=COMMAND_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        log("stop command did not finish in %ds" % COMMAND_TIMEOUT_S)
        return {"status": "command_failed", "exit_code": None, "at": time.time()}
    out = proc.stdout.decode("utf-8", "replace").strip()
    log("stop command exit %d%s" % (proc.returncode, (": " + out[-2000:]) if out else ""))
    return {"status": "stopped" if proc.returncode == 0 else "command_failed",
            "exit_code": proc.returncode, "idle_since": idle_since, "at": time.time()}
