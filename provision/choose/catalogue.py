"""The GPUs `choose` knows: provision/compat/data/gpus.yaml (one catalogue, with its sources),
looked up by the names people and providers write.

compat/gpus.py already tolerates case, dashes and vendor words (NVIDIA, Tesla, GeForce, RTX)
and picks the SKU by memory and form factor. Providers add their own spellings: vast.ai writes
"RTX 6000Ada", "A100 SXM4", "Q RTX 8000", "RTX 3080Ti"; a name that does not match as written
is tried once more with a number split from the word glued to it and the "Q" prefix dropped.
"""

from __future__ import annotations

import re

from provision.compat.gpus import find_gpu, known_names, suggest
from provision.compat.loader import GpuSpec, load_compat
from provision.errors import ConfigError

_GLUED = re.compile(r"(\d)([A-Za-z]+)")  # 6000Ada, 3080Ti, 4090D; not 80GB-style units
_Q_PREFIX = re.compile(r"^\s*Q\s+", re.IGNORECASE)


def lookup(name: str, memory_gb: float | None = None) -> GpuSpec | None:
    """The catalogue row for `name` (memory picks the SKU when the name does not say it)."""
    memory_mib = memory_gb * 1024 if memory_gb else None
    spec = find_gpu(name, memory_mib)
    if spec is None:
        respelled = _Q_PREFIX.sub("", _GLUED.sub(lambda m: m.group(1) + " " + m.group(2)
                                                 if m.group(2).upper() != "GB" else m.group(0), name))
        if respelled != name:
            spec = find_gpu(respelled, memory_mib)
    return spec


def require(name: str, memory_gb: float | None = None, where: str = "--gpu") -> GpuSpec:
    """`lookup`, or ConfigError naming the nearest known names."""
    spec = lookup(name, memory_gb)
    if spec is None:
        near = suggest(name) or suggest(_GLUED.sub(r"\1 \2", name))
        hint = f"; nearest known: {', '.join(near)}" if near else ""
        raise ConfigError(f"{where} {name!r}: not a GPU provision knows{hint}"
                          " (the catalogue is provision/compat/data/gpus.yaml)")
    return spec


def usable(spec: GpuSpec) -> bool:
    """A row `choose` can predict for: memory, bandwidth and a compute peak."""
    return bool(spec.vram_gb and spec.bw_gbs and spec.fp32)


def default_gpus() -> list[GpuSpec]:
    """Every usable catalogue GPU (when neither --gpu nor --offers narrows the list)."""
    data = load_compat()
    return [g for g in data.gpus if usable(g)]


def all_names() -> list[str]:
    return known_names()
