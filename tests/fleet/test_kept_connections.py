"""Connections kept across runs (--persist: connection/openssh_kept.py) and the persistent
executor (--executor: remote/executor.py, agent/serve.py) against real sshd hosts. What the
host saw is checked outside SSH (ns_exec): its sshd's TCP connections, its login shells."""

from __future__ import annotations

import dataclasses
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from actions import _descendants
from fleet import Fleet
from polling import wait_until
from test_openssh_transport import ssh_processes_with

from provision.connection import openssh_kept as kept
from provision.connection.openssh import OpenSSHConnection
from provision.connection.ssh import SSHConnection
from provision.errors import AgentError, Cancelled
from provision.remote.agent import Agent
from provision.remote.executor import ExecutorConnection

ROOT = Path(__file__).resolve().parents[2]


def master_pid(sock: str) -> int | None:
    said = subprocess.run(["ssh", "-S", sock, "-F", os.devnull, "-O", "check", "--", "x"],
                          capture_output=True, text=True, timeout=10)  # fmt: skip
    found = re.search(r"pid=(\d+)", said.stderr + said.stdout)
    return int(found.group(1)) if found else None


def logins_accepted(fh) -> int:
    """SSH logins the host's sshd accepted so far (it logs each one)."""
    return fh.log_file.read_text(errors="replace").count("Accepted publickey")


def provision(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "provision", *args], capture_output=True, text=True,
                          timeout=300, cwd=ROOT, env={**os.environ, "COLUMNS": "200", **(env or {})})  # fmt: skip


# -- kept connections ----------------------------------------------------------------------------
def test_a_kept_master_outlives_its_connection_and_serves_the_next_without_a_handshake(make_fleet, ssh_options):
    own = make_fleet(1)  # its sshd's connections are counted: nobody else's
    fh = own.hosts[0]
    options = dataclasses.replace(ssh_options, persist=30)
    first = OpenSSHConnection(fh.as_host(), options)
    assert first.kept and first.run("echo $((6 * 7))").stdout == "42\n"
    identity = first.identity()
    sock = os.path.join(kept.folder(fh.as_host(), options), "m")
    pid = master_pid(sock)
    assert pid is not None
    first.close()  # the run ends...
    assert kept.answers(sock) and master_pid(sock) == pid  # ...its master stays

    second = OpenSSHConnection(fh.as_host(), options)
    try:
        result = second.run("echo again; exit 4")
        assert (result.exit_code, result.stdout) == (4, "again\n")
        assert second.run("kill -9 $$").exit_code == 137
        assert second.identity() == identity  # the agent memo's key, without `ssh -G` again
        assert master_pid(sock) == pid  # the same master: no new TCP connect, kex or auth
        assert logins_accepted(fh) == 1
    finally:
        second.close()

    ended = kept.disconnect([fh.address])
    assert [e.display for e in ended] == [f"root@{fh.address}:{fh.port}"]
    assert not kept.answers(sock)
    wait_until("the kept master's ssh to end", lambda: not ssh_processes_with(sock), timeout=5)


def test_other_options_never_share_a_kept_master(make_fleet, ssh_options):
    own = make_fleet(1)
    fh = own.hosts[0]
    accept_new = dataclasses.replace(ssh_options, persist=30)
    strict = dataclasses.replace(accept_new, known_hosts="strict")
    host = fh.as_host()
    folders = {kept.key(host, accept_new), kept.key(host, strict),
               kept.key(dataclasses.replace(host, user="nobody"), accept_new),
               kept.key(dataclasses.replace(host, port=2222), accept_new)}  # fmt: skip
    assert len(folders) == 4
    assert kept.key(fh.as_host(), accept_new) == kept.key(host, dataclasses.replace(accept_new))
    with OpenSSHConnection(fh.as_host(), accept_new) as conn:
        assert conn.run("true").ok
    # strict with the key just recorded by accept-new: its own master, its own handshake
    with OpenSSHConnection(fh.as_host(), strict) as conn:
        assert conn.run("true").ok
    assert logins_accepted(fh) == 2


def test_a_kept_master_whose_host_dropped_it_is_replaced(make_fleet, ssh_options):
    own = make_fleet(1)
    fh = own.hosts[0]
    options = dataclasses.replace(ssh_options, persist=30)
    with OpenSSHConnection(fh.as_host(), options) as conn:
        assert conn.run("true").ok
    sock = os.path.join(kept.folder(fh.as_host(), options), "m")
    old = master_pid(sock)
    for pid in _descendants(fh.sshd.pid):  # the host ends every connection (a reboot, a re-image)
        os.kill(pid, signal.SIGKILL)
    wait_until("the kept master to notice", lambda: not kept.answers(sock), timeout=10)
    with OpenSSHConnection(fh.as_host(), options) as conn:
        assert conn.run("echo back").stdout == "back\n"
    assert master_pid(sock) not in (None, old)


