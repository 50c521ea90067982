"""A compromised rental (the `hostile` fleet kind, tests/fleet/kinds.py) against the real CLI and
both SSH transports (issue 20): whatever it says, the controller stays safe.

- peers: `stop` / `attach` never connect to a peer only the host's state.json names (a listener
  on the controller's bridge address records every connection attempt);
- paths: `fetch` writes nothing outside dest, whether the host's $HOME climbs out or its reply
  lies about the path;
- bounds: an endless banner from ~/.bashrc (stdout or stderr) and a line without end are cut
  with an error naming the host, and the controller's memory stays bounded (measured: RSS).

Templates and terminal escapes: tests/fleet/test_hostile_templates.py.
"""

from __future__ import annotations

import json
import os
import resource
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import kinds
import pytest
from fleet import Fleet, FleetError, preflight

from provision.connection.base import ConnectOptions
from provision.connection.openssh import OpenSSHConnection
from provision.connection.ssh import SSHConnection
from provision.errors import BoundsError

REPO = Path(__file__).resolve().parents[2]
PASSWORD_VAR = "HOSTILE_TEST_PASSWORD"


@dataclass
class Hostile:
    fleet: Fleet
    work: Path
    inventory: Path
    ssh_config: Path

    @property
    def host(self):  # noqa: ANN201 - a FleetHost
        return self.fleet.hosts[0]

    def provision(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
        env = {k: v for k, v in os.environ.items() if k != "SSH_AUTH_SOCK"}
        env.update(PYTHONPATH=str(REPO), COLUMNS="200", **{PASSWORD_VAR: "hunter2-hostile-canary"})
        cmd = [sys.executable, "-m", "provision", *args, "-i", str(self.inventory),
               "--ssh-config", str(self.ssh_config), "--known-hosts", "accept-new"]
        return subprocess.run(cmd, capture_output=True, text=True, cwd=self.work, env=env, timeout=timeout)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hostile]:
    reason = preflight()
    if reason:
        pytest.skip(f"SSH test fleet unavailable: {reason}")
    try:
        fleet = Fleet(1, kinds="hostile").start()
    except FleetError as exc:
        pytest.fail(f"could not start the hostile host: {exc}", pytrace=False)
    try:
        work = tmp_path_factory.mktemp("hostile")
        h = fleet.hosts[0]
        inventory = work / "hosts.ini"
        inventory.write_text(f"{h.name} ansible_host={h.address} ansible_port={h.port} ansible_user={h.user} "
                             f"ansible_ssh_private_key_file={h.key_file} data_dir={kinds.HOSTILE_DATA_DIR}\n")
        config = work / "ssh_config"
        config.write_text("")
        yield Hostile(fleet, work, inventory, config)
    finally:
        fleet.stop()


@pytest.fixture
def attack(hostile: Hostile) -> Iterator[Callable[[str, str], None]]:
    """attack(name, text=""): turn on one of the host's flagged attacks for this test."""
    on: list[str] = []

    def turn_on(name: str, text: str = "") -> None:
        hostile.fleet.hostile_on(hostile.host, name, text)
        on.append(name)

    yield turn_on
    for name in on:
        hostile.fleet.hostile_off(hostile.host, name)


def test_the_host_is_hostile(hostile: Hostile) -> None:
    """The kind is what it says (checked outside SSH): else every test below proves nothing."""
    ns = hostile.fleet.ns_exec
    assert ns(hostile.host, "cat /proc/sys/kernel/hostname").stdout.strip() == kinds.HOSTILE_HOSTNAME
    state = json.loads(ns(hostile.host, f"cat {kinds.HOSTILE_DATA_DIR}/runs/{kinds.HOSTILE_RUN}/state.json").stdout)
    assert f"root@{hostile.fleet.controller_address}:{kinds.HOSTILE_PEER_PORT}" in state["distributed"]["hosts"]
    assert ns(hostile.host, f"readlink {kinds.HOSTILE_TMP_LINK}").stdout.strip() == kinds.HOSTILE_SECRET_TARGET
    assert "{{ lookup" in ns(hostile.host, f"cat {kinds.HOSTILE_DIR}/template.txt").stdout


# -- peers ------------------------------------------------------------------------------------------
class Recorder:
    """Listens where the host's state.json says a peer is; records every connection."""

    def __init__(self, address: str, port: int) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((address, port))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
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
            try:  # an SSH server as far as the client can tell, so it would go on to offer keys
                conn.sendall(b"SSH-2.0-OpenSSH_9.2p1 hostile-peer\r\n")
            finally:
                conn.close()

    def close(self) -> list[tuple[str, int]]:
        self._stop.set()
        self._thread.join(timeout=5)
        try:
            self.sock.setblocking(False)
            while True:
                self.connections.append(self.sock.accept()[1])
        except OSError:
            pass
        self.sock.close()
        return self.connections


