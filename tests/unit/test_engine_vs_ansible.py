"""Where behaviour should match Ansible's, compare with what Ansible does for the same playbook:
the same small playbooks run by ansible-playbook (connection local) and by provision must give
the same recap counts (and the same debug output). Skipped when ansible-core is not installed
(`pip install ansible-core`)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from provision.engine.runner import run_playbook
from provision.inventory.model import Host

ANSIBLE = shutil.which("ansible-playbook") or str(Path(sys.executable).parent / "ansible-playbook")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not os.access(ANSIBLE, os.X_OK),
        reason="ansible-core not installed (pip install ansible-core)",
    ),
]

KEYS = {
    "ok": "ok",
    "changed": "changed",
    "failures": "failed",
    "skipped": "skipped",
    "unreachable": "unreachable",
    "rescued": "rescued",
    "ignored": "ignored",
}


_CALLBACK = """
import json
from ansible.plugins.callback import CallbackBase


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "stdout"
    CALLBACK_NAME = "pvcompare"

    def __init__(self):
        super().__init__()
        self.msgs = []

    def v2_runner_on_ok(self, result):
        if result.task_name.startswith("show"):
            self.msgs.append(result._result.get("msg"))

    def v2_playbook_on_stats(self, stats):
        print("PVCOMPARE" + json.dumps({"stats": stats.summarize("localhost"), "msgs": self.msgs}))
