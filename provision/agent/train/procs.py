"""A run's processes from /proc: which they are, how much CPU each used, and ending them all.

A run's processes are its process group (the command is started as a group leader, and
DataLoader workers are forked into it) plus any process that left the group (setsid, a daemon)
but still carries the run's PROVISION_RUN_ID in its environment.
"""

from __future__ import annotations

import os
import signal
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, List, Optional, Tuple

CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def read_stat(pid: int) -> Optional[Tuple[str, int, int, float, int, str]]:
    """(state, ppid, pgid, cpu seconds, rss bytes, comm) of a process, or None."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            raw = f.read().decode("utf-8", "replace")
    except OSError:
        return None
    comm = raw[raw.find("(") + 1 : raw.rfind(")")]
    fields = raw[raw.rfind(")") + 2 :].split()
    try:
        cpu = (int(fields[11]) + int(fields[12])) / float(CLOCK_TICKS)
        return fields[0], int(fields[1]), int(fields[2]), cpu, int(fields[21]) * PAGE, comm
    except (IndexError, ValueError):
        return None


def all_pids() -> List[int]:
    try:
        return [int(n) for n in os.listdir("/proc") if n.isdigit()]
    except OSError:
        return []


def group_members(pgid: int, pids: Optional[List[int]] = None) -> Dict[int, Tuple[str, int, int, float, int, str]]:
    """pid -> stat of every live process in the process group (of `pids` when given)."""
    out = {}
    for pid in all_pids() if pids is None else pids:
        stat = read_stat(pid)
        if stat is not None and stat[2] == pgid and stat[0] not in ("Z", "X"):
            out[pid] = stat
    return out


def run_mark(state: Dict[str, Any]) -> str:
    """What this host's processes of a run carry: the run id and the host's rank. A distributed
    run has one id on every host; hosts sharing a kernel (containers, the test fleet) must still
    end only their own processes."""
    return "%s.%s" % (state.get("run_id"), state.get("rank") or 0)


def has_run_marker(pid: int, run_id: str, mark: Optional[str] = None) -> bool:
    marker = (("PROVISION_RUN_MARK=%s" % mark) if mark else ("PROVISION_RUN_ID=%s" % run_id)).encode()
    try:
        with open("/proc/%d/environ" % pid, "rb") as f:
            return marker in f.read().split(b"\0")
    except OSError:
        return False


def run_processes(pgid: Optional[int], run_id: str, exclude: Tuple[int, ...] = (),
                  mark: Optional[str] = None) -> List[int]:
    """Every live process of the run: its group, and escapees carrying its marker."""
    found = []
    me = os.getpid()
    for pid in all_pids():
        if pid == me or pid in exclude:
            continue
        stat = read_stat(pid)
        if stat is None or stat[0] in ("Z", "X"):
            continue
        if (pgid and stat[2] == pgid) or has_run_marker(pid, run_id, mark):
            found.append(pid)
    return sorted(found)


def end_processes(pgid: Optional[int], run_id: str, grace: float = 10.0,
                  exclude: Tuple[int, ...] = (), mark: Optional[str] = None) -> Dict[str, List[int]]:
    """SIGTERM the run's processes, SIGKILL what is left after `grace` seconds (bounded)."""
    targets = run_processes(pgid, run_id, exclude, mark)
    termed = _signal_all(pgid, targets, signal.SIGTERM)
    deadline = time.time() + max(0.0, grace)
    left = targets
    while left and time.time() < deadline:
        time.sleep(0.1)
        left = run_processes(pgid, run_id, exclude, mark)
    killed = _signal_all(pgid, left, signal.SIGKILL) if left else []
    for _ in range(50):  # SIGKILL is not instant; give the kernel up to 5 s to reap
        if not run_processes(pgid, run_id, exclude, mark):
            break
        time.sleep(0.1)
    return {"terminated": termed, "killed": killed, "left": run_processes(pgid, run_id, exclude, mark)}


def _signal_all(pgid: Optional[int], pids: List[int], sig: int) -> List[int]:
    if pgid:
        try:
            os.killpg(pgid, sig)
        except OSError:
            pass
    done = []
    for pid in pids:
        try:
            os.kill(pid, sig)
            done.append(pid)
        except OSError:
            pass
    return done
