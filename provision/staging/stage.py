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

import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from provision.agent.datasets import DEFAULT_STALL
from provision.agent.datasets.sources import Plan
from provision.connection.base import Connection, ConnectOptions
from provision.errors import AgentError, ConfigError, HostError, UnreachableError
from provision.inventory.model import Host
from provision.parallel import HostOutcome, for_each_host
from provision.remote.agent import Agent, LateRequest
from provision.staging.compress import StreamStats, framed_stream
from provision.staging.payload import AfterReady
from provision.staging.progress import PHASES, UNSIZED_PHASES, clean_event
from provision.staging.source import (
    Broadcast,
    PlanFuture,
    SourceSpec,
    StreamFailure,
    as_views,
    check_name,
    default_name,
    parse_source,
    plan_local,
    prefetch,
    sample_stream,
)
from provision.staging.watchdog import StallWatchdog
from provision.staging.zstd_ship import ZstdShipping

log = logging.getLogger("provision.stage")
EventCallback = Callable[[dict[str, Any]], None]
SHIP_WAIT = 10.0  # seconds a finished stage waits for a zstandard upload still under way


@dataclass
class StageRequest:
    source: SourceSpec
    name: str
    dest: str | None = None  # folder for NAME.lmdb, or a full path ending in .lmdb
    layout: str = "auto"
    labels: str | None = None
    verify: bool = False
    clean: bool = False
    stall_timeout: float = DEFAULT_STALL  # seconds without any sign of life -> connection lost
    commit: dict[str, float] | None = None  # tuning: commit every {"samples": N, "seconds": S}


def _gb(n: float) -> str:
    return f"{n / 1e9:.2f} GB" if n >= 1e8 else f"{n / 1e6:.1f} MB"


