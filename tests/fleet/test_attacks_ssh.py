"""Attack tests and secret scans on real SSH hosts.

- Hostile values (tests/support/attacks.py) through every module argument that reaches a shell
  and every template filter, over SSH to a fleet host: the canary file on the host never appears.
- Each secret-carrying step (pip with a `user:password@` index, get_url with URL credentials and
  headers, a connection password, a become password) runs through the real CLI while every
  process's command line on this machine — the fleet hosts share its PID namespace, so that
  includes sshd's children on every host — is read over and over; then stdout, stderr, the
  `--json` document, logs (`-v`), reports and the SQLite history (every file under the test's
  HOME and XDG dirs) are searched for the secret.
"""

from __future__ import annotations

import base64
import http.server
import json
import os
import secrets
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from provision.connection.base import ConnectOptions
from provision.connection.ssh import SSHConnection
from provision.engine.runner import run_playbook
from provision.engine.templating import _SHELL_ENV, Templar, TemplateError
from provision.errors import ProvisionError
from provision.modules.base import ArgError, ModuleFailure, TaskContext, get_module, normalize_args
from provision.modules.command import shell_command
from provision.shell import ShellValueError, stdin_env
from tests.support.attacks import (
    CANARY_VAR,
    CORPUS,
    CORPUS_COMBINED,
    SHELL_CONTEXTS,
    hostile_text,
    module_cases,
)
from tests.support.package_index import PackageIndex, small_wheelhouse

ROOT = Path(__file__).resolve().parents[2]
T = Templar()
EXPECTED_ERRORS = (ModuleFailure, ArgError, ShellValueError, TemplateError, ProvisionError, OSError)


# -- hostile values over SSH ---------------------------------------------------------------------


class HostArena:
    """A work dir and a canary path on one fleet host, and one SSH connection to it."""

    def __init__(self, fleet: Any, conn: SSHConnection) -> None:
        self.fleet, self.conn = fleet, conn
        self.host = fleet.hosts[0]
        tag = secrets.token_hex(4)
        self.work = f"/tmp/attack-{tag}/work"
        self.canary = f"/tmp/attack-{tag}/CANARY"

    def reset(self) -> None:
        self.fleet.ns_exec(self.host, f"rm -rf {self.work} && mkdir -p {self.work}")

    def check(self, what: Any) -> None:
        proc = self.fleet.ns_exec(self.host, f"test -e {self.canary}", check=False)
        assert proc.returncode != 0, f"hostile value ran as code on the host: {what!r}"

    def run_module(self, name: str, args: dict[str, Any], value: str) -> Any:
        module = get_module(name)()  # type: ignore[misc]
        try:
            rendered = {
                k: T.render_shell(v, {"v": value})
                if k in module.shell_args and isinstance(v, str)
                else (v if k == "content" else T.render(v, {"v": value}))
                for k, v in args.items()
            }
            ctx = TaskContext(
                host=self.conn.host,
                connection=self.conn,
                args=normalize_args(module, rendered),
                environment={CANARY_VAR: self.canary},
                templar=T,
                timeout=30,
            )
            return module.run(ctx)
        except EXPECTED_ERRORS as exc:
            return exc


@pytest.fixture(scope="module")
def attack_fleet(request: pytest.FixtureRequest) -> Iterator[Any]:
    from fleet import Fleet, FleetError, preflight

    reason = preflight()
    if reason:
        pytest.skip(f"SSH test fleet unavailable: {reason}")
    try:
        started = Fleet(1).start()
    except FleetError as exc:
        pytest.fail(f"could not start the attack test host: {exc}", pytrace=False)
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture(scope="module")
def arena(attack_fleet: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostArena]:
    config = tmp_path_factory.mktemp("ssh") / "config"
    config.write_text("")
    options = ConnectOptions(known_hosts="accept-new", connect_timeout=5.0, ssh_config=str(config))
    conn = SSHConnection(attack_fleet.hosts[0].as_host(), options)
    a = HostArena(attack_fleet, conn)
    a.reset()
    try:
        yield a
    finally:
        conn.close()


def test_corpus_through_every_module_argument_over_ssh(arena: HostArena) -> None:
    # the two values that carry every payload, the bare delimiter, and the huge one
    for value in (*CORPUS_COMBINED[:3], CORPUS_COMBINED[-1]):
        arena.reset()
        for name, args in module_cases(arena.work, value):
            arena.run_module(name, args, value)
        arena.check(value)


N_CASES = len(module_cases("/x", "v"))


