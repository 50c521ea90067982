"""`provision stage SRC HOST...`: a dataset into an LMDB on each host's local SSD.

SRC: a folder or archive here (streamed as one stream over SSH), host:/PATH (read on the host,
e.g. /root/autodl-fs), or an http(s) URL (downloaded by the host). Rerunning resumes an
interrupted stage and skips an up-to-date one. `--local DEST.lmdb` builds on this machine.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from provision.agent.datasets import DEFAULT_STALL
from provision.agent.datasets.layouts import LAYOUTS
from provision.cli.common import (
    EXIT_HOST_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    connect_options,
    emit_json,
    exit_code_for,
    get_console,
    usage_error,
)
from provision.errors import HostError
from provision.terminal import markup, text

if TYPE_CHECKING:
    from provision.connection.base import Connection, ConnectOptions
    from provision.inventory.model import Host

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
    if args.stall_timeout <= 0:
        return usage_error(f"--stall-timeout must be > 0, got {args.stall_timeout}")
    if args.local:
        return _run_local(args)
    if not args.targets and not args.inventory:
        return usage_error("name at least one HOST (or -i INVENTORY), or use --local DEST.lmdb")

    from provision.connection.factory import open_early
    from provision.inventory.loader import resolve_targets

    options = connect_options(args)
    hosts = resolve_targets(args.targets, args.inventory, options)
    if not hosts:
        return usage_error("the targets matched no hosts")
    # the handshakes begin before the staging stack and rich are imported (~0.15 s of a run)
    opened = open_early(hosts, options, args.forks)
    try:
        return _run_hosts(args, hosts, options, opened)
    finally:
        for conn in opened.values():  # the ones stage_hosts did not take (it closes its own)
            conn.close()


def _request(args: argparse.Namespace) -> Any:
    from provision.staging.stage import make_request

    return make_request(
        args.source,
        args.name,
        args.dest,
        args.layout,
        args.labels,
        args.verify,
        args.clean,
        args.stall_timeout,
    )


def _run_local(args: argparse.Namespace) -> int:
    from provision.staging.progress import StageProgress
    from provision.staging.stage import stage_local

    request = _request(args)
    if args.targets:
        return usage_error("--local builds on this machine: give no HOST")
    console = get_console()
    with StageProgress(console, enabled=not args.json and console.is_terminal) as progress:
        try:
            result = stage_local(request, args.local, progress.callback("local"))
        except HostError as exc:
            if args.json:
                emit_json({"hosts": {"local": {"error": exc.detail, "unreachable": False}}})
            console.print(markup("[bold red]local: failed[/]: {}", exc.detail))
            return EXIT_HOST_FAILED
    if args.json:
        emit_json({"hosts": {"local": result}})
    else:
        _print_warnings(result)
        console.print(markup("[green]local[/]: {}", _summary(result)))
    return EXIT_OK


def _run_hosts(
    args: argparse.Namespace,
    hosts: list[Host],
    options: ConnectOptions,
    opened: dict[str, Connection],
) -> int:
    from provision.staging.source import (
        PlanFuture,
        check_name,
        default_name,
        parse_source,
        plan_local,
    )

    spec = parse_source(args.source)
    lmdb_name = check_name(args.name or default_name(spec))

    def summary(plan: Any) -> None:
        m = plan.manifest
        classes = f", {len(m.classes)} classes" if m.classes else ""
        get_console().print(text(
            f"{spec.display}: {len(m):,} samples, {m.total_bytes / 1e6:,.1f} MB, "
            f"layout {m.layout}{classes} -> {lmdb_name}.lmdb"
        ))

    plan = None
    if spec.kind == "local":  # listed while the hosts connect, and before the imports below
        plan = PlanFuture(
            lambda: plan_local(spec.location, args.layout, args.labels), on_ready=summary
        )

    from provision.staging.progress import StageProgress
    from provision.staging.stage import stage_hosts

    request = _request(args)
    console = get_console()
    with StageProgress(console, enabled=not args.json and console.is_terminal) as progress:
        outcomes = stage_hosts(
            hosts, request, options, args.forks, progress.callback, plan=plan, opened=opened
        )
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
                print_staged(name, o.value)
            else:
                kind = "unreachable" if o.unreachable else "failed"
                console.print(markup("[bold red]{}: {}[/]: {}", name, kind, o.message))
    return exit_code_for(outcomes)


def print_staged(name: str, result: dict[str, Any]) -> None:
    """One host's stage result; its path and problems are the host's words: text."""
    get_console().print(markup("[green]{}[/]: {}", name, _summary(result)))


def _print_warnings(result: dict[str, Any]) -> None:
    for w in result.get("warnings") or []:
        get_console().print(markup("[yellow]warning:[/] {}", w))


__all__ = ["describe", "add_arguments", "run", "EXIT_USAGE"]
