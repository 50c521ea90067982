"""The Ansible semantics of issue 11, run for real through LocalConnection in temp dirs: FQCN
keywords, serial batches, vars_prompt, delegate_to localhost, add_host / group_by, role
dependencies, include counting, lookups and filters, ansible.cfg defaults, and the errors
for what is not supported. (Against real ansible-playbook on SSH hosts: tests/fleet/test_parity.py.)"""

from __future__ import annotations

import base64
import textwrap
from pathlib import Path
from typing import Any

import jinja2
import pytest

from provision.engine.filters import EXTRA_FILTERS
from provision.engine.play_setup import batches, prompt_values
from provision.engine.playbook import PlaybookError, load_playbook
from provision.engine.results import PlaybookResult
from provision.engine.runner import run_playbook
from provision.errors import ConfigError
from provision.inventory.model import Host, Inventory


def local(name: str, groups: list[str] | None = None, **host_vars: Any) -> Host:
    return Host(name=name, local=True, groups=groups or [], vars=dict(host_vars))


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


def play(tmp_path: Path, text: str, hosts: list[Host] | None = None, **kw: Any) -> PlaybookResult:
    pb = write(tmp_path / "site.yml", text.replace("TMP", str(tmp_path)))
    return run_playbook(pb, hosts=hosts or [local("localhost")], **kw)


def msgs(result: PlaybookResult, host: str = "localhost") -> list[Any]:
    return [
        r.result.get("msg")
        for r in result.for_host(host)
        if r.action == "debug" and r.status != "skipped"
    ]


def test_fqcn_keywords_and_modules(tmp_path: Path) -> None:
    write(tmp_path / "inc.yml", "- ansible.builtin.debug: msg=included\n")
    write(tmp_path / "vars.yml", "from_file: 7\n")
    result = play(
        tmp_path,
        """
        - hosts: localhost
          gather_facts: false
          tasks:
            - ansible.builtin.include_tasks: inc.yml
            - ansible.legacy.import_tasks: inc.yml
            - ansible.builtin.include_vars: vars.yml
            - ansible.builtin.set_fact: {x: "{{ from_file + 1 }}"}
            - ansible.builtin.meta: noop
            - ansible.legacy.debug: msg="x={{ x }}"
            - ansible.builtin.group_by: key=made_here
            - ansible.builtin.debug: msg="{{ group_names }}"
        """,
    )
    assert msgs(result) == ["included", "included", "x=8", ["made_here"]]
    # Ansible's counts: the dynamic include is a task of its own (ok), group_by changed
    assert result.recap["localhost"].to_json()["ok"] == 8


def test_serial_batches_run_one_after_the_other(tmp_path: Path) -> None:
    hosts = [local(f"h{i}") for i in range(1, 6)]
    result = play(
        tmp_path,
        """
        - hosts: all
          gather_facts: false
          serial: [1, 1, 3]
          tasks:
            - debug: msg="{{ ansible_play_batch | join(',') }}"
            - meta: end_batch
              when: inventory_hostname == 'h2'
            - debug: msg=after
        """,
        hosts=hosts,
    )
    assert msgs(result, "h1") == ["h1", "after"]
    assert msgs(result, "h2") == ["h2"]  # end_batch: this batch only
    assert msgs(result, "h3") == ["h3,h4,h5", "after"]
    names = [h.name for h in hosts]
    assert [[h.name for h in b] for b in batches(hosts, "40%", "x")] == [
        names[:2],
        names[2:4],
        names[4:],
    ]
    assert [[h.name for h in b] for b in batches(hosts, 0, "x")] == [names]


def test_end_play_in_a_batch_skips_the_later_batches(tmp_path: Path) -> None:
    hosts = [local(f"h{i}") for i in range(1, 4)]
    result = play(
        tmp_path,
        """
        - hosts: all
          gather_facts: false
          serial: 1
          tasks:
            - debug: msg=in
            - meta: end_play
        """,
        hosts=hosts,
    )
    assert msgs(result, "h1") == ["in"] and msgs(result, "h2") == [] and msgs(result, "h3") == []


