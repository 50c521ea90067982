"""`become` for host-side work: run the agent as root through sudo, the password over stdin.

Where become is asked for (CLI `--become`, inventory `ansible_become`, a play's or task's
`become`), the host is asked once per connection how sudo behaves there: already root (most
rentals: nothing to wrap), passwordless sudo, or sudo that needs a password. The password comes
from `--become-password-env VAR` or `ansible_become_password`/`ansible_become_pass`, and reaches
`sudo -S` as the first line of stdin, never argv; it is sent only when sudo will read it, so it
can never be taken for the agent's request.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from provision.connection.base import Connection
from provision.errors import AgentError, ConfigError
from provision.shell import Raw, become_command, sh
from provision.shell import path as shell_path

_PROBE = sh(
    'if [ "$(id -u)" = 0 ]; then echo become=root; '
    "elif ! command -v sudo >/dev/null 2>&1; then echo become=nosudo; "
    "elif sudo -n true >/dev/null 2>&1; then echo become=nopasswd; "
    "else echo become=password; fi"
)
_TRUE = {"1", "true", "yes", "on", "y"}
# what sudo prints on stderr when the password it read was wrong
_REJECTED = ("incorrect password", "Sorry, try again")


def _truthy(value: Any) -> bool:
    return value is True or str(value).strip().lower() in _TRUE


def wanted_by_host(connection: Connection) -> bool:
    """become asked for the whole run: `--become` or the host's `ansible_become`."""
    options = getattr(connection, "options", None)
    return bool(getattr(options, "become", False)) or _truthy(connection.host.vars.get("ansible_become"))


def password_for(connection: Connection) -> tuple[str | None, str]:
    """(the become password or None, where it came from, for messages)."""
    options = getattr(connection, "options", None)
    var = getattr(options, "become_password_env", None) or connection.host.vars.get("become_password_env")
    if var:
        value = os.environ.get(var)
        if value is None:
            raise ConfigError(f"--become-password-env: environment variable {var} is not set (export it first)")
        return value, f"env var {var}"
    for key in ("ansible_become_password", "ansible_become_pass"):
        value = connection.host.vars.get(key)
        if value not in (None, ""):
            return str(value), key
    return None, ""


@dataclass
class Become:
    """How agent commands run as root on one host (probed on first use, then cached)."""

    mode: str  # root | nopasswd | password | nosudo
    password: str | None = None
    source: str = ""

    @classmethod
    def probe(cls, connection: Connection) -> Become:
        host = connection.host.name
        result = connection.run(_PROBE, timeout=30)
        lines = [ln for ln in result.stdout.splitlines() if ln.startswith("become=")]
        if not lines:
            detail = (result.stderr.strip().splitlines() or [f"exit code {result.exit_code}"])[-1]
            raise AgentError(host, f"could not find out how to become root ({detail})")
        mode = lines[-1].split("=", 1)[1].strip()
        if mode == "nosudo":
            raise AgentError(
                host, f"become needs root, but {connection.host.display or host} logs in as a non-root user and "
                "has no sudo: log in as root (--user root) or install sudo there",
            )
        password, source = (None, "")
        if mode == "password":
            password, source = password_for(connection)
            if password is None:
                raise AgentError(
                    host, f"sudo on {host} needs a password: set --become-password-env VAR (the env var "
                    "holding it) or ansible_become_password in the inventory",
                )
        return cls(mode, password, source)

    def wrap(self, command: str) -> Raw:
        if self.mode == "root":
            return Raw(command)
        # str(): the command is one word inside `sudo sh -c WORD` (a Raw would pass unquoted)
        return become_command(str(command), password_on_stdin=self.mode == "password")

    def stdin_prefix(self) -> bytes:
        """The password line sudo -S reads before the command's own stdin."""
        if self.mode == "password" and self.password is not None:
            return (self.password + "\n").encode()
        return b""

    def rejected(self, stderr: str) -> bool:
        """Whether sudo said the password it read was wrong."""
        return self.mode == "password" and any(mark in stderr for mark in _REJECTED)

    def check_rejected(self, host: str, stderr: str) -> None:
        if self.rejected(stderr):
            raise AgentError(
                host, f"sudo on {host} rejected the become password from {self.source}: "
                "check that it is this user's password on the host",
            )


class BecomeConnection:
    """A Connection whose commands run as root through `become` (sudo), for work that writes
    where only root may: a managed env under the system location (provision/install/
    environment.py). Everything not overridden (host, options, stream, close, ...) is the login
    user's connection. `umask 022`: what root builds there stays readable by the login user,
    whose later commands (check, bench, train) run from it without become."""

    def __init__(self, connection: Connection, become: Become) -> None:
        self.inner = connection
        self.become = become

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def run(self, command: str, *, env: Any = None, stdin: bytes | None = None,
            timeout: float | None = None, sudo: bool = False) -> Any:  # fmt: skip
        if env:  # values in env would land in sudo's argv (the host's process list)
            raise ValueError("BecomeConnection.run: pass values over stdin, not env=")
        result = self.inner.run(
            self.become.wrap("umask 022; " + str(command)),
            stdin=self.become.stdin_prefix() + (stdin or b""),
            timeout=timeout,
        )
        self.become.check_rejected(self.inner.host.name, result.stderr)
        return result

    def put(self, data: bytes, remote_path: str, mode: int | None = None) -> None:
        target = shell_path(remote_path)
        command = sh(
            'mkdir -p "$(dirname {t})" && p=$(mktemp {t}.tmp-XXXXXX) && '
            '{ cat > "$p" && chmod {mode} "$p" && mv -f "$p" {t} || { rc=$?; rm -f "$p"; exit $rc; }; }',
            t=target, mode=f"{mode if mode is not None else 0o644:o}",
        )  # fmt: skip
        result = self.run(command, stdin=data, timeout=300)
        if not result.ok:
            raise AgentError(self.inner.host.name, f"writing {remote_path} as root failed: {result.stderr.strip()}")

    def get(self, remote_path: str) -> bytes:
        result = self.run(sh("cat {t}", t=shell_path(remote_path)), timeout=300)
        if not result.ok:
            raise OSError(f"{self.inner.host.name}: reading {remote_path} as root failed: {result.stderr.strip()}")
        return result.stdout.encode("utf-8", "surrogateescape")

