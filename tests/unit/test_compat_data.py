"""Integrity of the compatibility tables, their validation errors, and GPU name matching."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from packaging.version import Version

from provision.compat import GpuFact, HostFacts, InstallPlan, TorchRequest, find_gpu, load_compat
from provision.compat.gpus import gpu_key, suggest
from provision.compat.loader import DATA_DIR, TABLE_FILES, cuda_key, parse_driver
from provision.compat.resolver import resolve_install_plan
from provision.errors import ConfigError

DATA = load_compat()


@pytest.mark.parametrize("fname", sorted(TABLE_FILES.values()))
def test_every_table_has_sources(fname):
    doc = yaml.safe_load((DATA_DIR / fname).read_text())
    assert doc["table"] == fname.removesuffix(".yaml")
    assert isinstance(doc["source"], list) and len(doc["source"]) >= 2
    assert all(isinstance(s, str) and s.strip() for s in doc["source"])


def test_one_table_per_file():
    assert sorted(p.name for p in DATA_DIR.glob("*.yaml")) == sorted(TABLE_FILES.values())


def test_every_release_has_variants_and_an_index():
    for rel in DATA.releases:
        assert rel.patches, rel.version
        assert "cpu" in rel.variants, rel.version
        cuda = [v for v in rel.variants.values() if v.cuda]
        assert cuda, rel.version
        assert rel.pypi_default in rel.variants
        for v in cuda:
            assert v.archs, (rel.version, v.tag)
            assert DATA.min_driver_full(v.cuda), (rel.version, v.tag)
            assert DATA.index_url.format(tag=v.tag) == f"https://download.pytorch.org/whl/{v.tag}"
        for p in rel.patches:
            assert p.torchvision, p.version
            assert p.torchaudio, p.version


def test_versions_are_monotonic():
    releases = [Version(r.version) for r in DATA.releases]
    assert releases == sorted(releases) and len(set(releases)) == len(releases)
    patches = [p for r in DATA.releases for p in r.patches]
    torch = [Version(p.version) for p in patches]
    assert torch == sorted(torch)
    vision = [Version(p.torchvision) for p in patches]
    assert vision == sorted(vision) and len(set(vision)) == len(vision)  # one torchvision per torch
    audio = [Version(p.torchaudio) for p in patches]
    assert audio == sorted(audio)
    mins = [Version(r.python_min) for r in DATA.releases]
    assert mins == sorted(mins)
    for r in DATA.releases:
        assert Version(r.python_min) <= Version(r.python_max)
    rows = [
        (cuda_key(r.cuda), parse_driver(r.min_driver_linux))
        for r in DATA.toolkit_drivers
        if r.min_driver_linux
    ]
    assert [d for _, d in sorted(rows)] == sorted(
        d for _, d in rows
    )  # newer CUDA never needs an older driver


def test_every_gpu_has_a_cc_and_finds_itself():
    names = [g.name for g in DATA.gpus]
    assert len(names) == len(set(names))
    for g in DATA.gpus:
        assert g.cc and g.vram_gb and g.confidence in ("high", "medium", "low")
        for spelled in (g.name, *g.aliases):
            assert find_gpu(spelled) is g, spelled


# Facts restated from the fact sheet's key_facts, to catch a bad edit of the tables.
def test_known_facts():
    assert {m: f.min_driver_linux for m, f in DATA.mvc_families.items()} == {
        11: "450.80.02",
        12: "525.60.13",
        13: "580.65.06",
    }
    assert "ptx_jit" in DATA.mvc_limitations
    assert DATA.min_driver_full("12.8") == "570.26" and DATA.min_driver_full("13.0") == "580.65.06"
    assert DATA.max_cuda_for_driver("535.104.05") == "12.2"
    assert DATA.max_cuda_for_driver("418.87.01") is None
    by = {r.version: r for r in DATA.releases}
    for r in DATA.releases:
        for tag, v in r.variants.items():
            ccs = {a.cc for a in v.archs}
            if tag in ("cu130", "cu132"):
                assert (7, 0) not in ccs and (6, 0) not in ccs, (
                    r.version,
                    tag,
                )  # CUDA 13 dropped Volta/Pascal
            if tag in ("cu128", "cu129", "cu130", "cu132"):
                assert (12, 0) in ccs and (5, 0) not in ccs, (r.version, tag)
            if tag == "cu126":
                assert (5, 0) in ccs and (9, 0) in ccs and (12, 0) not in ccs, (r.version, tag)
            if (3, 7) in ccs:
                assert tag in ("cu102", "cu113", "cu116", "cu117", "cu118"), (r.version, tag)
    assert max(Version(v) for v, r in by.items() if "cu118" in r.variants) == Version("2.7")
    assert max(Version(v) for v, r in by.items() if "cu128" in r.variants) == Version("2.11")
    assert {
        v
        for v, r in by.items()
        if (7, 0) in {a.cc for a in r.variants.get("cu128", r.variants["cpu"]).archs}
    } == {"2.8", "2.9", "2.10"}
    pypi = {v: r.pypi_default for v, r in by.items()}
    assert pypi["2.5"] == "cu124" and pypi["2.7"] == "cu126" and pypi["2.9"] == "cu128"
    assert all(pypi[v] == "cu130" for v in ("2.11", "2.12", "2.13", "2.14"))
    assert by["2.14"].patches[-1].torchaudio == "2.11.1"  # no torchaudio after 2.11
    assert (by["2.9"].python_min, by["2.9"].python_max) == ("3.10", "3.14")
    assert find_gpu("Tesla K80").max_driver_branch == 470


@pytest.mark.parametrize(
    ("name", "memory_mib", "expected"),
    [
        ("NVIDIA A100-PCIE-40GB", None, "NVIDIA A100-PCIE-40GB"),
        ("NVIDIA A100-SXM4-80GB", None, "NVIDIA A100-SXM4-80GB"),
        ("A100-SXM4-80GB", None, "NVIDIA A100-SXM4-80GB"),
        ("NVIDIA A100 80GB PCIe", None, "NVIDIA A100 80GB PCIe"),
        ("nvidia a100 pcie 80 GB", None, "NVIDIA A100 80GB PCIe"),
        ("NVIDIA A100-SXM4-40GB", None, "NVIDIA A100-SXM4-40GB"),
        ("A100", 40960, "NVIDIA A100-SXM4-40GB"),
        ("Tesla V100-SXM2-16GB", None, "Tesla V100-SXM2-16GB"),
        ("Tesla V100-PCIE-32GB", None, "Tesla V100-PCIE-32GB"),
        ("Tesla V100S-PCIE-32GB", None, "Tesla V100S-PCIE-32GB"),
        ("NVIDIA H100 80GB HBM3", None, "NVIDIA H100 80GB HBM3"),
        ("NVIDIA H100 PCIe", None, "NVIDIA H100 PCIe"),
        ("NVIDIA H200", None, "NVIDIA H200"),
        ("NVIDIA H200 NVL", None, "NVIDIA H200 NVL"),
        ("GeForce RTX 3090", None, "NVIDIA GeForce RTX 3090"),  # pre-R470 drivers had no "NVIDIA "
        ("rtx 4090", None, "NVIDIA GeForce RTX 4090"),
        ("NVIDIA GeForce RTX 4090 D", None, "NVIDIA GeForce RTX 4090 D"),
        ("A6000", None, "NVIDIA RTX A6000"),
        ("NVIDIA RTX 6000 Ada Generation", None, "NVIDIA RTX 6000 Ada Generation"),
        ("Tesla P100-PCIE-12GB", None, "Tesla P100-PCIE-12GB"),
        ("NVIDIA H800", None, "NVIDIA H800 80GB HBM3"),
        ("NVIDIA H100 NVL", None, None),  # a different SKU (94 GB), not in the table
        ("Quadro RTX 6000", None, None),  # Turing RTX 6000, not the Ada one
        ("NVIDIA A10G", None, None),
        ("", None, None),
    ],
)
def test_gpu_name_matching(name, memory_mib, expected):
    found = find_gpu(name, memory_mib)
    assert (found.name if found else None) == expected


def test_gpu_key_and_suggestions():
    assert gpu_key("Tesla V100-SXM2-32GB") == gpu_key("V100 SXM2 32 GB")
    assert gpu_key("NVIDIA GeForce RTX 4090").model != gpu_key("NVIDIA GeForce RTX 4090 D").model
    assert "NVIDIA GeForce RTX 3090" in suggest("RTX 3009")


# --- validation errors name the file and line --------------------------------------------


def _copy_data(tmp_path: Path) -> Path:
    dst = tmp_path / "data"
    shutil.copytree(DATA_DIR, dst)
    return dst


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))


@pytest.mark.parametrize(
    ("fname", "old", "new", "words"),
    [
        ("gpus.yaml", "source:\n", "sources:\n", "needs a non-empty `source:`"),
        ("torch_releases.yaml", '"7.5;8.0;8.6;9.0;10.0;12.0+PTX", cudnn: "9.13.0.50"',
         '"7.5;8.x", cudnn: "9.13.0.50"', "torch 2.9: variant cu130: arch '8.x'"),
        ("torch_releases.yaml", "pypi_default: cu124\n    pypi_default_confidence: medium\n    variants:\n      cu118",
         "pypi_default: cu125\n    pypi_default_confidence: medium\n    variants:\n      cu118", "pypi_default cu125"),
        ("torch_releases.yaml", '"2.6.0": {torchvision', '"2.7.9": {torchvision', "patch 2.7.9 does not belong"),
        ("gpus.yaml", 'name: "Tesla T4", cc: "7.5"', 'name: "Tesla T4", cc: "seven"', "Tesla T4: cc 'seven'"),
        ("gpus.yaml", "vram_mib: 15360, vram_src: modal-2797", "vram_mib: 15360, vram_src: somewhere",
         "Tesla T4: vram_mib needs a vram_src listed in vram_sources"),
        ("cuda_toolkit_drivers.yaml", 'min_driver_linux: "570.26"', 'min_driver_linux: "R570"', "CUDA 12.8"),
        ("torch_releases.yaml", "cu117: {status: experimental", "cu117: {status: nightly", "status must be stable"),
    ],
)  # fmt: skip
def test_bad_edits_fail_with_file_and_line(tmp_path, fname, old, new, words):
    data_dir = _copy_data(tmp_path)
    _edit(data_dir / fname, old, new)
    with pytest.raises(ConfigError) as exc:
        load_compat(str(data_dir))
    msg = str(exc.value)
    assert fname in msg and words in msg, msg
    if "source" not in words:
        assert f"{fname}:" in msg and msg.split(f"{fname}:")[1].split(":")[0].isdigit(), msg


def test_a_new_release_is_one_data_edit(tmp_path):
    """Append a (hypothetical) 2.15 entry: the resolver picks it up with no code change."""
    data_dir = _copy_data(tmp_path)
    with open(data_dir / "torch_releases.yaml", "a") as f:
        f.write(
            """
  - version: "2.15"
    patches:
      "2.15.0": {torchvision: "0.30.0", torchaudio: "2.11.1"}
    python: {min: "3.10", max: "3.14"}
    pypi_default: cu132
    variants:
      cu130: {status: stable, archs: "7.5;8.0;8.6;9.0;10.0;12.0+PTX"}
      cu132: {status: stable, archs: "7.5;8.0;8.6;9.0;10.0;12.0+PTX"}
      cpu: {status: stable}
"""
        )
    data = load_compat(str(data_dir))
    a100 = HostFacts(
        gpus=(GpuFact(name="NVIDIA A100-SXM4-80GB"),),
        driver_version="595.58.03",
        python_version="3.12",
    )
    plan = resolve_install_plan(a100, TorchRequest(), data)
    assert isinstance(plan, InstallPlan) and plan.pin == "2.15.0+cu132"
    v100 = HostFacts(
        gpus=(GpuFact(name="Tesla V100-SXM2-32GB"),),
        driver_version="595.58.03",
        python_version="3.12",
    )
    plan = resolve_install_plan(v100, TorchRequest(), data)
    assert plan.pin == "2.14.0+cu126"  # 2.15 has no sm_70 build
