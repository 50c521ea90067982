"""Where host data stops and code starts, compared with ansible-playbook 2.19 itself (issue 20,
defect 9): the same playbook through both tools gives the same output, host output is never
rendered by either, and a lookup in the play's own vars runs in both (it is the project's code)."""

from __future__ import annotations

from pathlib import Path

from tests.unit.test_engine_vs_ansible import compare, pytestmark  # noqa: F401 (skip without ansible)

PLAY = """
- hosts: localhost
  gather_facts: false
  vars:
    x: "{{ lookup('pipe', 'touch WORK/RAN') }}"
    u: "{{ nope }}"
  tasks:
    - copy:
        dest: WORK/payload
        content: "{% raw %}{{ lookup('pipe', 'touch BASE/CANARY') }} {{ 7 * 6 }} {# c #}{% endraw %}"
    - command: cat WORK/payload
      register: out
    - name: show out
      debug: msg="{{ out.stdout }}"
      when: out.rc == 0
    - set_fact:
        joined: "{{ out.stdout ~ '' }}"
        z: "{{ '{{ 1 + 1 }}' }}"
    - name: show joined
      debug: msg="{{ joined }}"
    - name: show z
      debug: msg="{{ z }}"
    - name: show loop item
      debug: msg="{{ item }}"
      loop: "{{ out.stdout_lines }}"
    - name: show defined
      debug: msg=yes
      when: x is defined
    - name: show undefined
      debug: msg=yes
      when: u is defined
    - name: show default
      debug: msg="{{ u | default('fallback') }}"
"""


def test_host_output_is_data_and_play_vars_are_code_as_in_ansible(tmp_path: Path) -> None:
    compare(tmp_path, PLAY.replace("BASE", str(tmp_path)))  # the shown text is the same for both
    assert not (tmp_path / "CANARY").exists(), "host output was rendered"
    for tool in ("ansible", "provision"):
        assert (tmp_path / tool / "RAN").exists(), f"{tool} did not run the play var's lookup"
