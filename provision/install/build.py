"""Building a new generation aside: the venv (uv or venv), the requirement files, the relayed
wheels, and pip (or uv) run detached and polled. Nothing here touches the env users run: the
switch is provision/install/switching.py's.
"""

from __future__ import annotations

import contextlib
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from provision.connection.base import Connection
from provision.install import relay as relay_mod
from provision.install import uv as uv_mod
from provision.install.lockfile import Lock, LockedPackage, packages_from_report
from provision.install.mirrors import IndexConfig, scrub
from provision.install.outcome import (
    InstallError,
    InstallOptions,
    InstallResult,
    check_cancel,
    timed,
)
from provision.install.pip import PipCommand, install_command, relevant_lines
from provision.install.planning import Plan, PythonInfo
from provision.remote.environment import PIP_PID_FILE, ManagedEnv, default_pip_cache, home_of
from provision.shell import quote as shell_quote
from provision.shell import sh

_INTERESTING = (
    "Collecting",
    "Downloading",
    "Installing collected",
    "Successfully installed",
    "ERROR",
)

UNREACHABLE = re.compile(
    r"Connection refused|NewConnectionError|Failed to establish|Name or service not known|"
    r"Temporary failure in name resolution|timed out|No route to host|Network is unreachable",
    re.IGNORECASE,
)


def pip_cache(options: InstallOptions, facts: dict[str, Any]) -> str | None:
    if options.pip_cache == "off":
        return None
    return options.pip_cache or default_pip_cache(facts)


def run_pip(
    connection: Connection,
    cmd: PipCommand,
    generation: str,
    options: InstallOptions,
    say: Callable[[str], None],
) -> tuple[int, str]:
    """Run pip detached on the host and poll it: (exit code, its whole output).

    Polling (each poll waits on the host up to 0.3 s, growing to 3 s, and returns as soon as
    pip exits) instead of one long blocking command lets a Ctrl-C or `options.cancel` stop pip
    within a poll, from any thread, and shows progress as it comes; waiting on the host, not
    here, means no time is lost between pip's exit and the next poll."""
    meta = f"{generation}/.provision"
    log, exit_file, pid_file = f"{meta}/pip.log", f"{meta}/pip.exit", f"{generation}/{PIP_PID_FILE}"
    q = shell_quote
    start = connection.run(
        sh("mkdir -p {meta} && rm -f {log} {exit_file} && ", meta=meta, log=log, exit_file=exit_file)
        + cmd.detached_script(log, exit_file, pid_file),
        stdin=cmd.stdin,
        timeout=60,
    )
    pid = (start.stdout.strip().splitlines() or [""])[-1]
    if not start.ok or not pid.isdigit():
        return start.exit_code or 1, start.stdout + start.stderr
    chunks: list[str] = []
    offset = 0
    delay, deadline = 0.3, time.monotonic() + options.pip_deadline
    while True:
        ticks = max(1, round(delay / 0.05))  # the host's wait: 50 ms ticks (1 s ticks where sleep takes no fraction)
        poll = connection.run(
            f"i=0; while [ ! -e {q(exit_file)} ] && [ $i -lt {ticks} ] && kill -0 {pid} 2>/dev/null; do "
            f"sleep 0.05 2>/dev/null || {{ sleep 1; i=$((i + 19)); }}; i=$((i + 1)); done; "
            f"e=$(cat {q(exit_file)} 2>/dev/null); a=0; kill -0 {pid} 2>/dev/null && a=1; "
            f's=$(wc -c < {q(log)} 2>/dev/null || echo 0); echo "exit=$e alive=$a size=$s"; '
            f'[ "$s" -gt {offset} ] && tail -c +{offset + 1} {q(log)} | head -c $((s - {offset})); true',
            timeout=60,
        )
        head, _, body = poll.stdout.partition("\n")
        fields = dict(item.partition("=")[::2] for item in head.split())
        if fields.get("size", "").isdigit() and int(fields["size"]) > offset:
            offset = int(fields["size"])  # byte offset from the host: no decoding round trip
            chunks.append(body)
            for line in body.splitlines():
                if line.strip().startswith(_INTERESTING):
                    say(line.strip()[:160])
        if fields.get("exit", "").lstrip("-").isdigit():
            return int(fields["exit"]), "".join(chunks)
        if fields.get("alive") == "0":
            # exited between the two reads? one more look at the exit file before calling it lost
            again = connection.run(f"cat {q(exit_file)} 2>/dev/null", timeout=60).stdout.strip()
            return (int(again) if again.lstrip("-").isdigit() else -1), "".join(chunks)
        if options.cancel is not None and options.cancel.is_set():
            return 130, "".join(chunks)
        if time.monotonic() > deadline:
            return 124, "".join(chunks)
        delay = min(delay * 1.5, 3.0)


