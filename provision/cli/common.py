"""Options every command shares, target resolution, and the stdout/stderr split.

`--json` prints exactly one JSON document on stdout; everything human goes to stderr.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
from typing import TYPE_CHECKING, Any, NoReturn

from provision import strict_json
from provision.connection.base import ConnectOptions

if TYPE_CHECKING:
    from rich.console import Console

# Exit codes (documented in README):
EXIT_OK = 0
EXIT_HOST_FAILED = 1  # at least one host failed a step
EXIT_USAGE = 2  # usage or configuration error (bad option, malformed inventory/playbook)
EXIT_UNREACHABLE = 4  # at least one host unreachable (and none failed otherwise)
EXIT_INTERRUPTED = 130

_console: Console | None = None
_console_lock = threading.Lock()


def get_console() -> Console:
    """The one stderr console, made on first use: importing rich costs ~50 ms, and `provision
    stage` starts its SSH handshakes before it needs to print anything."""
    global _console
    if _console is None:
        with _console_lock:
            if _console is None:
                from provision.terminal import console as text_console

                # soft_wrap: a long file:line message stays on one line when stderr is no terminal;
                # every string it renders has its control characters shown (provision/terminal.py)
                _console = text_console(stderr=True, highlight=False, soft_wrap=True)
    return _console


def __getattr__(name: str) -> Any:
    """`from provision.cli.common import console` still works (and makes the console then)."""
    if name == "console":
        return get_console()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def add_common_options(parser: argparse.ArgumentParser, own_short: frozenset[str] = frozenset()) -> None:
    """`own_short`: short options the command uses itself (`provision logs -f` follows), left out here."""
    g = parser.add_argument_group("connection and output")
    g.add_argument("-i", "--inventory", action="append", default=[], metavar="FILE",
                   help="inventory file (Ansible INI or YAML), executable script or directory of them; "
                   "repeatable (default: ansible.cfg's inventory)")
    g.add_argument(*(["--forks"] if "-f" in own_short else ["-f", "--forks"]), type=int, default=None, metavar="N",
                   help="hosts in parallel (default: ansible.cfg's forks, else 32)")
    g.add_argument("--user", help="SSH user (overrides inventory and ssh_config)")
    g.add_argument("--port", type=int, help="SSH port")
    g.add_argument("--key", metavar="FILE", help="private key file")
    g.add_argument("--password-env", metavar="VAR",
                   help="name of the env var holding the SSH password (never the password itself)")
    g.add_argument("--passphrase-env", metavar="VAR", help="env var holding the private key's passphrase")
    g.add_argument("-b", "--become", action="store_true",
                   help="run host-side work (facts, staging, installs, health) as root through sudo")
    g.add_argument("--become-password-env", metavar="VAR",
                   help="env var holding the sudo password (sent to sudo on stdin, never argv)")
    g.add_argument("--known-hosts", choices=["strict", "accept-new", "off"], default=None,
                   help="host-key checking (default accept-new; ansible.cfg host_key_checking=False: off)")
    g.add_argument("--connect-timeout", type=float, default=10.0, metavar="S", help="seconds (default 10)")
    g.add_argument("--ssh-config", metavar="FILE", help="ssh_config file (default ~/.ssh/config)")
    g.add_argument("--keepalive", type=float, default=15.0, metavar="S",
                   help="seconds between keepalives that expect a reply (default 15)")
    g.add_argument("--keepalive-count", type=int, default=3, metavar="N",
                   help="unanswered keepalives before a host is unreachable (default 3: ~1 min)")
    g.add_argument("--persist", type=float, default=60.0, metavar="S",
                   help="keep each host's SSH connection S seconds after the run for the next one "
                   "(OpenSSH ControlPersist; default 60; 0: a connection per run, ended with it)")
    g.add_argument("--executor", action="store_true",
                   help="run a playbook's commands through one agent process per host, each one "
                   "request on one channel instead of an SSH session per command (experimental)")
    g.add_argument("--json", action="store_true", help="one JSON document on stdout; logs on stderr")
    g.add_argument("-v", "--verbose", action="count", default=0, help="more detail (-vv: debug)")


def apply_ansible_config(args: argparse.Namespace) -> None:
    """Fill what the command line left open from ansible.cfg / ANSIBLE_* (provision.config)."""
    from provision.config import AnsibleConfig, load_config
    from provision.errors import ConfigError

    config = load_config() if hasattr(args, "inventory") else AnsibleConfig()
    args.ansible_config = config
    if hasattr(args, "inventory") and not args.inventory and config.inventory:
        missing = [p for p in config.inventory if not os.path.exists(p)]
        if missing:
            where = config.file or "ANSIBLE_INVENTORY"
            raise ConfigError(f"{where}: inventory {', '.join(missing)} not found; fix the path or pass -i")
        args.inventory = list(config.inventory)
    if getattr(args, "forks", 0) is None:
        args.forks = config.forks or 32
    if hasattr(args, "known_hosts") and args.known_hosts is None:
        checking = config.host_key_checking
        args.known_hosts = "accept-new" if checking is None else "strict" if checking else "off"


def connect_options(args: argparse.Namespace) -> ConnectOptions:
    if getattr(args, "ansible_config", None) is None:
        apply_ansible_config(args)
    config = args.ansible_config
    if args.forks < 1:
        raise SystemExit(usage_error(f"--forks must be >= 1, got {args.forks}"))
    if args.port is not None and not 0 < args.port < 65536:
        raise SystemExit(usage_error(f"--port must be 1-65535, got {args.port}"))
    if args.connect_timeout <= 0:
        raise SystemExit(usage_error(f"--connect-timeout must be > 0 seconds, got {args.connect_timeout:g}"))
    if getattr(args, "keepalive", 15.0) <= 0 or getattr(args, "keepalive_count", 3) < 1:
        raise SystemExit(usage_error(
            f"--keepalive must be > 0 seconds and --keepalive-count >= 1, got "
            f"{getattr(args, 'keepalive', 15.0):g} and {getattr(args, 'keepalive_count', 3)}"))
    if getattr(args, "persist", 0.0) < 0:
        raise SystemExit(usage_error(f"--persist must be >= 0 seconds, got {args.persist:g}"))
    for option, var in (("--password-env", args.password_env), ("--passphrase-env", args.passphrase_env),
                        ("--become-password-env", getattr(args, "become_password_env", None))):
        if var and var not in os.environ:
            raise SystemExit(usage_error(f"{option}: environment variable {var} is not set (export it first)"))
    return ConnectOptions(
        user=args.user,
        port=args.port,
        key_file=args.key,
        password_env=args.password_env,
        passphrase_env=args.passphrase_env,
        become=getattr(args, "become", False),
        become_password_env=getattr(args, "become_password_env", None),
        known_hosts=args.known_hosts,
        connect_timeout=args.connect_timeout,
        ssh_config=args.ssh_config,
        keepalive=getattr(args, "keepalive", 15.0),
        keepalive_count=getattr(args, "keepalive_count", 3),
        persist=getattr(args, "persist", 0.0),
        executor=getattr(args, "executor", False),
        default_user=config.remote_user,
        default_key_file=config.private_key_file,
    )


class _RichOnFirstRecord(logging.Handler):
    """rich's log handler, built when the first record comes (most runs log nothing)."""

    def __init__(self) -> None:
        super().__init__()
        self._rich: logging.Handler | None = None

    def emit(self, record: logging.LogRecord) -> None:  # called under this handler's lock
        if self._rich is None:
            from rich.logging import RichHandler

            from provision.terminal import visible

            class _TextHandler(RichHandler):  # a log record may quote a host: its text, as text
                def render_message(self, record: logging.LogRecord, message: str) -> Any:
                    return super().render_message(record, visible(message))

            self._rich = _TextHandler(console=get_console(), show_time=False, show_path=False)
            self._rich.setFormatter(self.formatter)
        self._rich.emit(record)


