"""The agent's bounded TCP probes (provision/agent/net_probe.py), on this machine's loopback."""

from __future__ import annotations

import os
import socket
import threading

from provision.agent import net_probe


class Ctx:
    def __init__(self, stdin=None) -> None:
        self.events: list[dict] = []
        self.ready = threading.Event()
        self.stdin = stdin

    def progress(self, **fields) -> None:
        self.events.append(fields)
        self.ready.set()


def _listen(request: dict, ctx: Ctx) -> tuple[threading.Thread, dict]:
    box: dict = {}
    thread = threading.Thread(target=lambda: box.update(net_probe.listen(request, ctx)), daemon=True)
    thread.start()
    assert ctx.ready.wait(10)
    return thread, box


def test_listener_answers_the_token_and_ends_when_all_peers_came() -> None:
    ctx = Ctx()
    thread, box = _listen({"hold_s": 30, "expect": 2, "token": "t0k"}, ctx)
    port = ctx.events[0]["port"]
    reply = net_probe.connect({"targets": [{"addr": "127.0.0.1", "port": port}] * 2, "token": "t0k", "timeout_s": 2}, None)
    assert [r["ok"] for r in reply["results"]] == [True, True]
    assert reply["results"][0]["source"] == "127.0.0.1" and reply["results"][0]["ms"] >= 0
    thread.join(10)
    assert box["ended"] == "all peers came" and box["accepted"] == ["127.0.0.1", "127.0.0.1"]


def test_a_different_token_or_nothing_listening_is_an_error() -> None:
    ctx = Ctx()
    thread, box = _listen({"hold_s": 30, "expect": 1, "token": "right"}, ctx)
    port = ctx.events[0]["port"]
    [wrong] = net_probe.connect({"targets": [{"addr": "127.0.0.1", "port": port}], "token": "other"}, None)["results"]
    assert not wrong["ok"] and "something else answers" in wrong["error"]
    thread.join(10)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    [refused] = net_probe.connect({"targets": [{"addr": "127.0.0.1", "port": closed}], "token": "x"}, None)["results"]
    assert not refused["ok"] and "connection refused" in refused["error"]


def test_listener_ends_on_its_deadline_or_when_stdin_closes() -> None:
    thread, box = _listen({"hold_s": 0.5, "token": "t"}, Ctx())
    thread.join(10)
    assert box["ended"] == "deadline" and not thread.is_alive()
    read_end, write_end = os.pipe()
    with os.fdopen(read_end, "rb") as stdin:
        thread, box = _listen({"hold_s": 60, "token": "t", "until_stdin_closes": True}, Ctx(stdin))
        os.close(write_end)
        thread.join(10)
    assert box["ended"] == "controller done" and not thread.is_alive()


def test_a_fixed_port_and_a_range() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = Ctx()
    thread, box = _listen({"hold_s": 0.2, "port": port}, ctx)
    thread.join(10)
    assert box["port"] == port
    ctx = Ctx()
    thread, box = _listen({"hold_s": 0.2, "port_range": [40100, 40199]}, ctx)
    thread.join(10)
    assert 40100 <= box["port"] <= 40199
