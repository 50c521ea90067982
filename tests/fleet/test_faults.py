"""The fault matrix (issue 10.7): each row a test against real sshd hosts. Expected outcome in
every row: a clear error naming the host and the step, the other host unaffected, and a rerun
that recovers. Keepalives are short here (0.5 s x 2) so each row takes seconds; the defaults
(15 s x 3) and the measured detection times are in docs/threat-model.md ("Faults") and
benchmarks/fault_bench.py.

How each fault is made (all inside the host's own namespaces, through ns_exec, never over SSH):
link cut / blip: `ip link set eth0 down` (fleet.link_down); sshd killed: SIGKILL to the
connection's sshd processes (children of the host's listener, which stays up); agent killed:
SIGKILL to the agent's python mid-stage; disk full: the hosts' /root and SSD are size-limited
tmpfs; pip hung: the tests' package index answering after 10 minutes; clock far off: a `date`
bind-mounted over /usr/bin/date in the host's mount namespace that says 2031 (the kernel clock
is shared by all namespaces, and provision's host-side code only measures durations, so this
is the honest extent of it); out of memory: the agent's interpreter under `ulimit -v`.

The process list is shared by every namespace on this machine, so "what runs on the host" is
read from /proc filtered by the host's network namespace (host_processes).
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from fleet import Fleet, FleetHost
from polling import wait_until

from provision.connection.base import ConnectOptions
from provision.connection.ssh import SSHConnection
from provision.errors import HostError, UnreachableError
from provision.inventory.model import Host
from provision.parallel import for_each_host
from provision.remote.agent import Agent

ROOT = Path(__file__).resolve().parents[2]
SSD = "/root/autodl-tmp"

# Lists "pid args" of processes in the host's network namespace (run inside it via ns_exec).
_PROCS = r"""
me=$(readlink /proc/self/ns/net)
for d in /proc/[0-9]*; do
  [ "$(readlink "$d/ns/net" 2>/dev/null)" = "$me" ] || continue
  args=$(tr '\0\n' '  ' < "$d/cmdline" 2>/dev/null) || continue  # one line per process
  [ -n "$args" ] && printf '%s %s\n' "${d#/proc/}" "$args"
