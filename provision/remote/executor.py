"""ExecutorConnection: every command of a run as one request on one channel (--executor).

The first command of a run starts the agent's `serve` command (provision/agent/serve.py, from
the content-hashed core bundle, shipped in the same round trip when the host lacks it) through
the wrapped connection -- once through the login shell, so its environment is the one each
framed command sees today -- and waits for its `ready`. Every command after that (module
commands, file writes and reads, agent calls: `run`, `stream`, `put`, `get` all come down to
`_execute`) is a `run` request on that channel, its stdin sent as `in` chunks, its output
coming back as `out` chunks and one `exit`: no sshd session, login shell or frame per command.

The same rules as the framed transports (connection/commands.py): `timeout`, `idle_timeout`
and Ctrl-C (interrupt()) stop the command's process group on the host (`stop`) and give 124 or
errors.Cancelled; stdout is bounded by bounds.Reply, stderr by bounds.Tail, each event line by
LINE_MAX. Secrets stay where they were: on the command's stdin, now inside this channel.

A dead executor fails only the command that was running (AgentError saying so, or the
transport's own UnreachableError when the link went), and the next command starts a new one;
after a second death, or when the executor cannot start at all, the commands go straight to
the wrapped connection as they do without --executor.

Round trips: sshd opens a session's stdin only once it has run the exec (its window comes with
the exec's reply), so whatever waits on stdin costs one more round trip. When the host has the
bundle, the executor's start therefore carries serve's bundle header, request line and the
first command's `run` in its environment (PROVISION_STDIN_HEAD, read by the bootstrap as if it
came first on stdin, then removed): the first command runs as soon as serve does, its text in
the exec request as a framed command's is without the executor.

Become (as_root): a second executor, started once through sudo when a task first needs root
(the password first on its stdin, as each sudo command gets it without the executor; never
argv or environment), runs the later become tasks' commands as root, one request each. Its
first command goes on stdin (sudo keeps its argv for the executor's life), and only once sudo
took the password (the root shell says ROOT_MARK first): a password sudo rejects ends stdin at
once, so sudo never reads a protocol line as another try (one failed try, as a sudo command's
own). When it cannot
start, each command goes through sudo as a session of its own, as without the executor; a
password sudo rejected is not tried again by every command (the rejection is each one's result).
"""

from __future__ import annotations

import base64
import binascii
import collections
import itertools
import json
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any

from provision.connection.base import Connection, register, unregister
from provision.connection.bounds import LineSplitter, Reply, Tail
from provision.connection.commands import DRAIN, TICK, FramedCommands, Run, expired, summary
from provision.connection.commands import chunks as source_chunks
from provision.errors import AgentError, Cancelled, ProvisionError
from provision.remote import agent_bundle
from provision.remote.agent import Agent, agent_digest, parse_event
from provision.remote.become import Become
from provision.shell import quote

log = logging.getLogger("provision.agent")
READY_S = 120.0  # the executor's start: the login shell, an unpack, the interpreter
_MISSING_AGENT = 97
_RESTARTS = 1
_STOP_WAIT = 3.0  # after `stop`: how long its `exit` may take (TERM, then KILL after 2 s)
HEAD_MAX = 32 << 10  # the largest first request carried in the exec request (argv/env limits)
_HEAD_ENV = "PROVISION_STDIN_HEAD"  # agent/bootstrap.py reads it
ROOT_MARK = b"@@provision-executor-root"  # the root executor's shell: sudo let it in


class _Outbox:
    """What goes to the executor: control messages first (a `stop` never waits behind a
    command's input), input chunks bounded (a large `put` is encoded as the link takes it)."""

    DATA_MAX = 32  # chunks of <= 256 KiB waiting

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._control: collections.deque[bytes | None] = collections.deque()
        self._data: collections.deque[bytes] = collections.deque()
        self.closed = False

    def put(self, item: bytes | None, data: bool = False) -> None:
        with self._cond:
            while data and len(self._data) >= self.DATA_MAX and not self.closed:
                self._cond.wait(TICK)
            (self._data if data else self._control).append(item)  # type: ignore[arg-type]
            self._cond.notify_all()

    def get(self, timeout: float) -> tuple[bool, bytes | None]:
        """(True, item) or (False, None) when nothing came within `timeout`."""
        with self._cond:
            if not (self._control or self._data):
                self._cond.wait(timeout)
            if self._control:
                return True, self._control.popleft()
            if self._data:
                item = self._data.popleft()
                self._cond.notify_all()
                return True, item
            return False, None

    def close(self) -> None:
        with self._cond:
            self.closed = True
            self._cond.notify_all()


