"""Controller side of a stage: where the source is, its manifest, and the ONE sample stream.

A folder or archive on this machine is listed once (provision.agent.datasets.sources, the same
code the host uses for its own paths, so both sides agree on order and labels), then streamed
over the host's SSH connection as the samples' bytes back to back in manifest order: one stream
for all files, never a round trip per file, and no per-file headers (names and sizes travel in
the manifest, so a tar's 512-byte header and padding per file -- ~7% of a folder of JPEGs --
are neither built, sent nor parsed). A resumed stage streams only the samples from the host's
committed count. Several hosts at the same resume point share one read of the source
(`Broadcast`).
"""

from __future__ import annotations

import os
import queue
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from provision.agent.datasets import layouts
from provision.agent.datasets.sources import Plan, open_source
from provision.errors import ConfigError

CHUNK = 1 << 20
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,127}$")
_ARCHIVE_SUFFIXES = (".tar.gz", ".tar.bz2", ".tar.xz", ".tgz", ".tbz2", ".txz", ".tar", ".zip")


@dataclass
class SourceSpec:
    """Where a dataset comes from: `local` (this machine), `host` (a path on each host), `url`."""

    kind: str
    location: str

    @property
    def display(self) -> str:
        return self.location if self.kind != "host" else f"host:{self.location}"


def parse_source(src: str) -> SourceSpec:
    """`http(s)://...` -> url; `host:PATH` -> a path on the host; an existing path here -> local;
    any other absolute path -> a path on the host (checked there)."""
    if src.startswith(("http://", "https://")):
        return SourceSpec("url", src)
    if src.startswith(("host:", "remote:")):
        path = src.split(":", 1)[1]
        if not path.startswith(("/", "~")):
            raise ConfigError(f"{src}: a host path must be absolute (host:/root/autodl-fs/data)")
        return SourceSpec("host", path)
    if "://" in src.split("/", 1)[0] + "/" and not os.path.exists(src):
        raise ConfigError(f"{src}: only http:// and https:// URLs can be staged")
    if os.path.exists(src):
        return SourceSpec("local", os.path.abspath(src))
    if src.startswith(("/", "~")):
        return SourceSpec("host", src)
    raise ConfigError(
        f"{src}: no such file or folder here. For a path on the host write host:/ABSOLUTE/PATH; "
        "for a download, an http(s):// URL."
    )


def default_name(spec: SourceSpec) -> str:
    """flowers.tar.gz -> flowers; /data/imagenet/train/ -> train; a URL's last path part."""
    base = spec.location.rstrip("/")
    if spec.kind == "url":
        base = base.split("?", 1)[0].split("#", 1)[0]
    base = base.rsplit("/", 1)[-1]
    lower = base.lower()
    for suffix in _ARCHIVE_SUFFIXES:
        if lower.endswith(suffix):
            base = base[: -len(suffix)]
            break
    name = re.sub(r"[^A-Za-z0-9._+-]+", "-", base).strip("-.")
    return name or "dataset"


def check_name(name: str) -> str:
    if not _NAME.match(name) or name in (".", ".."):
        raise ConfigError(
            f"--name {name!r}: use letters, digits and . _ + - (it becomes the file NAME.lmdb)"
        )
    return name


def plan_local(path: str, layout: str = "auto", labels: str | None = None) -> Plan:
    """List a local folder/archive into a Plan; bad input becomes a ConfigError naming it."""
    if layout not in layouts.LAYOUTS:
        raise ConfigError(f"--layout {layout!r}: one of {', '.join(layouts.LAYOUTS)}")
    try:
        plan = open_source(path, layout, labels)
    except ValueError as exc:  # SourceError, LayoutError, UnsafePathError
        raise ConfigError(str(exc)) from None
    if not len(plan.manifest):
        raise ConfigError(f"{path}: no files to stage (layout {plan.manifest.layout})")
    return plan


# -- the sample stream ------------------------------------------------------------------------


class StreamFailure:
    """Holds an error raised while reading the source, so the caller can report it instead of
    the host's "stream ended early" (the feeder thread that runs the generator can't raise)."""

    def __init__(self) -> None:
        self.error: BaseException | None = None


