"""LocalConnection: the same interface as SSH, for `localhost` (the server is the controller)."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import IO

from provision.connection.base import (
    CommandResult,
    Connection,
    LineCallback,
    env_on_stdin,
    prepend,
    register,
    sudo_wrap,
)
from provision.connection.bounds import REPLY_MAX, LineSplitter, Tail, joined_lines, reply_too_long
from provision.errors import BoundsError, Cancelled
from provision.inventory.model import Host

_TICK = 0.25
_CHUNK = 1 << 16
_DRAIN = 5.0


def current_umask() -> int:
    """The process's umask (read by setting it, then put back): the mode a new file would get
    is 0666 & ~umask, which a mkstemp'd temp file (0600) must be given before its rename."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _kill_group(proc: subprocess.Popen) -> None:
    """TERM the command's whole process group, KILL what is left a moment later."""
    if proc.poll() is not None and proc.returncode is not None:
        try:
            os.killpg(proc.pid, 0)
        except OSError:
            return  # leader gone and group empty
    for sig, pause in ((signal.SIGTERM, 0.5), (signal.SIGKILL, 0.0)):
        try:
            os.killpg(proc.pid, sig)
        except OSError:
            return
        if pause:
            try:
                proc.wait(timeout=pause)
            except subprocess.TimeoutExpired:
                pass


def _feed(stdin: IO[bytes], source: Iterable[bytes] | IO[bytes] | None, last: list[float]) -> None:
    try:
        if source is not None:
            # flush each chunk: a payload that waits for the command's answer (staging's `ready`)
            # must not sit in our buffer while the command waits for it
            if hasattr(source, "read"):
                while chunk := source.read(1 << 20):  # type: ignore[union-attr]
                    stdin.write(chunk)
                    stdin.flush()
                    last[0] = time.monotonic()
            else:
                for chunk in source:  # type: ignore[union-attr]
                    stdin.write(chunk)
                    stdin.flush()
                    last[0] = time.monotonic()
    except (BrokenPipeError, ValueError):
        pass  # the command exited early (or was stopped); its exit code tells why
    finally:
        try:
            stdin.close()
        except (BrokenPipeError, ValueError):
            pass


