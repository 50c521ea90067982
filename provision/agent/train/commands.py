"""The agent commands of `provision train` (registered in provision/agent/protocol.py)."""

from __future__ import annotations

import os
import sys
import time

from provision.agent.train import codesync, idle, procs, rundir, supervisor

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict

FOLLOW_MAX_S = 600.0  # one follow call; the controller calls again while the run goes on
FOLLOW_POLL_S = 0.25
HEARTBEAT_S = 15.0  # a quiet job still sends something: the controller can tell a live link from a dead one
AGENT_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _data_dir(request: Dict[str, Any]) -> str:
    data_dir = request.get("data_dir")
    if not data_dir:
        raise ValueError("request lacks data_dir")
    return os.path.expanduser(str(data_dir))


def _run_dir(request: Dict[str, Any]) -> str:
    path = rundir.run_dir(_data_dir(request), str(request.get("run_id")))
    if not os.path.isdir(path):
        known = [r.get("run_id") for r in rundir.list_runs(_data_dir(request))][-5:]
        raise LookupError("no run %r under %s (latest: %s)" % (
            request.get("run_id"), rundir.runs_root(_data_dir(request)), ", ".join(map(str, known)) or "none"))
    return path


def code_plan(request: Dict[str, Any], ctx: Any) -> Dict[str, Any]:
    """What the code folder already holds: path -> sha256."""
    dest = os.path.expanduser(str(request["dest"]))
    return {"dest": dest, "have": codesync.have(dest)}


def start(request: Dict[str, Any], ctx: Any) -> Dict[str, Any]:
    """Sync the code from the payload, make the run dir, start the detached supervisor."""
    data_dir = _data_dir(request)
    run_id = rundir.check_run_id(str(request["run_id"]))
    directory = rundir.run_dir(data_dir, run_id)
    command = [str(a) for a in request.get("command") or []]
    if not command:
        raise ValueError("no command to run (give it after --)")
    python = request.get("python")
    if python and not os.access(os.path.expanduser(str(python)), os.X_OK):
        raise ValueError("interpreter %s is not an executable file on this host (--python)" % python)
    try:
        rundir.make_private_dir(directory)
    except FileExistsError:  # a run id is never reused: its log and state are that run's
        raise ValueError("run id %r is already used on this host (%s): choose another --run-id, or see that "
                         "run with `provision runs` / `provision logs HOST %s`" % (run_id, directory, run_id)) from None
    sync = None
    code = request.get("code")
    if code:
        dest = os.path.expanduser(str(code["dest"]))
        sync = codesync.apply(dest, ctx.stdin, code["files"], code.get("executable") or [])
        workdir = request.get("workdir")
        if not workdir:
            workdir = os.path.join(directory, "code")
            codesync.copy_code(dest, workdir)
    else:
        workdir = request.get("workdir") or os.path.expanduser("~")
    workdir = os.path.expanduser(str(workdir))
    if not os.path.isdir(workdir):
        raise ValueError("workdir %s does not exist on this host" % workdir)
    state = {
        "run_id": run_id, "state": "starting", "created": time.time(), "command": command,
        "workdir": workdir, "log": os.path.join(directory, rundir.LOG), "python": python,
        "instrument": bool(request.get("instrument", True)), "interval": float(request.get("interval") or 1.0),
        "data_dir": data_dir, "stop_when_idle": request.get("stop_when_idle"),
        "stop_command": request.get("stop_command"), "exit_code": None, "pgid": None,
        "rank": request.get("rank", 0), "world_size": request.get("world_size", 1),
        "hosts": request.get("hosts") or [], "label": request.get("label"),
        "distributed": request.get("distributed"),
    }
    rundir.write_json_atomic(os.path.join(directory, rundir.STATE), state)
    env = request.get("env") or {}
    # secrets too: the request came over stdin; 0600 from creation, removed by the supervisor
    rundir.write_json_atomic(os.path.join(directory, rundir.ENV_FILE), env, mode=0o600)
    open(os.path.join(directory, rundir.LOG), "ab").close()
    pid = supervisor.spawn(sys.executable, AGENT_DIR, "run", directory)
    rundir.update_state(directory, pid=pid)
    deadline = time.time() + 15.0  # until the command runs (or failed to start)
    while time.time() < deadline:
        current = rundir.read_state(directory) or {}
        if current.get("state") != "starting":
            break
        if not rundir.pid_alive(pid):
            break
        time.sleep(0.05)
    current = rundir.current_state(directory) or state
    return {"run": _public(current), "sync": sync, "run_dir": directory}


