"""ansible-playbook's `--start-at-task` in provision's ansible-playbook entry point
(provision/cli/ansible_playbook.py, engine/start_at.py): the same playbook under both tools
shows the same plays and task banners, in order — the plays before the match run nothing (not
even fact gathering), a role task matches as `role : name` or an fnmatch pattern, a block's
rescue is passed over and its always kept, later plays run whole."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ANSIBLE = shutil.which("ansible-playbook") or str(Path(sys.executable).parent / "ansible-playbook")

SITE = """
- name: before
  hosts: all
  tasks:
    - name: second in the first play
      debug: {msg: not yet}
- name: holding it
  hosts: all
  gather_facts: false
  pre_tasks:
    - name: pre
      debug: {msg: pre}
  roles: [r]
  tasks:
    - block:
        - name: in block
          debug: {msg: b}
      rescue:
        - name: rescue
          debug: {msg: r}
      always:
        - name: always
          debug: {msg: a}
    - import_tasks: more.yml
- name: after
  hosts: all
  gather_facts: false
  tasks:
    - name: first of the last play
      debug: {msg: after}
"""


def _banners(out: str) -> list[str]:
    return [line.split(" *")[0] for line in out.splitlines() if line.startswith(("PLAY [", "TASK ["))]


@pytest.mark.skipif(not os.access(ANSIBLE, os.X_OK), reason="needs ansible-core")
@pytest.mark.parametrize("start", ["r : second*", "in block", "imported"])
def test_start_at_task_shows_what_ansible_shows(tmp_path: Path, start: str) -> None:
    (tmp_path / "site.yml").write_text(textwrap.dedent(SITE).lstrip())
    (tmp_path / "more.yml").write_text("- name: imported\n  debug: {msg: i}\n")
    tasks = tmp_path / "roles" / "r" / "tasks"
    tasks.mkdir(parents=True)
    tasks.joinpath("main.yml").write_text(
        "- name: first\n  debug: {msg: one}\n- name: second one\n  debug: {msg: two}\n"
    )
    (tmp_path / "hosts").write_text("localhost ansible_connection=local\n")
    outs = []
    for tool in ([ANSIBLE], [sys.executable, "-m", "provision.cli.ansible_playbook"]):
        env = {**os.environ, "PYTHONPATH": str(ROOT), "ANSIBLE_NOCOLOR": "1"}
        done = subprocess.run(
            [*tool, "-i", "hosts", "site.yml", "--start-at-task", start],
            cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False, env=env,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        outs.append(_banners(done.stdout))
    assert outs[1] == outs[0]
    assert "TASK [pre]" not in outs[0] and "TASK [first of the last play]" in outs[0]
