"""Index probes from a real fleet host are bounded: an index that never answers, and one that
trickles its page in a byte at a time (so no single recv times out), come back as "timed out"
within the probe's budget, asked in parallel with an index that answers; none of them holds the
others up. No timing threshold: that the call returned with these answers is the assertion (an
unbounded probe would hang until the command's own deadline and come back with no answers)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest
from fleet import Fleet

from provision.install.index_query import list_from_host
from provision.install.mirrors import IndexOptions

WHEEL = "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"
MAX_TRICKLE = 600  # bytes the trickling server sends at most (every loop that sends is bounded)


class _Server:
    """A TCP server on the controller's bridge address; `serve(conn)` handles each client."""

    def __init__(self, address: str, serve) -> None:  # noqa: ANN001
        self.sock = socket.create_server((address, 0))
        self.port = self.sock.getsockname()[1]
        self.serve = serve
        self.stop = threading.Event()
        self.clients: list[socket.socket] = []
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        self.sock.settimeout(0.2)
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.clients.append(conn)
            threading.Thread(target=self.serve, args=(conn, self.stop), daemon=True).start()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)
        for c in self.clients:
            c.close()
        self.sock.close()


def _silent(conn: socket.socket, stop: threading.Event) -> None:
    stop.wait(60)  # accepts, reads nothing, says nothing


def _trickle(conn: socket.socket, stop: threading.Event) -> None:
    try:
        conn.recv(65536)
        conn.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 100000\r\n\r\n"
        )
        for _ in range(MAX_TRICKLE):
            if stop.wait(0.1):
                return
            conn.sendall(b" ")
    except OSError:
        pass


def _answers(conn: socket.socket, stop: threading.Event) -> None:
    try:
        conn.recv(65536)
        body = f'<a href="/{WHEEL}">{WHEEL}</a>'.encode()
        conn.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nConnection: close\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
    except OSError:
        pass


@pytest.fixture
def servers(fleet: Fleet) -> Iterator[dict[str, _Server]]:
    made = {
        name: _Server(fleet.controller_address, serve)
        for name, serve in (("silent", _silent), ("trickle", _trickle), ("good", _answers))
    }
    try:
        yield made
    finally:
        for s in made.values():
            s.close()


def test_probes_of_dead_indexes_return_timed_out_within_their_bound(
    fleet: Fleet, connect, servers: dict[str, _Server]
) -> None:
    conn = connect(fleet.hosts[0].as_host())
    base = f"http://{fleet.controller_address}"
    targets = [(f"{base}:{servers[n].port}/simple", "index") for n in ("silent", "trickle", "good")]
    # budget 3 x 1 s; the trickle alone would take MAX_TRICKLE x 0.1 s = 60 s
    silent, trickle, good = list_from_host(
        conn, "python3", targets, ["torch"], IndexOptions(probe_timeout=1.0)
    )
    assert not silent.ok and "timed out" in silent.detail.lower(), silent
    assert not trickle.ok and "timed out" in trickle.detail, trickle
    assert "budget" in trickle.detail  # only the whole-request bound stops a trickle
    assert good.ok and good.files == {"torch": [WHEEL]}, good
