"""`provision install` with uv on a fleet host (real sshd, the host's own python3), from
the tests' own index holding the REAL torch 2.13.0 CPU wheel and its dependencies.

ONE torch install (uv relayed from this machine before the venv is made: the index has no uv wheel). Then: the same
verification a pip-built env passes; `--force` of the identical request relinks from uv's warm
cache and is accepted as the verified generation's twin (same inodes, its bytecode linked in,
nothing downloaded); a failed uv run leaves the env exactly as it was. The pip fallback when no
uv can be had: tests/fleet/test_install_uv_fallback.py.
"""

from __future__ import annotations

import pytest
from fleet import Fleet, FleetError, preflight
from truth import nvidia_gpu_names

from provision.connection.base import ConnectOptions
from provision.connection.ssh import SSHConnection
from provision.install.installer import (
    InstallError,
    InstallOptions,
    InstallResult,
    install,
    verify_env,
)
from provision.install.mirrors import IndexOptions
from provision.install.planning import Plan
from provision.remote.agent import Agent
from tests.support.package_index import PackageIndex, torch_wheelhouse

ENV = "/root/.provision/envs/provision"
GENS = "/root/.provision/envs/.provision.gens"
UV_CACHE = GENS + "/.uv-cache"
VARIANT: dict[str, str] = {}


@pytest.fixture(scope="module")
def fleet():
    reason = preflight()
    if reason:
        pytest.skip(f"SSH test fleet unavailable: {reason}")
    try:
        started = Fleet(1, root_size="3g", ssd_size="1g").start()
    except FleetError as exc:
        pytest.fail(f"could not start the fleet: {exc}", pytrace=False)
    yield started
    started.stop()


@pytest.fixture(scope="module")
def index(fleet: Fleet):
    with PackageIndex(torch_wheelhouse(), host=fleet.controller_address) as idx:
        yield idx


@pytest.fixture(scope="module")
def conn(fleet: Fleet, tmp_path_factory: pytest.TempPathFactory):
    known = fleet.write_known_hosts(tmp_path_factory.mktemp("kh") / "known_hosts")
    options = ConnectOptions(known_hosts="strict", extra_known_hosts=[str(known)], connect_timeout=10)
    c = SSHConnection(fleet.hosts[0].as_host(), options)
    if nvidia_gpu_names(fleet, fleet.hosts[0]):  # a real GPU server: the index has the CPU build
        VARIANT["variant"] = "cpu"
    yield c
    c.close()


def opts(index_url: str, **kw) -> InstallOptions:
    kw.setdefault("torch", "2.13.0")
    return InstallOptions(index=IndexOptions(index_url=index_url), pip_retries=1, pip_timeout=15,
                          installer="uv", **VARIANT, **kw)  # fmt: skip


@pytest.fixture(scope="module")
def built(conn: SSHConnection, index: PackageIndex) -> InstallResult:
    return install(conn, Agent(conn), opts(index.url))


def sh(conn: SSHConnection, command: str) -> str:
    result = conn.run(command, timeout=300)
    assert result.ok, result.stderr
    return result.stdout.strip()


def snapshot(conn: SSHConnection) -> tuple[str, str, str]:
    """(env symlink target, generations, what the env's python imports)."""
    return (
        sh(conn, f"readlink {ENV}"),
        sh(conn, f"ls {GENS}"),
        sh(conn, f"{ENV}/bin/python -c 'import torch; print(torch.__version__)' 2>/dev/null"),
    )


def site_and_cache_tag(conn: SSHConnection) -> tuple[str, str]:
    """The env's site-packages relative to its root and its bytecode tag, as the host's Python
    names them (lib/python3.X/site-packages, cpython-3X): no fixed Python version."""
    out = sh(conn, f"{ENV}/bin/python -c 'import sys; print(\"lib/python%d.%d/site-packages\" % "
                   "sys.version_info[:2], sys.implementation.cache_tag)'")
    site, tag = out.split()
    return site, tag


def inode(conn: SSHConnection, path: str) -> tuple[int, int]:
    """(inode, link count) of a file on the host."""
    ino, links = sh(conn, f"stat -c '%i %h' {path}").split()
    return int(ino), int(links)


