"""Loading and validating playbooks: every mistake reported with file:line:col before anything
runs; key=value parsing; imports and roles resolved statically."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from provision.engine.playbook import Block, Include, PlaybookError, Task, load_playbook, parse_kv
from provision.engine.runner import run_playbook
from provision.errors import ConfigError
from provision.inventory.model import Host
from provision.modules.base import get_module


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


def problems(tmp_path: Path, text: str) -> str:
    pb = write(tmp_path / "site.yml", text)
    with pytest.raises(ConfigError) as err:
        load_playbook(pb)
    return str(err.value)


def test_yaml_syntax_error_has_position(tmp_path: Path) -> None:
    msg = problems(
        tmp_path,
        """
        - hosts: all
          tasks:
            - name: x
              command: [echo
        """,
    )
    assert "site.yml:5:1" in msg and "YAML syntax error" in msg


def test_unknown_module_with_suggestion(tmp_path: Path) -> None:
    msg = problems(
        tmp_path,
        """
        - hosts: all
          tasks:
            - name: x
              comand: echo hi
        """,
    )
    assert "site.yml:4:7: unknown module 'comand'" in msg
    assert "did you mean 'command'" in msg


def test_unknown_keyword_next_to_a_module(tmp_path: Path) -> None:
    msg = problems(
        tmp_path,
        """
        - hosts: all
          tasks:
            - command: echo hi
              whenn: true
        """,
    )
    assert "site.yml:4:7: unknown task keyword 'whenn' (did you mean 'when'?)" in msg


def test_bad_arguments_fail_the_task_when_it_runs_with_ansibles_text(tmp_path: Path) -> None:
    """Ansible checks a task's arguments when the task runs: the load succeeds, a skipped task
    never fails, and each bad task fails at its position with Ansible's wording."""
    pb = write(
        tmp_path / "site.yml",
        f"""
        - hosts: all
          gather_facts: false
          tasks:
            - copy: {{dest: /nonexistent/x, content: hi, modee: "0644"}}
              when: false
            - copy:
                dest: {tmp_path}/x
                content: hi
                modee: "0644"
              ignore_errors: true
            - file: {{path: {tmp_path}/y, state: sideways}}
              ignore_errors: true
            - copy: {{content: hi}}
              ignore_errors: true
            - file: path={tmp_path}/z force=maybe
              ignore_errors: true
        """,
    )
    load_playbook(pb)  # nothing is checked before the tasks run
    result = run_playbook(pb, hosts=[Host("localhost", local=True)])
    msgs = [r.msg for r in result.results if r.status == "failed"]
    assert result.recap["localhost"].skipped == 1 and len(msgs) == 4
    assert "site.yml:6:7)" in msgs[0]
    assert "Unsupported parameters for (copy) module: modee. Supported parameters include:" in msgs[0]
    assert "argument 'state' must be one of" in msgs[1]
    assert "requires argument 'dest'" in msgs[2]
    assert "argument 'force' must be a boolean" in msgs[3]
    assert not (tmp_path / "x").exists()

def test_play_keyword_template_and_notify_errors(tmp_path: Path) -> None:
    msg = problems(
        tmp_path,
        """
        - hosts: all
          gather_fact: false
          tasks:
            - debug: msg="{{ broken( }}"
            - command: echo
              notify: restart thing
              when: "x ==="
          handlers:
            - name: restart other
              debug: msg=x
        """,
    )
    assert "site.yml:2:3: unknown play keyword 'gather_fact' (did you mean 'gather_facts'?)" in msg
    assert "site.yml:4:14: template error" in msg
    assert "notify: no handler named 'restart thing'" in msg
    assert "when: invalid expression" in msg


def test_missing_files_roles_and_import_loops(tmp_path: Path) -> None:
    write(tmp_path / "a.yml", "- import_tasks: b.yml\n")
    write(tmp_path / "b.yml", "- import_tasks: a.yml\n")
    msg = problems(
        tmp_path,
        """
        - hosts: all
          roles: [nosuchrole]
          tasks:
            - import_tasks: a.yml
            - include_tasks: missing.yml
        """,
    )
    assert "role 'nosuchrole' not found" in msg
    assert "import loop" in msg
    assert "tasks file 'missing.yml' not found" in msg


def test_unsupported_keywords_say_what_to_do(tmp_path: Path) -> None:
    msg = problems(
        tmp_path,
        """
        - hosts: all
          max_fail_percentage: 10
          tasks:
            - command: echo
              delegate_to: gpu2
            - command: sleep 100
              throttle: 2
        """,
    )
    assert "site.yml:2:3: max_fail_percentage is not supported (any_errors_fatal is)" in msg
    assert "site.yml:5:20: delegate_to: 'gpu2' is not supported" in msg
    assert "(delegate_to: localhost) is" in msg  # the nearest supported alternative
    assert "site.yml:7:7: throttle is not supported (use --forks)" in msg


def test_not_a_list_of_plays(tmp_path: Path) -> None:
    assert "a playbook is a list of plays" in problems(tmp_path, "hosts: all\ntasks: []\n")
    assert "play needs `hosts:`" in problems(tmp_path, "- tasks: []\n")


def test_nothing_runs_when_a_later_task_is_invalid(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    pb = write(
        tmp_path / "site.yml",
        f"""
        - hosts: localhost
          gather_facts: false
          tasks:
            - file: path={marker} state=touch
            - nosuchmodule: x=1
        """,
    )
    with pytest.raises(PlaybookError):
        run_playbook(pb, hosts=[Host("localhost", local=True)])
    assert not marker.exists()


def test_parse_kv_free_form_and_quotes() -> None:
    command = get_module("command")()
    assert parse_kv("echo {{ a | default('x y') }} chdir=/tmp creates='/a b'", command) == {
        "cmd": "echo {{ a | default('x y') }}",
        "chdir": "/tmp",
        "creates": "/a b",
    }
    assert parse_kv("ls -l chdir=/srv | grep x", get_module("shell")()) == {
        "cmd": "ls -l | grep x",
        "chdir": "/srv",
    }
    copy = get_module("copy")()
    assert parse_kv('dest=/tmp/x content="a b" mode=0644', copy) == {
        "dest": "/tmp/x",
        "content": "a b",
        "mode": "0644",
    }
    # words that are no key=value: Ansible's raw params, judged when the task runs
    assert parse_kv("dest=/x oops {{ more }}", copy) == {
        "dest": "/x",
        "_raw_params": "oops {{ more }}",
    }


def test_imports_roles_and_inheritance_resolved_at_load(tmp_path: Path) -> None:
    write(tmp_path / "roles/web/tasks/main.yml", "- debug: msg=in-role\n")
    write(tmp_path / "roles/web/defaults/main.yml", "port: 80\n")
    write(tmp_path / "roles/web/handlers/main.yml", "- name: reload web\n  debug: msg=reload\n")
    write(tmp_path / "more.yml", "- command: echo more\n  tags: [inner]\n")
    pb = write(
        tmp_path / "site.yml",
        """
        - hosts: all
          tags: [play]
          roles:
            - role: web
              port: 8080
          tasks:
            - import_tasks: more.yml
              when: x is defined
              become: true
            - include_tasks: more.yml
            - block:
                - debug: msg=b
              tags: [blk]
              rescue:
                - debug: msg=r
        """,
    )
    play = load_playbook(pb).plays[0]
    role_block = play.roles[0]
    assert isinstance(role_block, Block) and role_block.role is not None
    assert role_block.role.defaults == {"port": 80} and role_block.role.params == {"port": 8080}
    assert [h.display_name for h in play.handlers] == ["web : reload web"]
    imported = play.tasks[0]
    assert isinstance(imported, Block)
    inner = imported.block[0]
    assert isinstance(inner, Task)
    assert inner.when == ("x is defined",) and inner.become is True
    assert inner.tags == frozenset({"play", "inner"})
    include = play.tasks[1]
    assert isinstance(include, Include) and include.static_children
    block = play.tasks[2]
    assert isinstance(block, Block) and block.block[0].tags == frozenset({"play", "blk"})
