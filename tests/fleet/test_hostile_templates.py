"""The hostile host's templates and terminal escapes (issue 20, defects 1, 2 and the terminal
item; the fixes are provision/taint.py and terminal.py): nothing it says is rendered on the
controller, and its text reaches the terminal as text.

Against the `hostile` fleet kind (tests/fleet/kinds.py), through the real CLI: a templated
hostname, files and a banner whose templates would create a canary on the controller, a run log
full of ANSI escapes and rich markup, and a /tmp symlink to a root-only file."""

from __future__ import annotations

import json
from pathlib import Path

import kinds
from test_hostile_host import Hostile, hostile  # noqa: F401 - the module's fleet fixture


def _canaries(hostile: Hostile) -> list[Path]:  # noqa: F811
    return [p for p in (hostile.fleet.hostile_canary(hostile.host), hostile.work / "PWNED") if p.exists()]


def _play(hostile: Hostile, name: str, body: str, facts: bool = False) -> Path:  # noqa: F811
    pb = hostile.work / f"{name}.yml"
    pb.write_text(f"- hosts: all\n  gather_facts: {'true' if facts else 'false'}\n  tasks:\n{body}")
    return pb


def test_command_output_slurp_and_facts_are_never_rendered(hostile: Hostile) -> None:  # noqa: F811
    t = f"{kinds.HOSTILE_DIR}/template.txt"
    body = f"""
    - command: cat {t}
      register: out
    - name: show-when
      debug: msg="rc {{{{ out.rc }}}}"
      when: out.rc == 0 and out.stdout is defined
    - name: show-stdout
      debug: msg="{{{{ out.stdout }}}}"
    - set_fact:
        kept: "{{{{ out.stdout_lines | join(' ') | upper | lower }}}}"
    - name: show-kept
      debug: var=kept
    - slurp: src={t}
      register: s
    - name: show-slurp
      debug: msg="{{{{ s.content | b64decode }}}}"
    - name: show-hostname
      debug: msg="{{{{ ansible_hostname }}}} {{{{ ansible_facts['hostname'] | default('') }}}}"
    - copy: content="{{{{ out.stdout }}}}" dest=/root/copied.txt
"""
    proc = hostile.provision("run", str(_play(hostile, "templates", body, facts=True)), "--json")
    assert _canaries(hostile) == [], "a host's text was rendered as a template on the controller"
    results = {r["task"]: r for r in json.loads(proc.stdout)["results"]}
    text = hostile.fleet.ns_exec(hostile.host, f"cat {t}").stdout
    assert results["show-stdout"]["result"]["msg"] == text.rstrip("\n")
    assert kinds.HOSTILE_HOSTNAME in results["show-hostname"]["result"]["msg"]
    assert results["show-when"]["status"] == "ok"
    assert hostile.fleet.ns_exec(hostile.host, "cat /root/copied.txt").stdout == text.rstrip("\n")


def test_host_text_reaches_the_terminal_as_text(hostile: Hostile) -> None:  # noqa: F811
    proc = hostile.provision("logs", hostile.host.name, kinds.HOSTILE_RUN)
    shown = proc.stdout + proc.stderr
    assert "\x1b" not in shown and "\x07" not in shown, repr(shown[-2000:])
    assert "[bold red]markup[/]" in shown, shown[-2000:]  # shown as typed, not interpreted
    body = f"""
    - command: cat {kinds.HOSTILE_DIR}/escapes.txt
      register: out
    - debug: var=out.stdout
"""
    run = hostile.provision("run", str(_play(hostile, "escapes", body)))
    assert "\x1b" not in run.stdout + run.stderr and "\x07" not in run.stdout + run.stderr
    assert _canaries(hostile) == []


def test_a_play_leaves_the_file_behind_the_tmp_symlink_alone(hostile: Hostile) -> None:  # noqa: F811
    body = """
    - copy: content="x" dest=/root/plain.txt
    - lineinfile: path=/root/plain.txt line=y
    - command: echo done
"""
    hostile.provision("run", str(_play(hostile, "tmp", body)))
    ns = hostile.fleet.ns_exec
    assert ns(hostile.host, f"cat {kinds.HOSTILE_SECRET_TARGET}").stdout == "root-only\n"
    assert ns(hostile.host, f"readlink {kinds.HOSTILE_TMP_LINK}").stdout.strip() == kinds.HOSTILE_SECRET_TARGET
