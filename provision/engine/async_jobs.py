"""Background jobs of `async: N` + `poll: 0` tasks, read by `async_status` (Ansible's
async_wrapper and async_status module, executor/task_executor.py). A job is the task's module
run in a thread of this run against its host (its commands run on the host), with N seconds as
its time limit: every wait is bounded, Ctrl-C stops its commands as any task's, and a job still
running when the run ends is stopped with it. Its result is kept, per host and job id, until
`async_status: mode=cleanup` (or the run's end) drops it."""

from __future__ import annotations

import os
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


def new_job_id() -> str:
    """Ansible's job id form (`j<digits>.<pid>`; its tests match `j\\d+\\.\\d+`)."""
    return f"j{secrets.randbelow(10**12)}.{os.getpid()}"


def results_file(jid: str) -> str:
    """Where Ansible keeps a job's result on the host (async_dir), named in its keys."""
    return f"~/.ansible_async/{jid}"


def timed_out(result: dict[str, Any]) -> bool:
    """A result the time limit ended (a connection's or a command's words for it)."""
    said = f"{result.get('msg', '')} {result.get('stderr', '')}"
    return bool(result.get("failed")) and "timed out after" in said


# how long the run's end waits for the jobs it stopped to say so (each ends its command group)
STOP_WAIT_S = 10.0


@dataclass
class Job:
    jid: str
    host: str
    stop: Callable[[], None]  # ends the job's running command (its connection's interrupt)
    done: threading.Event = field(default_factory=threading.Event)
    ended: threading.Event = field(default_factory=threading.Event)  # the run is over
    result: dict[str, Any] = field(default_factory=dict)


class Jobs:
    """The run's jobs: started by a `poll: 0` task, read and dropped by async_status."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jobs: dict[tuple[str, str], Job] = {}

    def start(
        self, host: str, work: Callable[[], dict[str, Any]], stop: Callable[[], None]
    ) -> dict[str, Any]:
        """Start `work` (the module run, bounded by its own time limit) in the background;
        `stop` ends it early. Returns Ansible's result of the task that started it."""
        job = Job(jid=new_job_id(), host=host, stop=stop)

        def body() -> None:
            try:  # a job the run's end beat to its start never starts
                result = {"failed": True, "msg": "stopped: the run ended"}
                if not job.ended.is_set():
                    result = work()
            except Exception as exc:  # the job's failure is its result, as async_wrapper's
                result = {"failed": True, "msg": f"{type(exc).__name__}: {exc}"}
            if timed_out(result):  # async_wrapper's word for a job it ended: the module's is lost
                result = {"failed": True, "changed": False, "msg": "Timeout exceeded"}
            job.result = {**result, "ansible_job_id": job.jid, "finished": True}
            job.done.set()

        with self._lock:
            self._jobs[(host, job.jid)] = job
        threading.Thread(target=body, name=f"async {host} {job.jid}", daemon=True).start()
        return {
            "failed": False,
            "changed": True,  # Ansible counts the job's start as a change
            "started": True,
            "finished": False,
            "ansible_job_id": job.jid,
            "results_file": results_file(job.jid),
        }

    def status(self, host: str, jid: str, mode: str = "status") -> dict[str, Any]:
        """async_status's result for this host's job `jid` (mode status or cleanup)."""
        base: dict[str, Any] = {
            "ansible_job_id": jid,
            "started": False,
            "finished": False,
            "stdout": "",
            "stderr": "",
            "stdout_lines": [],
            "stderr_lines": [],
        }
        with self._lock:
            job = self._jobs.get((host, jid))
            if job is not None and mode == "cleanup":
                del self._jobs[(host, jid)]
        if job is None:
            return {**base, "failed": True, "msg": "could not find job", "started": True,
                    "finished": True, "results_file": results_file(jid)}  # fmt: skip
        if mode == "cleanup":
            return {**base, "erased": results_file(jid)}
        base.update(started=True, results_file=results_file(jid))
        if not job.done.is_set():
            return {**base, "changed": False}
        return {**base, **job.result, "started": True}

    def forget(self) -> None:
        """The run is over: a job still running is stopped (its command group ended on the
        host, as on Ctrl-C) before the run closes its connections; every job is dropped."""
        with self._lock:
            jobs, self._jobs = list(self._jobs.values()), {}
        running = [job for job in jobs if not job.done.is_set()]
        for job in running:
            job.ended.set()
            try:
                job.stop()
            except Exception:  # stopping must never hide the run's result
                pass
        deadline = time.monotonic() + STOP_WAIT_S
        for job in running:
            job.done.wait(max(0.0, deadline - time.monotonic()))


JOBS = Jobs()  # job ids are random and per host: one table for the process
