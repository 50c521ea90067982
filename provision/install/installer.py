"""Install a matched PyTorch into a managed environment on one host — the one function the CLI
(`provision install`) and the playbook module (`install_torch`) share.

    facts → interpreter → current env → plan (resolver, or the lock) →
      already satisfied and verified?  → "unchanged", in seconds
      else: index (probe mirrors) → build a new generation aside → pip install → verify on the
            host → switch the env's symlink (one rename) → prune old generations

Nothing before the switch touches the env users run, so every failure — unreachable index,
missing wheel, failed verification, Ctrl-C — leaves it exactly as it was; the half-built
generation is removed and pip's relevant lines are reported.

The steps live by seam: outcome.py (options, result, errors), install_plan.py (planning: pins,
fingerprint, index), build.py (building aside: venv, pip/uv), verification.py, switching.py,
locking.py (provision.lock). This module is the flow and the names callers import.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

from provision.connection.base import Connection
from provision.errors import HostError
from provision.install import keep
from provision.install.build import build_generation, run_pip
from provision.install.install_plan import (
    ENV_BYTES,
    check_lock,
    choose_index,
    env_fingerprint,
    lag_note,
    plan_from_lock,
    plan_warnings,
    requirements_for,
)
from provision.install.locking import create_lock, create_lock_offline
from provision.install.mirrors import IndexConfig, index_kind, secrets_of
from provision.install.outcome import (
    COMPANIONS,
    CONDA_REMOVED,
    InstallCancelled,
    InstallError,
    InstallOptions,
    InstallResult,
    ProgressCallback,
    check_cancel,
    timed,
)
from provision.install.planning import NoPlanError, host_python, resolve
from provision.install.switching import building_aside, prune_old, write_manifest
from provision.install.verification import (
    Verification,
    installed_of,
    keep_base_interpreter,
    verify_env,
    verify_generation,
)
from provision.remote.agent import VERIFY_MEMO_S, Agent
from provision.remote.become import BecomeConnection
from provision.remote.environment import ManagedEnv, default_env_path, env_root_of, find_env
from provision.remote.facts import gather_facts

__all__ = [  # what callers import from here (the CLI, the playbook module, tests)
    "COMPANIONS", "CONDA_REMOVED", "InstallCancelled", "InstallError", "InstallOptions",
    "InstallResult", "check_lock", "create_lock", "create_lock_offline", "install",
    "requirements_for", "run_pip", "verify_env",
]  # fmt: skip


def install(
    connection: Connection,
    agent: Agent,
    options: InstallOptions,
    *,
    facts: dict[str, Any] | None = None,
    progress: ProgressCallback | None = None,
) -> InstallResult:
    """Install (or confirm) the planned torch in the host's managed env. Returns the result;
    raises InstallError (with .result) on failure or refusal — the previous env untouched."""
    host = connection.host.name
    result = InstallResult(host=host)
    t = result.timings
    started = time.monotonic()

    def say(message: str) -> None:
        if progress:
            progress(message)

    def fail(message: str, action: str = "failed") -> InstallError:
        result.action = action
        result.message = message
        t["total"] = time.monotonic() - started
        return InstallError(host, message, result)

    options.validate()
    requirement_texts = [Path(p).read_bytes() for p in options.requirements]

    with timed(t, "facts"):
        if facts is None:
            say("gathering facts")
            facts = gather_facts(agent)
    gpus = len(facts.get("gpus") or [])

    with timed(t, "inspect"):
        base = options.python or connection.host.python or "python3"
        # as the login user, whatever become says: sudo's secure_path would find another python3
        # than the one the user's PATH (a conda init, a pyenv) gives; the venv is made from this
        # absolute path, also under sudo
        py = host_python(connection, base)
        become = agent.becoming()
        # under become the env is built (and owned) by root, at the system location by default
        env_conn: Any = connection if become is None else BecomeConnection(connection, become)
        path = options.env or default_env_path(
            facts, system=become is not None, root=env_root_of(connection.host.vars)
        )
        env = ManagedEnv(env_conn, path)
        state = env.state()
        if become is None and not options.env and not state.exists:
            system = default_env_path(facts, system=True, root=env_root_of(connection.host.vars))
            if system != path and find_env(connection, [system]):
                result.warnings.append(
                    f"{system} (installed as root, with --become) is left as it is: without --become "
                    f"this install manages {env.path}; check, bench and train use {env.path} once it "
                    "exists. Add --become to update the system one instead."
                )
    result.env, result.python = env.path, env.python
    if state.lock_holder:
        raise fail(
            f"another install into {env.path} is running ({state.lock_holder}); if none is, "
            f"remove the stale lock: rm -r {env.lock_dir}"
        )

    if (options.keep_base or options.keep_conda) and not state.exists and options.locked is None:
        # python3 (or --python), then, unless an interpreter was named, the conda envs with a torch
        tried = [py] if options.keep_base else []
        for exe in [] if options.python else keep.conda_pythons(facts):
            if exe not in {p.executable for p in tried}:
                with contextlib.suppress(HostError):
                    tried.append(py if exe == py.executable else host_python(connection, exe))
        for candidate in tried:
            kept = keep_base_interpreter(agent, connection, candidate, options, facts, gpus, result)
            if kept is not None:
                t["total"] = time.monotonic() - started
                return kept

    # What is installed in the target env now: our manifest, or (an env we do not manage) ask it.
    installed = installed_of(state)
    unmanaged_verify: Verification | None = None
    if state.exists and not state.managed and state.has_python:
        unmanaged_verify = verify_env(agent, env.python, None, gpus, memo_s=VERIFY_MEMO_S)
        torch = unmanaged_verify.data.get("torch") or {}
        if torch.get("version"):
            installed = {"version": torch["version"], "cuda": torch.get("cuda")}

    # The plan.
    with timed(t, "plan"):
        kind = index_kind(options.index)
        lock = options.locked
        if lock is not None:
            plan = plan_from_lock(lock)
            problems = check_lock(lock, facts, py, host)
            if problems:
                result.plan = plan.as_dict()
                raise fail(
                    f"the lock {lock.source or ''} cannot run here: " + "; ".join(problems),
                    "refused",
                )
        else:
            try:
                plan = resolve(
                    facts,
                    torch=options.torch,
                    variant=options.variant,
                    index_kind=kind,
                    python_version=py.version,
                    installed=installed,
                    allow_minor_version_compat=options.allow_minor_version_compat,
                    allow_cuda_build_on_cpu=options.allow_cuda_build_on_cpu,
                    host=host,
                )
            except NoPlanError as exc:
                result.reasons = list(getattr(exc, "reasons", []))
                refused = fail(exc.detail, "refused")
                refused.no_fit = True
                raise refused from None
    # Ask the index in effect before deciding (a lagging mirror, a one-version private index):
    # the plan that is compared with the env below is one that can really be installed.
    index_cfg: IndexConfig | None = None
    if lock is None and plan.action == "install":
        with timed(t, "index"):
            index_cfg, plan = choose_index(
                connection, agent, options, plan, py, facts, host, result, say, installed
            )
    result.plan = plan.as_dict()
    result.reasons = list(plan.reasons)
    # after what inspecting and keeping said (a system env left alone, a kept torch pip couldn't extend)
    result.warnings = list(dict.fromkeys([*result.warnings, *plan_warnings(plan, options.with_)]))
    fp = env_fingerprint(
        plan, options.with_, options.extras, requirement_texts, py.major_minor, lock
    )

    # Already there? Same contents (fingerprint) and it still verifies: nothing to do.
    if state.exists and state.has_python and not options.force:
        same = bool(state.manifest) and state.manifest.get("fingerprint") == fp
        foreign_fits = (
            not state.managed
            and plan.action == "keep"
            and not options.extras
            and not options.requirements
            and not options.with_
            and lock is None
        )
        if same or foreign_fits:
            with timed(t, "verify"):
                say("verifying the current environment")
                check = (
                    unmanaged_verify
                    if foreign_fits and unmanaged_verify
                    else verify_env(agent, env.python, plan, gpus, memo_s=VERIFY_MEMO_S)
                )
            if check.ok:
                result.action = "unchanged"
                result.verify = check.data
                result.packages = dict((state.manifest or {}).get("packages") or {})
                result.generation = state.target
                result.message = (
                    f"{env.path} already has torch {plan.torch}+{plan.variant}"
                    + (f" with {', '.join(options.with_)}" if options.with_ else "")
                    + " and it verifies: nothing to do"
                    + lag_note(plan)
                )
                t["total"] = time.monotonic() - started
                return result
            result.warnings.append(
                "the current environment no longer verifies ("
                + "; ".join(check.problems)
                + "): building a new one"
            )
    if state.exists and not state.managed:
        raise fail(env.unmanaged_message(), "refused")
    if options.check_only:
        result.action = "would-install"
        result.message = f"would install torch {plan.torch}+{plan.variant} into {env.path}"
        t["total"] = time.monotonic() - started
        return result

    # Where packages come from.
    if index_cfg is None:
        with timed(t, "index"):
            index_cfg, plan = choose_index(
                connection, agent, options, plan, py, facts, host, result, say, installed
            )
    result.plan = plan.as_dict()
    result.index = index_cfg.as_dict()
    result.warnings += index_cfg.warnings
    secrets = secrets_of(
        index_cfg.urls()
        + [options.index.proxy]
        + [options.index.index_url]
        + options.index.extra_index_urls
    )

    requirements = (
        requirements_for(plan, options.with_, options.extras, index_cfg.kind)
        if lock is None
        else []
    )
    free = env.free_bytes()
    need = ENV_BYTES["cpu" if plan.variant == "cpu" else "cuda"]
    if free is not None and free < need:
        result.warnings.append(
            f"only {free / 1e9:.1f} GB free under {env.parent}; a torch {plan.variant} env needs about "
            f"{need / 1e9:.0f} GB (use --env on a bigger disk if pip runs out of space)"
        )

    # Build aside, verify, switch.
    say(f"building a new environment beside {env.path}")
    with building_aside(env, result) as aside:
        generation = aside.generation
        built = build_generation(
            connection, env_conn, env, options, facts, py, plan, lock, requirements,
            requirement_texts, index_cfg, secrets, generation, result, say, fail,
        )  # fmt: skip
        say("verifying on the host")
        check = verify_generation(
            env_conn, agent, state.generations, fp, gpus, built, generation, plan, result, fail
        )
        write_manifest(env, generation, fp, plan, options, py, result, check, gpus, lock)
        check_cancel(options, host, result)
        aside.switch(result)
        prune_old(env, generation, result.previous, options.keep_generations)
    result.action = "installed"
    result.message = f"torch {plan.torch}+{plan.variant} installed in {env.path} and verified" + (
        f" (previous environment kept: {result.previous})" if result.previous else ""
    ) + lag_note(plan)
    t["total"] = time.monotonic() - started
    return result
