"""`provision train TARGET... --distributed`: the CLI flow of one torch.distributed job across
the hosts (provision/train/cluster.py does the work; this connects, prints and reports)."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator
from typing import Any

from provision.cli.common import console
from provision.connection.factory import connect
from provision.errors import ConfigError
from provision.inventory.model import Host
from provision.terminal import markup
from provision.train.allreduce_memo import REUSE_S, describe_age
from provision.train.cluster import ClusterTrainer, finish_run
from provision.train.distributed import DistributedOptions, label_lines, parse_nproc
from provision.train.launch import HostTrainer, TrainSpec
from provision.train.live import RunView


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("distributed (one job across the hosts, torchrun)")
    group.add_argument("--distributed", action="store_true",
                       help="one torch.distributed job across all the hosts (torchrun, c10d rendezvous)")
    group.add_argument("--nproc-per-node", metavar="N|auto",
                       help="processes per host (default auto: one per GPU from facts, 1 without GPUs)")
    group.add_argument("--master", metavar="HOST[:PORT]", help="rendezvous host (default: the first) and port")
    group.add_argument("--iface", metavar="NAME", help="the network interface the hosts meet on")
    group.add_argument("--no-allreduce", action="store_true",
                       help="skip measuring the all-reduce bandwidth between the hosts before the job")
    group.add_argument("--fresh-allreduce", action="store_true",
                       help="measure the all-reduce again even when one between these hosts is under 6 h old")
    group.add_argument("--grad-mb", type=float, metavar="MB",
                       help="gradient size per step for network_bound when the model's parameters can't be counted")


def options_from_args(args: argparse.Namespace) -> DistributedOptions:
    if args.grad_mb is not None and args.grad_mb <= 0:
        raise ConfigError(f"--grad-mb must be > 0, got {args.grad_mb:g}")
    return DistributedOptions(
        nproc_per_node=parse_nproc(args.nproc_per_node), master=args.master, iface=args.iface,
        allreduce=not args.no_allreduce, allreduce_max_age_s=0.0 if args.fresh_allreduce else REUSE_S,
        grad_bytes=int(args.grad_mb * 1e6) if args.grad_mb else None)


def check_single_host_args(args: argparse.Namespace) -> None:
    """The distributed options without --distributed are a mistake worth naming."""
    given = [o for o, v in (("--nproc-per-node", args.nproc_per_node), ("--master", args.master),
                            ("--iface", args.iface), ("--grad-mb", args.grad_mb)) if v is not None]
    if given:
        raise ConfigError(f"{', '.join(given)}: only with --distributed (one job across the hosts)")


def run_distributed(args: argparse.Namespace, spec: TrainSpec, hosts: list[Host], files: Any,
                    options: Any, view: RunView) -> dict[str, Any]:
    """Prepare, start, follow and report; returns {"runs": {host: entry}, "distributed": {...}}."""
    dist = options_from_args(args)
    if spec.stop_when_idle is not None:
        raise ConfigError("--stop-when-idle: not with --distributed yet; use `provision idle HOST --after` per host")
    with contextlib.ExitStack() as stack:
        trainers = {h.name: HostTrainer(stack.enter_context(connect(h, options))) for h in hosts}
        cluster = ClusterTrainer(hosts, trainers, spec, dist)
        cluster.prepare()
        fabric = cluster.fabric
        console.print(f"fabric: {fabric.reason}", markup=False)
        torch = next(iter(cluster.torches.values()))
        console.print(f"torch {torch.get('version')} on every host; ranks: "
                      + ", ".join(f"{h} x{cluster.nprocs[h]}" for h in fabric.hosts), markup=False)
        print_layout(cluster.layout)
        if dist.allreduce and len(hosts) > 1:
            ar = cluster.measure_allreduce()
            reused = ar.get("reused")
            when = (f" (measured {describe_age(reused['age_s'])}; --fresh-allreduce measures again)"
                    if reused else "")
            console.print(f"all-reduce between the hosts: {ar.get('busbw_gbs')} GB/s bus bandwidth{when}"
                          if ar.get("status") == "ok" else f"all-reduce not measured: {ar.get('reason')}",
                          markup=False)
        from provision.train.peers import record_run

        record_run(spec.run_id, [h.name for h in hosts])  # stop/attach trust this, not the hosts' word
        try:
            cluster.start(files)
        except KeyboardInterrupt:
            _stop_fresh(cluster, options)
            raise
        for name, started in cluster.started.items():
            r = started["run"]
            console.print(f"{name}: run {r['run_id']} {r['state']} (node {r.get('rank')}) in {r['workdir']}",
                          markup=False)
        if args.detach:
            from provision.train.report import run_entry

            if not args.json:
                console.print(f"follow with `provision attach HOST {spec.run_id}`; "
                              f"stop every host with `provision stop {hosts[0].name} {spec.run_id}`", markup=False)
            return {"runs": {n: run_entry(s["run"], None, [], None) for n, s in cluster.started.items()},
                    "distributed": cluster.distributed_section()}

        def tick(host: str) -> None:  # in that host's own follow thread: its connection is free
            if view.live:
                from provision.train.report import profile

                s = cluster.trainers[host].summary(cluster.run_id, points=1, lines=0)
                view.update(host, run_id=cluster.run_id, state=s["run"].get("state"),
                            started=s["run"].get("started"), **profile(s))

        try:
            outcomes = cluster.follow(lambda host, lines: view.labelled(host, label_lines(host, lines)), tick)
        except KeyboardInterrupt:
            console.print(f"[yellow]interrupted: stopping run {spec.run_id} on every host[/]")
            _stop_fresh(cluster, options)
            raise
        finals = {n: o.value for n, o in outcomes.items() if o.ok}
        return finish_run(cluster, finals, args.out)


def print_layout(layout: dict[str, Any] | None) -> None:
    """Each host's data dir, disk, free space and workdir; the host whose layout differs from the
    others' (or is at its free-space floor), named with why."""
    from provision.train.layout import describe

    if not layout:
        return
    for host, v in layout["hosts"].items():
        console.print(describe(host, v), markup=False)
    for host, why in layout["differs"].items():
        console.print(markup("[yellow]layout: {}: {}[/]", host, why), highlight=False)


