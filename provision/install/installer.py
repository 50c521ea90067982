"""Install a matched PyTorch into a managed environment on one host — the one function the CLI
(`provision install`) and the playbook module (`install_torch`) share.

    facts → interpreter → current env → plan (resolver, or the lock) →
      already satisfied and verified?  → "unchanged", in seconds
      else: index (probe mirrors) → build a new generation aside → pip install → verify on the
            host → switch the env's symlink (one rename) → prune old generations

Nothing before the switch touches the env users run, so every failure — unreachable index,
missing wheel, failed verification, Ctrl-C — leaves it exactly as it was; the half-built
generation is removed and pip's relevant lines are reported.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from provision import __version__
from provision.connection.base import Connection
from provision.errors import AgentError, ConfigError, HostError
from provision.install import index_choice, keep, reuse
from provision.install import relay as relay_mod
from provision.install import uv as uv_mod
from provision.install.environment import (
    PIP_PID_FILE,
    EnvState,
    ManagedEnv,
    default_env_path,
    default_pip_cache,
    env_root_of,
    find_env,
    home_of,
)
from provision.install.index_query import list_from_host, offer_of
from provision.install.lockfile import Lock, LockedPackage, packages_from_report, platform_problems
from provision.install.mirrors import (
    KIND_PYTORCH,
    IndexConfig,
    IndexOptions,
    build_index_config,
    index_kind,
    scrub,
    secrets_of,
    torch_index_candidates,
)
from provision.install.pip import PipCommand, install_command, relevant_lines
from provision.install.planning import (
    NoPlanError,
    Plan,
    PythonInfo,
    fingerprint,
    host_python,
    resolve,
)
from provision.remote.agent import VERIFY_MEMO_S, Agent
from provision.remote.become import BecomeConnection
from provision.shell import quote as shell_quote
from provision.shell import sh

ProgressCallback = Callable[[str], None]
COMPANIONS = ("torchvision", "torchaudio")
# Rough size of a finished env, for a free-space warning (CUDA builds pull ~3 GB of nvidia-* libs).
_ENV_BYTES = {"cpu": 1_200_000_000, "cuda": 7_000_000_000}
CONDA_REMOVED = (
    "conda environments are not created any more (that path was never run against a real conda). "
    "Build the managed env from a conda Python instead: --python /root/miniconda3/bin/python "
    "(or <prefix>/envs/NAME/bin/python); `provision up` keeps a working torch that is already in "
    "the active or base conda env"
)


@dataclass
class InstallOptions:
    torch: str = "latest"
    variant: str | None = None
    with_: list[str] = field(default_factory=list)  # torchvision, torchaudio
    extras: list[str] = field(default_factory=list)  # more pip requirements
    requirements: list[str] = field(default_factory=list)  # requirements files on the controller
    env: str | None = None  # stable env path on the host; default: environment.default_env_path
    python: str | None = None  # interpreter to build the venv from (a conda Python works)
    conda: str | None = None  # removed (see CONDA_REMOVED); kept so old callers get the remedy
    index: IndexOptions = field(default_factory=IndexOptions)
    relay: bool = False
    relay_dir: str | None = (
        None  # where relayed wheels land on the host (default ~/.cache/provision/wheels)
    )
    locked: Lock | None = None
    allow_minor_version_compat: bool = True
    pip_timeout: float = 30.0  # pip's socket timeout
    pip_retries: int = 2
    pip_deadline: float = 3600.0  # the whole pip run
    pip_cache: str | None = None  # None: the data dir's cache when there is one; "off": none
    keep_generations: int = 2  # current + previous
    cancel: threading.Event | None = None  # set (e.g. on Ctrl-C) to stop and clean up promptly
    check_only: bool = False  # plan and compare, change nothing (playbook check mode)
    # `provision up`: with no managed env yet, a base interpreter whose torch verifies and fits
    # the request is kept as it is (no multi-GB download to replace a working install)
    keep_base: bool = False
    # `provision install`: the same, for the torch of the active or base conda env only (an
    # AutoDL image's); the system python3's torch is never kept by install
    keep_conda: bool = False
    # a CUDA build on a host without an NVIDIA GPU (multi-GB, runs on the CPU): only when asked
    allow_cuda_build_on_cpu: bool = False
    installer: str = "auto"  # H8: auto (uv where it can be had, else pip) | uv | pip
    force: bool = False  # rebuild even when the env has the same contents and verifies

    def validate(self) -> None:
        bad = [w for w in self.with_ if w not in COMPANIONS]
        if bad:
            raise ConfigError(f"--with takes {', '.join(COMPANIONS)}; got {', '.join(bad)}")
        if self.conda:
            raise ConfigError(f"--conda {self.conda}: {CONDA_REMOVED}")
        if self.locked and (self.torch not in (None, "", "latest") or self.variant):
            raise ConfigError("--locked installs exactly the lock; drop --torch/--variant")
        if self.locked and (self.extras or self.requirements or self.with_):
            raise ConfigError(
                "--locked installs exactly the lock; --extra/-r/--with would change it "
                "(add them when locking instead)"
            )
        for path in self.requirements:
            if not Path(path).is_file():
                raise ConfigError(f"-r {path}: no such file on the controller")
        if self.installer not in uv_mod.INSTALLERS:
            raise ConfigError(
                f"--installer {self.installer!r}: one of {', '.join(uv_mod.INSTALLERS)}"
            )
        self.index.validate()


@dataclass
class InstallResult:
    host: str
    action: str = "failed"  # installed | unchanged | would-install | failed | refused
    message: str = ""
    env: str | None = None
    python: str | None = None
    generation: str | None = None
    previous: str | None = None
    plan: dict[str, Any] | None = None
    index: dict[str, Any] | None = None
    packages: dict[str, str] = field(default_factory=dict)  # installed name -> version
    verify: dict[str, Any] | None = None
    reasons: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    pip_lines: list[str] = field(default_factory=list)
    pip_command: str = ""
    relayed: dict[str, int] | None = None
    timings: dict[str, float] = field(default_factory=dict)
    installer: dict[str, Any] | None = None  # H8: {"tool": "uv", "path", "how"}; None: pip

    @property
    def ok(self) -> bool:
        return self.action in ("installed", "unchanged", "would-install")

    @property
    def changed(self) -> bool:
        return self.action in ("installed", "would-install")

    def as_dict(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "action": self.action,
            "changed": self.changed,
            "message": self.message,
            "env": self.env,
            "python": self.python,
            "generation": self.generation,
            "previous": self.previous,
            "plan": self.plan,
            "index": self.index,
            "packages": self.packages,
            "verify": self.verify,
            "reasons": self.reasons,
            "warnings": self.warnings,
            "pip_lines": self.pip_lines,
            "pip_command": self.pip_command,
            "relayed": self.relayed,
            "installer": self.installer or {"tool": "pip"},
            "seconds": {k: round(v, 2) for k, v in self.timings.items()},
        }


class InstallError(HostError):
    """The install failed or was refused; `.result` holds what is known (pip's lines included)."""

    def __init__(
        self, host: str, message: str, result: InstallResult, *, no_fit: bool = False
    ) -> None:
        super().__init__(host, message)
        self.result = result
        # no torch build fits this host (Python, driver, index): a caller that can do without
        # torch (`up --no-bench`) warns and goes on; pip failures and the like stay failures
        self.no_fit = no_fit


# -- helpers ------------------------------------------------------------------------------------


@contextlib.contextmanager
def _timed(timings: dict[str, float], name: str) -> Iterator[None]:
    start = time.monotonic()
    try:
        yield
    finally:
        timings[name] = timings.get(name, 0.0) + time.monotonic() - start


def _owner() -> str:
    return f"{socket.gethostname()} pid {os.getpid()} since {time.strftime('%Y-%m-%d %H:%M:%S')}"


def installed_of(state: EnvState) -> dict[str, Any] | None:
    """The torch the current managed env holds, from its manifest ({"version", "cuda"})."""
    if not state.manifest:
        return None
    torch = (state.manifest.get("verify") or {}).get("torch") or {}
    if torch.get("version"):
        return {"version": torch["version"], "cuda": torch.get("cuda")}
    packages = state.manifest.get("packages") or {}
    if packages.get("torch"):
        return {"version": packages["torch"], "cuda": None}
    return None


def plan_warnings(plan: Plan, with_: list[str]) -> list[str]:
    """The plan's warnings, less those about companions nobody asked for (the resolver speaks of
    torchaudio whether or not it is installed)."""
    return [w for w in plan.warnings if not any(c in w and c not in with_ for c in COMPANIONS)]


def check_locked_variant(plan: Plan, packages: list[LockedPackage], where: str) -> None:
    """The index must have served the planned build: a custom index holding only +cpu would
    otherwise lock a CPU torch for a GPU plan."""
    torch = next((p for p in packages if p.name.lower() == "torch"), None)
    if torch is None:
        raise ConfigError(f"{where}: the resolution holds no torch")
    local = torch.version.partition("+")[2]
    if local and local != plan.variant:
        raise ConfigError(
            f"{where}: the index served torch {torch.version}, but this host needs the {plan.variant} build; "
            f"use an index that carries it (e.g. https://download.pytorch.org/whl/{plan.variant}) or --variant {local}"
        )


def env_fingerprint(
    plan: Plan,
    with_: list[str],
    extras: list[str],
    requirement_texts: list[bytes],
    python: str,
    lock: Lock | None,
) -> str:
    return fingerprint(
        {
            "torch": plan.torch,
            "variant": plan.variant,
            "with": {name: getattr(plan, name) for name in sorted(with_)},
            "extras": sorted(extras),
            "requirements": [hashlib.sha256(t).hexdigest() for t in requirement_texts],
            "python": python,
            "locked": sorted(p.sha256 for p in lock.packages) if lock else None,
        }
    )


def requirements_for(
    plan: Plan, with_: list[str], extras: list[str], index_kind_: str
) -> list[str]:
    """Exact pins. From a PyTorch wheel index the pin carries the variant (+cu126): it cannot match
    PyPI's build even when PyPI is an extra index. Elsewhere the plain version, and verification
    checks the variant that arrived."""
    suffix = f"+{plan.variant}" if index_kind_ == "pytorch" else ""
    pins = [f"torch=={plan.torch}{suffix}"]
    for name in with_:
        version = getattr(plan, name, None)
        if not version:
            raise ConfigError(
                f"torch {plan.torch} has no matching {name} in the compatibility table"
            )
        # torchaudio >= 2.11 is one stable-ABI build for every later torch; PyTorch's index still
        # tags it with the variant
        pins.append(f"{name}=={version}{suffix}")
    return pins + list(extras)


# -- verification -------------------------------------------------------------------------------


@dataclass
class Verification:
    ok: bool
    problems: list[str]
    data: dict[str, Any]


def verify_env(
    agent: Agent, python: str, plan: Plan | None, gpus: int, timeout: float = 600,
    *, memo_s: float = 0,
) -> Verification:
    """Run the agent's verify_torch under `python` and check the answer against the plan.
    `memo_s`: an environment that is unchanged since a passed verification that recent is not
    imported again (agent/verify_memo.py); 0 after an install."""
    request: dict[str, Any] = {"expect_gpus": gpus, "memo_s": memo_s}
    if plan is not None:
        request.update({"expect_version": plan.torch, "expect_variant": plan.variant})
    try:
        data = agent.call("verify_torch", request, python=python, timeout=timeout)
    except AgentError as exc:
        return Verification(False, [exc.detail], {})
    problems = [str(p) for p in (data.get("problems") or [])]
    torch = data.get("torch") or {}
    version = str(torch.get("version") or "")
    if plan is not None:
        public = version.split("+")[0]
        if public != plan.torch:
            problems.append(f"torch {version or '(none)'} imported, planned {plan.torch}")
        variant = torch.get("variant")
        if variant and variant != plan.variant:
            problems.append(
                f"installed build is {variant}, planned {plan.variant} (the index served another build; "
                "use a PyTorch wheel index: --mirror or --index-url https://download.pytorch.org/whl/"
                f"{plan.variant})"
            )
    if data.get("ok") is False and not problems:
        problems.append("verification failed")
    problems = list(dict.fromkeys(problems))
    return Verification(not problems and data.get("ok", True) is not False, problems, data)


class InstallCancelled(HostError):
    """Stopped on request (Ctrl-C); the previous environment is untouched."""


def _check_cancel(options: InstallOptions, host: str, result: InstallResult) -> None:
    if options.cancel is not None and options.cancel.is_set():
        result.action = "failed"
        result.message = "interrupted; the environment is unchanged"
        raise InstallCancelled(host, result.message)


_INTERESTING = (
    "Collecting",
    "Downloading",
    "Installing collected",
    "Successfully installed",
    "ERROR",
)


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


# -- the install --------------------------------------------------------------------------------


_UNREACHABLE = re.compile(
    r"Connection refused|NewConnectionError|Failed to establish|Name or service not known|"
    r"Temporary failure in name resolution|timed out|No route to host|Network is unreachable",
    re.IGNORECASE,
)

def _keep_base_interpreter(
    agent: Agent,
    connection: Connection,
    py: Any,
    options: InstallOptions,
    facts: dict[str, Any],
    gpus: int,
    result: InstallResult,
) -> InstallResult | None:
    """The base interpreter's torch, when it verifies, fits the request and has the extras."""
    if options.requirements or options.with_:
        return None
    check = verify_env(agent, py.executable, None, gpus, memo_s=VERIFY_MEMO_S)
    torch = check.data.get("torch") or {}
    if not check.ok or not torch.get("version"):
        return None
    try:
        plan = resolve(
            facts,
            torch=options.torch,
            variant=options.variant,
            index_kind=index_kind(options.index),
            python_version=py.version,
            installed={"version": torch["version"], "cuda": torch.get("cuda")},
            allow_minor_version_compat=options.allow_minor_version_compat,
            allow_cuda_build_on_cpu=options.allow_cuda_build_on_cpu,
            host=connection.host.name,
        )
    except NoPlanError:
        return None
    if plan.action != "keep":
        return None
    missing = keep.missing_packages(connection, py.executable, list(options.extras))
    if missing is None:
        return None
    if missing:  # small packages (up's lmdb, pillow): added beside the kept torch, torch pinned
        ok, lines = keep.add_packages(connection, py.executable, missing, torch["version"],
                                      options.index, options.pip_timeout, options.pip_deadline)  # fmt: skip
        if not ok:
            result.warnings.append(
                f"{py.executable} has a working torch {torch['version']}, but pip could not add "
                f"{', '.join(missing)} to it ({(lines or ['no output'])[-1]}): building a managed env"
            )
            return None
    result.action = "unchanged"
    result.python = py.executable
    result.plan = plan.as_dict()
    result.reasons = list(plan.reasons)
    result.verify = check.data
    result.message = (
        f"{py.executable} already has torch {torch['version']}, which verifies and fits the request: "
        "kept (no managed environment needed)"
        + (f"; added {', '.join(missing)}" if missing else "")
    )
    return result


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

    with _timed(t, "facts"):
        if facts is None:
            say("gathering facts")
            from provision.remote.facts import gather_facts

            facts = gather_facts(agent)
    gpus = len(facts.get("gpus") or [])

    with _timed(t, "inspect"):
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
            kept = _keep_base_interpreter(agent, connection, candidate, options, facts, gpus, result)
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
    with _timed(t, "plan"):
        kind = index_kind(options.index)
        lock = options.locked
        if lock is not None:
            plan = _plan_from_lock(lock)
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
        with _timed(t, "index"):
            index_cfg, plan = _choose_index(
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
            with _timed(t, "verify"):
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
                    + _lag_note(plan)
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
        with _timed(t, "index"):
            index_cfg, plan = _choose_index(
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
    need = _ENV_BYTES["cpu" if plan.variant == "cpu" else "cuda"]
    if free is not None and free < need:
        result.warnings.append(
            f"only {free / 1e9:.1f} GB free under {env.parent}; a torch {plan.variant} env needs about "
            f"{need / 1e9:.0f} GB (use --env on a bigger disk if pip runs out of space)"
        )

    # Build aside, verify, switch.
    say(f"building a new environment beside {env.path}")
    env.acquire(_owner())
    generation = env.new_generation_path()
    result.generation = generation
    switched = False
    try:
        # H5 (issue 14): uv's cache on the env's filesystem (hardlinks); a uv already on the
        # host makes the venv (no ensurepip run), else `python -m venv` as before
        uv_cache = uv_mod.cache_dir_for(
            _pip_cache(options, facts), options.pip_cache not in (None, "off"), env.gens
        )
        with _timed(t, "create"):
            uv_found, uv_how, seeded = uv_mod.create_with_uv(
                env_conn, options, py.executable, generation, uv_cache, result.warnings,
                index=None if options.relay else index_cfg, pip_cache=_pip_cache(options, facts), say=say,
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
            with _timed(t, "relay"):
                index_cfg, relay_reqs = _relay(
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
        cache = _pip_cache(options, facts)
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
        with _timed(t, "uv"):
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
        _check_cancel(options, host, result)
        with _timed(t, "pip"):
            code, output = run_pip(env_conn, cmd, generation, options, say)
        _check_cancel(options, host, result)
        if code not in (0, 130) and uv_path and options.installer == "auto":
            # uv failed: pip gets its turn in the same venv, so a uv-only problem costs time,
            # not the install, and a real one is reported in pip's words, as before
            last = relevant_lines(output, cmd.secrets + secrets)[-1:] or [f"exit {code}"]
            result.warnings.append(f"uv failed ({last[0]}); pip retried the install")
            say("uv failed: retrying with pip")
            uv_path, cmd = None, pip_cmd
            result.installer = {"tool": "pip", "after": "uv failed"}
            result.pip_command = scrub(cmd.display, secrets)
            with _timed(t, "pip"):
                code, output = run_pip(env_conn, cmd, generation, options, say)
            _check_cancel(options, host, result)
        if code != 0:
            result.pip_lines = relevant_lines(output, cmd.secrets + secrets)
            why = {
                124: "pip timed out",
                -1: "pip stopped without an exit code (killed? out of memory?)",
            }.get(code, f"pip failed (exit {code})")
            unreachable = next((ln for ln in result.pip_lines if _UNREACHABLE.search(ln)), None)
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

        say("verifying on the host")
        with _timed(t, "verify"):
            # uv linked the same cache files as a verified twin generation: its verification
            # stands, checked file by file (provision/install/reuse.py); else the full one
            reused = None
            if uv_path:
                reused = reuse.reused_verification(
                    env_conn, state.generations, fp, gpus, gen_python, generation
                )
            check = Verification(True, [], reused) if reused else verify_env(agent, gen_python, plan, gpus)
        listed = check.data.pop("packages", None) if reused else None  # the comparison listed them
        result.verify = check.data
        if not check.ok:
            raise fail(
                f"the new environment failed verification: {'; '.join(check.problems)}; "
                f"{env.path} is unchanged"
            )
        if uv_path:  # what the install added or changed, as pip's report gives the pip path
            if listed is None:
                listed = uv_mod.installed_packages(env_conn, gen_python)
            result.packages = {n: v for n, v in listed.items() if uv_before.get(n) != v}

        env.write_manifest(
            generation,
            {
                "fingerprint": fp,
                "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "provision": __version__,
                "plan": plan.as_dict(),
                "with": options.with_,
                "extras": options.extras,
                "python": py.version,
                "base_python": py.executable,
                "index": result.index,
                "packages": result.packages,
                "verify": {"torch": (check.data.get("torch") or {}),
                           "devices": check.data.get("devices") or []},  # fmt: skip
                "gpus": gpus,
                "locked": bool(lock),
            },
        )
        _check_cancel(options, host, result)
        with _timed(t, "switch"):
            result.previous = env.switch(generation)
            switched = True
        with contextlib.suppress(HostError):
            env.prune(
                keep=[generation, result.previous] if options.keep_generations > 1 else [generation]
            )
    except BaseException:
        if not switched:
            with contextlib.suppress(Exception):
                env.discard(generation)
            result.generation = None
        raise
    finally:
        with contextlib.suppress(Exception):
            env.release()
    result.action = "installed"
    result.message = f"torch {plan.torch}+{plan.variant} installed in {env.path} and verified" + (
        f" (previous environment kept: {result.previous})" if result.previous else ""
    ) + _lag_note(plan)
    t["total"] = time.monotonic() - started
    return result


def _lag_note(plan: Plan) -> str:
    """The index-lags warning, repeated in the one line users surely read."""
    lag = next((w for w in plan.warnings if " not on " in w and "newest there that fits" in w), "")
    return f"; {lag}" if lag else ""


def _pip_cache(options: InstallOptions, facts: dict[str, Any]) -> str | None:
    if options.pip_cache == "off":
        return None
    return options.pip_cache or default_pip_cache(facts)


def _plan_from_lock(lock: Lock) -> Plan:
    p = lock.plan
    return Plan(
        torch=str(p.get("torch")),
        variant=str(p.get("variant")),
        index_url=p.get("index_url"),
        torchvision=p.get("torchvision"),
        torchaudio=p.get("torchaudio"),
        cuda=p.get("cuda"),
        cudnn=p.get("cudnn"),
        action="install",
        mode=str(p.get("mode") or ""),
        reasons=[f"locked in {lock.source or 'the lock file'} ({lock.created or 'undated'})"],
    )


def check_lock(lock: Lock, facts: dict[str, Any], py: PythonInfo, host: str = "") -> list[str]:
    """Why this host cannot run the lock (empty: it can): Python/platform from the wheels, the
    driver and GPU architectures from the resolver asked for the lock's exact version+variant."""
    problems = platform_problems(lock, py.version, py.machine, py.glibc)
    torch = str(lock.plan.get("torch") or "")
    variant = str(lock.plan.get("variant") or lock.requires.get("variant") or "")
    try:
        resolve(facts, torch=torch, variant=variant or None, python_version=py.version, host=host)
    except NoPlanError as exc:
        first = exc.detail.splitlines()[0]
        problems.append(first)
        problems += [o.strip() for o in exc.detail.splitlines()[1:]]
    except ConfigError as exc:
        problems.append(str(exc))
    return problems


def _choose_index(
    connection: Connection,
    agent: Agent,
    options: InstallOptions,
    plan: Plan,
    py: PythonInfo,
    facts: dict[str, Any],
    host: str,
    result: InstallResult,
    say: Callable[[str], None],
    installed: dict[str, Any] | None = None,
) -> tuple[IndexConfig, Plan]:
    """The index pip will use and the plan re-resolved for what it really serves
    (provision/install/index_choice.py): the user's index or the lock's as given, else the best
    PyTorch wheel index that answers from the host, else PyPI's build when it fits."""
    opts = options.index
    lock = options.locked
    planning = index_choice.Planning(
        facts=facts, py=py, host=host, torch=options.torch, variant=options.variant,
        with_=list(options.with_), allow_minor_version_compat=options.allow_minor_version_compat,
        allow_cuda_build_on_cpu=options.allow_cuda_build_on_cpu, installed=installed,
    )  # fmt: skip
    try:
        if (
            opts.index_url
            or lock is not None
            and lock.index.get("index_url")
            and "****" not in str(lock.index.get("index_url"))
            and not opts.mirror
        ):
            user = opts.index_url
            if user is None and lock is not None:
                user = lock.index.get("index_url")
                extra = [u for u in lock.index.get("extra_index_urls") or [] if "****" not in u]
                opts = IndexOptions(
                    index_url=user,
                    extra_index_urls=extra + list(opts.extra_index_urls),
                    find_links=list(opts.find_links),
                    trusted_hosts=list(opts.trusted_hosts),
                    proxy=opts.proxy,
                    network_turbo=opts.network_turbo,
                    probe_timeout=opts.probe_timeout,
                )
            cfg = build_index_config(
                opts, plan_index_url=plan.index_url, variant=plan.variant, reachable_torch_index=None
            )
            if lock is None:  # a lock pins exact files: nothing to choose
                plan = index_choice.for_config(
                    None if options.relay else connection, cfg, plan, planning, opts, say
                )
            return cfg, plan
        if options.relay:  # this machine fetches: ask from here
            cfg = build_index_config(
                opts, plan_index_url=plan.index_url, variant=plan.variant, reachable_torch_index=None
            )
            if lock is None:
                plan = index_choice.for_config(None, cfg, plan, planning, opts, say)
                cfg = build_index_config(
                    opts, plan_index_url=plan.index_url, variant=plan.variant,
                    reachable_torch_index=None,
                )  # fmt: skip
            return cfg, plan
        if lock is not None:
            return _locked_torch_index(connection, options, plan, py, host, result, say)
        return index_choice.choose(connection, plan, planning, opts, say)
    except index_choice.IndexRefusal as exc:
        result.reasons = list(exc.reasons)
        result.action = "refused"
        raise InstallError(host, exc.detail, result, no_fit=True) from None


def _locked_torch_index(
    connection: Connection,
    options: InstallOptions,
    plan: Plan,
    py: PythonInfo,
    host: str,
    result: InstallResult,
    say: Callable[[str], None],
) -> tuple[IndexConfig, Plan]:
    """A lock without a usable index of its own: the first PyTorch wheel index that lists its
    exact torch from the host."""
    opts = options.index
    candidates = torch_index_candidates(opts, plan.variant)
    say("asking the PyTorch wheel indexes for the locked torch")
    answers = list_from_host(connection, py.executable, candidates, ["torch"], opts)
    for (url, usage), answer in zip(candidates, answers, strict=False):
        offer = offer_of([answer], ["torch"], py, kind=KIND_PYTORCH)
        if offer is not None and offer.has("torch", plan.torch, plan.variant, None):
            cfg = build_index_config(opts, plan_index_url=plan.index_url, variant=plan.variant,
                                     reachable_torch_index=(url, usage))  # fmt: skip
            return cfg, plan
    tried = "; ".join(
        f"{a.where}: {a.detail or 'does not list torch ' + plan.torch + '+' + plan.variant}"
        for a in answers
    )
    raise InstallError(
        host,
        f"no PyTorch wheel index serves the locked torch from this host ({tried}); "
        "use --relay to bring the wheels from the controller",
        result,
    )


def _relay(
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


# -- lock files ---------------------------------------------------------------------------------


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
        from provision.remote.facts import gather_facts

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
    index_cfg, plan = _choose_index(connection, agent, options, plan, py, facts, host, scratch, say)
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
            cache_dir=_pip_cache(options, facts),
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
    from provision.install.lockfile import build_lock

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
