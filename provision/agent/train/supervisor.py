"""The detached process behind a run: starts the user's command in its own session and
process group, samples while it runs, records how it ended, then (with --stop-when-idle)
watches for idleness.

Started by the agent's train_start as `python -c BOOT AGENT_DIR run RUN_DIR` in a new session
(setsid) with its stdio on files, so it outlives the SSH session, the agent and the controller.
The secrets file the agent wrote (0600) is read and removed before the command starts.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time

from provision.agent.train import idle, procs, rundir

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, List

BOOT = (
    "import sys; sys.path.insert(0, sys.argv[1]); "
    "from provision.agent.train.supervisor import main; sys.exit(main(sys.argv[2:]))"
)
MAX_SAMPLES = 20000  # then every 10th: a week-long run keeps a bounded file
INSTRUMENT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "instrument")
# sitecustomize.py and the siblings it imports: what goes first on the run's PYTHONPATH
INSTRUMENT_FILES = ("sitecustomize.py", "provision_batches.py", "provision_hygiene.py")


def spawn(python: str, agent_dir: str, mode: str, directory: str) -> int:
    """Start a detached supervisor; returns its pid."""
    log = open(os.path.join(directory, rundir.SUPERVISOR_LOG), "ab")
    with log:
        proc = subprocess.Popen(
            [python, "-c", BOOT, agent_dir, mode, directory],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log,
            start_new_session=True, close_fds=True, cwd="/",
        )
    return proc.pid


class _Log(object):
    def __init__(self, directory: str) -> None:
        self.path = os.path.join(directory, rundir.SUPERVISOR_LOG)

    def __call__(self, message: str) -> None:
        line = "%s %s\n" % (time.strftime("%Y-%m-%dT%H:%M:%S"), message)
        try:
            with open(self.path, "a") as f:
                f.write(line)
        except OSError:
            pass


def _read_env(directory: str) -> Dict[str, str]:
    path = os.path.join(directory, rundir.ENV_FILE)
    try:
        with open(path) as f:
            env = json.load(f)
    except (OSError, ValueError):
        return {}
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass
    return dict((str(k), str(v)) for k, v in env.items())


def child_env(state: Dict[str, Any], directory: str, user_env: Dict[str, str]) -> Dict[str, str]:
    env = dict(os.environ)
    python = state.get("python")
    if python:
        bindir = os.path.dirname(python)
        env["PATH"] = bindir + os.pathsep + env.get("PATH", os.defpath)
        if os.path.isfile(os.path.join(os.path.dirname(bindir), "pyvenv.cfg")):
            env["VIRTUAL_ENV"] = os.path.dirname(bindir)
    env.setdefault("PYTHONUNBUFFERED", "1")  # log lines as they are printed, not per 8 KiB
    env.update(user_env)
    env["PROVISION_RUN_ID"] = str(state["run_id"])
    env["PROVISION_RUN_MARK"] = procs.run_mark(state)
    env["PROVISION_RUN_DIR"] = directory
    if state.get("instrument"):
        inst_dir = os.path.join(directory, "instrument")
        env["PYTHONPATH"] = inst_dir + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        env["PROVISION_TRAIN_INSTRUMENT"] = os.path.join(directory, rundir.INSTRUMENT)
    return env


def _on_path(name: str, env: Dict[str, str]) -> bool:
    for folder in env.get("PATH", os.defpath).split(os.pathsep):
        if folder and os.access(os.path.join(folder, name), os.X_OK):
            return True
    return False


def _sample_loop(directory: str, child: Any, interval: float, stop: Any, log: Any) -> None:
    # lazy: the samplers load in the detached sampler process only
    from provision.agent.train.gpu import GpuProbe
    from provision.agent.train.sampler import RunSampler

    try:
        probe = GpuProbe()
        sampler = RunSampler(child.pid, child.pid, probe)
    except Exception as exc:
        log("sampler could not start: %s" % exc)
        return
    rundir.update_state(directory, gpu_source=probe.source, gpu_reason=probe.reason)
    path = os.path.join(directory, rundir.SAMPLES)
    n = 0
    with open(path, "a", buffering=1) as out:
        while not stop.wait(interval):
            try:
                row = sampler.sample()
            except Exception as exc:  # a sampling hiccup never ends the run
                log("sample failed: %s" % exc)
                continue
            n += 1
            if n <= MAX_SAMPLES or n % 10 == 0:
                out.write(json.dumps(row, separators=(",", ":")) + "\n")


def run_command(directory: str) -> int:
    log = _Log(directory)
    state = rundir.read_state(directory)
    if state is None:
        log("no state.json in %s" % directory)
        return 2
    user_env = _read_env(directory)
    rundir.update_state(directory, pid=os.getpid())
    if state.get("instrument"):
        inst_dir = os.path.join(directory, "instrument")
        os.makedirs(inst_dir, exist_ok=True)
        for name in INSTRUMENT_FILES:
            with open(os.path.join(INSTRUMENT_DIR, name), "rb") as src, open(os.path.join(inst_dir, name), "wb") as dst:
                dst.write(src.read())
    env = child_env(state, directory, user_env)
    argv = [str(a) for a in state["command"]]
    if state.get("python") and argv and argv[0] in ("python", "python3"):
        argv[0] = state["python"]  # the chosen interpreter, whatever PATH the shell had
    elif argv and argv[0] == "python" and not _on_path("python", env) and _on_path("python3", env):
        argv[0] = "python3"  # Debian/Ubuntu hosts have no `python` unless python-is-python3
    logf = open(os.path.join(directory, rundir.LOG), "ab")
    started = time.time()
    try:
        child = subprocess.Popen(argv, cwd=state["workdir"], env=env, stdin=subprocess.DEVNULL,
                                 stdout=logf, stderr=subprocess.STDOUT, start_new_session=True,
                                 close_fds=True)
    except OSError as exc:
        logf.write(("provision: cannot start %s: %s\n" % (argv[0], exc)).encode())
        logf.close()
        rundir.update_state(directory, state="failed", exit_code=127, started=started,
                            ended=time.time(), seconds=0.0, error=str(exc))
        return 0
    finally:
        user_env.clear()
    logf.close()
    rundir.update_state(directory, state="running", pgid=child.pid, child_pid=child.pid,
                        started=started)
    log("started pid %d: %s" % (child.pid, " ".join(argv)))
    stop = threading.Event()
    sampler = threading.Thread(target=_sample_loop,
                               args=(directory, child, float(state.get("interval") or 1.0), stop, log))
    sampler.daemon = True
    sampler.start()

    def forward(signum, frame):  # the supervisor asked to stop: pass it to the run's group
        try:
            os.killpg(child.pid, signum)
        except OSError:
            pass

    signal.signal(signal.SIGTERM, forward)
    code = child.wait()
    # the run is over: from here (the idle watch may last hours) a SIGTERM ends the supervisor
    # itself, as `kill` or a shutdown expects, instead of going to a group that is gone
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    ended = time.time()
    stop.set()
    sampler.join(timeout=10)
    mark = procs.run_mark(state)
    leftovers = procs.run_processes(child.pid, str(state["run_id"]), mark=mark)
    if leftovers:  # the main process is the run: what it left behind holds GPUs and memory
        log("main process ended; ending %d leftover process(es) %s" % (len(leftovers), leftovers))
        procs.end_processes(child.pid, str(state["run_id"]), grace=5.0, mark=mark)
    stopped = os.path.exists(os.path.join(directory, rundir.STOP_MARK))
    exit_code = code if code >= 0 else 128 - code
    final = "stopped" if stopped else ("finished" if code == 0 else "failed")
    log("ended: %s, exit code %d after %.1fs" % (final, exit_code, ended - started))
    state = rundir.update_state(directory, state=final, exit_code=exit_code, ended=ended,
                                seconds=round(ended - started, 3),
                                signal=-code if code < 0 else None)
    if state.get("stop_when_idle") is not None and final != "stopped":
        _idle_after(directory, state, log)
    return 0


def _idle_after(directory: str, state: Dict[str, Any], log: Any) -> None:
    # lazy: the samplers load in the detached sampler process only
    from provision.agent.train.gpu import GpuProbe

    command = state.get("stop_command")
    if not command:
        log("--stop-when-idle: no stop_command for this host; nothing to run")
        return
    rundir.update_state(directory, idle={"status": "watching", "since": time.time()})
    result = idle.watch(str(state["data_dir"]), float(state["stop_when_idle"]), str(command), directory,
                        log, gpu_probe=GpuProbe(), exclude_run=str(state["run_id"]))
    rundir.update_state(directory, idle=result)


def run_idle(directory: str) -> int:
    """`provision idle HOST`: a watcher of its own (state in <runs>/.idle/state.json)."""
    # lazy: the samplers load in the detached sampler process only
    from provision.agent.train.gpu import GpuProbe

    log = _Log(directory)
    state = rundir.read_state(directory) or {}
    rundir.update_state(directory, pid=os.getpid(), status="watching")
    result = idle.watch(str(state["data_dir"]), float(state["duration"]), str(state["stop_command"]),
                        directory, log, gpu_probe=GpuProbe())
    result["pid"] = os.getpid()
    rundir.update_state(directory, **result)
    return 0


def main(argv: List[str]) -> int:
    mode, directory = argv[0], argv[1]
    try:
        if mode == "run":
            return run_command(directory)
        if mode == "idle":
            return run_idle(directory)
    except Exception as exc:  # last words where `provision` can show them
        import traceback

        _Log(directory)("supervisor error: %s\n%s" % (exc, traceback.format_exc()))
        state = rundir.read_state(directory) or {}
        if state.get("state") in ("starting", "running") or mode == "run":
            rundir.update_state(directory, state=state.get("state") if state.get("state") in rundir.ENDED else "failed",
                                error="supervisor error: %s" % exc)
        return 1
    return 2
