"""OpenSSHConnection (the staging data plane through the `ssh` binary) against real sshd hosts:
the same contract as SSHConnection, one ControlMaster per connection, no master left behind,
and the fallback to paramiko where OpenSSH cannot be used. Host state is checked outside SSH
(ns_exec), as the other fleet tests do."""

from __future__ import annotations

import hashlib
import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from fleet import Fleet
from kinds import NOISE_ERR, NOISE_OUT
from polling import wait_until
from test_faults import host_processes

from provision.connection.base import ConnectOptions
from provision.connection.factory import connect as connect_for
from provision.connection.openssh import OpenSSHConnection
from provision.connection.ssh import SSHConnection
from provision.errors import Cancelled, UnreachableError
from provision.inventory.model import Host
from provision.staging.sample import make_image_folder

ROOT = Path(__file__).resolve().parents[2]
SSD = "/root/autodl-tmp"


@pytest.fixture
def openssh(ssh_options):
    """openssh(host, options=None) -> an OpenSSHConnection closed at the end of the test."""
    opened: list[OpenSSHConnection] = []

    def open_one(host: Host, options: ConnectOptions | None = None) -> OpenSSHConnection:
        conn = OpenSSHConnection(host, options or ssh_options)
        opened.append(conn)
        return conn

    yield open_one
    for conn in opened:
        conn.close()


def ssh_processes_with(needle: str) -> list[str]:
    """Command lines of this machine's ssh processes that mention `needle` (a ControlPath)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"ssh") and any(needle.encode() in a for a in argv):
            found.append(b" ".join(argv).decode(errors="replace"))
    return found


# -- the contract --------------------------------------------------------------------------------
def test_run_stream_put_get_binary_round_trips_over_one_master(fleet: Fleet, openssh) -> None:
    fh = fleet.hosts[0]
    conn = openssh(fh.as_host())
    result = conn.run("echo out; echo err >&2; exit 3")
    assert (result.exit_code, result.stdout, result.stderr) == (3, "out\n", "err\n")
    assert conn.transport_name == "openssh"
    assert conn.run("kill -9 $$").exit_code == 137  # killed by a signal: 128+9, as a shell says
    binary = bytes(range(256)) * 1024
    echoed = conn._execute("cat", source=[binary])
    assert echoed.code == 0 and echoed.stdout == binary  # binary stdin and stdout, byte exact
    path = '/root/open ssh/it\'s "q" $HOME.bin'
    conn.put(binary, path, mode=0o600)
    assert conn.get(path) == binary
    assert fleet.ns_exec(fh, ["stat", "-c", "%a %s", path]).stdout.split() == [
        "600",
        str(len(binary)),
    ]
    with pytest.raises(OSError, match="gpu1: reading /root/nope failed"):
        conn.get("/root/nope")
    fleet.ns_exec(fh, ["rm", "-rf", "/root/open ssh"])  # the session fleet is shared
    # one handshake for all of it: one master, one accepted login
    masters = ssh_processes_with(conn._dir)
    assert len(masters) == 1 and " -N " in masters[0] + " ", masters


def test_a_50_mb_stream_with_lines_handed_over_while_it_runs(fleet: Fleet, openssh) -> None:
    conn = openssh(fleet.hosts[1].as_host())
    block = os.urandom(1 << 20)
    digest = hashlib.sha256(block * 50).hexdigest()
    ready = threading.Event()
    lines: list[str] = []

    def on_line(line: str) -> None:
        lines.append(line)
        ready.set()

    def source():  # the bulk only after the command's first line reached us (staging's `ready`)
        yield b"go\n"
        assert ready.wait(20)
        for _ in range(50):
            yield memoryview(block)

    started = time.monotonic()
    result = conn.stream("read go; echo ready; sha256sum", source=source(), on_stdout_line=on_line)
    assert result.ok, result.stderr
    assert lines == ["ready", f"{digest}  -"]
    print(f"\n50 MB through OpenSSH in {time.monotonic() - started:.2f}s")
    from_file = conn.stream("wc -c", source=io.BytesIO(block * 4))
    assert from_file.stdout.strip() == str(4 << 20)


def test_noisy_login_shell_output_is_stripped(make_fleet, openssh) -> None:
    fleet = make_fleet(1, kinds="noisy")
    conn = openssh(fleet.hosts[0].as_host())
    result = conn.run("echo mine; echo also-mine >&2")
    assert (result.stdout, result.stderr) == ("mine\n", "also-mine\n")
    assert NOISE_OUT not in result.stdout and NOISE_ERR not in result.stderr


def test_timeout_and_idle_timeout_stop_the_remote_group(fleet: Fleet, openssh) -> None:
    fh = fleet.hosts[2]
    conn = openssh(fh.as_host())
    tag = f"provision-timeout-{os.getpid()}"
    started = time.monotonic()
    result = conn.run(f"sh -c 'sleep 60; : {tag}' & sleep 61; : {tag}", timeout=1)
    took = time.monotonic() - started
    assert result.exit_code == 124 and took < 5, (result, took)
    assert "timed out after 1s; the command was stopped on the host" in result.stderr
    wait_until(
        "the timed-out group is gone", lambda: not host_processes(fleet, fh, tag), timeout=10
    )

    started = time.monotonic()
    quiet = conn.stream(
        f"echo one; sleep 62; : {tag}", idle_timeout=1, on_stdout_line=lambda line: None
    )
    assert quiet.exit_code == 124 and time.monotonic() - started < 5
    assert quiet.stdout == "one" and "no output for 1s" in quiet.stderr
    wait_until("the idle group is gone", lambda: not host_processes(fleet, fh, tag), timeout=10)
    assert conn.run("echo still usable").stdout == "still usable\n"


def test_interrupt_from_another_thread_cancels_and_ends_the_remote_group(
    fleet: Fleet, openssh
) -> None:
    fh = fleet.hosts[3]
    conn = openssh(fh.as_host())
    tag = f"provision-cancel-{os.getpid()}"
    assert conn.run("true").ok  # the master is up: the interrupt meets a running command
    threading.Timer(1.0, conn.interrupt).start()
    started = time.monotonic()
    with pytest.raises(Cancelled, match="gpu4: interrupted during"):
        conn.run(f"sleep 63; : {tag}")
    assert time.monotonic() - started < 5
    wait_until(
        "the cancelled group is gone", lambda: not host_processes(fleet, fh, tag), timeout=10
    )


def test_a_dead_link_is_unreachable_naming_the_step(make_fleet, ssh_config_file) -> None:
    fleet = make_fleet(1)
    fh = fleet.hosts[0]
    options = ConnectOptions(known_hosts="accept-new", connect_timeout=5, keepalive=1,
                             keepalive_count=2, ssh_config=str(ssh_config_file))  # fmt: skip
    conn = OpenSSHConnection(fh.as_host(), options)
    try:
        assert conn.run("true").ok
        conn.doing = "task `wait`"
        threading.Timer(1.0, fleet.link_down, args=(fh,)).start()
        started = time.monotonic()
        with pytest.raises(
            UnreachableError, match=r"gpu1: no reply for 2s \(link down\?\) during task `wait`"
        ):
            conn.run("sleep 60")
        assert time.monotonic() - started < 10
    finally:
        fleet.link_up(fh)
        conn.close()


def test_abort_wakes_a_blocked_command(fleet: Fleet, openssh) -> None:
    """staging's stall watchdog (abort_transport) ends the master: the blocked stream returns."""
    from provision.staging.watchdog import abort_transport

    conn = openssh(fleet.hosts[2].as_host())
    assert conn.run("true").ok
    threading.Timer(1.0, abort_transport, args=(conn,)).start()
    started = time.monotonic()
    with pytest.raises(UnreachableError, match="connection lost during"):
        conn.stream("sleep 60", source=iter([b"x"]))
    assert time.monotonic() - started < 5
    assert conn.run("echo again").stdout == "again\n"  # a new master for the next command