def test_vars_prompt_from_extra_vars_env_or_default_never_stdin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = """
        - hosts: localhost
          gather_facts: false
          vars_prompt:
            - name: release
              prompt: Which release?
            - name: flavour
              default: vanilla
          tasks:
            - debug: msg="{{ release }} {{ flavour }}"
        """
    assert msgs(play(tmp_path, text, extra_vars={"release": "2.13"})) == ["2.13 vanilla"]
    monkeypatch.setenv("PROVISION_PROMPT_RELEASE", "from-env")
    assert msgs(play(tmp_path, text)) == ["from-env vanilla"]
    monkeypatch.delenv("PROVISION_PROMPT_RELEASE")
    monkeypatch.setattr("sys.stdin", None)  # CI: no terminal to ask on
    with pytest.raises(PlaybookError, match=r"site\.yml:4:\d+: vars_prompt 'release' has no value.*"
                       r"-e release=\.\.\. or set PROVISION_PROMPT_RELEASE"):  # fmt: skip
        play(tmp_path, text)
    assert prompt_values([{"name": "a", "default": 1}], {"a": 5}) == {}  # -e answers it


def test_delegate_to_localhost_runs_on_the_controller_with_the_hosts_vars(tmp_path: Path) -> None:
    # h1 is an SSH host that does not exist: only delegated steps may run for it.
    ssh_host = Host(name="h1", address="198.18.255.254", port=1, vars={"word": "w1"})
    result = play(
        tmp_path,
        """
        - hosts: all
          gather_facts: false
          tasks:
            - command: echo {{ word }} {{ inventory_hostname }}
              delegate_to: localhost
              register: out
            - debug: msg="{{ out.stdout }}"
              delegate_to: 127.0.0.1
            - command: echo once
              delegate_to: localhost
              run_once: true
              register: once
            - debug: msg="{{ once.stdout }}"
              delegate_to: localhost
        """,
        hosts=[ssh_host],
    )
    assert msgs(result, "h1") == ["w1 h1", "once"]
    assert result.recap["h1"].to_json()["unreachable"] == 0


def test_add_host_and_group_by_feed_later_plays(tmp_path: Path) -> None:
    inventory = Inventory(
        hosts={"a": local("a", ["gpus"], kind="x"), "b": local("b", ["gpus"], kind="y")},
        groups={"all": ["a", "b"], "gpus": ["a", "b"], "ungrouped": []},
        children={"all": ["ungrouped", "gpus"], "gpus": [], "ungrouped": []},
        group_vars={"all": {}, "gpus": {}, "ungrouped": {}},
        host_vars={"a": {}, "b": {}},
    )
    pb = write(
        tmp_path / "site.yml",
        """
        - hosts: gpus
          gather_facts: false
          tasks:
            - add_host:
                name: extra1
                groups: added
                ansible_connection: local
                note: "{{ inventory_hostname }}"
              register: added
            - group_by: key=kind_{{ kind }}
            - group_by: key=kind_{{ kind }}
        - hosts: added
          gather_facts: false
          tasks:
            - debug: msg="{{ note }} {{ group_names }}"
        - hosts: kind_y
          gather_facts: false
          tasks:
            - debug: msg="{{ groups['kind_x'] }} {{ groups['kind_y'] }}"
        """,
    )
    result = run_playbook(pb, inventory)
    assert msgs(result, "extra1") == ["a ['added']"]  # once per play: the first host's values
    assert msgs(result, "b") == ["['a'] ['b']"]
    by_task = [(r.host, r.action, r.status) for r in result.results if r.action != "debug"]
    assert ("a", "add_host", "changed") in by_task and ("b", "add_host", "changed") not in by_task
    groups_by = [s for h, a, s in by_task if a == "group_by" and h == "a"]
    assert groups_by == ["changed", "ok"]  # the second time nothing is new


