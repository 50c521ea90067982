"""The one place that builds shell text. Values are data, never code.

    from provision.shell import sh, Raw, path

    sh("mkdir -p -- {dir} && cp -- {src} {dst}", dir=d, src=s, dst=t)
    sh("pip install {args}", args=["-r", req])        # a list: each element one word
    sh("cd {dir} && {cmd}", dir=path("~/x"), cmd=Raw(user_shell_text))

Rules (the only way values enter shell text):

- A placeholder is `{name}` (an identifier in braces, not preceded by `$`), so `${HOME}`,
  `{a,b}` and `{ cmd; }` in a template stay literal shell.
- Every value becomes exactly ONE quoted word (a list/tuple: one quoted word per element).
  `None`, a bool, a NUL byte or an unused/missing placeholder is an error, not a guess.
- Text goes in unquoted only as `Raw(...)`, the one explicit marker. Jinja's `Markup` is NOT
  `Raw`: a filter's output is data like any other value. Use `Raw` for code a user wrote on
  purpose (a `shell:` task's own text) and for fragments this module built (`path()`, `sh()`).
- Values too big or too binary for a command line (a file body, a heredoc with values, a
  secret) go over stdin, never into the text: `stdin_env(values)` gives the text that reads
  them into exported variables and the bytes to send first (the `shell:` module sends every
  template value this way, get_url its URL and headers).
"""

from __future__ import annotations

import base64
import re
import shlex
from collections.abc import Iterable, Mapping
from pathlib import PurePath
from typing import Any

__all__ = [
    "Raw",
    "sh",
    "quote",
    "path",
    "argv",
    "expanding_word",
    "env_exports",
    "stdin_env",
    "temp_beside",
    "as_root",
    "become_command",
    "ShellValueError",
]

_PLACEHOLDER = re.compile(r"(?<!\$)\{([A-Za-z_][A-Za-z0-9_]*)\}")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class ShellValueError(ValueError):
    """A value that can't be one word on a command line (NUL byte, None, bool) or a template
    whose placeholders and values don't match."""


class Raw(str):
    """Shell text inserted as code on purpose. The only way in for unquoted text."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"Raw({str.__repr__(self)})"


def quote(value: Any) -> str:
    """One value → one quoted shell word (a `Raw` passes as is)."""
    if isinstance(value, Raw):
        return str(value)
    if value is None or isinstance(value, bool):
        raise ShellValueError(f"{value!r} is not a shell word (give a string)")
    if isinstance(value, (bytes, bytearray)):
        value = bytes(value).decode("utf-8", "surrogateescape")
    text = str(value) if not isinstance(value, PurePath) else value.as_posix()
    if "\x00" in text:
        raise ShellValueError("a value with a NUL byte can't be passed on a command line (send it over stdin)")
    return shlex.quote(text)


# `~name` expands (to that user's home, as Python's expanduser on the host) only for a portable
# user name, left unquoted for the shell's own tilde expansion (up to an unquoted `/`): nothing
# else in it can be code.
_TILDE_USER = re.compile(r"~([A-Za-z_][A-Za-z0-9_.-]*)(/|\Z)")


def _tilde(text: str) -> tuple[str, int]:
    """The shell text of a leading `~`, `~/`, `~name` or `~name/` of a path (its slash
    unquoted), and where the rest starts."""
    if text == "~":
        return '"$HOME"', 1
    if text.startswith("~/"):
        return '"$HOME"/', 2
    match = _TILDE_USER.match(text)
    return ("~" + match.group(1) + match.group(2), match.end()) if match else ("", 0)


def path(value: str | PurePath) -> Raw:
    """A host path as one word; a leading `~` / `~/` stays the remote user's home and `~name` /
    `~name/` that user's home (Ansible's `path` arguments, expanded on the host)."""
    text = value.as_posix() if isinstance(value, PurePath) else str(value)
    home, pos = _tilde(text)
    if not home:
        return Raw(quote(text))
    return Raw(home + quote(text[pos:])) if text[pos:] else Raw(home)


def argv(words: Iterable[Any]) -> Raw:
    """A command line from words: each one quoted word."""
    return Raw(" ".join(quote(w) for w in words))


_VAR_REF = re.compile(r"\$(\{[A-Za-z_][A-Za-z0-9_]*\}|[A-Za-z_][A-Za-z0-9_]*)")


def expanding_word(word: str) -> Raw:
    """One word where only `$NAME` / `${NAME}` (parameter expansion, no splitting) and a leading
    `~` / `~name` expand, like Ansible's `expand_argument_vars` for `command:`; the rest is quoted."""
    home, pos = _tilde(word)
    parts = [home] if home else []
    for match in _VAR_REF.finditer(word):
        if match.start() > pos:
            parts.append(quote(word[pos : match.start()]))
        parts.append('"${' + match.group(1).strip("{}") + '}"')
        pos = match.end()
    if pos < len(word) or not parts:
        parts.append(quote(word[pos:]))
    return Raw("".join(parts))


