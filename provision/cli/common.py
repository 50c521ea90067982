"""Options every command shares, target resolution, and the stdout/stderr split.

`--json` prints exactly one JSON document on stdout; everything human goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from typing import Any

from rich.console import Console

from provision.connection.base import ConnectOptions

# Exit codes (documented in README):
EXIT_OK = 0
EXIT_HOST_FAILED = 1  # at least one host failed a step
EXIT_USAGE = 2  # usage or configuration error (bad option, malformed inventory/playbook)
EXIT_UNREACHABLE = 4  # at least one host unreachable (and none failed otherwise)
EXIT_INTERRUPTED = 130

# soft_wrap: a long file:line message stays on one line when stderr is not a terminal
console = Console(stderr=True, highlight=False, soft_wrap=True)


def add_common_options(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("connection and output")
    g.add_argument("-i", "--inventory", action="append", default=[], metavar="FILE",
                   help="inventory file (Ansible INI or YAML); repeatable")
    g.add_argument("-f", "--forks", type=int, default=32, metavar="N", help="hosts in parallel (default 32)")
    g.add_argument("--user", help="SSH user (overrides inventory and ssh_config)")
    g.add_argument("--port", type=int, help="SSH port")
    g.add_argument("--key", metavar="FILE", help="private key file")
    g.add_argument("--password-env", metavar="VAR",
                   help="name of the env var holding the SSH password (never the password itself)")
    g.add_argument("--passphrase-env", metavar="VAR", help="env var holding the private key's passphrase")
    g.add_argument("--known-hosts", choices=["strict", "accept-new", "off"], default="accept-new",
                   help="host-key checking (default accept-new)")
    g.add_argument("--connect-timeout", type=float, default=10.0, metavar="S", help="seconds (default 10)")
    g.add_argument("--ssh-config", metavar="FILE", help="ssh_config file (default ~/.ssh/config)")
    g.add_argument("--json", action="store_true", help="one JSON document on stdout; logs on stderr")
    g.add_argument("-v", "--verbose", action="count", default=0, help="more detail (-vv: debug)")


def connect_options(args: argparse.Namespace) -> ConnectOptions:
    if args.forks < 1:
        raise SystemExit(usage_error(f"--forks must be >= 1, got {args.forks}"))
    if args.port is not None and not 0 < args.port < 65536:
        raise SystemExit(usage_error(f"--port must be 1-65535, got {args.port}"))
    if args.connect_timeout <= 0:
        raise SystemExit(usage_error(f"--connect-timeout must be > 0 seconds, got {args.connect_timeout:g}"))
    for option, var in (("--password-env", args.password_env), ("--passphrase-env", args.passphrase_env)):
        if var and var not in os.environ:
            raise SystemExit(usage_error(f"{option}: environment variable {var} is not set (export it first)"))
    return ConnectOptions(
        user=args.user,
        port=args.port,
        key_file=args.key,
        password_env=args.password_env,
        passphrase_env=args.passphrase_env,
        known_hosts=args.known_hosts,
        connect_timeout=args.connect_timeout,
        ssh_config=args.ssh_config,
    )


def setup_logging(verbose: int) -> None:
    from rich.logging import RichHandler

    level = logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    logging.basicConfig(level=level, format="%(message)s",
                        handlers=[RichHandler(console=console, show_time=False, show_path=False)])
    logging.getLogger("paramiko").setLevel(logging.WARNING if verbose < 3 else logging.DEBUG)


def usage_error(message: str) -> int:
    console.print(f"[bold red]error:[/] {message}")
    return EXIT_USAGE


def emit_json(document: Any) -> None:
    sys.stdout.write(json.dumps(document, indent=2, default=str, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def exit_code_for(outcomes: dict[str, Any]) -> int:
    """From {name: HostOutcome}: failed beats unreachable beats ok."""
    failed = any(not o.ok and not o.unreachable for o in outcomes.values())
    unreachable = any(o.unreachable for o in outcomes.values())
    return EXIT_HOST_FAILED if failed else EXIT_UNREACHABLE if unreachable else EXIT_OK
