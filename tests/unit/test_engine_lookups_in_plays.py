"""Lookups, filters and tests inside real plays, as Ansible runs them: with_first_found's
search folder and undefined candidates, first_found's `paths`, role folders without tasks/,
the template module's template_* variables, `random`, Ansible's test names, and a rescue's
`ansible_failed_task` (the task as written, never rendered)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from provision.engine.templating import Templar, TemplateError
from tests.unit.test_engine_ansible_semantics import msgs, play, write

T = Templar()


def test_first_found_in_roles_and_loops(tmp_path: Path) -> None:
    role = tmp_path / "roles" / "r"
    write(role / "vars" / "debian.yml", "x: 1\n")
    write(role / "vars" / "default.yml", "x: 2\n")
    write(role / "files" / "f.txt", "f\n")
    write(role / "tasks" / "main.yml", """
        - include_vars: "{{ lookup('first_found', search) }}"
          vars:
            search:
              files: ["{{ nope_os | default('none') }}.yml", debian.yml, default.yml]
              paths: [vars]
        - debug: msg="{{ x }}"
        - set_fact: {found: "{{ item | basename }} {{ item | dirname | basename }}"}
          with_first_found:
            - "{{ ansible_lsb.id }}.txt"
            - "{{ undefined_thing }}-f.txt"
            - f.txt
        - debug: msg="{{ found }}"
        - include_vars: "{{ item }}"
          with_first_found: ["{{ missing }}.yml", default.yml]
        - debug: msg="{{ x }}"
    """)
    result = play(tmp_path, """
        - hosts: localhost
          gather_facts: false
          roles: [r]
    """)
    assert msgs(result) == [1, "f.txt files", 2]


def test_a_role_folder_without_tasks_is_a_role(tmp_path: Path) -> None:
    write(tmp_path / "roles" / "dep" / "vars" / "main.yml", "from_dep: yes\n")
    write(tmp_path / "roles" / "only_meta" / "meta" / "main.yml", "dependencies: [dep]\n")
    result = play(tmp_path, """
        - hosts: localhost
          gather_facts: false
          roles: [only_meta]
          tasks:
            - debug: msg="ran"
    """)
    assert msgs(result) == ["ran"]


def test_template_module_variables(tmp_path: Path) -> None:
    write(tmp_path / "templates" / "t.j2",
          "{{ template_path }}|{{ template_fullpath }}|{{ template_host }}|{{ template_uid }}|"
          "{{ template_mtime.year > 2000 }}|{{ template_run_date.year > 2000 }}|"
          "{{ template_destpath }}\n")
    result = play(tmp_path, """
        - hosts: localhost
          gather_facts: false
          tasks:
            - template: {src: t.j2, dest: TMP/out.txt}
    """)
    assert result.ok
    import pwd

    owner = pwd.getpwuid(os.stat(tmp_path / "templates" / "t.j2").st_uid).pw_name
    assert (tmp_path / "out.txt").read_text() == (
        f"t.j2|{tmp_path / 'templates' / 't.j2'}|{os.uname().nodename}|{owner}|True|True|"
        f"{tmp_path / 'out.txt'}\n"
    )


def test_rescue_sees_the_failed_task_as_written(tmp_path: Path) -> None:
    result = play(tmp_path, """
        - hosts: localhost
          gather_facts: false
          tasks:
            - block:
                - name: boom
                  debug: {msg: "{{ item.0 }}"}
                  with_together: []
              rescue:
                - debug: msg="{{ ansible_failed_task.name }} {{ ansible_failed_task.args.msg }}"
    """)
    assert msgs(result)[-1] == "boom {{ item.0 }}"


@pytest.mark.parametrize(
    ("expr", "value"),
    [
        ("[(3 | random) in [0, 1, 2]]", [True]),
        ("10 | random(start=5, step=5)", 5),
        ("(100 | random(seed='s')) == (100 | random(seed='s'))", True),
        ("['only'] | random", "only"),
        ("[1, 2, 3] | shuffle(seed=1) | sort", [1, 2, 3]),
        ("'/' is is_dir", True),
        ("'/' is is_file", False),
        ("'/' is is_abs", True),
        ("'/' is is_mount", True),
        ("'/' is same_file('/')", True),
        ("[1] is issubset([1, 2])", True),
        ("[1, 2] is issuperset([2])", True),
        ("(0.0 / 1) is isnan", False),
        ("'x' is nan", False),
    ],
)
def test_ansible_filters_and_tests(expr: str, value: Any) -> None:
    assert T.render("{{ " + expr + " }}", {}) == value


def test_random_refuses_start_on_a_sequence() -> None:
    with pytest.raises(TemplateError, match="start and step can only be used with integer"):
        T.render("{{ 'ab' | random(start=1) }}", {})
