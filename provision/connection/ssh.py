"""SSHConnection: Fabric opens (ssh_config, ProxyJump, auth); paramiko channels run commands.

One connection per host per run, opened lazily, used by one thread only.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable
from typing import IO

import paramiko
from fabric import Config as FabricConfig
from fabric import Connection as FabricConnection

from provision.connection import framing
from provision.connection.base import Connection, ConnectOptions, register
from provision.connection.bounds import Reply, Tail
from provision.connection.commands import CHUNK as _CHUNK
from provision.connection.commands import DRAIN as _DRAIN
from provision.connection.commands import TICK as _TICK
from provision.connection.commands import FramedCommands, Run, expired, summary
from provision.connection.commands import chunks as _chunks
from provision.connection.hostkeys import apply_policy, changed_key_message
from provision.connection.keepalive import Watchdog
from provision.errors import (
    AuthError,
    BoundsError,
    Cancelled,
    ConfigError,
    HostKeyError,
    UnreachableError,
)
from provision.inventory.model import Host
from provision.inventory.ssh_config import apply_ssh_config
from provision.inventory.targets import parse_target

log = logging.getLogger("provision.ssh")
# Fast failures worth retrying (sshd restarting, port not yet open); a timeout is not retried:
# it already cost connect_timeout.
_TRANSIENT = (ConnectionRefusedError, ConnectionResetError, EOFError)


def _is_refused(exc: paramiko.ssh_exception.NoValidConnectionsError) -> bool:
    """NoValidConnectionsError wraps every address's error: retry only when all were refused
    (sshd restarting); "no route to host" already cost seconds of ARP and won't heal."""
    errors = getattr(exc, "errors", {}) or {}
    return bool(errors) and all(isinstance(e, ConnectionRefusedError) for e in errors.values())


class _TunedTransport(paramiko.Transport):
    """paramiko's Transport with the changes below, each measured on the fleet.

    AES-GCM first: an AEAD cipher needs no separate MAC pass, ~10% faster on bulk streams
    (dataset staging); servers without it negotiate the next one in paramiko's list.

    TCP_NODELAY before the handshake: SSH sends small messages back to back (channel open, exec
    request, EOF, window adjusts), and with Nagle each second one waits for the ACK of the
    first, which the host delays by up to 40 ms: `true` on one fleet host took 52 ms, now 10 ms.

    An immediate ACK after the server's unsolicited messages: right after authentication sshd
    sends a `hostkeys-00` global request and a debug message, then, when our channel open comes,
    its confirmation -- which its own Nagle holds until we ACK the first two, and our kernel
    delays that ACK by 40 ms. TCP_QUICKACK flushes it: the first command of a connection took
    72 ms from the end of authentication, now 31 ms (one fleet host)."""

    _preferred_ciphers = ("aes128-gcm@openssh.com", "aes256-gcm@openssh.com") + tuple(
        c for c in paramiko.Transport._preferred_ciphers if "gcm" not in c
    )
    # paramiko's reader thread wakes every 0.1 s (its socket timeout) only to see whether it was
    # closed. 256 connections made that 2,560 GIL hand-offs a second for nothing. close() below
    # wakes the thread itself; the other uses of the tick (handshake and banner deadlines,
    # starting a rekey) are fine at 1 s.
    _active_check_timeout = 1.0

    def close(self) -> None:
        # shutdown() ends the reader thread's blocked recv now (close() alone would leave it
        # until its next timeout, and the thread alive that long)
        if self.active and _tcp(self.sock):
            try:
                self.sock.shutdown(socket.SHUT_RDWR)  # type: ignore[attr-defined]
            except OSError:
                pass  # already gone
        super().close()

    def __init__(self, sock: object, *args: object, **kwargs: object) -> None:
        if _tcp(sock):  # a ProxyJump channel is no TCP socket: nothing to tune
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # type: ignore[attr-defined]
        super().__init__(sock, *args, **kwargs)  # type: ignore[arg-type]

    def _ack_now(self) -> None:
        if _tcp(self.sock) and hasattr(socket, "TCP_QUICKACK"):  # Linux only
            try:
                self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 1)
            except OSError:
                pass  # a closing socket: nothing left to acknowledge

    def _parse_global_request(self, m: paramiko.Message) -> None:
        super()._parse_global_request(m)  # type: ignore[misc]
        self._ack_now()

    def _parse_debug(self, m: paramiko.Message) -> None:
        super()._parse_debug(m)  # type: ignore[misc]
        self._ack_now()


