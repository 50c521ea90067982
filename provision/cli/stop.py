"""`provision stop HOST RUN`: end a run: its whole process group (and any process that left it
but carries the run's id), SIGTERM then SIGKILL after --grace seconds. A distributed run
(`provision train --distributed`) is stopped on every host it runs on, whichever host is named."""

from __future__ import annotations

import argparse
from typing import Any

from provision.cli.common import console, emit_json, exit_code_for
from provision.cli.train import on_hosts, print_failures
from provision.terminal import text
from provision.train.options import with_exit_codes
from provision.train.peers import refused_outcomes, vet_peers

describe = "stop a training run on a host (every process of it)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", metavar="HOST")
    parser.add_argument("run_id", metavar="RUN")
    parser.add_argument("--grace", type=float, default=10.0, metavar="S",
                        help="seconds between SIGTERM and SIGKILL (default 10)")
    with_exit_codes(parser)


def run(args: argparse.Namespace) -> int:
    outcomes = on_hosts(args, [args.target], lambda t: _checked(t.host, t.stop(args.run_id, args.grace)))
    peers: list[str] = []
    refused: dict[str, Any] = {}
    for name, o in list(outcomes.items()):
        dist = o.value["run"].get("distributed") if o.ok else None
        if not isinstance(dist, dict):
            continue
        vetted = vet_peers(args.run_id, name, dist.get("hosts"), args.inventory, args.ssh_config)
        peers += [h for h in vetted.accepted if h not in outcomes and h not in peers]
        refused.update(refused_outcomes(vetted, name, args.run_id))
    if peers:  # the other hosts of a distributed run: every rank ends
        outcomes.update(on_hosts(args, peers, lambda t: _checked(t.host, t.stop(args.run_id, args.grace))))
    outcomes.update({n: o for n, o in refused.items() if n not in outcomes})
    if args.json:
        emit_json({"hosts": {n: ({"run_id": o.value["run"].get("run_id"), "state": o.value["run"].get("state"),
                                  "exit_code": o.value["run"].get("exit_code"), "already_ended": o.value["already"],
                                  **o.value["ended"]} if o.ok else {"error": o.message})
                             for n, o in outcomes.items()}})
    else:
        for name, o in outcomes.items():
            if o.ok:
                print_stopped(name, args.run_id, o.value)
    print_failures(outcomes)
    return exit_code_for(outcomes)


def print_stopped(name: str, run_id: str, value: dict[str, Any]) -> None:
    """One host's stop result (`_checked`'s shape); its state and processes are the host's words."""
    e = value["ended"]
    what = "had already ended" if value["already"] else \
        f"stopped ({len(e['terminated'])} process(es) sent SIGTERM, {len(e['killed'])} SIGKILL)"
    console.print(text(f"{name}: run {run_id} {what}; state {value['run'].get('state')}"))
    if e.get("left"):
        console.print(text(f"{name}: still running: {e['left']}", style="bold red"))


def _checked(host: str, reply: Any) -> dict[str, Any]:
    """The agent's answer in the shape printed below, or the host's failure (its reply is data)."""
    from provision.errors import AgentError

    ended = reply.get("ended") if isinstance(reply, dict) else None
    if not (isinstance(reply, dict) and isinstance(reply.get("run"), dict) and isinstance(ended, dict)
            and all(isinstance(ended.get(k, []), list) for k in ("terminated", "killed", "left"))):
        raise AgentError(host, "train_stop: the host's reply is not a stop result (is its agent provision's?)")
    ended.setdefault("terminated", [])
    ended.setdefault("killed", [])
    return reply
