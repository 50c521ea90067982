"""Wire protocol between controller and agent.

Request: `python3 AGENT_DIR/__main__.py COMMAND`, then on stdin ONE line of JSON (the request),
then any payload bytes (e.g. the sample stream for staging). Requests travel on stdin, never argv, so
nothing in them shows up in the host's process list.

Reply: JSON lines on stdout. `{"event": "progress", ...}` and `{"event": "log", ...}` any number
of times, then exactly one `{"event": "result", "data": {...}}` or
`{"event": "error", "kind": ..., "message": ...}`.

Start-up cost is paid per host per call, so this module imports nothing beyond sys and os:
JSON goes through the json module's own C scanner and encoder (`_json`) without importing
`json` (which imports re, enum and collections and compiles six regular expressions, ~6 ms of
CPU), traceback only on the error path, and commands lazily. The controller starts the light
commands (facts, health, ping) with `python3 -S` -- site's .pth processing can import whole
packages at start-up -- and `add_site_packages()` puts the site-packages folders on sys.path.
"""

import os
import sys

PROTOCOL_VERSION = 1

# command -> "module:function"; imported lazily so `facts` never pays for torch or lmdb.
COMMANDS = {
    "ping": "provision.agent.protocol:ping",
    "facts": "provision.agent.facts:gather",
    "health": "provision.agent.health:check",
    "stage": "provision.agent.datasets.ingest:stage",
    "dataset_status": "provision.agent.datasets.ingest:status",
    "stage_codecs": "provision.agent.datasets.framing:codecs_command",
    "verify_dataset": "provision.agent.datasets.ingest:verify",
    "verify_torch": "provision.agent.torch_verify:verify",
    "bench": "provision.agent.bench.run:run",
    "train_code_plan": "provision.agent.train.commands:code_plan",
    "train_start": "provision.agent.train.commands:start",
    "train_list": "provision.agent.train.commands:list_",
    "train_status": "provision.agent.train.commands:status",
    "train_follow": "provision.agent.train.commands:follow",
    "train_stop": "provision.agent.train.commands:stop",
    "train_summary": "provision.agent.train.commands:summary",
    "train_idle": "provision.agent.train.commands:idle_watch",
    "net_listen": "provision.agent.net_probe:listen",
    "net_probe": "provision.agent.net_probe:connect",
    "train_torch": "provision.agent.train.commands:torch_of",
    "serve": "provision.agent.serve:serve",
}


# -- JSON --------------------------------------------------------------------------------------
class _ScannerContext(object):
    """What json.JSONDecoder hands _json.make_scanner, with json.loads' defaults."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = {
        "-Infinity": float("-inf"),
        "Infinity": float("inf"),
        "NaN": float("nan"),
    }.__getitem__


_fast = None  # (scanner, make_encoder, encode_basestring_ascii) or False where _json is unusable


def _accelerator():
    global _fast
    if _fast is None:
        try:
            import _json

            _fast = (
                _json.make_scanner(_ScannerContext()),
                _json.make_encoder,
                _json.encode_basestring_ascii,
            )
            _fast[1]({}, str, _fast[2], None, ": ", ", ", False, False, True)  # signature check
        except Exception:  # no C accelerator (PyPy) or a signature this code does not know
            _fast = False
    return _fast


def dumps(value):
    """The text json.dumps(value, default=str) gives (ASCII, ", " and ": " separators)."""
    fast = _accelerator()
    if fast:
        try:
            # markers={} is json's check_circular=True; a new encoder per call, as json makes one
            chunks = fast[1]({}, str, fast[2], None, ": ", ", ", False, False, True)(value, 0)
            return chunks if isinstance(chunks, str) else "".join(chunks)
        except Exception:  # let json raise (or succeed) with its own messages
            pass
    import json

    return json.dumps(value, default=str)


def loads(text):
    """json.loads(text) for a str; errors are json's own (ValueError)."""
    fast = _accelerator()
    if fast:
        whitespace = " \t\n\r"
        start = len(text) - len(text.lstrip(whitespace))
        try:
            value, end = fast[0](text, start)
        except Exception:  # StopIteration or a decode error: let json say what is wrong
            value, end = None, -1
        if end >= 0 and not text[end:].strip(whitespace):
            return value
    import json

    return json.loads(text)


# -- sys.path without site ------------------------------------------------------------------------
def add_site_packages():
    """Put on sys.path what `site` would when the interpreter was started with -S: a
    virtualenv's prefix and its site-packages, the user's site-packages, the installation's
    site-packages (the distribution's own layout, e.g. Debian's dist-packages, from
    site.getsitepackages()), and the folders .pth files there name. What is skipped is the
    `import` lines of .pth files, which is where start-up time goes (on this project's test
    machine one imports certifi on every start), plus sitecustomize/usercustomize."""
    import site  # importing site under -S runs none of its start-up work

    known = set(os.path.normcase(os.path.abspath(p)) for p in sys.path if p)
    prefixes = [sys.prefix, sys.exec_prefix]
    user_site_allowed = site.check_enableusersite()
    venv = _virtualenv()
    if venv is not None:
        prefix, include_system = venv
        sys.prefix = sys.exec_prefix = prefix  # as site.venv() sets them
        _add_site_dir(site.getsitepackages([prefix]), known)
        if include_system:
            prefixes.insert(0, prefix)
        else:
            prefixes = [prefix]
            user_site_allowed = False
    if user_site_allowed:
        _add_site_dir([_user_site()], known)
    _add_site_dir(site.getsitepackages(prefixes), known)


