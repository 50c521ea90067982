"""The persistent executor: one agent process per host and run that runs every later command.

Started once per run through the login shell (provision/remote/executor.py), so its
environment is what the login shell set up (~/.bashrc, conda, /etc/profile.d) -- what every
framed command sees today -- and each command is then one request line and a few reply lines on
this one channel instead of an sshd session, a login shell and a frame.

Requests (stdin, after the agent's own request line), one JSON object per line:
  {"op": "run", "id": N, "cmd": TEXT, "stdin": true|false}   start `/bin/sh -c TEXT`
  {"op": "in", "id": N, "data": BASE64}                        bytes for its stdin
  {"op": "eof", "id": N}                                       its stdin ends
  {"op": "stop", "id": N}                                      TERM its group, KILL after 2 s
Events (stdout): {"event": "ready"} once; per command {"event": "out", "id": N, "fd": 1|2,
"data": BASE64} chunks as they come, then {"event": "exit", "id": N, "code": C} once both
streams ended and the process exited (128+N when killed by signal N, as a shell says).

Each command runs in a new session (its own process group, which `stop` ends) with stdin
/dev/null unless the request says it has some. When stdin ends (the controller went away) or
the executor is told to stop (TERM, HUP), every running command's group gets TERM, then KILL.
Python 3.8, stdlib only.
"""

import base64
import os
import signal
import subprocess
import sys
import threading

from provision.agent.protocol import dumps, loads

CHUNK = 1 << 18
GRACE = 2.0  # TERM -> KILL, as the framed commands' stop_group


class Executor(object):
    def __init__(self, out):
        self._out = out
        self._lock = threading.Lock()
        self._running = {}  # id -> (Popen, stdin writer queue or None)
        self._env = dict(os.environ)  # the login shell's, captured once
        self._cwd = os.getcwd()

    def emit(self, event, **fields):
        fields["event"] = event
        line = dumps(fields) + "\n"
        with self._lock:
            self._out.write(line)
            self._out.flush()

    # -- one command ----------------------------------------------------------------------
    def start(self, ident, command, has_stdin):
        try:
            proc = subprocess.Popen(
                ["/bin/sh", "-c", command],
                stdin=subprocess.PIPE if has_stdin else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=self._env,
                cwd=self._cwd,
                start_new_session=True,
                bufsize=0,
            )
        except OSError as exc:
            self.emit("out", id=ident, fd=2, data=_b64(("provision executor: %s\n" % exc).encode()))
            self.emit("exit", id=ident, code=127)
            return
        feed = None
        if has_stdin:
            feed = _Feed(proc.stdin)
        with self._lock:
            self._running[ident] = (proc, feed)
        readers = [
            threading.Thread(target=self._pump, args=(ident, proc.stdout, 1)),
            threading.Thread(target=self._pump, args=(ident, proc.stderr, 2)),
        ]
        for reader in readers:
            reader.daemon = True
            reader.start()
        waiter = threading.Thread(target=self._wait, args=(ident, proc, readers))
        waiter.daemon = True
        waiter.start()

    def _pump(self, ident, pipe, fd):
        try:
            while True:
                data = os.read(pipe.fileno(), CHUNK)
                if not data:
                    break
                self.emit("out", id=ident, fd=fd, data=_b64(data))
        except OSError:
            pass
        finally:
            pipe.close()

    def _wait(self, ident, proc, readers):
        code = proc.wait()
        for reader in readers:
            reader.join()
        with self._lock:
            entry = self._running.pop(ident, None)
        if entry is not None and entry[1] is not None:
            entry[1].close()
        self.emit("exit", id=ident, code=128 - code if code < 0 else code)

    def feed(self, ident, data):
        entry = self._running.get(ident)
        if entry is not None and entry[1] is not None:
            entry[1].put(data)

    def stop(self, ident):
        entry = self._running.get(ident)
        if entry is not None:
            _end_group(entry[0].pid)

    def stop_all(self):
        with self._lock:
            procs = [proc for proc, _ in self._running.values()]
        for proc in procs:
            _signal_group(proc.pid, signal.SIGTERM)
        waited = 0.0
        while waited < GRACE and any(p.poll() is None for p in procs):
            threading.Event().wait(0.05)
            waited += 0.05
        for proc in procs:
            _signal_group(proc.pid, signal.SIGKILL)


class _Feed(object):
    """A command's stdin, written from a thread of its own: a command that does not read must
    not block the request loop (a `stop` for it could never be read)."""

    def __init__(self, pipe):
        self._pipe = pipe
        self._items = []
        self._ready = threading.Condition()
        thread = threading.Thread(target=self._run)
        thread.daemon = True
        thread.start()

    def put(self, data):
        with self._ready:
            self._items.append(data)
            self._ready.notify()

    def close(self):
        self.put(None)

    def _run(self):
        while True:
            with self._ready:
                while not self._items:
                    self._ready.wait()
                data = self._items.pop(0)
            if data is None:
                break
            try:
                self._pipe.write(data)
            except (OSError, ValueError):  # the command ended or closed its stdin
                break
        try:
            self._pipe.close()
        except OSError:
            pass


def _signal_group(pid, sig):
    try:
        os.killpg(pid, sig)
    except OSError:
        pass


def _end_group(pid):
    _signal_group(pid, signal.SIGTERM)
    timer = threading.Timer(GRACE, _signal_group, (pid, signal.SIGKILL))
    timer.daemon = True
    timer.start()


def _b64(data):
    return base64.b64encode(data).decode("ascii")


def serve(request, ctx):
    """The agent command: serve requests until stdin ends; returns what it ran."""
    executor = Executor(ctx._stdout)

    def leave(signum, frame):
        raise SystemExit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, leave)
    served = 0
    try:
        executor.emit("ready", pid=os.getpid())
        for line in iter(ctx.stdin.readline, b""):
            if not line.strip():
                continue
            message = loads(line.decode("utf-8"))
            op, ident = message.get("op"), message.get("id")
            if op == "run":
                served += 1
                executor.start(ident, message["cmd"], bool(message.get("stdin")))
            elif op == "in":
                executor.feed(ident, base64.b64decode(message["data"]))
            elif op == "eof":
                executor.feed(ident, None)
            elif op == "stop":
                executor.stop(ident)
            elif op == "bye":
                break
    finally:
        executor.stop_all()
    sys.stdout.flush()
    return {"served": served}
