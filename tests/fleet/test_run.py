"""`provision run` against the SSH test fleet: hosts in parallel over one connection each,
failures and unreachable hosts per host, run_once / any_errors_fatal across real hosts, and the
shipped playbooks/base.yml (idempotent; skips apt cleanly without root)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from provision.connection.base import ConnectOptions
from provision.engine.runner import run_playbook
from provision.inventory.model import Host

ROOT = Path(__file__).resolve().parents[2]
BASE = ROOT / "playbooks" / "base.yml"


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="200", **(env or {}))
    return subprocess.run(
        [sys.executable, "-m", "provision", "run", *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=300,
    )


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


def sessions(fleet: Any) -> dict[str, int]:
    """Accepted SSH logins so far, per host (sshd logs each one)."""
    return {
        h.name: h.log_file.read_text(errors="replace").count("Accepted publickey")
        for h in fleet.hosts
    }


def test_run_on_8_hosts_one_connection_each_json(
    tmp_path: Path, fleet: Any, ssh_config_file: Path
) -> None:
    inventory = fleet.write_inventory(tmp_path / "hosts.ini")
    pb = write(
        tmp_path / "site.yml",
        """
        - hosts: gpus
          tasks:
            - file: path=/tmp/pv-run state=directory
            - command: nproc
              register: n
              changed_when: false
            - copy: dest=/tmp/pv-run/who content="{{ inventory_hostname }} {{ ansible_processor_vcpus }}"
            - command: df -h /
              changed_when: false
            - debug: msg="{{ n.stdout }}"
        """,
    )
    before = sessions(fleet)
    proc = cli(str(pb), "-i", str(inventory), "--json", "--ssh-config", str(ssh_config_file))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert sorted(doc["recap"]) == sorted(h.name for h in fleet.hosts)
    for stats in doc["recap"].values():
        assert stats["failed"] == 0 and stats["unreachable"] == 0 and stats["ok"] == 6
    after = sessions(fleet)
    # facts (agent) + 5 tasks over ONE SSH connection per host
    assert {name: after[name] - before[name] for name in after} == {h.name: 1 for h in fleet.hosts}
    for host in fleet.hosts:
        content = fleet.ns_exec(host, "cat /tmp/pv-run/who").stdout
        assert content.startswith(f"{host.name} ")
    second = json.loads(
        cli(str(pb), "-i", str(inventory), "--json", "--ssh-config", str(ssh_config_file)).stdout
    )
    assert all(s["changed"] == 0 for s in second["recap"].values())


def test_agent_uploaded_once_across_runs(
    tmp_path: Path, fleet: Any, ssh_options: ConnectOptions
) -> None:
    pb = write(
        tmp_path / "site.yml", "- hosts: all\n  tasks: [{debug: {msg: '{{ ansible_hostname }}'}}]\n"
    )
    hosts = fleet.provision_hosts()[:2]
    run_playbook(pb, hosts=hosts, options=ssh_options)
    stamp = fleet.ns_exec(fleet.hosts[0], "stat -c %i /root/.cache/provision/agent-*").stdout
    result = run_playbook(pb, hosts=hosts, options=ssh_options)
    assert result.ok
    assert (
        fleet.ns_exec(fleet.hosts[0], "stat -c %i /root/.cache/provision/agent-*").stdout == stamp
    )


def test_unreachable_and_failing_hosts_do_not_stop_the_others(
    tmp_path: Path, fleet: Any, ssh_options: ConnectOptions
) -> None:
    dead = Host(
        "dead", address=fleet.dead_address(), port=22, user="root", key_file=fleet.hosts[0].key_file
    )
    options = ConnectOptions(
        known_hosts="accept-new",
        connect_timeout=2.0,
        connect_retries=0,
        ssh_config=ssh_options.ssh_config,
    )
    pb = write(
        tmp_path / "site.yml",
        """
        - hosts: all
          gather_facts: false
          tasks:
            - command: "false"
              when: inventory_hostname == 'gpu2'
            - file: path=/tmp/pv-alive state=touch
        """,
    )
    result = run_playbook(pb, hosts=[dead, *fleet.provision_hosts()[:3]], options=options)
    assert result.recap["dead"].unreachable == 1
    assert result.failed_hosts == ["gpu2"]
    assert result.recap["gpu1"].changed == 1 and result.recap["gpu3"].changed == 1
    assert result.exit_code() == 1  # a failure outranks unreachable
    unreachable = [r for r in result.results if r.host == "dead" and r.status == "unreachable"][0]
    assert fleet.dead_address() in unreachable.msg


def test_run_once_and_any_errors_fatal_over_ssh(
    tmp_path: Path, fleet: Any, ssh_options: ConnectOptions
) -> None:
    hosts = fleet.provision_hosts()[:4]
    pb = write(
        tmp_path / "site.yml",
        """
        - hosts: all
          gather_facts: false
          tasks:
            - shell: hostname
              run_once: true
              register: leader
            - copy: dest=/tmp/pv-leader content="{{ leader.stdout }}"
        - hosts: all
          gather_facts: false
          any_errors_fatal: true
          tasks:
            - fail: msg="stop everyone"
              when: inventory_hostname == 'gpu3'
            - file: path=/tmp/pv-after-fatal state=touch
        """,
    )
    result = run_playbook(pb, hosts=hosts, options=ssh_options)
    for host in fleet.hosts[:4]:
        assert fleet.ns_exec(host, "cat /tmp/pv-leader").stdout == "gpu1"
    assert [r.host for r in result.results if r.action == "shell"] == ["gpu1"]
    touched = [
        h.name
        for h in fleet.hosts[:4]
        if fleet.ns_exec(h, "test -e /tmp/pv-after-fatal", check=False).returncode == 0
    ]
    assert touched == []  # lockstep: nobody started the next task
    assert result.failed_hosts == ["gpu3"]


def test_base_playbook_idempotent(tmp_path: Path, fleet: Any, ssh_config_file: Path) -> None:
    inventory = fleet.write_inventory(tmp_path / "hosts.ini")
    args = [
        str(BASE),
        "-i",
        str(inventory),
        "-l",
        "gpu5:gpu6",
        "--json",
        "--ssh-config",
        str(ssh_config_file),
        # packages this machine already has: dpkg is shared with the fleet hosts
        "-e",
        '{"provision_base_packages": ["tmux", "curl"]}',
        "-e",
        "provision_pip_index_url=https://mirror.example/simple",
    ]
    first = cli(*args)
    assert first.returncode == 0, first.stderr
    assert all(s["changed"] > 0 for s in json.loads(first.stdout)["recap"].values())
    second = cli(*args)
    assert second.returncode == 0, second.stderr
    assert all(s["changed"] == 0 for s in json.loads(second.stdout)["recap"].values()), (
        second.stdout
    )
    host = fleet.host("gpu5")
    env_file = fleet.ns_exec(host, "cat /root/.provision_env").stdout
    assert "export HF_HOME=/root/autodl-tmp/.cache/huggingface" in env_file
    assert "export PIP_CACHE_DIR=/root/autodl-tmp/.cache/pip" in env_file
    login = fleet.ns_exec(host, "HOME=/root bash -ic 'echo $TORCH_HOME' 2>/dev/null").stdout.strip()
    assert login == "/root/autodl-tmp/.cache/torch"
    pip_conf = fleet.ns_exec(host, "cat /root/.config/pip/pip.conf").stdout
    assert "index-url = https://mirror.example/simple" in pip_conf
    apt = [r for r in json.loads(second.stdout)["results"] if r["task"] == "tools people expect"]
    assert {r["status"] for r in apt} == {"ok"}


def test_base_playbook_check_mode_on_fresh_host_changes_nothing(
    tmp_path: Path, fleet: Any, ssh_config_file: Path
) -> None:
    inventory = fleet.write_inventory(tmp_path / "hosts.ini")
    proc = cli(
        str(BASE),
        "-i",
        str(inventory),
        "-l",
        "gpu7",
        "--check",
        "--json",
        "--ssh-config",
        str(ssh_config_file),
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["recap"]["gpu7"]["changed"] > 0
    host = fleet.host("gpu7")
    assert fleet.ns_exec(host, "test -e /root/.provision_env", check=False).returncode != 0
    assert fleet.ns_exec(host, "test -e /root/autodl-tmp/.cache", check=False).returncode != 0


def test_base_playbook_without_root_skips_apt(
    tmp_path: Path, make_fleet: Any, ssh_config_file: Path
) -> None:
    small = make_fleet(1)
    host = small.hosts[0]
    small.set_password(host, "alice", "pv-test-pw-1")
    inventory = write(
        tmp_path / "hosts.ini", f"{host.name} ansible_host={host.address} ansible_user=alice\n"
    )
    proc = cli(
        str(BASE),
        "-i",
        str(inventory),
        "--json",
        "--password-env",
        "PV_ALICE_PW",
        "--ssh-config",
        str(ssh_config_file),
        env={"PV_ALICE_PW": "pv-test-pw-1"},
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    apt = [r for r in doc["results"] if r["task"] == "tools people expect"]
    assert [r["status"] for r in apt] == ["skipped"]
    assert "pv-test-pw-1" not in proc.stdout + proc.stderr
    env_file = small.ns_exec(host, "cat /home/alice/.provision_env").stdout
    assert "TORCH_HOME=" in env_file
