"""The data joins behind the resolver: each of the host's facts against the tables of
provision/compat/data/ — a GPU against a build's arch list (SASS or PTX), the driver against the
GA-driver and minor-version-compatibility tables, the Python against a release's wheels, a build
against what the index in effect serves (IndexOffer). Each answers a fact, not a decision.
"""

from __future__ import annotations

from dataclasses import dataclass

from provision.compat.loader import (
    CompatData,
    Patch,
    TorchRelease,
    Variant,
    cuda_key,
    parse_driver,
)
from provision.compat.offer import IndexOffer
from provision.compat.request import Spec, TorchRequest, python_minor


@dataclass(frozen=True)
class Gpu:
    label: str
    cc: tuple[int, int]
    max_driver_branch: int | None = None

    @property
    def sm(self) -> str:
        return f"sm_{self.cc[0]}{self.cc[1]}"


class Driver:
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
class Context:
    data: CompatData
    request: TorchRequest
    spec: Spec
    py: tuple[int, int]
    arch: str
    gpus: list[Gpu]
    driver: Driver
    ignore_python: bool = False


def python_check(rel: TorchRelease, ctx: Context) -> tuple[bool, str]:
    if ctx.ignore_python:
        return True, ""
    lo, hi = python_minor(rel.python_min), python_minor(rel.python_max)
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


def serve(variant: Variant, gpu: Gpu) -> tuple[str, str]:
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


def companions(ctx: Context) -> tuple[str, ...]:
    return ("torchvision", "torchaudio") if ctx.request.torchaudio else ("torchvision",)


def offered(offer: IndexOffer, rel: TorchRelease, patch: Patch, tag: str, ctx: Context) -> bool:
    """torch and every companion that was asked about exist there as this build."""
    default = rel.pypi_default_for(ctx.arch)
    if not offer.has("torch", patch.version, tag, default):
        return False
    for name in companions(ctx):
        version = getattr(patch, name, None)
        if version and offer.asked(name) and not offer.has(name, version, tag, default):
            return False
    return True


def not_offered(
    offer: IndexOffer, patch: Patch, tags: list[str], rel: TorchRelease, ctx: Context
) -> str:
    default = rel.pypi_default_for(ctx.arch)
    torch_there = [t for t in tags if offer.has("torch", patch.version, t, default)]
    if torch_there:
        missing = [
            f"{n} {getattr(patch, n)}"
            for n in companions(ctx)
            if getattr(patch, n, None) and offer.asked(n)
        ]
        return f"torch is on {offer.where}, {' / '.join(missing) or 'a companion'} is not"
    return f"not on {offer.where}"
