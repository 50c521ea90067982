"""Load the compatibility tables in provision/compat/data/ into typed, validated objects.

One YAML file per table, each with its `source:`. Validation happens here, once, so the
resolver can trust the data; a bad edit fails with the file, line and value at fault.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from packaging.version import InvalidVersion, Version

from provision.errors import ConfigError

DATA_DIR = Path(__file__).resolve().parent / "data"
TABLE_FILES = {
    "cuda_toolkit_drivers": "cuda_toolkit_drivers.yaml",
    "cuda_minor_version_compat": "cuda_minor_version_compat.yaml",
    "torch_releases": "torch_releases.yaml",
    "gpus": "gpus.yaml",
}
_LINE = "__line__"
_TAG_RE = re.compile(r"^cu(\d+)(\d)$")
_ARCH_RE = re.compile(r"^(\d+)\.(\d+)(\+PTX)?$")
_DRIVER_RE = re.compile(r"^\d+(\.\d+){1,2}$")


class _LineLoader(yaml.SafeLoader):
    """SafeLoader that remembers each mapping's line, so errors can say file:line."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        mapping = super().construct_mapping(node, deep=deep)
        mapping[_LINE] = node.start_mark.line + 1
        return mapping


@functools.lru_cache(maxsize=1024)
def parse_driver(version: str) -> tuple[int, ...]:
    """'535.104.05' -> (535, 104, 5); compared component-wise as NVIDIA numbers them."""
    text = str(version).strip()
    if not _DRIVER_RE.match(text):
        raise ValueError(f"not an NVIDIA driver version: {version!r} (expected like 535.104.05)")
    return tuple(int(p) for p in text.split("."))


def cuda_of_tag(tag: str) -> str | None:
    """'cu126' -> '12.6', 'cu102' -> '10.2'; 'cpu' -> None."""
    m = _TAG_RE.match(tag)
    return f"{int(m.group(1))}.{m.group(2)}" if m else None


def tag_of_cuda(cuda: str) -> str:
    """'12.6' -> 'cu126' (the wheel tag PyTorch uses)."""
    major, minor = str(cuda).split(".")[:2]
    return f"cu{int(major)}{int(minor)}"


@functools.lru_cache(maxsize=256)
def cuda_key(cuda: str) -> tuple[int, int]:
    major, minor = str(cuda).split(".")[:2]
    return int(major), int(minor)


@dataclass(frozen=True)
class Arch:
    """One entry of a build's arch list: SASS for sm_MN, plus compute_MN PTX when `ptx`."""

    major: int
    minor: int
    ptx: bool = False

    @property
    def cc(self) -> tuple[int, int]:
        return self.major, self.minor

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}{'+PTX' if self.ptx else ''}"


def parse_archs(text: str) -> tuple[Arch, ...]:
    archs = []
    for part in str(text).split(";"):
        m = _ARCH_RE.match(part.strip())
        if not m:
            raise ValueError(f"arch {part!r} is not 'X.Y' or 'X.Y+PTX'")
        archs.append(Arch(int(m.group(1)), int(m.group(2)), bool(m.group(3))))
    return tuple(archs)


@dataclass(frozen=True)
class ToolkitDriver:
    cuda: str
    release: str
    min_driver_linux: str | None
    confidence: str = "high"
    note: str | None = None


@dataclass(frozen=True)
class MvcFamily:
    major: int
    min_driver_linux: str
    confidence: str = "high"
    note: str | None = None


@dataclass(frozen=True)
class Variant:
    tag: str  # cu126 | cpu
    status: str  # stable | experimental
    archs: tuple[Arch, ...] = ()
    cudnn: str | None = None
    nccl: str | None = None

    @property
    def cuda(self) -> str | None:
        return cuda_of_tag(self.tag)

    @functools.cached_property
    def arch_text(self) -> str:
        return ";".join(str(a) for a in self.archs)


@dataclass(frozen=True)
class Patch:
    version: str
    torchvision: str | None
    torchaudio: str | None


