"""ansible-playbook's default callback output, for the compatible entry point
(`provision/cli/ansible_playbook.py`): scripts that read Ansible's output (`grep "ok=3"`, task
banners, `changed: [host]`) read provision's the same way.

    PLAY [name] ********************************************************************
    TASK [role : name] *************************************************************
    ok: [host] | changed: [host] | skipping: [host] | fatal: [host]: FAILED! => {...}
    ok: [host] => (item=x)
    PLAY RECAP *********************************************************************
    host                       : ok=2    changed=1    unreachable=0    failed=0    ...

Plain text on stdout (no colour), as Ansible's with ANSIBLE_NOCOLOR or a pipe. Values from the
host are printed as data (JSON), never interpreted.
"""

from __future__ import annotations

import json
import sys
import threading
from typing import Any, TextIO

from provision.engine.results import PlaybookResult, TaskResult

_COLUMNS = 79  # Ansible's banner width when stdout is not a terminal
_HIDDEN = ("_ansible_", "ansible_loop_var", "ansible_index_var", "_provision")
_DEBUG_DROP = ("changed", "failed", "skipped", "item", "ansible_loop_var", "ansible_index_var")


def banner(text: str) -> str:
    text = text.strip()
    return f"\n{text} {'*' * max(3, _COLUMNS - len(text))}"


def _clean(result: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in result.items() if not k.startswith(_HIDDEN)}


def _dump(value: Any, indent: int | None = None) -> str:
    return json.dumps(value, indent=indent, sort_keys=True, default=str, ensure_ascii=False)


class AnsibleDisplay:
    """The display interface of provision.engine.runner (NullDisplay), printing Ansible's text."""

    def __init__(self, verbosity: int = 0, out: TextIO | None = None) -> None:
        self.verbosity = verbosity
        self.out = out or sys.stdout
        self.lock = threading.Lock()
        self._task: tuple[str, str] | None = None  # (name, position) of the last banner
        self._done: set[str] = set()  # hosts whose result for that task is printed
        self._handlers: set[str] = set()  # positions of the play's handlers

    def _write(self, text: str) -> None:
        self.out.write(text + "\n")
        self.out.flush()

    def _banner_for(self, name: str, position: str, host: str, closing: bool) -> None:
        current = self._task
        same = current is not None and current[0] == name and (
            not position or not current[1] or current[1] == position
        )
        if not same or host in self._done:
            kind = "RUNNING HANDLER" if position and position in self._handlers else "TASK"
            self._write(banner(f"{kind} [{name}]"))
            self._task, self._done = (name, position), set()
        elif position and current is not None and not current[1]:
            self._task = (name, position)
        if closing:
            self._done.add(host)

    # -- the runner's events ---------------------------------------------------------------------
    def start(self) -> None: ...

    def stop(self) -> None: ...

    def play_start(self, play: Any, hosts: list[Any]) -> None:
        with self.lock:
            self._write(banner(f"PLAY [{play.name}]"))
            self._task, self._done = None, set()
            self._handlers = {str(h.pos) for h in getattr(play, "handlers", ())}
            if not hosts:
                self._write("skipping: no hosts matched")

    def task_start(self, host: str, task: str) -> None: ...

    def host_done(self, host: str) -> None: ...

    def message(self, text: str) -> None:
        with self.lock:
            self._write(f"[WARNING]: {text}")

    def item_result(
        self, host: str, task: str, label: str, result: dict[str, Any], action: str = ""
    ) -> None:
        with self.lock:
            self._banner_for(task, "", host, closing=False)
            item = f"(item={label})"
            if result.get("failed"):
                self._write(f"failed: [{host}] {item} => {_dump(_clean(result))}")
                return
            status = (
                "skipping" if result.get("skipped") else "changed" if result.get("changed")
                else "ok"
            )
            line = f"{status}: [{host}] => {item}"
            if action == "debug" and status != "skipping":
                shown = {k: v for k, v in _clean(result).items() if k not in _DEBUG_DROP}
                line += f" => {_dump(shown, 4)}"
            elif self.verbosity >= 1 and status != "skipping":
                line += f" => {_dump(_clean(result))}"
            self._write(line)

    def task_result(self, result: TaskResult, full: dict[str, Any]) -> None:
        with self.lock:
            self._banner_for(result.task, result.position, result.host, closing=True)
            host = result.host
            res = result.result if isinstance(result.result, dict) else {}
            looped = isinstance(res.get("results"), list) and result.items
            if result.status == "unreachable":
                self._write(f"fatal: [{host}]: UNREACHABLE! => {_dump(_clean(res) or {'msg': result.msg})}")
                return
            if result.status == "failed":
                if not looped:
                    shown = {k: v for k, v in _clean(res).items() if k != "failed"}
                    if result.msg and "msg" not in shown:
                        shown["msg"] = result.msg
                    self._write(f"[ERROR]: Task failed: {shown.get('msg', '')}")
                    self._write(f"Origin: {result.position}\n")
                    self._write(f"fatal: [{host}]: FAILED! => {_dump(shown)}")
                if result.ignored:
                    self._write("...ignoring")
                return
            if result.action in ("include_tasks", "include_role") and result.status != "skipped":
                if not looped:
                    self._write(f"included: {res.get('include') or result.task} for {host}")
                return
            if looped:
                return  # the items are the output, as Ansible's
            status = {"skipped": "skipping"}.get(result.status, result.status)
            line = f"{status}: [{host}]"
            if result.action == "debug" and result.status != "skipped":
                shown = {k: v for k, v in _clean(res).items() if k not in _DEBUG_DROP}
                line += f" => {_dump(shown, 4)}"
            elif self.verbosity >= 1 and status != "skipping" and res:
                line += f" => {_dump(_clean(res))}"
            self._write(line)


def recap_lines(result: PlaybookResult) -> list[str]:
    """PLAY RECAP as Ansible prints it (`%-26s : ok=%-4s changed=%-4s ...`)."""
    lines = [banner("PLAY RECAP")]
    for host in sorted(result.recap):
        s = result.recap[host]
        fields = (
            ("ok", s.ok), ("changed", s.changed), ("unreachable", s.unreachable),
            ("failed", s.failed), ("skipped", s.skipped), ("rescued", s.rescued),
            ("ignored", s.ignored),
        )
        lines.append(f"{host:<26} : " + " ".join(f"{k}={str(v):<4}" for k, v in fields))
    lines.append("")
    return lines
