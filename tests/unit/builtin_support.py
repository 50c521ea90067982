"""Shared helpers for the builtin-module unit tests (tests/unit/test_modules_*.py): run a few tasks
on this machine through the real engine (LocalConnection), with TMP replaced by the test's temp dir."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

from provision.engine.results import PlaybookResult
from provision.engine.runner import run_playbook
from provision.inventory.model import Host


def run_tasks(
    tmp_path: Path,
    tasks: str,
    check: bool = False,
    diff: bool = False,
    extra_vars: dict[str, Any] | None = None,
    play_vars: str = "",
) -> PlaybookResult:
    pb = tmp_path / "site.yml"
    body = textwrap.indent(textwrap.dedent(tasks).strip("\n"), "    ")
    head = "- hosts: localhost\n  gather_facts: false\n"
    if play_vars:
        head += "  vars:\n" + textwrap.indent(textwrap.dedent(play_vars).strip("\n"), "    ") + "\n"
    pb.write_text(f"{head}  tasks:\n{body}\n".replace("TMP", str(tmp_path)))
    return run_playbook(
        pb, hosts=[Host("localhost", local=True)], check=check, diff=diff, extra_vars=extra_vars
    )


def results(result: PlaybookResult) -> list[tuple[str, dict[str, Any]]]:
    return [(r.status, r.result) for r in result.results]


def ok(result: PlaybookResult) -> PlaybookResult:
    failures = [(r.task, r.msg, r.result) for r in result.results if r.status == "failed"]
    assert result.ok and not failures, failures
    return result


def assert_idempotent(tmp_path: Path, tasks: str, **kw: Any) -> PlaybookResult:
    """First run changes something; then a check run and a second real run change nothing."""
    first = ok(run_tasks(tmp_path, tasks, diff=True, **kw))
    assert first.recap["localhost"].changed > 0, results(first)
    check = ok(run_tasks(tmp_path, tasks, check=True, **kw))
    assert check.recap["localhost"].changed == 0, results(check)
    second = ok(run_tasks(tmp_path, tasks, **kw))
    assert second.recap["localhost"].changed == 0, results(second)
    return first
