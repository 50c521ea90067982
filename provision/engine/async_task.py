"""`async:` / `poll:` as Ansible runs a task with them (executor/task_executor.py): with
`poll: N > 0` Ansible starts the module as a job that async_wrapper ends after `async`
seconds, and polls it; the registered result carries `ansible_job_id`, `started`, `finished`. Here the
module runs with `async` as its time limit (the wait is bounded; Ctrl-C ends it as any task)
and returns those keys. `poll: 0` starts it as a job (engine/async_jobs.py) that async_status
reads. Actions that run on the controller refuse async, as Ansible's action plugins without
`_supports_async` do."""

from __future__ import annotations

from typing import Any

from provision.engine.async_jobs import new_job_id, results_file, timed_out

# Ansible's action plugins that refuse async (plugins/action/*.py without _supports_async);
# modules without an action plugin (and command, shell, package, service, dnf, uri) take it
NO_ASYNC = frozenset(
    {
        "add_host", "assemble", "assert", "async_status", "copy", "debug", "fail", "fetch",
        "gather_facts", "group_by", "include_vars", "pause", "raw", "reboot", "script",
        "set_fact", "set_stats", "template", "unarchive", "validate_argument_spec",
        "wait_for_connection",
    }
)  # fmt: skip


def refusal(action: str) -> str | None:
    """Ansible's message for an action that can't run async, or None."""
    short = action.rsplit(".", 1)[-1]
    return f"This action ({short}) does not support async." if short in NO_ASYNC else None


def time_limit(limit: float, timeout: float | None) -> float:
    """The task's time limit under `async: N`: N, or the task's own `timeout:` if shorter."""
    return limit if timeout is None else min(limit, timeout)


def job_result(full: dict[str, Any]) -> None:
    """The registered result of an async task polled to its end, in place: Ansible's job
    keys (async_status's); a task its time limit ended is async_wrapper's `Timeout exceeded`
    (the module's own output is lost, as there)."""
    jid = new_job_id()
    if timed_out(full):
        full.clear()
        full.update(failed=True, changed=False, msg="Timeout exceeded")
    full.update(ansible_job_id=jid, started=True, finished=True, results_file=results_file(jid))
