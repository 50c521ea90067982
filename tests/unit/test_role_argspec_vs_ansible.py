"""Role argument specs (engine/role_argspec.py): the implicit first task Ansible runs for a role
with meta/argument_specs.yml, and the explicit validate_argument_spec module, compared with
ansible-playbook; the messages as ansible-core 2.19 words them."""

from __future__ import annotations

from pathlib import Path

import pytest

from provision.engine.role_argspec import argument_errors
from tests.unit.test_engine_real_roles import needs_ansible, same

SPEC = """
argument_specs:
  main:
    short_description: The main entry point
    options:
      r_port: {type: int, required: true}
      r_mode: {type: str, choices: [fast, slow], default: fast}
      r_flag: {type: bool}
      r_list: {type: list, elements: int}
      r_users:
        type: list
        elements: dict
        options:
          name: {type: str, required: true}
          shell: {type: str, choices: [bash, zsh]}
      r_conf: {type: dict, options: {size: {type: int}}}
  other:
    options:
      r_other: {type: str, required: true}
"""

SITE = """
- hosts: localhost
  gather_facts: false
  tasks:
    - include_role: {name: r}
      vars: {r_port: "22", r_flag: "yes", r_list: "1,2", r_users: [{name: a, shell: bash}],
             r_conf: {size: "3"}}
    - include_role: {name: r, apply: {ignore_errors: true}}
    - include_role: {name: r, apply: {ignore_errors: true}}
      vars: {r_port: abc, r_mode: medium, r_flag: maybe, r_list: [1, x], r_users: [{shell: csh}],
             r_conf: {size: big}}
    - include_role: {name: r, tasks_from: notspecced}
    - include_role: {name: r, tasks_from: other, apply: {ignore_errors: true}}
    - name: show explicit
      validate_argument_spec:
        argument_spec: {x: {type: int, required: true}}
        provided_arguments: {x: "5"}
    - name: explicit fails
      validate_argument_spec:
        argument_spec: {x: {type: int, required: true}}
      ignore_errors: true
- hosts: localhost
  gather_facts: false
  roles:
    - role: r
      r_port: 8080
"""

FILES = {
    "site.yml": SITE,
    "roles/r/meta/argument_specs.yml": SPEC,
    "roles/r/defaults/main.yml": "r_mode: fast\n",
    "roles/r/tasks/main.yml": "- name: show port\n  debug: {msg: '{{ r_port }}'}\n",
    "roles/r/tasks/notspecced.yml": "- name: show not specced\n  debug: {msg: ns}\n",
    "roles/r/tasks/other.yml": "- name: show other\n  debug: {msg: other}\n",
}


@pytest.mark.slow
@needs_ansible
def test_role_argument_specs_like_ansible(tmp_path: Path) -> None:
    stats, msgs = same(tmp_path, FILES, env={"ANSIBLE_ROLES_PATH": "WORK/roles"})
    # the failed validations were ignored (apply: ignore_errors), so their roles went on
    assert msgs == ["22", "abc", "ns", "other", "The arg spec validation passed", 8080], msgs
    assert stats["ignored"] == 5 and stats["failed"] == 0, stats  # + show port: r_port undefined


def test_argument_errors_word_for_word_as_ansible() -> None:
    import yaml

    options = yaml.safe_load(SPEC)["argument_specs"]["main"]["options"]
    values = {
        "r_port": "abc",
        "r_mode": "medium",
        "r_flag": "maybe",
        "r_list": [1, "x"],
        "r_users": [{"shell": "csh"}],
        "r_conf": {"size": "big"},
    }
    # ansible-playbook 2.19's msg for this task, after "Validation of arguments failed:\n"
    assert argument_errors(options, values) == [
        "argument 'r_port' is of type str and we were unable to convert to int: \"'abc'\" "
        "cannot be converted to an int",
        "argument 'r_flag' is of type str and we were unable to convert to bool: The value "
        "'maybe' is not a valid boolean. Valid booleans include: 'yes', 1, 0, 'f', 'n', 't', "
        "'y', 'true', '0', 'on', 'false', 'off', 'no', '1'",
        "Elements value for option 'r_list' is of type str and we were unable to convert to "
        "int: \"'x'\" cannot be converted to an int",
        "value of r_mode must be one of: fast, slow, got: medium",
        "missing required arguments: name found in r_users",
        "value of shell must be one of: bash, zsh, got: csh found in r_users",
        "argument 'size' is of type str found in 'r_conf'. and we were unable to convert to int: "
        "\"'big'\" cannot be converted to an int",
    ]
    assert argument_errors(options, {}) == ["missing required arguments: r_port"]
