"""Ship the agent once per content hash and call it: one round trip per step.

The zipapp is built in memory from provision/agent/ (plus the import-free provision/__init__.py),
so its hash changes exactly when host-side code changes. On the host it is unpacked into
~/.cache/provision/agent-HASH/ and run from there (`python3 DIR/__main__.py COMMAND`): Python
cannot cache bytecode for modules imported from a zip, so a zipapp recompiles every module it
imports on every call -- about half the agent's CPU for `facts`, paid per host per call. From a
folder the host's Python writes __pycache__ on the first call and every later call loads
bytecode (the agent's __main__.py turns bytecode writing back on where PYTHONDONTWRITEBYTECODE
is set). The script is named rather than the folder: running a folder goes through runpy,
whose imports cost ~4 ms of CPU per call.

The light commands (facts, health, ping) start the interpreter with -S: no `site`, whose .pth
processing may import whole packages on every start-up (certifi, distutils hacks, editable
installs' finders); provision/agent/protocol.py puts the site-packages folders on sys.path
itself. The others keep `site`: they import torch and lmdb, which may depend on what .pth files
set up.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import sys
import threading
import zipfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from provision.connection.base import Connection
from provision.errors import AgentError
from provision.remote.become import Become, wanted_by_host
from provision.shell import Raw, sh
from provision.shell import path as shell_path

log = logging.getLogger("provision.agent")
_PACKAGE_DIR = Path(__file__).resolve().parent.parent
_MISSING_AGENT = 97
_MISSING_PYTHON = 98
NO_SITE_COMMANDS = frozenset({"facts", "health", "ping"})
# The zip's __main__.py. Bytecode writing on: the folder is ours and the agent runs again and
# again (Docker images often set PYTHONDONTWRITEBYTECODE=1, which would recompile every call).
_MAIN = (
    b"import sys\n"
    b"sys.dont_write_bytecode = False\n"
    b"from provision.agent.protocol import main\n"
    b"sys.exit(main())\n"
)
EventCallback = Callable[[dict[str, Any]], None]
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
DEFAULT_DEADLINE_S = 3600.0  # commands added later without an entry
IDLE_TIMEOUT_S = 900.0
UPLOAD_TIMEOUT_S = 300.0

# Runs on the host's Python (3.8+), zip bytes on stdin, the target folder as argv[1]. Unpacked
# under a temp name and renamed, so a half-written agent is never run; when a parallel upload
# (another controller) renamed first, its copy is identical and ours is dropped. Agents of other
# versions untouched for 30 days are removed: a controller that still wants one re-uploads it.
_UNPACK = """import io, os, shutil, sys, time, zipfile
final = sys.argv[1]
tmp = "%s.tmp-%d" % (final, os.getpid())
zipfile.ZipFile(io.BytesIO(sys.stdin.buffer.read())).extractall(tmp)
try:
    os.rename(tmp, final)
except OSError:
    shutil.rmtree(tmp, ignore_errors=True)
    if not os.path.isfile(os.path.join(final, "__main__.py")):
        raise
cache = os.path.dirname(final)
for name in os.listdir(cache):
    path = os.path.join(cache, name)
    try:
        if name.startswith("agent-") and path != final and os.lstat(path).st_mtime < time.time() - 30 * 86400:
            shutil.rmtree(path) if os.path.isdir(path) else os.unlink(path)
    except OSError:
        pass
