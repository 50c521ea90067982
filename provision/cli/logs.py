"""`provision logs HOST RUN [-f]`: a run's log (its last lines; -f: all of it, then follow).

The log is the command's output: it goes to stdout, so `> file` and `| grep` work. Each line is
prefixed `HOST | ` when several hosts are named or stdout is a terminal (`--no-prefix`: never)."""

from __future__ import annotations

import argparse
import os
import sys
import threading
from collections.abc import Callable
from typing import TextIO

from provision.cli.common import EXIT_INTERRUPTED, console, emit_json, exit_code_for
from provision.cli.train import on_hosts, print_failures
from provision.terminal import visible
from provision.train.launch import HostTrainer
from provision.train.options import with_exit_codes

describe = "show a training run's log on a host (-f: follow it until the run ends)"
OWN_SHORT_OPTIONS = frozenset({"-f"})  # -f follows here, as in tail -f (forks: --forks)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", metavar="HOST")
    parser.add_argument("run_id", metavar="RUN")
    parser.add_argument("-f", "--follow", action="store_true", help="follow until the run ends")
    parser.add_argument("-n", "--lines", type=int, default=200, help="lines to show without -f (default 200)")
    parser.add_argument("--no-prefix", action="store_true",
                        help="no `HOST | ` before each line (default: prefixed with several hosts or on a terminal)")
    with_exit_codes(parser)


def line_writer(prefix: bool, stream: TextIO | None = None) -> Callable[[str, list[str]], None]:
    """Writes log lines to stdout (`stream`), whole lines at a time across hosts' threads, with
    control characters made visible. A closed pipe (`| head`) ends the output quietly."""
    lock = threading.Lock()
    out = stream or sys.stdout
    closed = [False]

    def write(host: str, lines: list[str]) -> None:
        with lock:
            if closed[0] or not lines:
                return
            try:
                # the host's text as text: escapes and other controls shown, never executed by
                # the terminal (provision/terminal.py), whether stdout is one or a pipe
                text = "".join(f"{host} | {line}\n" if prefix else f"{line}\n" for line in lines)
                out.write(visible(text))
                out.flush()
            except BrokenPipeError:
                closed[0] = True
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, out.fileno())  # no second error when Python flushes at exit

    return write


def run(args: argparse.Namespace) -> int:
    from provision.cli.common import connect_options
    from provision.inventory.loader import resolve_targets

    hosts = resolve_targets([args.target], args.inventory, connect_options(args))
    stream = sys.stderr if args.json else sys.stdout  # --json: stdout holds the one document
    write = line_writer(not args.no_prefix and (len(hosts) > 1 or stream.isatty()), stream)

    def work(trainer: HostTrainer) -> dict:
        if args.follow:
            final = trainer.follow_to_end(args.run_id, on_lines=lambda ls: write(trainer.host, ls))
            return {"run": final, "tail": None}
        return trainer.status(args.run_id, lines=args.lines)

    try:
        outcomes = on_hosts(args, [args.target], work)
    except KeyboardInterrupt:
        console.print(f"stopped following; run {args.run_id} goes on (`provision stop {args.target} "
                      f"{args.run_id}` stops it)", markup=False)
        return EXIT_INTERRUPTED
    for name, o in outcomes.items():
        if o.ok and not args.follow and not args.json:
            write(name, o.value["tail"])
    if args.json:
        emit_json({"hosts": {n: ({"run_id": o.value["run"].get("run_id"), "state": o.value["run"].get("state"),
                                  "exit_code": o.value["run"].get("exit_code"), "log": o.value["run"].get("log"),
                                  "tail": o.value.get("tail")} if o.ok else {"error": o.message})
                             for n, o in outcomes.items()}})
    print_failures(outcomes)
    return exit_code_for(outcomes)