def _tcp(sock: object) -> bool:
    return isinstance(sock, socket.socket) and sock.family in (socket.AF_INET, socket.AF_INET6)


def _jump_host(chain: str, ssh_config: str | None) -> Host:
    """ProxyJump `a,b`: reach b through a, then the target through b (OpenSSH's order). Each hop
    may be an ssh_config alias."""
    *earlier, last = [hop.strip() for hop in chain.split(",") if hop.strip()]
    jump = apply_ssh_config(parse_target(last), ssh_config)
    jump.local = False  # a jump host is always reached over SSH
    if earlier:
        jump.proxy_jump = ",".join(earlier)
    return jump


def _secret_from_env(var: str | None, what: str) -> str | None:
    if not var:
        return None
    value = os.environ.get(var)
    if value is None:
        raise ConfigError(f"{what} env var {var} is not set (set it in the environment; it is never read from the command line)")
    return value


def _send_all(chan: paramiko.Channel, data: bytes, stop: threading.Event) -> None:
    """sendall that survives the read tick timeout: a full window (the host reads slowly) waits,
    it is not an error; a stopped command ends the wait."""
    view = memoryview(data)
    while view:
        if stop.is_set():
            raise EOFError("command stopped")
        try:
            sent = chan.send(view[:_CHUNK].tobytes())
        except TimeoutError:
            continue
        if sent == 0:
            raise EOFError("channel closed")
        view = view[sent:]


def _fits_window(source: Iterable[bytes] | IO[bytes] | None, chan: paramiko.Channel) -> bool:
    """Whether `source` is nothing, or a list of chunks the host's channel window takes whole:
    then sending it cannot block, and the command needs no feeder thread (most commands: no
    stdin, or a small env block, file or request). Iterators and files may be long: a thread."""
    if source is None:
        return True
    if not isinstance(source, (list, tuple)):
        return False
    return sum(len(c) for c in source) <= chan.out_window_size


def _key_problem(exc: Exception, fab: FabricConnection, options: ConnectOptions, host: Host | None) -> str | None:
    """What to do about an encrypted private key that could not be used, or None."""
    keys = fab.connect_kwargs.get("key_filename") or []
    key = keys[0] if keys else "the private key"
    text = str(exc)
    var = (host.vars.get("passphrase_env") if host else None) or options.passphrase_env
    if isinstance(exc, paramiko.PasswordRequiredException) or "is encrypted" in text:
        return (
            f"the private key {key} is encrypted and no passphrase was given: set --passphrase-env VAR "
            "(the name of an env var holding the passphrase)"
        )
    if "passphrase" in fab.connect_kwargs and ("Invalid key" in text or "bad decrypt" in text.lower()):
        return (
            f"the passphrase from env var {var} does not decrypt the private key {key} (wrong passphrase?): "
            f"check {var}, or the key file"
        )
    return None


