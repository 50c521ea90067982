"""The role loading forms and `meta:` actions roles outside the corpus use (issue 28), each
compared with ansible-playbook on the same project (connection local; every `show*` debug
message and the recap must match): include_role's templated names resolved when the task runs,
`*_from` names with or without their extension, a templated role name in `roles:`, and the
meta actions (clear_facts, reset_connection, refresh_inventory, noop, ...)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.test_engine_real_roles import needs_ansible, same

pytestmark = [pytest.mark.slow, needs_ansible]

ROLE = {
    "roles/r/tasks/main.yml": """
    - name: show main
      debug: {msg: "main {{ from_vars | default('-') }} {{ from_defaults | default('-') }}"}
    """,
    "roles/r/tasks/variables.yml": """
    - name: show variables
      debug: {msg: "variables {{ from_vars | default('-') }}"}
    - name: notify
      command: "true"
      notify: extra handler
    """,
    "roles/r/vars/main.yml": "from_vars: main\n",
    "roles/r/vars/other.yml": "from_vars: other\n",
    "roles/r/defaults/main.yml": "from_defaults: main\n",
    "roles/r/defaults/more.yaml": "from_defaults: more\n",
    "roles/r/handlers/main.yml": """
    - name: extra handler
      debug: {msg: main handler}
    """,
    "roles/r/handlers/extra.yml": """
    - name: extra handler
      debug: {msg: extra handler}
    """,
}


def test_include_role_templated_tasks_from_resolves_when_the_task_runs(tmp_path: Path) -> None:
    """`tasks_from: "{{ x | default('main') }}"` with x set by an earlier set_fact (unknown when
    the play loads): Ansible renders it when the task runs; a loop renders it per item."""
    stats, msgs = same(
        tmp_path,
        {
            **ROLE,
            "site.yml": """
            - hosts: localhost
              gather_facts: false
              tasks:
                - name: default
                  include_role:
                    name: r
                    tasks_from: "{{ entry | default('main') }}"
                - set_fact: {entry: variables}
                - name: from a fact
                  include_role:
                    name: r
                    tasks_from: "{{ entry | default('main') }}"
                - name: per item
                  include_role:
                    name: "{{ item.role }}"
                    tasks_from: "{{ item.file }}"
                    vars_from: "{{ item.vars }}"
                  loop:
                    - {role: r, file: main, vars: other}
                    - {role: r, file: variables.yml, vars: other.yml}
            """,
        },
    )
    assert msgs == ["main main main", "variables main", "main other main", "variables other"]
    assert stats["failed"] == 0


def test_from_names_with_or_without_their_extension(tmp_path: Path) -> None:
    """`tasks_from: variables.yml`, `vars_from: other`, `defaults_from: more` (a .yaml file),
    `handlers_from: extra.yml`: Ansible takes each name with or without its extension."""
    stats, msgs = same(
        tmp_path,
        {
            **ROLE,
            "site.yml": """
            - hosts: localhost
              gather_facts: false
              tasks:
                - import_role: {name: r, tasks_from: variables.yml, vars_from: other}
                - include_role: {name: r, defaults_from: more, vars_from: other.yml}
                - include_role: {name: r, tasks_from: variables, handlers_from: extra.yml}
            """,
        },
    )
    assert msgs == ["variables other", "main other more", "variables main"], msgs
    assert stats["failed"] == 0 and stats["changed"] == 2


def test_templated_role_name_in_roles(tmp_path: Path) -> None:
    """A system role's test wrapper: tests/tests_default.yml runs `role: "{{ playbook_dir }}/.."`
    and another by a play variable; Ansible templates the names when the play loads."""
    stats, msgs = same(
        tmp_path,
        {
            "site.yml": """
            - import_playbook: sysrole/tests/tests_default.yml
            """,
            "sysrole/tasks/main.yml": """
            - name: show sysrole
              debug: {msg: "{{ role_name | basename }}"}
            """,
            "sysrole/tests/tests_default.yml": """
            - hosts: localhost
              gather_facts: false
              vars: {which: r}
              roles:
                - role: "{{ playbook_dir }}/.."
                - "{{ which }}"
            """,
            "sysrole/tests/roles/r/tasks/main.yml": """
            - name: show r
              debug: {msg: "{{ role_name }}"}
            """,
        },
    )
    assert msgs == ["..", "r"] and stats["failed"] == 0


def test_meta_actions_like_ansible(tmp_path: Path) -> None:
    """clear_facts (the system roles' test wrappers run it between plays), reset_connection,
    refresh_inventory, noop, clear_host_errors, end_host: as Ansible runs them."""
    stats, msgs = same(
        tmp_path,
        {
            "site.yml": """
            - hosts: localhost
              gather_facts: true
              gather_subset: [min]
              tasks:
                - name: show gathered
                  debug: {msg: "{{ ansible_facts.system is defined }} {{ ansible_system is defined }}"}
                - set_fact: {kept: yes}
                - set_fact: {cached: yes, cacheable: true}
                - meta: clear_facts
                - name: show cleared
                  debug: {msg: "{{ ansible_facts.system is defined }} {{ ansible_system is defined }} {{ kept | default('-') }}"}
                - meta: reset_connection
                - meta: refresh_inventory
                - meta: noop
                - name: show still runs
                  debug: {msg: "{{ inventory_hostname }}"}
            - hosts: localhost
              gather_facts: false
              tasks:
                - name: show next play
                  debug: {msg: "{{ ansible_facts.system | default('none') }}"}
                - meta: end_host
                - name: show never
                  debug: {msg: never}
            """,
        },
    )
    assert msgs[0] == "True True" and msgs[1].startswith("False False"), msgs
    assert "never" not in msgs and stats["failed"] == 0


def test_a_roles_own_module_and_module_utils_run_as_ansibles(tmp_path: Path) -> None:
    """A role shipping library/ (its own module) and module_utils/ (a helper that module
    imports): the module runs as Ansible runs it (through the bridge: Ansible builds it, in its
    own process), from the role's tasks and from the play's after the role loaded."""
    stats, msgs = same(
        tmp_path,
        {
            "roles/own/library/pv_greet.py": """
            from ansible.module_utils.basic import AnsibleModule
            from ansible.module_utils.pv_words import greeting

            def main():
                m = AnsibleModule(argument_spec={"who": {"type": "str", "required": True}},
                                  supports_check_mode=True)
                m.exit_json(changed=m.params["who"] == "new", msg=greeting(m.params["who"]))

            main()
            """,
            "roles/own/module_utils/pv_words.py": """
            def greeting(who):
                return "hello " + who
            """,
            "roles/own/tasks/main.yml": """
            - name: show from the role
              pv_greet: {who: role}
            - pv_greet: {who: new}
            """,
            "site.yml": """
            - hosts: localhost
              gather_facts: false
              roles: [own]
              tasks:
                - name: show from the play
                  pv_greet: {who: play}
            """,
        },
    )
    assert msgs == ["hello role", "hello play"] and stats["changed"] == 1, (stats, msgs)
