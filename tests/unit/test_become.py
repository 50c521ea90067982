"""become for host-side work (provision/remote/become.py): where the sudo password comes from,
that it never enters the command text, and what the errors say. The sudo paths themselves run
against real sudo on the fleet (tests/fleet/test_rentals_facts.py, test_rentals_run.py)."""

from __future__ import annotations

import subprocess

import pytest

from provision.connection.base import ConnectOptions
from provision.connection.local import LocalConnection
from provision.errors import ConfigError
from provision.inventory.model import Host
from provision.remote.become import Become, password_for, wanted_by_host


class _Conn:
    """Just the two attributes become reads (a host and its options): no command runs."""

    def __init__(self, host_vars: dict | None = None, **options) -> None:
        self.host = Host(name="h1", address="198.18.0.2", vars=dict(host_vars or {}))
        self.options = ConnectOptions(**options)


def test_become_is_asked_for_by_option_or_inventory_var() -> None:
    assert not wanted_by_host(_Conn())
    assert wanted_by_host(_Conn(become=True))
    for value in (True, "yes", "True", "1"):
        assert wanted_by_host(_Conn({"ansible_become": value}))
    assert not wanted_by_host(_Conn({"ansible_become": "false"}))


def test_password_from_the_env_var_first_then_the_inventory(monkeypatch) -> None:
    monkeypatch.setenv("SUDO_PW_TEST", "from-env")
    assert password_for(_Conn(become_password_env="SUDO_PW_TEST")) == ("from-env", "env var SUDO_PW_TEST")
    assert password_for(_Conn({"ansible_become_pass": "p2"})) == ("p2", "ansible_become_pass")
    assert password_for(_Conn({"ansible_become_password": "p1", "ansible_become_pass": "p2"}))[0] == "p1"
    assert password_for(_Conn()) == (None, "")
    monkeypatch.delenv("SUDO_PW_TEST")
    with pytest.raises(ConfigError, match="environment variable SUDO_PW_TEST is not set"):
        password_for(_Conn(become_password_env="SUDO_PW_TEST"))


def test_the_password_goes_on_stdin_never_into_the_command() -> None:
    how = Become("password", "s3cr3t 'quote", "env var X")
    text = how.wrap("id -u")
    assert "s3cr3t" not in text and "sudo -S" in text
    assert how.stdin_prefix() == b"s3cr3t 'quote\n"
    assert Become("nopasswd").stdin_prefix() == b"" and "sudo -n" in Become("nopasswd").wrap("id -u")
    assert Become("root").wrap("id -u") == "id -u"


def test_the_wrapped_command_is_one_word_for_sudo() -> None:
    # as root the wrapper runs sh -c directly: what it runs is exactly the command given
    text = Become("nopasswd").wrap("printf '%s|' a 'b c'; exit 3")
    proc = subprocess.run(["sh", "-c", str(text)], capture_output=True, text=True)
    if proc.stderr and "sudo" in proc.stderr:  # not root here: sudo -n refused, nothing to check
        pytest.skip("needs root to run the wrapper without a password")
    assert (proc.stdout, proc.returncode) == ("a|b c|", 3)


def test_a_rejected_password_names_where_it_came_from() -> None:
    how = Become("password", "x", "env var SUDO_PW")
    how.check_rejected("h1", "sudo: unable to resolve host h1\n")  # noise: no error
    with pytest.raises(Exception, match="rejected the become password from env var SUDO_PW"):
        how.check_rejected("h1", "Sorry, try again.\nsudo: 3 incorrect password attempts\n")


def test_probe_on_this_machine_as_root_needs_no_sudo() -> None:
    conn = LocalConnection(Host(name="localhost", local=True))
    if subprocess.run(["id", "-u"], capture_output=True, text=True).stdout.strip() != "0":
        pytest.skip("runs as root only")
    assert Become.probe(conn).mode == "root"
