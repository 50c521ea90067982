"""The stall watchdog of a stage: a silent agent means a dead link, so the transport is cut.

A dead link otherwise blocks the sending thread inside the socket (or the ssh process's pipe)
for as long as TCP retransmits; cutting the transport wakes every thread blocked on it.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

from provision.connection.base import Connection

# A host that keeps talking (heartbeats, logs, the same progress again) but gets nowhere is
# stopped too, after this many stall timeouts (30 min at the default 120 s): long enough for a
# listing of a slow network disk or the fsync of a big file, which only send heartbeats.
PROGRESS_STALL_FACTOR = 15


class StallWatchdog:
    """Aborts the SSH transport when the agent has been silent for `stall` seconds, or has made
    no progress for `progress_stall` seconds (default PROGRESS_STALL_FACTOR x `stall`).

    The agent speaks at least every second (progress or heartbeat), so silence means the link is
    gone. A dead link otherwise blocks the sending thread inside the socket for as long as TCP
    retransmits (many minutes), and closing the channel waits for it; shutting the socket down
    wakes both. Talk is not progress (issue 20): a host whose events never advance the stage
    (HostStage.last_progress) would otherwise hold it forever, as `stage` has no deadline.
    """

    def __init__(self, stage: Any, stall: float, progress_stall: float | None = None) -> None:
        # a HostStage: last_seen, last_progress, connection, host
        self.stage = stage
        self.stall = stall
        self.progress_stall = progress_stall if progress_stall is not None else stall * PROGRESS_STALL_FACTOR
        self.fired = False
        self.reason = ""
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"watchdog-{stage.host}", daemon=True
        )
        now = time.monotonic()
        self.stage.last_seen = now
        self.stage.last_progress = now
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.25):
            if not self.fired:
                now = time.monotonic()
                if now - self.stage.last_seen > self.stall:
                    self.reason = f"no sign of life from the host for {self.stall:g}s"
                elif now - self.stage.last_progress > self.progress_stall:
                    self.reason = (f"the host kept talking but made no progress for {self.progress_stall:g}s "
                                   "(its events never advanced the stage)")
                else:
                    continue
                self.fired = True
            # and again each tick until stopped: a cut that lands between two ssh processes
            # wakes nothing, and a host that keeps talking would hold the stage for ever
            # (HostStage's event handler also refuses every event once fired)
            abort_transport(self.stage.connection)

    def stop(self) -> None:
        self._stop.set()


def abort_transport(connection: Connection) -> None:
    """Shut down an SSH connection's socket so every thread blocked on it wakes up."""
    connection = getattr(connection, "_fallback", None) or connection  # OpenSSH fell back
    abort = getattr(connection, "abort", None)
    if abort is not None:  # OpenSSHConnection: ends its master and its ssh processes
        abort()
        return
    fabric = getattr(connection, "_fabric", None)
    transport = getattr(fabric, "transport", None) if fabric is not None else None
    sock = getattr(transport, "sock", None)
    if sock is None:
        return
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