def attach_distributed(args: argparse.Namespace, run_id: str, info: dict[str, Any], options: Any,
                       view: RunView) -> dict[str, Any]:
    """`provision attach HOST RUN` of a distributed run: follow every host of it, then report."""
    from provision.inventory.loader import resolve_targets
    from provision.train.peers import vet_peers

    vetted = vet_peers(run_id, args.target, info.get("hosts"), args.inventory, args.ssh_config)
    if vetted.refused:  # a host's word is not a connection target (issue 20)
        console.print(vetted.refusal(args.target, run_id), markup=False, style="bold red")
    listed = [h for h in info.get("hosts") or [] if h == args.target or h in vetted.accepted]
    hosts = resolve_targets(listed if args.target in listed else [args.target, *listed], args.inventory, options)
    with contextlib.ExitStack() as stack:
        trainers = {h.name: HostTrainer(stack.enter_context(connect(h, options))) for h in hosts}
        cluster = ClusterTrainer.attached(hosts, trainers, run_id, info)
        console.print(f"run {run_id}: one job on {', '.join(h.name for h in hosts)}", markup=False)
        outcomes = cluster.follow(lambda host, lines: view.labelled(host, label_lines(host, lines)))
        return finish_run(cluster, {n: o.value for n, o in outcomes.items() if o.ok}, args.out)


def _stop_fresh(cluster: ClusterTrainer, options: Any) -> None:
    @contextlib.contextmanager
    def fresh(host: Host) -> Iterator[HostTrainer]:
        with connect(host, options) as conn:
            yield HostTrainer(conn)

    for name, o in cluster.stop_all(fresh).items():
        if o.ok:
            left = (o.value.get("ended") or {}).get("left")
            console.print(f"{name}: run {cluster.run_id} {o.value['run'].get('state')}"
                          + (f"; still running: {left}" if left else ""), markup=False)
        else:
            console.print(markup("[bold red]{}: could not stop: {}[/]", name, o.message))


def print_distributed(doc: dict[str, Any], as_json: bool) -> int:
    """Each host's run and findings, then the whole run's; or the --json document. The exit code."""
    from provision.cli.common import EXIT_HOST_FAILED, EXIT_OK, emit_json
    from provision.report.render import SEVERITY_STYLE
    from provision.terminal import text

    failed = any("error" in e or e.get("state") in ("failed", "stopped") for e in doc["runs"].values())
    if as_json:
        emit_json(doc)
        return EXIT_HOST_FAILED if failed else EXIT_OK
    section = doc.get("distributed") or {}
    for name, e in doc["runs"].items():
        if "error" in e:
            console.print(markup("[bold red]{}: {}[/]", name, e["error"]))
            continue
        code = "" if e.get("exit_code") is None else f", exit code {e['exit_code']}"
        after = f" after {e['seconds']:.1f}s" if e.get("seconds") else ""
        console.print(markup("[bold]{}[/]: run {} {}{}{}", name, e["run_id"], e["state"], code, after))
        if e.get("report"):
            console.print(f"  report {e['report']['html']}", markup=False)
    for f in section.get("findings") or []:
        console.print(markup("  {} {}\n    {}\n    do: {}", text(f["severity"], SEVERITY_STYLE.get(f["severity"], "")),
                             f["title"], f["evidence"], f["recommendation"]), highlight=False)
    return EXIT_HOST_FAILED if failed else EXIT_OK
