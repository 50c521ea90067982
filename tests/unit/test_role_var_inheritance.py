"""Role variables through meta/main.yml dependency chains, as ansible-core's Role computes them:
a dependency sees its parents' parameters and vars/ (below its dependencies' vars/ and its own),
defaults merge dependencies' < parents' < its own, a dependency with the same parameters runs
once per play unless its meta says `allow_duplicates: true` (and a skipped one still exports its
vars to the role that lists it). The asserts say what Ansible does: the playbook passes under the
real ansible-playbook and under provision."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from provision.engine.runner import run_playbook
from provision.inventory.model import Host

ANSIBLE = shutil.which("ansible-playbook") or str(Path(sys.executable).parent / "ansible-playbook")

PLAY = """
- hosts: all
  gather_facts: false
  roles: [A, B]
  tasks:
    - assert:
        that:
          - seen == ['A', 'B']
          - leaf_runs | int == 1
"""

ROLES = {
    "A/meta/main.yml": "dependencies: [{role: common, vars: {tv: A}}]\n",
    "B/meta/main.yml": "dependencies: [{role: common, vars: {tv: B}}]\n",
    "common/meta/main.yml": "dependencies: [{role: nested, nv: '{{ tv }}'}]\n",
    "common/vars/main.yml": "prec: parent\n",
    "common/defaults/main.yml": "dflt: common\n",
    "nested/meta/main.yml": "allow_duplicates: true\ndependencies: [leaf]\n",
    "nested/tasks/main.yml": """
        - set_fact:
            seen: "{{ (seen | default([])) + [nv] }}"
        - assert:
            that:
              - prec == 'dependency'
              - dflt == 'common'
    """,
    "leaf/vars/main.yml": "prec: dependency\n",
    "leaf/defaults/main.yml": "dflt: leaf\n",
    "leaf/tasks/main.yml": """
        - set_fact:
            leaf_runs: "{{ (leaf_runs | default(0) | int) + 1 }}"
        - assert: {that: ["dflt == 'leaf'"]}
    """,
}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    for rel, text in ROLES.items():
        file = tmp_path / "roles" / rel
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(textwrap.dedent(text).lstrip())
    (tmp_path / "site.yml").write_text(textwrap.dedent(PLAY).lstrip())
    return tmp_path


@pytest.mark.skipif(not os.access(ANSIBLE, os.X_OK), reason="needs ansible-core")
def test_the_asserts_are_ansibles(project: Path) -> None:
    (project / "hosts").write_text("localhost ansible_connection=local\n")
    done = subprocess.run(
        [ANSIBLE, "-i", "hosts", "site.yml"],
        cwd=project, capture_output=True, text=True, timeout=300, check=False,
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]


def test_role_vars_through_dependency_chains_under_provision(project: Path) -> None:
    out = run_playbook(project / "site.yml", hosts=[Host("localhost", local=True)])
    failed = [r.result for r in out.results if r.status == "failed"]
    assert failed == []
    asserts = [r.task for r in out.results if r.action == "assert"]
    assert asserts == ["leaf : assert", "nested : assert", "nested : assert", "assert"]
