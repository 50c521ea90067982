"""Ansible's argument rules, checked when the task runs: Ansible's text for an argument neither
module knows, an argument at Ansible's default dropped, and the UnsupportedArgument hook the
Ansible fallback plugs into (`set_ansible_fallback`)."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from provision.engine.runner import run_playbook
from provision.inventory.model import Host
from provision.modules.argspec import ansible_module_names, spec_for_module
from provision.modules.base import (
    ArgError,
    ModuleResult,
    TaskContext,
    UnsupportedArgument,
    get_module,
    normalize_args,
    set_ansible_fallback,
)


@pytest.fixture
def fallback() -> Iterator[list[tuple[dict[str, Any], UnsupportedArgument]]]:
    calls: list[tuple[dict[str, Any], UnsupportedArgument]] = []

    def hook(ctx: TaskContext, exc: UnsupportedArgument) -> ModuleResult:
        calls.append((dict(ctx.args), exc))
        return ModuleResult(changed=True, msg=f"ran {exc.ansible_name}")

    set_ansible_fallback(hook)
    try:
        yield calls
    finally:
        set_ansible_fallback(None)


def test_specs_cover_the_builtin_modules_provision_implements() -> None:
    names = set(ansible_module_names())
    assert {"ansible.builtin.file", "ansible.builtin.user", "ansible.posix.mount"} <= names
    spec = spec_for_module("file")
    assert spec is not None and spec.names["dest"] == "path" and spec.options["follow"]["default"]


def test_unknown_argument_gets_ansibles_text() -> None:
    module = get_module("file")()
    with pytest.raises(ArgError) as err:
        normalize_args(module, {"path": "/x", "bogus": 1, "zap": 2})
    assert not isinstance(err.value, UnsupportedArgument)
    text = str(err.value)
    assert text.startswith(
        "Unsupported parameters for (file) module: bogus, zap. Supported parameters include: "
    )
    assert "access_time, " in text and text.endswith("(attr, dest, name).")


def test_ansible_only_argument_at_its_default_is_dropped_else_unsupported() -> None:
    module = get_module("file")()
    assert "follow" not in normalize_args(module, {"path": "/x", "follow": "yes"})
    with pytest.raises(UnsupportedArgument) as err:
        normalize_args(module, {"path": "/x", "follow": False, "seuser": "system_u"})
    assert err.value.arguments == ("follow", "seuser")
    assert err.value.ansible_name == "ansible.builtin.file"
    assert "pip install ansible-core" in str(err.value)


def _site(tmp_path: Path, body: str) -> Path:
    pb = tmp_path / "site.yml"
    pb.write_text(textwrap.dedent(body).lstrip("\n"))
    return pb


def test_without_a_fallback_the_task_fails_naming_module_argument_and_place(tmp_path: Path) -> None:
    pb = _site(
        tmp_path,
        f"""
        - hosts: localhost
          gather_facts: false
          tasks:
            - file: {{path: {tmp_path}/a, state: touch, seuser: system_u}}
              when: not (skip_me | default(false))
        """,
    )
    result = run_playbook(pb, hosts=[Host("localhost", local=True)])
    failed = [r for r in result.results if r.status == "failed"]
    assert len(failed) == 1 and "file: argument 'seuser' (task at " in failed[0].msg
    assert "site.yml:4:7" in failed[0].msg and not (tmp_path / "a").exists()
    skipped = run_playbook(pb, hosts=[Host("localhost", local=True)], extra_vars={"skip_me": True})
    assert skipped.exit_code() == 0 and skipped.recap["localhost"].skipped == 1


def test_the_fallback_runs_the_task_with_its_arguments_as_given(
    tmp_path: Path, fallback: list[Any]
) -> None:
    pb = _site(
        tmp_path,
        """
        - hosts: localhost
          gather_facts: false
          vars: {who: system_u}
          tasks:
            - file: {path: /x, seuser: "{{ who }}", mode: "0644"}
              register: r
            - assert: {that: [r.changed, "r.msg == 'ran ansible.builtin.file'"]}
        """,
    )
    result = run_playbook(pb, hosts=[Host("localhost", local=True)])
    assert result.exit_code() == 0, [r.msg for r in result.results]
    args, exc = fallback[0]
    assert args == {"path": "/x", "seuser": "system_u", "mode": "0644"}
    assert exc.module == "file" and exc.arguments == ("seuser",) and "site.yml:5:7" in exc.position