class LocalConnection(Connection):
    def __init__(self, host: Host | None = None, cwd: str | None = None) -> None:
        self.host = host or Host(name="localhost", local=True)
        # where commands start: the home directory, as an SSH session's do; a playbook's
        # local steps start in the playbook's directory, as Ansible's (engine/run_state.py)
        self.cwd = cwd
        self.doing = None
        self._running: set[subprocess.Popen] = set()
        self._lock = threading.Lock()
        self._interrupted_at: float | None = None
        register(self)

    def interrupt(self) -> None:
        if self._interrupted_at is None:
            self._interrupted_at = time.monotonic()
        with self._lock:
            running = list(self._running)
        for proc in running:
            _kill_group(proc)

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
        return self._execute(command, full, [data] if data else None, None, timeout, None)

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
        full, first = env_on_stdin(env, command)
        if first:
            source = prepend(first, source)
        return self._execute(command, full, source, on_stdout_line, timeout, idle_timeout)

    def _execute(
        self,
        command: str,
        full: str,
        source: Iterable[bytes] | IO[bytes] | None,
        on_stdout_line: LineCallback | None,
        timeout: float | None,
        idle_timeout: float | None,
    ) -> CommandResult:
        """Own session (so the whole group can be ended), both streams read to the end by
        threads, and the clock checked every tick: a silent command still times out."""
        start = time.monotonic()
        proc = subprocess.Popen(
            ["/bin/sh", "-c", full],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=self.cwd or os.path.expanduser("~"),
            start_new_session=True,  # Ctrl-C in the terminal reaches us, not it; we end it
        )
        with self._lock:
            self._running.add(proc)
        assert proc.stdin and proc.stdout and proc.stderr
        last = [start]
        lines: queue.Queue[bytes | BoundsError | None] = queue.Queue()
        err = Tail()
        host = self.host.name

        def read_out() -> None:  # the same bounds as over SSH (provision/connection/bounds.py)
            total = 0
            while chunk := proc.stdout.read1(_CHUNK):  # type: ignore[union-attr]
                last[0] = time.monotonic()
                total += len(chunk)
                if total > REPLY_MAX:
                    lines.put(reply_too_long(host))
                    return
                lines.put(chunk)
            lines.put(None)

        def read_err() -> None:
            while chunk := proc.stderr.read1(1 << 16):  # type: ignore[union-attr]
                last[0] = time.monotonic()
                err.add(chunk)

        threads = [
            threading.Thread(target=_feed, args=(proc.stdin, source, last), daemon=True),
            threading.Thread(target=read_out, daemon=True),
            threading.Thread(target=read_err, daemon=True),
        ]
        for t in threads:
            t.start()
        # the reply as one buffer of its bytes (not a str per line), split into lines as it comes
        out = bytearray()
        splitter = LineSplitter(host, lambda raw: on_stdout_line(raw.decode("utf-8", "replace")))  # type: ignore[misc]
        stopped: str | None = None
        try:
            while True:
                try:
                    raw = lines.get(timeout=_TICK)
                except queue.Empty:
                    stopped = self._expired(start, last[0], timeout, idle_timeout)
                    if stopped:
                        break
                    continue
                if raw is None:
                    break
                if isinstance(raw, BoundsError):
                    raise raw
                out += raw
                if on_stdout_line:
                    splitter.feed(raw)
            while stopped is None:
                try:
                    proc.wait(timeout=_TICK)
                    break
                except subprocess.TimeoutExpired:
                    stopped = self._expired(start, last[0], timeout, idle_timeout)
        except BaseException:  # Ctrl-C in this thread or a failing callback: end the group too
            _kill_group(proc)
            raise
        finally:
            if stopped is not None:
                _kill_group(proc)
            with self._lock:
                self._running.discard(proc)
        at = self._interrupted_at
        if stopped is None and at is not None and start <= at:
            stopped = "interrupted"  # interrupt() ended the group from another thread
        code = proc.wait() if stopped is None else 124
        for t in threads[1:]:
            t.join(timeout=_DRAIN)
        threads[0].join(timeout=_DRAIN)
        if stopped == "interrupted":
            raise Cancelled(self.host.name, f"interrupted during {self.doing or '`' + command[:60] + '`'}")
        if stopped:
            err.add(f"\nprovision: {stopped}; the command was stopped\n".encode())
        if on_stdout_line and stopped is None:
            splitter.finish()
        stdout = joined_lines(out) if on_stdout_line else out.decode("utf-8", "replace")
        return CommandResult(command, code, stdout, err.value().decode("utf-8", "replace"), time.monotonic() - start)

    def _expired(self, start: float, last: float, timeout: float | None, idle: float | None) -> str | None:
        now = time.monotonic()
        at = self._interrupted_at
        if at is not None and (start <= at or (start - at <= 1.0 < now - at)):  # as in ssh.py
            return "interrupted"
        if timeout is not None and now - start > timeout:
            return f"timed out after {timeout:g}s"
        if idle is not None and now - last > idle:
            return f"no output for {idle:g}s"
        return None

    def put(self, data: bytes, remote_path: str, mode: int | None = None) -> None:
        path = Path(os.path.expanduser(remote_path))
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=f".{path.name}.tmp-", dir=path.parent)  # never a planted name
        tmp = Path(name)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.chmod(tmp, mode if mode is not None else 0o666 & ~current_umask())
        os.replace(tmp, path)

    def get(self, remote_path: str) -> bytes:
        return Path(os.path.expanduser(remote_path)).read_bytes()

    def identity(self) -> str | None:
        return f"local {os.getuid()} {os.path.expanduser('~')}"

    def close(self) -> None:
        pass
