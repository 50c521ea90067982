"""The CLI's shared contract: option validation, exit codes, and `--json` = one document on stdout.

Everything goes through `provision.cli.main.main(argv)` as the console script does; the only
hosts are `localhost` (the agent runs here, no SSH) and a closed port on loopback.
"""

from __future__ import annotations

import argparse
import json
import socket
from pathlib import Path

import pytest

from provision.cli.common import (
    EXIT_HOST_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    add_common_options,
    connect_options,
    emit_json,
    exit_code_for,
)
from provision.cli.main import main
from provision.errors import AgentError, AuthError, HostKeyError, UnreachableError
from provision.inventory.model import Host
from provision.parallel import HostOutcome


def run_main(argv: list[str]) -> int:
    """main()'s exit status, whether it returns it or raises SystemExit (argparse does)."""
    try:
        return main(argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 1


def closed_loopback_port() -> int:
    """A loopback port nothing listens on: connects are refused at once."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again when the socket is


# -- exit codes ----------------------------------------------------------------------------------
def test_exit_codes_are_distinct_and_documented_values():
    assert (EXIT_OK, EXIT_HOST_FAILED, EXIT_USAGE, EXIT_UNREACHABLE, EXIT_INTERRUPTED) == (
        0,
        1,
        2,
        4,
        130,
    )


def _outcome(name: str, error: BaseException | None = None) -> HostOutcome:
    return HostOutcome(Host(name=name), value=None if error else {"hostname": name}, error=error)


@pytest.mark.parametrize(
    ("errors", "expected"),
    [
        ([], EXIT_OK),
        ([None, None], EXIT_OK),
        ([None, UnreachableError("b", "no answer")], EXIT_UNREACHABLE),
        ([UnreachableError("a", "x"), UnreachableError("b", "y")], EXIT_UNREACHABLE),
        ([None, AuthError("b", "permission denied")], EXIT_HOST_FAILED),
        ([None, HostKeyError("b", "host key CHANGED")], EXIT_HOST_FAILED),
        ([None, AgentError("b", "no python3")], EXIT_HOST_FAILED),
        ([None, RuntimeError("a bug")], EXIT_HOST_FAILED),
        # a failure is worse news than an unreachable host: it wins
        ([UnreachableError("a", "x"), AuthError("b", "denied"), None], EXIT_HOST_FAILED),
    ],
)
def test_exit_code_for(errors: list[BaseException | None], expected: int):
    outcomes = {f"h{i}": _outcome(f"h{i}", e) for i, e in enumerate(errors)}
    assert exit_code_for(outcomes) == expected


# -- option validation ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--forks", "0"], "--forks must be >= 1, got 0"),
        (["--forks", "-3"], "--forks must be >= 1, got -3"),
        (["--port", "0"], "--port must be 1-65535, got 0"),
        (["--port", "65536"], "--port must be 1-65535, got 65536"),
        (["--port", "22x"], "argument --port: invalid int value: '22x'"),
        (["--forks", "many"], "argument -f/--forks: invalid int value: 'many'"),
        (["--known-hosts", "yes"], "argument --known-hosts: invalid choice: 'yes'"),
        (["--connect-timeout", "soon"], "argument --connect-timeout: invalid float value"),
    ],
)
def test_bad_option_is_a_usage_error_naming_it(argv: list[str], message: str, capsys):
    code = run_main(["facts", "localhost", "--json", *argv])
    out, err = capsys.readouterr()
    assert code == EXIT_USAGE
    assert out == ""  # no JSON document when the command never ran
    assert message in " ".join(err.split())  # rich may wrap a long line


def test_facts_needs_a_target(capsys):
    assert run_main(["facts", "--json"]) == EXIT_USAGE
    out, err = capsys.readouterr()
    assert out == "" and "TARGET" in err


def test_no_command_prints_help_and_is_a_usage_error(capsys):
    assert run_main([]) == EXIT_USAGE
    out, err = capsys.readouterr()
    assert out == "" and "facts" in err


def test_unknown_inventory_host_is_a_usage_error(tmp_path: Path, capsys):
    inventory = tmp_path / "hosts.ini"
    inventory.write_text("[gpus]\ngpu1 ansible_host=198.18.0.2\n")
    code = run_main(["facts", "gpu9", "-i", str(inventory), "--json"])
    out, err = capsys.readouterr()
    assert code == EXIT_USAGE
    assert out == ""
    assert "gpu9" in err


def test_connect_options_carry_every_option(monkeypatch):
    monkeypatch.setenv("PW", "not-shown")
    monkeypatch.setenv("PP", "not-shown")
    parser = argparse.ArgumentParser()
    add_common_options(parser)
    args = parser.parse_args(
        [
            "--user", "ubuntu", "--port", "41234", "--key", "~/.ssh/rental",
            "--password-env", "PW", "--passphrase-env", "PP", "--known-hosts", "strict",
            "--connect-timeout", "3.5", "--ssh-config", "/dev/null", "-f", "4",
        ]
    )  # fmt: skip
    options = connect_options(args)
    assert (options.user, options.port, options.key_file) == ("ubuntu", 41234, "~/.ssh/rental")
    assert (options.password_env, options.passphrase_env) == ("PW", "PP")  # names, not secrets
    assert (options.known_hosts, options.connect_timeout, options.ssh_config) == (
        "strict",
        3.5,
        "/dev/null",
    )
    defaults = connect_options(parser.parse_args([]))
    assert (defaults.known_hosts, defaults.connect_timeout, args.forks) == ("accept-new", 10.0, 4)
    unset = parser.parse_args([])
    connect_options(unset)
    assert unset.forks == 32  # no ansible.cfg forks (conftest points ANSIBLE_CONFIG at an empty file)


# -- the --json contract -------------------------------------------------------------------------
def test_emit_json_is_one_document_on_stdout(capsys):
    emit_json({"hosts": {"gpu1": {"path": Path("/root/autodl-tmp"), "name": "恒源云"}}})
    out, err = capsys.readouterr()
    assert err == ""
    assert json.loads(out) == {"hosts": {"gpu1": {"path": "/root/autodl-tmp", "name": "恒源云"}}}
    assert "恒源云" in out  # readable, not \\u escapes


def test_facts_localhost_json_is_one_document_and_logs_go_to_stderr(capsys):
    code = run_main(["facts", "localhost", "--json", "-v", "--known-hosts", "strict"])
    out, err = capsys.readouterr()
    assert code == EXIT_OK, err
    document = json.loads(out)  # the whole of stdout: one document, nothing else
    assert list(document) == ["hosts"]
    facts = document["hosts"]["localhost"]
    assert facts["hostname"] == socket.gethostname()
    for key in ("os", "cpu", "memory", "disks", "python", "gpus", "nvidia", "data_dir", "torch"):
        assert key in facts
    assert '"hosts"' not in err  # the document went to stdout only


def test_facts_localhost_human_output_is_on_stderr(capsys):
    assert run_main(["facts", "localhost"]) == EXIT_OK
    out, err = capsys.readouterr()
    assert out == ""
    assert f"localhost — {socket.gethostname()}" in err
    for row in ("OS", "CPU", "Memory", "GPU", "Data dir", "Python", "torch"):
        assert row in err


def test_unreachable_host_in_json_and_exit_code(capsys):
    port = closed_loopback_port()
    code = run_main(
        ["facts", f"root@127.0.0.1:{port}", "--json", "--connect-timeout", "2", "--ssh-config",
         "/dev/null"]
    )  # fmt: skip
    out, err = capsys.readouterr()
    assert code == EXIT_UNREACHABLE
    (result,) = json.loads(out)["hosts"].values()
    assert result["unreachable"] is True
    assert set(result) == {"error", "unreachable"}
    assert f"127.0.0.1:{port}" in result["error"] and "refused" in result["error"].lower()


def test_unset_secret_env_var_is_a_usage_error(monkeypatch, capsys):
    monkeypatch.delenv("PROVISION_TEST_UNSET_PW", raising=False)
    parser = argparse.ArgumentParser()
    add_common_options(parser)
    args = parser.parse_args(["--password-env", "PROVISION_TEST_UNSET_PW"])
    with pytest.raises(SystemExit) as exc:
        connect_options(args)
    assert exc.value.code == 2
    assert "PROVISION_TEST_UNSET_PW is not set" in capsys.readouterr().err


def test_non_positive_connect_timeout_is_a_usage_error(capsys):
    parser = argparse.ArgumentParser()
    add_common_options(parser)
    with pytest.raises(SystemExit) as exc:
        connect_options(parser.parse_args(["--connect-timeout", "0"]))
    assert exc.value.code == 2
    assert "--connect-timeout must be > 0" in capsys.readouterr().err


def test_the_command_exits_without_teardown_but_runs_exit_handlers_and_flushes(tmp_path):
    """`provision` ends with os._exit after the exit handlers and a flush (the interpreter's
    teardown is ~35 ms after a stage); a non-daemon thread still running gets the normal exit,
    which waits for it."""
    import subprocess
    import sys

    marker = tmp_path / "handler-ran"
    code = (
        "import atexit, sys, threading, time\n"
        "from provision.cli.common import exit_without_teardown\n"
        f"atexit.register(lambda: open({str(marker)!r}, 'a').write('x'))\n"
        "sys.stdout.write('{\"partial\": true}')  # no newline: still buffered when exiting\n"
        "if sys.argv[1] == 'thread':\n"
        f"    threading.Thread(target=lambda: (time.sleep(0.5), open({str(marker)!r}, 'a').write('t'))).start()\n"
        "exit_without_teardown(3)\n"
    )
    for mode, expect in (("plain", "x"), ("thread", "tx")):
        marker.unlink(missing_ok=True)
        done = subprocess.run([sys.executable, "-c", code, mode], capture_output=True, text=True, timeout=60)
        assert done.returncode == 3, done.stderr
        assert done.stdout == '{"partial": true}'
        assert marker.read_text() == expect  # the thread finished before the handler ran
