"""`provision` entry point: one sub-module per command, imported only when used."""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import NoReturn

from provision import __version__
from provision.cli.common import (
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    add_common_options,
    apply_ansible_config,
    exit_without_teardown,
    get_console,
    leave_now_if_stuck,
    report_interrupted,
    setup_logging,
)
from provision.errors import ConfigError, ProvisionError
from provision.terminal import escape

# command name -> module in provision.cli; each module has `describe`, `add_arguments(parser)`, `run(args) -> int`
COMMANDS = {
    "up": "up",
    "facts": "facts",
    "inventory": "inventory",
    "run": "run",
    "check": "check",
    "install": "install",
    "lock": "lock",
    "stage": "stage",
    "bench": "bench",
    "report": "report",
    "health": "health",
    "train": "train",
    "runs": "runs",
    "logs": "logs",
    "attach": "attach",
    "stop": "stop",
    "idle": "idle",
    "choose": "choose",
    "disconnect": "disconnect",
}
# Commands that take a command line of their own after `--` (kept out of argparse, which would
# mix its words with the targets): `provision train gpu1 -- python train.py --lr 3`.
TAKES_COMMAND = frozenset({"train"})


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """All commands, or just `only`: importing every command costs ~0.4 s of CPU per start."""
    parser = argparse.ArgumentParser(
        prog="provision",
        description="Make a rented GPU server fast: facts, matched PyTorch, LMDB staging, benchmarks, reports.",
    )
    parser.add_argument("--version", action="version", version=f"provision {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module_name in COMMANDS.items():
        if only is not None and name != only:
            sub.add_parser(name)  # listed for argparse; never parsed
            continue
        try:
            module = importlib.import_module(f"provision.cli.{module_name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"provision.cli.{module_name}":
                continue  # command not built yet
            raise
        p = sub.add_parser(name, help=module.describe, description=module.describe)
        module.add_arguments(p)
        add_common_options(p, getattr(module, "OWN_SHORT_OPTIONS", frozenset()))
        p.set_defaults(_run=module.run)
    return parser


def run() -> NoReturn:
    """The `provision` command (console script and `python -m provision`): main() in-process
    callers (tests) get a return value; the command exits without the interpreter's teardown."""
    exit_without_teardown(main())


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    chosen = next((a for a in argv if not a.startswith("-")), None)
    wants_help = any(a in ("-h", "--help") for a in argv) and chosen is None
    parser = build_parser(only=chosen if chosen in COMMANDS and not wants_help else None)
    trailing = None
    if chosen in TAKES_COMMAND and "--" in argv:
        cut = argv.index("--")
        argv, trailing = argv[:cut], argv[cut + 1 :]
    args = parser.parse_args(argv)
    if trailing is not None:
        args.command_argv = trailing
    if not getattr(args, "_run", None):
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    setup_logging(args.verbose)
    try:
        apply_ansible_config(args)
        code = int(args._run(args) or 0)
        if code == EXIT_INTERRUPTED:
            leave_now_if_stuck(code)
        return code
    except ConfigError as exc:
        get_console().print(f"[bold red]error:[/] {escape(exc)}")
        return EXIT_USAGE
    except ProvisionError as exc:
        get_console().print(f"[bold red]error:[/] {escape(exc)}")
        return 1
    except KeyboardInterrupt as exc:
        report_interrupted(exc, as_json=bool(getattr(args, "json", False)))
        leave_now_if_stuck(EXIT_INTERRUPTED)
        return EXIT_INTERRUPTED
