"""`provision bench HOST...`: measure the server where training will run, and report."""

from __future__ import annotations

import argparse
from typing import Any

from provision.cli.common import connect_options, console, emit_json, exit_code_for
from provision.compat import TorchRequest
from provision.connection.factory import connect
from provision.distributed.fabric import parse_master, select_fabric
from provision.errors import ConfigError
from provision.inventory.loader import resolve_targets
from provision.inventory.model import Host
from provision.parallel import for_each_host
from provision.remote.agent import Agent
from provision.remote.bench import allreduce_specs, bench_request, dataset_sources, run_bench
from provision.remote.compat import check_host
from provision.remote.environment import managed_python
from provision.remote.facts import gather_facts
from provision.report import history
from provision.report.document import build_report, price_of, write_report
from provision.report.render import print_console
from provision.terminal import markup, text

describe = "benchmark hosts (matmul, AMP, memory, H2D, DataLoader, storage, network, all-reduce) and report"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("targets", nargs="+", metavar="TARGET")
    parser.add_argument("--quick", action="store_true", help="short run (under a minute on a CPU host)")
    parser.add_argument("--dataset", action="append", default=[], metavar="NAME|PATH",
                        help="staged dataset name (<data_dir>/datasets/NAME.lmdb) or a path on the host; repeatable")
    parser.add_argument("--allreduce", action="store_true",
                        help="also form one torch.distributed group across the hosts, on the network they "
                             "reach each other on (docs/train.md, Fabric)")
    parser.add_argument("--master", metavar="HOST[:PORT]",
                        help="--allreduce: rank 0 on this host (a target name or one of its addresses), port optional")
    parser.add_argument("--iface", metavar="NAME", help="--allreduce: meet on this interface (same name on every host)")
    parser.add_argument("--sections", help="comma-separated subset: compute,amp,memory,transfer,dataloader,storage,network,distributed")
    parser.add_argument("--env", help="managed environment path on the host (default: provision's)")
    parser.add_argument("--index-url", help="package index/mirror to measure download speed and latency against")
    parser.add_argument("--out", default="provision-reports", metavar="DIR", help="where reports are written")


def bench_host(host: Host, args: argparse.Namespace, options: Any, allreduce: dict[str, Any] | None,
               progress: dict[str, str], opened: tuple[Agent, dict[str, Any]] | None = None) -> dict[str, Any]:
    """`opened`: the host's agent (its connection) and facts when the fabric choice made them."""
    if opened is not None:
        with opened[0].connection:
            return _bench(host, args, opened[0], opened[1], allreduce, progress)
    with connect(host, options) as conn:
        agent = Agent(conn)
        return _bench(host, args, agent, gather_facts(agent), allreduce, progress)


def _bench(host: Host, args: argparse.Namespace, agent: Agent, facts: dict[str, Any],
           allreduce: dict[str, Any] | None, progress: dict[str, str]) -> dict[str, Any]:
    conn = agent.connection
    python = managed_python(conn, facts, args.env)
    request = bench_request(
        facts, quick=args.quick, datasets=dataset_sources(args.dataset, facts),
        index_url=args.index_url, allreduce=allreduce,
        sections=[s.strip() for s in args.sections.split(",")] if args.sections else None,
    )

    def on_event(event: dict[str, Any]) -> None:
        if event.get("section"):
            progress[host.name] = f"{event['section']} {event.get('status', '')}"
            console.log(f"{host.name}: bench {event['section']} {event.get('status', '')}"
                        + (f" ({event['seconds']} s)" if event.get("seconds") is not None else ""))

    bench = run_bench(agent, request, python=python, on_event=on_event)
    install = {"python": python or agent.python, "torch": (bench.get("host") or {}).get("torch"),
               "managed": python is not None}
    # the torch the bench ran (the managed env's), not the bare python3's
    checked_by = Agent(conn, python=python) if python else agent
    compat = check_host(checked_by, host, facts, TorchRequest(spec="any"), env=args.env).to_dict()
    return build_report(host.name, facts=facts, compat=compat, install=install,
                        datasets=request["datasets"], bench=bench, price_per_hour=price_of(host))