def relay_wheels(
    connection: Connection,
    env: ManagedEnv,
    options: InstallOptions,
    plan: Plan,
    lock: Lock | None,
    requirements: list[str],
    req_files_local: list[str],
    index_cfg: IndexConfig,
    py: PythonInfo,
    result: InstallResult,
    say: Callable[[str], None],
) -> tuple[IndexConfig, str]:
    """Resolve and download on the controller, push to the host, return a --no-index config and
    the hash-pinned requirements to install."""
    try:
        if lock is not None:
            packages: list[LockedPackage] = list(lock.packages)
        else:
            say("resolving on the controller for the host's Python and platform")
            packages = relay_mod.resolve_for(
                py, requirements, index_cfg, requirement_files=req_files_local
            )
        say(f"downloading {len(packages)} wheels on the controller (cached)")
        files = relay_mod.fetch(packages, index_cfg, py)
    except relay_mod.RelayError as exc:
        result.pip_lines = exc.lines
        raise InstallError(
            connection.host.name,
            f"--relay: {str(exc).splitlines()[0]}; {env.path} is unchanged",
            result,
        ) from None
    # pushed as the login user (under become too: root's pip reads the login user's files)
    home = env.home if env.connection is connection else home_of(connection)
    remote_dir = options.relay_dir or f"{home.rstrip('/')}/{relay_mod.REMOTE_DIR}"
    say(f"pushing wheels to {remote_dir}")
    sent, sent_bytes = relay_mod.push(connection, files, remote_dir)
    result.relayed = {"files": len(files), "sent": sent, "bytes_sent": sent_bytes}
    text = "".join(p.requirement_line() + "\n" for p in packages)
    return relay_mod.relay_index(remote_dir), text


@dataclass
class Built:
    """A filled generation, not yet verified: its Python and how it was filled."""

    python: str
    uv_path: str | None  # uv filled it (None: pip)
    uv_before: dict[str, str]  # what the venv held before uv filled it (its seed)


