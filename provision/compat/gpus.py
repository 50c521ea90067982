"""GPU model lookup by the name nvidia-smi prints, tolerant of the ways that name varies.

nvidia-smi spells one model several ways across drivers and form factors ("Tesla V100-SXM2-32GB",
"NVIDIA A100-SXM4-80GB", "NVIDIA A100 80GB PCIe", "GeForce RTX 3090" on old drivers). A name is
reduced to (model words, form factor, memory): the model words must match exactly, so
"RTX 4090" never matches "RTX 4090 D"; form factor and memory only choose among SKUs of a model.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from provision.compat.loader import CompatData, GpuSpec, load_compat

# Words that vary by driver version or marketing and never tell two models apart.
_NOISE = {"NVIDIA", "TESLA", "GEFORCE", "QUADRO", "RTX", "GENERATION"}
_MEM_RE = re.compile(r"^(\d+)GB$")
_SPLIT_RE = re.compile(r"[\s\-_/,()]+")


@dataclass(frozen=True)
class GpuKey:
    model: tuple[str, ...]
    form: str | None  # pcie | sxm | None
    memory_gb: int | None


def gpu_key(name: str) -> GpuKey:
    tokens = [t for t in _SPLIT_RE.split(name.upper()) if t]
    model: list[str] = []
    form: str | None = None
    memory: int | None = None
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        m = _MEM_RE.match(tok)
        if m:
            memory = int(m.group(1))
        elif tok.isdigit() and i + 1 < len(tokens) and tokens[i + 1] == "GB":  # "80 GB"
            memory = int(tok)
            i += 1
        elif tok == "PCIE":
            form = "pcie"
        elif tok.startswith("SXM") or tok.startswith("HBM"):  # "80GB HBM3" is how SXM H100s print
            form = "sxm"
        elif tok not in _NOISE:
            model.append(tok)
        i += 1
    return GpuKey(tuple(model), form, memory)


def _spec_key(spec: GpuSpec, name: str) -> GpuKey:
    key = gpu_key(name)
    memory = (
        key.memory_gb
        if key.memory_gb is not None
        else (int(spec.vram_gb) if spec.vram_gb else None)
    )
    return GpuKey(key.model, key.form, memory)


def find_gpu(
    name: str, memory_mib: float | None = None, data: CompatData | None = None
) -> GpuSpec | None:
    """The table row for a GPU name, or None if the model is not in the table.

    `memory_mib` (nvidia-smi memory.total) picks the SKU when the name does not say it.
    """
    data = data or load_compat()
    want = gpu_key(name)
    if not want.model:
        return None
    memory = want.memory_gb
    if memory is None and memory_mib:
        memory = round(memory_mib / 1024)
    best: tuple[int, int, GpuSpec] | None = None
    for order, spec in enumerate(data.gpus):
        for spelled in (spec.name, *spec.aliases):
            have = _spec_key(spec, spelled)
            if have.model != want.model:
                continue
            score = 0
            if want.form and have.form == want.form:
                score += 2
            elif want.form and have.form and have.form != want.form:
                score -= 2
            if memory is not None and have.memory_gb is not None:
                score -= min(abs(have.memory_gb - memory), 40) // 4  # nearest SKU by memory
                if have.memory_gb == memory:
                    score += 2
            if best is None or (score, -order) > (best[0], best[1]):
                best = (score, -order, spec)
    return best[2] if best else None


def suggest(name: str, data: CompatData | None = None, n: int = 3) -> list[str]:
    """Close known names, for 'unknown GPU' messages."""
    data = data or load_compat()
    # Compare the model words only: "NVIDIA GeForce" prefixes would dominate a raw comparison.
    by_model: dict[str, str] = {}
    for g in data.gpus:
        by_model.setdefault(" ".join(gpu_key(g.name).model), g.name)
    want = " ".join(gpu_key(name).model) or name.upper()
    return [by_model[m] for m in difflib.get_close_matches(want, list(by_model), n=n, cutoff=0.5)]


def known_names(data: CompatData | None = None) -> list[str]:
    data = data or load_compat()
    return [g.name for g in data.gpus]