def _render(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return " ".join(quote(v) for v in value)
    return quote(value)


def sh(template: str, /, **values: Any) -> Raw:
    """Shell text from a template: every `{name}` replaced by its value as one quoted word."""
    used: set[str] = set()

    def substitute(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in values:
            raise ShellValueError(f"shell template {template!r} has no value for {{{name}}}")
        used.add(name)
        return _render(values[name])

    text = _PLACEHOLDER.sub(substitute, template)
    unused = set(values) - used
    if unused:
        raise ShellValueError(f"shell template {template!r} does not use {sorted(unused)}")
    return Raw(text)


def env_exports(env: Mapping[str, Any] | None) -> Raw:
    """`export K='v'; ...` prefix (empty when no env). Names must be identifiers."""
    if not env:
        return Raw("")
    parts = []
    for key, value in env.items():
        if not isinstance(key, str) or not _ENV_NAME.match(key):
            raise ShellValueError(f"invalid environment variable name {key!r}")
        parts.append(f"export {key}={quote('' if value is None else str(value))};")
    return Raw(" ".join(parts) + " ")


# The utilities provision's own module scripts call. A task's `environment: PATH:` is the
# user's commands' PATH, not theirs (Ansible's modules are Python: they never look base64 up in
# it), so under one each of these resolves by the shell's default PATH (`command -p`).
OWN_TOOLS = (
    "base64", "basename", "cat", "chgrp", "chmod", "chown", "cp", "cut", "date", "dirname",
    "find", "getent", "grep", "head", "id", "ln", "md5sum", "mkdir", "mktemp", "mv", "od",
    "readlink", "realpath", "rm", "rmdir", "sed", "sha1sum", "sha256sum", "sort", "stat",
    "tail", "tee", "touch", "tr", "uniq", "wc", "xargs",
)  # fmt: skip


def own_tools(command: str) -> Raw:
    """`command` (shell text) with OWN_TOOLS found whatever PATH the task's environment sets."""
    return Raw("".join(f'{t}() {{ command -p {t} "$@"; }}; ' for t in OWN_TOOLS) + str(command))


def as_root(command: str) -> Raw:
    """Run `command` (shell text) as root: directly when already root (most rentals), else through
    non-interactive sudo. A become password, when one is needed, goes over stdin (`sudo -S`), never
    into this text: pass `password_on_stdin=True` via become_command instead."""
    return become_command(command)


def become_command(command: str, *, user: str = "root", password_on_stdin: bool = False) -> Raw:
    """Shell text that runs `command` as `user`. With `password_on_stdin` sudo reads the password
    as the first line of stdin (`-S`, empty prompt); the caller sends it, then the real stdin."""
    # `command` is shell text (often a Raw): it is one word of `sh -c` here, so quoted whatever
    # its type; quote() alone would pass a Raw through as is
    inner = quote(str(command))
    if password_on_stdin:
        sudo = sh("sudo -S -p '' -H -u {user} -- sh -c", user=user)
    else:
        sudo = sh("sudo -n -H -u {user} -- sh -c", user=user)
    if user == "root":
        return Raw(f'if [ "$(id -u)" = 0 ]; then sh -c {inner}; else {sudo} {inner}; fi')
    return Raw(f"{sudo} {inner}")


def temp_beside(var: str, target: str) -> Raw:
    """`var=$(mktemp ...)`: a new file with a random name in the directory of `$target` (a shell
    variable), for an atomic write-then-rename. mktemp creates it (O_EXCL, 0600), so a name
    another user planted there (a symlink in /tmp) is never followed; then it gets the mode a
    new file gets from the umask. Never a name built from `$$` or a fixed suffix."""
    for name in (var, target):
        if not _ENV_NAME.match(name):
            raise ShellValueError(f"invalid shell variable name {name!r}")
    return Raw(
        f'{var}=$(mktemp "$(dirname -- "${target}")/.$(basename -- "${target}").pvtmp.XXXXXX") && '
        f'chmod "$(printf %o $((0666 & ~$(umask))))" "${var}"'
    )


def stdin_env(values: Mapping[str, Any]) -> tuple[Raw, bytes]:
    """Values as environment variables that never appear in any command line (secrets, big or
    multi-line values): the text reads each from one line of stdin with the `read` builtin and
    exports it; the bytes are what the caller sends first on stdin (the rest of stdin then
    reaches the command untouched). A value with a line break travels base64-encoded and is
    decoded on the host by `base64 -d`, which gets it on its stdin too."""
    lines, data = [], []
    for key, value in values.items():
        if not isinstance(key, str) or not _ENV_NAME.match(key):
            raise ShellValueError(f"invalid environment variable name {key!r}")
        text = "" if value is None else str(value)
        if "\x00" in text:
            raise ShellValueError(
                f"the value of {key} has a NUL byte: a shell variable can't hold one"
            )
        if "\n" in text:
            encoded = base64.b64encode(text.encode("utf-8", "surrogateescape")).decode()
            # printf x: command substitution would drop the value's trailing newlines
            lines.append(
                f"IFS= read -r {key} && {key}=$(printf %s \"${key}\" | base64 -d && printf x) "
                f"&& {key}=${{{key}%x}} && export {key} || exit 1;"
            )
            data.append(encoded + "\n")
        else:
            lines.append(f"IFS= read -r {key} && export {key} || exit 1;")
            data.append(text + "\n")
    return Raw(" ".join(lines) + (" " if lines else "")), "".join(data).encode(
        "utf-8", "surrogateescape"
    )
