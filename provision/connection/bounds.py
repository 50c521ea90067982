"""How much of what a host sends the controller keeps (issue 20): everything is bounded.

A host is untrusted: a command's reply, one line of it, and its stderr each have a cap, past
which the command is stopped with BoundsError naming the host (stdout, lines) or the oldest
bytes are dropped (stderr: the reason for a failure is at its end). What precedes the framing
marker has its own cap (provision/connection/framing.py). The caps are far above any reply
provision asks for (the largest are `fetch`'s base64 and an agent's facts document) and far
below what would hurt the controller.
"""

from __future__ import annotations

from collections.abc import Callable

from provision.errors import BoundsError

REPLY_MAX = 512 << 20  # one command's stdout held in memory (fetch of a ~380 MB file in base64)
LINE_MAX = 64 << 20  # one line of a streamed reply: an agent's JSON event, a log line
STDERR_KEEP = 4 << 20  # the end of a command's stderr


def reply_too_long(host: str, limit: int = REPLY_MAX) -> BoundsError:
    return BoundsError(host, f"the command's output passed {limit >> 20} MiB, the most the controller "
                       "keeps of one reply: it was stopped (a host printing without end?)")


class Reply:
    """A command's stdout, refused past REPLY_MAX bytes."""

    def __init__(self, host: str, limit: int = REPLY_MAX) -> None:
        self.host = host
        self.limit = limit
        self.data = bytearray()

    def add(self, data: bytes) -> None:
        if len(self.data) + len(data) > self.limit:
            raise reply_too_long(self.host, self.limit)
        self.data += data


def joined_lines(data: bytearray) -> str:
    """A streamed reply's text: its lines joined by newlines, without a final one. Decoded
    straight from the buffer, which is then emptied, so the reply is not held twice."""
    end = len(data) - 1 if data.endswith(b"\n") else len(data)
    with memoryview(data) as view:
        text = str(view[:end], "utf-8", "replace")
    data.clear()
    return text


class Tail:
    """A command's stderr: its last STDERR_KEEP bytes, with a note of what was dropped."""

    def __init__(self, limit: int = STDERR_KEEP) -> None:
        self.limit = limit
        self.data = bytearray()
        self.dropped = 0

    def add(self, data: bytes) -> None:
        self.data += data
        over = len(self.data) - self.limit
        if over > 0:
            del self.data[:over]
            self.dropped += over

    def value(self) -> bytes:
        if not self.dropped:
            return bytes(self.data)
        return b"[provision: %d earlier bytes of stderr dropped]\n" % self.dropped + bytes(self.data)


class LineSplitter:
    """Bytes in, complete lines out (without their newline); each byte is scanned once, and a
    line longer than LINE_MAX raises BoundsError naming the host."""

    def __init__(self, host: str, on_line: Callable[[bytes], None], limit: int = LINE_MAX) -> None:
        self.host = host
        self.on_line = on_line
        self.limit = limit
        self._pending = bytearray()

    def feed(self, data: bytes) -> None:
        start = 0
        while True:
            end = data.find(b"\n", start)
            if end < 0:
                break
            if self._pending:
                self._check(len(self._pending) + end - start)
                self._pending += data[start:end]
                line = bytes(self._pending)
                self._pending.clear()
            else:
                self._check(end - start)
                line = data[start:end]
            self.on_line(line)
            start = end + 1
        if start < len(data):
            self._check(len(self._pending) + len(data) - start)
            self._pending += data[start:]

    def finish(self) -> None:
        if self._pending:
            line = bytes(self._pending)
            self._pending.clear()
            self.on_line(line)

    def _check(self, size: int) -> None:
        if size > self.limit:
            self._pending.clear()
            raise BoundsError(self.host, f"a line of the command's output passed {self.limit >> 20} MiB, the "
                              "longest the controller takes: it was stopped (a host printing without a newline?)")