@settings(max_examples=40, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=hostile_text(), case=st.integers(0, N_CASES - 1))
def test_generated_values_through_every_module_argument_over_ssh(
    arena: HostArena, value: str, case: int
) -> None:
    name, args = module_cases(arena.work, value)[case]
    arena.run_module(name, args, value)
    arena.check((name, args, value))


def test_every_filter_over_ssh(arena: HostArena) -> None:
    value = "".join(CORPUS[:21])
    ran = 0
    for name in sorted(f for f in _SHELL_ENV.filters if f != "shell_code"):
        source = "\n".join(SHELL_CONTEXTS).replace("{{ v }}", "{{ v | " + name + " }}")
        try:
            text, env = shell_command(T.render_shell(source, {"v": value}))
        except (TemplateError, ModuleFailure):
            continue
        prefix, data = stdin_env({**env, CANARY_VAR: arena.canary})  # as the shell module sends it
        arena.conn.run(prefix + text, stdin=data, timeout=30)
        ran += 1
    arena.check("filters")
    assert ran > 50


def test_hostile_values_through_the_runner_round_trip(arena: HostArena, tmp_path: Path) -> None:
    """The whole path — extra vars, templates, runner, SSH — keeps values as exact data."""
    values = [v for v in CORPUS if len(v) < 1000]
    playbook = tmp_path / "site.yml"
    playbook.write_text(
        textwrap.dedent(
            f"""
            - hosts: all
              gather_facts: false
              environment:
                {CANARY_VAR}: {arena.canary}
              tasks:
                - name: quoted
                  shell: "printf '%s' {{{{ item | quote }}}}"
                  loop: "{{{{ values }}}}"
                  register: quoted
                - name: heredoc
                  shell: |
                    cat <<'EOF'
                    {{{{ item }}}}
                    EOF
                  loop: "{{{{ values }}}}"
                  register: heredoc
                - copy:
                    content: "{{{{ item }}}}"
                    dest: "{arena.work}/f{{{{ idx }}}}"
                  loop: "{{{{ values }}}}"
                  loop_control:
                    index_var: idx
            """
        )
    )
    arena.reset()
    result = run_playbook(
        playbook,
        hosts=[arena.conn.host],
        options=arena.conn.options,
        extra_vars={"values": values},
    )
    assert result.ok, [(r.task, r.msg) for r in result.results if r.status == "failed"]
    arena.check("runner")
    by_task = {r.task: r.result for r in result.results}
    quoted, heredoc = by_task["quoted"]["results"], by_task["heredoc"]["results"]
    for value, q, h in zip(values, quoted, heredoc, strict=True):
        assert q["stdout"] == value.rstrip("\r\n")
        assert h["stdout"] == value.rstrip("\r\n")
    for i, value in enumerate(values):
        got = arena.fleet.ns_exec(arena.host, f"base64 -w0 {arena.work}/f{i}").stdout
        assert base64.b64decode(got).decode() == value


# -- secret scans --------------------------------------------------------------------------------


class ProcessScanner:
    """Reads every process's command line (this machine's /proc: the fleet's sshd sessions, their
    shells, pip, curl…) in a loop until stopped — bounded by `limit_s` — and keeps any holding
    a secret."""

    def __init__(self, needles: list[str], limit_s: float = 300.0) -> None:
        self.needles = [n.encode() for n in needles]
        self.limit_s = limit_s
        self.hits: list[str] = []
        self.scans = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        end = time.monotonic() + self.limit_s
        me = str(os.getpid())
        while not self._stop.is_set() and time.monotonic() < end:
            for proc in Path("/proc").iterdir():
                if not proc.name.isdigit() or proc.name == me:
                    continue
                try:
                    cmdline = (proc / "cmdline").read_bytes()
                except OSError:
                    continue
                if any(n in cmdline for n in self.needles):
                    self.hits.append(cmdline.replace(b"\0", b" ").decode("utf-8", "replace"))
            self.scans += 1

    def __enter__(self) -> ProcessScanner:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


def cli(args: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    full = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="200", **(env or {}))
    return subprocess.run(
        [sys.executable, "-m", "provision", *args],
        capture_output=True,
        text=True,
        env=full,
        timeout=300,
    )


def state_roots() -> list[Path]:
    """Where this machine keeps what a run writes: HOME and XDG dirs, and provision's own home
    (history.sqlite, known_hosts, caches) — per test, set up by tests/conftest.py."""
    roots = [Path(os.environ["HOME"])]
    if os.environ.get("PROVISION_HOME"):
        roots.append(Path(os.environ["PROVISION_HOME"]))
    return roots