def _virtualenv():
    """(prefix, include-system-site-packages) when sys.executable belongs to a venv (a
    pyvenv.cfg next to it or one folder up), else None; the same rule as site.venv()."""
    exe_dir = os.path.dirname(os.path.abspath(sys.executable))
    prefix = os.path.dirname(exe_dir)
    for conf in (os.path.join(exe_dir, "pyvenv.cfg"), os.path.join(prefix, "pyvenv.cfg")):
        if not os.path.isfile(conf):
            continue
        include_system = True
        with open(conf, encoding="utf-8") as f:
            for line in f:
                key, sep, value = line.partition("=")
                if sep and key.strip().lower() == "include-system-site-packages":
                    include_system = value.strip().lower() == "true"
        return prefix, include_system
    return None


def _user_site():
    base = os.environ.get("PYTHONUSERBASE") or os.path.expanduser("~/.local")
    return os.path.join(base, "lib", "python%d.%d" % sys.version_info[:2], "site-packages")


def _add_site_dir(folders, known):
    for folder in folders:
        if not os.path.isdir(folder):
            continue
        key = os.path.normcase(os.path.abspath(folder))
        if key not in known:
            known.add(key)
            sys.path.append(folder)
        try:
            names = sorted(
                n for n in os.listdir(folder) if n.endswith(".pth") and not n.startswith(".")
            )
        except OSError:
            continue
        for name in names:
            try:
                with open(os.path.join(folder, name), encoding="utf-8", errors="replace") as f:
                    lines = f.read().splitlines()
            except OSError:
                continue
            for line in lines:
                line = line.rstrip()
                if not line or line.startswith("#") or line.startswith(("import ", "import\t")):
                    continue
                path = os.path.abspath(os.path.join(folder, line))
                key = os.path.normcase(path)
                if key not in known and os.path.exists(path):
                    known.add(key)
                    sys.path.append(path)


# -- commands -------------------------------------------------------------------------------------
class AgentContext(object):
    """What a command gets besides its request: a way to emit events and the payload stream."""

    def __init__(self, stdin, stdout):
        self.stdin = stdin
        self._stdout = stdout

    def emit(self, event, **fields):
        fields["event"] = event
        self._stdout.write(dumps(fields) + "\n")
        self._stdout.flush()

    def progress(self, **fields):
        self.emit("progress", **fields)

    def log(self, message, level="info"):
        self.emit("log", message=message, level=level)


def ping(request, ctx):
    return {
        "protocol": PROTOCOL_VERSION,
        "python": sys.version.split()[0],  # platform.python_version(), without platform
        "executable": sys.executable,
    }


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if sys.flags.no_site:
        add_site_packages()
    stdout = sys.stdout
    # Commands must not print to stdout directly: it carries the protocol.
    sys.stdout = sys.stderr
    ctx = AgentContext(sys.stdin.buffer, stdout)
    if not argv or argv[0] not in COMMANDS:
        ctx.emit(
            "error",
            kind="usage",
            message="unknown agent command %r; known: %s" % (argv[:1], ", ".join(sorted(COMMANDS))),
        )
        return 2
    module_name, func_name = COMMANDS[argv[0]].split(":")
    # the command's module first: its request may still be on its way (a stage's manifest is
    # sent once the controller has listed the source, and blank lines keep the link alive
    # until then)
    try:
        __import__(module_name)
        failed_import = None
    except KeyboardInterrupt:
        ctx.emit("error", kind="interrupted", message="interrupted")
        return 130
    except Exception as exc:  # reported below, like any failure of the command
        failed_import = exc
    line = ctx.stdin.readline()
    while line == b"\n":
        line = ctx.stdin.readline()
    try:
        request = loads(line.decode("utf-8")) if line.strip() else {}
    except ValueError as exc:
        ctx.emit("error", kind="protocol", message="bad request line: %s" % exc)
        return 2
    try:
        if failed_import is not None:
            raise failed_import
        data = getattr(sys.modules[module_name], func_name)(request, ctx)
    except KeyboardInterrupt:
        ctx.emit("error", kind="interrupted", message="interrupted")
        return 130
    except Exception as exc:  # one clear message to the controller; the traceback for -v
        import traceback

        kind = getattr(exc, "kind", type(exc).__name__)
        ctx.emit(
            "error",
            kind=kind,
            message=str(exc) or type(exc).__name__,
            traceback=traceback.format_exc(),
        )
        return 1
    ctx.emit("result", data=data)
    return 0
