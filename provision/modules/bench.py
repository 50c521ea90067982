"""`bench`: run the host-side benchmark in the managed environment (docs/bench.md).

`datasets` takes staged dataset names or host paths, or what `stage_dataset` registered (one
result, or a loop's `.results`): skipped or failed stages are left out.
`python` picks the interpreter (e.g. `install_torch`'s registered `.python`); else the managed
env's (`env` or provision's default), else the host's python3.
"""

from __future__ import annotations

from typing import Any

from provision.errors import AgentError
from provision.modules.base import Arg, Module, ModuleFailure, ModuleResult, TaskContext, register


def dataset_names(items: list[Any]) -> list[str]:
    """Names/paths from plain strings and registered `stage_dataset` results alike."""
    out: list[str] = []
    for item in items:
        if isinstance(item, dict) and isinstance(item.get("results"), list):
            out += dataset_names(item["results"])  # a looped task's registered result
        elif isinstance(item, dict):
            path = (
                (item.get("dataset") or {}).get("path") if "dataset" in item else item.get("path")
            )
            if path and not item.get("skipped") and not item.get("failed"):
                out.append(str(path))
        elif item:
            out.append(str(item))
    return out


@register
class Bench(Module):
    name = "bench"
    args = {
        "quick": Arg("bool", default=False),
        "datasets": Arg("list", default=[]),
        "sections": Arg("list", default=[]),
        "env": Arg("str"),
        "python": Arg("str"),
        "index_url": Arg("str"),
    }
    supports_check_mode = False  # measuring changes nothing, but takes minutes: skipped in --check

    def run(self, ctx: TaskContext) -> ModuleResult:
        # start-up time: a playbook loads every module; the bench stack only when this one runs
        from provision.remote.bench import (
            bench_request,
            dataset_sources,
            run_bench,
        )
        from provision.remote.environment import managed_python

        facts: dict[str, Any] = dict(ctx.facts or {})
        if not facts:
            facts = ctx.agent.call("facts")
        python = ctx.args.get("python") or managed_python(
            ctx.connection, facts, ctx.args.get("env")
        )
        names = dataset_names(list(ctx.args.get("datasets") or []))
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
            data={
                "bench": result,
                "python": python or ctx.agent.python,
                "datasets": request["datasets"],
            },
        )
