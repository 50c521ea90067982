"""On-host compatibility check: facts + resolver + verify_torch → one verdict (OK / WARN / BROKEN)
with its fix. Shared by `provision check HOST`, the `compat_check` module and reports."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from provision.compat import (
    HostFacts,
    InstallPlan,
    NoPlan,
    ResolveInputError,
    TorchRequest,
    resolve_install_plan,
    result_document,
)
from provision.errors import AgentError
from provision.remote.agent import VERIFY_MEMO_S
from provision.remote.environment import managed_python
from provision.shell import argv

OK, WARN, BROKEN = "OK", "WARN", "BROKEN"


@dataclass
class HostCheck:
    verdict: str
    fix: str | None
    python: str
    result: InstallPlan | NoPlan
    verify: dict[str, Any] | None
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        doc = result_document(self.result)
        return {
            **doc,  # plan, reasons, options (+ explanation); its warnings are part of ours
            "verdict": self.verdict,
            "fix": self.fix,
            "problems": self.problems,
            "warnings": self.warnings,
            "python": self.python,
            "host": self.summary,
            "verify": self.verify,
        }


def _env_python(agent: Any, host: Any, env: str | None, facts: dict[str, Any]) -> str | None:
    """The interpreter to verify: --env, else the host var provision_env, else the managed env
    at its default place when there is one, else the host default (None)."""
    path = env or (host.vars or {}).get("provision_env")
    if not path:
        # after `provision install`, the managed env at its default path is what training uses
        return managed_python(agent.connection, facts)
    path = str(path).rstrip("/")
    if path == "~" or path.startswith("~/"):
        home = agent.connection.run('printf %s "$HOME"', timeout=30)
        if home.ok and home.stdout.startswith("/"):
            path = home.stdout.strip().rstrip("/") + path[1:]
    return f"{path}/bin/python"


def check_host(
    agent: Any, host: Any, facts: dict[str, Any], request: TorchRequest, env: str | None = None
) -> HostCheck:
    """Resolve from the facts, verify what is installed, and give one verdict with its fix."""
    python = _env_python(agent, host, env, facts) or agent.python
    host_problems: list[str] = []  # the host itself: GPU facts, the agent
    gpus = facts.get("gpus") if isinstance(facts.get("gpus"), list) else []
    nvidia = facts.get("nvidia") if isinstance(facts.get("nvidia"), dict) else {}
    if nvidia.get("error"):
        host_problems.append(f"GPU facts failed: {nvidia['error']}")
    elif not gpus and nvidia.get("pci_devices"):
        reason = nvidia.get("reason") or "no working NVIDIA driver"
        host_problems.append(
            f"{len(nvidia['pci_devices'])} NVIDIA GPU(s) on the PCI bus but none usable: {reason}"
        )
    try:
        verify = agent.call("verify_torch", {"expect_gpus": len(gpus), "memo_s": VERIFY_MEMO_S},
                            python=python, timeout=600)  # fmt: skip
    except AgentError as exc:
        verify = None
        host_problems.append(f"verify_torch with {python}: {exc.detail}")
    # The env's Python and torch, as verify_torch saw them, beat the facts (which describe python3).
    vt = (verify or {}).get("torch") or {}
    py_version = ((verify or {}).get("python") or {}).get("version")
    host_facts = HostFacts.from_facts(facts, python_version=py_version)
    if verify is not None:
        host_facts = replace(host_facts, torch_version=vt.get("version"), torch_cuda=vt.get("cuda"))
    try:
        result: InstallPlan | NoPlan = resolve_install_plan(host_facts, request)
    except ResolveInputError as exc:  # facts the resolver cannot use (e.g. no Python version)
        result = NoPlan(f"cannot resolve from this host's facts: {exc}")
    summary = {
        "gpus": [{"name": g.name, "compute_capability": g.cc} for g in host_facts.gpus],
        "driver": host_facts.driver_version,
        "cuda_max": host_facts.cuda_max,
        "python": host_facts.python_version,
        "arch": host_facts.arch,
        "torch": host_facts.torch_version,
    }
    verify_problems = list((verify or {}).get("problems") or [])
    problems = host_problems + verify_problems
    warnings = list((verify or {}).get("warnings") or []) + list(result.warnings)
    installed = bool(verify and verify.get("installed"))
    works = installed and not problems
    pip = (
        str(argv(result.pip_command(python)))
        if isinstance(result, InstallPlan) and result.pip_args
        else ""
    )
    install_fix = f"provision install {host.name}" + (f"  (or: {pip})" if pip else "")
    fix: str | None
    if isinstance(result, NoPlan):
        verdict = WARN if works else BROKEN
        fix = result.options[0] if result.options else None
        if works:
            warnings.insert(0, f"the installed torch works, but {result.explanation}")
    elif works and result.action == "keep":
        # verified working; only a degraded mode is worth a WARN (the warnings list says why)
        verdict, fix = (WARN if result.mode in ("minor-version-compat", "ptx-jit") else OK), None
    elif works:
        verdict, fix = WARN, install_fix
        warnings.insert(
            0,
            f"torch {vt.get('version')} works; the request asks for {result.torch}+{result.variant}",
        )
    elif verify is not None and not installed and not host_problems:
        verdict, fix = WARN, install_fix  # nothing broken: not provisioned yet
    else:
        verdict, fix = BROKEN, install_fix
    return HostCheck(verdict, fix, python, result, verify, problems, warnings, summary)