def test_role_dependencies_run_first_and_once(tmp_path: Path) -> None:
    write(tmp_path / "roles/common/tasks/main.yml", '- debug: msg="common {{ level }}"\n')
    write(tmp_path / "roles/common/defaults/main.yml", "level: 0\n")
    for role in ("web", "db"):
        write(
            tmp_path / f"roles/{role}/meta/main.yml",
            "dependencies:\n  - {role: common, level: 1}\n",
        )
        write(tmp_path / f"roles/{role}/tasks/main.yml", f"- debug: msg={role}\n")
    write(tmp_path / "roles/web/tasks/extra.yml", '- debug: msg="extra {{ x }} {{ role_name }}"\n')
    result = play(
        tmp_path,
        """
        - hosts: localhost
          gather_facts: false
          roles: [web, db]
          tasks:
            - include_role:
                name: web
                tasks_from: extra
                apply: {tags: [x]}
              vars: {x: 5}
              tags: [x]
        """,
    )
    assert msgs(result) == ["common 1", "web", "db", "extra 5 web"]
    loop = write(tmp_path / "roles/loop/meta/main.yml", "dependencies: [loop]\n")
    write(loop.parent.parent / "tasks/main.yml", "- debug: msg=x\n")
    with pytest.raises(PlaybookError, match="role dependency loop"):
        load_playbook(write(tmp_path / "l.yml", "- hosts: all\n  roles: [loop]\n"))


def test_rescue_sees_the_failed_task(tmp_path: Path) -> None:
    result = play(
        tmp_path,
        """
        - hosts: localhost
          gather_facts: false
          tasks:
            - block:
                - name: breaks
                  command: /bin/sh -c "exit 4"
              rescue:
                - debug: msg="{{ ansible_failed_task.name }} {{ ansible_failed_result.rc }}"
        """,
    )
    assert msgs(result) == ["breaks 4"]


