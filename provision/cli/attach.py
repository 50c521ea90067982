"""`provision attach HOST RUN`: follow a run again (after --detach, a closed laptop, a killed
`provision`): its last lines, then live until it ends, then findings and the report."""

from __future__ import annotations

import argparse
from typing import Any

from provision.cli.common import EXIT_INTERRUPTED, console
from provision.cli.train import follow_and_finish, on_hosts, report_entries
from provision.train.launch import HostTrainer
from provision.train.live import RunView
from provision.train.options import with_exit_codes

describe = "follow a training run again until it ends, then diagnose and report it"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", metavar="HOST")
    parser.add_argument("run_id", metavar="RUN")
    parser.add_argument("--out", default="provision-reports", metavar="DIR", help="where reports are written")
    parser.add_argument("--no-live", action="store_true", help="plain prefixed log lines, no live table")
    with_exit_codes(parser)


def detached_message(run_id: str, hosts: list[str]) -> str:
    """What Ctrl-C in `attach` did: nothing to the run (stopping it is `provision stop`)."""
    where = ", ".join(hosts)
    return (f"detached; {run_id} still running on {where}; `provision stop {hosts[0]} {run_id}` stops it"
            + (" on every host" if len(hosts) > 1 else ""))


def run(args: argparse.Namespace) -> int:
    view = RunView(console, live=False if (args.no_live or args.json) else None)
    info = _distributed_info(args)
    if info:  # one job across hosts: follow all of them (their lines from where they are now)
        from provision.cli.common import connect_options
        from provision.cli.train_distributed import attach_distributed, print_distributed

        try:
            with view:
                doc = attach_distributed(args, args.run_id, info, connect_options(args), view)
        except KeyboardInterrupt:
            console.print(detached_message(args.run_id, list(info.get("hosts") or [args.target])), markup=False)
            return EXIT_INTERRUPTED
        return print_distributed(doc, args.json)

    def work(trainer: HostTrainer) -> dict[str, Any]:
        status = trainer.status(args.run_id, lines=20)
        run_state = status["run"]
        console.print(f"{trainer.host}: run {args.run_id} is {run_state.get('state')}", markup=False)
        view.lines(trainer.host, status["tail"])
        # from the end of the log: the tail is shown, the rest comes live
        size = _log_size(trainer, run_state)
        return follow_and_finish(trainer, run_state, view, args.out, offset=size)

    try:
        with view:
            outcomes = on_hosts(args, [args.target], work)
    except KeyboardInterrupt:  # Ctrl-C detaches: the run is the host's, not this command's
        console.print(detached_message(args.run_id, [args.target]), markup=False)
        return EXIT_INTERRUPTED
    return report_entries(outcomes, args.json)


def _distributed_info(args: argparse.Namespace) -> dict[str, Any] | None:
    """The run's `distributed` record (hosts, nproc) when the named host runs part of one."""
    outcomes = on_hosts(args, [args.target], lambda t: t.status(args.run_id, lines=0)["run"])
    states = [o.value for o in outcomes.values() if o.ok]
    if len(outcomes) == 1 and states and isinstance(states[0].get("distributed"), dict):
        return states[0]["distributed"]
    return None


def _log_size(trainer: HostTrainer, run_state: dict[str, Any]) -> int:
    from provision.shell import sh

    result = trainer.connection.run(sh("wc -c < {log}", log=str(run_state.get("log"))), timeout=30)
    return int(result.stdout.strip() or 0) if result.ok and result.stdout.strip().isdigit() else 0
