"""Stage a dataset to hosts: status -> (ship py-lmdb) -> stream only what is missing -> result.

One host (or a host path / URL source): ONE agent call, `stage`, whose payload, the sample
stream (staging/source.py), starts when the agent says `ready` (where to resume, which codecs;
or that the dataset is up to date); an agent missing on the host travels with that call
(remote/agent.py). Several
hosts sharing one read of a local source: two calls each, `dataset_status` (where the dataset
goes, what is already there, free space), then `stage`; a host already up to date costs the
status call only. `stage_dataset` does one host on a connection you hold (the
playbook module wraps it); `stage_hosts` does many, reading a local source once for all hosts
that resume from the same sample.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from provision.agent.datasets import DEFAULT_STALL
from provision.agent.datasets.sources import Plan
from provision.connection.base import Connection, ConnectOptions
from provision.errors import ConfigError, HostError
from provision.inventory.model import Host
from provision.parallel import HostOutcome, for_each_host
from provision.remote.agent import Agent
from provision.staging.host_stage import SHIP_WAIT, EventCallback, HostStage, StageRequest, log
from provision.staging.source import (
    Broadcast,
    PlanFuture,
    StreamFailure,
    check_name,
    default_name,
    parse_source,
    plan_local,
    sample_stream,
)

__all__ = ["HostStage", "StageRequest", "SHIP_WAIT", "make_request", "plan_for", "stage_dataset", "stage_hosts", "stage_local"]


def make_request(
    source: str,
    name: str | None = None,
    dest: str | None = None,
    layout: str = "auto",
    labels: str | None = None,
    verify: bool = False,
    clean: bool = False,
    stall_timeout: float = DEFAULT_STALL,
    commit: dict[str, float] | None = None,
) -> StageRequest:
    spec = parse_source(source)
    return StageRequest(
        source=spec,
        name=check_name(name or default_name(spec)),
        dest=dest,
        layout=layout,
        labels=labels,
        verify=verify,
        clean=clean,
        stall_timeout=stall_timeout,
        commit=commit,
    )


def plan_for(request: StageRequest) -> Plan | None:
    if request.source.kind != "local":
        return None
    return plan_local(request.source.location, request.layout, request.labels)


def stage_dataset(
    connection: Connection,
    agent: Agent | None,
    source: str,
    name: str | None = None,
    dest: str | None = None,
    layout: str = "auto",
    labels: str | None = None,
    verify: bool = False,
    clean: bool = False,
    on_event: EventCallback | None = None,
    stall_timeout: float = DEFAULT_STALL,
) -> dict[str, Any]:
    """Stage `source` to the host behind `connection`; returns the host's result
    (path, count, bytes, seconds, resumed_from, skipped, checksum, ...)."""
    request = make_request(source, name, dest, layout, labels, verify, clean, stall_timeout)
    plan = None
    if request.source.kind == "local":  # listed while the connection opens and the agent answers
        plan = PlanFuture(
            lambda: plan_local(request.source.location, request.layout, request.labels)
        )
    return HostStage(connection, agent or Agent(connection), request, plan, on_event).run_once()


def stage_hosts(
    hosts: list[Host],
    request: StageRequest,
    options: ConnectOptions,
    forks: int = 32,
    on_event_for: Callable[[str], EventCallback] | None = None,
    plan: Plan | PlanFuture | None = None,
    opened: dict[str, Connection] | None = None,
) -> dict[str, HostOutcome[dict[str, Any]]]:
    """Stage to every host in parallel; per-host outcomes, never the first exception alone.

    A local source is listed while the hosts connect (pass a Plan or PlanFuture to reuse one);
    a source that cannot be listed raises ConfigError, whatever the hosts said. `opened`:
    connections already begun (factory.open_early), taken from the dict and closed here.
    """
    # start-up time: the OpenSSH master starts before the heavy imports
    from provision.connection.factory import open_early

    if plan is None and request.source.kind == "local":
        plan = PlanFuture(
            lambda: plan_local(request.source.location, request.layout, request.labels)
        )
    connections: dict[str, Connection] = {}

    def host_stage(host: Host) -> HostStage:
        conn = (opened or {}).pop(host.name, None)
        if conn is None:  # OpenSSH: the handshake begins now, while the source is listed
            conn = open_early([host], options, 1)[host.name]
        connections[host.name] = conn
        cb = on_event_for(host.name) if on_event_for else None
        return HostStage(conn, Agent(conn), request, plan, cb)

    try:
        if len(hosts) == 1 or request.source.kind != "local":
            # nothing to share: one agent call per host, the agent picks its resume point
            outcomes = for_each_host(hosts, lambda h: host_stage(h).run_once(), forks)
            if isinstance(plan, PlanFuture):
                plan.result()  # a source that cannot be listed is a usage error, not a host's
            return outcomes
        outcomes = for_each_host(hosts, lambda h: host_stage(h).prepare(), forks)
        if isinstance(plan, PlanFuture):
            plan = plan.result()
        ready = [o.host for o in outcomes.values() if o.ok]
        stages: dict[str, HostStage] = {h.name: outcomes[h.name].value for h in ready}  # type: ignore[misc]
        results: dict[str, HostOutcome[dict[str, Any]]] = {}
        # Hosts run in batches of `forks`, so every consumer of a shared read is running at once.
        for b in range(0, len(ready), max(1, forks)):
            batch = ready[b : b + forks]
            feeds = _shared_feeds(plan, [stages[h.name] for h in batch])

            def run_one(host: Host, feeds: dict = feeds) -> dict[str, Any]:
                payload, failure, release = feeds.get(host.name, (None, None, lambda: None))
                try:
                    return stages[host.name].run(payload, failure)
                finally:
                    release()

            results.update(for_each_host(batch, run_one, forks))
        merged: dict[str, HostOutcome[dict[str, Any]]] = {}
        for host in hosts:
            first = outcomes[host.name]
            if not first.ok:
                merged[host.name] = HostOutcome(host, None, first.error)
            else:
                merged[host.name] = results[host.name]
        if plan is not None:
            for o in merged.values():
                if o.ok and o.value is not None:
                    o.value.setdefault("warnings", plan.warnings)
        return merged
    finally:
        for conn in [*connections.values(), *(opened or {}).values()]:  # used or never reached
            try:
                conn.close()
            except Exception:
                pass


def _shared_feeds(
    plan: Plan | None, stages: list[HostStage]
) -> dict[str, tuple[Iterator[bytes], StreamFailure, Callable[[], None]]]:
    """One sample stream per resume point, broadcast to every host that starts there."""
    feeds: dict[str, tuple[Iterator[bytes], StreamFailure, Callable[[], None]]] = {}
    if plan is None:
        return feeds
    by_start: dict[int, list[HostStage]] = {}
    for hs in stages:
        if not hs.skip:
            by_start.setdefault(hs.start, []).append(hs)
    for start, group in by_start.items():
        failure = StreamFailure()
        # one reader thread per resume point, even for a single host: reading the files then
        # overlaps with encrypting and sending them
        cast = Broadcast(sample_stream(plan, start, failure), len(group))
        for k, hs in enumerate(group):
            hs.compress_alone = len(group) == 1
            feeds[hs.host] = (cast.consumer(k), failure, _releaser(cast, k))
    return feeds


def _releaser(cast: Broadcast, k: int) -> Callable[[], None]:
    def release() -> None:
        cast.alive[k] = False

    return release


def stage_local(
    request: StageRequest,
    target: str,
    on_event: EventCallback | None = None,
) -> dict[str, Any]:
    """`provision stage SRC --local DEST.lmdb`: build the LMDB on this machine, in this process."""
    import os

    # lazy: a local stage runs the agent's ingest in this process; a remote one never loads it
    from provision.agent.datasets import ingest
    from provision.agent.datasets.download import stage_url

    if not target.endswith(".lmdb"):
        target = os.path.join(target, request.name + ".lmdb")
    path = os.path.abspath(os.path.expanduser(target))
    emit = (lambda **fields: on_event(fields)) if on_event else (lambda **fields: None)

    def say(message: str) -> None:
        log.info("%s", message)

    try:
        if request.source.kind == "url":
            return stage_url(
                path,
                {
                    "url": request.source.location,
                    "layout": request.layout,
                    "labels": request.labels,
                },
                emit,
                say,
                request.verify,
                request.clean,
                request.stall_timeout,
            )
        if request.source.kind == "host":
            raise ConfigError(
                f"{request.source.display}: with --local the source is a path on this machine"
            )
        plan = plan_local(request.source.location, request.layout, request.labels)
        for w in plan.warnings:
            log.warning("%s", w)
        result = ingest.build(
            path,
            plan.manifest,
            plan.iter_samples,
            request.source.display,
            emit,
            say,
            verify=request.verify,
            clean=request.clean,
            stall_timeout=request.stall_timeout,
        )
        result["warnings"] = plan.warnings
        return result
    except (OSError, ValueError, RuntimeError) as exc:  # disk full, bad layout, stage errors
        raise HostError("local", str(exc)) from None
