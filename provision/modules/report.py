"""`report`: build this host's versioned report on the controller, write JSON/Markdown/HTML, and
record it in the local history. Controller-side output, not host state: never `changed`."""

from __future__ import annotations

from typing import Any

from provision.errors import ConfigError
from provision.modules.base import Arg, Module, ModuleFailure, ModuleResult, TaskContext, register


def _data(value: Any, key: str) -> Any:
    """A registered result (dict) or the bare value."""
    if isinstance(value, dict) and key in value:
        return value[key]
    return value if not isinstance(value, dict) or not value.get("skipped") else None


def _flat(items: list[Any]) -> list[Any]:
    """A looped task's registered result stands for its items."""
    out: list[Any] = []
    for item in items:
        if isinstance(item, dict) and isinstance(item.get("results"), list):
            out += _flat(item["results"])
        else:
            out.append(item)
    return out


@register
class Report(Module):
    name = "report"
    needs_connection = False
    args = {
        "out": Arg("path", default="provision-reports"),
        "compat": Arg("raw"),
        "install": Arg("raw"),
        "datasets": Arg("list", default=[]),
        "bench": Arg("raw"),
        "record_history": Arg("bool", default=True),
    }

    def run(self, ctx: TaskContext) -> ModuleResult:
        # start-up time: a playbook loads every module; the report stack (Jinja2, rich) only when this one runs
        import provision.bench  # noqa: F401  (registers the bench's own section of the report)
        import provision.choose  # noqa: F401  (registers the report's prediction section)
        from provision.report import history
        from provision.report.document import (
            build_report,
            write_report,
        )

        bench = _data(ctx.args.get("bench"), "bench") or {}
        datasets = [
            d
            for d in (_data(x, "dataset") for x in _flat(ctx.args.get("datasets") or []))
            if isinstance(d, dict)
        ]
        # start-up time: a playbook loads every module; the report stack only when this one runs
        from provision.report.document import price_of

        try:
            price = price_of(ctx.host)
        except ConfigError as exc:
            raise ModuleFailure(str(exc)) from None
        doc = build_report(
            ctx.host.name,
            facts=dict(ctx.facts or {}),
            compat=_data(ctx.args.get("compat"), "compat") or {},
            install=_data(ctx.args.get("install"), "install") or {},
            datasets=datasets,
            bench=bench if isinstance(bench, dict) else {},
            price_per_hour=price,
        )
        if ctx.check_mode:
            return ModuleResult(changed=False, msg="would write the report", data={"report": doc})
        paths = write_report(doc, ctx.args["out"])
        if ctx.args["record_history"] and bench:
            history.record(doc)
        findings = (
            ", ".join(f"{f['severity']}:{f['id']}" for f in doc["diagnosis"]) or "no findings"
        )
        return ModuleResult(
            changed=False,
            msg=f"report {paths['html']} ({findings})",
            data={"paths": paths, "diagnosis": doc["diagnosis"]},
        )
