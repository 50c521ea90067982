"""Ship the agent and call it: one ssh command per call, a first contact included.

Every call runs provision/agent/bootstrap.py (`python3 -c`) with the agent's folder on the
host, ~/.cache/provision/agent-DIGEST/, as its argument and, on stdin, a bundle
(provision/remote/agent_bundle.py) ahead of the request: the bootstrap unpacks it when the
folder is missing or incomplete and skips it otherwise, then runs the command from the folder.
So a first contact is one round trip -- no probe, no separate upload -- and the bytes go only
where they may be needed: on a connection's first call, unless the controller's memo (keyed by
login, address and host key; provision/remote/agent_memo.py) says the host has that agent. A
host that lost it answers 97 and the call is repeated with the bundle.

The light commands (facts, health, ping) use the core bundle (what they import, ~1/5 of the
agent); they and the dataset commands start the interpreter with -S: no `site`, whose .pth
processing may import whole packages on every start-up (here one imports certifi: ~50 ms);
provision/agent/protocol.py puts the site-packages folders on sys.path itself. bench,
verify_torch and the rest keep `site` (torch may depend on .pth files). Bundles carry the controller's bytecode, which a host with the same Python version
loads instead of compiling; from a folder the host's Python caches bytecode for the rest.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from provision.connection.base import Connection
from provision.errors import AgentError
from provision.remote import agent_bundle, agent_memo, replies
from provision.remote.become import Become, wanted_by_host
from provision.shell import Raw, sh
from provision.shell import path as shell_path

log = logging.getLogger("provision.agent")
_MISSING_AGENT = 97
_MISSING_PYTHON = 98
CORE_COMMANDS = frozenset({"facts", "health", "ping", "serve"})  # served by the core bundle
# Started with -S: no `site` .pth processing at start-up (the agent puts the site-packages
# folders on sys.path itself). The dataset commands need only py-lmdb, which they find there
# (or, where only a .pth import line makes it importable, after running site then).
NO_SITE_COMMANDS = CORE_COMMANDS | {"stage", "dataset_status", "verify_dataset", "stage_codecs"}
_BOOTSTRAP = (Path(__file__).resolve().parent.parent / "agent" / "bootstrap.py").read_text()
# What `python3 -c` compiles on every call: the bootstrap from the agent folder (bytecode), or
# its text from argv where the folder is missing or broken. The text travels only with a bundle:
# without one (the agent is believed there) a missing bootstrap is a missing agent, exit 97.
_STUB = (
    "import sys\n"
    "sys.path[0] = sys.argv[1]\n"
    "try:\n"
    "    from provision_boot import run\n"
    "except Exception:\n"
    "    if not sys.argv[4:]:\n"
    "        sys.exit(97)\n"
    "    exec(sys.argv[4])\n"
    "sys.exit(run(sys.argv[1:4]))\n"
)
EventCallback = Callable[[dict[str, Any]], None]
# A request not known when the call starts (a stage's manifest, still being listed): called with
# a wait in seconds, it returns the request, or None when it is not ready yet. The session and
# the agent start at once; a blank line goes to the agent (which skips them before its request)
# after each unanswered wait, so neither side's idle timer takes the listing for a dead link.
LateRequest = Callable[[float], "dict[str, Any] | None"]
KEEPALIVE_S = 1.0
# A deadline on every agent call (seconds), overridable per call with `timeout=`. `stage` streams
# a dataset of any size: it is bounded by silence instead (the agent speaks every second), and so
# is every call by IDLE_TIMEOUT_S; a dead link is caught sooner by the SSH keepalive watchdog.
DEADLINES: dict[str, float | None] = {
    "ping": 60,
    "facts": 180,
    "health": 300,
    "dataset_status": 180,
    "verify_dataset": 6 * 3600,
    "verify_torch": 900,
    "bench": 2 * 3600,
    "stage": None,
}
# A passed verify_torch of an environment unchanged since is trusted this long (seconds) where
# nothing was just installed: `up`'s compatibility check and install share one import of torch.
VERIFY_MEMO_S = 600
DEFAULT_DEADLINE_S = 3600.0  # commands added later without an entry
IDLE_TIMEOUT_S = 900.0
UPLOAD_TIMEOUT_S = 300.0


def agent_digest(kind: str = "full") -> str:
    """The content hash naming a bundle's folder on the host. Cheap: a warm run never builds one."""
    return agent_bundle.digest(kind)


