"""`compat_check`: resolve the matched PyTorch build from the host's facts and verify what is
installed (driver vs the torch's CUDA, cuDNN, arch support, cuda.is_available()). Reads only.

Which interpreter is verified: `env`'s (or the host var provision_env's) when given; else
`python` (e.g. `install_torch`'s registered `.python`, so a report describes the torch that was
just installed, managed env or kept base interpreter alike); else the host's python3.
"""

from __future__ import annotations

from typing import Any

from provision.modules.base import Arg, Module, ModuleFailure, ModuleResult, TaskContext, register
from provision.remote.agent import Agent


@register
class CompatCheck(Module):
    name = "compat_check"
    args = {
        "torch": Arg("str", default="latest"),
        "variant": Arg("str"),
        "env": Arg("str"),
        "python": Arg("str"),
        "minor_version_compat": Arg("bool", default=True),
        "fail_on_broken": Arg("bool", default=False),
    }

    def run(self, ctx: TaskContext) -> ModuleResult:
        from provision.compat import (  # start-up time: a playbook loads every module; the compat tables only when this one runs
            ResolveInputError,
            TorchRequest,
        )
        from provision.remote.compat import (
            BROKEN,
            check_host,
        )

        try:
            request = TorchRequest(
                spec=ctx.args["torch"],
                variant=ctx.args.get("variant"),
                allow_minor_version_compat=ctx.args["minor_version_compat"],
            )
        except (TypeError, ResolveInputError) as exc:
            raise ModuleFailure(f"compat_check: {exc}") from None
        facts: dict[str, Any] = dict(ctx.facts or {}) or ctx.agent.call("facts")
        agent = ctx.agent
        if ctx.args.get("python"):
            # the same agent folder on the host, run by another interpreter
            agent = Agent(ctx.connection, python=ctx.args["python"])
        check = check_host(agent, ctx.host, facts, request, env=ctx.args.get("env"))
        doc = check.to_dict()
        failed = ctx.args["fail_on_broken"] and check.verdict == BROKEN
        msg = f"{check.verdict}" + (f" — fix: {check.fix}" if check.fix else "")
        return ModuleResult(
            changed=False, failed=failed, msg=msg, data={"compat": doc, "verdict": check.verdict}
        )
