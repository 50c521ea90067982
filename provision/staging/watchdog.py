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


class StallWatchdog:
    """Aborts the SSH transport when the agent has been silent for `stall` seconds.

    The agent speaks at least every second (progress or heartbeat), so silence means the link is
    gone. A dead link otherwise blocks the sending thread inside the socket for as long as TCP
    retransmits (many minutes), and closing the channel waits for it; shutting the socket down
    wakes both.
    """

    def __init__(self, stage: Any, stall: float) -> None:  # a HostStage: last_seen, connection, host
        self.stage = stage
        self.stall = stall
        self.fired = False
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"watchdog-{stage.host}", daemon=True
        )
        self.stage.last_seen = time.monotonic()
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.25):
            if time.monotonic() - self.stage.last_seen > self.stall:
                self.fired = True
                abort_transport(self.stage.connection)
                return

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
