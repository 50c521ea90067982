"""Task forms Ansible accepts when it loads a playbook and judges when the task runs (issue 28,
ansible-core's parsing/debug/add_host/environment/loop_control/conditionals/includes targets),
each compared with ansible-playbook on the same project (connection local; every `show*` debug
message and the recap must match)."""

from __future__ import annotations

from pathlib import Path

import pytest

from provision.engine.playbook import PlaybookError, load_playbook
from tests.unit.test_engine_real_roles import needs_ansible, same

pytestmark = [pytest.mark.slow, needs_ansible]


def test_templated_free_form_and_args_render_to_a_mapping_when_the_task_runs(
    tmp_path: Path,
) -> None:
    """`file: "{{ file_args }}"`, `args: "{{ splat }}"` (under the task's own args), free-form
    words that are no template (`add_host: name...`) and a template giving a string: load, and
    the last two fail their task (ignored) as Ansible's."""
    same(
        tmp_path,
        {
            "site.yml": """
            - hosts: localhost
              gather_facts: false
              vars:
                file_args: {path: WORK/touched, state: touch}
                splat: {msg: from splat, var: ignored_by_own}
              tasks:
                - file: "{{ file_args }}"
                - name: show file made
                  debug: {msg: "{{ lookup('file', 'WORK/touched') == '' }}"}
                - name: show splat
                  debug: {msg: own wins}
                  args: "{{ splat | dict2items | rejectattr('key', 'eq', 'var') | items2dict }}"
                - name: words that are no key=value
                  add_host: namenewdynamichost groupsnewdynamicgroup
                  ignore_errors: true
                  register: words
                - name: a template giving a string
                  file: path=WORK/x {{ more }}
                  vars: {more: "state=touch"}
                  ignore_errors: true
                  register: string
                - name: args a string
                  debug:
                  args: '{{ "a string" }}'
                  ignore_errors: true
                  register: splat_string
                - name: show failures
                  debug:
                    msg: "{{ [words is failed, string is failed, splat_string is failed,
                              'Finalization of task args' in splat_string.msg] }}"
            """,
        },
    )


def test_unknown_filter_fails_only_the_task_that_renders_it(tmp_path: Path) -> None:
    same(
        tmp_path,
        {
            "site.yml": """
            - hosts: localhost
              gather_facts: false
              tasks:
                - name: not run
                  debug: {msg: "{{ 1 | no_such_filter }}"}
                  when: false
                - debug: {msg: "{{ 1 | no_such_filter }}"}
                  ignore_errors: true
                  register: r
                - name: show failed
                  debug: {msg: "{{ r is failed }}"}
            """,
        },
    )


def test_environment_list_template_and_omit(tmp_path: Path) -> None:
    same(
        tmp_path,
        {
            "site.yml": """
            - hosts: localhost
              gather_facts: false
              vars:
                more: {ANOTHER: stillhere}
              tasks:
                - shell: echo "I=$IAMHERE N=$NOTHERE A=$ANOTHER"
                  environment:
                    - NOTHERE: '{{ omit }}'
                      IAMHERE: hello
                    - '{{ omit }}'
                    - "{{ more }}"
                  register: r
                - name: show env
                  debug: {msg: "{{ r.stdout }}"}
            """,
        },
    )


def test_loop_control_extended_allitems_and_break_when(tmp_path: Path) -> None:
    same(
        tmp_path,
        {
            "inner.yml": """
            - name: show include loop
              debug: {msg: "{{ ansible_loop.index }}/{{ ansible_loop.length }} {{ ansible_loop.allitems }}"}
            """,
            "site.yml": """
            - hosts: localhost
              gather_facts: false
              tasks:
                - include_tasks: inner.yml
                  loop: [a, b]
                  loop_control: {extended: true}
                - name: show no allitems
                  debug: {msg: "{{ ansible_loop.allitems is defined }} {{ ansible_loop.revindex }}"}
                  loop: [a, b, c]
                  loop_control: {extended: true, extended_allitems: false}
                - debug: {msg: "{{ item }}"}
                  loop: [1, 2, 3, 4]
                  loop_control: {break_when: item >= 2, index_var: i}
                  register: broke
                - name: show broke
                  debug: {msg: "{{ broke.results | map(attribute='i') | list }}"}
            """,
        },
    )


def test_static_import_names_actions_and_embedded_conditionals(tmp_path: Path) -> None:
    """import_tasks' name from play vars and role_path, `action:`/`local_action:` (a module
    name from the role's vars), a `when:` with an embedded template, `that: "{{ list }}"`."""
    same(
        tmp_path,
        {
            "roles/r/vars/main.yml": "mod: debug\n",
            "roles/r/tasks/main.yml": """
            - import_tasks: "{{ role_path }}/tasks/more.yml"
            - name: show action
              action: "{{ mod }} msg='from action'"
            """,
            "roles/r/tasks/more.yml": """
            - name: show more
              debug: {msg: more}
            """,
            "part.yml": """
            - name: show part
              debug: {msg: "part {{ which }}"}
            """,
            "site.yml": """
            - hosts: localhost
              gather_facts: false
              vars:
                which: part
                checks: ["1 == 1", "'{{ which }}' == 'part'"]
              roles: [r]
              tasks:
                - import_tasks: "{{ which }}.yml"
                - local_action: set_fact b=b
                - action: {module: set_fact, args: {c: c}}
                - name: show facts
                  debug: {msg: "{{ b }} {{ c }}"}
                - shell: echo 1
                  register: out
                - name: embedded
                  debug: {msg: never}
                  when: '"foo" in {{ out.stdout }}'
                  ignore_errors: true
                - assert: {that: "{{ checks }}"}
            """,
        },
    )


def test_a_play_keyword_that_is_a_task_says_so_in_ansibles_words(tmp_path: Path) -> None:
    pb = tmp_path / "site.yml"
    pb.write_text("- include_tasks: x.yml\n")
    with pytest.raises(PlaybookError, match="'include_tasks' is not a valid attribute for a Play"):
        load_playbook(pb)


def test_untrusted_expressions_fail_as_ansibles_trust_check(tmp_path: Path) -> None:
    """`var: !unsafe x`, `when: !unsafe ...` and an assert list of a host's output are never
    evaluated as expressions: the task fails with Ansible's words; a dict for `var` is refused
    in Ansible's words."""
    same(
        tmp_path,
        {
            "site.yml": """
            - hosts: localhost
              gather_facts: false
              vars:
                x: hello
              tasks:
                - debug:
                    var: !unsafe x
                  ignore_errors: true
                  register: var_unsafe
                - debug:
                  when: !unsafe 1 == 0
                  ignore_errors: true
                  register: when_unsafe
                - shell: echo "1 == 1"
                  register: out
                - assert: {that: "{{ out.stdout_lines }}"}
                  ignore_errors: true
                  register: that_host
                - debug:
                    var: {a: b}
                  ignore_errors: true
                  register: var_dict
                - name: show untrusted
                  debug:
                    msg: "{{ [var_unsafe, when_unsafe, that_host] | map(attribute='msg')
                              | map('regex_search', 'untrusted template or expression') | list }}"
                - name: show not a string
                  debug: {msg: "{{ 'is not a string and conversion is not allowed' in var_dict.msg }}"}
            """,
        },
    )
