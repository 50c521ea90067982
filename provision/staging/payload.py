"""The payload of a one-call stage: the sample stream, started when the agent says `ready`."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any


class AfterReady:
    """The stream payload of a one-call stage: it starts once the agent said `ready` (where to
    resume from, which codecs), and it can be iterated again. Agent.call repeats a call whose
    host turned out to lack the agent (sending the agent with it); each iteration is one
    attempt, and a new attempt ends the one before, whose feeder may still wait for a `ready`
    that never comes. So the stage needs no separate round trip to make sure the agent is there.

    A call gets at most one `ready`, and only the attempt that reached the agent gets one; it
    may arrive before that attempt's feeder asked for the payload, so it is kept. Should it
    reach the abandoned attempt first (its feeder not yet replaced), that feeder's channel is
    closed: it fails on its first chunk, and the new attempt still finds the `ready`.
    """

    def __init__(self, stream: Callable[[dict[str, Any]], Iterator[bytes]]) -> None:
        self.stream = stream
        self.said: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._current: threading.Event | None = None
        self._seen = False  # a `ready` came
        self._closed = False
        self._active: Iterator[bytes] | None = None

    def ready(self, event: dict[str, Any]) -> None:
        with self._lock:
            self.said = dict(event)
            self._seen = True
            if self._current is not None:
                self._current.set()

    def __iter__(self) -> Iterator[bytes]:
        mine = threading.Event()
        with self._lock:
            stale, self._current = self._current, mine
            if self._seen or self._closed:
                mine.set()
        if stale is not None:
            stale.set()  # that attempt is over: its generator sees it is not current and ends
        return self._attempt(mine)

    def _attempt(self, mine: threading.Event) -> Iterator[bytes]:
        mine.wait()
        with self._lock:
            if self._closed or mine is not self._current:
                return
            said = self.said
        if said.get("skip") or said.get("abort"):
            return
        self._active = self.stream(said)
        yield from self._active

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._current is not None:
                self._current.set()
        close = getattr(self._active, "close", None)
        if close is not None:
            close()
