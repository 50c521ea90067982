"""What the installer needs to know before it touches anything: the interpreter the env will be
built from, and the plan (the compat resolver's, behind one small adapter so the installer does
not depend on the resolver's internal shape).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from provision.compat import resolver
from provision.connection.base import Connection
from provision.errors import ConfigError, HostError
from provision.shell import sh

# Runs on the host's Python (3.8+): what `python -m venv` will produce and which wheels fit it.
_PYTHON_INFO = r"""
import json, platform, sys
info = {"version": platform.python_version(), "implementation": sys.implementation.name,
        "machine": platform.machine(), "glibc": platform.libc_ver()[1] or None,
        "executable": sys.executable, "prefix": sys.prefix}
try:
    import ensurepip  # Debian/Ubuntu strip it out of python3 unless python3-venv is installed
    info["ensurepip"] = True
except ImportError:
    info["ensurepip"] = False
try:
    import venv
    info["venv"] = True
except ImportError:
    info["venv"] = False
print(json.dumps(info))
"""


@dataclass
class PythonInfo:
    executable: str
    version: str  # 3.11.2
    machine: str  # x86_64
    glibc: str | None
    implementation: str = "cpython"
    ensurepip: bool = True
    venv: bool = True

    @property
    def major_minor(self) -> str:
        return ".".join(self.version.split(".")[:2])

    @property
    def abi(self) -> str:
        return "cp" + self.major_minor.replace(".", "")

    def platform_tags(self) -> list[str]:
        """Wheel platform tags this interpreter accepts, newest first (for pip --platform)."""
        tags: list[str] = []
        if self.glibc:
            major, minor = (int(x) for x in self.glibc.split(".")[:2])
            for m in range(minor, 4, -1):
                tags.append(f"manylinux_{major}_{m}_{self.machine}")
            if minor >= 17:
                tags.append(f"manylinux2014_{self.machine}")
            if minor >= 12:
                tags.append(f"manylinux2010_{self.machine}")
            if minor >= 5:
                tags.append(f"manylinux1_{self.machine}")
        tags.append(f"linux_{self.machine}")
        return tags


def host_python(connection: Connection, python: str) -> PythonInfo:
    """Ask the interpreter the env will be built from about itself (one round trip)."""
    result = connection.run(sh("{python} -c {code}", python=python, code=_PYTHON_INFO), timeout=60)
    host = connection.host.name
    if result.exit_code == 127 or "not found" in result.stderr and not result.stdout:
        raise HostError(
            host, f"no Python interpreter {python!r} on the host (give one with --python PATH)"
        )
    if not result.ok:
        raise HostError(
            host,
            f"{python} did not run: {(result.stderr.strip() or f'exit {result.exit_code}')[-500:]}",
        )
    try:
        data = json.loads(result.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise HostError(
            host, f"{python} gave no answer about itself: {result.stdout[-300:]!r}"
        ) from None
    return PythonInfo(
        executable=data.get("executable") or python,
        version=data["version"],
        machine=data.get("machine") or "x86_64",
        glibc=data.get("glibc"),
        implementation=data.get("implementation") or "cpython",
        ensurepip=bool(data.get("ensurepip")),
        venv=bool(data.get("venv")),
    )


@dataclass
class Plan:
    """The installer's view of a resolved plan (see provision/compat/resolver.py)."""

    torch: str
    variant: str
    index_url: str | None = None
    torchvision: str | None = None
    torchaudio: str | None = None
    cuda: str | None = None
    cudnn: str | None = None
    action: str = "install"  # "install" | "keep"
    mode: str = ""  # full | minor-version-compat | ptx-jit | cpu | cuda-build-on-cpu
    reasons: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class NoPlanError(HostError):
    """The resolver found no build that runs on this host; the message explains and offers
    options."""


def resolve(
    facts: dict[str, Any],
    *,
    torch: str = "latest",
    variant: str | None = None,
    index_kind: str = "pytorch",
    python_version: str | None = None,
    installed: dict[str, Any] | None = None,
    allow_minor_version_compat: bool = True,
    host: str = "",
    offer: Any = None,
    allow_cuda_build_on_cpu: bool = False,
) -> Plan:
    """The compat resolver's plan for these facts and this request, or NoPlanError.

    `python_version` is the interpreter the env is built from (not necessarily the facts'
    python3); `installed` is the torch in the *target* environment ({"version", "cuda"}), which is
    what "keep the installed torch" must mean for an install into a managed env; `offer` is what
    the index in effect serves (provision/install/index_query.py), None when not asked.
    """
    host_facts = resolver.HostFacts.from_facts(facts, python_version=python_version)
    host_facts = replace(
        host_facts,
        torch_version=(installed or {}).get("version"),
        torch_cuda=(installed or {}).get("cuda"),
    )
    request = resolver.TorchRequest(
        spec=torch or "latest",
        variant=variant,
        allow_minor_version_compat=allow_minor_version_compat,
        # the resolver knows two kinds; an unknown index (custom) may serve any variant, and the
        # verification after install catches one that served another
        mirror="pypi" if index_kind == "pypi" else "pytorch",
        offer=offer,
        allow_cuda_build_on_cpu=allow_cuda_build_on_cpu,
    )
    try:
        outcome = resolver.resolve_install_plan(host_facts, request)
    except resolver.ResolveInputError as exc:
        raise ConfigError(str(exc)) from None
    if isinstance(outcome, resolver.NoPlan):
        err = NoPlanError(
            host, outcome.explanation + "".join(f"\n  option: {o}" for o in outcome.options)
        )
        err.options = list(outcome.options)  # type: ignore[attr-defined]
        err.reasons = list(outcome.reasons)  # type: ignore[attr-defined]
        raise err
    return Plan(
        torch=outcome.torch,
        variant=outcome.variant,
        index_url=outcome.index_url,
        torchvision=outcome.torchvision,
        torchaudio=outcome.torchaudio,
        cuda=outcome.cuda,
        cudnn=outcome.cudnn,
        action=outcome.action,
        mode=outcome.mode,
        reasons=list(outcome.reasons),
        warnings=list(outcome.warnings),
    )


def fingerprint(parts: dict[str, Any]) -> str:
    """Identity of an environment's contents: equal fingerprints, nothing to do."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]
