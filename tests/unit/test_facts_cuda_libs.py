"""System CUDA facts read from files: the dynamic linker cache (checked against `ldconfig -p`
on caches the real ldconfig writes, in each of its formats) and nvcc's version as a toolkit
records it (checked against what a real `nvcc --version` program prints)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from provision.agent.facts import cuda_libs

LDCONFIG = shutil.which("ldconfig") or "/sbin/ldconfig"
needs_glibc_ldconfig = pytest.mark.skipif(
    not os.path.exists("/etc/ld.so.cache") or not os.access(LDCONFIG, os.X_OK),
    reason="no glibc ld.so.cache / ldconfig here",
)


def ldconfig_pairs(cache: str | None = None) -> list[tuple[str, str]]:
    cmd = [LDCONFIG, "-p"] + (["-C", cache] if cache else [])
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return cuda_libs.parse_ldconfig(out)


@needs_glibc_ldconfig
def test_system_cache_reads_as_ldconfig_prints_it():
    pairs = cuda_libs.read_ld_cache("/etc/ld.so.cache")
    assert pairs and pairs == ldconfig_pairs()


@needs_glibc_ldconfig
@pytest.mark.parametrize("fmt", ["new", "compat"])
def test_caches_written_by_ldconfig_in_each_format(fmt, tmp_path):
    """A private cache over a folder of ours (ldconfig adds the system folders too)."""
    lib = tmp_path / "lib"
    lib.mkdir()
    for name in ("libz.so.1", "libbz2.so.1.0"):
        source = Path("/usr/lib/x86_64-linux-gnu") / name
        if not source.exists():
            pytest.skip(f"{source} missing")
        shutil.copy(os.path.realpath(source), lib / name)
    conf, cache = tmp_path / "ld.so.conf", tmp_path / f"cache-{fmt}"
    conf.write_text(f"{lib}\n")
    subprocess.run(
        [LDCONFIG, "-c", fmt, "-C", str(cache), "-f", str(conf), "-X"],
        check=True,
        capture_output=True,
    )
    expected = ldconfig_pairs(str(cache))
    assert ("libz.so.1", str(lib / "libz.so.1")) in expected
    assert cuda_libs.read_ld_cache(str(cache)) == expected
    assert cuda_libs.read_ld_cache(str(cache), ("libz.so", "libbz2.so")) == [
        pair for pair in expected if pair[0].startswith(("libz.so", "libbz2.so"))
    ]


@needs_glibc_ldconfig
def test_old_only_format_and_junk_are_left_to_ldconfig(tmp_path):
    """None means "ask `ldconfig -p`": for the pre-2003 old-only format and for anything else."""
    conf, cache = tmp_path / "ld.so.conf", tmp_path / "cache-old"
    conf.write_text("")
    subprocess.run(
        [LDCONFIG, "-c", "old", "-C", str(cache), "-f", str(conf), "-X"],
        check=True,
        capture_output=True,
    )
    assert cuda_libs.read_ld_cache(str(cache)) is None
    junk = tmp_path / "junk"
    junk.write_bytes(b"glibc-ld.so.cache1.1" + b"\xff" * 40)  # claims 4 billion entries
    assert cuda_libs.read_ld_cache(str(junk)) is None
    assert cuda_libs.read_ld_cache(str(tmp_path / "missing")) is None


def make_toolkit(root: Path, nvcc_version: str, how: str) -> Path:
    """A toolkit folder whose bin/nvcc is a real program printing what NVIDIA's nvcc prints."""
    (root / "bin").mkdir(parents=True)
    nvcc = root / "bin" / "nvcc"
    release = ".".join(nvcc_version.split(".")[:2])
    nvcc.write_text(
        "#!/bin/sh\n"
        f'echo "$0 --version" >> "{root}/ran"\n'
        'echo "nvcc: NVIDIA (R) Cuda compiler driver"\n'
        f'echo "Cuda compilation tools, release {release}, V{nvcc_version}"\n'
    )
    nvcc.chmod(0o755)
    if how == "version.json":
        (root / "version.json").write_text(
            json.dumps(
                {"cuda": {"name": "CUDA SDK", "version": release + ".1"},
                 "cuda_nvcc": {"name": "CUDA NVCC", "version": nvcc_version}}
            )
        )  # fmt: skip
    elif how == "dist-info":
        (root / "dist-info" / f"nvidia_cuda_nvcc-{nvcc_version}.dist-info").mkdir(parents=True)
    elif how == "conda":
        (root / "conda-meta").mkdir()
        (root / "conda-meta" / f"cuda-nvcc-{nvcc_version}-0.json").write_text("{}")
    return nvcc


