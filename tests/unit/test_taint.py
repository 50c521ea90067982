"""Host data is data (issue 20, defects 1, 2, 9): what a host sends — command output, facts —
is never rendered as a template on the controller, however a play combines, filters, stores or
registers it again; the project's own vars stay templates, as in Ansible. Real playbooks on
LocalConnection; a canary file that only a rendered `lookup('pipe', …)` could create."""

from __future__ import annotations

import json
import os
import shlex
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from provision.engine.results import PlaybookResult
from provision.engine.runner import run_playbook
from provision.engine.templating import LazyVars, Templar, is_template
from provision.errors import TemplateError
from provision.inventory.model import Host
from provision.taint import DataDict, DataStr, as_data


def payload(canary: Path) -> str:
    """Every kind of Jinja text a hostile host can send, each able to run code if rendered."""
    return (
        f"{{{{ lookup('pipe', 'touch {canary}') }}}} "
        f"{{% set _ = lookup('pipe', 'touch {canary}') %}}{{{{ 7 * 6 }}}} "
        "{# a comment #} {% raw %}{{ raw }}{% endraw %}"
    )


BROKEN = "}} {{ {% endif %} {#"  # not even a template: must arrive as text too


def play(tmp_path: Path, text: str, host: Host | None = None) -> PlaybookResult:
    pb = tmp_path / "site.yml"
    pb.write_text(textwrap.dedent(text).replace("TMP", str(tmp_path)).lstrip("\n"))
    return run_playbook(pb, hosts=[host or Host("localhost", local=True)])


def shown(result: PlaybookResult) -> dict[str, Any]:
    """name -> what each `show …` debug task printed (msg, or the var for `var:`)."""
    out: dict[str, Any] = {}
    for r in result.results:
        if r.task.startswith("show") and r.status != "skipped":
            data = r.result
            out[r.task] = data["msg"] if "msg" in data else next(
                v for k, v in data.items() if not k.startswith("_") and k not in ("changed", "failed")
            )
    return out


def test_registered_output_is_never_rendered(tmp_path: Path) -> None:
    canary = tmp_path / "CANARY"
    text = payload(canary)
    (tmp_path / "payload.txt").write_text(text + "\n")
    (tmp_path / "payload.json").write_text(json.dumps({"k": text, "l": [text]}))
    (tmp_path / "broken.txt").write_text(BROKEN)
    result = play(
        tmp_path,
        """
        - hosts: localhost
          gather_facts: false
          tasks:
            - command: cat TMP/payload.txt
              register: out
            - name: show when
              debug: msg=ran
              when: out.rc == 0 and out.stdout | length > 0
            - command: cat TMP/payload.json
              register: js
            - command: cat TMP/broken.txt
              register: broken
            - name: show broken
              debug: msg="{{ broken.stdout }}"
              when: broken.stdout != ''
            - set_fact:
                joined: "{{ out.stdout ~ '' }}"
                lines: "{{ out.stdout_lines }}"
                nested: "{{ {'a': [out.stdout, {'b': out.stdout}]} }}"
                found: "{{ out.stdout | regex_search('.*') }}"
                dflt: "{{ out.missing | default(out.stdout) }}"
                parsed: "{{ js.stdout | from_json }}"
                upper_lower: "{{ out.stdout | upper | lower }}"
                quoted: "{{ out.stdout | quote }}"
            - add_host: name=other ansible_connection=local from_host="{{ out.stdout }}"
            - name: show added host var
              debug: msg="{{ hostvars['other'].from_host }}"
            - name: show quoted
              debug: msg="{{ quoted }}"
            - name: show joined
              debug: msg="{{ joined }}"
              register: again
            - name: show again
              debug: msg="{{ again.msg }}"
            - name: show nested
              debug: var=nested
            - name: show found
              debug: msg="{{ found }}"
            - name: show dflt
              debug: msg="{{ dflt }}"
            - name: show parsed
              debug: msg="{{ parsed.k }}"
            - name: show parsed list
              debug: msg="{{ parsed.l[0] }}"
            - name: show lines
              debug: msg="{{ item }}"
              loop: "{{ lines }}"
            - name: show from json loop
              debug: msg="{{ item }}"
              loop: "{{ (js.stdout | from_json).l }}"
            - name: show hostvars
              debug: msg="{{ hostvars['localhost'].joined }}"
            - name: show until
              debug: msg="{{ out.stdout }}"
              register: polled
              until: polled.msg == out.stdout
              retries: 1
              delay: 0
            - copy: content="{{ joined }}" dest=TMP/written.txt
        """,
    )
    assert not canary.exists(), "host output was rendered as a template on the controller"
    assert result.ok, [(r.task, r.msg) for r in result.results if r.status == "failed"]
    got = shown(result)
    assert got["show when"] == "ran"
    assert got["show broken"] == BROKEN
    assert got["show added host var"] == text
    assert got["show quoted"] == shlex.quote(text)
    for name in ("show joined", "show again", "show found", "show dflt", "show parsed",
                 "show parsed list", "show hostvars", "show until"):
        assert got[name] == text, name
    assert got["show nested"] == {"a": [text, {"b": text}]}
    assert (tmp_path / "written.txt").read_text() == text
    items = [r for r in result.results if r.task in ("show lines", "show from json loop")]
    for r in items:
        assert [one["msg"] for one in r.result["results"]] == [text], r.task