@pytest.fixture
def recorder(hostile: Hostile) -> Iterator[Recorder]:
    r = Recorder(hostile.fleet.controller_address, kinds.HOSTILE_PEER_PORT)
    yield r
    r.close()


@pytest.mark.parametrize("command", ["stop", "attach"])
def test_no_connection_to_a_peer_only_the_host_names(hostile: Hostile, recorder: Recorder, command: str) -> None:
    extra = ["--no-live", "--out", str(hostile.work / "reports")] if command == "attach" else []
    proc = hostile.provision(command, hostile.host.name, kinds.HOSTILE_RUN, "--password-env", PASSWORD_VAR, *extra)
    assert recorder.close() == [], f"{command} connected to the peer the host named"
    out = proc.stdout + proc.stderr
    peer = f"root@{hostile.fleet.controller_address}:{kinds.HOSTILE_PEER_PORT}"
    assert peer in out and "not connecting" in out, out[-3000:]
    assert proc.returncode != 0 or command == "attach", out[-3000:]


# -- paths ------------------------------------------------------------------------------------------
def _climb(path: Path) -> str:
    return "/" + "../" * 40 + str(path).lstrip("/")


def _playbook(hostile: Hostile, name: str, tasks: str) -> Path:
    pb = hostile.work / f"{name}.yml"
    pb.write_text(f"- hosts: all\n  gather_facts: false\n  tasks:\n{tasks}")
    return pb


def test_fetch_writes_nothing_outside_dest_when_home_climbs_out(hostile: Hostile, attack, tmp_path: Path) -> None:
    outside = tmp_path / "outside"  # the same path on the host (its own /tmp) holds the loot
    hostile.fleet.ns_exec(hostile.host, f"mkdir -p {outside} && echo host-bytes > {outside}/loot")
    attack("home", _climb(outside))
    pb = _playbook(hostile, "fetch-home", f"    - fetch: {{src: ~/loot, dest: {tmp_path}/got}}\n")
    proc = hostile.provision("run", str(pb), "--json")
    assert not outside.exists(), "fetch wrote outside dest"
    result = json.loads(proc.stdout)["results"][0]
    assert result["status"] == "failed" and "outside the destination" in result["msg"], result
    assert hostile.host.name in result["msg"] and str(tmp_path / "got") in result["msg"]


def test_fetch_ignores_a_lying_path_line(hostile: Hostile, attack, tmp_path: Path) -> None:
    lied = tmp_path / "lied" / "x"
    attack("lie-path", _climb(lied))
    pb = _playbook(hostile, "fetch-lie", f"    - fetch: {{src: {kinds.HOSTILE_DIR}/template.txt, dest: {tmp_path}/got}}\n")
    proc = hostile.provision("run", str(pb), "--json")
    assert not (tmp_path / "lied").exists(), "fetch wrote where the host's @@path line said"
    result = json.loads(proc.stdout)["results"][0]
    assert result["status"] == "changed", result
    copy = tmp_path / "got" / hostile.host.name / kinds.HOSTILE_DIR.lstrip("/") / "template.txt"
    assert Path(result["result"]["dest"]) == copy and "{{ lookup" in copy.read_text()
    assert not hostile.fleet.hostile_canary(hostile.host).exists()


# -- bounds -----------------------------------------------------------------------------------------
def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@pytest.fixture(params=["paramiko", "openssh"])
def transport(request: pytest.FixtureRequest, hostile: Hostile, tmp_path: Path) -> Iterator[object]:
    config = tmp_path / "ssh_config"
    config.write_text("")
    options = ConnectOptions(known_hosts="accept-new", connect_timeout=10.0, ssh_config=str(config))
    host = hostile.host.as_host()
    conn = SSHConnection(host, options) if request.param == "paramiko" else OpenSSHConnection(host, options)
    try:
        yield conn
    finally:
        conn.close()


@pytest.mark.parametrize("stream", ["endless", "endless-err"])
def test_an_endless_banner_is_cut_naming_the_host_and_its_startup_files(transport, attack, stream: str) -> None:
    assert transport.run("echo fine", timeout=60).stdout == "fine\n"  # connected before the flood
    before = _rss_mb()
    attack(stream)
    # timeout: main's framer searched for ever; bounded here, so a failure can't hang the suite
    with pytest.raises(BoundsError) as err:
        transport.run("echo never", timeout=90)
    message = str(err.value)
    assert message.startswith(f"{transport.host.name}: ") and "~/.bashrc" in message and "~/.profile" in message
    assert ("stderr" if stream == "endless-err" else "stdout") in message
    assert _rss_mb() - before < 200  # generous: the cap is 1 MiB


@pytest.fixture(params=["paramiko", "openssh", "executor"])
def any_transport(request: pytest.FixtureRequest, hostile: Hostile, tmp_path: Path) -> Iterator[object]:
    """The transports, and the persistent executor over OpenSSH (remote/executor.py)."""
    from provision.remote.executor import ExecutorConnection

    config = tmp_path / "ssh_config"
    config.write_text("")
    options = ConnectOptions(known_hosts="accept-new", connect_timeout=10.0, ssh_config=str(config))
    host = hostile.host.as_host()
    conn = SSHConnection(host, options) if request.param == "paramiko" else OpenSSHConnection(host, options)
    conn = ExecutorConnection(conn) if request.param == "executor" else conn
    try:
        yield conn
    finally:
        conn.close()


