"""`command` and `shell`: one round trip each, no interpreter started on the host.

Values from variables are data, never code:

- `command` never goes through a shell (Ansible semantics): the text is split into words, then
  every word is quoted. A `{{ var }}` stays ONE word whatever it contains (`o'brien`, spaces,
  `$(touch /root/PWNED)`); a string that is only `{{ var }}` is split like a command line, and a
  list (`argv`) is used as is. `$NAME`/`${NAME}` in the text expand like Ansible's
  `expand_argument_vars`, as parameter expansion only.
- A task whose whole text is one `{{ var }}` takes that value as its command line
  (`whole_template_value`, Ansible's behaviour): `command` splits it, `shell` runs it as code
  only when it is the play's own text, never host data (taint.py), which stays one word.
- `shell` runs the text with `sh -c`. Each `{{ }}` value travels in an environment variable and
  the text refers to it with the quoting its position needs (unquoted, inside "…", inside '…',
  inside a here-document), so the shell only ever *expands* it — never parses it. A quoted
  here-document's body travels whole as one variable (see `shell_command`). The one way to
  insert a value as code is `{{ x | shell_code }}`; Jinja's `Markup` (`safe`, `e`, `tojson`)
  is data; `{{ x | quote }}` stands as its quoted word where a bare word stands.
"""

from __future__ import annotations

import re
import secrets
import shlex
from dataclasses import dataclass
from typing import Any

from provision.engine.templating import QuotedWord, ShellTemplate
from provision.modules.base import (
    Arg,
    Module,
    ModuleFailure,
    ModuleResult,
    TaskContext,
    register,
)
from provision.shell import Raw, expanding_word, path, quote, sh, stdin_env

_COMMON_ARGS = {
    "cmd": Arg("raw"),
    "chdir": Arg("path"),
    "creates": Arg("path"),
    "removes": Arg("path"),
    "stdin": Arg("str"),
    "stdin_add_newline": Arg("bool", default=True),
    "strip_empty_ends": Arg("bool", default=True),
}
_FREE_FORM_KEYS = ("chdir", "creates", "removes", "stdin", "stdin_add_newline", "strip_empty_ends")


_NOT_WHOLE = object()


def whole_template_value(cmd: Any) -> Any:
    """The one rule for a task whose whole text is one `{{ expr }}` (`command: "{{ cmdline }}"`,
    `shell: "{{ create_command }}"`): that value IS the command line, as in Ansible. `command`
    splits it into words (still no shell); `shell` runs it as shell text only when it is a plain
    `str` from the play's own vars and files — host data (`taint.DataStr`: facts, registered
    output, set_fact/loop values), `Markup` and other values stay one quoted word. `_NOT_WHOLE`
    when the text is anything more."""
    if isinstance(cmd, ShellTemplate):
        whole = cmd.placeholder_re.fullmatch(cmd.text.strip())
        if whole:
            return cmd.values[int(whole.group(1))]
    return _NOT_WHOLE


def command_argv(cmd: Any) -> tuple[list[str], set[int]]:
    """argv words for `command`, plus the indexes of words that came (wholly or partly) from
    variables — those get no `$VAR` expansion."""
    whole = whole_template_value(cmd)
    if whole is not _NOT_WHOLE:
        return command_argv(whole)
    if isinstance(cmd, ShellTemplate):
        try:
            words = shlex.split(cmd.text)
        except ValueError as exc:
            raise ModuleFailure(f"cannot split command line: {exc}") from None
        argv, from_vars = [], set()
        pattern = cmd.placeholder_re
        for i, word in enumerate(words):
            if pattern.search(word):
                from_vars.add(i)
                word = pattern.sub(lambda m: _text(cmd.values[int(m.group(1))]), word)
            argv.append(word)
        return argv, from_vars
    if isinstance(cmd, (list, tuple)):
        return [str(w) for w in cmd], set(range(len(cmd)))
    try:
        return shlex.split(str(cmd)), set()
    except ValueError as exc:
        raise ModuleFailure(f"cannot split command line: {exc}") from None


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "True" if value else "False"
    return "" if value is None else str(value)


# -- shell: where in the shell syntax is each placeholder? -------------------------------------