def test_facts_from_the_host_are_never_rendered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the login's environment is a fact the host reports (ansible_env): make it hostile
    # (ansible_user_shell comes from the password database, as Ansible's)
    canary = tmp_path / "CANARY"
    text = payload(canary)
    monkeypatch.setenv("SHELL", text)
    result = play(
        tmp_path,
        """
        - hosts: localhost
          gather_facts: true
          tasks:
            - name: show fact
              debug: msg="{{ ansible_env.SHELL }}"
              when: ansible_env.SHELL is defined and ansible_env.SHELL != ''
            - set_fact:
                shell_copy: "{{ ansible_facts.env.SHELL | trim }}"
            - name: show copy
              debug: msg="{{ shell_copy }}"
            - name: show hostvars fact
              debug: msg="{{ hostvars[inventory_hostname]['ansible_env']['SHELL'] }}"
        """,
    )
    assert not canary.exists(), "a host fact was rendered as a template on the controller"
    assert result.ok, [(r.task, r.msg) for r in result.results if r.status == "failed"]
    got = shown(result)
    assert got["show fact"] == text.strip()
    assert got["show copy"] == text.strip()
    assert got["show hostvars fact"] == text.strip()


def test_the_projects_own_vars_are_templates_as_in_ansible(tmp_path: Path) -> None:
    """Defect 9, decided as Ansible does (tests/unit/test_taint_parity.py compares): inventory and
    play vars are the project's code; a lookup in one runs when the variable is used, even by
    `is defined`. A var whose template is undefined is not defined. A template's output is a
    value: set_fact of `{{ '{{ 1 + 1 }}' }}` is that text, not 2 (ansible-core 2.19)."""
    ran = tmp_path / "RAN"
    host = Host(
        "localhost",
        local=True,
        vars={"x": f"{{{{ lookup('pipe', 'touch {ran}') }}}}", "u": "{{ nope }}"},
    )
    result = play(
        tmp_path,
        """
        - hosts: localhost
          gather_facts: false
          tasks:
            - name: show defined
              debug: msg=yes
              when: x is defined
            - name: show undefined
              debug: msg=yes
              when: u is defined
            - set_fact:
                z: "{{ '{{ 1 + 1 }}' }}"
            - name: show z
              debug: msg="{{ z }}"
            - name: show item
              debug: msg="{{ item }}"
              loop: "{{ ['{{ 2 + 2 }}'] }}"
        """,
        host,
    )
    assert ran.exists(), "an inventory var's template is code, as in Ansible"
    got = shown(result)
    assert got["show defined"] == "yes"
    assert "show undefined" not in got
    assert got["show z"] == "{{ 1 + 1 }}"
    item = next(r for r in result.results if r.task == "show item")
    assert item.result["results"][0]["msg"] == "{{ 2 + 2 }}"


def test_the_one_rule_and_the_mark() -> None:
    templar = Templar()
    hostile = "{{ lookup('pipe', 'false') }}"
    assert is_template(hostile)
    assert not is_template(DataStr(hostile))
    marked = as_data({"stdout": hostile, "lines": [hostile], hostile: {"k": (hostile,)}})
    assert type(marked) is DataDict
    assert type(marked["lines"][0]) is DataStr and type(next(iter(marked))) is DataStr
    assert as_data(marked) is marked  # marking again costs nothing
    assert templar.render(marked, {}) is marked
    assert templar.render(DataStr(hostile), {}) == hostile
    assert LazyVars({"out": marked, "s": DataStr(hostile)}, templar)["s"] == hostile
    # never evaluated: data given as an expression fails Ansible's trust check
    with pytest.raises(TemplateError, match="untrusted template or expression"):
        templar.evaluate(DataStr("lookup('pipe','false')"), {})
    # marked values are ordinary values for everything else
    assert json.loads(json.dumps(marked)) == {"stdout": hostile, "lines": [hostile], hostile: {"k": [hostile]}}
    assert yaml.safe_load(yaml.safe_dump(marked)) == json.loads(json.dumps(marked))


# -- fuzz: arbitrary host text through register -> set_fact -> filters -> when/debug ----------

_PIECES = ["{{", "}}", "{%", "%}", "{#", "#}", "raw", "endraw", "'", '"', "\\", "|", "~",
           "lookup('pipe', 'touch CANARY')", " ", "\t", "\n", "é", "$(x)", "`", "-"]
_TEXT = st.lists(
    st.one_of(st.sampled_from(_PIECES), st.text(st.characters(codec="utf-8", exclude_characters="\x00\r"), max_size=8)),
    min_size=1,
    max_size=12,
).map("".join).filter(lambda s: s.strip() and "\r" not in s and s == s.rstrip("\n"))


@pytest.fixture(scope="module")
def fuzz_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("taint-fuzz")


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=_TEXT)
def test_generated_host_text_never_runs_and_round_trips(fuzz_dir: Path, value: str) -> None:
    work = fuzz_dir / os.urandom(4).hex()
    work.mkdir()
    (work / "host.txt").write_text(value.replace("CANARY", str(work / "CANARY")))
    sent = (work / "host.txt").read_text()
    result = play(
        work,
        """
        - hosts: localhost
          gather_facts: false
          tasks:
            - slurp: src=TMP/host.txt
              register: file
            - set_fact:
                got: "{{ file.content | b64decode }}"
                wrapped: "{{ [file.content | b64decode] | map('string') | list }}"
            - set_fact:
                again: "{{ got ~ '' }}"
                picked: "{{ wrapped | first | default('') }}"
            - name: show got
              debug: msg="{{ again }}"
              when: again == got and (picked | length) >= 0
              register: shown_once
            - name: show registered again
              debug: msg="{{ shown_once.msg }}"
        """,
    )
    assert not (work / "CANARY").exists()
    assert result.ok, [(r.task, r.msg) for r in result.results if r.status == "failed"]
    got = shown(result)
    assert got["show got"] == sent
    assert got["show registered again"] == sent
