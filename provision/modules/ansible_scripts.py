"""Ansible's script modules: a module file Ansible does not wrap in AnsiballZ — an "old-style"
module (any executable text, its arguments a `key=value` file) or a `WANT_JSON` one (a JSON
arguments file) — as modules in a playbook's or role's `library/` or `ANSIBLE_LIBRARY` often are
(a shell script printing JSON). Run as ansible-core's ActionBase._execute_module runs them: the
module and its arguments file in a private temporary folder on the host, the command the
interpreter of its shebang (`ansible_<name>_interpreter` in its place when set, as
module_common._get_shebang; the module's first line rewritten to match), the module, the
arguments file. The script and its arguments travel on stdin, never in argv.
"""

from __future__ import annotations

import json
import shlex
from typing import Any

from provision.modules.base import TaskContext, q

_AUTO = ("", "auto", "auto_silent", "auto_legacy", "auto_legacy_silent")


def args_file(style: str, args: dict[str, Any]) -> bytes:
    """The arguments file Ansible writes: `k=v ` words quoted as shlex.quote(str(v)) for an
    old-style module, JSON for a WANT_JSON one."""
    if style == "old":
        return "".join(f"{k}={shlex.quote(str(v))} " for k, v in args.items()).encode()
    return json.dumps(args, default=str).encode()


def _shebang(first: str) -> tuple[str, list[str]] | None:
    """module_common._extract_interpreter: the interpreter and its arguments, or None."""
    if not first.startswith("#!"):
        return None
    try:
        words = shlex.split(first.strip()[2:])
    except ValueError:
        return None
    return (words[0], words[1:]) if words else None


def interpreter(first: str, ctx: TaskContext) -> list[str] | None:
    """The command words before the module: its shebang's interpreter, replaced by
    `ansible_<basename>_interpreter` when the task has it (for `python`,
    ansible_python_interpreter or the host's python3, as for every module), then the shebang's
    own arguments. None: no shebang, the module runs itself."""
    found = _shebang(first)
    if found is None:
        return None
    path, extra = found
    name = path.rsplit("/", 1)[-1].strip()
    chosen: Any = None
    if name == "python":
        chosen = ctx.vars.get("ansible_python_interpreter") if ctx.vars else None
        chosen = "python3" if chosen is None or str(chosen).strip() in _AUTO else chosen
    elif ctx.vars and f"ansible_{name}_interpreter" in ctx.vars:
        chosen = ctx.vars.get(f"ansible_{name}_interpreter")
    words = shlex.split(str(chosen).strip()) if chosen not in (None, "") else []
    return (words or [path]) + extra


def command_and_stdin(script: bytes, args: bytes, words: list[str] | None) -> tuple[str, bytes]:
    """The host's shell command and what goes on its stdin: the arguments file (read with dd to
    its exact length), then the module; both land in a fresh mktemp -d folder, removed on exit."""
    run = " ".join(q(w) for w in words) + ' "$d/m"' if words else '"$d/m"'
    command = (
        'd=$(mktemp -d "${TMPDIR:-/tmp}/.pv-module.XXXXXX") || exit 1; trap \'rm -rf "$d"\' EXIT; '
        f'dd of="$d/args" bs=1 count={len(args)} 2>/dev/null && cat > "$d/m" && chmod 700 "$d/m" '
        f'|| exit 1; {run} "$d/args" </dev/null'
    )
    return command, args + script


def run_script_module(
    template: str, style: str, args: dict[str, Any], ctx: TaskContext
) -> tuple[str, str, int]:
    """Run the script module `template` with `args` (internal `_ansible_*` ones included) on the
    task's host: its stdout, stderr and exit code."""
    script = template.encode("utf-8", "surrogateescape")
    first, sep, rest = script.partition(b"\n")
    words = interpreter(first.decode("utf-8", "replace"), ctx)
    if words is not None and _shebang(first.decode("utf-8", "replace")) != (words[0], words[1:]):
        # module_common.modify_module: the first line names the interpreter that runs it
        script = ("#!" + " ".join(words)).encode() + sep + rest
    command, stdin = command_and_stdin(script, args_file(style, args), words)
    done = ctx.run(command, stdin=stdin)
    return done.stdout, done.stderr, done.exit_code
