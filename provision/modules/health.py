"""`health`: GPU and host health through the agent (provision/agent/health.py) — read-only.

Registers the agent's whole result (`verdict`, `reasons`, `gpus`, `host`, `nvidia`,
`kernel_log`) so a playbook can print it and decide; `fail_on` makes the task itself fail from
a verdict (default: never, so a playbook can report first and fail the host afterwards, as
playbooks/health.yml does).
"""

from __future__ import annotations

from typing import Any

from provision.errors import AgentError
from provision.modules.base import Arg, Module, ModuleFailure, ModuleResult, TaskContext, register

_ORDER = {"healthy": 0, "degraded": 1, "failing": 2}


@register
class Health(Module):
    name = "health"
    args = {
        "expect_gpus": Arg("int"),
        "data_dir": Arg("str"),
        "kernel_log": Arg("bool", default=True),
        "fail_on": Arg("str", default="never", choices=("never", "failing", "degraded")),
        "timeout": Arg("float", default=120.0),
    }
    supports_check_mode = True  # it only reads

    def check_args(self, args: dict[str, Any]) -> list[str]:
        expect = args.get("expect_gpus")
        if isinstance(expect, int) and expect < 0:
            return [f"expect_gpus must be >= 0, got {expect}"]
        return []

    def run(self, ctx: TaskContext) -> ModuleResult:
        request: dict[str, Any] = {"kernel_log": ctx.args["kernel_log"]}
        expect = ctx.args.get("expect_gpus")
        if expect is None and ctx.host.vars.get("expect_gpus") is not None:
            expect = int(ctx.host.vars["expect_gpus"])
        if expect is not None:
            request["expect_gpus"] = expect
        data_dir = ctx.args.get("data_dir") or ctx.host.vars.get("data_dir")
        if data_dir:
            request["data_dir"] = str(data_dir)
        try:
            result = ctx.agent.call("health", request, timeout=ctx.args["timeout"])
        except AgentError as exc:
            raise ModuleFailure(f"health check failed: {exc.detail}") from None
        verdict = str(result.get("verdict"))
        reasons = list(result.get("reasons") or [])
        gpus = result.get("gpus") or []
        msg = f"{verdict}: " + (
            "; ".join(reasons) if reasons else f"{len(gpus)} GPU(s), no problems"
        )
        threshold = ctx.args["fail_on"]
        failed = threshold != "never" and _ORDER.get(verdict, 2) >= _ORDER[threshold]
        return ModuleResult(changed=False, failed=failed, msg=msg, data=dict(result))