# -- reaching hosts ------------------------------------------------------------------------------
def test_a_host_behind_a_jump_host_via_proxyjump(make_fleet, tmp_path, provision_env) -> None:
    fleet = make_fleet(1, kinds="behind-jump")
    config = fleet.write_ssh_config(tmp_path / "ssh_config", proxy_jump=False)  # alias `jump`
    fh = fleet.hosts[0]
    options = ConnectOptions(known_hosts="accept-new", connect_timeout=5, ssh_config=str(config))
    with OpenSSHConnection(fh.as_host(proxy_jump="jump"), options) as conn:
        assert conn.run("hostname").stdout.strip() == fh.name
        assert conn.transport_name == "openssh"
    recorded = provision_env.known_hosts.read_text()
    assert fh.address in recorded and fleet.jump.address in recorded  # both hops checked


def test_accept_new_records_the_key_then_strict_accepts_it(
    fleet: Fleet, openssh, ssh_config_file, provision_env
) -> None:
    fh = fleet.hosts[4]
    assert not provision_env.known_hosts.exists()
    assert openssh(fh.as_host()).run("true").ok
    assert fh.known_hosts_line() in provision_env.known_hosts.read_text()
    assert not provision_env.user_known_hosts.exists()  # the user's file is theirs
    strict = ConnectOptions(
        known_hosts="strict", connect_timeout=5, ssh_config=str(ssh_config_file)
    )
    conn = openssh(fh.as_host(), strict)
    assert conn.run("echo strict").stdout == "strict\n" and conn.transport_name == "openssh"


def test_identity_is_the_same_as_paramikos(fleet: Fleet, openssh, connect) -> None:
    host = fleet.hosts[5].as_host()
    ours = openssh(host).identity()
    assert ours is not None and ours == connect(host).identity()
    assert ours.split()[2] == fleet.hosts[5].host_public_key.split()[0]