class SSHConnection(FramedCommands, Connection):
    def __init__(self, host: Host, options: ConnectOptions) -> None:
        self.host = host
        self.options = options
        self._fabric: FabricConnection | None = None
        self._watchdog: Watchdog | None = None
        self._marker = framing.new_marker()
        self._interrupted_at: float | None = None
        self.doing: str | None = None
        register(self)

    # -- opening ---------------------------------------------------------------------------
    def _build(self) -> FabricConnection:
        opts, host = self.options, self.host
        overrides: dict = {"load_ssh_configs": True}
        if opts.ssh_config:
            overrides["ssh_config_path"] = opts.ssh_config
        config = FabricConfig(overrides=overrides)
        connect_kwargs: dict = {
            "banner_timeout": opts.connect_timeout,
            "auth_timeout": opts.connect_timeout,
            "transport_factory": _TunedTransport,
        }
        key_file = host.key_file or opts.key_file
        if key_file:
            path = os.path.expanduser(key_file)
            if not os.path.isfile(path):
                raise ConfigError(f"{host.name}: key file {key_file} does not exist")
            if not os.access(path, os.R_OK):
                raise ConfigError(f"{host.name}: key file {key_file} is not readable (check its permissions)")
            connect_kwargs["key_filename"] = [path]
        password = _secret_from_env(host.vars.get("password_env") or opts.password_env, "password")
        if password is not None:
            connect_kwargs["password"] = password
        passphrase = _secret_from_env(host.vars.get("passphrase_env") or opts.passphrase_env, "key passphrase")
        if passphrase is not None:
            connect_kwargs["passphrase"] = passphrase
        gateway = None
        if host.proxy_jump:
            gateway = SSHConnection(_jump_host(host.proxy_jump, opts.ssh_config), opts)._build()
        fab = FabricConnection(
            host.connect_address,
            user=host.user or opts.user,
            port=host.port or opts.port,
            config=config,
            connect_timeout=int(max(1, opts.connect_timeout)),
            connect_kwargs=connect_kwargs,
            gateway=gateway,
        )
        apply_policy(fab.client, opts.known_hosts, opts.extra_known_hosts)
        return fab

    def _open(self) -> paramiko.Transport:
        if self._fabric is not None and self._fabric.is_connected:
            return self._fabric.transport  # type: ignore[return-value]
        fab = self._build()
        where = f"{fab.user}@{fab.host}:{fab.port}"
        if isinstance(fab.gateway, FabricConnection):
            self._open_jump(fab.gateway)
        attempts = 1 + max(0, self.options.connect_retries)
        for attempt in range(attempts):
            try:
                fab.open()
                break
            except paramiko.BadHostKeyException as exc:
                raise HostKeyError(self.host.name, changed_key_message(fab.host, fab.port, exc)) from None
            except paramiko.AuthenticationException as exc:
                key_problem = _key_problem(exc, fab, self.options, self.host)
                if key_problem:
                    raise AuthError(self.host.name, f"{where}: {key_problem}") from None
                raise AuthError(
                    self.host.name,
                    f"permission denied for {where} ({exc}). Check --user, --key / ansible_ssh_private_key_file, "
                    "or --password-env.",
                ) from None
            except paramiko.SSHException as exc:
                if "not found in known_hosts" in str(exc):
                    raise HostKeyError(
                        self.host.name,
                        f"{where}: host key unknown and --known-hosts strict. Add it with "
                        f"`ssh-keyscan -p {fab.port} {fab.host} >> ~/.ssh/known_hosts` after checking the "
                        "fingerprint, or use --known-hosts accept-new.",
                    ) from None
                if attempt + 1 < attempts and "Error reading SSH protocol banner" in str(exc):
                    time.sleep(0.3 * 2**attempt)
                    continue
                key_problem = _key_problem(exc, fab, self.options, self.host)
                if key_problem:
                    raise AuthError(self.host.name, f"{where}: {key_problem}") from None
                if isinstance(exc, paramiko.ChannelException) and fab.gateway is not None:
                    raise UnreachableError(
                        self.host.name,
                        f"{where}: the jump host ({self.host.proxy_jump}) could not reach it: {exc.text or exc}. "
                        "Check the address and port as the jump host sees them.",
                    ) from None
                raise UnreachableError(self.host.name, f"{where}: SSH failed: {exc}") from None
            except paramiko.ssh_exception.NoValidConnectionsError as exc:
                if attempt + 1 < attempts and _is_refused(exc):
                    time.sleep(0.3 * 2**attempt)
                    continue
                reason = "; ".join(sorted({e.strerror or str(e) for e in (exc.errors or {}).values()})) or str(exc)
                raise UnreachableError(self.host.name, f"{where}: {reason}") from None
            except _TRANSIENT as exc:
                if attempt + 1 < attempts:
                    time.sleep(0.3 * 2**attempt)
                    continue
                raise UnreachableError(self.host.name, f"{where}: {exc or type(exc).__name__}") from None
            except TimeoutError:
                raise UnreachableError(
                    self.host.name, f"{where}: no answer within {self.options.connect_timeout:g}s (--connect-timeout)"
                ) from None
            except OSError as exc:
                raise UnreachableError(self.host.name, f"{where}: {exc.strerror or exc}") from None
        transport = fab.transport
        assert transport is not None
        if self._watchdog is not None:
            self._watchdog.stop()
        self._watchdog = Watchdog(
            transport, self.host.name, self.options.keepalive, self.options.keepalive_count
        ).start()
        self._fabric = fab
        return transport

    def _open_jump(self, gateway: FabricConnection) -> None:
        """Open the jump host first, so that a failure there names the jump host (ProxyJump),
        not the host behind it. A chain (a,b) opens its own earlier hops the same way."""
        jump = f"{gateway.user}@{gateway.host}:{gateway.port}"
        via = f"jump host {jump} (ProxyJump {self.host.proxy_jump})"
        try:
            gateway.open()
        except paramiko.BadHostKeyException as exc:
            raise HostKeyError(self.host.name, f"{via}: {changed_key_message(gateway.host, gateway.port, exc)}") from None
        except (paramiko.AuthenticationException, paramiko.SSHException) as exc:
            key_problem = _key_problem(exc, gateway, self.options, None)
            if key_problem:
                raise AuthError(self.host.name, f"{via}: {key_problem}") from None
            if isinstance(exc, paramiko.AuthenticationException) or "authentication" in str(exc).lower():
                raise AuthError(
                    self.host.name,
                    f"{via} refused the login ({exc}). A jump host authenticates with its own key: give it "
                    "in the ssh_config entry of the jump host (Host ... IdentityFile), or with --key.",
                ) from None
            raise UnreachableError(self.host.name, f"{via}: SSH failed: {exc}") from None
        except paramiko.ssh_exception.NoValidConnectionsError as exc:
            reason = "; ".join(sorted({e.strerror or str(e) for e in (exc.errors or {}).values()})) or str(exc)
            raise UnreachableError(self.host.name, f"{via}: {reason}") from None
        except TimeoutError:
            raise UnreachableError(
                self.host.name, f"{via}: no answer within {self.options.connect_timeout:g}s (--connect-timeout)"
            ) from None
        except (OSError, EOFError) as exc:
            raise UnreachableError(self.host.name, f"{via}: {getattr(exc, 'strerror', None) or exc or type(exc).__name__}") from None

    # -- commands --------------------------------------------------------------------------
    def _session(self, transport: paramiko.Transport, command: str, open_timeout: float | None = None) -> paramiko.Channel:
        try:
            chan = transport.open_session(timeout=open_timeout or self.options.connect_timeout)
            chan.settimeout(_TICK)
            chan.exec_command(framing.wrap(command, self._marker))
        except (paramiko.SSHException, EOFError, OSError) as exc:
            raise self._lost(command, str(exc) or type(exc).__name__) from None
        return chan

    def _lost(self, command: str, detail: str = "") -> UnreachableError:
        """The connection died: say why (the watchdog's verdict when it has one) and during what."""
        step = self.doing or f"`{summary(command)}`"
        why = self._watchdog.reason if self._watchdog is not None and self._watchdog.reason else None
        if why:
            return UnreachableError(self.host.name, f"{why} during {step}")
        return UnreachableError(self.host.name, f"connection lost during {step}" + (f": {detail}" if detail else ""))

    def interrupt(self) -> None:
        """From another thread (Ctrl-C): running commands stop their remote group and raise.
        Commands started after it (a step's cleanup) get a second before they are stopped too."""
        if self._interrupted_at is None:
            self._interrupted_at = time.monotonic()

    def _stop_remote(self, pgid: int | None, budget: float = 1.0) -> None:
        """End the command's process group on the host (TERM now, KILL shortly after), bounded:
        on a dead link there is no one to tell, and the host-side group dies with its pipes."""
        if pgid is None or self._fabric is None or not self._fabric.is_connected:
            return
        transport = self._fabric.transport
        if transport is None or not transport.is_active():
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
        """The one way a command runs: framed, in its own process group, every wait bounded.

        `timeout` bounds the whole command, `idle_timeout` the silence on both streams; either
        ends it with 124 after stopping its remote process group, as does Ctrl-C (then re-raised).
        A dead link (the keepalive watchdog closes the transport) raises UnreachableError."""
        start = time.monotonic()
        # the stop command (stoppable=False) must not outlast its own budget opening a channel
        chan = self._session(self._open(), command, None if stoppable else timeout)
        out_frame = framing.Framer(self._marker, with_pgid=True, host=self.host.name, stream="stdout")
        err_frame = framing.Framer(self._marker, with_pgid=False, host=self.host.name, stream="stderr")
        stop = threading.Event()
        last = [start]  # last sign of life on either stream
        feed_error: list[BaseException] = []
        overflow: list[BoundsError] = []  # the stderr reader's: raised in this thread
        err = Tail()

        def feed() -> None:
            try:
                for chunk in _chunks(source):
                    _send_all(chan, chunk, stop)
                    last[0] = time.monotonic()  # the host takes our bytes: alive
            except (OSError, EOFError, paramiko.SSHException) as exc:
                feed_error.append(exc)
            finally:
                try:
                    chan.shutdown_write()
                except (OSError, EOFError):
                    pass

        def drain_stderr() -> None:
            # read to the end: a quiet spell is not the end (a timeout here only re-checks)
            while not stop.is_set():
                try:
                    chunk = chan.recv_stderr(_CHUNK)
                except TimeoutError:
                    continue
                except (OSError, EOFError):
                    return
                if not chunk:
                    return
                last[0] = time.monotonic()
                try:
                    said = err_frame.feed(chunk)
                    err.add(said)
                    if on_stderr is not None and said:
                        on_stderr(said)
                except BoundsError as exc:
                    overflow.append(exc)
                    return

        feeder = threading.Thread(target=feed, daemon=True, name=f"feed-{self.host.name}")
        err_reader = threading.Thread(target=drain_stderr, daemon=True, name=f"stderr-{self.host.name}")
        if _fits_window(source, chan):
            feed()  # never blocks: the host's window takes it all (no thread: ~0.1 ms per command)
        else:
            feeder.start()
        err_reader.start()
        out = Reply(self.host.name)
        why_stopped: str | None = None

        def stop_reason() -> str | None:
            if overflow:
                raise overflow[0]
            return expired(time.monotonic(), start, last[0], timeout, idle_timeout, self._interrupted_at, stoppable)

        try:
            while True:
                try:
                    data = chan.recv(_CHUNK)
                except TimeoutError:
                    why_stopped = stop_reason()
                    if why_stopped:
                        break
                    continue
                if not data:
                    break
                last[0] = time.monotonic()
                data = out_frame.feed(data)
                if data:
                    if on_data is None:
                        out.add(data)
                    else:
                        on_data(data)
                why_stopped = stop_reason()  # also while output flows: a chatty command times out
                if why_stopped:
                    break
            while why_stopped is None and not chan.status_event.wait(_TICK):
                why_stopped = stop_reason()
        except BaseException:  # Ctrl-C in this thread, or a callback failed: end the remote work too
            stop.set()
            chan.close()
            if stoppable:
                self._stop_remote(out_frame.pgid)
            raise
        if why_stopped is None:
            err_reader.join(timeout=_DRAIN)  # stdout ended; stderr's last bytes may still be coming
        stop.set()
        transport = chan.get_transport()
        code = chan.exit_status if why_stopped is None else 124
        chan.close()
        if feeder.ident is not None:
            feeder.join(timeout=_DRAIN)
        err_reader.join(timeout=_DRAIN)
        rest = out_frame.finish()
        if rest:
            if on_data is None:
                out.add(rest)
            else:
                on_data(rest)
        err.add(err_frame.finish())
        if out_frame.preamble or err_frame.preamble:
            log.debug("%s: login shell printed before the command: %r / %r", self.host.name,
                      out_frame.preamble[-400:], err_frame.preamble[-400:])
        if why_stopped is not None:
            if stoppable:
                self._stop_remote(out_frame.pgid)
            if why_stopped == "interrupted":
                raise Cancelled(self.host.name, f"interrupted during {self.doing or '`' + summary(command) + '`'}")
            if transport is None or not transport.is_active():
                raise self._lost(command)
            err.add(f"\nprovision: {why_stopped}; the command was stopped on the host\n".encode())
        elif code == -1:
            if transport is None or not transport.is_active():
                raise self._lost(command)
            # no exit status from a live transport: sshd sent exit-signal (paramiko drops it)
            code = 255
        return Run(code, bytes(out.data), err.value(), time.monotonic() - start)

    def identity(self) -> str | None:
        transport = self._open()
        key = transport.get_remote_server_key()
        fab = self._fabric
        assert fab is not None
        return f"ssh {fab.user}@{fab.host}:{fab.port} {key.get_name()} {key.get_base64()}"

    def close(self) -> None:
        if self._watchdog is not None:
            self._watchdog.stop()
            self._watchdog = None
        if self._fabric is not None:
            self._fabric.close()
            self._fabric = None
