"""Attack tests on LocalConnection: hostile values through every module argument that reaches a
shell and through every filter of the template environment. A value that ran as code would
create the canary file; it must never appear. Property-based (hypothesis, bounded) plus the
hand-written corpus in tests/support/attacks.py."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from provision.connection.local import LocalConnection
from provision.engine.templating import _SHELL_ENV, Templar, TemplateError
from provision.errors import ProvisionError
from provision.inventory.model import Host
from provision.modules.base import ArgError, ModuleFailure, TaskContext, get_module, normalize_args
from provision.modules.command import shell_command
from provision.shell import ShellValueError
from provision.taint import as_data
from tests.support.attacks import (
    CANARY_VAR,
    CORPUS,
    CORPUS_COMBINED,
    EXACT_OUTPUT,
    SHELL_CONTEXTS,
    builtin_module_cases,
    hostile_text,
    module_cases,
    nul_text,
)

T = Templar()
# errors a hostile value may cause: a clear failure, never a crash, never execution
EXPECTED_ERRORS = (ModuleFailure, ArgError, ShellValueError, TemplateError, ProvisionError, OSError)
SETTINGS = settings(
    max_examples=60, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


class Arena:
    """A temp dir to work in (cwd too, so a relative path can't land anywhere else) and the
    canary file that only code execution would create."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.work = root / "work"
        self.canary = root / "CANARY"
        self.conn = LocalConnection(Host("localhost", local=True))

    def reset(self) -> None:
        subprocess.run(["rm", "-rf", "--", str(self.work)], check=True)
        self.work.mkdir()
        os.chdir(self.work)  # the old cwd is gone: a module asking for it must get the new one

    def check(self, what: Any) -> None:
        assert not self.canary.exists(), f"hostile value ran as code: {what!r}"


@pytest.fixture(scope="module")
def arena(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Arena]:
    a = Arena(tmp_path_factory.mktemp("attack"))
    a.work.mkdir()
    with contextlib.chdir(a.work):
        yield a
    a.conn.close()


def run_module(
    arena: Arena,
    name: str,
    args: dict[str, Any],
    value: str,
    check: bool = False,
    env: dict[str, str] | None = None,
    data: bool = False,
) -> Any:
    """One task the way the runner runs it: templates rendered (shell arguments keep values
    apart), arguments checked, the module run with the canary variable in its environment
    (plus `env`; in check mode when `check`; `v` marked as host data when `data`)."""
    cls = get_module(name)
    assert cls is not None, name
    module = cls()
    variables = {"v": as_data(value) if data else value}
    rendered = {}
    try:
        for key, raw in args.items():
            if key in module.shell_args and isinstance(raw, str):
                rendered[key] = T.render_shell(raw, variables)
            else:
                rendered[key] = T.render(raw, variables) if key != "content" else raw
        normalized = normalize_args(module, rendered)
        ctx = TaskContext(
            host=arena.conn.host,
            connection=arena.conn,
            args=normalized,
            environment={CANARY_VAR: str(arena.canary), **(env or {})},
            check_mode=check,
            templar=T,
            timeout=30,
        )
        return module.run(ctx)
    except EXPECTED_ERRORS as exc:
        return exc


N_CASES = len(module_cases("/x", "v"))


def attack_modules(arena: Arena, value: str, only: int | None = None) -> None:
    arena.reset()
    for i, (name, args) in enumerate(module_cases(str(arena.work), value)):
        if only is None or i == only:
            run_module(arena, name, args, value)
            arena.check((name, args, value))


def test_corpus_through_every_module_argument(arena: Arena) -> None:
    # the combined values carry every payload; each payload alone goes through the filters
    for value in CORPUS_COMBINED:
        attack_modules(arena, value)


@settings(SETTINGS, max_examples=150)
@given(value=hostile_text(), case=st.integers(0, N_CASES - 1))
def test_generated_values_through_every_module_argument(arena: Arena, value: str, case: int) -> None:
    attack_modules(arena, value, only=case)


def test_values_reach_the_host_exactly(arena: Arena) -> None:
    """Data, and unchanged: what the host gets is the value, byte for byte."""
    arena.reset()
    for value in CORPUS[:30]:
        dest = arena.work / "exact"
        result = run_module(arena, "copy", {"content": value, "dest": str(dest)}, value)
        assert not isinstance(result, Exception), result
        assert dest.read_bytes().decode() == value
        result = run_module(arena, "command", {"argv": ["printf", "%s", value]}, value)
        assert result.stdout == value.rstrip("\r\n")
        result = run_module(arena, "shell", {"cmd": "printf %s {{ v | quote }}"}, value)
        assert result.stdout == value.rstrip("\r\n")


def test_nul_is_a_clear_error_not_execution(arena: Arena) -> None:
    value = "a\x00b$(touch \"$PV_CANARY\")"
    for name, args in (
        ("shell", {"cmd": "printf %s {{ v }}"}),
        ("command", {"argv": ["printf", "%s", value]}),
        ("file", {"path": str(arena.work / value), "state": "touch"}),
    ):
        result = run_module(arena, name, args, value)
        assert isinstance(result, ShellValueError), (name, result)
        assert "NUL" in str(result)
        arena.check(value)


@SETTINGS
@given(value=nul_text())
def test_generated_nul_values_never_run(arena: Arena, value: str) -> None:
    for name, args in module_cases(str(arena.work), value)[:10]:
        run_module(arena, name, args, value)
        arena.check((name, value))


# -- the template environment --------------------------------------------------------------------

FILTERS = sorted(f for f in _SHELL_ENV.filters if f != "shell_code")  # shell_code: code on purpose


def run_shell(arena: Arena, source: str, value: Any) -> subprocess.CompletedProcess | None:
    try:
        # the value comes from a host or a data file: data (provision/taint.py), as a registered
        # result is; a plain project var holding `{%` would be a template, as in Ansible
        tpl = T.render_shell(source, {"v": as_data(value)})
        text, env = shell_command(tpl)
    except (TemplateError, ModuleFailure, ShellValueError):
        return None
    full = {**os.environ, **env, CANARY_VAR: str(arena.canary)}
    return subprocess.run(["/bin/sh", "-c", text], env=full, capture_output=True, timeout=30)


def test_every_filter_in_every_context_is_data(arena: Arena) -> None:
    value = "".join(CORPUS[:21])
    ran = 0
    for name in FILTERS:
        # every context in one script: one shell per filter
        source = "\n".join(SHELL_CONTEXTS).replace("{{ v }}", "{{ v | " + name + " }}")
        if run_shell(arena, source, value) is not None:
            ran += 1
        arena.check(name)
    assert ran > len(FILTERS) // 2  # most filters take a string


@SETTINGS
@given(
    value=hostile_text(),
    name=st.sampled_from(FILTERS),
    context=st.sampled_from(SHELL_CONTEXTS),
)
def test_generated_values_through_filters(arena: Arena, value: str, name: str, context: str) -> None:
    source = context.replace("{{ v }}", "{{ v | " + name + " }}")
    run_shell(arena, source, value)
    arena.check((name, context, value))


@SETTINGS
@given(value=hostile_text(), context=st.sampled_from(sorted(EXACT_OUTPUT)))
def test_values_round_trip_in_each_context(arena: Arena, value: str, context: str) -> None:
    proc = run_shell(arena, context, value)
    arena.check((context, value))
    if "\r" in value:  # sh keeps \r, Python's line handling is not in play: compare bytes
        pass
    assert proc is not None and proc.returncode == 0, proc
    assert proc.stdout.decode() == EXACT_OUTPUT[context](value)


def test_markup_filters_are_data_and_shell_code_is_the_one_raw_marker(arena: Arena) -> None:
    value = '$(touch "$PV_CANARY")'
    for source in ("printf %s {{ v | tojson }}", "printf %s {{ v | e }}", "printf %s {{ v | safe }}",
                   "printf %s {{ v | forceescape }}", "printf %s {{ {'a': v} | xmlattr }}"):
        proc = run_shell(arena, source, value)
        assert proc is not None and proc.returncode == 0
        arena.check(source)
    proc = run_shell(arena, "printf %s {{ v | shell_code }}", "$(printf raw)")
    assert proc is not None and proc.stdout == b"raw"  # explicit, documented: code on purpose


def test_a_whole_template_shell_task_is_the_plays_code_never_host_data(arena: Arena) -> None:
    """`shell: "{{ create_command }}"` runs the play's own text as the script (Ansible's
    behaviour, geerlingguy.swap), but the same task given host data (a fact, a registered
    stdout: taint.py) keeps it one quoted word: it is never parsed as code."""
    arena.reset()
    ran = run_module(arena, "shell", {"cmd": "{{ v }}"}, "printf '%s-%s' a b")
    assert ran.rc == 0 and ran.stdout == "a-b", ran
    value = 'touch "$PV_CANARY"; printf ran'
    for cmd in ("{{ v }}", " {{ v }} "):
        result = run_module(arena, "shell", {"cmd": cmd}, value, data=True)
        arena.check(value)
        assert result.rc == 127 and "ran" not in result.stdout, result  # one word: no such command
    result = run_module(arena, "command", {"cmd": "{{ v }}"}, "printf '%s|' a 'b c'", data=True)
    assert result.stdout == "a|b c|"  # command splits it into words, still no shell


def test_a_value_equal_to_the_heredoc_delimiter_cannot_end_it(arena: Arena) -> None:
    value = 'EOF\ntouch "$PV_CANARY"\nEOF'
    proc = run_shell(arena, "cat <<'EOF'\nbefore {{ v }} after\nEOF\nprintf end", value)
    arena.check(value)
    assert proc is not None
    assert proc.stdout.decode() == f"before {value} after\nend"


def test_shell_values_travel_ahead_of_the_tasks_own_stdin(arena: Arena) -> None:
    value = "two\nlines $(touch \"$PV_CANARY\")"
    result = run_module(
        arena, "shell", {"cmd": "printf '%s|' {{ v }}; cat", "stdin": "in1\nin2"}, value
    )
    arena.check(value)
    assert not isinstance(result, Exception), result
    assert result.stdout == f"{value}|in1\nin2"


# -- the builtin modules of issue 11 -------------------------------------------------------------

# a host with dnf and rpm (this machine has neither): rpm knows no package, dnf logs its argv
_FAKE_RPM = "#!/bin/sh\nexit 1\n"
_FAKE_DNF = '#!/bin/sh\nprintf "%s\\n" "$*" >> "$FAKE_LOG"\nexit 0\n'


@pytest.fixture(scope="module")
def builtin_fx(arena: Arena) -> dict[str, Any]:
    """Controller files the cases use (outside the work dir that each value resets) and the
    PATH of a fake RHEL host."""
    fx = arena.root / "fx"
    fx.mkdir()
    (fx / "script.sh").write_text('#!/bin/sh\nprintf "%s|" "$@"\n')
    (fx / "script.sh").chmod(0o755)
    (fx / "payload").mkdir()
    (fx / "payload" / "a.txt").write_text("a\n")
    subprocess.run(["tar", "-cf", str(fx / "small.tar"), "-C", str(fx / "payload"), "a.txt"], check=True)
    bin_dir = fx / "bin"
    bin_dir.mkdir()
    for name, text in (("rpm", _FAKE_RPM), ("dnf", _FAKE_DNF)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    for tool in ("sh", "grep", "id", "cat", "mv", "tr", "sed", "tail", "head", "touch"):
        found = shutil.which(tool)
        assert found, tool
        os.symlink(found, bin_dir / tool)
    return {
        "script": str(fx / "script.sh"),
        "tar": str(fx / "small.tar"),
        "rhel": {"PATH": str(bin_dir), "FAKE_LOG": str(fx / "dnf.log")},
    }


N_BUILTIN = len(builtin_module_cases("/x", "v", {"script": "/s", "tar": "/t"}))


def attack_builtins(arena: Arena, fx: dict[str, Any], value: str, only: int | None = None) -> None:
    arena.reset()
    for i, (name, args, how) in enumerate(builtin_module_cases(str(arena.work), value, fx)):
        if only is None or i == only:
            env = fx["rhel"] if how.get("env") == "rhel" else None
            run_module(arena, name, args, value, check=bool(how.get("check")), env=env)
            arena.check((name, args, value))


def test_builtin_cases_cover_every_new_module() -> None:
    names = {name for name, _, _ in builtin_module_cases("/x", "v", {"script": "/s", "tar": "/t"})}
    assert names >= {
        "blockinfile", "replace", "unarchive", "fetch", "slurp", "find", "script", "raw", "git", "uri",
        "package", "dnf", "yum", "apt_repository", "deb822_repository", "apt_key", "systemd", "service",
        "cron", "user", "group", "sysctl", "mount",
    }
    assert all(get_module(n) is not None for n in names)


def test_corpus_through_every_builtin_module_argument(arena: Arena, builtin_fx: dict[str, Any]) -> None:
    passwd = Path("/etc/passwd").read_bytes()
    for value in CORPUS_COMBINED:
        attack_builtins(arena, builtin_fx, value)
    assert Path("/etc/passwd").read_bytes() == passwd  # check mode: the accounts only read


@settings(SETTINGS, max_examples=120)
@given(value=hostile_text(), case=st.integers(0, N_BUILTIN - 1))
def test_generated_values_through_every_builtin_module_argument(
    arena: Arena, builtin_fx: dict[str, Any], value: str, case: int
) -> None:
    attack_builtins(arena, builtin_fx, value, only=case)


@SETTINGS
@given(value=nul_text(), case=st.integers(0, N_BUILTIN - 1))
def test_generated_nul_values_never_run_in_builtins(
    arena: Arena, builtin_fx: dict[str, Any], value: str, case: int
) -> None:
    attack_builtins(arena, builtin_fx, value, only=case)


# Values that are data to a shell but options to the command they reach: `git --upload-pack=CMD`
# runs CMD through a shell, a space in a dnf repo id became a second option, curl reads `-K FILE`.
OPTION_VALUES = ['--upload-pack=touch "$PV_CANARY"; false', '-u touch "$PV_CANARY"']


@pytest.mark.parametrize("value", OPTION_VALUES)
def test_git_repo_and_remote_are_never_options(arena: Arena, value: str) -> None:
    arena.reset()
    origin = arena.root / "origin"
    if not origin.exists():
        subprocess.run(["git", "init", "-q", "--bare", str(origin)], check=True)
    for args, check in (
        ({"repo": value, "dest": str(arena.work / "g")}, False),
        ({"repo": value, "dest": str(arena.work / "g")}, True),
        ({"repo": str(origin), "dest": str(arena.work / "g2"), "remote": value}, False),
    ):
        result = run_module(arena, "git", args, value, check=check)
        arena.check((args, value))
        assert isinstance(result, (ArgError, ModuleFailure)), result
        assert "may not start with '-'" in str(result), result


def test_dnf_repo_ids_and_excludes_stay_one_option(arena: Arena, builtin_fx: dict[str, Any]) -> None:
    for key in ("enablerepo", "disablerepo", "exclude"):
        result = run_module(arena, "dnf", {"name": ["bash"], key: ["epel --installroot=/tmp/x"]}, "", env=builtin_fx["rhel"])
        assert isinstance(result, ArgError) and key in str(result) and "no spaces" in str(result), result
    result = run_module(arena, "dnf", {"name": ["htop"], "enablerepo": ["epel"]}, "", env=builtin_fx["rhel"])
    assert not isinstance(result, Exception) and result.changed, result  # a plain repo id still works


def test_apt_key_url_must_be_http(arena: Arena) -> None:
    result = run_module(arena, "apt_key", {"url": "-K/etc/passwd", "keyring": str(arena.work / "k.gpg")}, "", check=True)
    assert isinstance(result, ModuleFailure) and "must start with http" in str(result), result