def setup_logging(verbose: int) -> None:
    level = logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    logging.basicConfig(level=level, format="%(message)s", handlers=[_RichOnFirstRecord()])
    logging.getLogger("paramiko").setLevel(logging.WARNING if verbose < 3 else logging.DEBUG)


def usage_error(message: str) -> int:
    from provision.terminal import escape

    get_console().print(f"[bold red]error:[/] {escape(message)}")
    return EXIT_USAGE


def emit_json(document: Any) -> None:
    # the one writer of --json documents: strict JSON (a host's NaN/Infinity as null and why)
    sys.stdout.write(strict_json.dumps(document, indent=2, default=str, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def exit_code_for(outcomes: dict[str, Any]) -> int:
    """From {name: HostOutcome}: failed beats unreachable beats ok."""
    failed = any(not o.ok and not o.unreachable for o in outcomes.values())
    unreachable = any(o.unreachable for o in outcomes.values())
    return EXIT_HOST_FAILED if failed else EXIT_UNREACHABLE if unreachable else EXIT_OK


def report_interrupted(exc: BaseException, as_json: bool = False) -> None:
    """Ctrl-C: say what finished and what was stopped (from parallel.Interrupted's outcomes).
    With --json the one document on stdout says the same."""
    from provision.errors import Cancelled

    outcomes = getattr(exc, "outcomes", None) or {}
    done = {n: o for n, o in outcomes.items() if not isinstance(o.error, Cancelled)}
    stopped = [n for n in outcomes if n not in done]
    if as_json:
        emit_json({
            "interrupted": True,
            "hosts": {
                n: {"finished": n in done, "ok": o.ok, **({"error": o.message} if o.error else {})}
                for n, o in outcomes.items()
            },
        })
    if not outcomes:
        get_console().print("[yellow]interrupted[/]")
        return
    finished = ", ".join(f"{n} ({'ok' if o.ok else 'failed'})" for n, o in done.items()) or "none"
    get_console().print(f"[yellow]interrupted:[/] finished: {finished}; stopped: {', '.join(stopped) or 'none'}"
                  " (stopped steps are left unfinished, never marked complete)")


def exit_without_teardown(code: int) -> NoReturn:
    """End the `provision` process without the interpreter's teardown (freeing every module and
    object: ~35 ms after staging 8,000 files): exit handlers run and output is flushed first.
    Only when no other non-daemon thread is alive; otherwise the normal exit, which waits."""
    import atexit

    others = [t for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon and t.is_alive()]
    if others:
        raise SystemExit(code)
    try:
        sys.stdout.flush()
        atexit._run_exitfuncs()  # the handlers run once: this clears them
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:  # a closed pipe: the normal exit reports it as Python does
        raise SystemExit(code) from None
    os._exit(code)


def leave_now_if_stuck(code: int) -> None:
    """After Ctrl-C, exit even when a worker thread is still stuck (a TCP connect to a dead host
    lasts --connect-timeout; ThreadPoolExecutor joins its threads at exit): output is flushed,
    every host was told to stop, and nothing else is left to do."""
    import threading

    sys.stdout.flush()
    sys.stderr.flush()
    stuck = [t for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon and t.is_alive()]
    if stuck:
        logging.shutdown()
        if "provision.connection.openssh" in sys.modules:  # os._exit skips its atexit hook
            sys.modules["provision.connection.openssh"].end_all_masters()
        os._exit(code)

