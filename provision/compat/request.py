"""What the resolver is asked and what it answers: the host's facts (HostFacts, from the agent's
facts document), the request (TorchRequest), the answer (InstallPlan | NoPlan), and the parsing of
each input (Python version, arch, compute capability, torch spec) with ResolveInputError naming
the value and the fix. Pure data; no table is read here.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from provision.compat.offer import IndexOffer


class ResolveInputError(ValueError):
    """Malformed input (spec, variant, driver, Python version): names the value and the fix."""


@dataclass(frozen=True)
class GpuFact:
    name: str | None = None
    cc: str | None = None  # "8.6"
    memory_mib: float | None = None


@dataclass(frozen=True)
class HostFacts:
    """The subset of host facts the resolver needs."""

    gpus: tuple[GpuFact, ...] = ()
    driver_version: str | None = None
    cuda_max: str | None = None  # nvidia-smi's "CUDA Version": the driver's CUDA
    python_version: str = "3.11"
    arch: str = "x86_64"
    torch_version: str | None = None  # installed, e.g. "2.5.1+cu124"
    torch_cuda: str | None = None  # installed torch.version.cuda

    @classmethod
    def from_facts(cls, facts: dict[str, Any], python_version: str | None = None) -> HostFacts:
        """From the agent's `facts` document (docs/facts.md): nvidia.driver_version,
        nvidia.cuda_driver_version (nvidia-smi's CUDA), gpus[].name/compute_capability/memory,
        python.agent.version, torch.version/cuda, os.arch."""
        nv = facts.get("nvidia") if isinstance(facts.get("nvidia"), dict) else {}
        raw_gpus = facts.get("gpus") if isinstance(facts.get("gpus"), list) else []
        gpus = tuple(
            GpuFact(
                name=g.get("name"),
                cc=opt_str(g.get("compute_capability")),
                memory_mib=_memory_mib(g),
            )
            for g in raw_gpus
        )
        torch = facts.get("torch") if isinstance(facts.get("torch"), dict) else {}
        py = facts.get("python") if isinstance(facts.get("python"), dict) else {}
        os_ = facts.get("os") if isinstance(facts.get("os"), dict) else {}
        return cls(
            gpus=gpus,
            driver_version=opt_str(nv.get("driver_version")),
            cuda_max=opt_str(nv.get("cuda_driver_version") or nv.get("cuda_max")),
            # facts put the agent's interpreter under python.agent; "" makes resolving say so
            python_version=python_version
            or str(py.get("version") or (py.get("agent") or {}).get("version") or ""),
            arch=str(os_.get("arch") or "x86_64"),
            torch_version=opt_str(torch.get("version")),
            torch_cuda=opt_str(torch.get("cuda")),
        )


def _memory_mib(gpu: dict[str, Any]) -> float | None:
    mem = gpu.get("memory")
    if isinstance(mem, dict) and mem.get("total_mib"):
        return float(mem["total_mib"])
    if gpu.get("memory_total_bytes"):
        return float(gpu["memory_total_bytes"]) / 2**20
    return None


@dataclass(frozen=True)
class TorchRequest:
    spec: str = "latest"  # latest | any | 2.5 | 2.5.1 | >=2.4,<2.6
    variant: str | None = None  # cu126 | cpu | None (choose)
    allow_minor_version_compat: bool = True
    # pytorch: download.pytorch.org or a mirror of it; pypi: PyPI or a PyPI-only mirror
    mirror: str = "pytorch"
    # pytorch: base URL with /<tag> under it; pypi: the simple index URL (None: pip's own)
    index_base: str | None = None
    torchaudio: bool = True
    # what the index in effect serves (None: assume every build in the table exists)
    offer: IndexOffer | None = None
    # PyPI's CUDA build on a host without an NVIDIA GPU is a multi-GB download: only when asked
    allow_cuda_build_on_cpu: bool = False


@dataclass
class InstallPlan:
    torch: str
    torchvision: str | None
    torchaudio: str | None
    variant: str
    release: str
    cuda: str | None
    cudnn: str | None
    nccl: str | None
    index_url: str | None
    pip_args: list[str]
    action: str  # install | keep
    mode: str  # full | minor-version-compat | ptx-jit | cpu | cuda-build-on-cpu
    reasons: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def pin(self) -> str:
        return f"{self.torch}+{self.variant}"

    def pip_command(self, python: str = "python3") -> list[str]:
        return [python, "-m", "pip", *self.pip_args] if self.pip_args else []

    def to_dict(self) -> dict[str, Any]:
        return {
            "torch": self.torch,
            "torchvision": self.torchvision,
            "torchaudio": self.torchaudio,
            "variant": self.variant,
            "release": self.release,
            "cuda": self.cuda,
            "cudnn": self.cudnn,
            "nccl": self.nccl,
            "index_url": self.index_url,
            "pip_args": list(self.pip_args),
            "action": self.action,
            "mode": self.mode,
        }


@dataclass
class NoPlan:
    explanation: str
    reasons: list[str] = field(default_factory=list)
    options: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def result_document(result: InstallPlan | NoPlan) -> dict[str, Any]:
    """The `--json` shape: {"plan": {...} | null, "reasons", "warnings", "options"}."""
    if isinstance(result, InstallPlan):
        return {
            "plan": result.to_dict(),
            "reasons": result.reasons,
            "warnings": result.warnings,
            "options": [],
        }
    return {
        "plan": None,
        "explanation": result.explanation,
        "reasons": result.reasons,
        "warnings": result.warnings,
        "options": result.options,
    }


def opt_str(value: Any) -> str | None:
    return None if value is None or value == "" else str(value)


@functools.lru_cache(maxsize=256)
def python_minor(version: str) -> tuple[int, int]:
    try:
        v = Version(str(version).strip().rstrip("t"))  # "3.13t" (free-threaded) counts as 3.13
    except InvalidVersion:
        raise ResolveInputError(f"Python version {version!r} is not like 3.11 or 3.11.7") from None
    if v.major != 3:
        raise ResolveInputError(
            f"Python version {version!r}: PyTorch wheels exist only for Python 3"
        )
    return v.major, v.minor


def norm_arch(arch: str) -> str:
    a = arch.strip().lower()
    if a in ("x86_64", "amd64", "x64"):
        return "x86_64"
    if a in ("aarch64", "arm64"):
        return "aarch64"
    raise ResolveInputError(
        f"CPU architecture {arch!r}: PyTorch Linux wheels exist for x86_64 and aarch64 only"
    )


def cc_tuple(cc: str) -> tuple[int, int]:
    m = re.match(r"^\s*(\d+)\.(\d+)\s*$", str(cc))
    if not m:
        raise ResolveInputError(f"compute capability {cc!r} is not like 8.6")
    return int(m.group(1)), int(m.group(2))


@dataclass(frozen=True)
class Spec:
    text: str
    kind: str  # latest | any | set
    specifier: SpecifierSet | None = None

    def allows(self, version: str) -> bool:
        return self.specifier is None or Version(version) in self.specifier


def parse_spec(text: str | None) -> Spec:
    """`latest`, `any`, `2.5` (newest 2.5.x), `2.5.1`, or a PEP 440 set like `>=2.4,<2.6`."""
    t = (text or "latest").strip()
    if t.lower() in ("latest", "any"):
        return Spec(t.lower(), t.lower())
    if re.match(r"^\d+\.\d+$", t):
        return Spec(t, "set", SpecifierSet(f"=={t}.*"))
    if re.match(r"^\d+\.\d+\.\d+$", t):
        return Spec(t, "set", SpecifierSet(f"=={t}"))
    try:
        spec = SpecifierSet(t)
    except InvalidSpecifier:
        raise ResolveInputError(
            f"torch spec {text!r} is not understood; use latest, any, 2.5, 2.5.1 or a range like '>=2.4,<2.6'"
        ) from None
    if not str(spec):
        raise ResolveInputError(f"torch spec {text!r} is empty")
    return Spec(t, "set", spec)


def dedupe(items: Iterable[str]) -> list[str]:
    seen: list[str] = []
    for x in items:
        if x and x not in seen:
            seen.append(x)
    return seen