@pytest.mark.parametrize("how", ["version.json", "dist-info", "conda"])
def test_nvcc_version_from_the_toolkits_files_matches_nvcc_version(how, tmp_path):
    nvcc = make_toolkit(tmp_path / "cuda-12.1", "12.1.105", how)
    env = {"PATH": str(nvcc.parent)}
    found = cuda_libs.nvcc(env, [])
    assert found["version"] == "12.1.105" and found["on_path"] is True
    assert not (tmp_path / "cuda-12.1" / "ran").exists(), "nvcc was run though a file says"
    ran = subprocess.run([str(nvcc), "--version"], capture_output=True, text=True).stdout
    assert cuda_libs.parse_nvcc_version(ran) == found["version"]


def test_a_wrapper_script_is_followed_to_its_toolkit(tmp_path):
    nvcc = make_toolkit(tmp_path / "cuda-13.0", "13.0.88", "dist-info")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "nvcc"
    wrapper.write_text(f'#!/bin/sh\nexec {nvcc} "$@"\n')  # like /usr/local/bin/nvcc here
    wrapper.chmod(0o755)
    found = cuda_libs.nvcc({"PATH": str(bin_dir)}, [])
    assert found["path"] == str(wrapper) and found["version"] == "13.0.88"
    assert "nvidia_cuda_nvcc dist-info" in found["version_from"]


def test_nvcc_without_version_files_is_run(tmp_path):
    nvcc = make_toolkit(tmp_path / "cuda-11.8", "11.8.89", "none")
    found = cuda_libs.nvcc({"PATH": str(nvcc.parent)}, [])
    assert found["version"] == "11.8.89" and found["version_from"] == "nvcc --version"
    assert (tmp_path / "cuda-11.8" / "ran").read_text().strip().endswith("nvcc --version")


def test_nvcc_off_path_comes_from_the_default_toolkit(tmp_path):
    make_toolkit(tmp_path / "cuda-12.4", "12.4.131", "version.json")
    kits = [
        {
            "path": str(tmp_path / "cuda-12.4"),
            "version": "12.4.1",
            "has_nvcc": True,
            "default": True,
        }
    ]
    found = cuda_libs.nvcc({"PATH": str(tmp_path / "empty")}, kits)
    assert found == {
        "path": str(tmp_path / "cuda-12.4" / "bin" / "nvcc"),
        "version": "12.4.131",
        "on_path": False,
        "version_from": str(tmp_path / "cuda-12.4" / "version.json"),
    }


def test_toolkit_versions_from_files(tmp_path):
    make_toolkit(tmp_path / "a", "12.1.105", "version.json")
    make_toolkit(tmp_path / "b", "13.0.88", "dist-info")
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "version.txt").write_text("CUDA Version 10.2.89\n")
    assert cuda_libs.toolkit_version(str(tmp_path / "a")) == "12.1.1"
    assert cuda_libs.toolkit_version(str(tmp_path / "b")) == "13.0.88"
    assert cuda_libs.toolkit_version(str(tmp_path / "c")) == "10.2.89"
    assert cuda_libs.toolkit_version(str(tmp_path / "missing")) is None


@needs_glibc_ldconfig
def test_gather_on_this_machine_matches_ldconfig(monkeypatch):
    """libcuda/cuDNN from the cache are what `ldconfig -p` lists; ldconfig itself is not run."""
    real_run = cuda_libs.run

    def run(cmd, timeout=5.0):
        assert "ldconfig" not in cmd[0], "ldconfig was run though the cache is readable"
        return real_run(cmd, timeout)

    monkeypatch.setattr(cuda_libs, "run", run)
    facts = cuda_libs.gather()
    listed = ldconfig_pairs()
    assert facts["libcuda"] == [p for n, p in listed if n.startswith("libcuda.so")]
    system_cudnn = sorted({p for n, p in listed if n.startswith("libcudnn.so")})
    assert facts["cudnn"]["libraries"][: len(system_cudnn)] == system_cudnn
