"""async_status: read (or, `mode: cleanup`, drop) a background job an `async: N, poll: 0` task
started on this host (engine/async_jobs.py), with Ansible's result keys: `started`,
`finished`, `ansible_job_id`, `results_file`, and the job's own result once it has finished."""

from __future__ import annotations

from provision.engine.async_jobs import JOBS
from provision.modules.base import Arg, Module, ModuleResult, TaskContext, register


@register
class AsyncStatus(Module):
    name = "async_status"
    needs_connection = False
    args = {
        "jid": Arg("str", required=True),
        "mode": Arg("str", default="status", choices=("status", "cleanup")),
    }

    def run(self, ctx: TaskContext) -> ModuleResult:
        data = JOBS.status(ctx.host.name, str(ctx.args["jid"]), str(ctx.args["mode"]))
        failed = bool(data.pop("failed", False))
        changed = bool(data.pop("changed", False))
        msg = str(data.pop("msg", "") or "")
        return ModuleResult(failed=failed, changed=changed, msg=msg, data=data)
