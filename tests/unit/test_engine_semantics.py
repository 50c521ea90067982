"""Playbook semantics, run for real on this machine through LocalConnection in temp dirs."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from provision.engine.results import PlaybookResult
from provision.engine.runner import run_playbook, tags_selected
from provision.inventory.model import Host, Inventory


def local(name: str = "localhost", groups: list[str] | None = None, **host_vars: Any) -> Host:
    return Host(name=name, local=True, groups=groups or [], vars=dict(host_vars))


def play(
    tmp_path: Path,
    text: str,
    hosts: list[Host] | None = None,
    inventory: Inventory | None = None,
    files: dict[str, str] | None = None,
    **kwargs: Any,
) -> PlaybookResult:
    for rel, content in (files or {}).items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(content).lstrip("\n"))
    pb = tmp_path / "site.yml"
    pb.write_text(textwrap.dedent(text).replace("TMP", str(tmp_path)).lstrip("\n"))
    if inventory is None:
        return run_playbook(pb, hosts=hosts or [local()], **kwargs)
    return run_playbook(pb, inventory, **kwargs)


def stats(result: PlaybookResult, host: str = "localhost") -> dict[str, int]:
    return result.recap[host].to_json()


def results(result: PlaybookResult, host: str = "localhost") -> dict[str, Any]:
    return {r.task: r for r in result.for_host(host)}


def debug_msgs(result: PlaybookResult, host: str = "localhost") -> list[Any]:
    return [
        r.result.get("msg")
        for r in result.for_host(host)
        if r.action == "debug" and r.status != "skipped"
    ]


def test_when_register_and_conditions(tmp_path: Path) -> None:
    result = play(
        tmp_path,
        """
        - hosts: localhost
          gather_facts: false
          vars: {enabled: true, n: 3}
          tasks:
            - name: probe
              command: echo hello
              register: out
              changed_when: false
            - name: runs
              debug: msg="{{ out.stdout }} {{ out.rc }}"
              when: out.stdout == 'hello' and enabled
            - name: skipped
              debug: msg=never
              when:
                - enabled
                - n > 5
            - name: registered skip
              command: echo x
              when: false
              register: skipped_one
            - debug: msg="{{ skipped_one is skipped }}"
        """,
    )
    assert result.ok
    by_name = results(result)
    assert by_name["probe"].status == "ok"
    assert by_name["skipped"].status == "skipped"
    assert debug_msgs(result) == ["hello 0", True]
    assert stats(result) == {
        "ok": 3, "changed": 0, "failed": 0, "skipped": 2, "unreachable": 0, "ignored": 0, "rescued": 0
    }  # fmt: skip


def test_loops_labels_and_registered_results(tmp_path: Path) -> None:
    result = play(
        tmp_path,
        """
        - hosts: localhost
          gather_facts: false
          vars:
            users: [{name: ann, uid: 1}, {name: bob, uid: 2}]
          tasks:
            - name: files
              file: path=TMP/{{ item.name }} state=touch
              loop: "{{ users }}"
              loop_control: {label: "{{ item.name }}", index_var: i}
              register: made
            - debug: msg="{{ made.results | map(attribute='item.name') | list }} {{ made.results | length }}"
            - debug: msg="{{ item }}"
              with_items: [[1, 2], 3]
            - debug: msg="{{ item.key }}={{ item.value }}"
              with_dict: {a: 1}
            - debug: msg="{{ item }}"
              loop: [1, 2, 3]
              when: item != 2
              register: partial
            - debug: msg="{{ partial.results | selectattr('skipped', 'defined') | list | length }}"
        """,
    )
    assert result.ok, [r.msg for r in result.results]
    assert (tmp_path / "ann").exists() and (tmp_path / "bob").exists()
    files_result = results(result)["files"]
    assert files_result.items == 2 and files_result.status == "changed"
    assert [r["_ansible_item_label"] for r in files_result.result["results"]] == ["ann", "bob"]
    msgs = debug_msgs(result)
    assert msgs[0] == "['ann', 'bob'] 2"
    assert msgs[-1] == 1


def test_handlers_run_once_at_end_of_section_in_definition_order(tmp_path: Path) -> None:
    log = tmp_path / "log"
    result = play(
        tmp_path,
        """
        - hosts: localhost
          gather_facts: false
          pre_tasks:
            - command: echo pre
              notify: second
          tasks:
            - shell: echo task1 >> TMP/log
              notify: [second, first]
            - shell: echo task2 >> TMP/log
              notify: first
            - command: echo unchanged
              changed_when: false
              notify: never
            - copy: dest=TMP/f content=x
              notify: topic
          handlers:
            - name: first
              shell: echo first >> TMP/log
            - name: second
              shell: echo second >> TMP/log
            - name: never
              shell: echo never >> TMP/log
            - name: via listen
              shell: echo listened >> TMP/log
              listen: topic
        """,
    )
    assert result.ok
    # pre_tasks' flush ran `second`; the tasks section ran each notified handler once
    assert log.read_text().split() == ["second", "task1", "task2", "first", "second", "listened"]


def test_handlers_skip_failed_host_unless_forced(tmp_path: Path) -> None:
    text = """
        - hosts: localhost
          gather_facts: false
          force_handlers: FORCE
          tasks:
            - command: echo hi
              notify: h
            - fail: msg=boom
          handlers:
            - name: h
              file: path=TMP/handled state=touch
        """
    result = play(tmp_path, text.replace("FORCE", "false"))
    assert not result.ok and not (tmp_path / "handled").exists()
    result = play(tmp_path, text.replace("FORCE", "true"))
    assert (tmp_path / "handled").exists()


@pytest.mark.parametrize(
    ("tags", "only", "skip", "runs"),
    [
        (set(), set(), set(), True),
        ({"a"}, {"a"}, set(), True),
        ({"a"}, {"b"}, set(), False),
        ({"always"}, {"b"}, set(), True),
        ({"always"}, set(), {"always"}, False),
        ({"never"}, set(), set(), False),
        ({"never", "debug"}, {"debug"}, set(), True),
        ({"a"}, {"tagged"}, set(), True),
        (set(), {"untagged"}, set(), True),
        ({"a", "b"}, set(), {"b"}, False),
    ],
)
def test_tag_rules(tags: set[str], only: set[str], skip: set[str], runs: bool) -> None:
    assert tags_selected(frozenset(tags), frozenset(only), frozenset(skip)) is runs


def test_tags_select_tasks(tmp_path: Path) -> None:
    text = """
        - hosts: localhost
          gather_facts: false
          tasks:
            - {debug: {msg: one}, tags: [one]}
            - {debug: {msg: two}, tags: two}
            - {debug: {msg: always}, tags: [always]}
            - {debug: {msg: untagged}}
        """
    assert debug_msgs(play(tmp_path, text, tags=["two"])) == ["two", "always"]
    assert debug_msgs(play(tmp_path, text, skip_tags=["one", "always"])) == ["two", "untagged"]


def test_check_mode_changes_nothing_and_reports_changes(tmp_path: Path) -> None:
    (tmp_path / "conf").write_text("a=1\n")
    text = """
        - hosts: localhost
          gather_facts: false
          tasks:
            - name: dir
              file: path=TMP/newdir state=directory
            - name: copy
              copy: dest=TMP/conf content="a=2\\n"
            - name: line
              lineinfile: path=TMP/conf line="b=3"
            - name: cmd
              command: touch TMP/touched
            - name: forced
              command: echo real
              check_mode: false
              register: real
        """
    before = sorted(p.name for p in tmp_path.iterdir()) + ["site.yml"]
    result = play(tmp_path, text, check=True, diff=True)
    assert result.ok, [r.msg for r in result.results]
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # site.yml existed already
    assert (tmp_path / "conf").read_text() == "a=1\n"
    by_name = results(result)
    assert by_name["dir"].status == "changed"
    assert by_name["copy"].status == "changed"
    assert by_name["copy"].result["diff"][0]["before"] == "a=1\n"
    assert by_name["copy"].result["diff"][0]["after"] == "a=2\n"
    assert by_name["line"].status == "changed"
    assert by_name["cmd"].status == "skipped"
    assert by_name["forced"].status == "changed"  # check_mode: false runs for real


def test_failed_when_changed_when_ignore_errors(tmp_path: Path) -> None:
    result = play(
        tmp_path,
        """
        - hosts: localhost
          gather_facts: false
          tasks:
            - name: grep miss is fine
              shell: grep -q nothing /dev/null
              register: g
              failed_when: g.rc > 1
              changed_when: false
            - name: output decides failure
              command: echo ERROR
              register: e
              failed_when: "'ERROR' in e.stdout"
              ignore_errors: true
            - name: still here
              debug: msg="{{ e.failed }} {{ g.rc }}"
        """,
    )
    assert result.ok
    by_name = results(result)
    assert by_name["grep miss is fine"].status == "ok"
    assert (
        by_name["output decides failure"].status == "failed"
        and by_name["output decides failure"].ignored
    )
    assert debug_msgs(result) == ["True 1"]
    assert stats(result)["failed"] == 0


def test_retries_until_delay(tmp_path: Path) -> None:
    result = play(
        tmp_path,
        """
        - hosts: localhost
          gather_facts: false
          tasks:
            - name: count
              shell: echo x >> TMP/n; wc -l < TMP/n
              register: r
              until: r.stdout | int >= 3
              retries: 5
              delay: 0
            - name: gives up
              shell: exit 1
              retries: 2
              delay: 0
              ignore_errors: true
              register: g
            - debug: msg="{{ r.attempts }} {{ g.attempts }}"
        """,
    )
    assert debug_msgs(result) == ["3 3"]
    assert (tmp_path / "n").read_text().count("x") == 3
    assert "gave up after 3 attempts" in results(result)["gives up"].msg


def test_run_once_runs_on_first_host_and_shares_result(tmp_path: Path) -> None:
    hosts = [local("h1"), local("h2"), local("h3")]
    result = play(
        tmp_path,
        """
        - hosts: all
          gather_facts: false
          tasks:
            - name: once
              shell: echo "{{ inventory_hostname }}" >> TMP/once; echo ran-on-{{ inventory_hostname }}
              run_once: true
              register: once
            - set_fact: {shared: "{{ inventory_hostname }}"}
              run_once: true
            - debug: msg="{{ once.stdout }} {{ shared }}"
        """,
        hosts=hosts,
    )
    assert result.ok
    assert (tmp_path / "once").read_text().split() == ["h1"]
    for host in ("h1", "h2", "h3"):
        assert debug_msgs(result, host) == ["ran-on-h1 h1"]
    assert [r.host for r in result.results if r.task == "once"] == ["h1"]


def test_failing_host_stops_alone_any_errors_fatal_stops_all(tmp_path: Path) -> None:
    text = """
        - hosts: all
          gather_facts: false
          any_errors_fatal: FATAL
          tasks:
            - fail: msg="h1 breaks"
              when: inventory_hostname == 'h1'
            - file: path=TMP/{{ inventory_hostname }} state=touch
        """
    result = play(tmp_path, text.replace("FATAL", "false"), hosts=[local("h1"), local("h2")])
    assert result.failed_hosts == ["h1"] and result.exit_code() == 1
    assert not (tmp_path / "h1").exists() and (tmp_path / "h2").exists()
    (tmp_path / "h2").unlink()
    result = play(tmp_path, text.replace("FATAL", "true"), hosts=[local("h1"), local("h2")])
    assert not (tmp_path / "h2").exists()


def test_failed_hosts_sit_out_later_plays(tmp_path: Path) -> None:
    result = play(
        tmp_path,
        """
        - hosts: all
          gather_facts: false
          tasks:
            - fail: msg=x
              when: inventory_hostname == 'h1'
        - hosts: all
          gather_facts: false
          tasks:
            - debug: msg="second play"
        """,
        hosts=[local("h1"), local("h2")],
    )
    assert debug_msgs(result, "h1") == [] and debug_msgs(result, "h2") == ["second play"]


def test_block_rescue_always(tmp_path: Path) -> None:
    result = play(
        tmp_path,
        """
        - hosts: localhost
          gather_facts: false
          tasks:
            - block:
                - command: "false"
                - debug: msg=not-reached
              rescue:
                - debug: msg="rescued {{ ansible_failed_result.rc }}"
              always:
                - debug: msg=always
            - debug: msg=after
        """,
    )
    assert result.ok
    assert debug_msgs(result) == ["rescued 1", "always", "after"]
    assert result.recap["localhost"].rescued == 1 and result.recap["localhost"].failed == 0


def test_include_and_import_tasks(tmp_path: Path) -> None:
    result = play(
        tmp_path,
        """
        - hosts: localhost
          gather_facts: false
          vars: {which: two}
          tasks:
            - import_tasks: tasks/one.yml
              vars: {greeting: hi}
            - include_tasks: "tasks/{{ which }}.yml"
              loop: [a, b]
              loop_control: {loop_var: letter}
            - include_tasks: tasks/one.yml
              when: false
        """,
        files={
            "tasks/one.yml": "- debug: msg=\"one {{ greeting | default('-') }}\"\n",
            "tasks/two.yml": '- debug: msg="two {{ letter }}"\n',
        },
    )
    assert result.ok, [r.msg for r in result.results]
    assert debug_msgs(result) == ["one hi", "two a", "two b"]


def test_roles_defaults_vars_handlers_templates(tmp_path: Path) -> None:
    result = play(
        tmp_path,
        """
        - hosts: localhost
          gather_facts: false
          roles:
            - role: app
              app_port: 9000
          tasks:
            - debug: msg="{{ app_port | default('not visible outside the role') }}"
        """,
        files={
            "roles/app/defaults/main.yml": "app_port: 80\napp_name: demo\n",
            "roles/app/vars/main.yml": "app_dir: TMP_APP\n",
            "roles/app/tasks/main.yml": """
                - name: config
                  template: src=app.conf.j2 dest={{ app_dir }}/app.conf
                  notify: reload app
                """,
            "roles/app/templates/app.conf.j2": "name={{ app_name }}\nport={{ app_port }}\n",
            "roles/app/handlers/main.yml": "- name: reload app\n  file: path={{ app_dir }}/reloaded state=touch\n",
        }
        | {"roles/app/vars/main.yml": f"app_dir: {tmp_path}\n"},
    )
    assert result.ok, [r.msg for r in result.results]
    assert (tmp_path / "app.conf").read_text() == "name=demo\nport=9000\n"
    assert (tmp_path / "reloaded").exists()
    # Ansible's scope: the role's defaults are the play's, its parameters are not
    assert debug_msgs(result) == [80]


PRECEDENCE_CASES = [
    # (name, where the winning value is set)
    ("role default only", {"role_default"}, "role_default"),
    ("group beats role default", {"role_default", "group"}, "group"),
    ("host beats group", {"group", "host"}, "host"),
    ("play vars beat host", {"host", "play"}, "play"),
    ("vars_files beat play vars", {"play", "vars_file"}, "vars_file"),
    ("role vars beat vars_files", {"vars_file", "role_vars"}, "role_vars"),
    ("block vars beat role vars", {"role_vars", "block"}, "block"),
    ("task vars beat block vars", {"block", "task"}, "task"),
    ("set_fact beats task vars", {"task", "set_fact"}, "set_fact"),
    (
        "extra vars beat everything",
        {"group", "host", "play", "role_vars", "task", "set_fact", "extra"},
        "extra",
    ),
]


@pytest.mark.parametrize(
    ("case", "levels", "winner"), PRECEDENCE_CASES, ids=[c[0] for c in PRECEDENCE_CASES]
)
def test_variable_precedence(tmp_path: Path, case: str, levels: set[str], winner: str) -> None:
    def at(level: str) -> bool:
        return level in levels

    inventory = Inventory()
    host_vars = {"v": "host"} if at("host") else {}
    group_vars = {"v": "group"} if at("group") else {}
    inventory.hosts["localhost"] = Host(
        "localhost", local=True, groups=["g"], vars={**group_vars, **host_vars}
    )
    inventory.groups = {"all": ["localhost"], "g": ["localhost"]}
    files = {
        "roles/r/defaults/main.yml": "v: role_default\n" if at("role_default") else "{}\n",
        "roles/r/vars/main.yml": "v: role_vars\n" if at("role_vars") else "{}\n",
        "vf.yml": "v: vars_file\n" if at("vars_file") else "{}\n",
        "roles/r/tasks/main.yml": """
            - block:
                - set_fact: {v: set_fact}
                  when: SETFACT
                - debug: {msg: "{{ v }}"}
                  TASKVARS
              BLOCKVARS
            """.replace("SETFACT", str(at("set_fact")).lower())
        .replace("TASKVARS", "vars: {v: task}" if at("task") else "")
        .replace("BLOCKVARS", "vars: {v: block}" if at("block") else ""),
    }
    play_vars = "vars: {v: play}" if at("play") else ""
    result = play(
        tmp_path,
        f"""
        - hosts: all
          gather_facts: false
          {play_vars}
          vars_files: [vf.yml]
          roles: [r]
        """,
        inventory=inventory,
        files=files,
        extra_vars={"v": "extra"} if at("extra") else None,
    )
    assert result.ok, [r.msg for r in result.results]
    assert debug_msgs(result) == [winner]


def test_undefined_variable_error_names_task_host_and_variable(tmp_path: Path) -> None:
    result = play(
        tmp_path,
        """
        - hosts: localhost
          gather_facts: false
          tasks:
            - name: uses a typo
              command: echo {{ data_dri }}
            - debug: msg=not-reached
        """,
    )
    failure = results(result)["uses a typo"]
    assert failure.status == "failed"
    assert "task 'uses a typo'" in failure.msg and "site.yml:4:7" in failure.msg
    assert "host localhost" in failure.msg and "'data_dri' is undefined" in failure.msg
    assert debug_msgs(result) == []


INJECTIONS = [
    "$(touch PWNED)",
    "`touch PWNED`",
    "; touch PWNED",
    "o'brien",
    'a"b',
    "x && touch PWNED",
    "$HOME*",
]


def test_injection_through_vars_and_file_names_is_data(tmp_path: Path) -> None:
    work = tmp_path / "w"
    work.mkdir()
    result = play(
        tmp_path,
        """
        - hosts: localhost
          gather_facts: false
          vars:
            names: NAMES
          tasks:
            - file: path="TMP/w/{{ item }}" state=directory
              loop: "{{ names }}"
            - copy: dest="TMP/w/{{ item }}/f" content="{{ item }}"
              loop: "{{ names }}"
            - lineinfile: path="TMP/w/{{ item }}/f" line="{{ item }}-2"
              loop: "{{ names }}"
            - command: ls "TMP/w/{{ item }}"
              loop: "{{ names }}"
              register: ls
            - shell: cat "TMP/w/{{ item }}/f" '{{ item }}' {{ item }}; echo {{ item }} | wc -c
              loop: "{{ names }}"
              register: sh
              failed_when: false
            - command:
                argv: [touch, "TMP/w/{{ item }}/argv"]
              loop: "{{ names }}"
            - stat: path="TMP/w/{{ item }}/f"
              loop: "{{ names }}"
              register: st
            - assert:
                that: st.results | map(attribute='stat.exists') | list | min
        """.replace("NAMES", json.dumps(INJECTIONS)),
        check=False,
    )
    assert result.ok, [r.msg for r in result.results if r.status == "failed"]
    assert not list(tmp_path.rglob("PWNED")) and not Path("PWNED").exists()
    for name in INJECTIONS:
        assert (work / name / "f").read_text() == f"{name}\n{name}-2\n"
        assert (work / name / "argv").exists()
    sh = results(result)["shell"].result["results"]
    for one, name in zip(sh, INJECTIONS, strict=True):
        first = one["stdout_lines"][0]
        assert first.startswith(name)  # cat printed the file: the quoted path was one word
        assert one["stdout_lines"][-1].strip() == str(
            len(name.encode()) + 1
        )  # echo got the value intact


def test_no_log_and_secret_masking(tmp_path: Path) -> None:
    result = play(
        tmp_path,
        """
        - hosts: localhost
          gather_facts: false
          vars:
            db_password: s3cr3t-value
          tasks:
            - name: hidden
              command: echo {{ db_password }}
              no_log: true
            - name: masked
              command: echo "pw is {{ db_password }}"
            - name: failing hidden
              shell: echo {{ db_password }}; exit 3
              no_log: true
              ignore_errors: true
        """,
    )
    document = json.dumps(result.to_json())
    assert "s3cr3t-value" not in document
    by_name = results(result)
    assert "censored" in by_name["hidden"].result
    assert by_name["masked"].result["stdout"] == "pw is ********"
    assert (
        by_name["failing hidden"].status == "failed"
        and "s3cr3t" not in by_name["failing hidden"].msg
    )


def test_unreachable_host_is_reported_others_go_on(tmp_path: Path) -> None:
    from provision.connection.base import ConnectOptions

    dead = Host("dead", address="127.0.0.1", port=1, user="nobody")
    result = play(
        tmp_path,
        """
        - hosts: all
          gather_facts: false
          tasks:
            - command: echo hi
            - debug: msg=after
        """,
        hosts=[dead, local("alive")],
        options=ConnectOptions(connect_retries=0, connect_timeout=3),
    )
    assert result.recap["dead"].unreachable == 1 and result.recap["alive"].ok == 2
    assert result.exit_code() == 4


def test_set_fact_persists_across_plays_meta_and_omit(tmp_path: Path) -> None:
    result = play(
        tmp_path,
        """
        - hosts: localhost
          gather_facts: false
          tasks:
            - set_fact: {remembered: 42}
            - file: path=TMP/x state=touch mode="{{ none_mode | default(omit) }}"
            - meta: end_host
            - debug: msg=not-reached
        - hosts: localhost
          gather_facts: false
          environment: {GREETING: "hi there"}
          tasks:
            - shell: echo "$GREETING {{ remembered + 1 }}"
              register: r
            - debug: msg="{{ r.stdout }}"
        """,
    )
    assert result.ok, [r.msg for r in result.results]
    assert debug_msgs(result) == ["hi there 43"]


def test_gather_facts_exposes_ansible_names(tmp_path: Path) -> None:
    result = play(
        tmp_path,
        """
        - hosts: localhost
          tasks:
            - assert:
                that:
                  - ansible_hostname | length > 0
                  - ansible_processor_vcpus >= 1
                  - ansible_memtotal_mb > 0
                  - ansible_distribution | length > 0
                  - ansible_python_version is defined
                  - provision_facts.cpu is defined
                  - inventory_hostname == 'localhost'
                  - hostvars['localhost'].ansible_hostname == ansible_hostname
                  - "'all' in groups"
                  - playbook_dir == 'TMP'
        """,
    )
    assert result.ok, [r.msg for r in result.results]
    assert results(result)["Gathering Facts"].status == "ok"