def assert_nowhere(secret_values: list[str], out: subprocess.CompletedProcess, scanner: ProcessScanner,
                   extra_dirs: list[Path]) -> None:
    """Not in any command line seen, not in stdout / stderr / the JSON, not in any file written
    under HOME and the XDG dirs (history.sqlite, logs, caches) or the report folder."""
    assert scanner.scans > 3, "the process scanner did not get to look"
    for secret in secret_values:
        assert not [h for h in scanner.hits if secret in h], scanner.hits
        assert secret not in out.stdout, "secret in stdout"
        assert secret not in out.stderr, "secret in stderr"
        needle = secret.encode()
        roots = [*state_roots(), *extra_dirs]
        leaked = [
            str(p)
            for root in roots
            for p in root.rglob("*")
            if p.is_file() and not p.is_symlink() and needle in p.read_bytes()
        ]
        assert leaked == [], f"secret written to {leaked}"


def playbook(tmp_path: Path, tasks: str) -> Path:
    path = tmp_path / "site.yml"
    body = textwrap.indent(textwrap.dedent(tasks).strip("\n"), "    ")
    path.write_text(f"- hosts: all\n  gather_facts: false\n  tasks:\n{body}\n")
    return path


def run_cli_with_scan(tmp_path: Path, fleet: Any, pb: Path, secret_values: list[str],
                      extra: list[str] | None = None, env: dict[str, str] | None = None,
                      inventory: Path | None = None) -> tuple[subprocess.CompletedProcess, dict]:
    inventory = inventory or fleet.write_inventory(tmp_path / "hosts.ini")
    with ProcessScanner(secret_values) as scanner:
        out = cli(["run", str(pb), "-i", str(inventory), "--json", "-v", *(extra or [])], env=env)
    assert_nowhere(secret_values, out, scanner, [tmp_path])
    return out, json.loads(out.stdout) if out.stdout.strip() else {}


def test_pip_index_credentials_never_visible(make_fleet, tmp_path: Path) -> None:
    fleet = make_fleet(1)
    user, password = "pvuser", "idxSECRET" + secrets.token_hex(6)
    wheels = small_wheelhouse(tmp_path / "wheels")
    with PackageIndex(wheels, host=fleet.controller_address, auth=(user, password),
                      watch_secret=password) as index:
        pb = playbook(
            tmp_path,
            f"""
            - pip:
                name: provtest-alpha==2.0
                virtualenv: /tmp/pv-secret-venv
                index_url: "{{{{ lookup('env', 'PV_TEST_INDEX') }}}}"
                extra_args: "--trusted-host {fleet.controller_address}"
            """,
        )
        out, doc = run_cli_with_scan(
            tmp_path, fleet, pb, [password], env={"PV_TEST_INDEX": index.url_with_credentials()}
        )
        assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
        assert index.secret_seen_in == [], index.secret_seen_in  # checked on every request
        assert any("provtest" in r and " 200" in r for r in index.requests), index.requests
    got = fleet.ns_exec(fleet.hosts[0], "/tmp/pv-secret-venv/bin/python -c 'import provtest_alpha as m; print(m.__version__)'")
    assert got.stdout.strip() == "2.0"


class _AuthHandler(http.server.BaseHTTPRequestHandler):
    expected_auth = ""
    expected_header = ""
    payload = b"secret payload\n"
    seen: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        ok = (
            self.headers.get("Authorization") == self.expected_auth
            and self.headers.get("X-Api-Token") == self.expected_header
        )
        self.seen.append(f"{self.path} {'ok' if ok else 'denied'}")
        self.send_response(200 if ok else 401)
        self.send_header("Content-Length", str(len(self.payload) if ok else 0))
        self.end_headers()
        if ok:
            self.wfile.write(self.payload)

    def log_message(self, *args: Any) -> None:
        pass