def bootstrap_args(folder: str, command: str, keep: str = "", *, with_text: bool = True) -> list[str]:
    """The interpreter's arguments for one agent call (after any -S): what the host runs."""
    return ["-c", _STUB, folder, command, keep, *([_BOOTSTRAP] if with_text else [])]


def bundle_kind(command: str) -> str:
    return "core" if command in CORE_COMMANDS else "full"


class Agent:
    """The agent on one host, over that host's one connection."""

    def __init__(self, connection: Connection, python: str | None = None) -> None:
        self.connection = connection
        host = connection.host
        default = sys.executable if host.local else "python3"
        self.python = python or host.python or default
        self.uploads = 0  # bundles the host unpacked for this handle (it reports each one)
        self.bundles_sent = 0  # bundles sent (a warm host skips them)
        # a play's/task's `become` (the runner sets it per task); --become / ansible_become also apply
        self.become: bool | None = None
        self._become: Become | None = None
        self._present: set[str] = set()  # digests that answered on this connection
        self._memo: tuple[str | None, set[str]] | None = None  # (identity, digests), read once

    def becoming(self) -> Become | None:
        """How agent commands run as root here (probed once), or None when become is not asked for."""
        if not (self.become or wanted_by_host(self.connection)):
            return None
        if self._become is None:
            self._become = Become.probe(self.connection)
        return self._become

    @property
    def remote_path(self) -> str:
        """The full agent's folder on the host (the light commands run from the core one)."""
        return self.remote_path_for("full")

    def remote_path_for(self, kind: str) -> str:
        return f"~/.cache/provision/agent-{agent_digest(kind)}"

    def _kind(self, command: str) -> str:
        """The full agent also serves the light commands where it is known to be there."""
        kind = bundle_kind(command)
        return "full" if kind == "core" and agent_digest("full") in self._present else kind

    def _command(self, command: str, python: str, kind: str | None = None, *, send: bool = True) -> str:
        kind = kind or self._kind(command)
        other = "full" if kind == "core" else "core"
        return sh(
            "command -v {py} >/dev/null 2>&1 || exit {no_python}; "
            "exec {py} {flags} -c {stub} {folder} {command} {keep} {boot}",
            py=python,
            no_python=str(_MISSING_PYTHON),
            flags=["-S"] if command in NO_SITE_COMMANDS else [],
            stub=_STUB,
            boot=[_BOOTSTRAP] if send else [],
            folder=Raw('"$HOME"/.cache/provision/' + f"agent-{agent_digest(kind)}"),
            command=command,
            keep=f"agent-{agent_digest(other)}",  # the other bundle of this version: never pruned
        )

    def _mode(self) -> str:
        become = self.becoming()
        return become.mode if become else "login"

    def _known(self) -> set[str]:
        """Digests the controller believes the host has: answered here, or in the memo."""
        if self._memo is None:
            identity = self.connection.identity()
            self._memo = (identity, agent_memo.known(identity, self._mode()))
        return self._present | self._memo[1]

    def _answered(self, digest: str) -> None:
        if digest in self._present:
            return
        self._present.add(digest)
        if self._memo is not None and digest not in self._memo[1]:
            agent_memo.remember(self._memo[0], self._mode(), digest)
            self._memo[1].add(digest)

    def _lost(self, digest: str) -> None:
        self._present.discard(digest)
        if self._memo is not None and digest in self._memo[1]:
            self._memo[1].discard(digest)
            agent_memo.forget(self._memo[0], self._mode(), digest)

    def put(self, data: bytes, remote_path: str, mode: int = 0o644) -> None:
        """Write a file where the agent will read it: under become, as root (so `~` is root's
        home), else as the login user (Connection.put). Atomic: temp name, then rename."""
        become = self.becoming()
        if become is None or become.mode == "root":
            self.connection.put(data, remote_path, mode)
            return
        target = shell_path(remote_path)
        command = sh(
            'mkdir -p "$(dirname {t})" && p=$(mktemp {t}.tmp-XXXXXX) && '
            '{ cat > "$p" && chmod {mode} "$p" && mv -f "$p" {t} || { rc=$?; rm -f "$p"; exit $rc; }; }',
            t=target, mode=f"{mode:o}",
        )  # fmt: skip
        result = self.connection.run(become.wrap(command), stdin=become.stdin_prefix() + data, timeout=UPLOAD_TIMEOUT_S)
        become.check_rejected(self.connection.host.name, result.stderr)
        if not result.ok:
            raise AgentError(self.connection.host.name, f"writing {remote_path} as root failed: {result.stderr.strip()}")

    def upload(self, python: str | None = None, kind: str = "full") -> None:
        """Put a bundle on the host now (a call does this itself, in the same round trip)."""
        result, _ = self._run("-", b"", None, python or self.python, kind, send=True,
                              handle=lambda line: None, timeout=UPLOAD_TIMEOUT_S, idle=UPLOAD_TIMEOUT_S)
        if not result.ok:
            detail = (result.stderr.strip().splitlines() or [f"exit code {result.exit_code}"])[-1]
            raise AgentError(self.connection.host.name,
                             f"could not unpack the agent into {self.remote_path_for(kind)}: {detail}")
        self._answered(agent_digest(kind))

    def _run(self, command: str, request_line: bytes | LateRequest, payload: Iterable[bytes] | IO[bytes] | None,
             python: str, kind: str, *, send: bool, handle: Callable[[str], None],
             timeout: float | None, idle: float) -> tuple[Any, bool]:
        """One ssh command: the bootstrap, the bundle (when `send`) and the request on stdin.
        Returns (the CommandResult, whether the host unpacked the bundle)."""
        unpacked = [False]
        data = agent_bundle.bundle(kind).data if send else b""
        head = b"PROVISION-BUNDLE %d\n" % len(data)

        def on_line(line: str) -> None:
            if line == '{"event": "unpacked"}':
                unpacked[0] = True
            else:
                handle(line)

        text: str = self._command(command, python, kind, send=send)
        first = [head, data]
        become = self.becoming()
        if become:  # the sudo password (when one is needed) goes first on stdin
            text, first = str(become.wrap(text)), [become.stdin_prefix(), *first]
        if send:
            self.bundles_sent += 1
            log.info("%s: uploading agent %s bundle %s (%d bytes)", self.connection.host.name, kind,
                     agent_digest(kind), len(data))
        result = self.connection.stream(
            text, source=_prepend(b"".join(first), request_line, payload), on_stdout_line=on_line,
            timeout=timeout, idle_timeout=idle,
        )
        if become:
            become.check_rejected(self.connection.host.name, result.stderr)
        if unpacked[0]:
            self.uploads += 1
        return result, unpacked[0]

    def call(
        self,
        command: str,
        request: dict[str, Any] | LateRequest | None = None,
        *,
        payload: Iterable[bytes] | IO[bytes] | None = None,
        on_event: EventCallback | None = None,
        python: str | None = None,
        timeout: float | None = None,
        idle_timeout: float | None = None,
    ) -> dict[str, Any]:
        """Run one agent command; returns its result data or raises AgentError with its message.
        `request` may be a LateRequest (above).

        `timeout`: deadline for the whole call (default DEADLINES[command]); `idle_timeout`: the
        longest silence (default IDLE_TIMEOUT_S). Past either, the agent's process group on the
        host is ended and AgentError says so."""
        conn = self.connection
        if conn.doing is None:
            conn.doing = f"agent {command}"
            try:
                return self.call(command, request, payload=payload, on_event=on_event, python=python,
                                 timeout=timeout, idle_timeout=idle_timeout)
            finally:
                conn.doing = None
        host = conn.host.name
        py = python or self.python
        deadline = timeout if timeout is not None else DEADLINES.get(command, DEFAULT_DEADLINE_S)
        idle = idle_timeout if idle_timeout is not None else IDLE_TIMEOUT_S
        kind = self._kind(command)
        send = agent_digest(kind) not in self._known()
        for attempt in range(3):  # bounded: a missing agent, then a module the core lacks
            outcome: dict[str, Any] = {}

            def handle(line: str, outcome: dict[str, Any] = outcome) -> None:
                if not line.startswith("{"):
                    log.debug("%s agent: %s", host, line)
                    return
                event = parse_event(line)
                if event is None:
                    log.debug("%s agent: %s", host, line[:400])
                    return
                kind = event.get("event")
                if kind in ("result", "error"):
                    outcome.update(event)
                elif on_event is not None:
                    try:  # the boundary (remote/replies.py): before the caller reads it
                        replies.check_event(command, event)
                    except replies.ShapeError as exc:
                        raise _misfit(host, command, "an event", exc) from None
                    on_event(event)
                elif kind == "log":
                    log.info("%s: %s", host, event.get("message"))

            request_line = request if callable(request) else (json.dumps(request or {}) + "\n").encode()
            result, _ = self._run(command, request_line, payload, py, kind, send=send, handle=handle,
                                  timeout=deadline, idle=idle)
            if result.exit_code == _MISSING_AGENT and not send:
                self._lost(agent_digest(kind))  # the memo was wrong, or the agent was removed
                send = True
                continue
            if outcome.get("event") in ("result", "error"):
                self._answered(agent_digest(kind))
            if (outcome.get("event") == "error" and kind == "core" and outcome.get("kind") in ("ModuleNotFoundError", "ImportError")
                    and "provision.agent" in str(outcome.get("message")) and attempt < 2):
                log.warning("%s: the core agent lacks a module (%s); using the full agent", host, outcome.get("message"))
                kind = "full"
                send = agent_digest(kind) not in self._known()
                continue
            if result.exit_code == _MISSING_PYTHON:
                raise AgentError(
                    host,
                    f"no Python interpreter {py!r} on the host. Install python3 (apt-get install -y python3) "
                    "or point ansible_python_interpreter at one.",
                )
            if outcome.get("event") == "result":
                data = outcome.get("data") or {}
                if not isinstance(data, dict):
                    raise AgentError(host, f"agent {command}: its result is {type(data).__name__}, not an object "
                                     "(the host's agent is not provision's, or was changed)")
                try:  # the boundary (remote/replies.py): nothing downstream sees a reply that misfits
                    replies.check_reply(command, data)
                except replies.ShapeError as exc:
                    raise _misfit(host, command, "its result", exc) from None
                return data
            if outcome.get("event") == "error":
                if outcome.get("traceback"):
                    log.debug("%s agent traceback:\n%s", host, outcome["traceback"])
                err = AgentError(host, f"{command}: {outcome.get('message')}")
                err.kind = outcome.get("kind")  # type: ignore[attr-defined]
                raise err
            detail = (result.stderr.strip().splitlines() or [f"exit code {result.exit_code}"])[-1]
            if result.exit_code == 124:
                raise AgentError(host, f"agent {command}: {detail.removeprefix('provision: ')}")
            if result.exit_code >= 128 and result.exit_code != 255:
                detail = f"killed by signal {result.exit_code - 128}" + (f"; {detail}" if result.stderr.strip() else "")
            raise AgentError(host, f"agent {command} gave no result ({detail})")
        raise AgentError(host, f"agent {command}: the agent was not in place after sending it")  # pragma: no cover


def _misfit(host: str, command: str, what: str, exc: Exception) -> AgentError:
    """The failure of one host whose reply does not fit its command's declared shape."""
    return AgentError(host, f"agent {command}: {what} does not fit: {exc} (the host's agent is not "
                      "provision's, or was changed)")


def parse_event(line: str) -> dict[str, Any] | None:
    """One agent event from a line of its stdout, or None for anything else (a host's stray
    output, a truncated line, JSON nested past the parser's depth, a value that isn't an object)."""
    if not line.startswith("{"):
        return None
    try:
        event = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return event if isinstance(event, dict) else None


def _prepend(
    first: bytes, request: bytes | LateRequest, rest: Iterable[bytes] | IO[bytes] | None
) -> Iterator[bytes]:
    yield first
    if callable(request):
        body = request(KEEPALIVE_S)
        while body is None:
            yield b"\n"
            body = request(KEEPALIVE_S)
        request = (json.dumps(body) + "\n").encode()
    yield request
    if rest is None:
        return
    if hasattr(rest, "read"):
        while chunk := rest.read(1 << 20):  # type: ignore[union-attr]
            yield chunk
    else:
        yield from rest  # type: ignore[misc]
