"""Everything a host sends is bounded (issue 20, defect 8): the noise before the framing marker,
a line, a reply, an agent's JSON; and a stage whose host talks without progress is stopped.

Over SSH (both transports) against a real host: tests/fleet/test_hostile_host.py."""

from __future__ import annotations

import resource
import threading
import time

import pytest

from provision.connection.bounds import LINE_MAX, LineSplitter, Reply, Tail
from provision.connection.framing import PREAMBLE_MAX, Framer, new_marker
from provision.connection.local import LocalConnection
from provision.errors import BoundsError
from provision.remote.agent import parse_event
from provision.staging.stage import HostStage
from provision.staging.watchdog import StallWatchdog


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def test_an_endless_banner_is_cut_and_names_the_host_and_its_startup_files() -> None:
    marker = new_marker()
    framer = Framer(marker, with_pgid=True, host="gpu9", stream="stdout")
    banner = b"Welcome to rental-cloud! conda base activated. " * 1000  # ~47 KB a chunk
    fed = 0
    with pytest.raises(BoundsError) as err:
        for _ in range(10 * PREAMBLE_MAX // len(banner)):  # bounded: 10x the cap
            framer.feed(banner)
            fed += len(banner)
    assert PREAMBLE_MAX - len(banner) < fed <= PREAMBLE_MAX  # the feed that passed the cap raised
    message = str(err.value)
    assert message.startswith("gpu9: ") and "~/.bashrc" in message and "~/.profile" in message
    assert len(framer._buf) < len(marker) + 2  # only where a marker could still begin is kept


def test_a_default_framer_is_bounded_too() -> None:
    """The framer as main built it (no host given): noise without end still ends."""
    framer = Framer(new_marker(), with_pgid=False)
    chunk = b"x" * 65536
    with pytest.raises(BoundsError):
        for _ in range(4 * PREAMBLE_MAX // len(chunk)):
            framer.feed(chunk)


def test_a_marker_split_at_every_byte_still_frames() -> None:
    marker = new_marker()
    stream = b"noise " * 5000 + f"{marker} 77\n".encode() + b"command output\n"
    framer = Framer(marker, with_pgid=True, host="gpu9")
    got = b"".join(framer.feed(stream[i:i + 1]) for i in range(len(stream)))
    assert got == b"command output\n" and framer.pgid == 77
    assert framer.preamble.endswith(b"noise ") and len(framer.preamble) <= 4096


def test_a_pgid_field_without_its_newline_does_not_hold_the_output() -> None:
    marker = new_marker()
    framer = Framer(marker, with_pgid=True, host="gpu9")
    assert framer.feed(f"{marker} ".encode() + b"9" * 100) == b"9" * 100
    assert framer.pgid is None and framer.found


def test_line_splitter_refuses_a_line_past_its_limit_and_keeps_little() -> None:
    lines: list[bytes] = []
    split = LineSplitter("gpu9", lines.append, limit=1000)
    split.feed(b"a\nbb\n" + b"c" * 10)
    split.feed(b"c\n")
    assert lines == [b"a", b"bb", b"c" * 11]
    with pytest.raises(BoundsError, match="gpu9: a line"):
        for _ in range(100):
            split.feed(b"d" * 100)


def test_reply_and_stderr_caps() -> None:
    reply = Reply("gpu9", limit=10)
    reply.add(b"0123456789")
    with pytest.raises(BoundsError, match="gpu9: the command's output passed"):
        reply.add(b"x")
    tail = Tail(limit=4)
    tail.add(b"abcdef")
    assert tail.value() == b"[provision: 2 earlier bytes of stderr dropped]\ncdef"


def test_a_local_line_without_end_is_refused_with_bounded_memory() -> None:
    before = _rss_mb()
    size = LINE_MAX + (8 << 20)
    result = None
    with pytest.raises(BoundsError, match="localhost: a line"):
        result = LocalConnection().stream(f"head -c {size} /dev/zero", on_stdout_line=lambda line: None,
                                          timeout=300)
    assert result is None
    assert _rss_mb() - before < 3 * (LINE_MAX >> 20) + 200  # generous: the cap, not the stream


@pytest.mark.parametrize("line", [
    "{" * 100000, "[" * 100000, '{"event": ' + "[" * 50000, '{"event": "result", "data": 1e999999}',
    "{\"a\": \"\\ud800\"}", "{}" + "x" * 10, '{"event": "result"}', "not json", "", "{\x00}",
])
def test_agent_event_lines_give_an_event_or_none(line: str) -> None:
    event = parse_event(line)
    assert event is None or isinstance(event, dict)


class _Conn:
    def __init__(self) -> None:
        self.aborted = threading.Event()
        self.host = type("H", (), {"name": "gpu9", "local": False})()

    def abort(self) -> None:
        self.aborted.set()


def test_a_stage_whose_host_talks_without_progress_is_stopped() -> None:
    conn = _Conn()
    stage = HostStage.__new__(HostStage)  # only what the watchdog and the event path use
    stage.host, stage.connection, stage.on_event = "gpu9", conn, lambda event: None
    stage.last_event, stage._best = {}, {}
    stage.last_seen = stage.last_progress = time.monotonic()
    dog = StallWatchdog(stage, stall=5.0, progress_stall=1.0)
    try:
        stage._event({"phase": "stage", "done": 10, "total": 100})
        for _ in range(400):  # bounded: ~20 s of the host repeating itself
            if conn.aborted.wait(0.05):
                break
            stage._event({"phase": "heartbeat"})
            stage._event({"phase": "stage", "done": 10, "total": 100})  # the same count again
            stage._event({"phase": "stage", "done": "11", "total": 100})  # not a number: not progress
        assert conn.aborted.is_set() and dog.fired
        assert "no progress" in dog.reason
    finally:
        dog.stop()


def test_a_stage_that_advances_is_left_alone() -> None:
    conn = _Conn()
    stage = HostStage.__new__(HostStage)
    stage.host, stage.connection, stage.on_event = "gpu9", conn, lambda event: None
    stage.last_event, stage._best = {}, {}
    dog = StallWatchdog(stage, stall=5.0, progress_stall=1.0)
    try:
        started = time.monotonic()
        done = 0
        while time.monotonic() - started < 2.5:  # bounded: past the progress stall twice
            done += 1
            stage._event({"phase": "stage", "done": done, "total": 10**9})
            assert not conn.aborted.wait(0.05)
        assert not dog.fired
    finally:
        dog.stop()


class _CountingConn(_Conn):
    def __init__(self) -> None:
        super().__init__()
        self.cuts = 0

    def abort(self) -> None:  # a cut that woke nothing: the host talks on
        self.cuts += 1
        super().abort()


def test_a_fired_watchdog_cuts_again_until_stopped_and_keeps_its_first_reason() -> None:
    conn = _CountingConn()
    stage = HostStage.__new__(HostStage)
    stage.host, stage.connection, stage.on_event = "gpu9", conn, lambda event: None
    stage.last_event, stage._best = {}, {}
    dog = StallWatchdog(stage, stall=0.5, progress_stall=0.5)
    try:
        assert conn.aborted.wait(5)
        reason = dog.reason
        for _ in range(100):  # bounded: ~5 s
            if conn.cuts >= 3:
                break
            time.sleep(0.05)
        assert conn.cuts >= 3, "a first cut that woke nothing was the last"
        assert dog.reason == reason
    finally:
        dog.stop()
    cuts = conn.cuts
    time.sleep(0.6)
    assert conn.cuts <= cuts + 1  # stopped means stopped