def test_a_uv_built_env_passes_the_same_verification_as_a_pip_built_one(
    built: InstallResult, conn: SSHConnection
) -> None:
    r = built
    assert r.action == "installed", r.message
    assert r.installer and r.installer["tool"] == "uv", r.installer
    # the complete command, uv's cache beside the generations, files linked from it
    assert r.pip_command.startswith(f"{r.installer['path']} pip install --python {r.generation}/bin/python")
    assert f"--cache-dir {UV_CACHE}" in r.pip_command and "--link-mode hardlink" in r.pip_command
    assert r.verify["ok"] and r.verify["torch"]["version"] == "2.13.0+cpu"
    assert "reused" not in r.verify  # nothing to be a twin of: the full verification ran
    # the very check the pip path runs, asked again of the switched env
    from provision.remote.facts import gather_facts

    agent = Agent(conn)
    gpus = len(gather_facts(agent).get("gpus") or [])  # what install() passes
    again = verify_env(agent, f"{ENV}/bin/python", Plan(torch="2.13.0", variant="cpu"), gpus)
    assert again.ok, again.problems
    assert again.data["torch"]["version"] == r.verify["torch"]["version"]
    # the first install on a host without uv, from an index without uv: asked first, relayed at
    # once, and uv makes the venv too (no `python -m venv` nor a pip bootstrap bound to fail)
    assert r.installer["how"] == "relayed" and "uv = " in sh(conn, f"cat {r.generation}/pyvenv.cfg")
    assert sh(conn, f"{ENV}/bin/python -m pip --version").startswith("pip ")
    # seeded from a local wheel, yet frozen (and locked) as ensurepip's: no `pip @ file://…`
    frozen = sh(conn, f"{ENV}/bin/python -m pip freeze --all").splitlines()
    assert any(line.startswith("pip==") for line in frozen) and not any(" @ " in line for line in frozen), frozen
    assert "No broken requirements" in sh(conn, f"{ENV}/bin/python -m pip check")
    site, _ = site_and_cache_tag(conn)
    _, links = inode(conn, f"{ENV}/{site}/torch/__init__.py")
    assert links == 2  # the env's name and uv's cache's
    assert {"torch", "filelock", "sympy"} <= set(r.packages)


def test_a_forced_identical_reinstall_relinks_and_reuses_the_verification(
    built: InstallResult, conn: SSHConnection, index: PackageIndex
) -> None:
    before = sh(conn, f"readlink {ENV}")
    downloads = [q for q in index.requests if q.startswith("GET /files/")]
    again = install(conn, Agent(conn), opts(index.url, force=True))
    assert again.action == "installed" and again.generation != before
    # uv is on the host now: `uv venv` made the venv, seeded with the pip `python -m venv` gives
    assert "uv = " in sh(conn, f"cat {again.generation}/pyvenv.cfg")
    pip = [sh(conn, f"{g}/bin/python -m pip --version").split(" from ")[0] for g in (before, ENV)]
    assert pip[0] == pip[1] and pip[0].startswith("pip ")
    assert "No broken requirements" in sh(conn, f"{ENV}/bin/python -m pip check")
    assert sh(conn, f"readlink {ENV}") == again.generation
    assert [q for q in index.requests if q.startswith("GET /files/")] == downloads  # all from the cache
    # the verified generation's verification stands for its file-for-file twin
    assert again.verify["reused"]["from"] == before and again.verify["reused"]["files"] > 1000
    assert again.verify["torch"] == built.verify["torch"]
    site, tag = site_and_cache_tag(conn)
    so = sh(conn, f"cd {again.generation}/{site}/torch && ls _C*.so")
    new_so, old_so = inode(conn, f"{again.generation}/{site}/torch/{so}"), inode(conn, f"{before}/{site}/torch/{so}")
    assert new_so[0] == old_so[0] and new_so[1] >= 3  # cache + both generations
    # the bytecode the first verification wrote is linked in, not compiled again
    pyc = f"{site}/torch/__pycache__/__init__.{tag}.pyc"
    assert inode(conn, f"{again.generation}/{pyc}")[0] == inode(conn, f"{before}/{pyc}")[0]
    assert again.verify["reused"]["pyc_linked"] > 100
    assert snapshot(conn)[2] == "2.13.0+cpu"
    # the no-op check still runs the full verification on what is there
    unchanged = install(conn, Agent(conn), opts(index.url))
    assert unchanged.action == "unchanged" and "reused" not in unchanged.verify


def test_a_failed_uv_run_leaves_the_current_env_untouched(
    built: InstallResult, conn: SSHConnection, index: PackageIndex
) -> None:
    before = snapshot(conn)
    with pytest.raises(InstallError) as err:
        install(conn, Agent(conn), opts(index.url, extras=["provtest-not-on-the-index"]))
    result = err.value.result
    assert f"{ENV} is unchanged" in result.message
    assert any("provtest-not-on-the-index" in line for line in result.pip_lines), result.pip_lines
    assert result.installer and result.installer["tool"] == "uv"  # --installer uv: no pip retry
    assert not any("pip retried" in w for w in result.warnings)
    assert snapshot(conn) == before  # same target, no half-built generation left, still imports
    assert conn.run(f"test -e {GENS}/.lock").exit_code == 1


def test_uv_cache_is_on_the_generations_filesystem(built: InstallResult, conn: SSHConnection) -> None:
    assert sh(conn, f"stat -c %d {UV_CACHE}") == sh(conn, f"stat -c %d {GENS}")
    # and not where pip's cache goes (the data SSD, another filesystem on this host)
    assert sh(conn, f"stat -c %d {GENS}") != sh(conn, "stat -c %d /root/autodl-tmp")
