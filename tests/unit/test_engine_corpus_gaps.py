"""Engine gaps the public roles corpus (tests/roles_corpus/STATUS.md) hit, each compared with
ansible-playbook on the same project (connection local; recaps and `show*` messages match)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.test_engine_real_roles import needs_ansible, same

pytestmark = [pytest.mark.slow, needs_ansible]


def test_relative_role_path_from_a_molecule_converge(tmp_path: Path) -> None:
    """`role: ../../../` is joined to `<playbook_dir>/roles/` and normalised lexically (that
    folder need not exist); the role keeps the name it was given."""
    stats, msgs = same(
        tmp_path,
        {
            "site.yml": """
            - import_playbook: role/molecule/default/converge.yml
            """,
            "role/molecule/default/converge.yml": """
            - hosts: localhost
              gather_facts: false
              roles:
                - role: ../../../
            """,
            "role/tasks/main.yml": """
            - name: show name
              debug: {msg: "{{ role_name }} {{ role_path | basename }}"}
            """,
        },
    )
    assert msgs == ["../../../ role"] and stats["ok"] == 1
