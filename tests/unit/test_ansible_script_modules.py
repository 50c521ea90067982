"""Script modules from Ansible's module search path (a playbook's `library/`, a role's,
ANSIBLE_LIBRARY): old-style (a key=value arguments file) and WANT_JSON (a JSON one), run as
ansible-core runs them — the shebang's interpreter or `ansible_<name>_interpreter`, noise around
the JSON answer dropped. The same playbook, whose asserts say what Ansible does, passes under the
real ansible-playbook and under provision."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from provision.ansible_bridge import payload
from provision.engine.runner import run_playbook
from provision.inventory.model import Host

ANSIBLE = shutil.which("ansible-playbook") or str(Path(sys.executable).parent / "ansible-playbook")
pytestmark = pytest.mark.skipif(not os.access(ANSIBLE, os.X_OK), reason="needs ansible-core")

OLD_STYLE = """#!/bin/bash
# an old-style module: its arguments are shell words in the file named by $1
source "$1"
echo 'noise before the answer'
echo '[ not the answer ]'
printf '{"changed": true, "greeting": "%s", "check": "%s", "words": %d}\\n' "$greeting" "$_ansible_check_mode" $#
echo 'noise after'
"""

WANT_JSON = """#!/usr/bin/python
# WANT_JSON
import json, sys
with open(sys.argv[1]) as fh:
    args = json.load(fh)
print(json.dumps({"value": args["value"], "name": args["_ansible_module_name"],
                  "python": sys.executable}))
"""

SH_MODULE = """#!/bin/sh
printf '{"bash": "%s", "msg": "from ANSIBLE_LIBRARY"}\\n' "${BASH_VERSION:+yes}"
"""

ROLE_MODULE = """#!/bin/sh
echo '{"failed": true, "msg": "the role module says no"}'
"""

PLAY = """
- hosts: all
  gather_facts: false
  vars:
    ansible_python_interpreter: "{{ ansible_playbook_python }}"
  roles: [shipper]
  tasks:
    - kv_echo: {greeting: "hello 'quoted' world"}
      register: old
    - json_echo: {value: {a: [1, "two"], b: null}}
      register: js
    - lib_sh:
      register: plain
    - lib_sh:
      register: as_bash
      vars:
        ansible_sh_interpreter: /bin/bash
    - role_no:
      register: refused
      ignore_errors: true
    - assert:
        that:
          - old is changed
          - old.greeting == "hello 'quoted' world"
          - old.check == "False"
          - old.words == 1
          - js is not changed
          - 'js.value == {"a": [1, "two"], "b": None}'
          - js.name == "json_echo"
          - js.python == ansible_playbook_python
          - plain.bash == "" and plain.msg == "from ANSIBLE_LIBRARY"
          - as_bash.bash == "yes"
          - refused is failed and refused.msg == "the role module says no"
"""


def _module(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    _module(tmp_path / "library" / "kv_echo", OLD_STYLE)
    _module(tmp_path / "library" / "json_echo", WANT_JSON)
    _module(tmp_path / "elsewhere" / "lib_sh", SH_MODULE)
    _module(tmp_path / "roles" / "shipper" / "library" / "role_no", ROLE_MODULE)
    (tmp_path / "roles" / "shipper" / "tasks").mkdir(parents=True)
    (tmp_path / "roles" / "shipper" / "tasks" / "main.yml").write_text("- debug: {msg: hi}\n")
    (tmp_path / "site.yml").write_text(textwrap.dedent(PLAY).lstrip())
    monkeypatch.setenv("ANSIBLE_LIBRARY", str(tmp_path / "elsewhere"))
    payload.forget()
    return tmp_path


def test_script_modules_pass_the_same_asserts_under_ansible(project: Path) -> None:
    inventory = project / "hosts"
    inventory.write_text("localhost ansible_connection=local\n")
    done = subprocess.run(
        [ANSIBLE, "-i", str(inventory), "site.yml"],
        cwd=project, capture_output=True, text=True, timeout=300, check=False,
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]


def test_script_modules_run_under_provision_as_under_ansible(project: Path) -> None:
    out = run_playbook(project / "site.yml", hosts=[Host("localhost", local=True)])
    status = {r.task: r.status for r in out.results}
    failed = [r for r in out.results if r.status == "failed"]
    assert [r.task for r in failed] == ["role_no"], [r.result for r in failed]
    assert status["assert"] == "ok"
