"""One host's stage: the agent call, its `ready`, the sample stream from where the host resumes,
progress and the result (HostStage); StageRequest, what every host of a stage is asked.
The flow over one or many hosts is provision/staging/stage.py's.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from provision.agent.datasets import DEFAULT_STALL
from provision.agent.datasets.sources import Plan
from provision.connection.base import Connection
from provision.errors import AgentError, ConfigError, HostError, UnreachableError
from provision.remote.agent import Agent, LateRequest
from provision.staging.compress import StreamStats, framed_stream
from provision.staging.payload import AfterReady
from provision.staging.progress import PHASES, UNSIZED_PHASES, clean_event
from provision.staging.source import (
    PlanFuture,
    SourceSpec,
    StreamFailure,
    as_views,
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
            if watchdog is not None and watchdog.fired:  # ends the call: its command is killed
                raise UnreachableError(self.host, watchdog.reason)
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