def test_cli_runs_reuse_the_kept_connection_and_disconnect_ends_it(make_fleet, ssh_config_file, tmp_path):
    own = make_fleet(1)
    fh = own.hosts[0]
    inventory = own.write_inventory(tmp_path / "hosts.ini")
    playbook = tmp_path / "p.yml"
    playbook.write_text("- hosts: all\n  gather_facts: false\n  tasks:\n    - command: hostname\n")
    common = [str(playbook), "-i", str(inventory), "--ssh-config", str(ssh_config_file), "-vv"]
    first = provision("run", *common)
    assert first.returncode == 0, first.stderr
    assert "reusing the kept OpenSSH master" not in first.stderr
    second = provision("run", *common)
    assert second.returncode == 0, second.stderr
    assert "reusing the kept OpenSSH master" in second.stderr
    assert logins_accepted(fh) == 1  # two runs, one login

    off = provision("run", *common, "--persist", "0")  # a connection of its own, ended with it
    assert off.returncode == 0 and "reusing" not in off.stderr, off.stderr
    assert logins_accepted(fh) == 2

    gone = provision("disconnect", fh.name)
    assert gone.returncode == 0 and "kept connection ended" in gone.stderr, gone.stderr
    assert not [k for k in kept.kept() if kept.answers(k.socket)]
    assert "no kept connection" in provision("disconnect").stderr
    third = provision("run", *common)
    assert third.returncode == 0 and "reusing" not in third.stderr, third.stderr


# -- the persistent executor ---------------------------------------------------------------------
@pytest.fixture
def counted(make_fleet):
    """A host whose login shell counts its starts (~/.bashrc, sourced for every ssh command)."""
    own = make_fleet(1)
    fh = own.hosts[0]
    own.ns_exec(fh, "echo 'echo x >> /tmp/logins' >> /root/.bashrc; rm -f /tmp/logins")
    return own, fh


def logins(fleet: Fleet, fh) -> int:
    return int(fleet.ns_exec(fh, "cat /tmp/logins 2>/dev/null | wc -l").stdout.strip() or 0)


@pytest.mark.parametrize("transport", ["openssh", "paramiko"])
def test_executor_runs_every_command_through_one_login_with_the_same_contract(counted, ssh_options, transport):
    own, fh = counted
    inner = OpenSSHConnection(fh.as_host(), ssh_options) if transport == "openssh" else SSHConnection(fh.as_host(), ssh_options)
    with ExecutorConnection(inner) as conn:
        result = conn.run("echo out; echo err >&2; exit 3")
        assert (result.exit_code, result.stdout, result.stderr) == (3, "out\n", "err\n")
        assert conn.run("kill -9 $$").exit_code == 137
        binary = bytes(range(256)) * 512
        assert conn._execute("cat", source=[binary]).stdout == binary  # stdin and stdout byte-exact
        assert conn.run("cat", stdin=b"typed\n").stdout == "typed\n"
        assert conn.run('printf %s "$TOKEN"', env={"TOKEN": "s3cr$t 'q'"}).stdout == "s3cr$t 'q'"
        path = "/root/exec utor/it's.bin"
        conn.put(binary, path, mode=0o600)
        assert conn.get(path) == binary
        assert own.ns_exec(fh, f"stat -c %a \"{path}\"").stdout.strip() == "600"
        assert Agent(conn).call("ping")["protocol"] >= 1  # an agent call: one request too
        assert conn.run("echo $HOME; pwd").stdout == "/root\n/root\n"  # as a login shell starts
        assert conn.started == 1
    assert logins(own, fh) == 1  # ten commands, one login shell


def test_executor_timeout_and_interrupt_end_the_command_group_on_the_host(counted, ssh_options):
    own, fh = counted
    with ExecutorConnection(OpenSSHConnection(fh.as_host(), ssh_options)) as conn:
        slow = conn.run("sleep 300 & sleep 301; echo never", timeout=1)
        assert slow.exit_code == 124 and "timed out after 1s" in slow.stderr
        wait_until("the timed-out group to end", lambda: "sleep 30" not in own.ns_exec(fh, "ps -eo args").stdout, timeout=5)

        threading.Timer(0.5, conn.interrupt).start()
        started = time.monotonic()
        with pytest.raises(Cancelled):
            conn.run("sleep 302")
        assert time.monotonic() - started < 2.5  # Ctrl-C within 2 s (plus the tick)
        wait_until("the interrupted group to end", lambda: "sleep 302" not in own.ns_exec(fh, "ps -eo args").stdout, timeout=5)
        conn._interrupted_at = None  # a later command on the same executor still runs
        assert conn.run("echo after").stdout == "after\n"
    assert logins(own, fh) == 1


