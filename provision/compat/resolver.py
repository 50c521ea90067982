"""Pick the PyTorch build a host can run: facts + request -> InstallPlan | NoPlan.

Pure: the only input besides the arguments is the data in provision/compat/data/. Every rule
that decides adds a line to `reasons`, so a plan can be audited and a refusal explained.

Rules, in order (docs/compat.md repeats them for users):
 1. Inputs: Python X.Y, CPU arch (x86_64 | aarch64), every GPU's compute capability (from the
    facts, else from the GPU table by name), the driver (or nvidia-smi's CUDA version).
 2. Candidates: the torch patch versions the spec allows (`latest`, `any`, `2.5`, `2.5.1`,
    `>=2.4,<2.6`), newest first.
 3. A candidate needs wheels for the host's Python (experimental Pythons allowed, with a warning).
 4. Its variants: the release's builds for the arch; a PyPI-only mirror has only PyPI's default
    build; an explicit --variant narrows to that one; an IndexOffer (what the index in effect
    really serves, provision/compat/offer.py) keeps only builds it has — torch and each companion
    asked about. CPU-only hosts get `cpu`, never a multi-GB CUDA build unless it is named
    (--variant) or allowed (allow_cuda_build_on_cpu).
 5. A CUDA variant must serve EVERY GPU: SASS of the same major and an equal or lower minor
    (sm_86 SASS runs on sm_89), else PTX of a lower-or-equal arch JIT-compiled by the driver.
 6. The driver must fully support the variant's CUDA (driver >= that toolkit's GA driver), or
    meet its major family's minor-version-compatibility floor when allowed. PTX JIT needs full
    support.
 7. Within a release: full support + SASS, then minor-version compatibility + SASS (lowest CUDA
    first: the fewest missing features), then PTX; among fully supported builds the PyPI default,
    then stable, then the newest CUDA.
 8. The first (newest) candidate with a build wins; when an offer hid a newer one, a warning
    says so ("torch 2.14.0 not on <index>; newest there that fits: 2.13.0"). An installed torch that fits the request and
    the hardware is kept instead (`latest` keeps it only if it is that newest version).
 9. No build: NoPlan, with options found by relaxing one input at a time (driver, torch version,
    Python, minor-version compatibility, variant, mirror, CPU build).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from provision.compat.gpus import find_gpu
from provision.compat.loader import (
    CompatData,
    Patch,
    TorchRelease,
    Variant,
    cuda_key,
    load_compat,
    parse_driver,
    tag_of_cuda,
)
from provision.compat.offer import IndexOffer

DEFAULT_INDEX_BASE = "https://download.pytorch.org/whl"
MIRROR_KINDS = ("pytorch", "pypi")
_VARIANT_RE = re.compile(r"^(cpu|cu\d{3})$")
_FOREVER_DRIVER = "9999.99.99"  # "any driver", for the what-if searches behind NoPlan options


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
                cc=_opt_str(g.get("compute_capability")),
                memory_mib=_memory_mib(g),
            )
            for g in raw_gpus
        )
        torch = facts.get("torch") if isinstance(facts.get("torch"), dict) else {}
        py = facts.get("python") if isinstance(facts.get("python"), dict) else {}
        os_ = facts.get("os") if isinstance(facts.get("os"), dict) else {}
        return cls(
            gpus=gpus,
            driver_version=_opt_str(nv.get("driver_version")),
            cuda_max=_opt_str(nv.get("cuda_driver_version") or nv.get("cuda_max")),
            # facts put the agent's interpreter under python.agent; "" makes resolving say so
            python_version=python_version
            or str(py.get("version") or (py.get("agent") or {}).get("version") or ""),
            arch=str(os_.get("arch") or "x86_64"),
            torch_version=_opt_str(torch.get("version")),
            torch_cuda=_opt_str(torch.get("cuda")),
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


# ---------------------------------------------------------------------------------------------
# Inputs


def _opt_str(value: Any) -> str | None:
    return None if value is None or value == "" else str(value)


@functools.lru_cache(maxsize=256)
def _python_minor(version: str) -> tuple[int, int]:
    try:
        v = Version(str(version).strip().rstrip("t"))  # "3.13t" (free-threaded) counts as 3.13
    except InvalidVersion:
        raise ResolveInputError(f"Python version {version!r} is not like 3.11 or 3.11.7") from None
    if v.major != 3:
        raise ResolveInputError(
            f"Python version {version!r}: PyTorch wheels exist only for Python 3"
        )
    return v.major, v.minor


def _norm_arch(arch: str) -> str:
    a = arch.strip().lower()
    if a in ("x86_64", "amd64", "x64"):
        return "x86_64"
    if a in ("aarch64", "arm64"):
        return "aarch64"
    raise ResolveInputError(
        f"CPU architecture {arch!r}: PyTorch Linux wheels exist for x86_64 and aarch64 only"
    )


def _cc_tuple(cc: str) -> tuple[int, int]:
    m = re.match(r"^\s*(\d+)\.(\d+)\s*$", str(cc))
    if not m:
        raise ResolveInputError(f"compute capability {cc!r} is not like 8.6")
    return int(m.group(1)), int(m.group(2))


@dataclass(frozen=True)
class _Spec:
    text: str
    kind: str  # latest | any | set
    specifier: SpecifierSet | None = None

    def allows(self, version: str) -> bool:
        return self.specifier is None or Version(version) in self.specifier


def parse_spec(text: str | None) -> _Spec:
    """`latest`, `any`, `2.5` (newest 2.5.x), `2.5.1`, or a PEP 440 set like `>=2.4,<2.6`."""
    t = (text or "latest").strip()
    if t.lower() in ("latest", "any"):
        return _Spec(t.lower(), t.lower())
    if re.match(r"^\d+\.\d+$", t):
        return _Spec(t, "set", SpecifierSet(f"=={t}.*"))
    if re.match(r"^\d+\.\d+\.\d+$", t):
        return _Spec(t, "set", SpecifierSet(f"=={t}"))
    try:
        spec = SpecifierSet(t)
    except InvalidSpecifier:
        raise ResolveInputError(
            f"torch spec {text!r} is not understood; use latest, any, 2.5, 2.5.1 or a range like '>=2.4,<2.6'"
        ) from None
    if not str(spec):
        raise ResolveInputError(f"torch spec {text!r} is empty")
    return _Spec(t, "set", spec)


@dataclass(frozen=True)
class _Gpu:
    label: str
    cc: tuple[int, int]
    max_driver_branch: int | None = None

    @property
    def sm(self) -> str:
        return f"sm_{self.cc[0]}{self.cc[1]}"


class _Driver:
    """What the driver runs: full support from the GA-driver table (or nvidia-smi's CUDA version,
    which a forward-compatibility package can raise), minor-version compatibility from family floors."""

    def __init__(self, data: CompatData, version: str | None, cuda_max: str | None) -> None:
        self.data = data
        self.version = version
        self.parsed = parse_driver(version) if version else None
        self.cuda_max = cuda_max
        self.cuda_from_driver = data.max_cuda_for_driver(version) if version else None

    @property
    def present(self) -> bool:
        return self.parsed is not None or self.cuda_max is not None

    @property
    def label(self) -> str:
        return f"driver {self.version}" if self.version else f"driver with CUDA {self.cuda_max}"

    @property
    def max_cuda(self) -> str | None:
        cands = [c for c in (self.cuda_from_driver, self.cuda_max) if c]
        return max(cands, key=cuda_key) if cands else None

    def full(self, cuda: str) -> bool:
        need = self.data.min_driver_full(cuda)
        if need and self.parsed is not None and self.parsed >= parse_driver(need):
            return True
        return bool(self.cuda_max) and cuda_key(self.cuda_max) >= cuda_key(cuda)  # type: ignore[arg-type]

    def mvc(self, cuda: str) -> bool:
        floor = self.data.mvc_floor(cuda)
        if not floor:
            return False
        if self.parsed is not None:
            return self.parsed >= parse_driver(floor)
        # Only nvidia-smi's CUDA is known: a driver reporting X.y (X >= 11) is at least the X.0 GA
        # driver, which is the family floor.
        return bool(self.cuda_max) and cuda_key(self.cuda_max)[0] == cuda_key(cuda)[0]  # type: ignore[arg-type]


@dataclass
class _Assessment:
    variant: Variant
    ok: bool
    tier: int = 9  # 0 full+SASS, 1 MVC+SASS, 2 PTX (full)
    mode: str = ""
    why_not: str = ""
    warnings: list[str] = field(default_factory=list)


@dataclass
class _Context:
    data: CompatData
    request: TorchRequest
    spec: _Spec
    py: tuple[int, int]
    arch: str
    gpus: list[_Gpu]
    driver: _Driver
    ignore_python: bool = False


# ---------------------------------------------------------------------------------------------
# Rules


def _python_check(rel: TorchRelease, ctx: _Context) -> tuple[bool, str]:
    if ctx.ignore_python:
        return True, ""
    lo, hi = _python_minor(rel.python_min), _python_minor(rel.python_max)
    pyv = f"{ctx.py[0]}.{ctx.py[1]}"
    if lo <= ctx.py <= hi:
        return True, ""
    if pyv in rel.python_experimental:
        return (
            True,
            f"Python {pyv} is experimental for torch {rel.version} (supported {rel.python_min}–{rel.python_max})",
        )
    if pyv in rel.python_unconfirmed:
        return True, (
            f"Python {pyv} for torch {rel.version} is listed in RELEASE.md but not in the release "
            f"announcement (confirmed {rel.python_min}–{rel.python_max})"
        )
    return False, f"no wheels for Python {pyv}"


def _serve(variant: Variant, gpu: _Gpu) -> tuple[str, str]:
    """('sass'|'ptx'|'', detail) for one GPU and one build."""
    major, minor = gpu.cc
    sass = [a for a in variant.archs if a.major == major and a.minor <= minor]
    if sass:
        best = max(sass, key=lambda a: a.minor)
        if best.minor != minor:
            return (
                "sass",
                f"{gpu.label} ({gpu.sm}) runs the build's sm_{best.major}{best.minor} SASS (binary-compatible: same major, lower minor)",
            )
        return "sass", ""
    ptx = [a for a in variant.archs if a.ptx and a.cc <= gpu.cc]
    if ptx:
        best = max(ptx, key=lambda a: a.cc)
        return "ptx", f"compute_{best.major}{best.minor}"
    return "", ""


def _assess(rel: TorchRelease, variant: Variant, ctx: _Context, explicit: bool) -> _Assessment:
    a = _Assessment(variant, ok=False)
    if variant.tag == "cpu":
        if ctx.gpus and not explicit:
            a.why_not = "cpu build not chosen on a GPU host unless asked for (--variant cpu)"
            return a
        a.ok, a.tier, a.mode = True, 0, "cpu"
        if ctx.gpus:
            a.warnings.append("CPU-only build on a GPU host: the GPUs stay unused")
        return a
    cuda = variant.cuda or ""
    if not ctx.gpus:
        if not explicit and ctx.request.mirror != "pypi":
            a.why_not = "no GPU: the cpu build is used"
            return a
        if not explicit and not ctx.request.allow_cuda_build_on_cpu:
            a.why_not = (
                "no NVIDIA GPU: this CUDA build is a multi-GB download that runs on the CPU only "
                "(--allow-cuda-build-on-cpu to accept it)"
            )
            return a
        a.ok, a.tier, a.mode = True, 0, "cuda-build-on-cpu"
        a.warnings.append(
            f"no NVIDIA GPU found: the {variant.tag} build runs on the CPU only (and is a multi-GB download)"
        )
        return a
    # Coverage first: a GPU no build can serve is the real reason, whatever the driver.
    served: list[tuple[_Gpu, str, str]] = []
    for gpu in ctx.gpus:
        how, detail = _serve(variant, gpu)
        if not how:
            a.why_not = f"no {gpu.sm} SASS or PTX (build carries {variant.arch_text})"
            return a
        served.append((gpu, how, detail))
    if not ctx.driver.present:
        a.why_not = "no NVIDIA driver found (nvidia-smi missing or failing)"
        return a
    drv = ctx.driver
    full_need = ctx.data.min_driver_full(cuda)
    floor = ctx.data.mvc_floor(cuda)
    if drv.full(cuda):
        mode = "full"
    elif ctx.request.allow_minor_version_compat and drv.mvc(cuda):
        mode = "minor-version-compat"
    else:
        need = f"driver ≥ {full_need} (CUDA {cuda})"
        if floor and not ctx.request.allow_minor_version_compat and drv.mvc(cuda):
            need += f"; ≥ {floor} would do with minor-version compatibility, which is disabled"
        elif floor and floor != full_need:
            need += f" or ≥ {floor} (CUDA {cuda.split('.')[0]}.x minor-version compatibility)"
        a.why_not = f"needs {need}, have {drv.label}"
        return a
    uses_ptx = False
    for gpu, how, detail in served:
        if how == "sass":
            if detail:
                a.warnings.append(detail)
            continue
        if mode != "full":
            a.why_not = (
                f"{gpu.sm} only via {detail} PTX, and PTX JIT is unavailable under minor-version "
                f"compatibility (needs driver ≥ {full_need})"
            )
            return a
        uses_ptx = True
        a.warnings.append(
            f"{gpu.label} ({gpu.sm}) has no SASS in this build: kernels are JIT-compiled from "
            f"{detail} PTX on first use (slow first run; cuDNN/cuBLAS may lack kernels for it)"
        )
    if mode == "minor-version-compat":
        a.warnings.append(
            f"{drv.label} fully supports CUDA ≤ {drv.max_cuda}; this {variant.tag} build (CUDA {cuda}) runs under "
            f"minor-version compatibility (driver ≥ {floor}): PTX JIT is unavailable, APIs that need a newer "
            f"driver fail, and torch.compile/Triton kernels may be rejected. Full support needs driver ≥ {full_need}."
        )
    a.ok, a.mode = True, ("ptx-jit" if uses_ptx else mode)
    a.tier = 2 if uses_ptx else (0 if mode == "full" else 1)
    return a


def _rank(a: _Assessment, rel: TorchRelease, arch: str) -> tuple[Any, ...]:
    cuda = cuda_key(a.variant.cuda) if a.variant.cuda else (0, 0)
    if a.tier == 0:
        is_default = a.variant.tag == rel.pypi_default_for(arch)
        return (0, not is_default, a.variant.status != "stable", -cuda[0], -cuda[1])
    if a.tier == 1:
        return (1, cuda)
    return (2, -cuda[0], -cuda[1])


@dataclass
class _Choice:
    release: TorchRelease
    patch: Patch
    assessment: _Assessment
    python_warning: str = ""


def _candidates(ctx: _Context) -> list[tuple[TorchRelease, Patch]]:
    out = [(rel, p) for rel in ctx.data.releases for p in rel.patches if ctx.spec.allows(p.version)]
    return sorted(out, key=lambda rp: Version(rp[1].version), reverse=True)


def _evaluate(rel: TorchRelease, patch: Patch, ctx: _Context) -> tuple[_Choice | None, str]:
    ok, py_note = _python_check(rel, ctx)
    if not ok:
        return None, py_note
    variants = rel.variants_for(ctx.arch)
    cuda_wanted = ctx.gpus and ctx.request.variant != "cpu"
    if ctx.arch == "aarch64" and cuda_wanted and not any(v.cuda for v in variants.values()):
        return None, "no aarch64 CUDA builds in the table for this release"
    if ctx.request.mirror == "pypi":
        default = rel.pypi_default_for(ctx.arch)
        if default is None or default not in variants:
            return None, "PyPI's build for this arch is not in the table"
        variants = {default: variants[default]}
    explicit = ctx.request.variant
    if explicit:
        if explicit not in variants:
            where = "on a PyPI-only mirror" if ctx.request.mirror == "pypi" else "published"
            return None, f"no {explicit} build {where} (builds: {', '.join(variants)})"
        variants = {explicit: variants[explicit]}
    offer = ctx.request.offer
    if offer is not None:
        there = {t: v for t, v in variants.items() if _offered(offer, rel, patch, t, ctx)}
        if not there:
            return None, _not_offered(offer, patch, list(variants), rel, ctx)
        variants = there
    assessments = [_assess(rel, v, ctx, explicit=bool(explicit)) for v in variants.values()]
    good = [a for a in assessments if a.ok]
    if not good:
        shown = [a for a in assessments if a.variant.tag != "cpu" or explicit] or assessments
        return None, "; ".join(f"{a.variant.tag}: {a.why_not}" for a in shown)
    best = min(good, key=lambda a: _rank(a, rel, ctx.arch))
    return _Choice(rel, patch, best, py_note), ""


def _companions(ctx: _Context) -> tuple[str, ...]:
    return ("torchvision", "torchaudio") if ctx.request.torchaudio else ("torchvision",)


def _offered(offer: IndexOffer, rel: TorchRelease, patch: Patch, tag: str, ctx: _Context) -> bool:
    """torch and every companion that was asked about exist there as this build."""
    default = rel.pypi_default_for(ctx.arch)
    if not offer.has("torch", patch.version, tag, default):
        return False
    for name in _companions(ctx):
        version = getattr(patch, name, None)
        if version and offer.asked(name) and not offer.has(name, version, tag, default):
            return False
    return True


def _not_offered(
    offer: IndexOffer, patch: Patch, tags: list[str], rel: TorchRelease, ctx: _Context
) -> str:
    default = rel.pypi_default_for(ctx.arch)
    torch_there = [t for t in tags if offer.has("torch", patch.version, t, default)]
    if torch_there:
        missing = [
            f"{n} {getattr(patch, n)}"
            for n in _companions(ctx)
            if getattr(patch, n, None) and offer.asked(n)
        ]
        return f"torch is on {offer.where}, {' / '.join(missing) or 'a companion'} is not"
    return f"not on {offer.where}"


def _group(rejections: list[tuple[str, str]]) -> list[str]:
    """Consecutive candidates rejected for the same reason become one line."""
    lines: list[str] = []
    run: list[str] = []
    last = None
    for version, why in [*rejections, ("", None)]:  # type: ignore[list-item]
        if why != last and run:
            span = run[0] if len(run) == 1 else f"{run[-1]} … {run[0]}"
            lines.append(f"torch {span}: {last}")
            run = []
        if why is not None:
            run.append(version)
        last = why
    return lines


def _search(ctx: _Context) -> tuple[_Choice | None, list[str]]:
    rejections: list[tuple[str, str]] = []
    for rel, patch in _candidates(ctx):
        choice, why = _evaluate(rel, patch, ctx)
        if choice:
            return choice, _group(rejections)
        rejections.append((patch.version, why))
    return None, _group(rejections)


def _index_url(ctx: _Context, tag: str) -> str | None:
    if ctx.request.mirror == "pypi":
        return ctx.request.index_base
    base = (ctx.request.index_base or DEFAULT_INDEX_BASE).rstrip("/")
    if ctx.request.index_base is None:
        return ctx.data.index_url.format(tag=tag)
    return f"{base}/{tag}"


def _pip_args(ctx: _Context, choice: _Choice, tag: str, index_url: str | None) -> list[str]:
    p = choice.patch
    legacy = choice.release.pip_index == "extra" and ctx.request.mirror == "pytorch"
    # 1.x: with --extra-index-url the +cuXYZ local version must be pinned to win over PyPI's build
    suffix = f"+{tag}" if legacy else ""
    pins = [f"torch=={p.version}{suffix}"]
    if p.torchvision:
        pins.append(f"torchvision=={p.torchvision}{suffix}")
    if ctx.request.torchaudio and p.torchaudio:
        pins.append(f"torchaudio=={p.torchaudio}{suffix}")
    args = ["install", *pins]
    # always named: a command copied without it gets whatever index the user's pip.conf says
    index_url = index_url or "https://pypi.org/simple"
    args += ["--extra-index-url" if legacy else "--index-url", index_url]
    return args


def _plan(ctx: _Context, choice: _Choice, action: str) -> InstallPlan:
    a = choice.assessment
    tag = a.variant.tag
    rel = choice.release
    url = _index_url(ctx, tag)
    warnings: list[str] = []
    if choice.python_warning:
        warnings.append(choice.python_warning)
    warnings += a.warnings
    if a.variant.status == "experimental" and tag != "cpu":
        warnings.append(f"{tag} is an experimental build of torch {rel.version} (RELEASE.md)")
    if tag != "cpu" and rel.arch_confidence != "high":
        warnings.append(
            f"the arch list of torch {rel.version} {tag} ({a.variant.arch_text}) is {rel.arch_confidence} "
            f"confidence: `provision check HOST` verifies it on the GPU"
        )
    if ctx.request.mirror == "pypi" and rel.pypi_default_confidence != "high":
        warnings.append(
            f"that PyPI serves {tag} for torch {rel.version} is {rel.pypi_default_confidence} confidence"
        )
    if ctx.arch == "aarch64" and tag != "cpu":
        warnings.append("aarch64 arch lists come from RELEASE.md's note (medium confidence)")
    if any(g.cc < (5, 0) for g in ctx.gpus) and tag != "cpu":
        warnings.append(
            "Kepler GPUs: cuDNN support in this build is unverified; `provision check HOST` runs a conv to confirm"
        )
    p = choice.patch
    audio = p.torchaudio if ctx.request.torchaudio else None
    va, vt = Version(audio or "0"), Version(p.version)
    if action == "install" and audio and va.major == vt.major and va.release[:2] < vt.release[:2]:
        warnings.append(
            f"no torchaudio {rel.version}: torchaudio {audio} (stable ABI) serves torch ≥ 2.11"
        )
    return InstallPlan(
        torch=p.version,
        torchvision=p.torchvision,
        torchaudio=audio,
        variant=tag,
        release=rel.version,
        cuda=a.variant.cuda,
        cudnn=a.variant.cudnn,
        nccl=a.variant.nccl,
        index_url=url,
        pip_args=[] if action == "keep" else _pip_args(ctx, choice, tag, url),
        action=action,
        mode=a.mode,
        warnings=_dedupe(warnings),
    )


def _dedupe(items: Iterable[str]) -> list[str]:
    seen: list[str] = []
    for x in items:
        if x and x not in seen:
            seen.append(x)
    return seen


def _installed(ctx: _Context, facts: HostFacts) -> tuple[_Choice | None, str, str | None]:
    """(choice if the installed torch fits the hardware, why not, its public version)."""
    if not facts.torch_version:
        return None, "", None
    try:
        v = Version(facts.torch_version)
    except InvalidVersion:
        return None, f"installed torch version {facts.torch_version!r} is not parseable", None
    public = v.public
    local = v.local or ""
    if re.match(r"^(cpu|cu\d{3})$", local):
        tag = local
    elif local:
        return (
            None,
            f"installed torch {facts.torch_version} is a {local} build, not a CUDA/CPU build from this table",
            public,
        )
    elif facts.torch_cuda:
        tag = tag_of_cuda(facts.torch_cuda)
    else:
        tag = ""
    rel = ctx.data.release(public)
    patch = next((p for p in rel.patches if p.version == public), None) if rel else None
    if rel is None or patch is None:
        return (
            None,
            f"installed torch {facts.torch_version} is not in the compatibility table",
            public,
        )
    if not tag:
        # a plain PyPI wheel whose CUDA the facts did not say
        tag = rel.pypi_default_for(ctx.arch) or ""
    variants = rel.variants_for(ctx.arch)
    if tag not in variants:
        return (
            None,
            f"installed torch {facts.torch_version} ({tag}): no such build in the table",
            public,
        )
    if tag == "cpu" and ctx.gpus and ctx.request.variant != "cpu":
        return (
            None,
            f"installed torch {facts.torch_version} is a CPU build: the GPUs would stay unused",
            public,
        )
    a = _assess(rel, variants[tag], ctx, explicit=True)
    if not a.ok:
        return (
            None,
            f"installed torch {facts.torch_version} ({tag}) does not fit: {a.why_not}",
            public,
        )
    return _Choice(rel, patch, a), "", public


# ---------------------------------------------------------------------------------------------
# Entry point


def resolve_install_plan(
    facts: HostFacts, request: TorchRequest | None = None, data: CompatData | None = None
) -> InstallPlan | NoPlan:
    """The PyTorch build to install (or keep) on a host, with every reason; NoPlan if none fits."""
    request = request or TorchRequest()
    data = data or load_compat()
    if request.mirror not in MIRROR_KINDS:
        raise ResolveInputError(
            f"mirror kind {request.mirror!r}: use one of {', '.join(MIRROR_KINDS)}"
        )
    if request.variant is not None and not _VARIANT_RE.match(request.variant):
        raise ResolveInputError(f"variant {request.variant!r} is not cpu or cuXYZ (e.g. cu126)")
    try:
        driver = _Driver(data, facts.driver_version, facts.cuda_max)
    except ValueError as exc:
        raise ResolveInputError(str(exc)) from None
    if facts.cuda_max:
        try:
            cuda_key(facts.cuda_max)
        except ValueError:
            raise ResolveInputError(f"CUDA version {facts.cuda_max!r} is not like 12.2") from None
    py = _python_minor(facts.python_version)
    arch = _norm_arch(facts.arch)
    spec = parse_spec(request.spec)

    reasons: list[str] = []
    gpus: list[_Gpu] = []
    for i, g in enumerate(facts.gpus):
        spec_row = find_gpu(g.name, g.memory_mib, data) if g.name else None
        cc = g.cc or (spec_row.cc if spec_row else None)
        label = g.name or f"GPU {i}"
        if not cc:
            return NoPlan(
                f"the compute capability of GPU {i} ({label}) is unknown: it is not in the facts and the "
                f"name is not in the GPU table",
                options=[
                    "give it explicitly: provision check --offline --cc X.Y ...",
                    "add the model to provision/compat/data/gpus.yaml",
                ],
            )
        gpus.append(_Gpu(label, _cc_tuple(cc), spec_row.max_driver_branch if spec_row else None))
        reasons.append(
            f"GPU {i}: "
            + (f"{g.name}, " if g.name else "")
            + f"compute capability {cc}"
            + ("" if g.cc else " (from the GPU table)")
        )
    if not gpus:
        reasons.append("no NVIDIA GPU: CPU build")
    elif driver.present:
        reasons.append(
            f"{driver.label}: "
            + (
                f"full support for CUDA ≤ {driver.max_cuda}"
                if driver.max_cuda
                else "older than every CUDA here (< 10.2)"
            )
            + (
                f" (nvidia-smi reports {driver.cuda_max})"
                if driver.cuda_max and driver.version
                else ""
            )
        )
    reasons.append(f"Python {py[0]}.{py[1]}, {arch}")
    ctx = _Context(data, request, spec, py, arch, gpus, driver)
    if not _candidates(ctx):
        known = ", ".join(r.version for r in data.releases)
        return NoPlan(
            f"no torch release in the table matches {spec.text!r}",
            reasons,
            [f"known releases: {known}", "use --torch latest"],
        )
    reasons.append(
        f"request: torch {spec.text}"
        + (f", variant {request.variant}" if request.variant else "")
        + ("" if request.allow_minor_version_compat else ", minor-version compatibility disabled")
        + (", PyPI-only mirror (PyPI's default build only)" if request.mirror == "pypi" else "")
    )

    choice, rejected = _search(ctx)
    reasons += rejected
    known = _search(replace(ctx, request=replace(request, offer=None)))[0] if request.offer else None
    lagging = _lagging(request.offer, known, choice)

    kept, not_kept, installed_public = _installed(ctx, facts)
    if kept is not None:
        fits_spec = (
            spec.kind == "any"
            or (
                spec.kind == "latest"
                and choice is not None
                and installed_public == choice.patch.version
            )
            or (spec.kind == "set" and spec.allows(kept.patch.version))
        ) and (not request.variant or request.variant == kept.assessment.variant.tag)
        if fits_spec:
            plan = _plan(ctx, kept, "keep")
            plan.reasons = [
                *reasons,
                f"installed torch {facts.torch_version} fits the request and the hardware: keep it",
            ]
            return plan
        reasons.append(
            f"installed torch {facts.torch_version} fits the hardware but not the request {spec.text!r}"
        )
    elif not_kept:
        reasons.append(not_kept)

    if choice is not None:
        plan = _plan(ctx, choice, "install")
        a = choice.assessment
        if lagging:
            plan.warnings.insert(0, lagging)
        plan.reasons = [
            *reasons,
            *([lagging] if lagging else []),
            f"chose torch {choice.patch.version}+{a.variant.tag} ({_mode_text(a.mode)})",
        ]
        return plan
    if request.offer is not None and known is not None:
        return _not_on_index(request.offer, known, reasons)
    return _no_plan(ctx, facts, reasons)


def _pin(choice: _Choice) -> str:
    return f"{choice.patch.version}+{choice.assessment.variant.tag}"


def _lagging(offer: IndexOffer | None, known: _Choice | None, choice: _Choice | None) -> str:
    """"torch 2.14.0 not on <index>; newest there that fits: 2.13.0" when the index lags."""
    if offer is None or known is None or choice is None:
        return ""
    if Version(known.patch.version) > Version(choice.patch.version):
        return (
            f"torch {known.patch.version} not on {offer.where}; newest there that fits: "
            f"{choice.patch.version}"
        )
    if known.assessment.variant.tag != choice.assessment.variant.tag:
        return f"torch {_pin(known)} not on {offer.where}; newest there that fits: {_pin(choice)}"
    return ""


def _not_on_index(offer: IndexOffer, known: _Choice, reasons: list[str]) -> NoPlan:
    tag = known.assessment.variant.tag
    return NoPlan(
        f"torch {_pin(known)} fits this host, but {offer.where} has no build that fits "
        f"(it has torch {offer.summary()})",
        reasons,
        [
            f"use an index that has it: --index-url https://download.pytorch.org/whl/{tag} "
            "(or a mirror of it)",
            "--relay: this machine downloads the wheels and pushes them to the host",
            "ask for a build the index has: --torch VERSION / --variant TAG",
        ],
    )


def _mode_text(mode: str) -> str:
    return {
        "full": "the driver fully supports its CUDA; every GPU has SASS",
        "minor-version-compat": "runs under CUDA minor-version compatibility; every GPU has SASS",
        "ptx-jit": "a GPU runs JIT-compiled PTX",
        "cpu": "CPU build",
        "cuda-build-on-cpu": "CUDA build on a host without GPU",
    }.get(mode, mode)


def _what_if(ctx: _Context, **changes: Any) -> _Choice | None:
    """Search again with one input relaxed (for NoPlan options)."""
    request_changes = {k: v for k, v in changes.items() if k in TorchRequest.__dataclass_fields__}
    request = replace(ctx.request, **request_changes)
    spec = parse_spec(request.spec)
    new = replace(
        ctx,
        request=request,
        spec=spec,
        driver=changes.get("driver", ctx.driver),
        ignore_python=changes.get("ignore_python", False),
    )
    return _search(new)[0]


def _no_plan(ctx: _Context, facts: HostFacts, reasons: list[str]) -> NoPlan:
    req = ctx.request
    options: list[str] = []
    pyv = f"{ctx.py[0]}.{ctx.py[1]}"
    if ctx.gpus:
        forever = _Driver(ctx.data, _FOREVER_DRIVER, None)
        if _what_if(ctx, driver=forever) is not None:
            options.append(_driver_option(ctx))
    if ctx.spec.kind == "set":
        alt = _what_if(ctx, spec="latest")
        if alt is not None:
            options.append(
                f"use torch {alt.patch.version}+{alt.assessment.variant.tag}, the newest this host runs "
                f"(--torch {alt.patch.version})"
            )
    alt = _what_if(ctx, ignore_python=True)
    if alt is not None:
        r = alt.release
        options.append(
            f"use Python {r.python_min}–{r.python_max} (have {pyv}) for torch {alt.patch.version}+"
            f"{alt.assessment.variant.tag}, e.g. a venv made with `uv venv --python {r.python_max}`"
        )
    if not req.allow_minor_version_compat:
        alt = _what_if(ctx, allow_minor_version_compat=True)
        if alt is not None:
            options.append(
                f"allow CUDA minor-version compatibility: torch {alt.patch.version}+"
                f"{alt.assessment.variant.tag} runs under it"
            )
    if req.variant and req.variant != "cpu":
        alt = _what_if(ctx, variant=None)
        if alt is not None:
            options.append(
                f"drop --variant {req.variant}: torch {alt.patch.version}+{alt.assessment.variant.tag} fits"
            )
    if req.mirror == "pypi":
        alt = _what_if(ctx, mirror="pytorch", index_base=None, offer=None)
        if alt is not None:
            options.append(
                f"install from https://download.pytorch.org/whl/{alt.assessment.variant.tag} (or a mirror of "
                f"it): torch {alt.patch.version}+{alt.assessment.variant.tag} fits, but PyPI-only mirrors "
                f"carry only PyPI's default CUDA build"
            )
    if not ctx.gpus and not req.allow_cuda_build_on_cpu:
        alt = _what_if(ctx, allow_cuda_build_on_cpu=True)
        if alt is not None:
            options.append(
                f"--allow-cuda-build-on-cpu: torch {_pin(alt)} from this index, a multi-GB CUDA "
                "download that runs on the CPU only"
            )
    if ctx.gpus and req.variant != "cpu":
        alt = _what_if(ctx, variant="cpu", mirror="pytorch", index_base=None, offer=None)
        if alt is not None:
            options.append(
                f"CPU-only build: torch {alt.patch.version}+cpu (--variant cpu); the GPUs stay unused"
            )
    if not options:
        options.append(
            "no relaxation of driver, torch version, Python or variant gives a build; see the reasons"
        )
    what = f"torch {ctx.spec.text}" + (f" ({req.variant})" if req.variant else "")
    hw = ", ".join(sorted({f"{g.label} ({g.sm})" for g in ctx.gpus})) or "a CPU-only host"
    driver = ctx.driver.label if ctx.driver.present else "no NVIDIA driver"
    with_ = f"{driver} and Python {pyv}" if ctx.gpus else f"Python {pyv}"
    explanation = f"no PyTorch build matches {what} on {hw} with {with_}"
    return NoPlan(explanation, reasons, _dedupe(options))


def _driver_option(ctx: _Context) -> str:
    """The lowest driver that yields the newest plan for the request (and the lowest for any)."""
    thresholds = sorted(
        {r.min_driver_linux for r in ctx.data.toolkit_drivers if r.min_driver_linux}
        | {f.min_driver_linux for f in ctx.data.mvc_families.values()},
        key=parse_driver,
    )
    current = ctx.driver.parsed
    if current is not None:
        thresholds = [t for t in thresholds if parse_driver(t) > current]
    plans: dict[str, _Choice | None] = {}

    def plan_at(t: str) -> _Choice | None:
        if t not in plans:
            plans[t] = _what_if(ctx, driver=_Driver(ctx.data, t, None))
        return plans[t]

    # A newer driver never loses a build, so both searches are monotonic: bisect them.
    target = plan_at(thresholds[-1]) if thresholds else None
    if target is None:
        return "upgrade the NVIDIA driver"
    lowest_any = _bisect(thresholds, lambda t: plan_at(t) is not None)
    lowest_newest = _bisect(
        thresholds,
        lambda t: (c := plan_at(t)) is not None and c.patch.version == target.patch.version,
    )
    found = [(lowest_any, plan_at(lowest_any))]
    if lowest_newest != lowest_any:
        found.append((lowest_newest, plan_at(lowest_newest)))
    t, alt = found[-1]
    assert alt is not None
    text = f"upgrade the NVIDIA driver to ≥ {t}: then torch {alt.patch.version}+{alt.assessment.variant.tag}"
    if len(found) > 1:
        t0, alt0 = found[0]
        assert alt0 is not None
        text += f" (≥ {t0} already allows torch {alt0.patch.version}+{alt0.assessment.variant.tag})"
    branch = int(t.split(".")[0])
    caps = [g for g in ctx.gpus if g.max_driver_branch and g.max_driver_branch < branch]
    if caps:
        text += (
            f"; but the last driver branch for {caps[0].label} is R{caps[0].max_driver_branch} "
            f"(unverified), so R{branch} may not support it"
        )
    return text


def _bisect(ordered: list[str], pred: Callable[[str], bool]) -> str:
    """The first item for which a monotonic `pred` holds (the last one must hold)."""
    lo, hi = 0, len(ordered) - 1
    while lo < hi:
        mid = (lo + hi) // 2
        if pred(ordered[mid]):
            hi = mid
        else:
            lo = mid + 1
    return ordered[lo]