def test_lookups_on_the_controller(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PV_WORD", "envword")
    write(tmp_path / "files/data.txt", "from files\n")
    write(tmp_path / "files/g-1.txt", "1")
    write(tmp_path / "files/g-2.txt", "2")
    write(tmp_path / "templates/t.j2", "hello {{ who }}")
    result = play(
        tmp_path,
        """
        - hosts: localhost
          gather_facts: false
          vars: {who: world}
          tasks:
            - debug: msg="{{ lookup('file', 'data.txt') }}"
            - debug: msg="{{ lookup('env', 'PV_WORD') }}"
            - debug: msg="{{ lookup('template', 't.j2') }}"
            - debug: msg="{{ lookup('pipe', 'echo a b | tr a-z A-Z') }}"
            - debug: msg="{{ query('fileglob', 'g-*.txt') | map('basename') | list }}"
            - debug: msg="{{ lookup('first_found', ['nope.txt', 'files/data.txt']) | basename }}"
            - debug: msg="{{ query('first_found', ['nope.txt'], skip=True) == [] }}"
        """,
    )
    assert msgs(result) == [
        "from files", "envword", "hello world", "A B", ["g-1.txt", "g-2.txt"], "data.txt", True,
    ]  # fmt: skip
    failed = play(
        tmp_path,
        """
        - hosts: localhost
          gather_facts: false
          tasks:
            - debug: msg="{{ lookup('pipe', 'exit 3') }}"
            - debug: msg="{{ lookup('dig', 'x') }}"
              ignore_errors: true
        """,
    )
    first = failed.results[0].msg
    assert "lookup('pipe'): the command exited with 3" in first


def test_filters_beyond_jinja() -> None:
    f = EXTRA_FILTERS
    assert f["json_query"]({"a": [{"n": 1}, {"n": 2}]}, "a[].n") == [1, 2]
    assert f["ipaddr"]("10.1.2.3/24", "network") == "10.1.2.0"
    assert f["ipaddr"]("10.1.2.3/24", "netmask") == "255.255.255.0"
    assert f["ipaddr"]("not-an-ip") is False
    assert f["ipaddr"](["10.0.0.1", "x", "::1"]) == ["10.0.0.1", "::1"]
    assert f["ipv4"]("::1") is False and f["ipaddr"]("8.8.8.8", "public") == "8.8.8.8"
    with pytest.raises(jinja2.TemplateRuntimeError, match="query 'bogus' is not supported"):
        f["ipaddr"]("10.0.0.1", "bogus")
    try:
        hashed = f["password_hash"]("secret", "sha512", "saltsalt")
    except jinja2.TemplateRuntimeError as exc:  # neither passlib nor crypt on this Python
        assert "passlib" in str(exc)
    else:
        assert hashed.startswith("$6$") and "saltsalt" in hashed
        import crypt  # noqa: PLC0415 - the reference where the Python still has it

        assert crypt.crypt("secret", hashed) == hashed
    assert base64.b64decode("cGFyaXR5") == b"parity"


def test_backslashes_in_expressions_are_literal_as_in_ansible(tmp_path: Path) -> None:
    result = play(
        tmp_path,
        r"""
        - hosts: localhost
          gather_facts: false
          tasks:
            - debug:
                msg: |-
                  {{ 'gpu-01.rack' | regex_replace('^gpu-(\d+).*$', 'node\1') }}
            - debug: msg=tab
              when: "'a\\tb' | length == 3"
        """,
    )
    assert msgs(result) == ["node01", "tab"]


def test_unsupported_is_an_error_with_position_and_alternative(tmp_path: Path) -> None:
    pb = write(
        tmp_path / "site.yml",
        """
        - hosts: all
          serial: many
          tasks:
            - command: echo
              delegate_to: "{{ other }}"
            - command: echo
              delegate_to: gpu2
            - meta: restart_everything
        """,
    )
    with pytest.raises(PlaybookError) as err:
        load_playbook(pb)
    text = str(err.value)
    assert "site.yml:2:11: serial: 'many' is not a batch size" in text
    assert "site.yml:7:20: delegate_to: 'gpu2' is not supported" in text
    assert "site.yml:8:13: meta: 'restart_everything' is not supported (use one of" in text


def test_ansible_cfg_roles_path_and_become_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared = tmp_path / "shared-roles"
    write(shared / "tools/tasks/main.yml", "- debug: msg=tools\n")
    cfg = write(
        tmp_path / "ansible.cfg",
        f"[defaults]\nroles_path = {shared}\n[privilege_escalation]\nbecome = true\n",
    )
    monkeypatch.setenv("ANSIBLE_CONFIG", str(cfg))
    pb = write(tmp_path / "site.yml", "- hosts: all\n  roles: [tools]\n  tasks: []\n")
    loaded = load_playbook(pb)
    assert loaded.plays[0].become is True
    monkeypatch.setenv("ANSIBLE_BECOME", "false")
    assert load_playbook(pb).plays[0].become is False
    monkeypatch.setenv("ANSIBLE_ROLES_PATH", str(tmp_path / "elsewhere"))
    with pytest.raises(PlaybookError, match="role 'tools' not found"):
        load_playbook(pb)
    monkeypatch.setenv("ANSIBLE_FORKS", "zero")
    with pytest.raises(ConfigError, match="ANSIBLE_FORKS: forks must be a whole number"):
        load_playbook(pb)


def test_include_tasks_apply_passes_keywords_to_the_included_tasks(tmp_path: Path) -> None:
    write(tmp_path / "inc.yml", "- debug: msg=inside\n")
    text = """
        - hosts: localhost
          gather_facts: false
          tasks:
            - include_tasks:
                file: inc.yml
                apply: {tags: [deploy]}
              tags: [deploy]
            - debug: msg=untagged
        """
    assert msgs(play(tmp_path, text, tags=frozenset({"deploy"}))) == ["inside"]
    assert msgs(play(tmp_path, text)) == ["inside", "untagged"]