_PLAIN, _SINGLE, _DOUBLE, _HEREDOC, _QUOTED_HEREDOC, _COMMENT = (
    "plain",
    "single",
    "double",
    "heredoc",
    "qheredoc",
    "comment",
)


@dataclass
class _Heredoc:
    """A quoted here-document: where its delimiter word and its body (with the end line) are."""

    word: tuple[int, int]  # the delimiter word after `<<`, quotes included
    body: tuple[int, int]  # from the first body line to the end of the delimiter line
    end: int  # where the body text stops (start of the delimiter line)
    strip_tabs: bool  # `<<-`


def _contexts(
    text: str, pattern: re.Pattern[str], heredocs: list[_Heredoc] | None = None
) -> dict[int, str]:
    """Start offset of each placeholder -> the quoting context it sits in. A small lexer: quotes,
    backslashes, $( ), backticks, comments and here-documents (quoted ones are added to
    `heredocs`). Misjudging a context can only break the command, never run a value: values
    are never pasted into the text."""
    starts = {m.start(): m for m in pattern.finditer(text)}
    found: dict[int, str] = {}
    stack = [_PLAIN]
    # (delimiter, quoted, word span, <<-) waiting for the newline
    pending_heredocs: list[tuple[str, bool, tuple[int, int], bool]] = []
    i, n = 0, len(text)
    at_word_start = True
    while i < n:
        state = stack[-1]
        if i in starts:
            found[i] = state
            i = starts[i].end()
            at_word_start = False
            continue
        c = text[i]
        if state == _SINGLE:
            if c == "'":
                stack.pop()
            i += 1
            continue
        if state == _DOUBLE:
            if c == "\\":
                i += 2
                continue
            if c == '"':
                stack.pop()
            elif text.startswith("$(", i):
                stack.append("subst")
                i += 2
                continue
            elif c == "`":
                stack.append("backtick")
            i += 1
            continue
        # plain, subst, backtick
        if c == "\\":
            i += 2
            at_word_start = False
            continue
        if c == "'":
            stack.append(_SINGLE)
        elif c == '"':
            stack.append(_DOUBLE)
        elif text.startswith("$(", i):
            stack.append("subst")
            i += 2
            continue
        elif c == "`":
            if state == "backtick":
                stack.pop()
            else:
                stack.append("backtick")
        elif c == ")" and state == "subst":
            stack.pop()
        elif c == "#" and at_word_start:
            end = text.find("\n", i)
            for start in starts:
                if i <= start < (n if end < 0 else end):
                    found[start] = _COMMENT
            i = n if end < 0 else end
            continue
        elif text.startswith("<<", i) and not text.startswith("<<<", i):
            j = i + 2
            strip_tabs = j < n and text[j] == "-"
            if strip_tabs:
                j += 1
            while j < n and text[j] in " \t":
                j += 1
            m = re.match(r"""(['"]?)([A-Za-z0-9_.\-]+)\1""", text[j:])
            if m:
                pending_heredocs.append((m.group(2), bool(m.group(1)), (j, j + m.end()), strip_tabs))
                i = j + m.end()
                continue
        elif c == "\n" and pending_heredocs:
            i += 1
            for delimiter, quoted, word, strip_tabs in pending_heredocs:
                # the body runs until a line that is exactly the delimiter (tabs stripped for <<-)
                body_end = n
                line_start = i
                while line_start < n:
                    line_end = text.find("\n", line_start)
                    line_end = n if line_end < 0 else line_end
                    line = text[line_start:line_end]
                    if (line.lstrip("\t") if strip_tabs else line) == delimiter:
                        body_end = line_start
                        break
                    line_start = line_end + 1
                for start in starts:
                    if i <= start < body_end:
                        found[start] = _QUOTED_HEREDOC if quoted else _HEREDOC
                after = n
                if body_end < n:
                    after = text.find("\n", body_end)
                    after = n if after < 0 else after + 1
                if quoted and heredocs is not None:
                    heredocs.append(_Heredoc(word, (i, after), body_end, strip_tabs))
                i = after
            pending_heredocs = []
            at_word_start = True
            continue
        at_word_start = c in " \t\n;&|()"
        i += 1
    return found


