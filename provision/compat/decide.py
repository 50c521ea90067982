"""The decision: each candidate release's builds assessed against the joins (rules 3–7 of
provision/compat/resolver.py), ranked, and the newest candidate with a build chosen; rejected
candidates are kept, grouped, as the reasons.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from packaging.version import Version

from provision.compat.joins import Context, Gpu, not_offered, offered, python_check, serve
from provision.compat.loader import Patch, TorchRelease, Variant, cuda_key


@dataclass
class Assessment:
    variant: Variant
    ok: bool
    tier: int = 9  # 0 full+SASS, 1 MVC+SASS, 2 PTX (full)
    mode: str = ""
    why_not: str = ""
    warnings: list[str] = field(default_factory=list)


def assess(rel: TorchRelease, variant: Variant, ctx: Context, explicit: bool) -> Assessment:
    a = Assessment(variant, ok=False)
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
    served: list[tuple[Gpu, str, str]] = []
    for gpu in ctx.gpus:
        how, detail = serve(variant, gpu)
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


def rank_key(a: Assessment, rel: TorchRelease, arch: str) -> tuple[Any, ...]:
    cuda = cuda_key(a.variant.cuda) if a.variant.cuda else (0, 0)
    if a.tier == 0:
        is_default = a.variant.tag == rel.pypi_default_for(arch)
        return (0, not is_default, a.variant.status != "stable", -cuda[0], -cuda[1])
    if a.tier == 1:
        return (1, cuda)
    return (2, -cuda[0], -cuda[1])


@dataclass
class Choice:
    release: TorchRelease
    patch: Patch
    assessment: Assessment
    python_warning: str = ""


def candidates(ctx: Context) -> list[tuple[TorchRelease, Patch]]:
    out = [(rel, p) for rel in ctx.data.releases for p in rel.patches if ctx.spec.allows(p.version)]
    return sorted(out, key=lambda rp: Version(rp[1].version), reverse=True)


def evaluate(rel: TorchRelease, patch: Patch, ctx: Context) -> tuple[Choice | None, str]:
    ok, py_note = python_check(rel, ctx)
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
        there = {t: v for t, v in variants.items() if offered(offer, rel, patch, t, ctx)}
        if not there:
            return None, not_offered(offer, patch, list(variants), rel, ctx)
        variants = there
    assessments = [assess(rel, v, ctx, explicit=bool(explicit)) for v in variants.values()]
    good = [a for a in assessments if a.ok]
    if not good:
        shown = [a for a in assessments if a.variant.tag != "cpu" or explicit] or assessments
        return None, "; ".join(f"{a.variant.tag}: {a.why_not}" for a in shown)
    best = min(good, key=lambda a: rank_key(a, rel, ctx.arch))
    return Choice(rel, patch, best, py_note), ""


def group_rejections(rejections: list[tuple[str, str]]) -> list[str]:
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


def search(ctx: Context) -> tuple[Choice | None, list[str]]:
    rejections: list[tuple[str, str]] = []
    for rel, patch in candidates(ctx):
        choice, why = evaluate(rel, patch, ctx)
        if choice:
            return choice, group_rejections(rejections)
        rejections.append((patch.version, why))
    return None, group_rejections(rejections)
