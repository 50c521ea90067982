"""`bench`: run the host-side benchmark in the managed environment (docs/bench.md)."""

from __future__ import annotations

from typing import Any

from provision.modules.base import Arg, Module, ModuleFailure, ModuleResult, TaskContext, register


@register
class Bench(Module):
    name = "bench"
    args = {
        "quick": Arg("bool", default=False),
        "datasets": Arg("list", default=[]),
        "sections": Arg("list", default=[]),
        "env": Arg("str"),
        "index_url": Arg("str"),
    }
    supports_check_mode = False  # measuring changes nothing, but takes minutes: skipped in --check

    def run(self, ctx: TaskContext) -> ModuleResult:
        from provision.cli.bench import dataset_sources
        from provision.errors import AgentError
        from provision.remote.bench import bench_request, run_bench
        from provision.remote.environment import managed_python

        facts: dict[str, Any] = dict(ctx.facts or {})
        if not facts:
            facts = ctx.agent.call("facts")
        python = managed_python(ctx.connection, facts, ctx.args.get("env"))
        names = [str(d) for d in ctx.args.get("datasets") or [] if d]
        request = bench_request(
            facts,
            quick=ctx.args["quick"],
            datasets=dataset_sources(names, facts),
            index_url=ctx.args.get("index_url"),
            sections=ctx.args.get("sections") or None,
        )

        def on_event(event: dict[str, Any]) -> None:
            if ctx.on_progress and event.get("section"):
                ctx.on_progress(f"bench {event['section']} {event.get('status', '')}")

        try:
            result = run_bench(ctx.agent, request, python=python, on_event=on_event)
        except AgentError as exc:
            raise ModuleFailure(f"benchmark failed: {exc.detail}") from None
        amp = result.get("amp") or {}
        loader = result.get("dataloader") or {}
        msg = (
            f"train {amp.get('train_samples_per_s')} samples/s, AMP ×{amp.get('speedup')}, "
            f"loader best num_workers={loader.get('best_num_workers')}"
        )
        return ModuleResult(
            changed=False,
            msg=msg,
            data={"bench": result, "python": python, "datasets": request["datasets"]},
        )