@dataclass(frozen=True)
class TorchRelease:
    version: str  # "2.5"
    patches: tuple[Patch, ...]
    python_min: str
    python_max: str
    python_experimental: tuple[str, ...]
    python_unconfirmed: tuple[str, ...]
    pypi_default: str  # variant tag on PyPI, Linux x86_64
    pypi_default_confidence: str
    pip_index: str  # index | extra
    variants: dict[str, Variant]
    aarch64_variants: dict[str, Variant] = field(default_factory=dict)
    aarch64_pypi_default: str | None = None
    not_offered: dict[str, str] = field(default_factory=dict)
    arch_confidence: str = "high"
    notes: str | None = None
    line: int = 0

    def variants_for(self, arch: str) -> dict[str, Variant]:
        """Variants published for a CPU architecture (cpu is published for both)."""
        if arch == "aarch64":
            out = dict(self.aarch64_variants)
            if "cpu" in self.variants:
                out["cpu"] = self.variants["cpu"]
            return out
        return self.variants

    def pypi_default_for(self, arch: str) -> str | None:
        return self.aarch64_pypi_default if arch == "aarch64" else self.pypi_default


@dataclass(frozen=True)
class GpuSpec:
    name: str
    cc: str
    vram_gb: float | None
    bw_gbs: float | None
    fp32: float | None
    tf32: float | None
    fp16: float | None
    bf16: float | None
    nvlink: bool | None
    confidence: str
    aliases: tuple[str, ...] = ()
    notes: str | None = None
    max_driver_branch: int | None = None
    vram_mib: float | None = None  # memory.total as the driver reports it (nvidia-smi)
    vram_source: str | None = None  # where vram_mib came from, or the rule that gave it

    @property
    def memory_gib(self) -> float | None:
        """What a job can allocate from, GiB: the driver's MiB / 1024, else the marketing size."""
        return self.vram_mib / 1024 if self.vram_mib else self.vram_gb

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "compute_capability": self.cc,
            "vram_gb": self.vram_gb,
            "vram_mib": self.vram_mib,
            "memory_bandwidth_gbs": self.bw_gbs,
            "fp32_tflops": self.fp32,
            "tf32_tflops": self.tf32,
            "fp16_tflops": self.fp16,
            "bf16_tflops": self.bf16,
            "nvlink": self.nvlink,
            "confidence": self.confidence,
            "notes": self.notes,
        }


