"""Bounded waits without SSH (issue 10.4/10.5): LocalConnection's deadlines and process groups,
the output framer, the keepalive watchdog's verdicts, and Ctrl-C in the fan-out.

What crosses SSH is tested against real sshd hosts in tests/fleet/test_faults.py,
test_framing.py and test_interrupt.py.
"""

from __future__ import annotations

import os
import secrets
import signal
import threading
import time
from pathlib import Path

import pytest

from provision.connection.base import register
from provision.connection.framing import Framer, new_marker, stop_group, wrap
from provision.connection.keepalive import Watchdog
from provision.connection.local import LocalConnection
from provision.errors import Cancelled
from provision.inventory.model import Host
from provision.parallel import Interrupted, for_each_host


def group_alive(tag: str) -> list[int]:
    """Processes of this machine whose command line holds `tag`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            args = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if tag in args and args.startswith("sleep"):
            found.append(int(entry.name))
    return found


# -- LocalConnection ---------------------------------------------------------------------------
def test_a_silent_local_command_times_out_and_its_whole_group_is_ended() -> None:
    tag = f"{secrets.randbelow(10**6)}"
    conn = LocalConnection()
    result = conn.run(f"sleep 50.{tag} & sleep 51.{tag}; echo never", timeout=0.5)
    assert result.exit_code == 124 and "timed out after 0.5s" in result.stderr
    deadline = time.monotonic() + 5
    while group_alive(tag) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert group_alive(tag) == []  # the background child went with it


def test_local_idle_timeout_counts_silence_not_total_time() -> None:
    conn = LocalConnection()
    lines: list[str] = []
    ok = conn.stream("for i in 1 2 3 4; do echo $i; sleep 0.2; done", on_stdout_line=lines.append,
                     idle_timeout=1.0)
    assert ok.ok and lines == ["1", "2", "3", "4"]
    silent = conn.stream("echo start; sleep 30", on_stdout_line=lines.append, idle_timeout=0.5)
    assert silent.exit_code == 124 and "no output for 0.5s" in silent.stderr


def test_local_stderr_is_read_to_the_end_after_a_quiet_spell() -> None:
    result = LocalConnection().run("echo a >&2; sleep 0.6; echo b >&2; echo out")
    assert (result.stdout, result.stderr) == ("out\n", "a\nb\n")


def test_interrupting_a_local_connection_stops_its_command_from_another_thread() -> None:
    conn = LocalConnection()
    tag = f"{secrets.randbelow(10**6)}"
    threading.Timer(0.3, conn.interrupt).start()
    with pytest.raises(Cancelled, match="localhost: interrupted during"):
        conn.run(f"sleep 40.{tag}")
    assert group_alive(tag) == []


# -- framing -------------------------------------------------------------------------------------
def test_framer_drops_the_banner_even_when_it_arrives_in_pieces() -> None:
    marker = new_marker()
    stream = f"Welcome!\nconda note no newline{marker} 4242\n".encode() + b"\x00\xffbinary\n"
    framer = Framer(marker, with_pgid=True)
    got = b"".join(framer.feed(stream[i:i + 3]) for i in range(0, len(stream), 3))
    assert got == b"\x00\xffbinary\n" and framer.pgid == 4242
    assert framer.preamble == b"Welcome!\nconda note no newline"


def test_framer_without_a_marker_keeps_what_the_shell_said() -> None:
    framer = Framer(new_marker(), with_pgid=False)
    assert framer.feed(b"bash: /root/.bashrc: line 3: syntax error\n") == b""
    assert framer.finish() == b"bash: /root/.bashrc: line 3: syntax error\n"


def test_wrapped_command_runs_in_its_own_group_with_its_exit_code(tmp_path: Path) -> None:
    """The wrapper text itself, run by a local sh as sshd's login shell would run it."""
    import subprocess

    marker = new_marker()
    proc = subprocess.run(["/bin/sh", "-c", str(wrap("echo out; echo err >&2; exit 7", marker))],
                          capture_output=True, start_new_session=True)
    out, err = Framer(marker, with_pgid=True), Framer(marker, with_pgid=False)
    assert (proc.returncode, out.feed(proc.stdout), err.feed(proc.stderr)) == (7, b"out\n", b"err\n")
    assert out.pgid is not None and out.pgid > 1
    assert "kill -TERM -123" in stop_group(123)


# -- keepalive watchdog ----------------------------------------------------------------------------
class FakeTransport:
    """What the watchdog uses of a paramiko Transport; `answers` decides if the peer replies."""

    def __init__(self, answers: bool) -> None:
        self.answers = answers
        self.active = True
        self.closed = threading.Event()
        self.packetizer = type("P", (), {"_Packetizer__received_packets": 0})()

    def is_active(self) -> bool:
        return self.active

    def global_request(self, kind: str, wait: bool = True):
        assert kind == "keepalive@openssh.com" and wait  # a reply is asked for
        if self.answers:
            return None
        self.closed.wait(30)  # a dead peer: no reply until the transport is closed
        return None

    def close(self) -> None:
        self.active = False
        self.closed.set()


def test_watchdog_closes_a_transport_whose_peer_stops_answering() -> None:
    dead = FakeTransport(answers=False)
    dog = Watchdog(dead, "gpu9", interval=0.05, count=3).start()
    assert dead.closed.wait(5)
    assert dog.reason and dog.reason.startswith("no reply for ") and dog.reason.endswith("(link down?)")


def test_watchdog_leaves_an_answering_transport_alone() -> None:
    alive = FakeTransport(answers=True)
    dog = Watchdog(alive, "gpu9", interval=0.05, count=2).start()
    time.sleep(0.6)
    dog.stop()
    assert not alive.closed.is_set() and dog.reason is None


def test_watchdog_counts_traffic_as_life_when_the_reply_is_late() -> None:
    """A saturated upload delays the keepalive behind our own data; packets still arrive."""
    busy = FakeTransport(answers=False)
    dog = Watchdog(busy, "gpu9", interval=0.05, count=2).start()
    stop = time.monotonic() + 0.6
    while time.monotonic() < stop:
        busy.packetizer._Packetizer__received_packets += 1
        time.sleep(0.01)
    assert not busy.closed.is_set()
    assert busy.closed.wait(5)  # traffic stops: now it is dead
    dog.stop()


# -- Ctrl-C in the fan-out -----------------------------------------------------------------------------
class _Stuck(LocalConnection):
    pass


def test_ctrl_c_in_the_fan_out_stops_hosts_and_says_what_finished() -> None:
    stuck = _Stuck(Host(name="hung", local=True))
    register(stuck)

    def work(host: Host) -> str:
        if host.name == "hung":
            stuck.run("sleep 30")  # interrupt_all() ends it (Cancelled)
        return host.name

    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    started = time.monotonic()
    with pytest.raises(Interrupted) as caught:
        for_each_host([Host(name="quick", local=True), Host(name="hung", local=True)], work, forks=2)
    assert time.monotonic() - started < 10  # a hang guard; measured figures: benchmarks/
    outcomes = caught.value.outcomes
    assert outcomes["quick"].ok and outcomes["quick"].value == "quick"
    assert isinstance(outcomes["hung"].error, Cancelled)
