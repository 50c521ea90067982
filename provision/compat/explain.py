"""The explanation when no build fits or the index lags: the options found by relaxing one input
at a time (rule 9: driver, torch version, Python, minor-version compatibility, variant, mirror,
CPU build), the lowest driver that would do (bisected), and the words for each mode.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from packaging.version import Version

from provision.compat.decide import Choice, search
from provision.compat.joins import Context, Driver
from provision.compat.loader import parse_driver
from provision.compat.offer import IndexOffer
from provision.compat.request import HostFacts, NoPlan, TorchRequest, dedupe, parse_spec

_FOREVER_DRIVER = "9999.99.99"  # "any driver", for the what-if searches behind NoPlan options


def pin_text(choice: Choice) -> str:
    return f"{choice.patch.version}+{choice.assessment.variant.tag}"


def lag_warning(offer: IndexOffer | None, known: Choice | None, choice: Choice | None) -> str:
    """"torch 2.14.0 not on <index>; newest there that fits: 2.13.0" when the index lags."""
    if offer is None or known is None or choice is None:
        return ""
    if Version(known.patch.version) > Version(choice.patch.version):
        return (
            f"torch {known.patch.version} not on {offer.where}; newest there that fits: "
            f"{choice.patch.version}"
        )
    if known.assessment.variant.tag != choice.assessment.variant.tag:
        return f"torch {pin_text(known)} not on {offer.where}; newest there that fits: {pin_text(choice)}"
    return ""


def not_on_index(offer: IndexOffer, known: Choice, reasons: list[str]) -> NoPlan:
    tag = known.assessment.variant.tag
    return NoPlan(
        f"torch {pin_text(known)} fits this host, but {offer.where} has no build that fits "
        f"(it has torch {offer.summary()})",
        reasons,
        [
            f"use an index that has it: --index-url https://download.pytorch.org/whl/{tag} "
            "(or a mirror of it)",
            "--relay: this machine downloads the wheels and pushes them to the host",
            "ask for a build the index has: --torch VERSION / --variant TAG",
        ],
    )


def mode_text(mode: str) -> str:
    return {
        "full": "the driver fully supports its CUDA; every GPU has SASS",
        "minor-version-compat": "runs under CUDA minor-version compatibility; every GPU has SASS",
        "ptx-jit": "a GPU runs JIT-compiled PTX",
        "cpu": "CPU build",
        "cuda-build-on-cpu": "CUDA build on a host without GPU",
    }.get(mode, mode)


def what_if(ctx: Context, **changes: Any) -> Choice | None:
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
    return search(new)[0]


def no_plan(ctx: Context, facts: HostFacts, reasons: list[str]) -> NoPlan:
    req = ctx.request
    options: list[str] = []
    pyv = f"{ctx.py[0]}.{ctx.py[1]}"
    if ctx.gpus:
        forever = Driver(ctx.data, _FOREVER_DRIVER, None)
        if what_if(ctx, driver=forever) is not None:
            options.append(driver_option(ctx))
    if ctx.spec.kind == "set":
        alt = what_if(ctx, spec="latest")
        if alt is not None:
            options.append(
                f"use torch {alt.patch.version}+{alt.assessment.variant.tag}, the newest this host runs "
                f"(--torch {alt.patch.version})"
            )
    alt = what_if(ctx, ignore_python=True)
    if alt is not None:
        r = alt.release
        options.append(
            f"use Python {r.python_min}–{r.python_max} (have {pyv}) for torch {alt.patch.version}+"
            f"{alt.assessment.variant.tag}, e.g. a venv made with `uv venv --python {r.python_max}`"
        )
    if not req.allow_minor_version_compat:
        alt = what_if(ctx, allow_minor_version_compat=True)
        if alt is not None:
            options.append(
                f"allow CUDA minor-version compatibility: torch {alt.patch.version}+"
                f"{alt.assessment.variant.tag} runs under it"
            )
    if req.variant and req.variant != "cpu":
        alt = what_if(ctx, variant=None)
        if alt is not None:
            options.append(
                f"drop --variant {req.variant}: torch {alt.patch.version}+{alt.assessment.variant.tag} fits"
            )
    if req.mirror == "pypi":
        alt = what_if(ctx, mirror="pytorch", index_base=None, offer=None)
        if alt is not None:
            options.append(
                f"install from https://download.pytorch.org/whl/{alt.assessment.variant.tag} (or a mirror of "
                f"it): torch {alt.patch.version}+{alt.assessment.variant.tag} fits, but PyPI-only mirrors "
                f"carry only PyPI's default CUDA build"
            )
    if not ctx.gpus and not req.allow_cuda_build_on_cpu:
        alt = what_if(ctx, allow_cuda_build_on_cpu=True)
        if alt is not None:
            options.append(
                f"--allow-cuda-build-on-cpu: torch {pin_text(alt)} from this index, a multi-GB CUDA "
                "download that runs on the CPU only"
            )
    if ctx.gpus and req.variant != "cpu":
        alt = what_if(ctx, variant="cpu", mirror="pytorch", index_base=None, offer=None)
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
    return NoPlan(explanation, reasons, dedupe(options))


def driver_option(ctx: Context) -> str:
    """The lowest driver that yields the newest plan for the request (and the lowest for any)."""
    thresholds = sorted(
        {r.min_driver_linux for r in ctx.data.toolkit_drivers if r.min_driver_linux}
        | {f.min_driver_linux for f in ctx.data.mvc_families.values()},
        key=parse_driver,
    )
    current = ctx.driver.parsed
    if current is not None:
        thresholds = [t for t in thresholds if parse_driver(t) > current]
    plans: dict[str, Choice | None] = {}

    def plan_at(t: str) -> Choice | None:
        if t not in plans:
            plans[t] = what_if(ctx, driver=Driver(ctx.data, t, None))
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
