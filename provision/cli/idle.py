"""`provision idle HOST... --after DURATION`: when no run is active and the GPUs stay idle for
DURATION, run the host's `stop_command` var (once, logged on the host). --cancel / --status."""

from __future__ import annotations

import argparse

from provision.cli.common import console, emit_json, exit_code_for
from provision.cli.train import on_hosts, print_failures
from provision.errors import ConfigError
from provision.secrets import mask_tree
from provision.terminal import text
from provision.train.launch import HostTrainer
from provision.train.options import parse_duration, stop_command_hint

describe = "stop paying for idle GPUs: run the host's stop_command after DURATION of idleness"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("targets", nargs="+", metavar="TARGET")
    parser.add_argument("--after", default="30m", metavar="DURATION", help="idle time before stopping (default 30m)")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--cancel", action="store_true", help="cancel the host's idle watch")
    group.add_argument("--status", action="store_true", help="show the host's idle watch")


def run(args: argparse.Namespace) -> int:
    duration = parse_duration(args.after, "--after")

    def work(trainer: HostTrainer) -> dict:
        if args.cancel:
            return trainer.idle("cancel")
        if args.status:
            return trainer.idle("status")
        command = trainer.connection.host.vars.get("stop_command")
        if not command:
            raise ConfigError(stop_command_hint(trainer.host, trainer.facts))
        return trainer.idle("start", duration, str(command))

    outcomes = on_hosts(args, args.targets, work)
    if args.json:
        # the watcher's state holds the stop command (often a token): masked by the one rule
        emit_json({"hosts": {n: (mask_tree(o.value) if o.ok else {"error": o.message}) for n, o in outcomes.items()}})
    else:
        for name, o in outcomes.items():
            if o.ok:
                w = o.value.get("watcher") or {}
                if args.cancel:
                    console.print(text(f"{name}: idle watch {'cancelled' if o.value.get('cancelled') else 'was not running'}"))
                elif args.status:
                    console.print(text(f"{name}: idle watch {w.get('status') or 'none'}"))
                else:
                    console.print(text(f"{name}: stop_command runs after {duration:g}s idle (log {o.value.get('log')})"))
    print_failures(outcomes)
    return exit_code_for(outcomes)
