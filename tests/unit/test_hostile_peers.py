"""`provision stop` / `attach` connect only to hosts the user named or this controller started the
run on, never to a peer a host's state.json lists (issue 20, defect 3).

The host is this machine (localhost, its data dir in a temp folder); its state.json lists a peer
at a loopback port where a listener records every connection. The real CLI runs as a user
runs it, with a password in --password-env that such a peer would otherwise be offered."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from provision.train.peers import record_run, vet_peers

REPO = Path(__file__).resolve().parents[2]


class Recorder:
    """A TCP listener on loopback that records each connection and answers an SSH banner."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.connections: list[tuple[str, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, peer = self.sock.accept()
            except OSError:
                continue
            self.connections.append(peer)
            try:
                conn.sendall(b"SSH-2.0-hostile-peer\r\n")
            finally:
                conn.close()

    def close(self) -> list[tuple[str, int]]:
        self._stop.set()
        self._thread.join(timeout=5)
        try:  # a connection still in the backlog counts too
            self.sock.setblocking(False)
            while True:
                self.connections.append(self.sock.accept()[1])
        except OSError:
            pass
        self.sock.close()
        return self.connections


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    r = Recorder()
    yield r
    r.close()


def _plant_run(tmp_path: Path, run_id: str, peers: list[str]) -> Path:
    data = tmp_path / "data"
    run = data / "runs" / run_id
    run.mkdir(parents=True)
    (run / "output.log").write_text("step 1\n")
    (run / "state.json").write_text(json.dumps({
        "run_id": run_id, "state": "finished", "exit_code": 0, "log": str(run / "output.log"),
        "created": 1.0, "started": 1.0, "ended": 2.0,
        "distributed": {"hosts": ["localhost", *peers], "nproc": {"localhost": 1}},
    }))
    inventory = tmp_path / "hosts.ini"
    inventory.write_text(f"localhost ansible_connection=local data_dir={data}\n")
    return inventory


def _provision(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO), PEER_PASSWORD="hunter2-canary", COLUMNS="200")
    empty = tmp_path / "ssh_config"
    empty.write_text("")
    return subprocess.run([sys.executable, "-m", "provision", *args, "--ssh-config", str(empty),
                           "--password-env", "PEER_PASSWORD", "--known-hosts", "accept-new"],
                          capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)


def test_stop_refuses_a_peer_only_the_host_names(tmp_path: Path, recorder: Recorder) -> None:
    peer = f"root@127.0.0.1:{recorder.port}"
    inventory = _plant_run(tmp_path, "r1", [peer])
    proc = _provision(tmp_path, "stop", "localhost", "r1", "-i", str(inventory))
    assert recorder.close() == [], "stop connected to a peer the host's state.json named"
    out = proc.stdout + proc.stderr
    assert peer in out and "not connecting" in out, out
    assert proc.returncode != 0, out
    assert "localhost: run r1 had already ended" in out, out  # the named host itself was handled


def test_attach_refuses_a_peer_only_the_host_names(tmp_path: Path, recorder: Recorder) -> None:
    peer = f"root@127.0.0.1:{recorder.port}"
    inventory = _plant_run(tmp_path, "r2", [peer])
    proc = _provision(tmp_path, "attach", "localhost", "r2", "-i", str(inventory), "--no-live",
                      "--out", str(tmp_path / "reports"))
    assert recorder.close() == [], "attach connected to a peer the host's state.json named"
    out = proc.stdout + proc.stderr
    assert peer in out and "not connecting" in out, out


def test_peers_the_user_or_this_controller_knows_are_kept(tmp_path: Path) -> None:
    inventory = tmp_path / "hosts.ini"
    inventory.write_text("gpu1 ansible_host=198.18.0.2\ngpu2 ansible_host=198.18.0.3\n")
    config = tmp_path / "ssh_config"
    config.write_text("Host box7\n  HostName 198.18.0.9\nHost *\n  ServerAliveInterval 5\n")
    record_run("run-a", ["gpu1", "root@198.18.0.4:2222"])
    vetted = vet_peers("run-a", "gpu1", ["gpu1", "gpu2", "box7", "root@198.18.0.4:2222", "evil@203.0.113.9",
                                         "all", "gpu*", "anything-else", 7, None], [str(inventory)], str(config))
    assert vetted.accepted == ["gpu2", "box7", "root@198.18.0.4:2222"]
    assert vetted.refused == ["evil@203.0.113.9", "all", "gpu*", "anything-else"]
    # another run's record says nothing about this one; a host can't pick the record's file name
    assert vet_peers("run-b", "gpu1", ["root@198.18.0.4:2222"], [], None).refused == ["root@198.18.0.4:2222"]
    assert vet_peers("../run-a", "gpu1", ["root@198.18.0.4:2222"], [], None).refused == ["root@198.18.0.4:2222"]