def sample_stream(
    plan: Plan,
    start: int = 0,
    failure: StreamFailure | None = None,
    on_sample: Callable[[int, int], None] | None = None,
) -> Iterator[bytes]:
    """Samples start.. of the plan, their bytes back to back, in ~1 MiB chunks.

    The host cuts the stream by the manifest's sizes, so a file whose size changed since the
    listing must never be sent: the sources' readers refuse it (SourceError naming the file);
    the samples read before it are sent, for the host to commit."""
    parts: list[bytes] = []
    size = 0
    try:
        for i, _relpath, data in plan.iter_samples(start):
            parts.append(data)
            size += len(data)
            if on_sample is not None:
                on_sample(i, len(data))
            if size >= CHUNK:
                yield b"".join(parts) if len(parts) > 1 else parts[0]
                parts, size = [], 0
        if parts:
            yield b"".join(parts)
    except Exception as exc:
        if failure is None:
            raise
        failure.error = exc  # end the stream short: the host commits what it has
        if parts:
            yield b"".join(parts)


class Broadcast:
    """One read of the source feeding several host streams.

    A producer thread pulls chunks from the source; each consumer gets its own bounded queue, so
    the fastest host runs at most `depth` chunks ahead of the slowest. A consumer that stops (its
    host failed) is dropped and no longer holds the others back.
    """

    _END = object()

    def __init__(self, source: Iterator[bytes], consumers: int, depth: int = 32) -> None:
        self.source = source
        self.queues = [queue.Queue(maxsize=depth) for _ in range(consumers)]
        self.alive = [True] * consumers
        self.error: BaseException | None = None
        self._started = False
        self._lock = threading.Lock()

    def _start(self) -> None:
        with self._lock:
            if not self._started:
                self._started = True
                threading.Thread(target=self._produce, name="broadcast", daemon=True).start()

    def _produce(self) -> None:
        try:
            for chunk in self.source:
                if not self._deliver(chunk):
                    return  # every consumer is gone
        except BaseException as exc:
            self.error = exc
        self._deliver(self._END)

    def _deliver(self, item: object) -> bool:
        delivered = False
        for k, q in enumerate(self.queues):
            while self.alive[k]:
                try:
                    q.put(item, timeout=0.5)
                    delivered = True
                    break
                except queue.Full:
                    continue
        return delivered

    def consumer(self, k: int) -> Iterator[bytes]:
        self._start()
        q = self.queues[k]
        try:
            while True:
                item = q.get()
                if item is self._END:
                    return
                yield item  # type: ignore[misc]
        finally:
            self.alive[k] = False
            while not q.empty():  # unblock the producer if it waits on this queue
                try:
                    q.get_nowait()
                except queue.Empty:
                    break


def as_views(stream: Iterator[bytes]) -> Iterator[memoryview]:
    """The chunks as memoryviews: paramiko's sendall re-slices what is left of a chunk after
    every 32 KiB packet, which for a 1 MiB bytes chunk copies ~16 MiB; a view slices for free."""
    try:
        for chunk in stream:
            yield memoryview(chunk)
    finally:
        close = getattr(stream, "close", None)
        if close is not None:
            close()  # a prefetch consumer: stops holding its reader thread back


def prefetch(stream: Iterator[bytes], depth: int = 32) -> Iterator[bytes]:
    """Read `stream` ahead in a thread (at most `depth` chunks), so reading the source overlaps
    with sending it."""
    return Broadcast(stream, 1, depth).consumer(0)


class PlanFuture:
    """List a local source in a thread, so the listing overlaps with connecting to the hosts and
    asking them what they already have."""

    def __init__(
        self, make: Callable[[], Plan], on_ready: Callable[[Plan], None] | None = None
    ) -> None:
        self._plan: Plan | None = None
        self._error: BaseException | None = None
        self._on_ready = on_ready
        self._thread = threading.Thread(
            target=self._run, args=(make,), name="list-source", daemon=True
        )
        self._thread.start()

    def _run(self, make: Callable[[], Plan]) -> None:
        try:
            self._plan = make()
            if self._on_ready is not None:
                self._on_ready(self._plan)
        except BaseException as exc:  # re-raised by result() in the caller's thread
            self._error = exc

    def done(self, wait: float = 0.0) -> bool:
        """Whether the listing has finished (waiting up to `wait` seconds for it)."""
        self._thread.join(wait)
        return not self._thread.is_alive()

    def result(self) -> Plan:
        self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._plan is not None
        return self._plan
