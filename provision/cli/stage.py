"""`provision stage SRC HOST...`: a dataset into an LMDB on each host's local SSD.

SRC: a folder or archive here (streamed as one stream over SSH), host:/PATH (read on the host,
e.g. /root/autodl-fs), or an http(s) URL (downloaded by the host). Rerunning resumes an
interrupted stage and skips an up-to-date one. `--local DEST.lmdb` builds on this machine.
"""

from __future__ import annotations

import argparse
from typing import Any

from provision.agent.datasets import DEFAULT_STALL
from provision.agent.datasets.layouts import LAYOUTS
from provision.cli.common import (
    EXIT_HOST_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    connect_options,
    console,
    emit_json,
    exit_code_for,
    usage_error,
)
from provision.errors import HostError

describe = "stage a dataset (folder, archive, host path or URL) into LMDB on hosts' local SSD"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "source",
        metavar="SRC",
        help="folder or tar/zip here, host:/PATH on the host, or an http(s):// URL",
    )
    parser.add_argument(
        "targets",
        nargs="*",
        metavar="HOST",
        help="inventory host/group, user@host:port, ssh_config alias, localhost",
    )
    parser.add_argument("--name", help="dataset name: the file is NAME.lmdb (default: from SRC)")
    parser.add_argument(
        "--dest",
        metavar="DIR",
        help="folder on the host for NAME.lmdb (default: <data_dir>/datasets from facts)",
    )
    parser.add_argument(
        "--layout",
        choices=LAYOUTS,
        default="auto",
        help="imagefolder, labels (files + labels file), webdataset, files (default: auto)",
    )
    parser.add_argument(
        "--labels",
        metavar="FILE",
        help="labels file (CSV path,label or JSON lines): a path here, or relative to SRC",
    )
    parser.add_argument(
        "--verify",
        action="store_true",
        help="re-read every record against its checksum after staging",
    )
    parser.add_argument(
        "--clean",
        action="store_true",
        help="discard any partial stage first, and remove the partial if this one fails",
    )
    parser.add_argument("--local", metavar="DEST", help="build DEST.lmdb on this machine instead")
    parser.add_argument(
        "--stall-timeout",
        type=float,
        default=DEFAULT_STALL,
        metavar="S",
        help=f"seconds without progress before a link is taken as lost (default {DEFAULT_STALL:g})",
    )


def _summary(result: dict[str, Any]) -> str:
    if result.get("skipped"):
        line = f"up to date: {result['path']} ({result.get('count', 0):,} samples)"
        verify = result.get("verify")
        if verify:
            line += (
                ", verified" if verify.get("ok") else f", VERIFY FAILED: {verify.get('problems')}"
            )
        return line
    mb = (result.get("bytes") or 0) / 1e6
    secs = result.get("seconds") or 0
    rate = f", {mb / secs:,.1f} MB/s" if secs else ""
    resumed = f", resumed at {result['resumed_from']:,}" if result.get("resumed_from") else ""
    verified = ", verified" if result.get("verified") else ""
    return f"{result['path']}: {result.get('count', 0):,} samples, {mb:,.1f} MB in {secs:.1f}s{rate}{resumed}{verified}"


def run(args: argparse.Namespace) -> int:
    from provision.staging.progress import StageProgress
    from provision.staging.stage import make_request, stage_hosts, stage_local

    if args.stall_timeout <= 0:
        return usage_error(f"--stall-timeout must be > 0, got {args.stall_timeout}")
    request = make_request(
        args.source,
        args.name,
        args.dest,
        args.layout,
        args.labels,
        args.verify,
        args.clean,
        args.stall_timeout,
    )
    if args.local:
        if args.targets:
            return usage_error("--local builds on this machine: give no HOST")
        with StageProgress(console, enabled=console.is_terminal and not args.json) as progress:
            try:
                result = stage_local(request, args.local, progress.callback("local"))
            except HostError as exc:
                if args.json:
                    emit_json({"hosts": {"local": {"error": exc.detail, "unreachable": False}}})
                console.print(f"[bold red]local: failed[/]: {exc.detail}")
                return EXIT_HOST_FAILED
        if args.json:
            emit_json({"hosts": {"local": result}})
        else:
            _print_warnings(result)
            console.print(f"[green]local[/]: {_summary(result)}")
        return EXIT_OK
    if not args.targets and not args.inventory:
        return usage_error("name at least one HOST (or -i INVENTORY), or use --local DEST.lmdb")

    from provision.inventory.loader import resolve_targets
    from provision.staging.source import PlanFuture, plan_local

    options = connect_options(args)
    hosts = resolve_targets(args.targets, args.inventory, options)
    if not hosts:
        return usage_error("the targets matched no hosts")

    def summary(plan: Any) -> None:
        m = plan.manifest
        classes = f", {len(m.classes)} classes" if m.classes else ""
        console.print(
            f"{request.source.display}: {len(m):,} samples, {m.total_bytes / 1e6:,.1f} MB, "
            f"layout {m.layout}{classes} -> {request.name}.lmdb"
        )

    plan = None
    if request.source.kind == "local":  # listed while the hosts connect
        src = request.source.location
        plan = PlanFuture(lambda: plan_local(src, request.layout, request.labels), on_ready=summary)
    with StageProgress(console, enabled=console.is_terminal and not args.json) as progress:
        outcomes = stage_hosts(hosts, request, options, args.forks, progress.callback, plan=plan)
    if args.json:
        emit_json(
            {
                "hosts": {
                    name: o.value if o.ok else {"error": o.message, "unreachable": o.unreachable}
                    for name, o in outcomes.items()
                }
            }
        )
    else:
        warned = False
        for name, o in outcomes.items():
            if o.ok and o.value is not None:
                if not warned:
                    _print_warnings(o.value)
                    warned = True
                console.print(f"[green]{name}[/]: {_summary(o.value)}")
            else:
                kind = "unreachable" if o.unreachable else "failed"
                console.print(f"[bold red]{name}: {kind}[/]: {o.message}")
    return exit_code_for(outcomes)


def _print_warnings(result: dict[str, Any]) -> None:
    for w in result.get("warnings") or []:
        console.print(f"[yellow]warning:[/] {w}")


__all__ = ["describe", "add_arguments", "run", "EXIT_USAGE"]
