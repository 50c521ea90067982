"""One OpenSSH ControlMaster: the single handshake every session of an OpenSSHConnection uses.

The master runs in the foreground (`ssh -N`, no `-f`) as the child of a keeper thread that
lives exactly as long as it, with PR_SET_PDEATHSIG: if provision dies, even by SIGKILL, the
kernel ends the master (and its sessions on the host with it, as a dropped paramiko socket
would), so no master outlives provision. It is ready when its control socket appears (ssh
binds it after authentication); it failed when it exits first, with its reason in master.log.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from provision.connection.openssh_kept import answers

_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    if _libc is not None:
        _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def spawn(argv: list[str], **kwargs: object) -> subprocess.Popen:
    """An ssh process in its own session (a terminal's Ctrl-C reaches provision, which stops the
    remote group first) that dies with the thread that started it."""
    preexec = _die_with_parent if _libc is not None else None
    return subprocess.Popen(argv, start_new_session=True, preexec_fn=preexec, **kwargs)  # type: ignore[call-overload]


class Master:
    def __init__(self, argv: list[str], socket: str, log_path: str) -> None:
        self.argv = argv
        self.socket = socket
        self.log_path = log_path
        self.proc: subprocess.Popen | None = None
        self._exited = threading.Event()
        self._launched = False
        self._failed: BaseException | None = None

    def launch(self) -> None:
        """Spawn ssh in its keeper thread; back once it runs (or could not be started)."""
        started = threading.Event()

        def keep() -> None:
            try:
                with open(self.log_path, "wb") as log:
                    self.proc = spawn(
                        self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log
                    )
            except BaseException as exc:  # no ssh binary after all, fd limits...
                self._failed = exc
                self._exited.set()
                return
            finally:
                started.set()
            self.proc.wait()
            self._exited.set()

        self._launched = True
        threading.Thread(target=keep, daemon=True, name="ssh-master").start()
        started.wait()

    def start(self, bound: float, cancelled: Callable[[], bool]) -> str | None:
        """Wait up to `bound` seconds for the master (launched now unless it was); None when it
        is up, else what ssh said ("" when it was still trying at the bound, or cancelled)."""
        if not self._launched:
            self.launch()
        if self._failed is not None:
            return str(self._failed)
        deadline = time.monotonic() + bound
        while not os.path.exists(self.socket):
            if self._exited.wait(0.01):
                return (
                    self.said() or f"ssh exited with {self.proc.returncode if self.proc else '?'}"
                )
            if cancelled() or time.monotonic() > deadline:
                self.stop(gently=False)
                return ""
        return None

    def alive(self) -> bool:
        return self.proc is not None and not self._exited.is_set()

    def exited_within(self, seconds: float) -> bool:
        """Whether the master is gone, waiting up to `seconds` for it to go."""
        return self.proc is None or self._exited.wait(seconds)

    def said(self) -> str:
        try:
            return Path(self.log_path).read_text(errors="replace").strip()
        except OSError:
            return ""

    def stop(self, gently: bool = True, exit_argv: list[str] | None = None) -> None:
        """`-O exit` first (the host sees a clean close), then TERM, then KILL; bounded."""
        if self.proc is None or self._exited.is_set():
            return
        if gently and exit_argv:
            try:
                subprocess.run(exit_argv, capture_output=True, timeout=2)
            except (OSError, subprocess.TimeoutExpired):
                pass
        for sig, pause in ((signal.SIGTERM, 1.0), (signal.SIGKILL, 2.0)):
            if self._exited.wait(0.2 if sig == signal.SIGTERM and gently else 0):
                return
            try:
                os.kill(self.proc.pid, sig)  # type: ignore[union-attr]
            except OSError:
                return
            if self._exited.wait(pause):
                return


class KeptMaster(Master):
    """A master that outlives provision (ControlPersist, connection/openssh_kept.py): ssh
    forks it into the background once authenticated, so the process launched here exits 0
    and the master is then known only by its socket. Adopted by a later run as it finds it."""

    def __init__(self, argv: list[str], socket: str, log_path: str, *, adopted: bool = False) -> None:
        super().__init__(argv, socket, log_path)
        self._adopted = adopted

    @classmethod
    def adopt(cls, socket: str, log_path: str) -> KeptMaster:
        return cls([], socket, log_path, adopted=True)

    def start(self, bound: float, cancelled: Callable[[], bool]) -> str | None:
        """As Master.start, but the launcher exiting 0 is ssh's fork to the background: up
        once the socket answers."""
        if self._adopted:
            return None
        if not self._launched:
            self.launch()
        if self._failed is not None:
            return str(self._failed)
        deadline = time.monotonic() + bound
        while not (os.path.exists(self.socket) and self._answers()):
            if self._exited.wait(0.01):
                code = self.proc.returncode if self.proc else None
                if code != 0:
                    return self.said() or f"ssh exited with {code if code is not None else '?'}"
                time.sleep(0.01)
            if cancelled() or time.monotonic() > deadline:
                super().stop(gently=False)
                return ""
        return None

    def _answers(self) -> bool:
        return answers(self.socket)

    def alive(self) -> bool:
        return self._answers()

    def exited_within(self, seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while self._answers():
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)
        return True

    def stop(self, gently: bool = True, exit_argv: list[str] | None = None) -> None:
        """Only the launcher, when it is still logging in: a kept master that is up stays (it
        is for the next run); `provision disconnect` or the stall watchdog ends it."""
        if self.proc is not None and not self._exited.is_set():
            super().stop(gently=False)