def _public(state: Dict[str, Any]) -> Dict[str, Any]:
    out = dict(state)
    now = time.time()
    out["age_s"] = round(now - float(state.get("created") or now), 1)
    if state.get("seconds") is None and state.get("started"):
        out["seconds"] = round((state.get("ended") or now) - state["started"], 3)
    out.pop("stop_command", None)
    return out


def list_(request: Dict[str, Any], ctx: Any) -> Dict[str, Any]:
    data_dir = _data_dir(request)
    return {"runs": [_public(s) for s in rundir.list_runs(data_dir)], "root": rundir.runs_root(data_dir)}


def status(request: Dict[str, Any], ctx: Any) -> Dict[str, Any]:
    directory = _run_dir(request)
    state = rundir.current_state(directory) or {}
    return {"run": _public(state), "tail": rundir.tail_lines(os.path.join(directory, rundir.LOG),
                                                             int(request.get("lines", 20)))}


def follow(request: Dict[str, Any], ctx: Any) -> Dict[str, Any]:
    """Log lines from `offset` as progress events until the run ends (or FOLLOW_MAX_S)."""
    directory = _run_dir(request)
    path = os.path.join(directory, rundir.LOG)
    offset = int(request.get("offset") or 0)
    limit = min(float(request.get("max_seconds") or FOLLOW_MAX_S), FOLLOW_MAX_S)
    deadline = time.time() + limit
    pending = b""
    ended = False
    beat = time.time()
    while True:
        state = rundir.current_state(directory) or {}
        done = state.get("state") in rundir.ENDED
        try:
            with open(path, "rb") as f:
                f.seek(offset)
                data = f.read(1 << 20)
        except OSError:
            data = b""
        if data:
            offset += len(data)
            pending += data
            *lines, pending = pending.split(b"\n")
            if lines:
                ctx.progress(lines=[b.decode("utf-8", "replace") for b in lines], offset=offset - len(pending))
                beat = time.time()
            if len(data) == 1 << 20:
                continue
        if done:
            if pending:
                ctx.progress(lines=[pending.decode("utf-8", "replace")], offset=offset)
                pending = b""
            ended = True
            break
        if time.time() >= deadline:
            break
        if time.time() - beat >= HEARTBEAT_S:
            ctx.progress(heartbeat=True, offset=offset - len(pending))
            beat = time.time()
        time.sleep(FOLLOW_POLL_S)
    return {"run": _public(rundir.current_state(directory) or {}), "offset": offset - len(pending),
            "ended": ended}


def stop(request: Dict[str, Any], ctx: Any) -> Dict[str, Any]:
    directory = _run_dir(request)
    state = rundir.current_state(directory) or {}
    if state.get("state") in rundir.ENDED:
        return {"run": _public(state), "already": True, "ended": {"terminated": [], "killed": [], "left": []}}
    open(os.path.join(directory, rundir.STOP_MARK), "w").close()
    exclude = (int(state["pid"]),) if state.get("pid") else ()
    result = procs.end_processes(state.get("pgid"), str(state["run_id"]), float(request.get("grace", 10)), exclude,
                                 mark=procs.run_mark(state))
    deadline = time.time() + 15.0  # the supervisor records the end
    while time.time() < deadline:
        current = rundir.current_state(directory) or {}
        if current.get("state") in rundir.ENDED:
            break
        time.sleep(0.1)
    return {"run": _public(rundir.current_state(directory) or {}), "already": False, "ended": result}