def test_a_dead_executor_fails_only_its_task_and_is_restarted_once(counted, ssh_options):
    own, fh = counted
    with ExecutorConnection(OpenSSHConnection(fh.as_host(), ssh_options)) as conn:
        executor_pid = int(conn.run("echo $PPID").stdout)
        with pytest.raises(AgentError, match="the executor ended"):
            conn.run(f"kill -9 {executor_pid}; sleep 5")
        assert conn.run("echo restarted").stdout == "restarted\n"
        assert conn.started == 2
        executor_pid = int(conn.run("echo $PPID").stdout)
        with pytest.raises(AgentError, match="the executor ended"):
            conn.run(f"kill -9 {executor_pid}; sleep 5")
        # twice dead: the commands go to separate sessions, as without --executor
        assert conn.run("echo sessions").stdout == "sessions\n"
        assert conn.started == 2
    assert logins(own, fh) == 3


def test_executor_sends_the_bundle_when_the_host_lost_the_agent_the_memo_remembers(counted, ssh_options):
    own, fh = counted
    with ExecutorConnection(OpenSSHConnection(fh.as_host(), ssh_options)) as conn:
        assert conn.run("echo first").stdout == "first\n"
    own.ns_exec(fh, "rm -rf /root/.cache/provision")  # a re-imaged disk; the controller's memo says "there"
    with ExecutorConnection(OpenSSHConnection(fh.as_host(), ssh_options)) as conn:
        assert conn.run("echo second").stdout == "second\n"  # the first request, sent again
        assert Agent(conn).call("ping")["protocol"] >= 1
        assert conn.started == 2  # the refused start (exit 97), then one with the bundle
    assert own.ns_exec(fh, "ls /root/.cache/provision").stdout.count("agent-") >= 1


SUDO_ANCESTOR = """\
p=$$
while [ "$p" -gt 1 ]; do
  if [ "$(cat /proc/$p/comm)" = sudo ]; then echo "$p"; exit 0; fi
  p=$(cut -d' ' -f4 /proc/$p/stat)
done
echo none
"""


def test_executor_become_runs_the_runs_become_tasks_under_one_sudo(make_fleet, ssh_config_file, tmp_path):
    """Become with --executor: one root executor, started through sudo (the password on its
    stdin) when the first become task runs, serves the later ones; the rest stay the user's."""
    import json

    from kinds import SUDO_PASSWORD_USER

    own = make_fleet(1, kinds="sudo")
    fh = own.hosts[0]
    password = fh.sudo_passwords[SUDO_PASSWORD_USER]
    inventory = tmp_path / "hosts.ini"
    line = (f"{fh.name} ansible_host={fh.address} ansible_port={fh.port} ansible_user={SUDO_PASSWORD_USER} "
            f"ansible_ssh_private_key_file={fh.key_file} ansible_become_password=")  # fmt: skip
    ancestor = "\n".join("        " + ln for ln in SUDO_ANCESTOR.splitlines())
    playbook = tmp_path / "p.yml"
    playbook.write_text(
        "- hosts: all\n  gather_facts: false\n  become: true\n  tasks:\n"
        "    - name: who\n      command: id -u\n"
        f"    - name: sudo first\n      shell: |\n{ancestor}\n"
        '    - name: as root\n      copy:\n        content: "x\\n"\n        dest: /root/pv-become\n        mode: "0600"\n'
        f"    - name: sudo again\n      shell: |\n{ancestor}\n"
        "    - name: the user\n      command: id -u\n      become: false\n"
    )
    inventory.write_text(f"[all]\n{line}{password}\n")
    common = [str(playbook), "-i", str(inventory), "--ssh-config", str(ssh_config_file), "--executor", "--json"]
    run = provision("run", *common)
    assert run.returncode == 0, run.stderr[-3000:]
    results = {r["task"]: r for r in json.loads(run.stdout)["results"]}
    assert results["who"]["result"]["stdout"] == "0"
    first, again = results["sudo first"]["result"]["stdout"], results["sudo again"]["result"]["stdout"]
    assert first.isdigit() and first == again  # one sudo, kept: not one per task
    assert results["the user"]["result"]["stdout"] not in ("0", "")
    assert own.ns_exec(fh, "stat -c '%U %a' /root/pv-become").stdout.split() == ["root", "600"]
    assert password not in run.stdout + run.stderr

    inventory.write_text(f"[all]\n{line}wrong-{password}\n")  # rejected: the task says so, as without
    wrong = provision("run", *common)
    assert wrong.returncode != 0
    who = {r["task"]: r for r in json.loads(wrong.stdout)["results"]}["who"]["result"]
    assert who["failed"] and "incorrect password" in who["stderr"], who
    assert "1 incorrect password attempt" in who["stderr"], who  # no protocol line taken for a try
    assert password not in wrong.stdout + wrong.stderr
