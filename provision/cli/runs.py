"""`provision runs HOST...`: the runs `provision train` started there (state, age, exit code)."""

from __future__ import annotations

import argparse
from typing import Any

from rich.table import Table

from provision.cli.common import console, emit_json, exit_code_for
from provision.cli.train import on_hosts, print_failures
from provision.terminal import add_row
from provision.train.options import with_exit_codes

describe = "list training runs on hosts (state, age, exit code)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("targets", nargs="+", metavar="TARGET")
    with_exit_codes(parser)


def _age(seconds: Any) -> str:
    s = float(seconds or 0)
    return f"{s:.0f}s" if s < 120 else f"{s / 60:.0f}m" if s < 7200 else f"{s / 3600:.1f}h"


def run(args: argparse.Namespace) -> int:
    outcomes = on_hosts(args, args.targets, lambda t: t.list_runs())
    if args.json:
        keys = ("run_id", "state", "exit_code", "age_s", "seconds", "command", "workdir", "log", "rank", "world_size")
        emit_json({"hosts": {n: {"runs": [{k: r.get(k) for k in keys} for r in o.value]} if o.ok
                             else {"error": o.message, "unreachable": o.unreachable} for n, o in outcomes.items()}})
    else:
        table = Table("host", "run", "state", "age", "exit", "command")
        for name, o in outcomes.items():
            for r in o.value or []:
                add_row(table, name, str(r.get("run_id")), str(r.get("state")), _age(r.get("age_s")),
                        "" if r.get("exit_code") is None else str(r["exit_code"]),
                        " ".join(map(str, r.get("command") or []))[:60])
        console.print(table)
        print_failures(outcomes)
    return exit_code_for(outcomes)