class HostStage:
    """One host's stage, in two steps so several hosts can share one read of the source."""

    def __init__(
        self,
        connection: Connection,
        agent: Agent,
        request: StageRequest,
        plan: Plan | PlanFuture | None = None,
        on_event: EventCallback | None = None,
    ) -> None:
        self.connection = connection
        self.agent = agent
        self.request = request
        self._plan = plan
        self.on_event = on_event or (lambda event: None)
        self.host = connection.host.name
        self.path = ""
        self.start = 0
        self.skip = False
        self.status: dict[str, Any] = {}
        self.last_event: dict[str, Any] = {}
        self.last_seen = time.monotonic()
        self.last_progress = self.last_seen  # an event that advanced the stage (StallWatchdog)
        self._best: dict[str, dict[str, float | None]] = {}  # per phase: its counts and totals
        self.t0 = time.monotonic()
        self.stream_stats = StreamStats()
        self.compress_alone = True  # False when a broadcast read feeds other hosts too
        self.shipping: ZstdShipping | None = None  # zstandard on its way to the host

    def _event(self, event: dict[str, Any]) -> None:
        event = clean_event(event)
        self.last_seen = time.monotonic()
        if event.get("phase") == "heartbeat":
            return
        if self._advanced(event):
            self.last_progress = self.last_seen
        if event.get("phase") in ("stage", "verify", "download"):
            self.last_event = event
        self.on_event(event)

    def _advanced(self, event: dict[str, Any]) -> bool:
        """Progress the watchdog believes (issue 29): a known phase seen for the first time, or a
        count past the furthest so far within the total that phase first declared. Talk alone is
        not progress, and neither is a new phase name, a count past its total or a total that
        moves: a host repeating itself or inventing progress is stopped by the watchdog."""
        phase = event.get("phase")
        if phase not in PHASES:
            return False
        advanced = phase not in self._best
        best = self._best.setdefault(phase, {})  # the furthest counts, and the totals first declared
        for key, total_key in (("done", "total"), ("bytes", "total_bytes")):
            count, total = event.get(key), event.get(total_key)
            declared = best.get(total_key)
            if declared is None:
                declared = best[total_key] = total
            elif total is not None and total != declared:
                return False  # a total that moves is no total
            if count is None or (declared is None and phase not in UNSIZED_PHASES) or \
                    (declared is not None and count > declared):
                continue
            if count > (best.get(key) or 0.0):
                best[key] = count
                advanced = True
        return advanced

    @property
    def plan(self) -> Plan | None:
        if isinstance(self._plan, PlanFuture):
            self._plan = self._plan.result()  # waits for the listing; raises its ConfigError
        return self._plan

    def _where(self) -> dict[str, Any]:
        """How the agent finds the dataset's path: NAME, --dest, the host's data_dir var."""
        query: dict[str, Any] = {"name": self.request.name}
        if self.request.dest:
            query["dest"] = self.request.dest
        data_dir = self.connection.host.vars.get("data_dir")
        if data_dir:
            query["data_dir"] = str(data_dir)
        return query

    def _ship_lmdb(self) -> dict[str, Any]:
        self._event({"phase": "lmdb"})
        status = self.agent.call("dataset_status", self._where())
        if status.get("lmdb") is None:
            from provision.staging.hostlib import ship_lmdb  # rarely needed: not on the start path

            ship_lmdb(self.connection, status, put=getattr(self.agent, "put", None))
            status = self.agent.call("dataset_status", self._where())
            if status.get("lmdb") is None:
                raise HostError(
                    self.host,
                    "py-lmdb was shipped but still does not import on the host; run with -vv",
                )
        return status

    # -- one call: the agent picks the resume point ------------------------------------------
    def run_once(self) -> dict[str, Any]:
        """Stage with ONE agent call: the agent finds the partial's committed count (or that the
        dataset is up to date) and says so in a `ready` event; the stream starts only then, from
        there. A host whose Python lacks py-lmdb gets it shipped, then the call is repeated."""
        self._event({"phase": "status"})
        for attempt in range(2):
            try:
                return self._run_once()
            except HostError as exc:
                if attempt == 0 and getattr(exc, "kind", None) == "missing_lmdb":
                    self._ship_lmdb()
                    continue
                raise
        raise AssertionError("unreachable")  # pragma: no cover

    def _run_once(self) -> dict[str, Any]:
        request = dict(self._where(), **self._options())
        if self._plan is None:
            request["source"] = self._remote_source()
            return self._call(request, None, None)
        failure = StreamFailure()

        def stream(said: dict[str, Any]) -> Iterator[bytes]:
            self.start = int(said.get("start") or 0)
            zstd = "zstd" in (said.get("codecs") or [])
            chunks = prefetch(sample_stream(self.plan, self.start, failure))  # type: ignore[arg-type]
            self.stream_stats = StreamStats()  # this attempt's (an abandoned one sent a chunk)
            later = None if zstd else self._zstd_shipping(said.get("python_tag"))
            return as_views(framed_stream(chunks, zstd, self.stream_stats, later=later))

        payload = AfterReady(stream)
        result = self._call(self._late_request(request, failure), payload, failure, payload.ready)
        plan = self.plan
        assert plan is not None
        if result.get("skipped"):
            result["bytes"] = plan.manifest.total_bytes
        result.setdefault("warnings", plan.warnings)
        self._add_compression(result)
        return result

    def _late_request(self, base: dict[str, Any], failure: StreamFailure) -> LateRequest:
        """The stage request, sent once the source is listed: the session and the agent's start
        overlap the listing (remote/agent.LateRequest). A listing that fails sends an empty
        request (the agent refuses it) and leaves its error in `failure`, which _call raises."""
        built: list[dict[str, Any]] = []

        def late(wait: float) -> dict[str, Any] | None:
            if built:
                return built[0]
            listing = self._plan
            # well inside the stall timeout: the watchdog reads last_seen every 0.25 s
            wait = min(wait, self.request.stall_timeout / 4)
            if isinstance(listing, PlanFuture) and not listing.done(wait):
                self.last_seen = self.last_progress = time.monotonic()  # the wait is ours: the watchdog must not fire
                return None
            try:
                plan = self.plan
                assert plan is not None
                built.append(dict(base, source=self._stream_source(plan, "auto")))
            except BaseException as exc:  # raised by _call, in the caller's thread
                failure.error = exc
                built.append({})
            return built[0]

        return late

    def _zstd_shipping(self, tag: Any) -> ZstdShipping | None:
        """For a host without zstandard: ship it meanwhile where the data pays for it."""
        plan = self.plan
        if not isinstance(tag, str) or plan is None or not self.compress_alone:
            return None
        sizes = plan.manifest.sizes
        start = self.start if isinstance(self.start, int) else 0
        self.shipping = ZstdShipping(self.agent, self.connection, tag, sum(sizes[start:]))
        return self.shipping

    def _add_compression(self, result: dict[str, Any]) -> None:
        if self.stream_stats.frames:
            result["compression"] = self.stream_stats.summary()
        if self.shipping is not None:
            self.shipping.join(SHIP_WAIT)
            result.setdefault("compression", {})["zstandard_shipped"] = self.shipping.state

    # -- two steps: status first (several hosts share one read) ------------------------------
    def prepare(self) -> HostStage:
        self._event({"phase": "status"})
        status = self.agent.call("dataset_status", self._where())  # the listing runs meanwhile
        if status.get("lmdb") is None:
            status = self._ship_lmdb()
        self.status = status
        self.path = status["path"]
        plan = self.plan
        if plan is None:
            return self  # host path / URL: the agent decides skip and resume itself
        req = self.request
        fingerprint = plan.manifest.fingerprint()
        final = status.get("final") or {}
        partial = status.get("partial") or {}
        if (
            final.get("complete") == "1"
            and final.get("fingerprint") == fingerprint
            and not req.clean
        ):
            self.skip = True
            return self
        if not req.clean and partial.get("fingerprint") == fingerprint:
            self.start = int(partial.get("committed") or 0)
        need = plan.manifest.estimate_lmdb_bytes(self.start)
        free = int(status.get("free_bytes") or 0)
        if need > free:
            raise HostError(
                self.host,
                f"not enough space for {self.path}: it needs about {_gb(need)}, {_gb(free)} is "
                "free. Free some space, or stage to a bigger disk with --dest DIR.",
            )
        return self

    def run(
        self, payload: Iterator[bytes] | None = None, failure: StreamFailure | None = None
    ) -> dict[str, Any]:
        """Step 2 after prepare(): stream from the start found there (or report the skip)."""
        req = self.request
        plan = self.plan
        if self.skip:
            final = self.status.get("final") or {}
            result: dict[str, Any] = {
                "path": self.path,
                "count": int(final.get("count") or 0),
                "checksum": final.get("checksum"),
                "file_bytes": final.get("file_bytes"),
                "skipped": True,
                "resumed_from": None,
            }
            if req.verify:
                query: dict[str, Any] = {"path": self.path}
                if plan is not None:
                    query["manifest"] = plan.manifest.to_wire()
                result["verify"] = self.agent.call("verify_dataset", query, on_event=self._event)
            result["bytes"] = plan.manifest.total_bytes if plan is not None else None
            result["seconds"] = round(time.monotonic() - self.t0, 3)
            result["transport"] = self.transport()
            self._event({"phase": "skipped", "count": result["count"]})
            return result
        request = dict(self._options(), path=self.path)
        if plan is None:
            request["source"] = self._remote_source()
            return self._call(request, None, None)
        request["source"] = self._stream_source(plan, self.start)
        if payload is None:
            failure = failure or StreamFailure()
            payload = prefetch(sample_stream(plan, self.start, failure))
        # zstd only where this host decodes it and no other host shares the read (each
        # consumer would compress the same bytes again)
        zstd = self.compress_alone and "zstd" in (self.status.get("codecs") or [])
        later = None if zstd else self._zstd_shipping((self.status.get("python") or {}).get("tag"))
        result = self._call(
            request, as_views(framed_stream(payload, zstd, self.stream_stats, later=later)), failure
        )
        self._add_compression(result)
        return result

    # -- shared -----------------------------------------------------------------------------
    def transport(self) -> str:
        """Which transport carried the stream: openssh, paramiko (also after a fallback), local."""
        name = getattr(self.connection, "transport_name", None)
        return name or ("local" if self.connection.host.local else "paramiko")

    def _options(self) -> dict[str, Any]:
        req = self.request
        options: dict[str, Any] = {
            "verify": req.verify,
            "clean": req.clean,
            "stall_timeout": req.stall_timeout,
        }
        if req.commit:
            options["commit"] = req.commit
        return options

    def _stream_source(self, plan: Plan, start: int | str) -> dict[str, Any]:
        return {
            "kind": "stream",
            "framed": True,  # frames raw or zstd (agent/datasets/framing.py)
            "manifest": plan.manifest.to_wire(),
            "start": start,
            "description": f"{self.request.source.display} (from the controller)",
        }

    def _remote_source(self) -> dict[str, Any]:
        req = self.request
        kind = "host" if req.source.kind == "host" else "url"
        key = "path" if kind == "host" else "url"
        return {"kind": kind, key: req.source.location, "layout": req.layout, "labels": req.labels}

    def _call(
        self,
        request: dict[str, Any] | LateRequest,
        payload: Iterator[bytes] | None,
        failure: StreamFailure | None,
        on_ready: Callable[[dict[str, Any]], None] | None = None,
    ) -> dict[str, Any]:
        req = self.request
        answered = False  # the agent said something: the stage began there

        def on_event(event: dict[str, Any]) -> None:
            nonlocal answered
            answered = True
            event = clean_event(event)
            if event.get("phase") == "ready":
                self.last_seen = time.monotonic()
                if isinstance(event.get("path"), str) and event["path"]:
                    self.path = event["path"]
                if on_ready is not None:
                    on_ready(event)
                return
            self._event(event)

        # Over SSH, silence longer than the stall timeout means the link is gone (the agent
        # speaks at least every second); locally there is no link to lose.
        idle = None if self.connection.host.local else req.stall_timeout + 15
        watchdog = None if self.connection.host.local else StallWatchdog(self, req.stall_timeout)
        try:
            result = self.agent.call(
                "stage", request, payload=payload, on_event=on_event, idle_timeout=idle
            )
        except (AgentError, UnreachableError) as exc:
            if failure is not None and failure.error is not None:
                if isinstance(failure.error, ConfigError):  # the source could not be listed
                    raise failure.error from None
                raise HostError(self.host, f"reading the source failed: {failure.error}") from None
            if isinstance(exc, UnreachableError) and not answered and not (
                watchdog is not None and watchdog.fired
            ):
                raise  # never got in (refused, no route, timeout): unreachable, nothing to resume
            cause: HostError = exc
            if watchdog is not None and watchdog.fired:
                cause = UnreachableError(self.host, watchdog.reason)
            err = HostError(self.host, self._explain(cause))
            err.kind = getattr(exc, "kind", None)  # type: ignore[attr-defined]
            raise err from None
        finally:
            if watchdog is not None:
                watchdog.stop()
            close = getattr(payload, "close", None)
            if close is not None:
                try:
                    close()  # stops a reader thread whose host went away
                except (ValueError, RuntimeError):
                    pass
        if isinstance(result.get("path"), str):
            self.path = result["path"]
        result["seconds"] = round(time.monotonic() - self.t0, 3)
        result["transport"] = self.transport()
        phase = "skipped" if result.get("skipped") else "done"
        self._event({"phase": phase, "count": result.get("count")})
        return result

    def _explain(self, exc: HostError) -> str:
        detail = exc.detail
        kind = getattr(exc, "kind", None)
        lost = (
            isinstance(exc, UnreachableError)
            or "gave no result" in detail
            or kind in ("stream_ended", "StreamEnded")
        )
        if lost:
            self._drop_connection()
            done = self.last_event.get("done")
            where = f" at sample {done:,} of {self.last_event.get('total', 0):,}" if done else ""
            return (
                f"the stage stopped{where}: {detail}. The host keeps the committed samples: rerun the "
                "same command to resume."
            )
        return detail

    def _drop_connection(self) -> None:
        # A stalled SSH transport may still look connected; the next command must reconnect.
        try:
            self.connection.close()
        except Exception:
            pass


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
