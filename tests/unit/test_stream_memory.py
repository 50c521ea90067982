"""A streamed reply costs the controller about its bytes, not a Python object per line (issue 29,
defect 6): a 36 MB reply of short lines took 949 MB as one str per line. Measured with
tracemalloc (what Python allocated at the peak of the call) as a ratio to the reply's bytes.

Over both SSH transports against a real host: tests/fleet/test_hostile_replies.py."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable, Iterator

import pytest

from provision.connection.commands import FramedCommands, Run
from provision.connection.local import LocalConnection
from provision.inventory.model import Host

LINE = b"xy\n"  # two characters: not one of CPython's cached one-character strings
REPLY = LINE * 1_000_000  # 3 MB of short lines
RATIO_MAX = 4.0  # the bytes once, the decoded text once, and the chunks in flight


def peak_ratio(call: Callable[[], object], size: int) -> float:
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        result = call()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    del result
    return (peak - base) / size


class _Framed(FramedCommands):
    """A framed transport whose host sends REPLY in 256 KiB pieces (the SSH transports' reads)."""

    host = Host("gpu9")

    def _execute(self, command: str, *, source: object = None, on_data: Callable[[bytes], None] | None = None,
                 timeout: float | None = None, idle_timeout: float | None = None, stoppable: bool = True) -> Run:
        view = memoryview(REPLY)
        for start in range(0, len(REPLY), 1 << 18):
            on_data(bytes(view[start:start + (1 << 18)]))  # type: ignore[misc]
        return Run(0, b"", b"", 0.0)


@pytest.fixture
def counted() -> Iterator[list[int]]:
    yield [0]


def test_a_framed_stream_of_short_lines_costs_a_small_multiple_of_its_bytes(counted: list[int]) -> None:
    def on_line(line: str) -> None:
        counted[0] += 1

    result = _Framed().stream("reply", on_stdout_line=on_line)
    assert counted[0] == 1_000_000 and result.stdout == (LINE * 1_000_000).decode()[:-1]
    counted[0] = 0
    ratio = peak_ratio(lambda: _Framed().stream("reply", on_stdout_line=on_line), len(REPLY))
    assert counted[0] == 1_000_000
    assert ratio < RATIO_MAX, f"the controller kept {ratio:.1f}x the reply's bytes"


def test_a_local_stream_of_short_lines_costs_a_small_multiple_of_its_bytes(counted: list[int]) -> None:
    conn = LocalConnection(Host("localhost", local=True))
    command = f"yes xy | head -c {len(REPLY)}"

    def on_line(line: str) -> None:
        counted[0] += 1

    ratio = peak_ratio(lambda: conn.stream(command, on_stdout_line=on_line, timeout=120), len(REPLY))
    assert counted[0] == 1_000_000
    assert ratio < RATIO_MAX, f"the controller kept {ratio:.1f}x the reply's bytes"


@pytest.mark.parametrize("text", [b"", b"a", b"a\n", b"a\n\nb", b"a\r\nb\n", b"\xff\xfe\n\xe4\xb8\xad\n"])
def test_the_streamed_text_is_the_lines_joined(text: bytes) -> None:
    """The text a streamed call returns: its lines joined by newlines, without a final one (as
    before the buffer changed), on both kinds of transport."""
    lines = text.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    expected = "\n".join(line.decode("utf-8", "replace") for line in lines)

    class One(_Framed):
        def _execute(self, command: str, **kw: object) -> Run:  # type: ignore[override]
            for i in range(len(text)):  # a byte at a time: lines cut everywhere
                kw["on_data"](text[i:i + 1])  # type: ignore[operator]
            return Run(0, b"", b"", 0.0)

    got: list[str] = []
    assert One().stream("x", on_stdout_line=got.append).stdout == expected
    assert got == [line.decode("utf-8", "replace") for line in lines]
    conn = LocalConnection(Host("localhost", local=True))
    local: list[str] = []
    octal = "".join(f"\\{b:03o}" for b in text)
    assert conn.stream(f"printf '{octal}'", on_stdout_line=local.append, timeout=60).stdout == expected
    assert local == got
