"""provision.lock files made: resolved on the host (`provision lock`) or on the controller for a
described host (`provision lock --offline`), with every file's hash.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from provision.connection.base import Connection
from provision.errors import ConfigError, HostError
from provision.install import index_choice
from provision.install import relay as relay_mod
from provision.install.build import pip_cache
from provision.install.install_plan import (
    check_locked_variant,
    choose_index,
    plan_warnings,
    requirements_for,
)
from provision.install.lockfile import Lock, LockedPackage, build_lock, packages_from_report
from provision.install.mirrors import build_index_config, index_kind
from provision.install.outcome import InstallOptions, InstallResult, ProgressCallback
from provision.install.pip import install_command, relevant_lines
from provision.install.planning import PythonInfo, host_python, resolve
from provision.remote.agent import Agent
from provision.remote.facts import gather_facts
from provision.shell import quote as shell_quote
from provision.shell import sh


def _lock_request(options: InstallOptions) -> dict[str, Any]:
    return {
        "torch": options.torch,
        "variant": options.variant,
        "with": list(options.with_),
        "extras": list(options.extras),
        "requirements": [Path(p).name for p in options.requirements],
    }


def _gpu_summary(facts: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"name": g.get("name"), "compute_capability": g.get("compute_capability")}
        for g in facts.get("gpus") or []
    ]


def create_lock(
    connection: Connection,
    agent: Agent,
    options: InstallOptions,
    *,
    facts: dict[str, Any] | None = None,
    progress: ProgressCallback | None = None,
) -> Lock:
    """Resolve on the host and record the exact files: a throwaway venv from the same interpreter
    an install would use, `pip install --dry-run --ignore-installed --report` against the same
    indexes (the host's view of them is what an install there would get), then it is removed."""

    host = connection.host.name
    say = progress or (lambda m: None)
    options.validate()
    if options.locked is not None:
        raise ConfigError("lock from a lock? give --torch/--with/--extra instead of --locked")
    if facts is None:
        say("gathering facts")
        facts = gather_facts(agent)
    base = options.python or connection.host.python or "python3"
    py = host_python(connection, base)
    plan = resolve(
        facts,
        torch=options.torch,
        variant=options.variant,
        index_kind=index_kind(options.index),
        python_version=py.version,
        allow_minor_version_compat=options.allow_minor_version_compat,
        allow_cuda_build_on_cpu=options.allow_cuda_build_on_cpu,
        host=host,
    )
    scratch = InstallResult(host=host)
    index_cfg, plan = choose_index(connection, agent, options, plan, py, facts, host, scratch, say)
    requirements = requirements_for(plan, options.with_, options.extras, index_cfg.kind)
    home = connection.run('printf %s "$HOME"', timeout=30).stdout.strip() or "/tmp"
    tmp = f"{home}/.cache/provision/lock-{os.urandom(4).hex()}"
    q = shell_quote
    try:
        say("resolving on the host (pip --dry-run)")
        made = connection.run(
            sh("mkdir -p {tmp} && {py} -m venv {venv}", tmp=tmp, py=py.executable, venv=tmp + "/venv"),
            timeout=600,
        )
        if not made.ok:
            raise HostError(host, f"{py.executable} -m venv failed: {made.stderr.strip()[-500:]}")
        req_files = []
        for i, path in enumerate(options.requirements):
            remote = f"{tmp}/requirements-{i}.txt"
            connection.put(Path(path).read_bytes(), remote, mode=0o600)
            req_files.append(remote)
        cmd = install_command(
            f"{tmp}/venv/bin/python",
            requirements,
            index_cfg,
            requirement_files=req_files,
            report_path=f"{tmp}/report.json",
            dry_run=True,
            ignore_installed=True,
            cache_dir=pip_cache(options, facts),
            timeout=options.pip_timeout,
            retries=options.pip_retries,
        )
        run = connection.run(cmd.script(), stdin=cmd.stdin, timeout=options.pip_deadline)
        if not run.ok:
            lines = relevant_lines(run.stdout + "\n" + run.stderr, cmd.secrets)
            raise HostError(host, "resolving failed: pip --dry-run: " + " | ".join(lines[-4:]))
        packages = packages_from_report(json.loads(connection.get(f"{tmp}/report.json")), f"{host}'s pip report")
    finally:
        connection.run(f"rm -rf -- {q(tmp)}", timeout=120)
    packages = _hash_missing(connection, packages, host)
    return _finish_lock(plan, packages, py, index_cfg, options, facts, host)


def _hash_missing(
    connection: Connection, packages: list[LockedPackage], host: str
) -> list[LockedPackage]:
    missing = [p.name for p in packages if not p.sha256]
    if missing:
        raise HostError(
            host,
            f"the index gave no sha256 for {', '.join(missing)}: a lock needs hashes "
            "(PyPI, download.pytorch.org and PEP 503 mirrors give them); use another index",
        )
    return packages


def create_lock_offline(
    facts: dict[str, Any],
    py: PythonInfo,
    options: InstallOptions,
    progress: ProgressCallback | None = None,
) -> Lock:
    """Resolve on the controller for a described host (`provision lock --offline --gpu ...`):
    the plan from the resolver, the files from pip resolving for that Python and platform."""

    options.validate()
    plan = resolve(
        facts,
        torch=options.torch,
        variant=options.variant,
        index_kind=index_kind(options.index),
        python_version=py.version,
        allow_minor_version_compat=options.allow_minor_version_compat,
        allow_cuda_build_on_cpu=options.allow_cuda_build_on_cpu,
        host="offline",
    )
    index_cfg = build_index_config(
        options.index,
        plan_index_url=plan.index_url,
        variant=plan.variant,
        reachable_torch_index=None,
    )
    # what the index really has, asked from here (this machine resolves and downloads)
    planning = index_choice.Planning(
        facts=facts, py=py, host="offline", torch=options.torch, variant=options.variant,
        with_=list(options.with_), allow_minor_version_compat=options.allow_minor_version_compat,
        allow_cuda_build_on_cpu=options.allow_cuda_build_on_cpu,
    )  # fmt: skip
    try:
        plan = index_choice.for_config(
            None, index_cfg, plan, planning, options.index, progress or (lambda m: None)
        )
    except index_choice.IndexRefusal as exc:
        raise ConfigError(exc.detail) from None
    index_cfg = build_index_config(
        options.index, plan_index_url=plan.index_url, variant=plan.variant, reachable_torch_index=None
    )
    requirements = requirements_for(plan, options.with_, options.extras, index_cfg.kind)
    if progress:
        progress(f"resolving {' '.join(requirements)} for Python {py.version} on {py.machine}")
    try:
        packages = relay_mod.resolve_for(
            py, requirements, index_cfg, requirement_files=options.requirements
        )
    except relay_mod.RelayError as exc:
        raise ConfigError(str(exc)) from None
    return _finish_lock(plan, packages, py, index_cfg, options, facts, None)


def _finish_lock(
    plan: Any, packages: list[Any], py: Any, index_cfg: Any, options: InstallOptions,
    facts: dict[str, Any], host: str | None,
) -> Any:
    """Check the resolved packages carry the planned build, then write down how it was resolved."""
    check_locked_variant(plan, packages, host or "offline")
    plan.warnings = plan_warnings(plan, options.with_)
    return build_lock(
        plan=plan.as_dict(),
        packages=packages,
        python_version=py.version,
        machine=py.machine,
        index=index_cfg.as_dict(),
        request=_lock_request(options),
        resolved_on={
            "host": host,
            "python": py.version,
            "glibc": py.glibc,
            "gpus": _gpu_summary(facts),
            "driver": (facts.get("nvidia") or {}).get("driver_version"),
        },
    )