def shell_command(tpl: ShellTemplate) -> tuple[str, dict[str, str]]:
    """The shell text with each placeholder replaced by a reference to an env var, and the env.

    A quoted here-document (`<<'EOF'`) expands nothing, so a value can't be referenced inside
    it; pasting it would let a value equal to the delimiter end the body and run what follows.
    Such a body (its text and values) travels whole as one variable instead, expanded by an
    unquoted here-document with a fresh delimiter: the value is never part of the script."""
    if not tpl.values:
        return tpl.text, {}
    pattern = tpl.placeholder_re
    heredocs: list[_Heredoc] = []
    contexts = _contexts(tpl.text, pattern, heredocs)
    env: dict[str, str] = {}
    tag = secrets.token_hex(2)

    def value_of(match: re.Match[str]) -> str:
        return _text(tpl.values[int(match.group(1))])

    def replace(match: re.Match[str]) -> str:
        index = int(match.group(1))
        context = contexts.get(match.start(), _PLAIN)
        if context in (_PLAIN, "subst") and type(tpl.values[index]) is QuotedWord:
            return str(tpl.values[index])  # already one quoted word (the `quote` filter)
        name = f"PV_{tag}_{index}"
        env[name] = value_of(match)
        if context == _SINGLE:
            return "'\"${" + name + "}\"'"
        if context in (_DOUBLE, _HEREDOC):
            return "${" + name + "}"
        return '"${' + name + '}"'

    # text pieces in order: (start, end, replacement); placeholders outside moved bodies
    edits: list[tuple[int, int, str]] = []
    moved: list[tuple[int, int]] = []
    for number, doc in enumerate(heredocs):
        body = tpl.text[doc.body[0] : doc.end]
        if not pattern.search(body):
            continue
        text = pattern.sub(value_of, body)
        if doc.strip_tabs:
            text = "".join(line.lstrip("\t") for line in text.splitlines(keepends=True))
        name = f"PV_{tag}_h{number}"
        env[name] = text[:-1] if text.endswith("\n") else text
        delimiter = f"PV_{tag}_END{number}"
        edits.append((doc.word[0], doc.word[1], delimiter))
        edits.append((doc.body[0], doc.body[1], "${" + name + "}\n" + delimiter + "\n"))
        moved.append(doc.body)
    for match in pattern.finditer(tpl.text):
        if not any(a <= match.start() < b for a, b in moved):
            edits.append((match.start(), match.end(), replace(match)))
    out, pos = [], 0
    for start, end, replacement in sorted(edits):
        out.append(tpl.text[pos:start])
        out.append(replacement)
        pos = end
    out.append(tpl.text[pos:])
    return "".join(out), env


def _guard(args: dict[str, Any], marker: str, chdir: bool = True) -> str:
    """creates/removes checks and chdir, in the same round trip as the command."""
    parts = []
    if args.get("creates"):
        parts.append(sh("if [ -e {p} ]; then echo {m}; exit 0; fi", p=path(args["creates"]), m=marker + "creates"))
    if args.get("removes"):
        parts.append(sh("if [ ! -e {p} ]; then echo {m}; exit 0; fi", p=path(args["removes"]), m=marker + "removes"))
    if chdir and args.get("chdir"):
        parts.append(sh("cd {p} || exit 1", p=path(args["chdir"])))
    return "; ".join(parts) + ("; " if parts else "")


def _stdin(args: dict[str, Any]) -> bytes | None:
    data = args.get("stdin")
    if data is None:
        return None
    text = str(data)
    if args.get("stdin_add_newline", True) and not text.endswith("\n"):
        text += "\n"
    return text.encode()