def summary(request: Dict[str, Any], ctx: Any) -> Dict[str, Any]:
    # lazy: the summary's parsers only for the summary command (the agent starts per call)
    from provision.agent.train.summary import summarize

    directory = _run_dir(request)
    out = summarize(directory, points=int(request.get("points", 120)))
    out["run"] = _public(out["run"])
    out["tail"] = rundir.tail_lines(os.path.join(directory, rundir.LOG), int(request.get("lines", 20)))
    if (out["run"] or {}).get("state") == "failed":  # the traceback, for why it died
        out["failure_lines"] = rundir.tail_lines(os.path.join(directory, rundir.LOG), 150)
    return out


def idle_watch(request: Dict[str, Any], ctx: Any) -> Dict[str, Any]:
    """Start (replacing any), cancel or show the host's idle watcher."""
    data_dir = _data_dir(request)
    directory = idle.idle_dir(data_dir)
    rundir.make_private_dir(directory, exist_ok=True)
    current = rundir.read_state(directory) or {}
    # "starting": spawned, not yet in its loop (a status asked right after start, on a busy host)
    running = rundir.pid_alive(current.get("pid")) and current.get("status") in ("starting", "watching")
    action = request.get("action", "start")
    if action == "status":
        return {"watcher": current, "running": running}
    if running:
        open(os.path.join(directory, idle.CANCEL), "w").close()
        deadline = time.time() + 10.0
        while rundir.pid_alive(current.get("pid")) and time.time() < deadline:
            time.sleep(0.05)
    if action == "cancel":
        return {"watcher": rundir.read_state(directory) or {}, "cancelled": running}
    try:
        os.unlink(os.path.join(directory, idle.CANCEL))
    except OSError:
        pass
    if not request.get("stop_command"):
        raise ValueError("no stop_command: set the host's stop_command var")
    state = {"data_dir": data_dir, "duration": float(request["duration"]),
             "stop_command": request["stop_command"], "status": "starting", "created": time.time()}
    rundir.write_json_atomic(os.path.join(directory, rundir.STATE), state)
    pid = supervisor.spawn(sys.executable, AGENT_DIR, "idle", directory)
    rundir.update_state(directory, pid=pid)
    return {"watcher": dict(state, pid=pid, stop_command=None), "running": True, "log": os.path.join(directory, rundir.SUPERVISOR_LOG)}


TORCH_PROBE = (
    "import importlib.util, json, sys; s = importlib.util.find_spec('torch'); "
    "print(json.dumps({'dir': list(s.submodule_search_locations)[0] if s and s.submodule_search_locations "
    "else None, 'executable': sys.executable}))"
)


def torch_of(request: Dict[str, Any], ctx: Any) -> Dict[str, Any]:
    """The torch that `python` (the run's interpreter) imports, read from its files, not imported
    (importing torch loads CUDA): version, CUDA/HIP build. A distributed run refuses hosts that differ."""
    import json
    import subprocess

    # lazy: torch facts only where the run needs them (imports torch)
    from provision.agent.facts import torch_info

    python = os.path.expanduser(str(request.get("python") or "python3"))
    try:
        out = subprocess.run([python, "-I", "-c", TORCH_PROBE], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, timeout=float(request.get("timeout", 60)))
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"python": python, "installed": False, "error": "cannot run %s: %s" % (python, exc)}
    if out.returncode != 0:
        return {"python": python, "installed": False,
                "error": out.stderr.decode("utf-8", "replace").strip()[-500:]}
    found = json.loads(out.stdout.decode().strip().splitlines()[-1])
    if not found.get("dir"):
        return {"python": python, "installed": False, "error": "%s cannot import torch" % python}
    info = torch_info.describe(found["dir"])
    return {"python": python, "installed": bool(info.get("installed")), "version": info.get("version"),
            "cuda": info.get("cuda"), "hip": info.get("hip"), "path": found["dir"]}
