"""`script` (a controller-side script run on the host) and `raw` (text for the host's shell).

script: one round trip — the script's bytes travel on stdin into a private temp file, which runs
(with `executable` when given) and is removed; `creates`/`removes` are checked in the same
command. Its arguments are words like `command`'s: a `{{ value }}` is one argument, never code.
raw: the user's shell text as written (`{{ }}` values still travel as data, as in `shell`).
"""

from __future__ import annotations

import secrets
from typing import Any

from provision.engine.templating import ShellTemplate
from provision.modules.base import Arg, Module, ModuleFailure, ModuleResult, TaskContext, register
from provision.modules.command import command_argv, shell_command
from provision.shell import Raw, expanding_word, quote, sh
from provision.shell import path as host_path


def _outcome(result: Any, data: dict[str, Any]) -> ModuleResult:
    failed = result.exit_code != 0
    return ModuleResult(
        changed=True,
        failed=failed,
        rc=result.exit_code,
        stdout=result.stdout,
        stderr=result.stderr,
        msg="non-zero return code" if failed else "",
        data=data,
    )


@register
class Script(Module):
    name = "script"
    args = {
        "cmd": Arg("raw"),
        "creates": Arg("path"),
        "removes": Arg("path"),
        "chdir": Arg("path"),
        "executable": Arg("str"),
        "decrypt": Arg("bool", default=True),
    }
    free_form = "cmd"
    free_form_keys = ("creates", "removes", "chdir", "executable", "decrypt")
    shell_args = ("cmd",)
    required_one_of = (("cmd",),)

    def run(self, ctx: TaskContext) -> ModuleResult:
        args = ctx.args
        argv, from_vars = command_argv(args["cmd"])
        if not argv:
            raise ModuleFailure("script needs the path of a script on the controller")
        chdir = args.get("chdir")
        if chdir and not str(chdir).startswith(("/", "~")):
            raise ModuleFailure(f"chdir {chdir} must be an absolute path for a Unix-aware remote node")
        local = ctx.find_file(argv[0], "files")
        words = [quote(w) if i in from_vars else expanding_word(w) for i, w in enumerate(argv) if i > 0]
        marker = "@@skip-" + secrets.token_hex(6)
        guard = []
        if args.get("creates"):
            guard.append(
                sh('if [ -e {p} ]; then echo {m} creates; exit 0; fi', p=host_path(args["creates"]), m=marker)
            )
        if args.get("removes"):
            guard.append(
                sh('if [ ! -e {p} ]; then echo {m} removes; exit 0; fi', p=host_path(args["removes"]), m=marker)
            )
        if ctx.check_mode:
            if not guard:
                return ModuleResult(skipped=True, msg="Check mode is not supported for this task.")
            probe = ctx.run("; ".join(guard) + "; exit 0")
            if marker in probe.stdout:
                return self._skipped(probe.stdout, marker, args)
            return ModuleResult(changed=True)
        if args.get("executable"):
            run_line = Raw(sh("{exe}", exe=args["executable"]) + ' "$t" ' + " ".join(words))
        else:
            run_line = Raw('"$t" ' + " ".join(words))
        body = sh(
            "{guard}t=$(mktemp \"${TMPDIR:-/tmp}/.pv-script.XXXXXX\") || exit 1; trap 'rm -f \"$t\"' EXIT; "
            'cat > "$t" && chmod 700 "$t" || exit 1; {cd}{run} </dev/null',
            guard=Raw("; ".join(guard) + ("; " if guard else "")),
            cd=Raw(sh("cd {d} || exit 1; ", d=host_path(chdir)) if chdir else ""),
            run=run_line,
        )
        result = ctx.run(body, stdin=local.read_bytes())
        if marker in result.stdout:
            return self._skipped(result.stdout, marker, args)
        return _outcome(result, {})

    @staticmethod
    def _skipped(stdout: str, marker: str, args: dict[str, Any]) -> ModuleResult:
        which = stdout.split(marker, 1)[1].split()[0]
        if which == "creates":
            msg = f"{args['creates']} exists, matching creates option"
        else:
            msg = f"{args['removes']} does not exist, matching removes option"
        return ModuleResult(skipped=True, msg=msg)


@register
class RawModule(Module):
    name = "raw"
    args = {"cmd": Arg("raw"), "executable": Arg("str")}
    free_form = "cmd"
    free_form_keys = ("executable",)
    shell_args = ("cmd",)
    required_one_of = (("cmd",),)
    supports_check_mode = False  # Ansible skips raw in check mode

    def run(self, ctx: TaskContext) -> ModuleResult:
        cmd = ctx.args["cmd"]
        tpl = cmd if isinstance(cmd, ShellTemplate) else ShellTemplate(str(cmd))
        text, env = shell_command(tpl)
        executable = ctx.args.get("executable")
        script = sh("exec {exe} -c {text}", exe=executable, text=text) if executable else Raw(text)
        result = ctx.run(script, env=env)
        return _outcome(result, {})


__all__ = ["RawModule", "Script"]