class _CommandBase(Module):
    supports_check_mode = True  # runs nothing in check mode (skipped), like Ansible
    free_form = "cmd"
    free_form_keys = _FREE_FORM_KEYS
    shell_args = ("cmd",)

    def build(self, ctx: TaskContext) -> tuple[str, dict[str, str]]:
        raise NotImplementedError

    def run(self, ctx: TaskContext) -> ModuleResult:
        args = ctx.args
        script, env = self.build(ctx)
        marker = "__pv_skip_" + secrets.token_hex(6) + "__"
        guard = _guard(args, marker)
        if ctx.check_mode:
            would = "Command would have run if not in check mode"
            if args.get("creates") or args.get("removes"):
                result = ctx.run(_guard(args, marker, chdir=False) + "exit 3")
                if result.stdout.startswith(marker):
                    return self._skip_result(result.stdout, args)
                # Ansible: creates/removes settle it, so the step reports the change it would make
                return ModuleResult(changed=True, msg=would, rc=0, stdout="", stderr="")
            # Ansible's shape: rc, stdout and stderr exist for the templates after it
            return ModuleResult(skipped=True, msg=would, rc=0, stdout="", stderr="")
        # values travel on stdin, ahead of the task's own stdin: never in the command line (ps),
        # and no size limit from the kernel's argv or sshd's packet size
        prefix, values = stdin_env(env)
        result = ctx.run(prefix + guard + script, stdin=(values + (_stdin(args) or b"")) or None)
        if result.stdout.startswith(marker):
            return self._skip_result(result.stdout, args)
        stdout, stderr = result.stdout, result.stderr
        if args.get("strip_empty_ends", True):
            stdout, stderr = stdout.rstrip("\r\n"), stderr.rstrip("\r\n")
        failed = result.exit_code != 0
        return ModuleResult(
            changed=True,
            failed=failed,
            rc=result.exit_code,
            stdout=stdout,
            stderr=stderr,
            msg="non-zero return code" if failed else "",
            data={"cmd": self.display_cmd(ctx), "delta": f"{result.seconds:.3f}s"},
        )

    def display_cmd(self, ctx: TaskContext) -> Any:
        return ""

    @staticmethod
    def _skip_result(stdout: str, args: dict[str, Any]) -> ModuleResult:
        which = stdout.strip().rsplit("_", 1)[-1]
        if which == "creates":
            msg = f"Did not run command since '{args['creates']}' exists"
        else:
            msg = f"Did not run command since '{args['removes']}' does not exist"
        return ModuleResult(changed=False, rc=0, stdout=msg, stderr="", msg=msg)


@register
class Command(_CommandBase):
    name = "command"
    args = {**_COMMON_ARGS, "argv": Arg("list")}
    mutually_exclusive = (("cmd", "argv"),)
    required_one_of = (("cmd", "argv"),)

    def build(self, ctx: TaskContext) -> tuple[str, dict[str, str]]:
        cmd = ctx.args.get("argv") or ctx.args.get("cmd")
        argv, from_vars = command_argv(cmd)
        if not argv:
            raise ModuleFailure("no command given")
        words = [quote(w) if i in from_vars else expanding_word(w) for i, w in enumerate(argv)]
        # `exec`: the command replaces the shell, so its exit code and signals are its own
        return sh("exec {words}", words=Raw(" ".join(words))), {}

    def display_cmd(self, ctx: TaskContext) -> Any:
        return command_argv(ctx.args.get("argv") or ctx.args.get("cmd"))[0]


@register
class Shell(_CommandBase):
    name = "shell"
    args = {**_COMMON_ARGS, "executable": Arg("path")}
    free_form_keys = (*_FREE_FORM_KEYS, "executable")
    required_one_of = (("cmd",),)

    def build(self, ctx: TaskContext) -> tuple[str, dict[str, str]]:
        cmd = ctx.args.get("cmd")
        whole = whole_template_value(cmd)
        if type(whole) is str:  # the play's own text, no host data: code (whole_template_value)
            cmd = ShellTemplate(whole)
        tpl = cmd if isinstance(cmd, ShellTemplate) else ShellTemplate(str(cmd))
        text, env = shell_command(tpl)
        executable = ctx.args.get("executable")
        if executable:
            return sh("exec {exe} -c {text}", exe=path(executable), text=text), env
        return text, env

    def display_cmd(self, ctx: TaskContext) -> Any:
        cmd = ctx.args.get("cmd")
        if isinstance(cmd, ShellTemplate):
            return cmd.placeholder_re.sub(lambda m: _text(cmd.values[int(m.group(1))]), cmd.text)
        return str(cmd)
