"""A uv for a host of another platform: the wheel for the host's platform, fetched once with this
machine's pip from the index in effect (here the tests' own), the binary taken out and cached."""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import pytest

from provision.install import uv as uv_module
from provision.install.uv_binary import (
    UvBinaryUnavailable,
    cached_path,
    host_platform,
    uv_for_platform,
)
from tests.support.package_index import PackageIndex

FAKE_UV = b"#!/bin/sh\necho 'uv 0.9.1 (aarch64 stand-in)'\n"


def _uv_wheel(directory: Path, version: str, platform_tag: str) -> Path:
    wheel = directory / f"uv-{version}-py3-none-{platform_tag}.whl"
    dist = f"uv-{version}.dist-info"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr(f"uv-{version}.data/scripts/uv", FAKE_UV)
        archive.writestr(f"{dist}/METADATA", f"Metadata-Version: 2.1\nName: uv\nVersion: {version}\n")
        archive.writestr(f"{dist}/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: py3-none-any\n")
        archive.writestr(f"{dist}/RECORD", "")
    return wheel


@pytest.fixture
def own_index_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """This machine's pip reads only what the test sets (no pip.conf, no PIP_* of the machine)."""
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    for var in ("PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_NO_INDEX"):
        monkeypatch.delenv(var, raising=False)


def test_the_hosts_platform_wheel_is_fetched_once_and_cached(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, own_index_only: None
) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    _uv_wheel(wheels, "0.9.1", "manylinux_2_17_aarch64.manylinux2014_aarch64")
    _uv_wheel(wheels, "0.9.1", "manylinux_2_17_x86_64.manylinux2014_x86_64")
    with PackageIndex(wheels) as index:
        monkeypatch.setenv("PIP_INDEX_URL", index.url)
        got = uv_for_platform("aarch64", "glibc", version="0.9.1")
        asked = [q for q in index.requests if "/uv/" in q]
    assert got == cached_path("aarch64", "glibc", "0.9.1")
    assert got.read_bytes() == FAKE_UV and os.access(got, os.X_OK)
    assert asked  # it came from the index in effect
    # cached: the index is gone and the same binary comes back
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple/")
    assert uv_for_platform("aarch64", "glibc", version="0.9.1") == got


def test_a_platform_the_index_lacks_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, own_index_only: None
) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    _uv_wheel(wheels, "0.9.1", "manylinux_2_17_x86_64.manylinux2014_x86_64")
    with PackageIndex(wheels) as index:
        monkeypatch.setenv("PIP_INDEX_URL", index.url)
        with pytest.raises(UvBinaryUnavailable, match="linux-aarch64 .musl. failed"):
            uv_for_platform("aarch64", "musl", version="0.9.1")


def test_host_platforms_are_read_from_facts() -> None:
    assert host_platform({"system": "Linux", "arch": "aarch64", "libc": "glibc 2.35"}) == (
        "aarch64", "glibc")  # fmt: skip
    assert host_platform({"arch": "x86_64", "libc": "musl"}) == ("x86_64", "musl")
    with pytest.raises(UvBinaryUnavailable, match="runs Darwin"):
        host_platform({"system": "Darwin", "arch": "arm64"})
    with pytest.raises(UvBinaryUnavailable, match="riscv64"):
        host_platform({"system": "Linux", "arch": "riscv64"})


def test_a_host_of_another_platform_gets_the_fetched_uv(monkeypatch: pytest.MonkeyPatch) -> None:
    """relay_uv's choice: this machine's uv for its own platform, the fetched one for another."""
    monkeypatch.setattr(uv_module, "controller_uv", lambda: "/controller/uv")
    monkeypatch.setattr(uv_module.platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(uv_module.platform, "libc_ver", lambda: ("glibc", "2.36"))
    monkeypatch.setattr(uv_module.sys, "platform", "linux")
    fetched: list[tuple[str, str]] = []

    def fetch(arch: str, libc: str) -> Path:
        fetched.append((arch, libc))
        return Path(f"/cache/{arch}-{libc}/uv")

    monkeypatch.setattr("provision.install.uv_binary.uv_for_platform", fetch)
    assert uv_module.uv_to_relay({"os": {"arch": "x86_64", "libc": "glibc 2.31"}}) == "/controller/uv"
    assert uv_module.uv_to_relay({"os": {"arch": "aarch64"}}) == "/cache/aarch64-glibc/uv"
    assert uv_module.uv_to_relay({"os": {"arch": "x86_64", "libc": "musl"}}) == "/cache/x86_64-musl/uv"
    assert fetched == [("aarch64", "glibc"), ("x86_64", "musl")]
    monkeypatch.setattr(uv_module, "controller_uv", lambda: None)
    with pytest.raises(uv_module.UvUnavailable, match="no uv to relay"):
        uv_module.uv_to_relay({"os": {"arch": "aarch64"}})
