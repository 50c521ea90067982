"""pip command lines for the host, and the few lines of pip's output worth showing on failure.

Every value is shell-quoted. Credentials never reach argv (visible in `ps` to every user of the
host): an index URL or proxy that carries a user:token travels as `KEY=VALUE` lines on the
command's stdin and becomes PIP_INDEX_URL / PIP_EXTRA_INDEX_URL / https_proxy in the shell that
execs pip — the environment of a process is readable only by its owner and root.

pip runs with the host's pip configuration switched off (PIP_CONFIG_FILE=/dev/null, other PIP_*
variables unset): a pip.conf `find-links` or `extra-index-url` on a rented host (AutoDL ships one)
would otherwise add sources the plan never chose, which is how the wrong CUDA build sneaks in.
PIP_CERT / PIP_CLIENT_CERT are kept (TLS setup, not sources) and proxies stay as the host has
them unless --proxy / --network-turbo say otherwise.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from provision.install.mirrors import IndexConfig, has_credentials, mask_url, scrub, secrets_of
from provision.shell import argv, sh

KEEP_PIP_VARS = ("PIP_CERT", "PIP_CLIENT_CERT")
_NO_PIP_CONFIG = (
    "for v in $(env | sed -n 's/^\\(PIP_[A-Za-z0-9_]*\\)=.*/\\1/p'); do "
    'case "$v" in ' + "|".join(KEEP_PIP_VARS) + ') ;; *) unset "$v" ;; esac; done; '
    "export PIP_CONFIG_FILE=/dev/null; "
)
# KEY=VALUE lines on stdin, up to an empty line, become environment variables (values are data:
# `export "$kv"` never evaluates them).
_READ_ENV = 'while IFS= read -r kv && [ -n "$kv" ]; do export "$kv"; done; '
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass
class PipCommand:
    """A pip run on the host: argv (no secrets) plus the secret-bearing env sent over stdin."""

    argv: list[str]
    env: dict[str, str]
    display: str  # what logs and reports show (masked)
    secrets: list[str] = field(default_factory=list)
    network_turbo: bool = False

    @property
    def stdin(self) -> bytes:
        return _env_block(self.env)

    def script(self, pid_file: str | None = None) -> str:
        """Run pip in the foreground (its output is the command's output)."""
        return _prelude(self.network_turbo, pid_file) + sh("exec {argv}", argv=self.argv)

    def detached_script(self, log: str, exit_file: str, pid_file: str) -> str:
        """Start pip under a small supervisor that outlives the SSH channel and prints its pid:
        the controller polls the log and exit file, so a Ctrl-C or a dropped connection can
        always be followed by stopping pip (TERM to the supervisor) and removing its files."""
        python = self.argv[0]
        sup = argv([python, "-c", _SUPERVISOR, log, exit_file, pid_file, *self.argv])
        return (
            _prelude(self.network_turbo, None) + sh("nohup {sup} >/dev/null 2>&1 </dev/null & echo $!", sup=sup)
        )


# Host side (Python 3.8+): run pip, pass TERM on, record the exit code atomically.
_SUPERVISOR = """
import os, signal, subprocess, sys, tempfile
log, exit_file, pid_file = sys.argv[1:4]
with open(pid_file, "w") as f:
    f.write(str(os.getpid()))
signal.signal(signal.SIGHUP, signal.SIG_IGN)
with open(log, "ab") as out:
    p = subprocess.Popen(sys.argv[4:], stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    signal.signal(signal.SIGTERM, lambda *a: p.terminate())
    signal.signal(signal.SIGINT, lambda *a: p.terminate())
    while True:
        try:
            code = p.wait()
            break
        except InterruptedError:
            continue
fd, tmp = tempfile.mkstemp(prefix="pip.exit.", dir=os.path.dirname(exit_file))
with os.fdopen(fd, "w") as f:
    f.write(str(code))
os.rename(tmp, exit_file)
"""


def _env_block(env: dict[str, str]) -> bytes:
    lines = []
    for key, value in env.items():
        if not _ENV_NAME.match(key) or "\n" in value or "\0" in value:
            raise ValueError(f"bad environment entry {key!r}")
        lines.append(f"{key}={value}")
    return "".join(line + "\n" for line in lines).encode() + b"\n"  # the empty line ends the block


def _prelude(network_turbo: bool, pid_file: str | None) -> str:
    parts = [_NO_PIP_CONFIG, _READ_ENV]
    if network_turbo:
        # AutoDL's academic proxy: sets http(s)_proxy for this shell only
        parts.append(
            '[ -r /etc/network_turbo ] || { echo "ERROR: --network-turbo: /etc/network_turbo not found '
            'on this host (it exists on AutoDL instances)" >&2; exit 3; }; '
            ". /etc/network_turbo >/dev/null 2>&1; "
        )
    if pid_file:
        # the pid of pip itself after exec: lets an interrupted install stop it on the host
        parts.append(sh("echo $$ > {pid_file}; ", pid_file=pid_file))
    return "".join(parts)


def index_arguments(index: IndexConfig, env: dict[str, str]) -> list[str]:
    """pip options for the index config; credential-bearing URLs go to `env` instead."""
    args: list[str] = []
    if index.no_index:
        args.append("--no-index")
    elif index.index_url:
        if has_credentials(index.index_url):
            env["PIP_INDEX_URL"] = index.index_url
        else:
            args += ["--index-url", index.index_url]
    secret_extra = [u for u in index.extra_index_urls if has_credentials(u)]
    if secret_extra and not index.no_index:
        env["PIP_EXTRA_INDEX_URL"] = " ".join(secret_extra)
    for url in index.extra_index_urls:
        if not has_credentials(url) and not index.no_index:
            args += ["--extra-index-url", url]
    secret_links = [u for u in index.find_links if has_credentials(u)]
    if secret_links:
        env["PIP_FIND_LINKS"] = " ".join(secret_links)
    for url in index.find_links:
        if not has_credentials(url):
            args += ["--find-links", url]
    for host in index.trusted_hosts:
        args += ["--trusted-host", host]
    if index.proxy:
        for key in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY"):
            env[key] = index.proxy
    return args



def finish_install_args(
    args: list[str],
    requirements: list[str],
    requirement_files: list[str],
    index: IndexConfig,
    env: dict[str, str],
    index_env_var: str,
) -> tuple[list[str], str]:
    """Append `-r FILE`s and requirements to an installer's argv (pip or uv), and return the
    index secrets with the line shown to users: secrets scrubbed, the index named when it
    travels in `index_env_var` rather than argv."""
    for file in requirement_files:
        args += ["-r", file]
    args += list(requirements)
    secrets = secrets_of([index.index_url, *index.extra_index_urls, *index.find_links, index.proxy])
    display = scrub(str(argv(args)), secrets)
    if env.get(index_env_var):
        display += f"  (index {mask_url(env[index_env_var])} via {index_env_var})"
    return secrets, display

def install_command(
    python: str,
    requirements: list[str],
    index: IndexConfig,
    *,
    requirement_files: list[str] = (),  # type: ignore[assignment]
    report_path: str | None = None,
    require_hashes: bool = False,
    no_deps: bool = False,
    dry_run: bool = False,
    ignore_installed: bool = False,
    cache_dir: str | None = None,
    timeout: float = 30,
    retries: int = 2,
) -> PipCommand:
    """`python -m pip install ...` with every value quoted; secrets via stdin only."""
    env: dict[str, str] = {}
    args = [
        python,
        "-m",
        "pip",
        "install",
        "--no-input",
        "--disable-pip-version-check",
        "--progress-bar",
        "off",
        "--timeout",
        f"{timeout:g}",
        "--retries",
        str(retries),
    ]
    args += index_arguments(index, env)
    if cache_dir:
        args += ["--cache-dir", cache_dir]
    if report_path:
        args += ["--report", report_path]
    if require_hashes:
        args.append("--require-hashes")
    if no_deps:
        args.append("--no-deps")
    if dry_run:
        args.append("--dry-run")
    if ignore_installed:
        args.append("--ignore-installed")
    secrets, display = finish_install_args(args, requirements, requirement_files, index, env, "PIP_INDEX_URL")
    return PipCommand(
        argv=args, env=env, display=display, secrets=secrets, network_turbo=index.network_turbo
    )


def freeze_command(python: str) -> str:
    return sh("{python} -m pip freeze --all --disable-pip-version-check", python=python)


# -- failure output -----------------------------------------------------------------------------

_RELEVANT = re.compile(
    r"(^ERROR:|No matching distribution|Could not find a version|Connection refused|"
    r"Max retries exceeded|NewConnectionError|Failed to establish|Name or service not known|"
    r"Temporary failure in name resolution|Read timed out|timed out|HTTP error|40[134] Client Error|"
    r"5\d\d Server Error|THESE PACKAGES DO NOT MATCH|Expected sha256|Got +[0-9a-f]{64}|"
    r"Hashes are required|ResolutionImpossible|conflict|Requires-Python|requires a different Python|"
    r"is not a supported wheel|No space left|Permission denied|SSLError|CERTIFICATE_VERIFY_FAILED|"
    r"Looking in indexes|Looking in links|network_turbo|^\s+\S+==\S+ from |"
    r"^\s*(cause|Caused by):|unsatisfiable)",  # uv's why: "  cause: Because ... unsatisfiable."
    re.IGNORECASE,
)
_RETRY = re.compile(r"^WARNING: Retrying")


def relevant_lines(output: str, secrets: list[str] = (), limit: int = 12) -> list[str]:  # type: ignore[assignment]
    """The lines of pip's output that say why it failed, deduplicated, last `limit` kept.

    pip prints pages (progress, "Collecting", tracebacks with --verbose); a user needs the
    ERROR lines, the index it looked in, and the last network retry."""
    kept: list[str] = []
    last_retry = ""
    for raw in output.splitlines():
        line = raw.rstrip()
        if not line.strip():
            continue
        if _RETRY.match(line):
            last_retry = line
            continue
        if _RELEVANT.search(line) and line not in kept:
            kept.append(line)
    if last_retry:
        kept.insert(0, last_retry)
    if not kept:
        kept = [ln for ln in output.strip().splitlines() if ln.strip()][-5:]
    return [scrub(line, list(secrets))[:400] for line in kept[-limit:]]
