"""First contact with the agent on real sshd hosts: one channel for the first call (bootstrap,
bundle and request together), none of the bundle on a warm run, a damaged agent replaced, two
controllers at once, and a Debian 11 host (Python 3.9) from cold. Host state is read through
ns_exec, never through the connection under test."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from fleet import Fleet

from provision.connection.ssh import SSHConnection
from provision.remote.agent import Agent, agent_digest

ROOT = Path(__file__).resolve().parents[2]
CACHE = "/root/.cache/provision"


class CountingSSH(SSHConnection):
    """A real SSHConnection that counts the channels (remote commands) it opens."""

    channels = 0

    def _session(self, transport, command, open_timeout=None):
        self.channels += 1
        return super()._session(transport, command, open_timeout)


def _listing(fleet: Fleet, host) -> list[str]:
    return sorted(fleet.ns_exec(host, f"ls -A {CACHE} 2>/dev/null || true").stdout.split())


def test_cold_facts_is_one_channel_and_a_warm_run_sends_no_bundle(fleet: Fleet, ssh_options):
    host = fleet.hosts[2]
    fleet.ns_exec(host, f"rm -rf {CACHE}")
    with CountingSSH(host.as_host(), ssh_options) as conn:
        agent = Agent(conn)
        facts = agent.call("facts")
        assert facts["hostname"] == host.name
        assert (conn.channels, agent.bundles_sent, agent.uploads) == (1, 1, 1)
    assert _listing(fleet, host) == [f"agent-{agent_digest('core')}"]  # the core only, no temp files

    with CountingSSH(host.as_host(), ssh_options) as conn:  # a later run: the memo knows
        agent = Agent(conn)
        assert agent.call("facts", {"only": ["hostname"]})["hostname"] == host.name
        assert (conn.channels, agent.bundles_sent, agent.uploads) == (1, 0, 0)
        # a heavy command ships the full agent in its own (one) call
        agent.call("dataset_status", {"path": "/root/no-dataset-here"})
        assert (conn.channels, agent.bundles_sent, agent.uploads) == (2, 1, 1)
    assert f"agent-{agent_digest('full')}" in _listing(fleet, host)


def test_the_shipped_bytecode_is_used_on_a_host_with_the_controllers_python(fleet: Fleet, connect):
    host = fleet.hosts[3]
    fleet.ns_exec(host, f"rm -rf {CACHE}")
    agent = Agent(connect(host.as_host()))
    version = agent.call("ping")["python"]
    if version.rsplit(".", 1)[0] != "{}.{}".format(*sys.version_info[:2]):
        pytest.skip(f"the host's Python {version} differs from the controller's")
    folder = f"{CACHE}/agent-{agent_digest('core')}"
    find = f"find {folder} -name '*.pyc' -newer {folder}/MANIFEST"
    agent.call("facts")
    assert fleet.ns_exec(host, find).stdout == ""  # nothing compiled on the host


def test_a_partial_agent_on_the_host_is_replaced(fleet: Fleet, ssh_options):
    host = fleet.hosts[4]
    fleet.ns_exec(host, f"rm -rf {CACHE}")
    with SSHConnection(host.as_host(), ssh_options) as conn:
        Agent(conn).call("ping")
    folder = f"{CACHE}/agent-{agent_digest('core')}"
    fleet.ns_exec(host, f": > {folder}/provision/agent/facts/memory.py && rm -f {folder}/provision/agent/facts/cpu.py")
    with CountingSSH(host.as_host(), ssh_options) as conn:
        agent = Agent(conn)  # believes the agent is there: sends nothing, hears 97, sends it
        assert agent.call("facts", {"only": ["memory", "cpu"]})["memory"]
        assert (conn.channels, agent.bundles_sent, agent.uploads) == (2, 1, 1)
    assert fleet.ns_exec(host, f"test -s {folder}/provision/agent/facts/cpu.py", check=False).returncode == 0
    assert _listing(fleet, host) == [f"agent-{agent_digest('core')}"]


def test_two_controllers_make_first_contact_with_one_host_at_once(fleet: Fleet, tmp_path, ssh_config_file):
    host = fleet.hosts[5]
    fleet.ns_exec(host, f"rm -rf {CACHE}")
    inventory = tmp_path / "hosts.ini"
    inventory.write_text(
        f"{host.name} ansible_host={host.address} ansible_port={host.port} ansible_user={host.user} "
        f"ansible_ssh_private_key_file={host.key_file}\n"
    )
    procs = []
    for i in range(2):  # separate controller state: both send the bundle, both unpack
        home = tmp_path / f"controller{i}"
        home.mkdir()
        env = dict(os.environ, PYTHONPATH=str(ROOT), PROVISION_HOME=str(home / "state"),
                   PROVISION_KNOWN_HOSTS=str(home / "known_hosts"),
                   PROVISION_USER_KNOWN_HOSTS=str(home / "user_known_hosts"))
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "provision", "facts", "all", "-i", str(inventory), "--json",
             "--ssh-config", str(ssh_config_file)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path,
        ))
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err[-2000:]
        assert json.loads(out)["hosts"][host.name]["hostname"] == host.name
    assert _listing(fleet, host) == [f"agent-{agent_digest('core')}"]  # one agent, no leftovers


def test_a_debian_11_host_with_python_3_9_works_from_cold(make_fleet, connect):
    small = make_fleet(1, kinds="bullseye")
    host = small.hosts[0]
    agent = Agent(connect(host.as_host()))
    facts = agent.call("facts", {"only": ["hostname", "python"]})
    assert facts["hostname"] == host.name
    assert facts["python"]["agent"]["version"].startswith("3.9.")
    assert agent.uploads == 1
    folder = f"{CACHE}/agent-{agent_digest('core')}"
    pycs = small.ns_exec(host, f"find {folder} -name 'protocol.cpython-39.pyc'").stdout
    assert pycs.strip(), "the host's Python 3.9 compiled and cached the agent's bytecode"
    assert Agent(connect(host.as_host())).call("ping")["python"].startswith("3.9.")


def test_become_with_a_sudo_password_cold_puts_the_agent_in_roots_home(make_fleet, ssh_options, monkeypatch):
    from kinds import SUDO_PASSWORD_USER

    small = make_fleet(1, kinds="sudo")
    host = small.hosts[0]
    monkeypatch.setenv("PV_TEST_BECOME", host.sudo_passwords[SUDO_PASSWORD_USER])
    options = replace(ssh_options, become=True, become_password_env="PV_TEST_BECOME")
    with CountingSSH(host.as_host(user=SUDO_PASSWORD_USER), options) as conn:
        agent = Agent(conn)
        facts = agent.call("facts", {"only": ["hostname"]})
        assert facts["hostname"] == host.name and agent.uploads == 1
        assert conn.channels == 2  # how sudo behaves here (asked once per connection), then the call
    assert _listing(small, host) == [f"agent-{agent_digest('core')}"]  # root's cache
    user_home = small.ns_exec(host, f"ls -A ~{SUDO_PASSWORD_USER}/.cache 2>/dev/null || true").stdout
    assert "provision" not in user_home
