"""A file include_tasks names is Ansible's to load when the include runs: a broken one (not a
list of tasks) fails that include when it runs — the tasks before it run, an include its `when`
skips never loads it, a file only such an include reaches is no load error — while
import_tasks of it fails the playbook at load. The same playbooks under ansible-playbook."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from provision.engine.playbook_model import PlaybookError
from provision.engine.runner import run_playbook
from provision.inventory.model import Host

ANSIBLE = shutil.which("ansible-playbook") or str(Path(sys.executable).parent / "ansible-playbook")

SITE = """
- hosts: all
  gather_facts: false
  tasks:
    - name: before
      debug: {msg: before}
    - include_tasks: broken.yml
      when: false
    - include_tasks: outer.yml
"""


def _project(tmp_path: Path, site: str) -> Path:
    (tmp_path / "site.yml").write_text(textwrap.dedent(site).lstrip())
    (tmp_path / "broken.yml").write_text("just a sentence, not a list of tasks\n")
    (tmp_path / "outer.yml").write_text(
        "- name: in outer\n  debug: {msg: outer}\n- include_tasks: broken.yml\n"
    )
    (tmp_path / "hosts").write_text("localhost ansible_connection=local\n")
    return tmp_path / "site.yml"


def _ansible(pb: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [ANSIBLE, "-i", "hosts", pb.name], cwd=pb.parent, capture_output=True, text=True,
        timeout=300, check=False,
    )  # fmt: skip


@pytest.mark.skipif(not os.access(ANSIBLE, os.X_OK), reason="needs ansible-core")
def test_ansible_fails_the_include_when_it_runs(tmp_path: Path) -> None:
    done = _ansible(_project(tmp_path, SITE))
    assert done.returncode == 2 and "TASK [in outer]" in done.stdout, done.stdout + done.stderr
    imported = _ansible(_project(tmp_path, SITE.replace("include_tasks: outer.yml", "import_tasks: broken.yml")))
    assert imported.returncode != 0 and "TASK [before]" not in imported.stdout  # a load error


def test_provision_fails_the_include_when_it_runs(tmp_path: Path) -> None:
    out = run_playbook(_project(tmp_path, SITE), hosts=[Host("localhost", local=True)])
    ran = [(r.task, r.status) for r in out.results]
    assert ran[0] == ("before", "ok") and ran[1][1] == "skipped", ran
    assert ("in outer", "ok") in ran and ran[-1][1] == "failed", ran
    assert "broken.yml" in out.results[-1].msg
    with pytest.raises(PlaybookError, match="broken.yml.*just a sentence"):  # shown, as Ansible
        run_playbook(
            _project(tmp_path, SITE.replace("include_tasks: outer.yml", "import_tasks: broken.yml")),
            hosts=[Host("localhost", local=True)],
        )
