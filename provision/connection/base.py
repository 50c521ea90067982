"""The small interface every module, the agent handle and the runner use.

Modules never know whether they talk to SSH or to this machine.
"""

from __future__ import annotations

import threading
import weakref
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import IO

from provision.inventory.model import Host
from provision.shell import as_root, stdin_env

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
    become: bool = False  # --become: host-side (agent) work runs as root through sudo
    become_password_env: str | None = None  # env var with the sudo password (sent on stdin)
    known_hosts: str = "accept-new"  # strict | accept-new | off
    connect_timeout: float = 10.0
    connect_retries: int = 2  # extra attempts on transient connect failures, with backoff
    # dead-peer detection: a keepalive that expects a reply every `keepalive` seconds; after
    # `keepalive_count` unanswered ones the host is unreachable (~1 min by default)
    keepalive: float = 15.0
    keepalive_count: int = 3
    extra_known_hosts: list[str] = field(default_factory=list)
    ssh_config: str | None = None  # path; default ~/.ssh/config
    # ansible.cfg remote_user / private_key_file: used only where nothing else names one
    default_user: str | None = None
    default_key_file: str | None = None
    # --persist: seconds an OpenSSH master stays after its last session, for the next run to
    # reuse (connection/openssh_kept.py); 0 = one master per connection, ended with it. The CLI
    # defaults to 60; set, it also puts the control plane on OpenSSH (connection/factory.py).
    persist: float = 0.0
    # --executor: a run's commands go to one agent process per host over one channel
    # (provision/remote/executor.py) instead of a session each
    executor: bool = False


def env_on_stdin(env: Mapping[str, str] | None, command: str) -> tuple[str, bytes]:
    """`command` with `env` exported, and the bytes to send first on its stdin. The values travel
    on stdin, read by the shell's `read` builtin (provision.shell.stdin_env), never in the
    command text: that text is an argument of the host's `sh -c` (framing.wrap), and so in
    every host's process list for the whole command; an `environment:` value is often a token."""
    if not env:
        return command, b""
    prefix, data = stdin_env(env)
    return prefix + command, data


def prepend(first: bytes, source: Iterable[bytes] | IO[bytes] | None) -> Iterator[bytes]:
    """`first`, then what `source` gives (an iterable of chunks or a readable file)."""
    yield first
    if source is None:
        return
    if hasattr(source, "read"):
        while chunk := source.read(1 << 20):  # type: ignore[union-attr]
            yield chunk
    else:
        yield from source  # type: ignore[misc]


class Connection(ABC):
    """Run / put / get / stream to one host. Opened lazily, reused by every step, one thread.

    Every wait is bounded: `timeout` bounds a whole command; a command that times out or is
    interrupted has its process group ended (on the host, or here for LocalConnection)."""

    host: Host
    doing: str | None = None  # the step in progress (a task, "agent facts"): named in errors

    def interrupt(self) -> None:
        """Called from another thread on Ctrl-C: running commands stop (their process group is
        ended) and raise errors.Cancelled in the thread that runs them."""
        return None  # a connection that runs nothing long needs nothing here

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
        idle_timeout: float | None = None,
    ) -> CommandResult:
        """Run a command while feeding `source` to its stdin and handing stdout lines over as
        they arrive. The data plane: one stream for many files, never a call per file.
        `timeout` bounds the whole command, `idle_timeout` the time without output or input
        taken; either ends it with exit code 124."""

    @abstractmethod
    def put(self, data: bytes, remote_path: str, mode: int | None = None) -> None:
        """Write bytes to a path on the host atomically (temp name, then rename)."""

    @abstractmethod
    def get(self, remote_path: str) -> bytes: ...

    def identity(self) -> str | None:
        """Who this connection logs in as, where, and the host's key: what the agent's
        controller-side memo of "already on that host" is keyed by (a re-rented address comes
        with a new host key). None: unknown, the agent bundle is offered on every first call."""
        return None

    @abstractmethod
    def close(self) -> None: ...

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def sudo_wrap(command: str) -> str:
    """Run as root: directly when already root (most rentals), else through non-interactive sudo."""
    return str(as_root(command))


_live: weakref.WeakSet[Connection] = weakref.WeakSet()
_live_lock = threading.Lock()


def register(connection: Connection) -> None:
    """Every connection is known here, so Ctrl-C can reach the ones running in worker threads."""
    with _live_lock:
        _live.add(connection)


def unregister(connection: Connection) -> None:
    """A connection wrapped by another (remote/executor.py) hears Ctrl-C through its wrapper."""
    with _live_lock:
        _live.discard(connection)


def interrupt_all() -> None:
    """Ctrl-C: ask every live connection to stop what it runs (each ends its remote group)."""
    with _live_lock:
        live = list(_live)
    for connection in live:
        try:
            connection.interrupt()
        except Exception:  # pragma: no cover - interrupting must never fail the interrupt
            pass
