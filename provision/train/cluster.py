"""One distributed run across hosts: check, choose the fabric, measure it, start, follow, stop.

    cluster = ClusterTrainer(hosts, trainers, spec, DistributedOptions(...))
    cluster.prepare()            # facts, interpreters, the torch check (refuses before anything runs)
    cluster.measure_allreduce()  # optional: the bench's distributed section over the fabric
    cluster.start(files)         # torchrun on every host, same run id, detached
    finals = cluster.follow(on_lines)   # one failed host -> every other host stops its ranks
    cluster.stop_all()           # Ctrl-C / errors: every host, each on its own connection

Each HostTrainer (one connection) is used by one thread at a time: the fan-outs below give each
host its own thread, as provision.parallel does everywhere.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from provision.distributed.fabric import select_fabric
from provision.errors import ConfigError
from provision.inventory.model import Host
from provision.parallel import HostOutcome, for_each_host
from provision.remote.bench import allreduce_specs, bench_request
from provision.report import history
from provision.report.document import now_iso, price_of
from provision.train import allreduce_memo
from provision.train.diagnosis import diagnose_distributed, diagnose_run
from provision.train.distributed import (
    STOP_GRACE_S,
    DistributedOptions,
    FailureWatch,
    NodePlan,
    check_same_torch,
    nproc_for,
    plan_nodes,
)
from provision.train.launch import FACT_KEYS, HostTrainer, TrainSpec
from provision.train.layout import host_layout, odd_hosts
from provision.train.report import build_document, run_entry, write

FOLLOW_CALL_S = 2.0  # short follow calls: a failed peer is noticed within one call
ALLREDUCE_TIMEOUT_S = 180.0  # the whole pre-job measurement, every host (bounded)


def _probe_python(spec: TrainSpec, python: str | None) -> str:
    if python:
        return python
    first = spec.command[0] if spec.command else ""
    return first if first.rsplit("/", 1)[-1].startswith("python") else "python3"


class ClusterTrainer:
    def __init__(self, hosts: list[Host], trainers: dict[str, HostTrainer], spec: TrainSpec,
                 options: DistributedOptions) -> None:
        if not hosts:
            raise ConfigError("provision train --distributed: no hosts")
        self.hosts = hosts
        self.trainers = trainers
        self.spec = spec
        self.options = options
        self.facts: dict[str, dict[str, Any]] = {}
        self.pythons: dict[str, str | None] = {}
        self.torches: dict[str, dict[str, Any]] = {}
        self.nprocs: dict[str, int] = {}
        self.fabric: Any = None
        self.allreduce: dict[str, Any] | None = None
        self.layout: dict[str, Any] | None = None  # each host's data dir, workdir, free space
        self.plans: list[NodePlan] = []
        self.started: dict[str, dict[str, Any]] = {}
        self.watch = FailureWatch()
        self.info: dict[str, Any] = {}  # attached to a running job: its state.json's `distributed`

    @classmethod
    def attached(cls, hosts: list[Host], trainers: dict[str, HostTrainer], run_id: str,
                 info: dict[str, Any]) -> ClusterTrainer:
        """A run started earlier (--detach, a lost controller): follow and report it again."""
        cluster = cls(hosts, trainers, TrainSpec(command=list(info.get("command") or []), run_id=run_id),
                      DistributedOptions())
        cluster.info = info
        return cluster

    @property
    def run_id(self) -> str:
        assert self.spec.run_id
        return self.spec.run_id

    def _on_all(self, work: Callable[[Host], Any]) -> dict[str, HostOutcome[Any]]:
        """work(host) on every host at once: the ranks of one job must all run together."""
        return for_each_host(self.hosts, work, max(1, len(self.hosts)))

    def _each(self, work: Callable[[Host], Any], what: str) -> dict[str, Any]:
        """work(host) on every host at once; any failure raises, naming the hosts."""
        outcomes: dict[str, HostOutcome[Any]] = self._on_all(work)
        bad = {n: o for n, o in outcomes.items() if not o.ok}
        if bad:
            lines = "; ".join(f"{n}: {o.message}" for n, o in bad.items())
            raise ConfigError(f"provision train --distributed: {what} failed on {', '.join(bad)}: {lines}")
        return {n: o.value for n, o in outcomes.items()}

    def prepare(self) -> None:
        """Facts with the network, each host's interpreter and the torch it imports; then the
        torch check and the fabric. Nothing runs on any host before this passed."""
        def one(host: Host) -> tuple[dict[str, Any], str | None, dict[str, Any]]:
            t = self.trainers[host.name]
            facts = t.load_facts([*FACT_KEYS, "network"])
            python = t.interpreter(self.spec)
            torch = t.agent.call("train_torch", {"python": _probe_python(self.spec, python)}, timeout=120)
            return facts, python, torch

        found = self._each(one, "gathering facts")
        for name, (facts, python, torch) in found.items():
            self.facts[name], self.pythons[name], self.torches[name] = facts, python, torch
        check_same_torch(self.torches)

        hosts = {n: host_layout(f, self.run_id, self.spec.workdir) for n, f in self.facts.items()}
        self.layout = {"hosts": hosts, "differs": odd_hosts(hosts)}
        self.nprocs = {n: nproc_for(self.options.nproc_per_node, f) for n, f in self.facts.items()}

        self.fabric = select_fabric({n: t.agent for n, t in self.trainers.items()}, self.facts,
                                    master=self.options.master, iface=self.options.iface)

    def measure_allreduce(self) -> dict[str, Any]:
        """The bench's multi-host all-reduce over the fabric (quick sizes, bounded), one rank per host."""
        order = list(self.fabric.hosts or [h.name for h in self.hosts])
        key = allreduce_memo.memo_key({n: t.connection.identity() for n, t in self.trainers.items()},
                                      self.fabric)
        recalled = allreduce_memo.recall(key, self.options.allreduce_max_age_s) if key else None
        if recalled is not None:  # the same hosts on the same network, measured recently
            self.allreduce = recalled
            return recalled
        specs = allreduce_specs(self.fabric)  # the bench's own rendezvous on the fabric

        def one(host: Host) -> dict[str, Any]:
            t = self.trainers[host.name]
            spec = dict(specs[host.name], timeout_s=60.0)
            request = bench_request(self.facts[host.name], quick=True, allreduce=spec, sections=["distributed"])
            request["max_seconds"] = ALLREDUCE_TIMEOUT_S
            result = t.agent.call("bench", request, python=self.pythons[host.name], timeout=ALLREDUCE_TIMEOUT_S + 60)
            return ((result.get("distributed") or {}).get("multi_host")) or {
                "status": (result.get("distributed") or {}).get("status", "error"),
                "reason": (result.get("distributed") or {}).get("reason")}

        try:
            per_host = self._each(one, "the all-reduce measurement")
        except ConfigError as exc:
            self.allreduce = {"status": "error", "reason": str(exc)}
            return self.allreduce
        first = per_host[order[0]]
        self.allreduce = dict(first, hosts=len(order), per_host={n: r.get("busbw_gbs") for n, r in per_host.items()})
        if key:
            allreduce_memo.remember(key, self.allreduce)
        return self.allreduce

    def start(self, files: list[Any] | None) -> dict[str, dict[str, Any]]:
        """torchrun on every host under its supervisor; a host that can't start stops the others."""
        run_dirs = {n: f"{t.data_dir.rstrip('/')}/runs/{self.run_id}" for n, t in self.trainers.items()}
        self.plans = plan_nodes(self.spec.command, self.fabric, self.facts, self.nprocs, self.run_id, run_dirs,
                                self.options.join_timeout_s)
        by_host = {p.host: p for p in self.plans}
        info = {"nnodes": len(self.plans), "master": f"{self.fabric.master_addr}:{self.fabric.master_port}",
                "master_host": self.fabric.master_host, "hosts": [p.host for p in self.plans],
                "nproc": {p.host: p.nproc for p in self.plans}, "command": self.spec.command}

        def one(host: Host) -> dict[str, Any]:
            plan = by_host[host.name]
            host_spec = dataclasses.replace(
                self.spec, command=plan.command, env={**self.spec.env, **plan.env}, rank=plan.node_rank,
                hosts=[p.host for p in self.plans], python=self.pythons[host.name],
                distributed=dict(info, node_rank=plan.node_rank))
            return self.trainers[host.name].start(host_spec, files)

        outcomes = self._on_all(one)
        self.started = {n: o.value for n, o in outcomes.items() if o.ok}
        bad = {n: o for n, o in outcomes.items() if not o.ok}
        if bad:
            self.stop_all()
            raise ConfigError("provision train --distributed: could not start on "
                              + "; ".join(f"{n}: {o.message}" for n, o in bad.items())
                              + f"; the run was stopped on {', '.join(self.started) or 'no host'}")
        return self.started

    def follow(self, on_lines: Callable[[str, list[str]], None],
               on_tick: Callable[[str], None] | None = None) -> dict[str, HostOutcome[Any]]:
        """Follow every host to the end. When one host's run fails, every other host stops its
        ranks at its next follow call (FOLLOW_CALL_S), whatever torch's own error handling does."""
        def one(host: Host) -> dict[str, Any]:
            t = self.trainers[host.name]

            def tick() -> None:
                if self.watch.should_stop(host.name):
                    t.stop(self.run_id, STOP_GRACE_S)
                if on_tick is not None:
                    on_tick(host.name)

            final = t.follow_to_end(self.run_id, on_lines=lambda lines: on_lines(host.name, lines),
                                    on_tick=tick, call_seconds=FOLLOW_CALL_S)
            self.watch.ended(host.name, final.get("state"))
            return final

        return self._on_all(one)

    def stop_all(self, connect_fresh: Callable[[Host], Any] | None = None) -> dict[str, HostOutcome[Any]]:
        """Stop the run on every host. `connect_fresh(host)` -> a context manager giving a new
        HostTrainer (after Ctrl-C the old connections were interrupted)."""
        def one(host: Host) -> dict[str, Any]:
            if connect_fresh is None:
                return self.trainers[host.name].stop(self.run_id, STOP_GRACE_S)
            with connect_fresh(host) as trainer:
                return trainer.stop(self.run_id, STOP_GRACE_S)

        return self._on_all(one)

    def distributed_section(self) -> dict[str, Any]:
        """What the JSON document and every host's report say about the whole run."""
        fabric = self.fabric.to_json() if self.fabric is not None else None
        nproc = {p.host: p.nproc for p in self.plans} or dict(self.info.get("nproc") or {})
        return {
            "run_id": self.run_id,
            "hosts": [p.host for p in self.plans] or list(self.info.get("hosts") or []),
            "nnodes": len(nproc),
            "nproc_per_node": nproc,
            "world_size": sum(nproc.values()),
            "torch": {n: t.get("version") for n, t in self.torches.items()},
            "fabric": fabric,
            "allreduce": self.allreduce,
            "layout": self.layout,
        }


def finish_run(cluster: ClusterTrainer, finals: dict[str, dict[str, Any]], out: str | None) -> dict[str, Any]:
    """Every host's summary -> its own findings + the whole run's -> reports (one per host,
    written to `out` and recorded in the history; none without `out`)."""
    summaries = {n: cluster.trainers[n].summary(cluster.run_id, lines=80) for n in finals}
    overall = diagnose_distributed(summaries, cluster.allreduce, cluster.options.grad_bytes)
    section = dict(cluster.distributed_section(), findings=[f.as_dict() for f in overall])
    runs: dict[str, Any] = {}
    for host in cluster.hosts:
        name = host.name
        if name not in summaries:
            runs[name] = {"error": "the run could not be followed to its end", "unreachable": False}
            continue
        t, summary = cluster.trainers[name], summaries[name]
        bench = history.previous(name, now_iso(), train=False)
        findings = overall + diagnose_run(summary, t.facts, bench, name)
        paths = None
        if out:
            doc = build_document(name, summary["run"], summary, findings, t.facts, price_of(host),
                                 distributed=section)
            paths = write(doc, out)
            history.record(doc)
        runs[name] = run_entry(summary["run"], summary, findings, paths)
    return {"runs": runs, "distributed": section}
