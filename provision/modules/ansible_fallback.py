"""Ansible's own module, for a module provision does not implement (docs/playbooks.md, "Ansible's
own modules"). The payload comes from the bridge (provision/ansible_bridge: built by Ansible in its
own process); here it runs on the host over the task's connection — the host's Python reading the
program on stdin, become applied as for every task — and its JSON answer becomes the task's
result. Check mode and diff are passed as Ansible passes them (`_ansible_check_mode`,
`_ansible_diff`): a module without check-mode support answers "skipped" itself, as under Ansible.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any, ClassVar

from provision.ansible_bridge.payload import BridgeError, Built, build
from provision.modules.ansible_scripts import run_script_module
from provision.modules.base import (
    Module,
    ModuleFailure,
    ModuleResult,
    TaskContext,
    UnsupportedArgument,
    q,
    set_ansible_fallback,
)
from provision.paths import bundle_dir

_AUTO = ("", "auto", "auto_silent", "auto_legacy", "auto_legacy_silent")
_DROP = ("invocation", "stdout_lines", "stderr_lines", "_ansible_no_log", "_ansible_parsed")
_classes: dict[tuple[str, ...], type[Module]] = {}
_lock = threading.Lock()


class AnsibleModule(Module):
    """A module run as Ansible's; subclassed once per module name (see `ansible_module`)."""

    any_args = True  # Ansible's module checks its own arguments, with Ansible's messages
    built: ClassVar[Built]

    def run(self, ctx: TaskContext) -> ModuleResult:
        args = {k: v for k, v in ctx.args.items() if not k.startswith("_")}
        if ctx.args.get("_raw"):
            args["_raw_params"] = ctx.args["_raw"]
        args.update(internal_args(self.built, ctx))
        if self.built.style != "new":  # a script module (library/): run as Ansible runs it
            return to_result(*run_script_module(self.built.template, self.built.style, args, ctx))
        python = ctx.vars.get("ansible_python_interpreter") if ctx.vars else None
        python = "python3" if python is None or str(python).strip() in _AUTO else str(python)
        done = ctx.run(f"{q(python)} -", stdin=self.built.with_args(args))
        return to_result(done.stdout, done.stderr, done.exit_code)


def internal_args(built: Built, ctx: TaskContext) -> dict[str, Any]:
    """What ansible-playbook adds to every module call (ActionBase._update_module_args)."""
    return {
        "_ansible_check_mode": bool(ctx.check_mode),
        "_ansible_diff": bool(ctx.diff),
        "_ansible_no_log": False,
        "_ansible_debug": False,
        "_ansible_verbosity": 0,
        "_ansible_version": built.ansible_version,
        "_ansible_module_name": built.fqcn,
        "_ansible_syslog_facility": "LOG_USER",
        "_ansible_selinux_special_fs": ["fuse", "nfs", "vboxsf", "ramfs", "9p", "vfat"],
        "_ansible_shell_executable": "/bin/sh",
        "_ansible_keep_remote_files": False,
        "_ansible_tmpdir": None,
        "_ansible_remote_tmp": "~/.ansible/tmp",
        "_ansible_ignore_unknown_opts": False,
        "_ansible_target_log_info": None,
        "_ansible_tracebacks_for": [],
    }