def test_get_url_credentials_and_headers_never_visible(make_fleet, tmp_path: Path) -> None:
    fleet = make_fleet(1)
    password = "urlSECRET" + secrets.token_hex(6)
    token = "hdrSECRET" + secrets.token_hex(6)
    handler = type("Handler", (_AuthHandler,), {
        "expected_auth": "Basic " + base64.b64encode(f"alice:{password}".encode()).decode(),
        "expected_header": token,
        "seen": [],
    })
    server = http.server.ThreadingHTTPServer((fleet.controller_address, 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        port = server.server_address[1]
        pb = playbook(
            tmp_path,
            f"""
            - get_url:
                url: "http://alice:{{{{ lookup('env', 'PV_TEST_PW') }}}}@{fleet.controller_address}:{port}/data.bin"
                dest: /tmp/got.bin
                headers:
                  X-Api-Token: "{{{{ lookup('env', 'PV_TEST_TOKEN') }}}}"
            - get_url:
                url: "http://{fleet.controller_address}:{port}/denied.bin"
                url_username: alice
                url_password: "{{{{ lookup('env', 'PV_TEST_PW') }}}}x"
                dest: /tmp/denied.bin
                headers:
                  X-Api-Token: "{{{{ lookup('env', 'PV_TEST_TOKEN') }}}}"
              ignore_errors: true
            """,
        )
        out, doc = run_cli_with_scan(
            tmp_path, fleet, pb, [password, token], env={"PV_TEST_PW": password, "PV_TEST_TOKEN": token}
        )
    finally:
        server.shutdown()
        server.server_close()
    assert handler.seen == ["/data.bin ok", "/denied.bin denied"], handler.seen
    got = fleet.ns_exec(fleet.hosts[0], "cat /tmp/got.bin").stdout
    assert got == "secret payload\n"
    # the failure names the URL, with its password masked
    assert "denied.bin" in out.stdout and "alice:********@" in out.stdout


def test_connection_password_never_visible(make_fleet, tmp_path: Path) -> None:
    fleet = make_fleet(1)
    host = fleet.hosts[0]
    password = "sshSECRET" + secrets.token_hex(6)
    fleet.set_password(host, "root", password)
    inventory = tmp_path / "hosts.ini"
    inventory.write_text(f"[gpus]\n{host.name} ansible_host={host.address} ansible_port={host.port} ansible_user=root\n")
    pb = playbook(tmp_path, "- command: hostname\n  register: out\n- debug: var=out.stdout")
    out, doc = run_cli_with_scan(
        tmp_path, fleet, pb, [password], extra=["--password-env", "PV_TEST_SSH_PASSWORD"],
        env={"PV_TEST_SSH_PASSWORD": password}, inventory=inventory,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert host.name in out.stdout


def test_become_password_never_visible(make_fleet, tmp_path: Path) -> None:
    from kinds import SUDO_PASSWORD_USER

    fleet = make_fleet(1, kinds="sudo")
    host = fleet.hosts[0]
    password = host.sudo_passwords[SUDO_PASSWORD_USER]
    inventory = tmp_path / "hosts.ini"
    inventory.write_text(
        f"[gpus]\n{host.name} ansible_host={host.address} ansible_port={host.port} "
        f"ansible_user={SUDO_PASSWORD_USER} ansible_ssh_private_key_file={host.key_file}\n"
    )
    with ProcessScanner([password]) as scanner:
        out = cli(["facts", "-i", str(inventory), "all", "--json", "-v", "--become",
                   "--become-password-env", "PV_TEST_BECOME"], env={"PV_TEST_BECOME": password})
    if out.returncode != 0 and "become" in out.stderr and "unrecognized" in out.stderr:
        pytest.skip("this build has no --become-password-env")
    assert out.returncode == 0, out.stderr[-2000:]
    assert_nowhere([password], out, scanner, [tmp_path])


def test_index_credentials_never_reach_reports_or_history(make_fleet, tmp_path: Path) -> None:
    """bench measures the index (a `user:password@` URL) and the report module writes the
    JSON/Markdown/HTML report and the history row: none holds the password."""
    fleet = make_fleet(1)
    password = "repSECRET" + secrets.token_hex(6)
    wheels = small_wheelhouse(tmp_path / "wheels")
    reports = tmp_path / "reports"
    with PackageIndex(wheels, host=fleet.controller_address, auth=("pvuser", password),
                      watch_secret=password) as index:
        pb = playbook(
            tmp_path,
            f"""
            - bench:
                quick: true
                sections: [network]
                index_url: "{{{{ lookup('env', 'PV_TEST_INDEX') }}}}"
              register: measured
            - report:
                out: {reports}
                bench: "{{{{ measured }}}}"
            """,
        )
        out, doc = run_cli_with_scan(
            tmp_path, fleet, pb, [password], env={"PV_TEST_INDEX": index.url_with_credentials()}
        )
        assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
        assert index.secret_seen_in == []
    written = sorted(p.suffix for p in reports.iterdir())
    assert written == [".html", ".json", ".md"], written
    history = [p for root in state_roots() for p in root.rglob("history.sqlite")]
    assert history, "the report was not recorded in the history"
    assert any(index.address[0] in p.read_text(errors="replace") for p in reports.iterdir()), (
        "the report should name the index it measured (with the password masked)"
    )