@dataclass(frozen=True)
class CompatData:
    toolkit_drivers: tuple[ToolkitDriver, ...]
    mvc_families: dict[int, MvcFamily]
    mvc_limitations: dict[str, str]
    releases: tuple[TorchRelease, ...]  # oldest first
    gpus: tuple[GpuSpec, ...]
    index_url: str  # with {tag}
    sources: dict[str, tuple[str, ...]]

    def release(self, version: str) -> TorchRelease | None:
        """The release ('2.5') a version ('2.5.1', '2.5.1+cu124') belongs to."""
        try:
            v = Version(version)
        except InvalidVersion:
            return None
        key = f"{v.major}.{v.minor}"
        return next((r for r in self.releases if r.version == key), None)

    @functools.cached_property
    def _full_drivers(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for r in self.toolkit_drivers:
            if r.min_driver_linux and (
                r.cuda not in out or parse_driver(r.min_driver_linux) < parse_driver(out[r.cuda])
            ):
                out[r.cuda] = r.min_driver_linux
        return out

    def min_driver_full(self, cuda: str) -> str | None:
        """The driver of the CUDA X.Y GA toolkit: at or above it, everything works."""
        return self._full_drivers.get(cuda)

    def mvc_floor(self, cuda: str) -> str | None:
        fam = self.mvc_families.get(cuda_key(cuda)[0])
        return fam.min_driver_linux if fam else None

    def max_cuda_for_driver(self, driver: str) -> str | None:
        """Highest CUDA X.Y whose GA driver is at or below `driver` (what nvidia-smi shows)."""
        d = parse_driver(driver)
        best: str | None = None
        for row in self.toolkit_drivers:
            if row.min_driver_linux and parse_driver(row.min_driver_linux) <= d:
                if best is None or cuda_key(row.cuda) > cuda_key(best):
                    best = row.cuda
        return best


class _Reader:
    """Typed access to one YAML file with error messages that say file:line and what to fix."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self.doc = yaml.load(path.read_text(encoding="utf-8"), Loader=_LineLoader)
        except yaml.YAMLError as exc:
            raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
        if not isinstance(self.doc, dict):
            raise ConfigError(f"{path}: expected a mapping at the top level")
        sources = self.doc.get("source")
        if not sources or not isinstance(sources, list):
            raise ConfigError(f"{path}: every table needs a non-empty `source:` list")

    def fail(self, node: Any, message: str) -> ConfigError:
        line = node.get(_LINE) if isinstance(node, dict) else None
        where = f"{self.path}:{line}" if line else str(self.path)
        return ConfigError(f"{where}: {message}")

    def need(self, node: dict[str, Any], key: str, what: str) -> Any:
        if node.get(key) is None:
            raise self.fail(node, f"{what}: missing `{key}`")
        return node[key]


def _items(mapping: dict[Any, Any]) -> list[tuple[str, Any]]:
    return [(str(k), v) for k, v in mapping.items() if k != _LINE]


def _load_toolkits(r: _Reader) -> tuple[ToolkitDriver, ...]:
    rows = []
    for row in r.need(r.doc, "rows", "cuda_toolkit_drivers"):
        cuda = str(r.need(row, "cuda", "toolkit row"))
        drv = row.get("min_driver_linux")
        if drv is not None:
            try:
                parse_driver(str(drv))
            except ValueError as exc:
                raise r.fail(row, f"CUDA {cuda}: {exc}") from None
        rows.append(
            ToolkitDriver(
                cuda,
                str(row.get("release", cuda)),
                None if drv is None else str(drv),
                str(row.get("confidence", r.doc.get("confidence", "high"))),
                row.get("note"),
            )
        )
    return tuple(rows)


def _load_mvc(r: _Reader) -> tuple[dict[int, MvcFamily], dict[str, str]]:
    families = {}
    for fam in r.need(r.doc, "families", "cuda_minor_version_compat"):
        major = int(r.need(fam, "major", "family"))
        floor = str(r.need(fam, "min_driver_linux", f"CUDA {major}.x"))
        try:
            parse_driver(floor)
        except ValueError as exc:
            raise r.fail(fam, f"CUDA {major}.x: {exc}") from None
        families[major] = MvcFamily(
            major, floor, str(fam.get("confidence", "high")), fam.get("note")
        )
    limits = {
        str(x["id"]): " ".join(str(x["text"]).split()) for x in r.doc.get("limitations") or []
    }
    return families, limits


def _variant(r: _Reader, node: Any, tag: str, where: str, archs_text: Any = None) -> Variant:
    spec = node if isinstance(node, dict) else {}
    if tag != "cpu" and not _TAG_RE.match(tag):
        raise r.fail(node, f"{where}: variant {tag!r} is not cuXYZ or cpu")
    text = archs_text if archs_text is not None else spec.get("archs")
    archs: tuple[Arch, ...] = ()
    if tag != "cpu":
        if not text:
            raise r.fail(node, f'{where}: variant {tag} needs `archs` (e.g. "7.5;8.0;8.6;9.0+PTX")')
        try:
            archs = parse_archs(text)
        except ValueError as exc:
            raise r.fail(node, f"{where}: variant {tag}: {exc}") from None
    status = str(spec.get("status", "stable"))
    if status not in ("stable", "experimental"):
        raise r.fail(
            node, f"{where}: variant {tag}: status must be stable or experimental, got {status!r}"
        )
    return Variant(tag, status, archs, _opt(spec.get("cudnn")), _opt(spec.get("nccl")))


def _opt(value: Any) -> str | None:
    return None if value is None else str(value)


def _load_releases(r: _Reader) -> tuple[TorchRelease, ...]:
    releases = []
    for node in r.need(r.doc, "releases", "torch_releases"):
        version = str(r.need(node, "version", "release"))
        where = f"torch {version}"
        patches = []
        for pv, companions in _items(r.need(node, "patches", where)):
            companions = companions or {}
            try:
                Version(pv)
            except InvalidVersion:
                raise r.fail(node, f"{where}: patch {pv!r} is not a version") from None
            if not pv.startswith(version + "."):
                raise r.fail(node, f"{where}: patch {pv} does not belong to release {version}")
            patches.append(
                Patch(pv, _opt(companions.get("torchvision")), _opt(companions.get("torchaudio")))
            )
        patches.sort(key=lambda p: Version(p.version))
        py = r.need(node, "python", where)
        variants = {
            tag: _variant(r, spec, tag, where)
            for tag, spec in _items(r.need(node, "variants", where))
        }
        default = str(r.need(node, "pypi_default", where))
        if default not in variants:
            raise r.fail(
                node,
                f"{where}: pypi_default {default} is not one of its variants {sorted(variants)}",
            )
        a64 = node.get("aarch64") or {}
        a64_variants = {
            tag: _variant(r, a64, tag, f"{where} aarch64", archs)
            for tag, archs in _items(a64.get("variants") or {})
        }
        pip_index = str(node.get("pip_index", "index"))
        if pip_index not in ("index", "extra"):
            raise r.fail(node, f"{where}: pip_index must be index or extra, got {pip_index!r}")
        releases.append(
            TorchRelease(
                version=version,
                patches=tuple(patches),
                python_min=str(r.need(py, "min", f"{where} python")),
                python_max=str(r.need(py, "max", f"{where} python")),
                python_experimental=tuple(str(x) for x in py.get("experimental") or ()),
                python_unconfirmed=tuple(str(x) for x in py.get("unconfirmed") or ()),
                pypi_default=default,
                pypi_default_confidence=str(node.get("pypi_default_confidence", "high")),
                pip_index=pip_index,
                variants=variants,
                aarch64_variants=a64_variants,
                aarch64_pypi_default=_opt(a64.get("pypi_default")),
                not_offered={k: str(v) for k, v in _items(node.get("not_offered") or {})},
                arch_confidence=str(node.get("arch_confidence", "high")),
                notes=" ".join(str(node["notes"]).split()) if node.get("notes") else None,
                line=int(node.get(_LINE, 0)),
            )
        )
    keys = [Version(x.version) for x in releases]
    if keys != sorted(keys) or len(set(keys)) != len(keys):
        raise ConfigError(
            f"{r.path}: releases must be listed oldest first, each once: {[x.version for x in releases]}"
        )
    return tuple(releases)


def _num(value: Any) -> float | None:
    return None if value is None else float(value)


def _load_gpus(r: _Reader) -> tuple[GpuSpec, ...]:
    gpus = []
    sources = r.doc.get("vram_sources") or {}
    for g in r.need(r.doc, "gpus", "gpus"):
        name = str(r.need(g, "name", "gpu"))
        cc = str(r.need(g, "cc", name))
        if not re.match(r"^\d+\.\d+$", cc):
            raise r.fail(g, f"{name}: cc {cc!r} is not 'X.Y'")
        src = g.get("vram_src")
        if g.get("vram_mib") is not None and str(src) not in sources:
            raise r.fail(g, f"{name}: vram_mib needs a vram_src listed in vram_sources (got {src!r})")
        try:
            gpus.append(
                GpuSpec(
                    name=name,
                    cc=cc,
                    vram_gb=_num(g.get("vram_gb")),
                    bw_gbs=_num(g.get("bw_gbs")),
                    fp32=_num(g.get("fp32")),
                    tf32=_num(g.get("tf32")),
                    fp16=_num(g.get("fp16")),
                    bf16=_num(g.get("bf16")),
                    nvlink=g.get("nvlink"),
                    confidence=str(g.get("confidence", r.doc.get("confidence", "medium"))),
                    aliases=tuple(str(a) for a in g.get("aliases") or ()),
                    notes=g.get("notes"),
                    max_driver_branch=g.get("max_driver_branch"),
                    vram_mib=_num(g.get("vram_mib")),
                    vram_source=f"{src}: {sources[str(src)]}" if src is not None and str(src) in sources else None,
                )
            )
        except (TypeError, ValueError) as exc:
            raise r.fail(g, f"{name}: numbers must be plain numbers or null ({exc})") from None
    return tuple(gpus)


@functools.lru_cache(maxsize=4)
def load_compat(data_dir: str | None = None) -> CompatData:
    """All tables, validated; cached per directory (the data does not change in a run)."""
    base = Path(data_dir) if data_dir else DATA_DIR
    readers = {name: _Reader(base / fname) for name, fname in TABLE_FILES.items()}
    families, limits = _load_mvc(readers["cuda_minor_version_compat"])
    data = CompatData(
        toolkit_drivers=_load_toolkits(readers["cuda_toolkit_drivers"]),
        mvc_families=families,
        mvc_limitations=limits,
        releases=_load_releases(readers["torch_releases"]),
        gpus=_load_gpus(readers["gpus"]),
        index_url=str(
            readers["torch_releases"].doc.get("index_url", "https://download.pytorch.org/whl/{tag}")
        ),
        sources={name: tuple(str(s) for s in rd.doc["source"]) for name, rd in readers.items()},
    )
    for rel in data.releases:  # every CUDA a wheel is built with must have a driver row
        for v in [*rel.variants.values(), *rel.aarch64_variants.values()]:
            if v.cuda and data.min_driver_full(v.cuda) is None:
                raise ConfigError(
                    f"{readers['torch_releases'].path}:{rel.line}: torch {rel.version} {v.tag}: "
                    f"CUDA {v.cuda} has no driver row in {TABLE_FILES['cuda_toolkit_drivers']}"
                )
    return data
