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

Layout by seam: request.py (inputs, answers, their parsing), joins.py (facts x tables),
decide.py (assess, rank, choose), explain.py (NoPlan options, lag warnings); this module is the
entry point and the plan it writes.
"""

from __future__ import annotations

import re
from dataclasses import replace

from packaging.version import InvalidVersion, Version

from provision.compat.decide import Choice, assess, candidates, search
from provision.compat.explain import lag_warning, mode_text, no_plan, not_on_index
from provision.compat.gpus import find_gpu
from provision.compat.joins import Context, Driver, Gpu
from provision.compat.loader import CompatData, cuda_key, load_compat, tag_of_cuda
from provision.compat.request import (
    HostFacts,
    InstallPlan,
    NoPlan,
    ResolveInputError,
    TorchRequest,
    cc_tuple,
    dedupe,
    norm_arch,
    parse_spec,
    python_minor,
)

DEFAULT_INDEX_BASE = "https://download.pytorch.org/whl"
MIRROR_KINDS = ("pytorch", "pypi")
_VARIANT_RE = re.compile(r"^(cpu|cu\d{3})$")


def _index_url(ctx: Context, tag: str) -> str | None:
    if ctx.request.mirror == "pypi":
        return ctx.request.index_base
    base = (ctx.request.index_base or DEFAULT_INDEX_BASE).rstrip("/")
    if ctx.request.index_base is None:
        return ctx.data.index_url.format(tag=tag)
    return f"{base}/{tag}"


def _pip_args(ctx: Context, choice: Choice, tag: str, index_url: str | None) -> list[str]:
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


def _plan(ctx: Context, choice: Choice, action: str) -> InstallPlan:
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
        warnings=dedupe(warnings),
    )


def _installed(ctx: Context, facts: HostFacts) -> tuple[Choice | None, str, str | None]:
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
    a = assess(rel, variants[tag], ctx, explicit=True)
    if not a.ok:
        return (
            None,
            f"installed torch {facts.torch_version} ({tag}) does not fit: {a.why_not}",
            public,
        )
    return Choice(rel, patch, a), "", public


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
        driver = Driver(data, facts.driver_version, facts.cuda_max)
    except ValueError as exc:
        raise ResolveInputError(str(exc)) from None
    if facts.cuda_max:
        try:
            cuda_key(facts.cuda_max)
        except ValueError:
            raise ResolveInputError(f"CUDA version {facts.cuda_max!r} is not like 12.2") from None
    py = python_minor(facts.python_version)
    arch = norm_arch(facts.arch)
    spec = parse_spec(request.spec)

    reasons: list[str] = []
    gpus: list[Gpu] = []
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
        gpus.append(Gpu(label, cc_tuple(cc), spec_row.max_driver_branch if spec_row else None))
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
    ctx = Context(data, request, spec, py, arch, gpus, driver)
    if not candidates(ctx):
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

    choice, rejected = search(ctx)
    reasons += rejected
    known = search(replace(ctx, request=replace(request, offer=None)))[0] if request.offer else None
    lagging = lag_warning(request.offer, known, choice)

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
            f"chose torch {choice.patch.version}+{a.variant.tag} ({mode_text(a.mode)})",
        ]
        return plan
    if request.offer is not None and known is not None:
        return not_on_index(request.offer, known, reasons)
    return no_plan(ctx, facts, reasons)
