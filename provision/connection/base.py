"""The small interface every module, the agent handle and the runner use.

Modules never know whether they talk to SSH or to this machine.
"""

from __future__ import annotations

import shlex
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import IO

from provision.inventory.model import Host

LineCallback = Callable[[str], None]


@dataclass
class CommandResult:
    command: str
    exit_code: int
    stdout: str
    stderr: str
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


@dataclass
class ConnectOptions:
    """How to reach hosts. Command-line options override inventory values when set."""

    user: str | None = None
    port: int | None = None
    key_file: str | None = None
    password_env: str | None = None  # name of the env var holding the password, never the password
    passphrase_env: str | None = None  # env var with the private key's passphrase
    known_hosts: str = "accept-new"  # strict | accept-new | off
    connect_timeout: float = 10.0
    connect_retries: int = 2  # extra attempts on transient connect failures, with backoff
    keepalive: int = 15
    extra_known_hosts: list[str] = field(default_factory=list)
    ssh_config: str | None = None  # path; default ~/.ssh/config


def quote_env(env: Mapping[str, str] | None) -> str:
    """`export K=V;` prefix: every value quoted, so a value is data, never code."""
    if not env:
        return ""
    parts = []
    for key, value in env.items():
        if not key.replace("_", "").isalnum():
            raise ValueError(f"invalid environment variable name {key!r}")
        parts.append(f"export {key}={shlex.quote(str(value))};")
    return " ".join(parts) + " "


class Connection(ABC):
    """Run / put / get / stream to one host. Opened lazily, reused by every step, one thread."""

    host: Host

    @abstractmethod
    def run(
        self,
        command: str,
        *,
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
        timeout: float | None = None,
        sudo: bool = False,
    ) -> CommandResult:
        """Run a shell command (sh -c semantics); never raises on a non-zero exit."""

    @abstractmethod
    def stream(
        self,
        command: str,
        *,
        source: Iterable[bytes] | IO[bytes] | None = None,
        on_stdout_line: LineCallback | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> CommandResult:
        """Run a command while feeding `source` to its stdin and handing stdout lines over as
        they arrive. The data plane: one stream for many files, never a call per file."""

    @abstractmethod
    def put(self, data: bytes, remote_path: str, mode: int | None = None) -> None:
        """Write bytes to a path on the host atomically (temp name, then rename)."""

    @abstractmethod
    def get(self, remote_path: str) -> bytes: ...

    @abstractmethod
    def close(self) -> None: ...

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def sudo_wrap(command: str) -> str:
    """Run as root: directly when already root (most rentals), else through non-interactive sudo."""
    quoted = shlex.quote(command)
    return f'if [ "$(id -u)" = 0 ]; then sh -c {quoted}; else sudo -n -H sh -c {quoted}; fi'
