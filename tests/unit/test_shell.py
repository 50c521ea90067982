"""provision/shell.py: the one place that builds shell text. Every value is one word, run by a
real /bin/sh and read back exactly."""

from __future__ import annotations

import pwd
import subprocess

import pytest

from provision.shell import (
    Raw,
    ShellValueError,
    argv,
    as_root,
    become_command,
    env_exports,
    expanding_word,
    path,
    quote,
    sh,
    stdin_env,
)
from tests.support.hostile_names import HOSTILE_NAMES

HOSTILE = [*HOSTILE_NAMES, "", " ", "-n", "--", "a\\", "'", '"', "$HOME", "${x:-$(id)}", "EOF", "é中\u202e"]


def words(text: str, stdin: bytes | None = None, env: dict[str, str] | None = None) -> list[str]:
    """What /bin/sh gets as argv after the text (NUL-separated to keep newlines)."""
    out = subprocess.run(
        ["/bin/sh", "-c", text],
        input=stdin,
        capture_output=True,
        env={"PATH": "/usr/bin:/bin", "HOME": "/home/h", **(env or {})},
        check=True,
    ).stdout
    return out.decode("utf-8", "surrogateescape").split("\0")[:-1]


def printed(text: str, **kw: object) -> list[str]:
    return words(f"printf '%s\\0' {text}", **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", HOSTILE)
def test_every_value_is_exactly_one_word(value: str) -> None:
    assert printed(sh("{v}", v=value)) == [value]
    assert printed(sh("{a} {b}", a=value, b=[value, "x"])) == [value, value, "x"]
    assert printed(argv([value, value])) == [value, value]


def test_placeholders_and_literal_braces() -> None:
    text = sh("x=${HOME}; { echo {v}; } >/dev/null && printf '%s\\0' {a,b} \"$x\"", v="1 2")
    assert text == "x=${HOME}; { echo '1 2'; } >/dev/null && printf '%s\\0' {a,b} \"$x\""
    assert words(text) == ["{a,b}", "/home/h"]
    with pytest.raises(ShellValueError, match="no value for"):
        sh("echo {missing}")
    with pytest.raises(ShellValueError, match="does not use"):
        sh("echo hi", extra="x")


@pytest.mark.parametrize("bad", [None, True, False, "a\0b", b"x\0"])
def test_values_that_cannot_be_one_word_are_errors(bad: object) -> None:
    with pytest.raises(ShellValueError):
        sh("echo {v}", v=bad)


def test_raw_is_the_only_way_in_for_code() -> None:
    assert printed(sh("{v}", v=Raw("a b"))) == ["a", "b"]
    assert printed(sh("{v}", v="a b")) == ["a b"]
    assert isinstance(sh("x"), Raw) and repr(Raw("x")) == "Raw('x')"


def test_path_keeps_the_remote_home() -> None:
    assert printed(path("~")) == ["/home/h"]
    assert printed(path("~/a b/$(id)")) == ["/home/h/a b/$(id)"]
    assert printed(path("/x/~/y")) == ["/x/~/y"]
    assert printed(quote("~/x")) == ["~/x"]


def test_path_expands_a_named_users_home_as_expanduser() -> None:
    """`~root/...` is root's home on the host (Ansible's `path` arguments); a name that is not a
    plain user name stays literal text, never code."""
    root = pwd.getpwnam("root").pw_dir
    assert printed(path("~root")) == [root]
    assert printed(path("~root/.ssh/a b")) == [root + "/.ssh/a b"]
    assert printed(expanding_word("~root/$HOME")) == [root + "//home/h"]
    assert printed(path("~no-such-user-x/y")) == ["~no-such-user-x/y"]
    for literal in ["~r;id/x", "~$(id)/x", "~root'x", "/x/~root", "~`id`"]:
        assert printed(path(literal)) == [literal]


def test_expanding_word_expands_variables_only() -> None:
    word = expanding_word("~/$HOME-${USER}'$(id)'`id`")
    assert printed(word, env={"USER": "u v"}) == ["/home/h//home/h-u v'$(id)'`id`"]


def test_env_exports_quote_values_and_check_names() -> None:
    text = env_exports({"A": "$(id) 'x'", "B": None})
    assert words(text + 'printf "%s\\0" "$A" "$B"') == ["$(id) 'x'", ""]
    assert env_exports({}) == "" and env_exports(None) == ""
    with pytest.raises(ShellValueError, match="variable name"):
        env_exports({"A;B": "x"})


def test_stdin_env_keeps_secrets_out_of_the_text() -> None:
    secret = "s3cr3t $(id) 'x'"
    prefix, data = stdin_env({"TOKEN": secret, "OTHER": ""})
    assert secret not in prefix
    out = words(prefix + 'printf "%s\\0" "$TOKEN" "$OTHER"; cat; printf "\\0"', stdin=data + b"rest")
    assert out == [secret, "", "rest"]
    multi = "a\nb\n\n$(id)\r\\n"
    prefix, data = stdin_env({"M": multi})
    assert words(prefix + 'printf "%s\\0" "$M"', stdin=data) == [multi]
    with pytest.raises(ShellValueError, match="NUL"):
        stdin_env({"T": "a\0b"})


def test_as_root_and_become_quote_the_command() -> None:
    command = "printf '%s\\0' \"$(id -u)\" 'a b'"
    text = as_root(command)
    assert "sudo -n" in text and "sh -c" in text
    out = subprocess.run(["/bin/sh", "-c", text], capture_output=True, check=False)
    if out.returncode == 0:  # as root (or passwordless sudo): the command ran unchanged
        assert out.stdout.split(b"\0")[1] == b"a b"
    assert "sudo -S -p ''" in become_command("true", user="bob", password_on_stdin=True)
    assert "-u 'bob;id'" in become_command("true", user="bob;id")


def test_as_root_runs_raw_shell_text_with_its_control_flow_intact() -> None:
    """A module's own script is a Raw (loops, `;`, `$var`): as root it is still one `sh -c` word
    (it once went in unquoted: `if …; then sh -c for m in …` was a syntax error, so `package`
    under become found no package manager)."""
    script = Raw('for m in a b; do if [ "$m" = b ]; then echo "got $m"; exit 0; fi; done; echo none')
    text = as_root(script)
    assert str(text).count(str(script)) == 2  # in both branches, root or sudo
    out = subprocess.run(["/bin/sh", "-c", text], capture_output=True, text=True, check=False)
    if out.returncode == 0 or "sudo" not in out.stderr:
        assert out.stdout == "got b\n", out.stderr
    assert "'for m in a b;" in text
