"""`provision lock [HOST] [-o provision.lock]`: resolve once, write the exact files, reproduce anywhere.

On a host: resolved there (its GPUs, driver, Python, its view of the index). Offline
(`--offline --gpu ... --driver ... --python 3.11`): resolved on this machine for that description.
`provision install HOST --locked provision.lock` installs exactly those files (by sha256), and
refuses with the reason on a host whose hardware, driver or Python cannot run them.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from provision.cli.common import connect_options, console, emit_json, usage_error
from provision.cli.install import add_index_arguments, build_options, progress_printer
from provision.errors import ConfigError
from provision.terminal import markup

describe = (
    "resolve the PyTorch build for a host (or an offline description) and write provision.lock"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "target", nargs="?", metavar="HOST", help="resolve on this host (omit with --offline)"
    )
    parser.add_argument(
        "-o",
        "--output",
        default="provision.lock",
        metavar="FILE",
        help="where to write the lock (default provision.lock)",
    )
    add_index_arguments(parser)
    off = parser.add_argument_group("offline (no host): describe it")
    off.add_argument(
        "--offline", action="store_true", help="resolve for the description below, not a host"
    )
    off.add_argument(
        "--gpu",
        action="append",
        default=[],
        metavar="NAME",
        help='GPU model as nvidia-smi prints it, e.g. "NVIDIA GeForce RTX 3090" (repeatable)',
    )
    off.add_argument(
        "--cc", action="append", default=[], metavar="X.Y", help="compute capability (repeatable)"
    )
    off.add_argument("--driver", metavar="VERSION", help="NVIDIA driver, e.g. 535.104.05")
    off.add_argument(
        "--glibc",
        default="2.35",
        metavar="X.Y",
        help="the host's glibc, for wheel tags (default 2.35: Ubuntu 22.04)",
    )
    off.add_argument("--arch", default="x86_64", choices=["x86_64", "aarch64"])


def offline_facts(args: argparse.Namespace) -> dict[str, Any]:
    gpus = [{"name": name} for name in args.gpu] + [{"compute_capability": cc} for cc in args.cc]
    if gpus and not args.driver:
        raise ConfigError("--offline with a GPU needs --driver (e.g. --driver 535.104.05)")
    return {
        "gpus": [dict(g, index=i) for i, g in enumerate(gpus)],
        "nvidia": {"driver_version": args.driver} if args.driver else {},
        "python": {"version": args.python},
        "os": {"arch": args.arch, "libc": f"glibc {args.glibc}"},
    }


def run(args: argparse.Namespace) -> int:
    from provision.install.installer import create_lock, create_lock_offline
    from provision.install.lockfile import write_lock
    from provision.install.planning import PythonInfo

    if args.offline == bool(args.target):
        return usage_error(
            "give a HOST to resolve on, or --offline with --gpu/--cc/--driver/--python"
        )
    options, _ = build_options(args, allow_locked=False)
    if args.offline:
        if not args.python or not args.python.replace(".", "").isdigit():
            return usage_error("--offline needs --python X.Y (the host's Python version)")
        facts = offline_facts(args)
        py = PythonInfo(
            executable="python3", version=args.python, machine=args.arch, glibc=args.glibc
        )
        options.python = None
        lock = create_lock_offline(
            facts, py, options, progress=progress_printer("offline", args.verbose, args.json)
        )
    else:
        from provision.connection.factory import connect
        from provision.inventory.loader import resolve_targets
        from provision.remote.agent import Agent

        copts = connect_options(args)
        hosts = resolve_targets([args.target], args.inventory, copts)
        if len(hosts) != 1:
            return usage_error(f"lock resolves on ONE host; {args.target!r} names {len(hosts)}")
        host = hosts[0]
        with connect(host, copts) as conn:
            lock = create_lock(
                conn,
                Agent(conn),
                options,
                progress=progress_printer(host.name, args.verbose, args.json),
            )
    path = write_lock(lock, Path(args.output))
    plan = lock.plan
    if args.json:
        emit_json({"lock": str(path), **lock.to_dict()})
    else:
        console.print(markup("[bold green]wrote {}[/]: torch {}+{}, {} packages (sha256-pinned), Python {}", path,
                             plan.get("torch"), plan.get("variant"), len(lock.packages), lock.requires.get("python")))
        for warning in plan.get("warnings") or []:
            console.print(markup("  [yellow]warning[/] {}", warning))
    return 0
