"""The fast uv paths on this machine (LocalConnection, the real uv, tiny wheels from the tests'
own index): `uv venv` seeded with the base Python's bundled pip, installs hard-linked from uv's
cache, and a rebuilt generation accepted as its verified twin only when it is one file for file
(provision/install/uv.py create_venv, provision/install/reuse.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from provision.connection.local import LocalConnection
from provision.install import reuse, uv
from provision.install.mirrors import IndexConfig
from provision.inventory.model import Host
from tests.support.package_index import PackageIndex, build_wheel, small_wheelhouse

FP = "fingerprint-of-the-request"


@pytest.fixture
def conn():
    c = LocalConnection(Host(name="localhost", address="127.0.0.1", local=True))
    yield c
    c.close()


@pytest.fixture
def uv_bin() -> str:
    found = uv.controller_uv()
    if found is None:
        pytest.skip("uv is a test dependency: pip install uv")
    return found


@pytest.fixture
def index(tmp_path: Path):
    with PackageIndex(small_wheelhouse(tmp_path / "wheels")) as idx:
        yield idx


def site_packages(gen: Path) -> Path:
    return next((gen / "lib").glob("python3*/site-packages"))


def build(conn, uv_bin: str, gen: Path, cache: Path, index, packages: list[str]) -> dict[str, str]:
    """A generation the way the installer makes one with uv: uv venv + seed, then uv pip install."""
    try:
        seeded = uv.create_venv(conn, uv_bin, sys.executable, str(gen), str(cache))
    except uv.UvUnavailable as exc:
        pytest.skip(f"{sys.executable} has no bundled pip wheel to seed: {exc}")
    if not packages:
        return seeded
    cmd = uv.install_command_uv(uv_bin, str(gen / "bin/python"), packages, IndexConfig(index.url),
                                uv_cache=str(cache))  # fmt: skip
    result = conn.run(cmd.script(), stdin=cmd.stdin, timeout=300)
    assert result.ok, result.stderr
    return seeded


def verified(gen: Path, gpus: int = 0) -> None:
    """What the installer writes after the full verification passed."""
    manifest = {"fingerprint": FP, "verify": {"torch": {"version": "2.13.0+cpu"}}, "gpus": gpus}
    (gen / "provision-env.json").write_text(json.dumps(manifest) + "\n")


def test_uv_venv_is_seeded_with_the_bundled_pip_and_pip_works(conn, uv_bin, tmp_path: Path) -> None:
    gen = tmp_path / "gens" / "g1"
    try:
        seeded = uv.create_venv(conn, uv_bin, sys.executable, str(gen), str(tmp_path / "cache"))
    except uv.UvUnavailable as exc:
        pytest.skip(f"{sys.executable} has no bundled pip wheel to seed: {exc}")
    assert "pip" in seeded and seeded["pip"][0].isdigit()
    assert (gen / "pyvenv.cfg").read_text().count("include-system-site-packages = false") == 1
    out = subprocess.run([str(gen / "bin/python"), "-m", "pip", "--version"], capture_output=True,
                         text=True, timeout=120)  # fmt: skip
    assert out.returncode == 0 and out.stdout.startswith(f"pip {seeded['pip']} from {gen}/"), out
    # what the env holds before the install is exactly what was seeded (installed_packages' since)
    assert uv.installed_packages(conn, str(gen / "bin/python")) == seeded


def test_a_base_python_uv_cannot_use_raises_and_leaves_nothing(conn, uv_bin, tmp_path: Path) -> None:
    gen = tmp_path / "gens" / "g1"
    with pytest.raises(uv.UvUnavailable, match="uv venv from /nonexistent/python3 failed"):
        uv.create_venv(conn, uv_bin, "/nonexistent/python3", str(gen), str(tmp_path / "cache"))
    assert not gen.exists()


def test_uv_cache_sits_beside_the_generations_unless_one_was_named() -> None:
    assert uv.cache_dir_for("/data/.cache/pip", False, "/root/.provision/envs/.provision.gens") == (
        "/root/.provision/envs/.provision.gens/.uv-cache"
    )
    assert uv.cache_dir_for("/data/.cache/pip/", True, "/x/.p.gens") == "/data/.cache/pip/uv"
    cmd = uv.install_command_uv("/opt/uv", "/g/bin/python", ["x"], IndexConfig("https://i/simple"),
                                cache_dir="/data/pip", uv_cache="/x/.p.gens/.uv-cache")  # fmt: skip
    assert cmd.argv[cmd.argv.index("--cache-dir") + 1] == "/x/.p.gens/.uv-cache"
    assert cmd.argv[cmd.argv.index("--link-mode") + 1] == "hardlink"
    assert "--compile-bytecode" not in cmd.argv  # off the critical path (docs/install.md)


def test_a_rebuild_from_the_warm_cache_is_accepted_as_its_verified_twin(
    conn, uv_bin, tmp_path: Path, index
) -> None:
    gens, cache = tmp_path / ".env.gens", tmp_path / "cache"
    first, second = gens / "20260101T000000-aaaaaa", gens / "20260102T000000-bbbbbb"
    build(conn, uv_bin, first, cache, index, ["provtest-alpha==2.0", "provtest-beta"])
    verified(first)
    # bytecode the first generation's verification wrote
    subprocess.run([str(first / "bin/python"), "-m", "compileall", "-q", str(site_packages(first) / "provtest_alpha")],
                   check=True, timeout=120)  # fmt: skip
    build(conn, uv_bin, second, cache, index, ["provtest-alpha==2.0", "provtest-beta"])

    data = reuse.reused_verification(conn, [str(first), str(second)], FP, 0,
                                     str(second / "bin/python"), str(second))  # fmt: skip
    assert data is not None and data["ok"] and data["reused"]["from"] == str(first)
    assert data["torch"] == {"version": "2.13.0+cpu"}  # the twin's verification stands
    # the same bytes because the same inode: both generations link uv's cache entry
    a = (site_packages(first) / "provtest_alpha" / "__init__.py").stat()
    b = (site_packages(second) / "provtest_alpha" / "__init__.py").stat()
    assert (a.st_ino, a.st_dev) == (b.st_ino, b.st_dev) and a.st_nlink >= 3
    # and the twin's bytecode is linked in: the first import compiles nothing
    pyc = next((site_packages(first) / "provtest_alpha" / "__pycache__").glob("*.pyc"))
    linked = site_packages(second) / "provtest_alpha" / "__pycache__" / pyc.name
    assert linked.stat().st_ino == pyc.stat().st_ino and data["reused"]["pyc_linked"] >= 1


def test_no_twin_when_packages_differ_files_are_copies_or_the_gpus_changed(
    conn, uv_bin, tmp_path: Path, index
) -> None:
    gens, cache = tmp_path / ".env.gens", tmp_path / "cache"
    first = gens / "20260101T000000-aaaaaa"
    build(conn, uv_bin, first, cache, index, ["provtest-alpha==2.0"])
    verified(first)

    older = gens / "20260102T000000-cccccc"  # another version: not the same env
    build(conn, uv_bin, older, cache, index, ["provtest-alpha==1.0"])
    assert reuse.reused_verification(conn, [str(first)], FP, 0, str(older / "bin/python"), str(older)) is None

    copied = gens / "20260103T000000-dddddd"  # same packages, but copies (pip, or another filesystem)
    build(conn, uv_bin, copied, cache, index, [])
    cmd = uv.install_command_uv(uv_bin, str(copied / "bin/python"), ["provtest-alpha==2.0"],
                                IndexConfig(index.url), uv_cache=str(cache))  # fmt: skip
    cmd.argv[cmd.argv.index("hardlink")] = "copy"
    assert conn.run(cmd.script(), stdin=cmd.stdin, timeout=300).ok
    found = reuse.compare(conn, str(copied / "bin/python"), str(first), str(copied))
    assert found["same"] is False and found["differ"] == ["provtest_alpha/__init__.py"]
    assert reuse.reused_verification(conn, [str(first)], FP, 0, str(copied / "bin/python"), str(copied)) is None

    twin = gens / "20260104T000000-eeeeee"
    build(conn, uv_bin, twin, cache, index, ["provtest-alpha==2.0"])
    args = (str(twin / "bin/python"), str(twin))
    assert reuse.reused_verification(conn, [str(first)], FP, 1, *args) is None  # a GPU more
    assert reuse.reused_verification(conn, [str(first)], "another request", 0, *args) is None
    assert reuse.reused_verification(conn, [str(first)], FP, 0, *args) is not None


def test_a_file_only_in_the_verified_generation_is_a_difference(
    conn, uv_bin, tmp_path: Path, index
) -> None:
    gens, cache = tmp_path / ".env.gens", tmp_path / "cache"
    first, second = gens / "20260101T000000-aaaaaa", gens / "20260102T000000-bbbbbb"
    for gen in (first, second):
        build(conn, uv_bin, gen, cache, index, ["provtest-beta"])
    verified(first)
    extra = site_packages(first) / "provtest_beta" / "extra.py"
    extra.write_text("x = 1\n")
    found = reuse.compare(conn, str(second / "bin/python"), str(first), str(second))
    assert found["same"] is False
    assert found["differ"] == ["provtest_beta/extra.py (only in the verified generation)"]
    os.unlink(extra)
    assert reuse.compare(conn, str(second / "bin/python"), str(first), str(second))["same"] is True


def test_a_wheel_built_on_the_spot_is_linked_not_copied(conn, uv_bin, tmp_path: Path) -> None:
    """uv links from its cache only where cache and env share a filesystem; the installer puts
    the cache beside the generations for that reason (cache_dir_for)."""
    wheels = tmp_path / "w"
    wheels.mkdir()
    build_wheel(wheels, "provtest_gamma", "1.0")
    with PackageIndex(wheels) as idx:
        gen = tmp_path / ".e.gens" / "20260101T000000-aaaaaa"
        build(conn, uv_bin, gen, tmp_path / ".e.gens" / ".uv-cache", idx, ["provtest-gamma"])
    module = site_packages(gen) / "provtest_gamma" / "__init__.py"
    assert module.stat().st_nlink == 2  # the env's name and the cache's


def test_force_on_the_command_line_reaches_the_install(tmp_path: Path, monkeypatch) -> None:
    from provision.cli.install import build_options
    from provision.cli.main import build_parser

    monkeypatch.chdir(tmp_path)
    parse = build_parser().parse_args
    assert build_options(parse(["install", "h", "--no-project", "--force"]))[0].force is True
    assert build_options(parse(["install", "h", "--no-project"]))[0].force is False


def test_pip_copied_by_ensurepip_is_no_difference(conn, uv_bin, tmp_path: Path, index) -> None:
    """The first install on a host without uv makes its venv with `python -m venv` (ensurepip
    copies pip in); a later uv-seeded rebuild links pip from uv's cache. Same pip version, and
    pip is not what was verified: still the twin. Anything else copied is a difference."""
    gens, cache = tmp_path / ".env.gens", tmp_path / "cache"
    first, second = gens / "20260101T000000-aaaaaa", gens / "20260102T000000-bbbbbb"
    subprocess.run([sys.executable, "-m", "venv", str(first)], check=True, timeout=300)
    cmd = uv.install_command_uv(uv_bin, str(first / "bin/python"), ["provtest-beta"],
                                IndexConfig(index.url), uv_cache=str(cache))  # fmt: skip
    assert conn.run(cmd.script(), stdin=cmd.stdin, timeout=300).ok
    verified(first)
    build(conn, uv_bin, second, cache, index, ["provtest-beta"])
    found = reuse.compare(conn, str(second / "bin/python"), str(first), str(second))
    assert found["same"] is True, found  # the seed is the wheels ensurepip installs
    assert found["seed_copies"] > 10 and found["differ"] == []