class _Channel:
    """One running executor: the stream thread over the wrapped connection, the requests
    going out and the events coming back, per command id."""

    def __init__(self) -> None:
        self.outgoing = _Outbox()
        self.waiting: dict[int, queue.Queue[dict[str, Any]]] = {}
        self.ready = threading.Event()
        self.ended = threading.Event()
        self.error: BaseException | None = None
        self.detail = ""
        self.ready_seen = False  # serve said `ready`: it runs (and reads what was sent)
        self.missing = False  # the agent was not on the host (exit 97 before serve ran)
        self.on_ready: Callable[[], None] = lambda: None
        self.lock = threading.Lock()
        self.head_id: int | None = None  # the command whose `run` went with the start
        self.request_line = True  # serve's request line still to send on stdin
        self.stderr = b""  # what serve's session printed there (sudo's rejection)
        # the root executor with a password: what follows it on stdin waits for sudo's verdict
        self.gate: threading.Event | None = None
        self.after_gate = b""
        self.refused = False

    def send(self, message: dict[str, Any], data: bool = False) -> None:
        self.outgoing.put((json.dumps(message) + "\n").encode(), data)

    def finish(self) -> None:
        """serve's stdin ends after what is queued: it stops what runs and exits."""
        self.outgoing.put(None)

    def source(self) -> Iterator[bytes]:
        if self.gate is not None:
            while not self.gate.wait(TICK):
                if self.ended.is_set():
                    return
            if self.refused:
                return  # stdin ends: sudo gives up after this one try
            yield self.after_gate
        if self.request_line:
            yield b"{}\n"  # serve's own request line
        while True:
            got, item = self.outgoing.get(TICK)
            if not got:
                if self.ended.is_set():
                    return
                continue
            if item is None:
                return
            yield item

    def on_event(self, event: dict[str, Any]) -> None:
        if event.get("event") == "ready":
            self.ready_seen = True
            self.ready.set()
            self.on_ready()
            return
        ident = event.get("id")
        with self.lock:
            box = self.waiting.get(ident) if isinstance(ident, int) else None
        if box is not None:
            box.put(event)

    def end(self, error: BaseException | None, detail: str) -> None:
        self.error, self.detail = error, detail
        self.ended.set()
        self.ready.set()
        self.outgoing.close()