done
"""


def host_processes(fleet: Fleet, host: FleetHost, needle: str) -> list[tuple[int, str]]:
    out = fleet.ns_exec(host, _PROCS, check=False).stdout
    found = []
    for line in out.splitlines():
        pid, _, args = line.partition(" ")
        if needle in args and "readlink" not in args and pid.isdigit():
            found.append((int(pid), args))
    return found


def link_up(fleet: Fleet, host: FleetHost) -> None:
    """Plug the cable back and wait until the host's sshd is reachable again (the bridge's
    neighbour entry for it failed while it was down: "No route to host" for a moment)."""
    import socket

    fleet.link_up(host)

    def reachable() -> bool:
        try:
            socket.create_connection((host.address, host.port), timeout=1).close()
            return True
        except OSError:
            return False

    wait_until(f"{host.name} reachable again", reachable)


def options(ssh_config_file: Path, **kw: Any) -> ConnectOptions:
    base = dict(known_hosts="accept-new", connect_timeout=3.0, ssh_config=str(ssh_config_file),
                keepalive=0.5, keepalive_count=2)
    base.update(kw)
    return ConnectOptions(**base)


@pytest.fixture
def pair(make_fleet) -> Fleet:
    fleet = make_fleet(2)
    yield fleet
    for h in fleet.hosts:
        fleet.link_up(h)


def _run_on_both(fleet: Fleet, opts: ConnectOptions, command_for, step: str):
    def work(host: Host):
        with SSHConnection(host, opts) as conn:
            conn.doing = step
            return conn.run(command_for(host.name))

    return for_each_host(fleet.provision_hosts(), work, forks=2)


# -- the link ----------------------------------------------------------------------------------
def test_link_cut_for_good_mid_task(pair: Fleet, ssh_config_file: Path) -> None:
    a, b = pair.hosts
    opts = options(ssh_config_file)
    tag = f"{secrets.randbelow(10**6)}"
    cut_at: list[float] = []

    def cut() -> None:
        wait_until("the task runs on gpu1", lambda: host_processes(pair, a, f"sleep 6.{tag}"))
        pair.link_down(a)
        cut_at.append(time.monotonic())

    cutter = threading.Thread(target=cut)
    cutter.start()
    failed_at: list[float] = []

    def work(host: Host):
        with SSHConnection(host, opts) as conn:
            conn.doing = "task 'train'"
            try:
                return conn.run(f"sleep 6.{tag}; echo done")
            except UnreachableError:
                failed_at.append(time.monotonic())
                raise

    outcomes = for_each_host(pair.provision_hosts(), work, forks=2)
    cutter.join()
    reported_at = failed_at[0]

    bad, good = outcomes[a.name], outcomes[b.name]
    assert good.ok and good.value.stdout == "done\n"  # the other host finished its task
    assert bad.unreachable, bad.message
    assert str(bad.error).startswith("gpu1: no reply for ")
    assert "(link down?) during task 'train'" in bad.message
    print(f"\nlink cut: reported {reported_at - cut_at[0]:.1f}s after the cut "
          f"(keepalive {opts.keepalive:g}s x {opts.keepalive_count})")

    link_up(pair, a)
    with SSHConnection(a.as_host(), opts) as conn:  # rerun recovers
        assert conn.run("echo back").stdout == "back\n"


def test_a_playbook_names_the_task_the_link_died_in(pair: Fleet, ssh_config_file: Path, tmp_path: Path) -> None:
    from provision.engine.runner import run_playbook

    a, b = pair.hosts
    tag = f"{secrets.randbelow(10**6)}"
    playbook = tmp_path / "site.yml"
    playbook.write_text(
        "- hosts: all\n  gather_facts: false\n  tasks:\n"
        f"    - name: long step\n      command: sleep 5.{tag}\n"
        "    - command: echo after\n"
    )

    def cut() -> None:
        wait_until("the task runs on gpu1", lambda: host_processes(pair, a, f"sleep 5.{tag}"))
        pair.link_down(a)

    cutter = threading.Thread(target=cut)
    cutter.start()
    result = run_playbook(playbook, hosts=pair.provision_hosts(), options=options(ssh_config_file))
    cutter.join()
    link_up(pair, a)
    by_host = {(r.host, r.task): r for r in result.results}
    dead = by_host[(a.name, "long step")]
    assert dead.status == "unreachable", dead.to_json()
    assert "no reply for" in dead.msg and "(link down?) during task 'long step'" in dead.msg, dead.msg
    assert by_host[(b.name, "command")].status in ("ok", "changed")  # the other host finished
    assert result.exit_code() == 4


def test_stderr_is_read_to_the_end_after_a_quiet_spell(pair: Fleet, ssh_config_file: Path) -> None:
    """stdout busy, stderr quiet for longer than the idle bound: its last line still arrives."""
    with SSHConnection(pair.hosts[0].as_host(), options(ssh_config_file)) as conn:
        lines: list[str] = []
        result = conn.stream("echo first >&2; for i in 1 2 3 4 5 6; do echo $i; sleep 0.3; done; echo last >&2",
                             on_stdout_line=lines.append, idle_timeout=1.0)
        assert result.ok and lines == ["1", "2", "3", "4", "5", "6"]
        assert result.stderr == "first\nlast\n"


def test_link_blip_shorter_than_the_keepalive_budget_is_survived(pair: Fleet, ssh_config_file: Path) -> None:
    a, _ = pair.hosts
    opts = options(ssh_config_file, keepalive=1.0, keepalive_count=6)
    tag = f"{secrets.randbelow(10**6)}"

    def blip() -> None:
        wait_until("the command runs", lambda: host_processes(pair, a, f"sleep 3.{tag}"))
        pair.link_down(a)
        time.sleep(1.0)
        pair.link_up(a)

    blipper = threading.Thread(target=blip)
    blipper.start()
    with SSHConnection(a.as_host(), opts) as conn:
        result = conn.run(f"sleep 3.{tag}; echo survived")
    blipper.join()
    assert (result.exit_code, result.stdout) == (0, "survived\n")


# -- the remote side dies ------------------------------------------------------------------------
def test_sshd_killed_mid_stream(pair: Fleet, ssh_config_file: Path) -> None:
    a, b = pair.hosts
    opts = options(ssh_config_file)
    go_on = threading.Event()

    def slow_source():
        for _ in range(600):  # bounded: at most 60 s of input
            if go_on.is_set():
                return
            yield b"x" * 4096
            time.sleep(0.1)

    def kill_sessions() -> None:
        assert a.sshd is not None
        listener = a.sshd.pid
        wait_until("the upload runs", lambda: host_processes(pair, a, "wc -c"))
        sessions = wait_until("a session sshd", lambda: _children(listener))
        for pid in sessions:
            os.kill(pid, signal.SIGKILL)

    def work(host: Host):
        with SSHConnection(host, opts) as conn:
            conn.doing = "upload"
            if host.name == a.name:
                killer = threading.Thread(target=kill_sessions)
                killer.start()
                try:
                    return conn.stream("wc -c", source=slow_source())
                finally:
                    killer.join()
                    go_on.set()
            return conn.stream("wc -c", source=[b"y" * 100_000])

    outcomes = for_each_host(pair.provision_hosts(), work, forks=2)
    assert outcomes[b.name].ok and outcomes[b.name].value.stdout.strip() == "100000"
    bad = outcomes[a.name]
    assert bad.unreachable and bad.message.startswith("connection lost during upload"), bad.message
    with SSHConnection(a.as_host(), opts) as conn:  # the listener is up: a rerun gets in
        assert conn.run("echo back").stdout == "back\n"


def _children(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def test_agent_killed_mid_stage(pair: Fleet, ssh_config_file: Path, tmp_path: Path) -> None:
    from provision.staging import stage_dataset
    from provision.staging.sample import make_image_folder

    a, b = pair.hosts
    images = make_image_folder(tmp_path / "big", 3000, classes=3, size=48)  # ~6 MB
    opts = options(ssh_config_file)
    pair.shape(a, rate="8mbit", delay=None)  # seconds of streaming: time to kill the agent

    def kill_agent() -> None:
        def committed() -> bool:  # the LMDB grows past its empty size at the first commit
            out = pair.ns_exec(a, f"stat -c %s {SSD}/datasets/big.lmdb.partial 2>/dev/null || echo 0",
                               check=False).stdout.split()
            return bool(out) and out[-1].isdigit() and int(out[-1]) > 200_000

        wait_until("a first commit", committed)
        running = wait_until(  # python3 -c STUB AGENT_FOLDER stage ...: the agent's argv
            "the agent stages",
            lambda: [p for p in host_processes(pair, a, "/agent-") if " stage " in p[1] + " "],
        )
        for pid, args in running:  # the interpreter only, as the OOM killer picks it
            if args.split()[0].endswith("python3"):
                os.kill(pid, signal.SIGKILL)

    def work(host: Host):
        with SSHConnection(host.__class__(**{**host.__dict__, "vars": {"data_dir": SSD}}), opts) as conn:
            return stage_dataset(conn, Agent(conn), str(images), stall_timeout=5)

    killer = threading.Thread(target=kill_agent)
    killer.start()
    try:
        outcomes = for_each_host(pair.provision_hosts(), work, forks=2)
    finally:
        killer.join()
        pair.unshape(a)
    assert outcomes[b.name].ok and outcomes[b.name].value["count"] == 3000  # unaffected
    bad = outcomes[a.name]
    assert not bad.ok and str(bad.error).startswith("gpu1: "), bad.message
    assert "killed by signal 9" in bad.message, bad.message
    listing = pair.ns_exec(a, f"ls {SSD}/datasets").stdout.split()
    assert "big.lmdb" not in listing and "big.lmdb.partial" in listing  # never taken for complete
    with SSHConnection(a.as_host(vars={"data_dir": SSD}), opts) as conn:  # rerun resumes
        again = stage_dataset(conn, Agent(conn), str(images))
        assert again["count"] == 3000 and again["resumed_from"] > 0


def test_agent_out_of_memory(pair: Fleet, ssh_config_file: Path) -> None:
    """The agent's interpreter with almost no address space (`ulimit -v`, as a container's memory
    limit): a clear error naming host and command with what the host said, a rerun with room works.
    (When Python itself raises MemoryError mid-command, the agent reports `facts: MemoryError`.)"""
    a, b = pair.hosts
    wrapper = "/root/lowmem-python3"
    pair.ns_exec(a, ["sh", "-c", f"cat > {wrapper} && chmod 755 {wrapper}"],
                 input='#!/bin/sh\nulimit -v 8000\nexec /usr/bin/python3 "$@"\n')

    def work(host: Host):
        with SSHConnection(host, options(ssh_config_file)) as conn:
            Agent(conn).call("ping")  # the agent is on the host
            python = wrapper if host.name == a.name else None
            return Agent(conn, python=python).call("facts")

    outcomes = for_each_host(pair.provision_hosts(), work, forks=2)
    assert outcomes[b.name].ok and outcomes[b.name].value["hostname"] == b.name
    message = str(outcomes[a.name].error)
    assert message.startswith("gpu1: agent facts gave no result ("), message
    assert "map" in message or "memory" in message.lower(), message  # the host's own words
    with SSHConnection(a.as_host(), options(ssh_config_file)) as conn:
        assert Agent(conn).call("facts")["hostname"] == "gpu1"  # with room: recovers


# -- the host's disk -------------------------------------------------------------------------------
def test_disk_full_during_upload(make_fleet, ssh_config_file: Path) -> None:
    small = make_fleet(2, root_size="24m")
    a, b = small.hosts
    opts = options(ssh_config_file)
    blob = os.urandom(32 * 1024 * 1024)

    def work(host: Host):
        with SSHConnection(host, opts) as conn:
            conn.put(blob if host.name == a.name else b"small", "~/big.bin")
            return True

    outcomes = for_each_host(small.provision_hosts(), work, forks=2)
    assert outcomes[b.name].ok
    bad = outcomes[a.name]
    assert not bad.ok and "gpu1: writing ~/big.bin failed" in str(bad.error)
    assert "No space left on device" in str(bad.error)
    listing = small.ns_exec(a, "ls -a /root").stdout.split()
    assert "big.bin" not in listing and not [n for n in listing if ".tmp-" in n]  # nothing half-written
    with SSHConnection(a.as_host(), opts) as conn:  # with room again: recovers
        conn.put(blob[: 4 * 1024 * 1024], "~/big.bin")
        assert len(conn.get("~/big.bin")) == 4 * 1024 * 1024


def test_disk_full_during_stage(make_fleet, ssh_config_file: Path, tmp_path: Path) -> None:
    from provision.staging import stage_dataset
    from provision.staging.sample import make_image_folder

    images = make_image_folder(tmp_path / "imgs", 1500, classes=3, size=48)
    small = make_fleet(1, ssd_size="3m")
    fh = small.hosts[0]
    with SSHConnection(fh.as_host(vars={"data_dir": SSD}), options(ssh_config_file)) as conn:
        agent = Agent(conn)
        with pytest.raises(HostError) as caught:
            stage_dataset(conn, agent, str(images))
        message = str(caught.value)
        assert message.startswith("gpu1: ") and ("space" in message or "disk full" in message), message
        listing = small.ns_exec(fh, f"ls {SSD}/datasets 2>/dev/null || true").stdout.split()
        assert "imgs.lmdb" not in listing  # never taken for complete
    bigger = make_fleet(1, ssd_size="64m")
    with SSHConnection(bigger.hosts[0].as_host(vars={"data_dir": SSD}), options(ssh_config_file)) as conn:
        assert stage_dataset(conn, Agent(conn), str(images))["count"] == 1500  # with room: works


def test_disk_full_during_relay_install_push(make_fleet, ssh_config_file: Path, tmp_path: Path) -> None:
    from provision.install import relay

    small = make_fleet(1, root_size="16m")
    fh = small.hosts[0]
    wheels = [tmp_path / f"pkg{i}-1.0-py3-none-any.whl" for i in range(3)]
    for w in wheels:
        w.write_bytes(os.urandom(8 * 1024 * 1024))
    with SSHConnection(fh.as_host(), options(ssh_config_file)) as conn:
        with pytest.raises(HostError, match=r"(?s)^gpu1: pushing wheels to .* failed: .*No space left"):
            relay.push(conn, wheels, "/root/wheels")
        assert small.ns_exec(fh, "ls -A /root/wheels").stdout.split() == []  # no half wheels
        assert relay.push(conn, wheels[:1], "/root/wheels")[0] == 1  # what fits goes through


def test_relay_replaces_a_corrupt_wheel_of_the_same_size(make_fleet, ssh_config_file: Path, tmp_path: Path) -> None:
    from provision.install import relay

    fleet = make_fleet(1)
    fh = fleet.hosts[0]
    wheel = tmp_path / "pkg-1.0-py3-none-any.whl"
    wheel.write_bytes(os.urandom(100_000))
    with SSHConnection(fh.as_host(), options(ssh_config_file)) as conn:
        assert relay.push(conn, [wheel], "/root/wheels")[0] == 1
        assert relay.push(conn, [wheel], "/root/wheels") == (0, 0)  # same hash on the host: kept
        fleet.ns_exec(fh, "printf XXXX | dd of=/root/wheels/pkg-1.0-py3-none-any.whl bs=1 seek=500 conv=notrunc 2>/dev/null")
        assert fleet.ns_exec(fh, "wc -c < /root/wheels/pkg-1.0-py3-none-any.whl").stdout.strip() == "100000"
        assert relay.push(conn, [wheel], "/root/wheels")[0] == 1  # corrupt: sent again
        on_host = fleet.ns_exec(fh, "sha256sum /root/wheels/pkg-1.0-py3-none-any.whl").stdout.split()[0]
        import hashlib

        assert on_host == hashlib.sha256(wheel.read_bytes()).hexdigest()


# -- what runs on the host ---------------------------------------------------------------------------
def test_timeout_ends_the_remote_process_group(pair: Fleet, ssh_config_file: Path) -> None:
    a, _ = pair.hosts
    tag = f"{secrets.randbelow(10**6)}"
    with SSHConnection(a.as_host(), options(ssh_config_file)) as conn:
        result = conn.run(f"sleep 60.{tag} & sleep 61.{tag}; echo never", timeout=1)
        assert result.exit_code == 124 and "timed out after 1s" in result.stderr
        wait_until("the group is gone", lambda: not host_processes(pair, a, f".{tag}"), timeout=10)
        assert conn.run("echo usable").stdout == "usable\n"


def test_pip_hung_is_stopped_by_the_task_timeout(pair: Fleet, ssh_config_file: Path, tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT))
    from provision.engine.runner import run_playbook
    from tests.support.package_index import PackageIndex

    a, b = pair.hosts
    (tmp_path / "wheels").mkdir()
    with PackageIndex(tmp_path / "wheels", host=pair.controller_address, delay=600) as index:
        playbook = tmp_path / "site.yml"
        playbook.write_text(
            "- hosts: all\n  gather_facts: false\n  tasks:\n"
            "    - name: install from a hung index\n"
            # download, not install: Debian's python3 refuses installs outside a venv (PEP 668)
            f"      shell: python3 -m pip download -d /tmp/pipdl --index-url {index.url} "
            f"--trusted-host {pair.controller_address} --timeout 900 provtest-none-xyz\n"
            "      when: inventory_hostname == 'gpu1'\n"
            "      timeout: 3\n"
            "    - command: echo after\n"
        )
        result = run_playbook(playbook, hosts=pair.provision_hosts(), options=options(ssh_config_file))
    by_host = {(r.host, r.task): r for r in result.results}
    hung = by_host[(a.name, "install from a hung index")]
    assert hung.status == "failed" and "timed out after 3s" in (hung.msg + str(hung.to_json())), hung.to_json()
    assert by_host[(b.name, "command")].status in ("changed", "ok")  # the other host went on
    wait_until("pip is gone from the host", lambda: not host_processes(pair, a, "provtest-none-xyz"), timeout=10)


def test_host_clock_far_off(pair: Fleet, ssh_config_file: Path) -> None:
    a, b = pair.hosts
    fake = "/run/fake-date"
    pair.ns_exec(a, ["sh", "-c", f"cat > {fake} && chmod 755 {fake} && mount --bind {fake} /usr/bin/date"],
                 input="#!/bin/sh\nexec /bin/echo 'Mon Jan  6 03:00:00 UTC 2031'\n")
    try:
        outcomes = _run_on_both(pair, options(ssh_config_file), lambda n: "date; nproc", "clock check")
        assert outcomes[a.name].value.stdout.startswith("Mon Jan  6 03:00:00 UTC 2031")
        assert all(o.ok for o in outcomes.values())
        with SSHConnection(a.as_host(), options(ssh_config_file)) as conn:
            facts = Agent(conn).call("facts")  # nothing on the host side trusts its wall clock
            assert facts["hostname"] == "gpu1"
    finally:
        pair.ns_exec(a, "umount /usr/bin/date", check=False)
