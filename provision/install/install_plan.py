"""Planning one install: the plan (the resolver's or a lock's) turned into exact pins and a
fingerprint, and the index that really serves it (provision/install/index_choice.py). Nothing here
changes the host.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from provision.connection.base import Connection
from provision.errors import ConfigError
from provision.install import index_choice
from provision.install.index_query import list_from_host, offer_of
from provision.install.lockfile import Lock, LockedPackage, platform_problems
from provision.install.mirrors import (
    KIND_PYTORCH,
    IndexConfig,
    IndexOptions,
    build_index_config,
    torch_index_candidates,
)
from provision.install.outcome import COMPANIONS, InstallError, InstallOptions, InstallResult
from provision.install.planning import NoPlanError, Plan, PythonInfo, fingerprint, resolve
from provision.remote.agent import Agent

# Rough size of a finished env, for a free-space warning (CUDA builds pull ~3 GB of nvidia-* libs).
ENV_BYTES = {"cpu": 1_200_000_000, "cuda": 7_000_000_000}


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


def lag_note(plan: Plan) -> str:
    """The index-lags warning, repeated in the one line users surely read."""
    lag = next((w for w in plan.warnings if " not on " in w and "newest there that fits" in w), "")
    return f"; {lag}" if lag else ""


def plan_from_lock(lock: Lock) -> Plan:
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


def choose_index(
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
