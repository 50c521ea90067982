"""Ansible's own module for a module provision does not implement, over real SSH: the payload
(built by the test environment's ansible-core in its own process) goes to the host on stdin and
runs with the host's python3 — as the login user, and with become through a sudo that asks for
its password (the password first on stdin, then the program). Parity with ansible-playbook for
a builtin module run this way: tests/parity/corpus/collections_modules.yml (known_hosts)."""

from __future__ import annotations

import sys
import textwrap
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from provision.ansible_bridge import payload
from provision.connection.base import ConnectOptions
from provision.engine.runner import run_playbook

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))
from tiny_collection import write_tiny_collection  # noqa: E402


def _run(tmp_path: Path, hosts: list, options: ConnectOptions, tasks: str, **kw: Any) -> dict[str, dict]:
    body = textwrap.indent(textwrap.dedent(tasks).strip("\n"), "    ")
    pb = tmp_path / "site.yml"
    pb.write_text(f"- hosts: all\n  gather_facts: false\n  tasks:\n{body}\n")
    out = run_playbook(pb, hosts=hosts, options=options, **kw)
    return {r.task: {**r.result, "_status": r.status} for r in out.results}


def test_a_collection_module_over_ssh_as_the_user_and_with_a_sudo_password(
    tmp_path: Path, make_fleet: Any, ssh_options: ConnectOptions, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kinds import SUDO_PASSWORD_USER

    payload.forget()
    write_tiny_collection(tmp_path / "collections")
    own = make_fleet(1, kinds="sudo")
    host = own.hosts[0]
    own.ns_exec(host, "rm -rf /root/pvaf && mkdir -p /root/pvaf")
    hosts = [host.as_host(user=SUDO_PASSWORD_USER)]
    monkeypatch.setenv("PV_TEST_BECOME", host.sudo_passwords[SUDO_PASSWORD_USER])
    options = replace(ssh_options, become_password_env="PV_TEST_BECOME")
    mine = f"/tmp/pvaf-{host.name}-{tmp_path.name}.txt"  # (the login user's own file)
    tasks = """
    - name: as user
      pvtest.tiny.note: {path: MINE, text: mine}
    - name: as root
      pvtest.tiny.note: {path: /root/pvaf/note.txt, text: "{{ inventory_hostname }}", token: hush}
      become: true
      register: n
    - name: fact
      copy: {dest: /root/pvaf/len.txt, content: "{{ pv_note_len }}"}
      become: true
    """.replace("MINE", mine)
    checked = _run(tmp_path, hosts, options, tasks, check=True, diff=True)
    assert checked["as root"]["_status"] == "changed" and checked["as root"]["check"] is True
    assert checked["as root"]["diff"]["after"] == host.name + "\n"
    assert own.ns_exec(host, "ls -A /root/pvaf").stdout.strip() == ""  # check mode wrote nothing
    first = _run(tmp_path, hosts, options, tasks)
    assert first["as user"]["uid"] != 0 and first["as root"]["uid"] == 0
    assert first["as root"]["token_given"] is True
    assert own.ns_exec(host, "cat /root/pvaf/note.txt").stdout == host.name + "\n"
    assert own.ns_exec(host, f"stat -c %U {mine}").stdout.strip() == SUDO_PASSWORD_USER
    assert own.ns_exec(host, "cat /root/pvaf/len.txt").stdout == str(len(host.name) + 1)
    second = _run(tmp_path, hosts, options, tasks)
    assert [t for t, r in second.items() if r["_status"] != "ok"] == []
    own.ns_exec(host, f"rm -f {mine}")


SCRIPT_MODULE = """#!/bin/sh
# an old-style module from the playbook's library/: its arguments are shell words in $1
. "$1"
echo "noise first"
printf '{"uid": %s, "msg": "%s"}\\n' "$(id -u)" "$msg"
"""


def test_a_script_module_from_library_over_ssh_as_the_user_and_with_a_sudo_password(
    tmp_path: Path, make_fleet: Any, ssh_options: ConnectOptions, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kinds import SUDO_PASSWORD_USER

    payload.forget()
    module = tmp_path / "library" / "shmod"
    module.parent.mkdir()
    module.write_text(SCRIPT_MODULE)
    own = make_fleet(1, kinds="sudo")
    host = own.hosts[0]
    hosts = [host.as_host(user=SUDO_PASSWORD_USER)]
    monkeypatch.setenv("PV_TEST_BECOME", host.sudo_passwords[SUDO_PASSWORD_USER])
    options = replace(ssh_options, become_password_env="PV_TEST_BECOME")
    tasks = """
    - name: as user
      shmod: {msg: "it's me"}
    - name: as root
      shmod: {msg: root here}
      become: true
    """
    done = _run(tmp_path, hosts, options, tasks)
    assert done["as user"]["_status"] == "ok" and done["as user"]["msg"] == "it's me"
    assert done["as user"]["uid"] != 0 and done["as root"]["uid"] == 0
    assert done["as root"]["msg"] == "root here"
    left = own.ns_exec(host, "ls -A /tmp | grep -c '^.pv-module' || true").stdout.strip()
    assert left == "0"  # the module's folder is gone
