"""LocalConnection: the same interface as SSH, for `localhost` (the server is the controller)."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import IO

from provision.connection.base import (
    CommandResult,
    Connection,
    LineCallback,
    quote_env,
    sudo_wrap,
)
from provision.inventory.model import Host


def _feed(stdin: IO[bytes], source: Iterable[bytes] | IO[bytes] | None) -> None:
    try:
        if source is not None:
            # flush each chunk: a payload that waits for the command's answer (staging's `ready`)
            # must not sit in our buffer while the command waits for it
            if hasattr(source, "read"):
                while chunk := source.read(1 << 20):  # type: ignore[union-attr]
                    stdin.write(chunk)
                    stdin.flush()
            else:
                for chunk in source:  # type: ignore[union-attr]
                    stdin.write(chunk)
                    stdin.flush()
    except BrokenPipeError:
        pass  # the command exited early; its exit code tells why
    finally:
        try:
            stdin.close()
        except BrokenPipeError:
            pass


class LocalConnection(Connection):
    def __init__(self, host: Host | None = None) -> None:
        self.host = host or Host(name="localhost", local=True)

    def run(
        self,
        command: str,
        *,
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
        timeout: float | None = None,
        sudo: bool = False,
    ) -> CommandResult:
        full = quote_env(env) + command
        if sudo:
            full = sudo_wrap(full)
        start = time.monotonic()
        try:
            proc = subprocess.run(
                ["/bin/sh", "-c", full],
                input=stdin if stdin is not None else b"",
                capture_output=True,
                timeout=timeout,
                cwd=os.path.expanduser("~"),
            )
            code, out, err = proc.returncode, proc.stdout, proc.stderr
        except subprocess.TimeoutExpired as exc:
            code, out, err = 124, exc.stdout or b"", (exc.stderr or b"") + b"\ntimed out"
        return CommandResult(
            command,
            code,
            out.decode("utf-8", "replace"),
            err.decode("utf-8", "replace"),
            time.monotonic() - start,
        )

    def stream(
        self,
        command: str,
        *,
        source: Iterable[bytes] | IO[bytes] | None = None,
        on_stdout_line: LineCallback | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> CommandResult:
        start = time.monotonic()
        proc = subprocess.Popen(
            ["/bin/sh", "-c", quote_env(env) + command],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=os.path.expanduser("~"),
        )
        assert proc.stdin and proc.stdout and proc.stderr
        feeder = threading.Thread(target=_feed, args=(proc.stdin, source), daemon=True)
        feeder.start()
        err_chunks: list[bytes] = []
        err_reader = threading.Thread(
            target=lambda: err_chunks.append(proc.stderr.read()), daemon=True  # type: ignore[union-attr]
        )
        err_reader.start()
        out_lines: list[str] = []
        deadline = None if timeout is None else start + timeout
        for raw in proc.stdout:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            out_lines.append(line)
            if on_stdout_line:
                on_stdout_line(line)
            if deadline and time.monotonic() > deadline:
                proc.kill()
                break
        try:
            code = proc.wait(timeout=None if deadline is None else max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            code = 124
        feeder.join(timeout=5)
        err_reader.join(timeout=5)
        return CommandResult(
            command,
            code,
            "\n".join(out_lines),
            b"".join(err_chunks).decode("utf-8", "replace"),
            time.monotonic() - start,
        )

    def put(self, data: bytes, remote_path: str, mode: int | None = None) -> None:
        path = Path(os.path.expanduser(remote_path))
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
        tmp.write_bytes(data)
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)

    def get(self, remote_path: str) -> bytes:
        return Path(os.path.expanduser(remote_path)).read_bytes()

    def close(self) -> None:
        pass
