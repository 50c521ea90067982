"""ansible-core 2.19's boolean-only conditionals (provision/engine/conditionals.py), compared with
ansible-playbook on the same playbook: which values pass, which fail the task (or one loop item),
and ALLOW_BROKEN_CONDITIONALS (ansible.cfg or the environment) relaxing it."""

from __future__ import annotations

from pathlib import Path

import pytest

from provision.engine.conditionals import BrokenConditionalError
from provision.engine.templating import Templar, TemplateError
from provision.taint import as_data
from tests.unit.test_engine_real_roles import needs_ansible, same

CONDITIONALS = """
- hosts: localhost
  gather_facts: false
  vars: {n: 3, s: abc, t: "true", nul: null, lst: [1], yes_s: "yes", expr: "n > 1"}
  tasks:
    - {name: show int, debug: {msg: int}, when: n, ignore_errors: true}
    - {name: show length, debug: {msg: "{{ item }}"}, when: item | length, loop: [ab, ""],
       ignore_errors: true}
    - {name: show loop items, debug: {msg: "{{ item }}"}, when: item, loop: [true, 1, false],
       ignore_errors: true}
    - {name: show str, debug: {msg: str}, when: s, ignore_errors: true}
    - {name: show str true, debug: {msg: strtrue}, when: t, ignore_errors: true}
    - {name: show none, debug: {msg: none}, when: nul, ignore_errors: true}
    - {name: show list, debug: {msg: list}, when: lst, ignore_errors: true}
    - {name: show defined, debug: {msg: defined}, when: n is defined}
    - {name: show template, debug: {msg: tmpl}, when: "{{ n > 1 }}"}
    - {name: show template int, debug: {msg: tmplint}, when: "{{ n }}", ignore_errors: true}
    - {name: show template expression, debug: {msg: indirect}, when: "{{ expr }}"}
    - {name: show literal int, debug: {msg: literal}, when: 1, ignore_errors: true}
    - {name: show empty, debug: {msg: empty}, when: "", ignore_errors: true}
    - {name: show and, debug: {msg: and}, when: n and s, ignore_errors: true}
    - {name: show bool filter, debug: {msg: boolfilter}, when: yes_s | bool}
    - {name: show two, debug: {msg: two}, when: [true, n], ignore_errors: true}
    - {name: show first false stops, debug: {msg: stops}, when: [false, n]}
    - {name: changed_when int, command: "true", changed_when: n, ignore_errors: true}
    - {name: failed_when int, command: "true", failed_when: n, ignore_errors: true}
    - {name: failed_when zero, command: "true", failed_when: 0 + 0, ignore_errors: true}
    - {name: assert int, assert: {that: [n]}, ignore_errors: true}
    - {name: until int, command: "true", register: r, until: r.rc, retries: 1, delay: 0,
       ignore_errors: true}
    - {name: include_tasks when int, include_tasks: inc.yml, when: n, ignore_errors: true}
"""

FILES = {"site.yml": CONDITIONALS, "inc.yml": "- name: show included\n  debug: {msg: inc}\n"}


@pytest.mark.slow
@needs_ansible
def test_conditionals_must_be_boolean_like_ansible(tmp_path: Path) -> None:
    stats, msgs = same(tmp_path, FILES)
    # only the boolean ones ran; every broken one failed (and was ignored)
    assert msgs == [True, "defined", "tmpl", "indirect", "boolfilter"], msgs
    assert stats["ignored"] >= 15, stats


@pytest.mark.slow
@needs_ansible
def test_allow_broken_conditionals_takes_the_truth_like_ansible(tmp_path: Path) -> None:
    stats, msgs = same(tmp_path, FILES, env={"ANSIBLE_ALLOW_BROKEN_CONDITIONALS": "true"})
    assert "int" in msgs and "ab" in msgs and "" not in msgs and "empty" in msgs, msgs


def test_broken_conditional_message_has_ansibles_shape() -> None:
    templar = Templar()
    with pytest.raises(BrokenConditionalError) as exc:
        templar.condition(["item | length"], {"item": "ab"}, "roles/x/tasks/main.yml:3:3")
    assert str(exc.value) == (
        "Conditional result (True) was derived from value of type 'int' at "
        "'roles/x/tasks/main.yml:3:3'. Conditionals must have a boolean result."
    )
    assert Templar(allow_broken_conditionals=True).condition(["item | length"], {"item": ""}) is False


def test_a_variable_of_host_data_is_never_an_expression() -> None:
    # `when: "{{ x }}"` evaluates the expression a play's variable holds; a host's text is data
    templar = Templar()
    assert templar.condition(["{{ e }}"], {"e": "1 > 0"}) is True
    with pytest.raises(TemplateError, match="untrusted"):
        templar.condition(["{{ e }}"], {"e": as_data("lookup('pipe', 'touch /tmp/pv-x')")})
    with pytest.raises(TemplateError, match="untrusted"):
        templar.condition(["{{ e | trim }}"], {"e": as_data("1 > 0")})
