"""Does an environment work? verify_env runs the agent's verify_torch under its Python and checks
the answer against the plan; the same check decides whether a base interpreter's torch is kept
as it is (`provision up`, no managed env needed).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from provision.connection.base import Connection
from provision.errors import AgentError
from provision.install import keep, reuse
from provision.install import uv as uv_mod
from provision.install.build import Built
from provision.install.mirrors import index_kind
from provision.install.outcome import InstallError, InstallOptions, InstallResult, timed
from provision.install.planning import NoPlanError, Plan, resolve
from provision.remote.agent import VERIFY_MEMO_S, Agent
from provision.remote.environment import EnvState


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


def keep_base_interpreter(
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


def verify_generation(
    env_conn: Connection,
    agent: Agent,
    generations: list[str],
    fp: str,
    gpus: int,
    built: Built,
    generation: str,
    plan: Plan,
    result: InstallResult,
    fail: Callable[[str], InstallError],
) -> Verification:
    """The new generation's verification, before anything switches; raises `fail(...)` when it
    does not pass. Records what the install added (uv's listing; pip's report is read earlier)."""
    with timed(result.timings, "verify"):
        # uv linked the same cache files as a verified twin generation: its verification
        # stands, checked file by file (provision/install/reuse.py); else the full one
        reused = None
        if built.uv_path:
            reused = reuse.reused_verification(env_conn, generations, fp, gpus, built.python, generation)
        check = Verification(True, [], reused) if reused else verify_env(agent, built.python, plan, gpus)
    listed = check.data.pop("packages", None) if reused else None  # the comparison listed them
    result.verify = check.data
    if not check.ok:
        raise fail(
            f"the new environment failed verification: {'; '.join(check.problems)}; "
            f"{result.env} is unchanged"
        )
    if built.uv_path:  # what the install added or changed, as pip's report gives the pip path
        if listed is None:
            listed = uv_mod.installed_packages(env_conn, built.python)
        result.packages = {n: v for n, v in listed.items() if built.uv_before.get(n) != v}
    return check