def test_a_line_without_end_is_cut_with_bounded_memory(any_transport) -> None:
    transport = any_transport
    from provision.connection.bounds import LINE_MAX

    before = _rss_mb()
    size = LINE_MAX + (16 << 20)
    with pytest.raises(BoundsError, match="a line of the command's output passed"):
        transport.stream(f"head -c {size} /dev/zero | tr '\\0' x", on_stdout_line=lambda line: None, timeout=300)
    assert _rss_mb() - before < 3 * (LINE_MAX >> 20) + 200
    assert transport.run("echo after", timeout=60).stdout == "after\n"  # the connection is still usable


# -- what the stage agent says of itself ----------------------------------------------------------
_TAG_CLIMB = "../../../../tmp/pv-climb"


def _lie_about_python_tag(hostile: Hostile) -> None:
    """Make the host's own agent report, in the stage's `ready`, a Python tag that climbs out of
    its pylib folder (its own imports keep the true one), and keep its MANIFEST consistent so
    the controller takes the agent as intact: a compromised host can rewrite whatever it holds."""
    LIE = f"\ndef python_tag():\n    return {_TAG_CLIMB!r}\n"  # noqa: N806
    script = (
        "import glob, os, sys\n"
        "for folder in glob.glob('/root/.cache/provision/agent-*'):\n"
        "    ingest = os.path.join(folder, 'provision/agent/datasets/ingest.py')\n"
        "    if not os.path.exists(ingest):\n"
        "        continue\n"
        "    with open(ingest, 'a') as f:\n"
        f"        f.write({LIE!r})\n"
        "    for pyc in glob.glob(os.path.join(folder, 'provision/agent/datasets/__pycache__/ingest.*')):\n"
        "        os.unlink(pyc)\n"
        "    lines = []\n"
        "    for root, _, names in os.walk(folder):\n"
        "        for n in names:\n"
        "            p = os.path.join(root, n)\n"
        "            if n != 'MANIFEST':\n"
        "                lines.append('%d %s' % (os.path.getsize(p), os.path.relpath(p, folder)))\n"
        "    with open(os.path.join(folder, 'MANIFEST'), 'w') as f:\n"
        "        f.write('\\n'.join(sorted(lines)) + '\\n')\n"
    )
    hostile.fleet.ns_exec(hostile.host, ["python3", "-c", script])


def test_a_lying_python_tag_ships_nothing_anywhere(
    hostile: Hostile, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stage's `ready` names the host's Python tag, which decides what zstandard to ship and
    where it lands: a tag that climbs out is refused (the stream stays raw, the stage completes)
    and nothing is written under that name on the host or here."""
    from provision.remote.agent import Agent
    from provision.staging import hostlib, stage_dataset, zstd_ship
    from provision.staging.sample import make_text_folder

    text = make_text_folder(tmp_path / "logs", 200, classes=2, size=20_000)
    options = ConnectOptions(known_hosts="accept-new", connect_timeout=10.0, ssh_config=str(hostile.ssh_config))
    conn = SSHConnection(hostile.host.as_host(), options)
    try:
        agent = Agent(conn)
        first = stage_dataset(conn, agent, str(text), name="honest", dest=kinds.HOSTILE_DATA_DIR + "/t0")
        assert first["count"] == 200  # the full agent is on the host now
        _lie_about_python_tag(hostile)
        # ship for any sampled text, however short the stream: the decision is the tag's alone
        monkeypatch.setattr(hostlib, "zstandard_package_size", lambda tag: 1)
        monkeypatch.setattr(zstd_ship, "SHIP_PAYBACK", 0)
        hostile.fleet.ns_exec(hostile.host, "rm -rf /root/.cache/provision/pylib/*zstandard*")
        has_own = hostile.fleet.ns_exec(hostile.host, "python3 -c 'import zstandard'", check=False)
        assert has_own.returncode != 0, "the case needs a host without zstandard of its own"
        result = stage_dataset(conn, agent, str(text), name="lied", dest=kinds.HOSTILE_DATA_DIR + "/t1")
    finally:
        conn.close()
    assert result["count"] == 200 and result["checksum"] == first["checksum"]
    shipped = result["compression"]["zstandard_shipped"]
    assert shipped.startswith("failed: no zstandard here"), shipped
    assert result["compression"]["codec"] == "none"
    found = hostile.fleet.ns_exec(hostile.host, "ls -d /tmp/pv-climb* /root/.cache/provision/pylib/*zstandard* "
                                  "2>/dev/null; true")
    assert found.stdout.strip() == "", found.stdout
    assert not list(Path("/tmp").glob("pv-climb*"))