def _json_object(stdout: str) -> dict[str, Any] | None:
    """The module's answer: from the first line that starts with `{` to the last that ends with
    `}` (what Ansible accepts too: a module may print noise around its JSON)."""
    lines = stdout.splitlines()
    starts = [i for i, line in enumerate(lines) if line.lstrip().startswith("{")]
    ends = [i for i, line in enumerate(lines) if line.rstrip().endswith("}")]
    if not starts or not ends or ends[-1] < starts[0]:
        return None
    try:
        value = json.loads("\n".join(lines[starts[0] : ends[-1] + 1]))
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def to_result(stdout: str, stderr: str, rc: int) -> ModuleResult:
    """The module's JSON as provision's result; no JSON is Ansible's "MODULE FAILURE"."""
    answer = _json_object(stdout or "")
    if answer is None:
        return ModuleResult(
            failed=True,
            msg="MODULE FAILURE: See stdout/stderr for the exact error",
            rc=rc,
            data={"module_stdout": stdout or "", "module_stderr": stderr or ""},
        )
    out = ModuleResult(changed=bool(answer.pop("changed", False)))
    failed = answer.pop("failed", None)
    code = answer.get("rc")
    out.failed = bool(failed) if failed is not None else code not in (None, 0, "0")
    out.skipped = bool(answer.pop("skipped", False))
    out.msg = str(answer.pop("msg", "") or "")
    out.rc = answer.pop("rc", None) if isinstance(code, int) else None
    for key in ("stdout", "stderr"):
        value = answer.pop(key, None)
        if value is not None:
            setattr(out, key, str(value))
    diff = answer.get("diff")  # stays registered as the module returned it (a dict, or a list)
    diffs = [diff] if isinstance(diff, dict) else diff if isinstance(diff, list) else []
    out.diff = [d for d in diffs if isinstance(d, dict) and d] or None
    facts = answer.pop("ansible_facts", None)
    if isinstance(facts, dict):
        out.facts = facts
    for key in _DROP:
        answer.pop(key, None)
    out.data = answer
    return out


def ansible_module(
    name: str, playbook_dir: Path, dirs: tuple[str, ...] = ()
) -> tuple[type[Module] | None, str]:
    """The module class for Ansible's module `name` (resolved as ansible-playbook would for a
    playbook in `playbook_dir`, with the roles `dirs`: a role's own library/ and module_utils/),
    or (None, why not): no Ansible here (with the install command), no such module, or one that
    cannot run this way."""
    key = (name, str(playbook_dir), *dirs)
    with _lock:
        cls = _classes.get(key)
    if cls is not None:
        return cls, ""
    try:
        built = build(name, str(playbook_dir), dirs)
    except BridgeError as exc:
        return None, exc.message
    cls = type(
        f"Ansible_{built.fqcn.replace('.', '_')}",
        (AnsibleModule,),
        {
            "name": name,
            "built": built,
            "__doc__": f"Ansible's {built.fqcn} (Ansible {built.ansible_version})",
        },
    )
    with _lock:
        _classes.setdefault(key, cls)
        return _classes[key], ""


ACTION_PLUGIN = "works through its action plugin"  # build_payload.py's reason for reboot & co


def unavailable_module(name: str, why: str) -> type[Module]:
    """A stand-in for a module provision can't run (`reboot`, which needs Ansible's controller
    side; or an unknown one in a dynamically included file): loading is no error, as in
    ansible-playbook, where a task is only resolved when it runs; the task fails when it runs,
    never when its `when` skips it or its handler is not notified."""

    def run(self: Module, ctx: TaskContext) -> ModuleResult:
        raise ModuleFailure(f"module {name!r} can't run in provision: {why}")

    return type(
        f"Unavailable_{name.replace('.', '_')}",
        (Module,),
        {"name": name, "any_args": True, "run": run, "__doc__": f"{name}: {why}"},
    )


def ansible_actions(
    keys: list[Any], playbook_dir: Path, dirs: tuple[str, ...] = ()
) -> tuple[list[Any], dict[str, str]]:
    """The loader's hook for a task none of whose keys is a provision module: the first key that
    is Ansible's module, else ([], why each is not)."""
    why_not: dict[str, str] = {}
    for key in keys:
        cls, why = ansible_module(str(key), playbook_dir, dirs)
        if cls is not None:
            return [key], {}
        why_not[str(key)] = why
    return [], why_not


def run_unsupported(ctx: TaskContext, exc: UnsupportedArgument) -> ModuleResult:
    """The engine's hook for a task whose arguments provision's native module does not implement
    (`UnsupportedArgument`): the task runs as Ansible's own module, with its arguments as given."""
    skip = bundle_dir("templates").parent
    dirs = [p for p in ctx.search_paths if p != skip]  # role, tasks dir, then the playbook's
    cls, why = ansible_module(exc.ansible_name, dirs[-1] if dirs else Path.cwd())
    if cls is None:
        raise ModuleFailure(f"{exc.describe()} ({why})")
    return cls().run(ctx)


set_ansible_fallback(run_unsupported)