def run(args: argparse.Namespace) -> int:
    # start-up time: the bench's section and choose's prediction (each registers with the
    # report's sections on import) only for a bench
    import provision.bench  # noqa: F401
    import provision.choose  # noqa: F401

    options = connect_options(args)
    hosts = resolve_targets(args.targets, args.inventory, options)
    spec_of: dict[str, dict[str, Any] | None] = {h.name: None for h in hosts}
    opened: dict[str, tuple[Agent, dict[str, Any]]] = {}
    fabric = None
    if args.allreduce:
        if len(hosts) < 2:
            raise ConfigError("--allreduce needs at least 2 hosts")
        if any(h.local for h in hosts):
            raise ConfigError("--allreduce: localhost can't join a multi-host group; name hosts by address")
        if args.master:
            parse_master(args.master)  # a bad value is an error before any host is contacted
        opened, failed = _open_all(hosts, options, args.forks)
        if failed:
            return _report_failed(args, failed)
        try:
            fabric = select_fabric({n: a for n, (a, _) in opened.items()}, {n: f for n, (_, f) in opened.items()},
                                   master=args.master, iface=args.iface)  # fmt: skip
        except BaseException:
            for agent, _ in opened.values():
                agent.connection.close()
            raise
        console.log(f"all-reduce fabric: {fabric.reason}")
        spec_of.update(allreduce_specs(fabric))
    elif args.master or args.iface:
        raise ConfigError("--master and --iface choose where --allreduce meets: add --allreduce")
    progress: dict[str, str] = {}
    forks = max(args.forks, len(hosts)) if args.allreduce else args.forks  # all ranks must run at once
    outcomes = for_each_host(
        hosts, lambda h: bench_host(h, args, options, spec_of[h.name], progress, opened.get(h.name)), forks
    )
    reports, paths = [], {}
    for name, o in outcomes.items():
        if o.ok and o.value:
            reports.append(o.value)
            paths[name] = write_report(o.value, args.out)
            history.record(o.value)
    if args.json:
        doc: dict[str, Any] = {"hosts": {
            name: {"report": paths.get(name), "bench": (o.value or {}).get("bench"),
                   "diagnosis": (o.value or {}).get("diagnosis")}
            if o.ok else {"error": o.message, "unreachable": o.unreachable}
            for name, o in outcomes.items()
        }}
        if fabric is not None:
            doc["fabric"] = fabric.to_json()
        emit_json(doc)
    else:
        print_console(reports, console)
        for name, p in paths.items():
            console.print(text(f"{name}: report {p['html']}"))
        for name, o in outcomes.items():
            if not o.ok:
                console.print(markup("[bold red]{}: {}[/]: {}", name, "unreachable" if o.unreachable else "failed", o.message))
    return exit_code_for(outcomes)


def _open_all(hosts: list[Host], options: Any, forks: int) -> tuple[dict[str, tuple[Agent, dict[str, Any]]], dict]:
    """One connection, agent and facts per host (the fabric choice needs them all first)."""

    def open_one(host: Host) -> tuple[Agent, dict[str, Any]]:
        conn = connect(host, options)
        try:
            agent = Agent(conn)
            return agent, gather_facts(agent)
        except BaseException:
            conn.close()
            raise

    outcomes = for_each_host(hosts, open_one, max(forks, len(hosts)))
    opened = {n: o.value for n, o in outcomes.items() if o.ok and o.value}
    failed = {n: o for n, o in outcomes.items() if not o.ok}
    if failed:
        for agent, _ in opened.values():
            agent.connection.close()
    return opened, failed  # type: ignore[return-value]


def _report_failed(args: argparse.Namespace, failed: dict) -> int:
    if args.json:
        emit_json({"hosts": {n: {"error": o.message, "unreachable": o.unreachable} for n, o in failed.items()}})
    for name, o in failed.items():
        console.print(markup("[bold red]{}: {}[/]: {}", name, "unreachable" if o.unreachable else "failed", o.message))
    return exit_code_for(failed)
