"""Wire protocol between controller and agent.

Request: `python3 agent.pyz COMMAND`, then on stdin ONE line of JSON (the request), then any
payload bytes (e.g. a tar stream for staging). Requests travel on stdin, never argv, so nothing
in them shows up in the host's process list.

Reply: JSON lines on stdout. `{"event": "progress", ...}` and `{"event": "log", ...}` any number
of times, then exactly one `{"event": "result", "data": {...}}` or
`{"event": "error", "kind": ..., "message": ...}`.
"""

import importlib
import json
import sys
import traceback

PROTOCOL_VERSION = 1

# command -> "module:function"; imported lazily so `facts` never pays for torch or lmdb.
COMMANDS = {
    "ping": "provision.agent.protocol:ping",
    "facts": "provision.agent.facts:gather",
    "health": "provision.agent.health:check",
    "stage": "provision.agent.datasets.ingest:stage",
    "dataset_status": "provision.agent.datasets.ingest:status",
    "verify_dataset": "provision.agent.datasets.ingest:verify",
    "verify_torch": "provision.agent.torch_verify:verify",
    "bench": "provision.agent.bench.run:run",
}


class AgentContext(object):
    """What a command gets besides its request: a way to emit events and the payload stream."""

    def __init__(self, stdin, stdout):
        self.stdin = stdin
        self._stdout = stdout

    def emit(self, event, **fields):
        fields["event"] = event
        self._stdout.write(json.dumps(fields, default=str) + "\n")
        self._stdout.flush()

    def progress(self, **fields):
        self.emit("progress", **fields)

    def log(self, message, level="info"):
        self.emit("log", message=message, level=level)


def ping(request, ctx):
    import platform

    return {"protocol": PROTOCOL_VERSION, "python": platform.python_version(), "executable": sys.executable}


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    stdout = sys.stdout
    # Commands must not print to stdout directly: it carries the protocol.
    sys.stdout = sys.stderr
    ctx = AgentContext(sys.stdin.buffer, stdout)
    if not argv or argv[0] not in COMMANDS:
        ctx.emit("error", kind="usage", message="unknown agent command %r; known: %s" % (argv[:1], ", ".join(sorted(COMMANDS))))
        return 2
    line = ctx.stdin.readline()
    try:
        request = json.loads(line.decode("utf-8")) if line.strip() else {}
    except ValueError as exc:
        ctx.emit("error", kind="protocol", message="bad request line: %s" % exc)
        return 2
    module_name, func_name = COMMANDS[argv[0]].split(":")
    try:
        func = getattr(importlib.import_module(module_name), func_name)
        data = func(request, ctx)
    except KeyboardInterrupt:
        ctx.emit("error", kind="interrupted", message="interrupted")
        return 130
    except Exception as exc:  # one clear message to the controller; the traceback for -v
        kind = getattr(exc, "kind", type(exc).__name__)
        ctx.emit("error", kind=kind, message=str(exc) or type(exc).__name__, traceback=traceback.format_exc())
        return 1
    ctx.emit("result", data=data)
    return 0
