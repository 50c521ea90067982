"""package_facts is provision's own: the same `ansible_facts.packages` as Ansible's module gives
(names, versions, fields, `source`), compared with ansible-playbook (connection local)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.unit.test_engine_real_roles import needs_ansible, same

pytestmark = [pytest.mark.slow, needs_ansible]


@pytest.mark.skipif(shutil.which("dpkg") is None, reason="an apt host")
def test_package_facts_like_ansibles(tmp_path: Path) -> None:
    stats, msgs = same(
        tmp_path,
        {
            "site.yml": """
            - hosts: localhost
              gather_facts: false
              tasks:
                - package_facts: {manager: auto}
                - name: show dpkg
                  debug: {msg: "{{ ansible_facts.packages['dpkg'] }}"}
                - name: show count
                  debug: {msg: "{{ ansible_facts.packages | length }} {{ packages | length }}"}
                - package_facts: {manager: [apt], strategy: all}
                - name: show sources
                  debug: {msg: "{{ ansible_facts.packages.values() | map('first') | map(attribute='source') | unique | list }}"}
                - package_facts: {manager: [portage]}
                  ignore_errors: true
            """,
        },
    )
    assert msgs[0][0]["name"] == "dpkg" and msgs[0][0]["source"] == "apt", msgs
    assert msgs[2] == ["apt"] and stats["ignored"] == 1


@pytest.mark.skipif(shutil.which("dpkg") is None, reason="an apt host")
def test_package_facts_needs_no_ansible(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Native: with no Ansible to fall back on, package_facts still runs."""
    from provision.ansible_bridge import payload
    from provision.engine.runner import run_playbook
    from provision.inventory.model import Host

    monkeypatch.setenv("PROVISION_ANSIBLE_PYTHON", str(tmp_path / "no-ansible"))
    payload.forget()
    pb = tmp_path / "site.yml"
    pb.write_text(
        "- hosts: localhost\n  gather_facts: false\n  tasks:\n    - package_facts: {}\n"
        "    - copy: {dest: " + str(tmp_path / "out") + ", content: \"{{ ansible_facts.packages.dpkg[0].source }}\"}\n"
    )
    try:
        result = run_playbook(pb, hosts=[Host("localhost", local=True)])
    finally:
        payload.forget()
    assert result.recap["localhost"].failed == 0
    assert (tmp_path / "out").read_text() == "apt"
