"""A task's `environment: PATH:` is its own commands' PATH, never provision's helpers': with a
PATH that lacks /usr/bin (`/usr/sbin:/sbin`, as a hardening role sets it around visudo),
lineinfile with `validate:` reads, checks and writes the file as Ansible's does, and the task's
shell still sees exactly that PATH. Compared with ansible-playbook (connection local)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.test_engine_real_roles import needs_ansible, same

pytestmark = [pytest.mark.slow, needs_ansible]


def test_lineinfile_validate_under_a_task_path_without_usr_bin(tmp_path: Path) -> None:
    stats, msgs = same(
        tmp_path,
        {
            "site.yml": """
            - hosts: localhost
              gather_facts: false
              environment:
                PATH: /usr/sbin:/sbin
              tasks:
                - copy: {dest: WORK/conf, content: "a=1\\n"}
                - lineinfile:
                    path: WORK/conf
                    line: b=2
                    validate: /usr/bin/test -s %s
                - lineinfile: {path: WORK/conf, line: b=2, validate: /usr/bin/test -s %s}
                - name: read the path
                  shell: echo "$PATH"
                  register: p
                  changed_when: false
                - name: show content
                  debug: {msg: "{{ lookup('file', 'WORK/conf') }} {{ p.stdout }}"}
            """,
        },
    )
    assert msgs == ["a=1\nb=2 /usr/sbin:/sbin"], msgs
    assert stats["changed"] == 2 and stats["failed"] == 0