class ExecutorConnection(FramedCommands, Connection):
    def __init__(self, inner: Connection, become: Become | None = None) -> None:
        self.inner = inner
        self.become = become  # root through sudo (as_root): the owner's second executor
        self._root: ExecutorConnection | None = None
        self._root_lock = threading.Lock()
        self._rejected: bytes | None = None  # sudo's rejection of the password: every command's result
        self.host = inner.host
        self.doing: str | None = None
        self._channel: _Channel | None = None
        self._thread: threading.Thread | None = None
        self._deaths = 0
        self._disabled: str | None = None  # why commands go straight to the wrapped connection
        self._ids = itertools.count(1)
        self._interrupted_at: float | None = None
        self.started = 0  # executors started (tests, benchmarks)
        if become is None:  # a root executor hears Ctrl-C through its owner
            register(self)
            unregister(inner)  # Ctrl-C reaches the command through here; the executor stays for cleanup

    @property
    def transport_name(self) -> str:
        return getattr(self.inner, "transport_name", type(self.inner).__name__) + "+executor"

    # -- the executor ------------------------------------------------------------------------
    def _start(self, first: tuple[int, bytes] | None = None) -> _Channel:
        """A new executor, starting. `first`: (id, `run` line) of the command about to be sent:
        when the host has the bundle it goes with the start (module doc), else it may be sent at
        once (it is read after the bundle and serve's own request line)."""
        channel = _Channel()
        agent = Agent(self.inner)
        if self.become is not None:  # its bundle is root's (sudo -H), its memo entry the mode's
            agent.become, agent._become = True, self.become
        kind = "core"
        digest = agent_digest(kind)
        send = digest not in agent._known()  # may connect: its errors are the caller's
        channel.on_ready = lambda: agent._answered(digest)
        self.started += 1
        head = b""
        if first is not None and not send and len(first[1]) <= HEAD_MAX and self.become is None:
            head = b"PROVISION-BUNDLE 0\n{}\n" + first[1]
            channel.head_id, channel.request_line = first[0], False
            channel.waiting[first[0]] = queue.Queue()  # its events may come before _request looks

        def serve() -> None:
            splitter = LineSplitter(self.host.name, lambda raw: self._line(channel, raw))
            try:
                text = agent._command("serve", agent.python, kind, send=send)
                data = agent_bundle.bundle(kind).data if send else b""
                prefix = [] if head else [b"PROVISION-BUNDLE %d\n" % len(data) + data]
                if head:
                    encoded = base64.b64encode(head).decode("ascii")
                    text = f"export {_HEAD_ENV}={quote(encoded)}; {text}"
                heard = None
                if self.become is not None:  # the password alone first, read by sudo
                    password = self.become.stdin_prefix()
                    text = str(self.become.wrap(f"echo {ROOT_MARK.decode()}; {text}"))
                    if password:
                        channel.gate, channel.after_gate, prefix = threading.Event(), prefix[0], [password]
                        heard = lambda data: self._sudo_said(channel, data)  # noqa: E731
                source = itertools.chain(prefix, channel.source())
                self.inner.doing = "the executor"
                run = self.inner._execute(text, source=source, on_data=splitter.feed,  # type: ignore[attr-defined]
                                          on_stderr=heard)  # fmt: skip
                if run.code == _MISSING_AGENT and not send and not channel.ready_seen:
                    agent._lost(digest)  # the memo was wrong: the next start sends the bundle
                    channel.missing = True
                channel.stderr = run.stderr
                lines = run.stderr.decode("utf-8", "replace").strip().splitlines()
                channel.end(None, lines[-1] if lines else f"exit code {run.code}")
            except BaseException as exc:  # the link went, or Ctrl-C: the waiting command says so
                channel.end(exc, str(exc))

        thread = threading.Thread(target=serve, daemon=True, name=f"executor-{self.host.name}")
        thread.start()
        self._channel, self._thread = channel, thread
        return channel

    def _await_ready(self, channel: _Channel) -> bool:
        """Before a command whose stdin cannot be sent twice: whether serve runs."""
        deadline = time.monotonic() + READY_S
        while not channel.ready.wait(TICK):
            if self._interrupted_at is not None:
                raise Cancelled(self.host.name, f"interrupted during {self.doing or 'the executor start'}")
            if time.monotonic() > deadline:
                channel.finish()
                channel.end(None, f"no answer within {READY_S:g}s")
        return channel.ready_seen

    def _not_started(self, channel: _Channel) -> BaseException | None:
        """serve never ran (so neither did the command sent to it): the transport's error to
        raise, or None after disabling the executor (the command then runs as a session)."""
        if isinstance(channel.error, (Cancelled, ProvisionError)) and not isinstance(channel.error, AgentError):
            return channel.error  # unreachable, auth, host key, Ctrl-C: as without the executor
        if self.become is not None and self.become.rejected(channel.stderr.decode("utf-8", "replace")):
            self._rejected = channel.stderr
        self._disabled = f"the executor did not start ({channel.detail})"
        log.info("%s: %s; commands run as separate sessions", self.host.name, self._disabled)
        return None

    def _sudo_said(self, channel: _Channel, data: bytes) -> None:
        """The root executor's stderr while sudo reads the password: a rejection ends stdin."""
        if channel.gate is None or channel.gate.is_set():
            return
        channel.stderr = (channel.stderr + data)[-4096:]
        if self.become is not None and self.become.rejected(channel.stderr.decode("utf-8", "replace")):
            channel.refused = True
            channel.gate.set()

    def _line(self, channel: _Channel, raw: bytes) -> None:
        if raw.strip() == ROOT_MARK and channel.gate is not None:
            channel.gate.set()  # sudo took the password: the bundle header and requests follow
            return
        event = parse_event(raw.decode("utf-8", "replace"))
        if event is None:
            if raw.strip():
                log.debug("%s executor: %r", self.host.name, raw[:400])
            return
        if event.get("event") in ("result", "error"):  # serve itself ended
            if event.get("event") == "error":
                channel.detail = str(event.get("message"))
            return
        channel.on_event(event)

    def _live(self, first: tuple[int, bytes] | None = None) -> _Channel | None:
        if self._disabled is not None:
            return None
        channel = self._channel
        if channel is not None and not channel.ended.is_set():
            return channel
        if channel is not None:  # ended since the last command
            self._channel = None
            if channel.ready_seen:
                self._deaths += 1
                if self._deaths > _RESTARTS:
                    self._disabled = f"the executor ended twice ({channel.detail})"
                    return None
            elif not channel.missing:
                self._not_started(channel)
                return None
        return self._start(first)

    # -- commands ------------------------------------------------------------------------------
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
        replayable = source is None or isinstance(source, (list, tuple))
        for _ in range(3):  # bounded: an agent the memo wrongly believed there, sent once
            ident = next(self._ids)
            line = (json.dumps({"op": "run", "id": ident, "cmd": command, "stdin": source is not None}) + "\n").encode()
            channel = self._live((ident, line) if replayable else None)
            if channel is not None and not replayable and not self._await_ready(channel):
                if channel.missing:
                    continue
                error = self._not_started(channel)
                if error is not None:
                    raise error
                channel = None
            if channel is None:
                return self._direct(command, source, on_data, timeout, idle_timeout, stoppable)
            run = self._request(channel, ident, line, command, source, on_data, timeout, idle_timeout, stoppable)
            if run is not None:
                return run
        raise AgentError(self.host.name, "the executor could not be started")  # pragma: no cover

    def _direct(self, command: str, source: Iterable[bytes] | IO[bytes] | None,
                on_data: Callable[[bytes], None] | None, timeout: float | None,
                idle_timeout: float | None, stoppable: bool) -> Run:  # fmt: skip
        """The command as a session of its own, as without the executor (under become: sudo)."""
        if self._rejected is not None:
            return Run(1, b"", self._rejected, 0.0)
        if self.become is not None:
            password = self.become.stdin_prefix()
            if password:
                source = itertools.chain([password], source_chunks(source) if source is not None else [])
            command = str(self.become.wrap(command))
        self.inner.doing = self.doing
        return self.inner._execute(  # type: ignore[attr-defined]
            command, source=source, on_data=on_data, timeout=timeout,
            idle_timeout=idle_timeout, stoppable=stoppable,
        )  # fmt: skip

    def as_root(self, become: Become) -> ExecutorConnection | None:
        """The executor that runs commands as root (started by its first command), or None
        when commands go as sessions: then the caller wraps each in sudo itself."""
        if self.become is not None or self._disabled is not None or become.mode == "root":
            return None
        with self._root_lock:
            if self._root is None or self._root.become != become:
                if self._root is not None:
                    self._root.close()
                self._root = ExecutorConnection(self.inner, become)
            self._root.doing = self.doing
            return self._root

    def _request(self, channel: _Channel, ident: int, line: bytes, command: str,
                 source: Iterable[bytes] | IO[bytes] | None, on_data: Callable[[bytes], None] | None,
                 timeout: float | None, idle_timeout: float | None, stoppable: bool) -> Run | None:  # fmt: skip
        """One command on `channel` (`line`: its `run`); None when serve never ran it (start
        again and resend)."""
        start = time.monotonic()
        self.inner.doing = self.doing  # a link lost now is lost during this step
        with channel.lock:
            box = channel.waiting.setdefault(ident, queue.Queue())
        last = [start]
        if channel.head_id != ident:  # else it went with the start
            channel.outgoing.put(line)
        feeder = None
        if source is not None:
            feeder = threading.Thread(target=self._feed, args=(channel, ident, source, last),
                                      daemon=True, name=f"executor-feed-{self.host.name}")  # fmt: skip
            feeder.start()
        out, err = Reply(self.host.name), Tail()
        why: str | None = None
        code: int | None = None
        try:
            while code is None:
                why = expired(time.monotonic(), start, last[0], timeout, idle_timeout,
                              self._interrupted_at, stoppable)  # fmt: skip
                if why is not None:
                    break
                try:
                    event = box.get(timeout=TICK)
                except queue.Empty:
                    if not channel.ready_seen and time.monotonic() - start > READY_S:
                        channel.finish()  # serve never came up: the command runs as a session
                        channel.end(None, f"no answer within {READY_S:g}s")
                    if channel.ended.is_set() and box.empty():
                        if not channel.ready_seen:  # the command never reached serve
                            if channel.missing:
                                return None
                            error = self._not_started(channel)
                            if error is not None:
                                raise error from None
                            return self._direct(command, source, on_data, timeout, idle_timeout, stoppable)
                        raise self._died(channel, command) from None
                    continue
                last[0] = time.monotonic()
                code = self._take(event, out, err, on_data)
            if why is not None:
                channel.send({"op": "stop", "id": ident})
                if why != "interrupted":  # Ctrl-C does not wait: the host ends the group alone
                    self._await_exit(box, channel)
                if why == "interrupted":
                    raise Cancelled(self.host.name,
                                    f"interrupted during {self.doing or '`' + summary(command) + '`'}")  # fmt: skip
                err.add(f"\nprovision: {why}; the command was stopped on the host\n".encode())
                code = 124
        except BaseException:
            if code is None and why is None and not channel.ended.is_set():
                channel.send({"op": "stop", "id": ident})  # a callback failed, or Ctrl-C here
            raise
        finally:
            with channel.lock:
                channel.waiting.pop(ident, None)
            if feeder is not None:
                feeder.join(timeout=DRAIN)
        return Run(code, bytes(out.data), err.value(), time.monotonic() - start)

    def _take(self, event: dict[str, Any], out: Reply, err: Tail,
              on_data: Callable[[bytes], None] | None) -> int | None:  # fmt: skip
        """One event of a command: its output added, or its exit code."""
        if event.get("event") == "exit":
            code = event.get("code")
            return code if isinstance(code, int) and not isinstance(code, bool) else 255
        if event.get("event") != "out":
            return None
        try:
            data = base64.b64decode(str(event.get("data", "")), validate=True)
        except (binascii.Error, ValueError):
            data = b""
        if event.get("fd") == 2:
            err.add(data)
        elif on_data is None:
            out.add(data)
        else:
            on_data(data)
        return None

    @staticmethod
    def _await_exit(box: queue.Queue[dict[str, Any]], channel: _Channel) -> None:
        deadline = time.monotonic() + _STOP_WAIT
        while time.monotonic() < deadline and not channel.ended.is_set():
            try:
                if box.get(timeout=TICK).get("event") == "exit":
                    return
            except queue.Empty:
                continue

    @staticmethod
    def _feed(channel: _Channel, ident: int, source: Iterable[bytes] | IO[bytes], last: list[float]) -> None:
        try:
            for chunk in source_chunks(source):
                for at in range(0, len(chunk), 1 << 18):
                    if ident not in channel.waiting or channel.ended.is_set():
                        return  # stopped, or gone: the rest is nobody's
                    piece = base64.b64encode(chunk[at : at + (1 << 18)]).decode("ascii")
                    channel.send({"op": "in", "id": ident, "data": piece}, data=True)
                last[0] = time.monotonic()
        finally:  # in the data lane: after the last chunk
            channel.send({"op": "eof", "id": ident}, data=True)

    def _died(self, channel: _Channel, command: str) -> BaseException:
        if isinstance(channel.error, (Cancelled, ProvisionError)) and not isinstance(channel.error, AgentError):
            return channel.error  # the link went (unreachable) or Ctrl-C: what the transport said
        step = self.doing or f"`{summary(command)}`"
        return AgentError(self.host.name, f"the executor ended during {step} ({channel.detail or 'no reason given'}); "
                          "the next task starts a new one")  # fmt: skip

    # -- the rest of the contract -----------------------------------------------------------
    def interrupt(self) -> None:
        if self._interrupted_at is None:
            self._interrupted_at = time.monotonic()
        if self._root is not None:
            self._root.interrupt()

    @property
    def options(self) -> Any:  # become.py reads the wrapped connection's options
        return getattr(self.inner, "options", None)

    def identity(self) -> str | None:
        return self.inner.identity()

    def close(self) -> None:
        root, self._root = self._root, None
        if root is not None:
            root.close()
        channel, self._channel = self._channel, None
        if channel is not None and not channel.ended.is_set():
            channel.finish()  # stdin ends: serve stops what runs and exits
            if self._thread is not None:
                self._thread.join(timeout=DRAIN)
        if self.become is None:  # a root executor shares its owner's connection
            self.inner.close()