"""

_build_lock = threading.Lock()
_sources: tuple[list[tuple[str, bytes]], str] | None = None
_built: tuple[bytes, str] | None = None


def _agent_sources() -> tuple[list[tuple[str, bytes]], str]:
    """([(path in the zip, bytes)], short content hash), read once per controller process.
    The zip is built from these same bytes, so it always matches the hash it is stored under."""
    global _sources
    if _sources is None:
        files = [_PACKAGE_DIR / "__init__.py", *sorted((_PACKAGE_DIR / "agent").rglob("*.py"))]
        digest = hashlib.sha256(b"__main__.py\0" + _MAIN)
        sources = []
        for path in files:
            arc = "provision/" + path.relative_to(_PACKAGE_DIR).as_posix()
            data = path.read_bytes()
            digest.update(arc.encode() + b"\0" + data)
            sources.append((arc, data))
        _sources = (sources, digest.hexdigest()[:16])
    return _sources


def agent_digest() -> str:
    """The agent's content hash: names its folder on the host. Cheap (no compression), so a run
    where every host already has the agent never builds the zip."""
    with _build_lock:
        return _agent_sources()[1]


def agent_zipapp() -> tuple[bytes, str]:
    """(zip bytes, short content hash), built once per controller process, on first upload."""
    global _built
    with _build_lock:
        if _built is None:
            sources, digest = _agent_sources()
            buf = io.BytesIO()
            with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
                for arc, data in sources:
                    info = zipfile.ZipInfo(arc, date_time=(2020, 1, 1, 0, 0, 0))  # reproducible
                    info.compress_type = zipfile.ZIP_DEFLATED
                    zf.writestr(info, data)
                info = zipfile.ZipInfo("__main__.py", date_time=(2020, 1, 1, 0, 0, 0))
                zf.writestr(info, _MAIN)
            _built = (buf.getvalue(), digest)
        return _built


class Agent:
    """The agent on one host, over that host's one connection."""

    def __init__(self, connection: Connection, python: str | None = None) -> None:
        self.connection = connection
        host = connection.host
        default = sys.executable if host.local else "python3"
        self.python = python or host.python or default
        self.uploads = 0
        # a play's/task's `become` (the runner sets it per task); --become / ansible_become also apply
        self.become: bool | None = None
        self._become: Become | None = None

    def becoming(self) -> Become | None:
        """How agent commands run as root here (probed once), or None when become is not asked for."""
        if not (self.become or wanted_by_host(self.connection)):
            return None
        if self._become is None:
            self._become = Become.probe(self.connection)
        return self._become

    @property
    def remote_path(self) -> str:
        """The agent's folder on the host (its __main__.py is what runs)."""
        return f"~/.cache/provision/agent-{agent_digest()}"

    def _dir_expr(self) -> str:
        return '"$HOME"/.cache/provision/' + f"agent-{agent_digest()}"

    def _command(self, command: str, python: str) -> str:
        return sh(
            "command -v {py} >/dev/null 2>&1 || exit {no_python}; "
            "test -r {main} || exit {no_agent}; "
            "exec {py} {flags} {main} {command}",
            py=python,
            no_python=str(_MISSING_PYTHON),
            no_agent=str(_MISSING_AGENT),
            main=Raw(self._dir_expr() + "/__main__.py"),
            flags=["-S"] if command in NO_SITE_COMMANDS else [],
            command=command,
        )

    def put(self, data: bytes, remote_path: str, mode: int = 0o644) -> None:
        """Write a file where the agent will read it: under become, as root (so `~` is root's
        home), else as the login user (Connection.put). Atomic: temp name, then rename."""
        become = self.becoming()
        if become is None or become.mode == "root":
            self.connection.put(data, remote_path, mode)
            return
        target = shell_path(remote_path)
        command = sh(
            'mkdir -p "$(dirname {t})" && cat > {t}.tmp-$$ && chmod {mode} {t}.tmp-$$ && mv -f {t}.tmp-$$ {t}',
            t=target, mode=f"{mode:o}",
        )  # fmt: skip
        result = self.connection.run(become.wrap(command), stdin=become.stdin_prefix() + data, timeout=UPLOAD_TIMEOUT_S)
        become.check_rejected(self.connection.host.name, result.stderr)
        if not result.ok:
            raise AgentError(self.connection.host.name, f"writing {remote_path} as root failed: {result.stderr.strip()}")

    def upload(self, python: str | None = None) -> None:
        """Send the zipapp on stdin and unpack it on the host in the same round trip."""
        data, digest = agent_zipapp()
        host = self.connection.host.name
        log.info("%s: uploading agent %s (%d bytes)", host, digest, len(data))
        command = sh(
            'mkdir -p "$HOME"/.cache/provision && exec {py} -c {code} {target}',
            py=python or self.python,
            code=_UNPACK,
            target=Raw(self._dir_expr()),
        )
        become = self.becoming()  # as root: into root's cache, where the become calls look
        result = self.connection.run(
            become.wrap(command) if become else command,
            stdin=(become.stdin_prefix() if become else b"") + data,
            timeout=UPLOAD_TIMEOUT_S,
        )
        if become:
            become.check_rejected(host, result.stderr)
        if not result.ok:
            detail = (result.stderr.strip().splitlines() or [f"exit code {result.exit_code}"])[-1]
            raise AgentError(host, f"could not unpack the agent into {self.remote_path}: {detail}")
        self.uploads += 1

    def call(
        self,
        command: str,
        request: dict[str, Any] | None = None,
        *,
        payload: Iterable[bytes] | IO[bytes] | None = None,
        on_event: EventCallback | None = None,
        python: str | None = None,
        timeout: float | None = None,
        idle_timeout: float | None = None,
    ) -> dict[str, Any]:
        """Run one agent command; returns its result data or raises AgentError with its message.

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
        for attempt in range(2):
            outcome: dict[str, Any] = {}

            def handle(line: str, outcome: dict[str, Any] = outcome) -> None:
                if not line.startswith("{"):
                    log.debug("%s agent: %s", host, line)
                    return
                try:
                    event = json.loads(line)
                except ValueError:
                    log.debug("%s agent: %s", host, line)
                    return
                kind = event.get("event")
                if kind in ("result", "error"):
                    outcome.update(event)
                elif on_event is not None:
                    on_event(event)
                elif kind == "log":
                    log.info("%s: %s", host, event.get("message"))

            request_line = (json.dumps(request or {}) + "\n").encode()
            become = self.becoming()
            text = self._command(command, py)
            if become:  # the sudo password (when one is needed) goes first on stdin
                text, request_line = become.wrap(text), become.stdin_prefix() + request_line
            result = self.connection.stream(
                text,
                source=_prepend(request_line, payload),
                on_stdout_line=handle,
                timeout=deadline,
                idle_timeout=idle,
            )
            if become:
                become.check_rejected(host, result.stderr)
            if result.exit_code == _MISSING_AGENT and attempt == 0:
                self.upload(py)
                continue
            if result.exit_code == _MISSING_PYTHON:
                raise AgentError(
                    host,
                    f"no Python interpreter {py!r} on the host. Install python3 (apt-get install -y python3) "
                    "or point ansible_python_interpreter at one.",
                )
            if outcome.get("event") == "result":
                return outcome.get("data") or {}
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
        raise AgentError(host, "agent upload did not take")  # pragma: no cover


def _prepend(first: bytes, rest: Iterable[bytes] | IO[bytes] | None) -> Iterator[bytes]:
    yield first
    if rest is None:
        return
    if hasattr(rest, "read"):
        while chunk := rest.read(1 << 20):  # type: ignore[union-attr]
            yield chunk
    else:
        yield from rest  # type: ignore[misc]
