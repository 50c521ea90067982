"""Dead-peer detection: keepalives that expect a reply.

paramiko's `Transport.set_keepalive` sends `keepalive@openssh.com` with want_reply=False: the
server never answers, so a link that died looks alive until TCP gives up (many minutes). Here a
small watchdog thread sends the same request WITH want_reply (sshd answers every global request,
with failure for unknown ones, which is proof enough of life) every `interval` seconds; after
`count` intervals without a reply the transport is closed, which ends every blocked read on it,
and `reason` says why. Any packet from the host also counts as a sign of life: on a slow link
saturated by an upload, the keepalive waits behind our own data for seconds, while the host's
window adjustments keep arriving.
"""

from __future__ import annotations

import logging
import threading
import time

import paramiko

log = logging.getLogger("provision.ssh")


class Watchdog:
    def __init__(self, transport: paramiko.Transport, name: str, interval: float, count: int) -> None:
        self.transport = transport
        self.name = name
        self.interval = max(0.05, float(interval))
        self.count = max(1, int(count))
        self.reason: str | None = None  # set when the watchdog closed the transport
        self.last_reply = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True, name=f"keepalive-{name}")

    def start(self) -> Watchdog:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def silent_for(self) -> float:
        return time.monotonic() - self.last_reply

    def _ask(self, answered: threading.Event) -> None:
        # global_request(wait=True) blocks until the reply or until the transport closes; it runs
        # in its own thread so the watchdog itself never blocks on a dead link
        try:
            self.transport.global_request("keepalive@openssh.com", wait=True)
        except Exception:  # the transport went away; the watchdog sees that itself
            return
        if self.transport.is_active():
            answered.set()

    def _received(self) -> int:
        # paramiko counts packets read (reset at rekey: any change is traffic); private, so
        # without it only the replies count
        return int(getattr(self.transport.packetizer, "_Packetizer__received_packets", 0) or 0)

    def _watch(self) -> None:
        answered: threading.Event | None = None
        missed = 0
        seen = self._received()
        while not self._stop.wait(self.interval):
            if not self.transport.is_active():
                return
            now_seen = self._received()
            if now_seen != seen:
                seen = now_seen
                self.last_reply = time.monotonic()
                missed = 0
            if answered is None or answered.is_set():
                if answered is not None:
                    self.last_reply = time.monotonic()
                missed = 0
                answered = threading.Event()
                threading.Thread(target=self._ask, args=(answered,), daemon=True).start()
                continue
            if self.last_reply > time.monotonic() - self.interval:
                continue  # traffic this interval: alive, the reply is just late
            missed += 1
            if missed >= self.count:
                waited = self.silent_for()
                self.reason = f"no reply for {waited:.0f}s (link down?)" if waited >= 10 else f"no reply for {waited:.1f}s (link down?)"
                log.warning("%s: %s; closing the connection", self.name, self.reason)
                try:
                    self.transport.close()
                except Exception:  # pragma: no cover - closing a broken socket
                    pass
                return
