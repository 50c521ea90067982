"""Compatibility knowledge: data tables (data/*.yaml, each with its source) + a pure resolver.

from provision.compat import HostFacts, GpuFact, TorchRequest, resolve_install_plan
"""

from provision.compat.gpus import find_gpu
from provision.compat.loader import CompatData, GpuSpec, load_compat
from provision.compat.request import (
    GpuFact,
    HostFacts,
    InstallPlan,
    NoPlan,
    ResolveInputError,
    TorchRequest,
    result_document,
)
from provision.compat.resolver import resolve_install_plan

__all__ = [
    "CompatData",
    "GpuFact",
    "GpuSpec",
    "HostFacts",
    "InstallPlan",
    "NoPlan",
    "ResolveInputError",
    "TorchRequest",
    "find_gpu",
    "load_compat",
    "resolve_install_plan",
    "result_document",
]
