"""Role argument specs, more of Ansible's forms (engine/role_argspec.py): a required option given
as null is converted (and fails), a sub-option's unknown keys are an error, the validation's
context names the role as Ansible does (short name, absolute path), and include_role /
import_role `rolespec_validate: false` skips the check. Compared with ansible-playbook."""

from __future__ import annotations

from pathlib import Path

import pytest

from provision.engine.role_argspec import argument_errors
from tests.unit.test_engine_real_roles import needs_ansible, same

SPEC = """
argument_specs:
  main:
    short_description: Main
    options:
      r_port: {type: int, required: true}
      r_name: {type: str}
      r_conf:
        type: dict
        options:
          inner: {type: dict, options: {deep: {type: int, required: true}}}
"""

SITE = """
- hosts: localhost
  gather_facts: false
  tasks:
    - block:
        - include_role: {name: r}
          vars: {r_port: null, r_conf: {inner: {bogus: 1}}}
      rescue:
        - name: show context
          debug:
            msg: "{{ ansible_failed_result.validate_args_context.name }} {{ ansible_failed_result.validate_args_context.path is search('^/.*/roles/r$') }}"
        - name: show errors
          debug: {msg: "{{ ansible_failed_result.argument_errors }}"}
    - include_role: {name: r, rolespec_validate: false}
      vars: {r_port: not-a-number}
    - import_role: {name: r, rolespec_validate: false}
      vars: {r_port: [also, not, a, number]}
"""

FILES = {
    "site.yml": SITE,
    "roles/r/meta/argument_specs.yml": SPEC,
    "roles/r/tasks/main.yml": "- name: show port\n  debug: {msg: '{{ r_port }}'}\n",
}


@pytest.mark.slow
@needs_ansible
def test_role_argument_spec_forms_like_ansible(tmp_path: Path) -> None:
    stats, msgs = same(tmp_path, FILES)
    assert msgs[0] == "r True", msgs
    assert msgs[2:] == ["not-a-number", ["also", "not", "a", "number"]], msgs
    assert stats["failed"] == 0 and stats["rescued"] == 1, stats


def test_null_required_and_unknown_sub_options_word_for_word() -> None:
    import yaml

    options = yaml.safe_load(SPEC)["argument_specs"]["main"]["options"]
    # ansible-playbook 2.19's argument_errors for these values
    assert argument_errors(options, {"r_port": None, "r_conf": {"inner": {"bogus": 1}}}) == [
        "argument 'r_port' is of type NoneType and we were unable to convert to int: \"None\" "
        "cannot be converted to an int",
        "missing required arguments: deep found in r_conf -> inner",
        "r_conf.inner.bogus. Supported parameters include: deep.",
    ]
    # an optional null is left alone; a null str is '' (check_type_str)
    assert argument_errors(options, {"r_port": 1, "r_name": None}) == []
