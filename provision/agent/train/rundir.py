"""Where a run lives on the host and how its state is kept.

    <data_dir>/runs/<run_id>/
        state.json        {"run_id", "state", "pid" (supervisor), "pgid", "exit_code", ...}
        output.log        the command's stdout and stderr
        samples.jsonl     the sampler's lines
        instrument.jsonl  the sitecustomize's lines (when instrumented)
        supervisor.log    what the supervisor did (idle stop decisions, errors)
        code/             the shipped code (unless --workdir)

state.json is replaced atomically (temp file + rename), so a reader never sees half of it.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, List, Optional

STATES = ("starting", "running", "finished", "failed", "stopped")
ENDED = ("finished", "failed", "stopped")
RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
LOG = "output.log"
STATE = "state.json"
SAMPLES = "samples.jsonl"
INSTRUMENT = "instrument.jsonl"
SUPERVISOR_LOG = "supervisor.log"
ENV_FILE = "env.json"
STOP_MARK = "stop-requested"


def runs_root(data_dir: str) -> str:
    return os.path.join(os.path.expanduser(data_dir or "~"), "runs")


def check_run_id(run_id: str) -> str:
    if not isinstance(run_id, str) or not RUN_ID.match(run_id) or run_id.startswith("."):
        raise ValueError(
            "run id %r: use letters, digits, '.', '_' and '-' (up to 100), not starting with '.'"
            % (run_id,)
        )
    return run_id


def run_dir(data_dir: str, run_id: str) -> str:
    return os.path.join(runs_root(data_dir), check_run_id(run_id))


def make_private_dir(directory: str, exist_ok: bool = False) -> None:
    """A run's folder is the user's alone (0700): state.json holds the command line and the
    stop_command (often a cloud API token), output.log what the job printed."""
    os.makedirs(directory, mode=0o700, exist_ok=exist_ok)
    os.chmod(directory, 0o700)


def write_json_atomic(path: str, doc: Dict[str, Any], mode: int = 0o600) -> None:
    # mkstemp: a random name made O_EXCL (never a planted one), 0600 from its creation
    fd, tmp = tempfile.mkstemp(prefix=os.path.basename(path) + ".tmp-", dir=os.path.dirname(path) or ".")
    os.fchmod(fd, mode)
    with os.fdopen(fd, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    os.rename(tmp, path)


def read_json(path: str) -> Optional[Dict[str, Any]]:
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def read_state(directory: str) -> Optional[Dict[str, Any]]:
    return read_json(os.path.join(directory, STATE))


def update_state(directory: str, **changes: Any) -> Dict[str, Any]:
    state = read_state(directory) or {}
    state.update(changes)
    write_json_atomic(os.path.join(directory, STATE), state)
    return state


def pid_alive(pid: Optional[int]) -> bool:
    """Running and not a zombie."""
    if not pid:
        return False
    try:
        with open("/proc/%d/stat" % int(pid)) as f:
            stat = f.read()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def current_state(directory: str) -> Optional[Dict[str, Any]]:
    """state.json, with a run whose supervisor died without recording an end marked failed
    (the host rebooted, or someone killed the supervisor) instead of "running" forever."""
    state = read_state(directory)
    if state is None:
        return None
    if state.get("state") in ("starting", "running") and not pid_alive(state.get("pid")):
        if time.time() - float(state.get("created") or 0) > 10:  # not a supervisor starting up
            state["state"] = "failed"
            state["error"] = state.get("error") or "the run's supervisor is gone (host rebooted or it was killed)"
    return state


def list_runs(data_dir: str) -> List[Dict[str, Any]]:
    root = runs_root(data_dir)
    try:
        names = sorted(os.listdir(root))
    except OSError:
        return []
    runs = []
    for name in names:
        if name.startswith(".") or not RUN_ID.match(name):
            continue
        state = current_state(os.path.join(root, name))
        if state is not None:
            runs.append(state)
    runs.sort(key=lambda s: float(s.get("created") or 0))
    return runs


def tail_lines(path: str, lines: int = 20, max_bytes: int = 1 << 16) -> List[str]:
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(0, size - max_bytes))
            data = f.read()
    except OSError:
        return []
    text = data.decode("utf-8", "replace").splitlines()
    if size > max_bytes and text:
        text = text[1:]  # the first line is probably cut
    return text[-lines:] if lines > 0 else []
