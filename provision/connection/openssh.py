"""OpenSSHConnection: the staging data plane through the OpenSSH client binary.

Why: paramiko does its per-packet crypto in Python, so a stage's bytes cost the controller a
core, and importing paramiko/fabric/invoke costs ~0.3 s of every CLI run. `ssh` encrypts in C
(AES-GCM first, see openssh_args.CIPHERS) and starts in milliseconds.

How: one handshake per connection. The first command starts a ControlMaster (`ssh -N`,
socket in a private 0700 temp dir, bound once it authenticated); every
command is then an `ssh -S SOCKET` session over it, framed like SSHConnection's
(provision/connection/framing.py: banners stripped, the remote process group known), with the
same stop rules (provision/connection/commands.py): `timeout`, `idle_timeout` and interrupt()
end the remote group. The master lives until close() or the atexit hook, and dies with
provision even when it is killed outright (provision/connection/openssh_master.py).

Fallback: when the master cannot be established (refused after the retries, auth denied,
host key unknown or changed), the connection becomes an SSHConnection for the rest of its
life and runs the command there, so what users read for a bad host stays paramiko's message.
Which one ran: `transport_name`. PROVISION_SSH_CLIENT=paramiko forces paramiko
(openssh_args.openssh_unusable says when OpenSSH is not used at all).
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import fcntl
import getpass
import logging
import os
import select
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO

from provision.connection import framing
from provision.connection import openssh_args as args
from provision.connection import openssh_kept as kept
from provision.connection.base import Connection, ConnectOptions, register
from provision.connection.bounds import Reply, Tail
from provision.connection.commands import CHUNK, DRAIN, TICK, FramedCommands, Run, expired, summary
from provision.connection.commands import chunks as source_chunks
from provision.connection.openssh_master import KeptMaster, Master, spawn
from provision.errors import Cancelled, UnreachableError
from provision.inventory.model import Host

log = logging.getLogger("provision.ssh")
_TRANSIENT = ("Connection refused", "Connection reset", "kex_exchange_identification")
_TIMED_OUT = ("Connection timed out", "Operation timed out")
_live: weakref.WeakSet[OpenSSHConnection] = weakref.WeakSet()


def _private_dir() -> str:
    """0700 (mkdtemp); short, since a unix socket path must stay under ~100 bytes."""
    base = tempfile.gettempdir()
    if len(base) > 40 or not base.replace("/", "").replace("-", "").replace("_", "").isalnum():
        base = "/tmp"
    _sweep(base)
    # the creator's pid in the name: a later run can tell a dead provision's dir at once
    return tempfile.mkdtemp(prefix=f"pvssh-{os.getpid()}-", dir=base)


def _pid_gone(name: str) -> bool:
    """True when the dir's name says which provision made it and that process is gone."""
    field = name.split("-")[1] if name.count("-") >= 2 else ""
    if not field.isdigit():
        return False
    try:
        os.kill(int(field), 0)
    except ProcessLookupError:
        return True
    except OSError:  # alive (another user's, or not ours to signal)
        return False
    return False


def _sweep(base: str, older_than: float = 3600.0) -> None:
    """Remove the dirs of masters that died with a provision killed by SIGKILL (the kernel ended
    the master, nobody removed its dir): ours, with no master answering there, and either made
    by a process that is gone or an hour old."""
    now = time.time()
    for entry in Path(base).glob("pvssh-*"):
        try:
            st = entry.stat()
        except OSError:
            continue
        if st.st_uid != os.getuid():
            continue
        if now - st.st_mtime < older_than and not _pid_gone(entry.name):
            continue
        try:
            with socket.socket(socket.AF_UNIX) as probe:
                probe.connect(str(entry / "m"))
            continue  # a master answers there: in use
        except OSError:  # no socket, or nobody listening on it
            shutil.rmtree(entry, ignore_errors=True)


def _widen_pipe(fd: int, size: int = 1 << 20) -> None:
    """A 1 MiB pipe to ssh instead of 64 KiB: a bulk stream then costs both sides ~16x fewer
    wake-ups (best effort: the limit is /proc/sys/fs/pipe-max-size)."""
    try:
        fcntl.fcntl(fd, 1031, size)  # F_SETPIPE_SZ
    except OSError:
        pass


def _write_if_changed(path: str, text: str, mode: int) -> None:
    try:
        if Path(path).read_text() == text:
            return
    except OSError:
        pass
    tmp = f"{path}.tmp-{os.getpid()}-{threading.get_ident()}"
    with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode), "w") as f:
        f.write(text)
    os.chmod(tmp, mode)
    os.replace(tmp, path)