"""


def ansible(
    playbook: Path, workdir: Path, *args: str, callback: str = _CALLBACK, name: str = "pvcompare"
) -> tuple[dict[str, int], list[Any]]:
    """ansible-playbook on localhost with the stdout callback `callback` (plugin `name`, which
    prints NAME-uppercased + JSON {stats, msgs}): (recap counts, messages)."""
    plugins = workdir / ".callbacks"
    plugins.mkdir(exist_ok=True)
    (plugins / f"{name}.py").write_text(callback)
    env = dict(
        os.environ,
        ANSIBLE_STDOUT_CALLBACK=name,
        ANSIBLE_CALLBACK_PLUGINS=str(plugins),
        ANSIBLE_LOCALHOST_WARNING="false",
        ANSIBLE_INVENTORY_UNPARSED_WARNING="false",
        ANSIBLE_LOCAL_TEMP=str(workdir / ".ansible-tmp"),
        ANSIBLE_PYTHON_INTERPRETER=sys.executable,
        ANSIBLE_RETRY_FILES_ENABLED="false",
        ANSIBLE_DEPRECATION_WARNINGS="false",
        ANSIBLE_NOCOLOR="1",
    )
    proc = subprocess.run(
        [ANSIBLE, "-i", "localhost,", "-c", "local", str(playbook), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=workdir,
        timeout=300,
    )
    tag = name.upper()
    marker = proc.stdout.find(tag)
    assert marker >= 0, (
        f"ansible-playbook gave no result: {proc.stdout[-2000:]} {proc.stderr[-2000:]}"
    )
    doc = json.loads(proc.stdout[marker + len(tag) :].splitlines()[0])
    return {KEYS[k]: v for k, v in doc["stats"].items() if k in KEYS}, doc["msgs"]


def ours(playbook: Path, **kwargs: Any) -> tuple[dict[str, int], list[Any]]:
    result = run_playbook(playbook, hosts=[Host("localhost", local=True)], **kwargs)
    s = result.recap["localhost"]
    stats = {**s.to_json(), "rescued": s.rescued, "ignored": s.ignored}
    msgs = [
        r.result.get("msg")
        for r in result.results
        if r.task.startswith("show") and r.status != "skipped"
    ]
    return stats, msgs


def compare(tmp_path: Path, text: str, ansible_args: tuple[str, ...] = (), **kwargs: Any) -> None:
    # each tool gets its own copy of the work dir, so file state starts equal
    results = []
    for tool in ("ansible", "provision"):
        work = tmp_path / tool
        work.mkdir(parents=True)
        pb = work / "site.yml"
        pb.write_text(textwrap.dedent(text).replace("WORK", str(work)).lstrip("\n"))
        if tool == "ansible":
            results.append(ansible(pb, work, *ansible_args))
        else:
            results.append(ours(pb, **kwargs))
    assert results[1] == results[0], f"provision {results[1]} != ansible {results[0]}"


def test_same_recap_for_conditionals_loops_and_errors(tmp_path: Path) -> None:
    compare(
        tmp_path,
        """
        - hosts: localhost
          gather_facts: false
          vars: {items_list: [1, 2, 3], flag: true}
          tasks:
            - name: loop with a skipped item
              debug: msg="{{ item }}"
              loop: "{{ items_list }}"
              when: item != 2
            - name: all items skipped
              debug: msg=x
              loop: [1]
              when: false
            - name: changed command
              command: echo hi
              register: out
            - name: not changed
              command: echo hi
              changed_when: false
            - name: ignored failure
              command: "false"
              ignore_errors: true
            - name: failed_when false
              command: "false"
              failed_when: false
            - name: show output
              debug: msg="{{ out.stdout }} {{ flag }}"
            - name: skipped
              debug: msg=x
              when: not flag
        """,
    )


def test_same_recap_for_handlers_and_blocks(tmp_path: Path) -> None:
    compare(
        tmp_path,
        """
        - hosts: localhost
          gather_facts: false
          tasks:
            - name: notify twice
              command: echo a
              notify: h
            - name: notify again
              command: echo b
              notify: h
            - block:
                - name: fails
                  command: "false"
                - name: not reached
                  debug: msg=x
              rescue:
                - name: show rescue
                  debug: msg=rescued
              always:
                - name: show always
                  debug: msg=always
          handlers:
            - name: h
              debug: msg=handled
        """,
    )


def test_same_recap_for_file_modules_and_second_run(tmp_path: Path) -> None:
    text = """
        - hosts: localhost
          gather_facts: false
          tasks:
            - file: path=WORK/d state=directory mode=0755
            - copy: dest=WORK/d/f content="hello\\n" mode=0644
            - lineinfile: path=WORK/d/g line=world create=yes
            - lineinfile: path=WORK/d/g regexp=^port= line=port=2
            - lineinfile: path=WORK/d/g line=hello insertbefore=BOF
            - file: path=WORK/d/link src=WORK/d/f state=link
            - stat: path=WORK/d/f
              register: st
            - name: show stat
              debug: msg="{{ st.stat.exists }} {{ st.stat.size }}"
        """
    compare(tmp_path / "first", text)
    # run each tool twice in the same dir: the second run's recap must match too (changed=0)
    for tool in ("ansible", "provision"):
        work = tmp_path / "twice" / tool
        work.mkdir(parents=True)
        pb = work / "site.yml"
        pb.write_text(textwrap.dedent(text).replace("WORK", str(work)).lstrip("\n"))
        first = ansible(pb, work) if tool == "ansible" else ours(pb)
        second = ansible(pb, work) if tool == "ansible" else ours(pb)
        assert second[0]["changed"] == 0, (tool, first, second)
        assert (work / "d/g").read_text() == "hello\nworld\nport=2\n"


def test_same_recap_in_check_mode_and_with_tags(tmp_path: Path) -> None:
    text = """
        - hosts: localhost
          gather_facts: false
          tasks:
            - {name: mkdir, file: {path: WORK/c, state: directory}, tags: [files]}
            - {name: cmd, command: echo x, tags: [cmds]}
            - {name: show always, debug: {msg: always}, tags: [always]}
        """
    compare(tmp_path / "check", text, ansible_args=("--check",), check=True)
    compare(tmp_path / "tags", text, ansible_args=("--tags", "cmds"), tags=["cmds"])
    assert not (tmp_path / "check" / "provision" / "c").exists()
