"""What every framed SSH transport shares: the stop rules, and run/stream/put/get on top of
one `_execute` (SSHConnection over paramiko channels, OpenSSHConnection over `ssh` processes).

Kept free of paramiko so the OpenSSH data plane starts without importing it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import IO

from provision.connection.base import CommandResult, LineCallback, env_on_stdin, prepend, sudo_wrap
from provision.connection.bounds import REPLY_MAX, LineSplitter, joined_lines, reply_too_long
from provision.shell import Raw, sh
from provision.shell import path as shell_path

CHUNK = 1 << 18
TICK = 0.25  # how often a blocked read looks at its deadline, the link and Ctrl-C
DRAIN = 5.0  # after a command ended: how long its stream threads may take to finish
CLEANUP_GRACE = 1.0  # after Ctrl-C, how long a step's cleanup commands may run
FILE_IDLE = 120.0  # put/get: silence that means the host's disk or filesystem hangs


@dataclass
class Run:
    code: int
    stdout: bytes
    stderr: bytes
    seconds: float


def summary(command: str, width: int = 60) -> str:
    text = " ".join(command.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def chunks(source: Iterable[bytes] | IO[bytes] | None) -> Iterator[bytes]:
    if source is None:
        return
    if hasattr(source, "read"):
        while chunk := source.read(CHUNK):  # type: ignore[union-attr]
            yield chunk
    else:
        for chunk in source:  # type: ignore[union-attr]
            if chunk:
                yield chunk


def expired(
    now: float,
    start: float,
    last: float,
    timeout: float | None,
    idle_timeout: float | None,
    interrupted_at: float | None,
    stoppable: bool = True,
) -> str | None:
    """Why a running command must stop now, or None. A command started before the interrupt
    stops; one started in the cleanup grace stops at its end; one started later runs (a
    long-lived connection is not poisoned by an old Ctrl-C)."""
    at = interrupted_at
    if at is not None and stoppable and (start <= at or (start - at <= CLEANUP_GRACE < now - at)):
        return "interrupted"
    if timeout is not None and now - start > timeout:
        return f"timed out after {timeout:g}s"
    if idle_timeout is not None and now - last > idle_timeout:
        return f"no output for {idle_timeout:g}s"
    return None


class FramedCommands:
    """run / stream / put / get for a connection whose `_execute` runs one framed command."""

    host: object

    def _execute(
        self,
        command: str,
        *,
        source: Iterable[bytes] | IO[bytes] | None = None,
        on_data: Callable[[bytes], None] | None = None,
        timeout: float | None = None,
        idle_timeout: float | None = None,
        stoppable: bool = True,
    ) -> Run:
        raise NotImplementedError

    def run(
        self,
        command: str,
        *,
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
        timeout: float | None = None,
        sudo: bool = False,
    ) -> CommandResult:
        full, first = env_on_stdin(env, command)
        if sudo:
            full = sudo_wrap(full)
        data = first + (stdin or b"")
        return self.stream(full, source=[data] if data else None, timeout=timeout, _collect_only=True)

    def stream(
        self,
        command: str,
        *,
        source: Iterable[bytes] | IO[bytes] | None = None,
        on_stdout_line: LineCallback | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
        idle_timeout: float | None = None,
        _collect_only: bool = False,
    ) -> CommandResult:
        full = command
        if not _collect_only and env:
            full, first = env_on_stdin(env, command)
            source = prepend(first, source)
        # The reply kept as its bytes (one buffer, not a str per line: a reply of short lines
        # cost ~25x its size as strings), counted against the reply's cap; decoded once at the end.
        kept = bytearray()
        host = str(getattr(self.host, "name", self.host))

        def on_line(raw: bytes) -> None:
            if len(kept) + len(raw) + 1 > REPLY_MAX:
                raise reply_too_long(host)
            kept.extend(raw)
            kept.extend(b"\n")
            on_stdout_line(raw.decode("utf-8", "replace"))  # type: ignore[misc]

        splitter = LineSplitter(host, on_line)
        run = self._execute(
            full,
            source=source,
            on_data=splitter.feed if on_stdout_line else None,
            timeout=timeout,
            idle_timeout=idle_timeout,
        )
        if on_stdout_line is None:
            stdout = run.stdout.decode("utf-8", "replace")
        else:
            splitter.finish()
            stdout = joined_lines(kept)
        return CommandResult(
            command, run.code, stdout, run.stderr.decode("utf-8", "replace"), run.seconds
        )

    def put(self, data: bytes, remote_path: str, mode: int | None = None) -> None:
        """Atomic write in one `cat` round trip (SFTP would cost a subsystem start per file)."""
        target = str(shell_path(remote_path))
        tmp = Raw('"$p"')  # mktemp's name: random, made O_EXCL, so a planted name is never followed
        # no mode given: what a new file gets from the umask (mktemp's file is 0600)
        umask_mode = Raw('"$(printf %o $((0666 & ~$(umask))))"')
        chmod = sh("chmod {mode} {tmp} && ", mode=f"{mode:o}" if mode is not None else umask_mode, tmp=tmp)
        # a failed write (disk full) leaves no temp file behind
        cmd = sh('mkdir -p "$(dirname {target})" && p=$(mktemp {target}.tmp-XXXXXX) && '
                 '{ cat > {tmp} && {chmod}mv -f {tmp} {target} || { rc=$?; rm -f {tmp}; exit $rc; }; }',
                 target=Raw(target), tmp=tmp, chmod=Raw(chmod))  # fmt: skip
        result = self.stream(cmd, source=[data], idle_timeout=FILE_IDLE, _collect_only=True)
        if not result.ok:
            raise OSError(
                f"{self.host.name}: writing {remote_path} failed: {result.stderr.strip()}"
            )  # type: ignore[attr-defined]

    def get(self, remote_path: str) -> bytes:
        run = self._execute(
            str(sh("cat -- {p}", p=shell_path(remote_path))), idle_timeout=FILE_IDLE
        )
        if run.code != 0:
            reason = run.stderr.decode("utf-8", "replace").strip()
            raise OSError(
                f"{self.host.name}: reading {remote_path} failed: {reason or 'cat failed'}"
            )  # type: ignore[attr-defined]
        return run.stdout