def test_an_encrypted_key_with_passphrase_env_goes_to_paramiko_and_works(
    fleet: Fleet, ssh_options, monkeypatch
) -> None:
    monkeypatch.setenv("FLEET_KEY_PASSPHRASE", fleet.key_passphrase)
    options = ConnectOptions(**{**ssh_options.__dict__, "passphrase_env": "FLEET_KEY_PASSPHRASE"})
    conn = connect_for(
        fleet.hosts[6].as_host(key_file=fleet.passphrase_key_file), options, data_plane=True
    )
    try:
        assert isinstance(conn, SSHConnection)
        assert conn.run("echo via-paramiko").stdout == "via-paramiko\n"
    finally:
        conn.close()
    plain = connect_for(fleet.hosts[6].as_host(), ssh_options, data_plane=True)
    assert isinstance(plain, OpenSSHConnection)
    plain.close()


def test_a_refused_connection_falls_back_to_paramikos_error(fleet: Fleet, openssh, connect) -> None:
    host = fleet.hosts[7].as_host(port=1)  # nothing listens there: refused
    conn = openssh(host)
    with pytest.raises(UnreachableError) as ours:
        conn.run("true")
    assert conn.transport_name == "paramiko"
    with pytest.raises(UnreachableError) as theirs:
        connect(host).run("true")
    assert str(ours.value) == str(theirs.value)


# -- the CLI -------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def small_images(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_image_folder(
        tmp_path_factory.mktemp("osimages") / "osmini", 400, classes=4, size=32
    )


@pytest.fixture
def short_tmpdir():
    """TMPDIR for a CLI run: its private ssh dirs land here (short: a ControlPath has to be),
    so only this run's ssh processes are looked for, whatever else runs on the machine."""
    import shutil
    import tempfile

    where = tempfile.mkdtemp(prefix="pvt", dir="/tmp")
    yield where
    shutil.rmtree(where, ignore_errors=True)


def stage_cli(
    fleet: Fleet, tmp_path: Path, images: Path, fh, env: dict[str, str]
) -> subprocess.Popen:
    inventory = fleet.write_inventory(tmp_path / "hosts.ini")
    cmd = [sys.executable, "-m", "provision", "stage", str(images), fh.name, "-i", str(inventory),
           "--dest", f"{SSD}/os-datasets", "--ssh-config", os.devnull, "--json", "--clean"]  # fmt: skip
    return subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, **env}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip


def test_stage_cli_reports_openssh_and_leaves_no_master(
    make_fleet, tmp_path, small_images, short_tmpdir
) -> None:
    fleet = make_fleet(1)  # its own: shipping py-lmdb changes a host other tests expect bare
    fh = fleet.hosts[0]
    proc = stage_cli(fleet, tmp_path, small_images, fh, {"TMPDIR": short_tmpdir})
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 0, err[-3000:]
    entry = json.loads(out)["hosts"][fh.name]
    assert entry["transport"] == "openssh" and entry["count"] == 400, entry
    assert ssh_processes_with(short_tmpdir) == []  # no master of that run is left
    assert os.listdir(short_tmpdir) == []  # and its private dir is gone

    proc = stage_cli(fleet, tmp_path, small_images, fh, {"PROVISION_SSH_CLIENT": "paramiko"})
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 0, err[-3000:]
    entry = json.loads(out)["hosts"][fh.name]
    assert entry["transport"] == "paramiko" and entry["count"] == 400, entry


def test_ctrl_c_of_the_stage_cli_leaves_no_master(make_fleet, tmp_path, short_tmpdir) -> None:
    fleet = make_fleet(1)
    fh = fleet.hosts[0]
    images = make_image_folder(tmp_path / "osbig", 3000, classes=3, size=48)
    fleet.shape(fh, rate="8mbit", delay=None)  # several seconds: time to interrupt
    try:
        proc = stage_cli(fleet, tmp_path, images, fh, {"TMPDIR": short_tmpdir})
        try:
            wait_until("the stage's master is up",
                       lambda: proc.poll() is not None or ssh_processes_with(short_tmpdir),
                       timeout=60)  # fmt: skip
            time.sleep(1.0)
            assert proc.poll() is None, proc.communicate()
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=20)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert proc.returncode == 130, err[-3000:]
        wait_until("no master is left", lambda: not ssh_processes_with(short_tmpdir), timeout=5)
        assert os.listdir(short_tmpdir) == []
    finally:
        fleet.unshape(fh)


def test_a_slow_listing_over_openssh_keeps_the_link_and_the_watchdog_quiet(
    make_fleet, small_images, ssh_options, monkeypatch
) -> None:
    """The agent starts while the source is listed; a listing far longer than the stall timeout
    (3 s against 1 s) must not be taken for a dead link: blank lines keep the session alive and
    the watchdog is told the wait is ours."""
    from provision.staging import stage as stage_module

    fleet = make_fleet(1)
    fh = fleet.hosts[0]
    real = stage_module.plan_local

    def slow(*args, **kwargs):
        time.sleep(3)
        return real(*args, **kwargs)

    monkeypatch.setattr(stage_module, "plan_local", slow)
    conn = connect_for(fh.as_host(), ssh_options, data_plane=True)
    with conn:
        result = stage_module.stage_dataset(
            conn, None, str(small_images), dest=f"{SSD}/late", stall_timeout=1
        )
        assert conn.transport_name == "openssh"
    assert result["count"] == 400 and not result["skipped"], result
