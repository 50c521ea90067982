"""`provision disconnect [HOSTS]`: end the SSH connections kept across runs (--persist).

Without HOSTS every kept connection of this user ends; a HOST is matched against the inventory
name, the address and user@host:port each connection was started for."""

from __future__ import annotations

import argparse

from provision.cli.common import emit_json, get_console
from provision.terminal import escape

describe = "end the SSH connections kept across runs (all, or those of HOSTS)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "targets",
        nargs="*",
        metavar="HOST",
        help="inventory names, addresses or user@host:port (default: every host)",
    )


def run(args: argparse.Namespace) -> int:
    from provision.connection.openssh_kept import disconnect

    ended = disconnect(args.targets or None)
    if args.json:
        emit_json({"ended": [{"host": e.name, "target": e.display} for e in ended]})
        return 0
    console = get_console()
    for entry in ended:
        console.print(
            f"{escape(entry.name or entry.display)}: kept connection ended ({escape(entry.display)})"
        )
    if not ended:
        console.print(
            "no kept connection"
            + (" to " + ", ".join(map(escape, args.targets)) if args.targets else "")
        )
    return 0