def build_generation(
    connection: Connection,
    env_conn: Connection,
    env: ManagedEnv,
    options: InstallOptions,
    facts: dict[str, Any],
    py: PythonInfo,
    plan: Plan,
    lock: Lock | None,
    requirements: list[str],
    requirement_texts: list[bytes],
    index_cfg: IndexConfig,
    secrets: list[str],
    generation: str,
    result: InstallResult,
    say: Callable[[str], None],
    fail: Callable[[str], InstallError],
) -> Built:
    """Make the venv at `generation` and install the plan into it (uv where it can, else pip).
    Raises `fail(...)` with pip's relevant lines when the install does not finish."""
    host = connection.host.name
    t = result.timings
    # H5 (issue 14): uv's cache on the env's filesystem (hardlinks); a uv already on the
    # host makes the venv (no ensurepip run), else `python -m venv` as before
    uv_cache = uv_mod.cache_dir_for(
        pip_cache(options, facts), options.pip_cache not in (None, "off"), env.gens
    )
    with timed(t, "create"):
        uv_found, uv_how, seeded = uv_mod.create_with_uv(
            env_conn, options, py.executable, generation, uv_cache, result.warnings,
            index=None if options.relay else index_cfg, pip_cache=pip_cache(options, facts), say=say,
            facts=facts,
        )  # fmt: skip
        if seeded is None:
            env.create_venv(py.executable, generation)
    gen_python = env.python_of(generation)
    meta_dir = f"{generation}/.provision"
    req_files = []
    for i, text in enumerate(requirement_texts):
        remote = f"{meta_dir}/requirements-{i}.txt"
        env_conn.put(text, remote, mode=0o600)
        req_files.append(remote)
    require_hashes = False
    if lock is not None:
        remote = f"{meta_dir}/locked-requirements.txt"
        env_conn.put(lock.requirements_text().encode(), remote, mode=0o600)
        req_files.append(remote)
        require_hashes = True
    if options.relay:
        with timed(t, "relay"):
            index_cfg, relay_reqs = relay_wheels(
                connection,
                env,
                options,
                plan,
                lock,
                requirements,
                req_files_local=options.requirements,
                index_cfg=index_cfg,
                py=py,
                result=result,
                say=say,
            )
        remote = f"{meta_dir}/relay-requirements.txt"
        env_conn.put(relay_reqs.encode(), remote, mode=0o600)
        req_files, requirements, require_hashes = [remote], [], True
        result.index = index_cfg.as_dict()
    cache = pip_cache(options, facts)
    cmd = install_command(
        gen_python,
        requirements,
        index_cfg,
        requirement_files=req_files,
        report_path=f"{meta_dir}/pip-report.json",
        require_hashes=require_hashes,
        cache_dir=cache,
        timeout=options.pip_timeout,
        retries=options.pip_retries,
    )
    # H8 (issue 14): uv fills the venv where it is available, same plan and index
    with timed(t, "uv"):
        uv_path = uv_mod.choose(env_conn, options, facts, gen_python, index_cfg, cache, say, result,
                                found=uv_found, how=uv_how)  # fmt: skip
    pip_cmd = cmd
    uv_before: dict[str, str] = {}
    if uv_path:
        uv_before = (  # what the venv was seeded with
            seeded if seeded is not None else uv_mod.installed_packages(env_conn, gen_python)
        )
        cmd = uv_mod.install_command_uv(
            uv_path,
            gen_python,
            requirements,
            index_cfg,
            requirement_files=req_files,
            require_hashes=require_hashes,
            cache_dir=cache,
            timeout=options.pip_timeout,
            retries=options.pip_retries,
            uv_cache=uv_cache,
        )
    result.pip_command = scrub(cmd.display, secrets)
    say(f"pip install ({index_cfg.describe()})" + (" with uv" if uv_path else ""))
    check_cancel(options, host, result)
    with timed(t, "pip"):
        code, output = run_pip(env_conn, cmd, generation, options, say)
    check_cancel(options, host, result)
    if code not in (0, 130) and uv_path and options.installer == "auto":
        # uv failed: pip gets its turn in the same venv, so a uv-only problem costs time,
        # not the install, and a real one is reported in pip's words, as before
        last = relevant_lines(output, cmd.secrets + secrets)[-1:] or [f"exit {code}"]
        result.warnings.append(f"uv failed ({last[0]}); pip retried the install")
        say("uv failed: retrying with pip")
        uv_path, cmd = None, pip_cmd
        result.installer = {"tool": "pip", "after": "uv failed"}
        result.pip_command = scrub(cmd.display, secrets)
        with timed(t, "pip"):
            code, output = run_pip(env_conn, cmd, generation, options, say)
        check_cancel(options, host, result)
    if code != 0:
        result.pip_lines = relevant_lines(output, cmd.secrets + secrets)
        why = {
            124: "pip timed out",
            -1: "pip stopped without an exit code (killed? out of memory?)",
        }.get(code, f"pip failed (exit {code})")
        unreachable = next((ln for ln in result.pip_lines if UNREACHABLE.search(ln)), None)
        if unreachable:  # pip's last line ("No matching distribution") hides the cause
            raise fail(
                f"{why}: could not reach the package index ({index_cfg.describe()}): {unreachable}; "
                f"{env.path} is unchanged. Check --index-url/--mirror and the host's network or proxy."
            )
        raise fail(
            f"{why}; {env.path} is unchanged. "
            + (result.pip_lines[-1] if result.pip_lines else "")
        )
    if not uv_path:  # uv writes no pip report: its packages are listed below
        with contextlib.suppress(OSError, ValueError):
            report = json.loads(env_conn.get(f"{meta_dir}/pip-report.json"))
            result.packages = {p.name: p.version for p in packages_from_report(report, f"{host}'s pip report")}
    return Built(gen_python, uv_path, uv_before)