class OpenSSHConnection(FramedCommands, Connection):
    def __init__(self, host: Host, options: ConnectOptions) -> None:
        self.host = host
        self.options = options
        self.doing: str | None = None
        self._marker = framing.new_marker()
        self._interrupted_at: float | None = None
        self._dir: str | None = None
        self._master: Master | None = None
        self._fallback: Connection | None = None
        self._running: set[subprocess.Popen] = set()
        self._lock = threading.Lock()
        self._where: tuple[str, str, int] | None = None  # (user, hostname, port) from `ssh -G`
        self._resolving: threading.Thread | None = None
        self._starting: threading.Thread | None = None  # prestart()'s handshake
        self._launched: Master | None = None  # spawned by prestart(), its login not yet awaited
        self._unverified = False  # --known-hosts off: the warning is still to be said
        self._start_error: BaseException | None = None
        # --persist: the master is kept across runs in its folder (connection/openssh_kept.py)
        self._persist = options.persist if options.persist > 0 else 0.0
        register(self)
        _live.add(self)

    @property
    def transport_name(self) -> str:
        return "paramiko" if self._fallback is not None else "openssh"

    # -- the master ------------------------------------------------------------------------
    def _spawn(self, argv: list[str], **kwargs: object) -> subprocess.Popen:
        proc = spawn(argv, **kwargs)
        with self._lock:
            self._running.add(proc)
        return proc

    def _done(self, proc: subprocess.Popen) -> None:
        with self._lock:
            self._running.discard(proc)

    @property
    def kept(self) -> bool:
        """Whether this connection's master is a kept one (outlives the run)."""
        return self._persist > 0

    def _prepare_dir(self) -> str:
        if self._dir is None and self._persist:
            try:
                self._dir = kept.folder(self.host, self.options)
            except OSError as exc:  # an unsafe or unwritable directory: this run keeps nothing
                log.warning("%s: connections are not kept across runs: %s", self.host.name, exc)
                self._persist = 0.0
        if self._dir is None or not os.path.isdir(self._dir):
            self._dir = _private_dir()
        # written only when different, and by rename: a kept folder's sessions of another run
        # read `-F config` at any moment
        _write_if_changed(os.path.join(self._dir, "record-key"), args.RECORD_KEY_SCRIPT, 0o700)
        _write_if_changed(os.path.join(self._dir, "config"), args.config_text(self.options, self._dir), 0o600)
        return self._dir

    def prestart(self) -> None:
        """Begin the handshake now: the master is spawned here, before the caller's next step
        (staging imports and lists its source meanwhile), its login awaited in the background;
        the first command waits for it and gets its error, if any."""
        if self._starting is None and self._master is None and self._fallback is None:
            try:
                if not self._persist:  # a kept one may be up already: the start looks first
                    self._launched = self._launch()
            except Exception as exc:  # the background start tries again and keeps the error
                log.debug("%s: starting the OpenSSH master: %s", self.host.name, exc)
            self._starting = threading.Thread(
                target=self._prestarted, daemon=True, name=f"ssh-start-{self.host.name}"
            )
            self._starting.start()

    def _prestarted(self) -> None:
        try:
            self._ensure_master()
        except BaseException as exc:  # handed to the first command, in its thread
            self._start_error = exc

    def _launch(self) -> Master:
        """A new master process, spawned (its login not awaited)."""
        where = self._prepare_dir()
        for stale in ("m", "hostkey"):  # a killed master's socket would look ready
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(where, stale))
        if self._where is None and self._resolving is None:  # `ssh -G` while the master logs in
            self._resolving = threading.Thread(target=self._resolve, daemon=True, name="ssh-G")
            self._resolving.start()
        kind = KeptMaster if self._persist else Master
        master = kind(args.master_argv(self.host, self.options, where, self._persist),
                      os.path.join(where, "m"), os.path.join(where, "master.log"))  # fmt: skip
        master.launch()
        return master

    def _ensure_master(self) -> bool:
        """True when the master is up (started now if needed); False after falling back."""
        starting = self._starting
        if starting is not None and starting is not threading.current_thread():
            starting.join()
            self._starting = None
            error, self._start_error = self._start_error, None
            if error is not None:
                raise error
        if self._fallback is not None:
            return False
        if self._master is not None and self._master.alive():
            return True
        if self._persist:
            where = self._prepare_dir()
            if self._persist:  # still: the folder was usable
                bound = self.options.connect_timeout * 5 + 2
                with kept.locked(where, bound):  # one start per host at a time, across processes
                    if kept.answers(os.path.join(where, "m")):
                        log.debug("%s: reusing the kept OpenSSH master", self.host.name)
                        self._master = KeptMaster.adopt(os.path.join(where, "m"),
                                                        os.path.join(where, "master.log"))  # fmt: skip
                        self._unverified = self.options.known_hosts == "off"
                        return True
                    return self._start_master()
        return self._start_master()

    def _start_master(self) -> bool:
        hops = len(self.host.proxy_jump.split(",")) if self.host.proxy_jump else 0
        # ConnectTimeout bounds TCP and the banner; auth and jump hops get their own share
        bound = self.options.connect_timeout * (3 + 2 * hops) + 2
        attempts = 1 + max(0, self.options.connect_retries)
        problem: str | None = ""
        for attempt in range(attempts):
            launched, self._launched = self._launched, None
            master = launched if launched is not None else self._launch()
            problem = master.start(bound, lambda: self._interrupted_at is not None)
            if problem is None:
                self._master = master
                if self._persist:
                    kept.record_target(self._dir, self.host, self._display())  # type: ignore[arg-type]
                # said by the first session, once it runs: logging it here (rich's set-up on
                # the first record) would delay the handshake and that session
                self._unverified = self.options.known_hosts == "off"
                return True
            if self._interrupted_at is not None:
                raise Cancelled(self.host.name, f"interrupted during {self.doing or 'connect'}")
            if not problem or any(t in problem for t in _TIMED_OUT):
                if not self.host.proxy_jump:  # paramiko would only wait as long again
                    raise UnreachableError(self.host.name, f"{self._display()}: no answer within "
                                           f"{self.options.connect_timeout:g}s (--connect-timeout)")  # fmt: skip
                break
            if attempt + 1 < attempts and any(t in problem for t in _TRANSIENT):
                time.sleep(0.3 * 2**attempt)
                continue
            break
        log.debug("%s: OpenSSH master failed (%s); using paramiko", self.host.name, problem)
        self._fall_back()
        return False

    def _fall_back(self) -> None:
        from provision.connection.ssh import SSHConnection  # lazy: paramiko only when needed

        # OpenSSH already waited out the retries: paramiko tries once
        options = dataclasses.replace(self.options, connect_retries=0)
        self._fallback = SSHConnection(self.host, options)
        self._fallback.doing = self.doing
        self._end_master()

    def _display(self) -> str:
        user = self.host.user or self.options.user or getpass.getuser()
        return f"{user}@{self.host.connect_address}:{self.host.port or self.options.port or 22}"

    # -- commands --------------------------------------------------------------------------
    def interrupt(self) -> None:
        """From another thread (Ctrl-C): running commands stop their remote group and raise.
        A master still authenticating is stopped right away."""
        if self._interrupted_at is None:
            self._interrupted_at = time.monotonic()
        if self._fallback is not None:
            self._fallback.interrupt()

    def _lost(self, command: str) -> UnreachableError:
        step = self.doing or f"`{summary(command)}`"
        said = self._said()
        if "not responding" in said:  # ServerAlive: count x interval without an answer
            waited = max(1, round(self.options.keepalive)) * max(
                1, int(self.options.keepalive_count)
            )
            return UnreachableError(
                self.host.name, f"no reply for {waited}s (link down?) during {step}"
            )
        detail = said.splitlines()[-1] if said else ""
        return UnreachableError(
            self.host.name, f"connection lost during {step}" + (f": {detail}" if detail else "")
        )

    def _said(self) -> str:
        if not self._dir:
            return ""
        try:
            return Path(self._dir, "master.log").read_text(errors="replace").strip()
        except OSError:
            return ""

    def _stop_remote(self, pgid: int | None, budget: float = 1.0) -> None:
        """End the command's process group on the host, bounded (a dead link has no one to tell)."""
        if pgid is None or self._master is None or not self._master.alive():
            return
        try:
            self._execute(str(framing.stop_group(pgid)), timeout=budget, stoppable=False)
        except Exception as exc:  # best effort: the caller is already failing or interrupted
            log.debug("%s: stopping remote group %s failed: %s", self.host.name, pgid, exc)

    def _execute(
        self,
        command: str,
        *,
        source: Iterable[bytes] | IO[bytes] | None = None,
        on_data: Callable[[bytes], None] | None = None,
        timeout: float | None = None,
        idle_timeout: float | None = None,
        stoppable: bool = True,
        on_stderr: Callable[[bytes], None] | None = None,  # stderr as it comes (remote/executor.py)
    ) -> Run:
        """One framed command as an `ssh -S` session; the same contract as SSHConnection's."""
        start = time.monotonic()
        if not self._ensure_master():
            self._fallback.doing = self.doing  # type: ignore[union-attr]
            return self._fallback._execute(  # type: ignore[union-attr]
                command, source=source, on_data=on_data, timeout=timeout,
                idle_timeout=idle_timeout, stoppable=stoppable, on_stderr=on_stderr,
            )  # fmt: skip
        assert self._dir is not None
        wrapped = str(framing.wrap(command, self._marker))
        proc = self._spawn(
            args.session_argv(self.host, self.options, self._dir, wrapped),
            stdin=subprocess.DEVNULL if source is None else subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0,
        )  # fmt: skip
        assert proc.stdout is not None and proc.stderr is not None
        if proc.stdin is not None:
            _widen_pipe(proc.stdin.fileno())
        if self._unverified:
            self._unverified = False
            log.warning("host key checking is OFF: accepting %s's key unverified", self.host.name)
        out_frame = framing.Framer(self._marker, with_pgid=True, host=self.host.name, stream="stdout")
        err_frame = framing.Framer(self._marker, with_pgid=False, host=self.host.name, stream="stderr")
        last = [start]  # last sign of life on either stream
        out, err = Reply(self.host.name), Tail()
        feeder = None
        if source is not None:
            feeder = threading.Thread(target=self._feed, args=(proc.stdin, source, last), daemon=True,
                                      name=f"feed-{self.host.name}")  # fmt: skip
            feeder.start()
        streams = {proc.stdout.fileno(): out_frame, proc.stderr.fileno(): err_frame}

        def stop_reason() -> str | None:
            return expired(time.monotonic(), start, last[0], timeout, idle_timeout,
                           self._interrupted_at, stoppable)  # fmt: skip

        why_stopped: str | None = None
        try:
            while streams and why_stopped is None:
                ready, _, _ = select.select(list(streams), [], [], TICK)
                for fd in ready:
                    data = os.read(fd, CHUNK)
                    if not data:
                        del streams[fd]
                        continue
                    last[0] = time.monotonic()
                    frame = streams[fd]
                    data = frame.feed(data)
                    if frame is err_frame:
                        err.add(data)
                        if on_stderr is not None and data:
                            on_stderr(data)
                    elif data:
                        if on_data is None:
                            out.add(data)
                        else:
                            on_data(data)
                why_stopped = stop_reason()  # also while output flows: a chatty command times out
            while why_stopped is None:
                try:
                    proc.wait(timeout=TICK)
                    break
                except subprocess.TimeoutExpired:
                    why_stopped = stop_reason()
        # Ctrl-C in this thread, or a callback failed: end the remote work too
        except BaseException:
            self._kill(proc)
            self._close_pipes(proc)
            if stoppable:
                self._stop_remote(out_frame.pgid)
            raise
        if why_stopped is not None:
            self._kill(proc)
        code = proc.wait() if why_stopped is None else 124
        self._done(proc)
        self._close_pipes(proc)
        if feeder is not None:
            feeder.join(timeout=DRAIN)
        rest = out_frame.finish()
        if rest:
            if on_data is None:
                out.add(rest)
            else:
                on_data(rest)
        err.add(err_frame.finish())
        if out_frame.preamble or err_frame.preamble:
            log.debug("%s: login shell printed before the command: %r / %r", self.host.name,
                      out_frame.preamble[-400:], err_frame.preamble[-400:])  # fmt: skip
        # a master killed by a dead link ends its sessions first: give its exit a moment to show
        master_up = self._master is not None and not self._master.exited_within(
            0.5 if why_stopped is None and (code == 255 or code < 0) else 0.0
        )
        if why_stopped is not None:
            if stoppable:
                self._stop_remote(out_frame.pgid)
            if why_stopped == "interrupted":
                raise Cancelled(
                    self.host.name,
                    f"interrupted during {self.doing or '`' + summary(command) + '`'}",
                )
            if not master_up:
                raise self._lost(command)
            err.add(f"\nprovision: {why_stopped}; the command was stopped on the host\n".encode())
        elif code == 255 and not master_up:
            raise self._lost(command)  # ssh's own 255: the master (the link) went away
        elif code < 0:
            code = 128 - code  # our ssh was killed (abort_transport): as a shell reports it
            if not master_up:
                raise self._lost(command)
        return Run(code, bytes(out.data), err.value(), time.monotonic() - start)

    @staticmethod
    def _feed(stdin: IO[bytes], source: Iterable[bytes] | IO[bytes], last: list[float]) -> None:
        """Each chunk is written through at once (unbuffered pipe): staging's payload waits for
        the agent's `ready` line before it yields the bulk."""
        try:
            for chunk in source_chunks(source):
                view = memoryview(chunk)
                while view:
                    sent = stdin.write(view)
                    view = view[sent or 0 :]
                last[0] = time.monotonic()  # the host takes our bytes: alive
        except (OSError, ValueError):
            pass  # the command ended early or was stopped: its exit code says why
        finally:
            try:
                stdin.close()
            except OSError:
                pass

    @staticmethod
    def _close_pipes(proc: subprocess.Popen) -> None:
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()

    def _kill(self, proc: subprocess.Popen) -> None:
        """End our ssh session process (the remote group is stopped separately)."""
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._done(proc)

    # -- identity, abort, close ------------------------------------------------------------
    def identity(self) -> str | None:
        """`ssh user@host:port TYPE BASE64` as SSHConnection.identity(): the same memo entry."""
        if not self._ensure_master():
            return self._fallback.identity()  # type: ignore[union-attr]
        assert self._dir is not None
        try:
            key = Path(self._dir, "hostkey").read_text().split()
        except OSError:
            return None
        if len(key) != 2:
            return None
        if self._resolving is not None:
            self._resolving.join(12)
            self._resolving = None
        if self._where is None and self._persist:
            self._where = self._recorded_where()
        if self._where is None:
            self._where = self._resolved()
        if self._where is None:
            return None
        if self._persist:  # a reused master's next run asks no `ssh -G`
            with contextlib.suppress(OSError):
                Path(self._dir, "where").write_text("{} {} {}\n".format(*self._where))
        user, hostname, port = self._where
        return f"ssh {user}@{hostname}:{port} {key[0]} {key[1]}"

    def _resolve(self) -> None:
        self._where = self._resolved()

    def _recorded_where(self) -> tuple[str, str, int] | None:
        try:
            user, hostname, port = Path(self._dir, "where").read_text().split()  # type: ignore[arg-type]
            return user, hostname, int(port)
        except (OSError, ValueError, TypeError):
            return None

    def _resolved(self) -> tuple[str, str, int] | None:
        """User, HostName and Port as ssh resolved them (`ssh -G`: aliases, defaults)."""
        assert self._dir is not None
        argv = [
            "ssh",
            "-G",
            *args.target_args(self.host, self.options, self._dir),
            "--",
            self.host.connect_address,
        ]
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return None
        seen = dict(line.split(" ", 1) for line in done.stdout.splitlines() if " " in line)
        if not {"user", "hostname", "port"} <= seen.keys() or not seen["port"].isdigit():
            return None
        return seen["user"], seen["hostname"], int(seen["port"])

    def abort(self) -> None:
        """Stall watchdog: end the master and every ssh process now, so every blocked thread
        wakes (the next command starts a new master). After a fallback, staging aborts the
        SSHConnection itself (staging.watchdog.abort_transport)."""
        if self._persist and self._dir is not None and self._master is not None:
            kept.end(kept.Kept(self._dir, self.host.name, self.host.connect_address, ""))
            self._dir = None
        self._end_master(gently=False)
        with self._lock:
            running = list(self._running)
        for proc in running:
            if proc.poll() is None:
                proc.kill()

    def _end_master(self, gently: bool = True) -> None:
        launched, self._launched = self._launched, None  # prestarted, never awaited
        if launched is not None:
            launched.stop(gently=False)
        master, self._master = self._master, None
        if master is not None and self._dir is not None:
            master.stop(gently, args.control_argv(self.host, self.options, self._dir, "exit"))

    def close(self) -> None:
        if self._fallback is not None:
            self._fallback.close()
        self._end_master()
        with self._lock:
            running = list(self._running)
        for proc in running:
            self._kill(proc)
        if self._dir is not None and not self._persist:
            shutil.rmtree(self._dir, ignore_errors=True)
        self._dir = None


def end_all_masters() -> None:
    """No master outlives provision: at exit, and before a stuck Ctrl-C exit (os._exit)."""
    for connection in list(_live):
        try:
            connection.close()
        except Exception:  # pragma: no cover - exiting must not fail here
            pass


atexit.register(end_all_masters)
