"""`provision logs HOST RUN [-f]`: a run's log (its last lines; -f: all of it, then follow)."""

from __future__ import annotations

import argparse

from provision.cli.common import console, emit_json, exit_code_for
from provision.cli.train import on_hosts, print_failures
from provision.train.launch import HostTrainer
from provision.train.live import RunView

describe = "show a training run's log on a host (-f: follow it until the run ends)"
OWN_SHORT_OPTIONS = frozenset({"-f"})  # -f follows here, as in tail -f (forks: --forks)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", metavar="HOST")
    parser.add_argument("run_id", metavar="RUN")
    parser.add_argument("-f", "--follow", action="store_true", help="follow until the run ends")
    parser.add_argument("-n", "--lines", type=int, default=200, help="lines to show without -f (default 200)")


def run(args: argparse.Namespace) -> int:
    view = RunView(console, live=False)

    def work(trainer: HostTrainer) -> dict:
        if args.follow:
            final = trainer.follow_to_end(args.run_id, on_lines=lambda ls: view.lines(trainer.host, ls))
            return {"run": final, "tail": None}
        return trainer.status(args.run_id, lines=args.lines)

    outcomes = on_hosts(args, [args.target], work)
    for name, o in outcomes.items():
        if o.ok and not args.follow and not args.json:
            view.lines(name, o.value["tail"])
    if args.json:
        emit_json({"hosts": {n: ({"run_id": o.value["run"].get("run_id"), "state": o.value["run"].get("state"),
                                  "exit_code": o.value["run"].get("exit_code"), "log": o.value["run"].get("log"),
                                  "tail": o.value.get("tail")} if o.ok else {"error": o.message})
                             for n, o in outcomes.items()}})
    print_failures(outcomes)
    return exit_code_for(outcomes)
