"""The play's role-name variables (`role_names`, `ansible_play_role_names`,
`ansible_role_names`, `ansible_dependent_role_names`) and include_role/import_role's
`ansible_parent_role_names`/`_paths`, as ansible-core's VariableManager and IncludeRole define
them. The playbook's asserts say what Ansible does; it passes under the real ansible-playbook and
under provision."""

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
  roles: [top]
  tasks:
    - name: before any include
      assert:
        that:
          - role_names == ['top', 'imported', 'grandchild', 'child']  # child: top's include_role
          - ansible_play_role_names == role_names
          - ansible_dependent_role_names | sort == ['base', 'mid']
          - ansible_role_names | sort == ['base', 'child', 'grandchild', 'imported', 'mid', 'top']
          - ansible_parent_role_names is undefined
    - include_role: {name: late}
    - name: after include_role
      assert:
        that:
          - "'late' in ansible_play_role_names"
          - "'late' in ansible_role_names and 'late' not in ansible_dependent_role_names"
    - import_role: {name: imported}

- hosts: all
  gather_facts: false
  tasks:
    - name: a new play starts afresh
      assert:
        that:
          - role_names == [] and ansible_role_names == [] and ansible_dependent_role_names == []
"""

ROLES = {
    "top/meta/main.yml": "dependencies: [mid]\n",
    "top/tasks/main.yml": """
        - include_role: {name: child}
        - assert: {that: [ansible_parent_role_names is undefined]}
    """,
    "mid/meta/main.yml": "dependencies: [base]\n",
    "mid/tasks/main.yml": "- assert: {that: [\"role_name == 'mid'\"]}\n",
    "base/tasks/main.yml": "- assert: {that: [\"'base' in ansible_dependent_role_names\"]}\n",
    "child/tasks/main.yml": """
        - assert:
            that:
              - ansible_parent_role_names == ['top']
              - ansible_parent_role_paths | length == 1
              - ansible_parent_role_paths[0] is search('/roles/top$')
        - import_role: {name: grandchild}
    """,
    "grandchild/tasks/main.yml": """
        - assert: {that: ["ansible_parent_role_names == ['child', 'top']"]}
    """,
    "imported/tasks/main.yml": "- debug: {msg: imported}\n",
    "late/tasks/main.yml": "- debug: {msg: late}\n",
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


def test_role_name_variables_under_provision(project: Path) -> None:
    out = run_playbook(project / "site.yml", hosts=[Host("localhost", local=True)])
    failed = [r.result for r in out.results if r.status == "failed"]
    assert failed == []
    asserts = [r for r in out.results if r.action in ("assert", "ansible.builtin.assert")]
    assert len(asserts) == 8 and all(r.status == "ok" for r in asserts)
