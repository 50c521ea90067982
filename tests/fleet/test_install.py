"""`provision install` / `provision lock` end to end over SSH, on fleet hosts (real sshd, Debian
python3 3.11, no GPU → the `cpu` plan), from a PEP 503 index this test serves on the fleet bridge
holding the REAL torch 2.13.0 CPU wheel and its dependencies.

A fleet of its own (2 hosts): each torch env is ~900 MB on the hosts' tmpfs /root, which the
shared 8-host fleet keeps at 1 GB. Two real torch installs: gpu1 from the index, gpu2 from
gpu1's lock, relayed through the controller (through the CLI).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fleet import Fleet, FleetError, preflight
from truth import nvidia_gpu_names

from provision.connection.base import ConnectOptions
from provision.connection.ssh import SSHConnection
from provision.install.installer import (
    InstallError,
    InstallOptions,
    InstallResult,
    create_lock,
    install,
)
from provision.install.lockfile import read_lock, write_lock
from provision.install.mirrors import IndexOptions
from provision.install.pip import freeze_command
from provision.remote.agent import Agent
from tests.support.package_index import PackageIndex, torch_wheelhouse

TORCH = "2.13.0"
ENV = "/root/.provision/envs/provision"  # the default for a host without a RunPod volume
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory):
    reason = preflight()
    if reason:
        pytest.skip(f"SSH test fleet unavailable: {reason}")
    try:
        started = Fleet(2, root_size="3g", ssd_size="2g").start()
    except FleetError as exc:
        pytest.fail(f"could not start the install fleet: {exc}", pytrace=False)
    yield started
    started.stop()


@pytest.fixture(scope="module")
def known_hosts(fleet: Fleet, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return fleet.write_known_hosts(tmp_path_factory.mktemp("kh") / "known_hosts")


@pytest.fixture(scope="module")
def wheelhouse() -> Path:
    return torch_wheelhouse()


@pytest.fixture(scope="module")
def index(fleet: Fleet, wheelhouse: Path):
    with PackageIndex(wheelhouse, host=fleet.controller_address) as idx:  # reachable from the hosts
        yield idx


@pytest.fixture(scope="module")
def connections(fleet: Fleet, known_hosts: Path):
    options = ConnectOptions(
        known_hosts="strict", extra_known_hosts=[str(known_hosts)], connect_timeout=10
    )
    conns = {h.name: SSHConnection(h.as_host(), options) for h in fleet.hosts}
    yield conns
    for conn in conns.values():
        conn.close()


# The test index holds only the CPU wheel: on a host that does have NVIDIA GPUs (a real GPU
# server running this suite) ask for the CPU build explicitly, so the test proves the same thing.
HOST_HAS_GPU: dict[str, bool] = {}


def opts(index_url: str, **kw) -> InstallOptions:
    kw.setdefault("torch", TORCH)
    if any(HOST_HAS_GPU.values()):
        kw.setdefault("variant", "cpu")
    return InstallOptions(
        index=IndexOptions(index_url=index_url), pip_retries=1, pip_timeout=15, **kw
    )


@pytest.fixture(scope="module")
def gpu1_install(fleet: Fleet, connections, index: PackageIndex) -> InstallResult:
    for host in fleet.hosts:
        HOST_HAS_GPU[host.name] = bool(nvidia_gpu_names(fleet, host))
    conn = connections["gpu1"]
    return install(conn, Agent(conn), opts(index.url))


@pytest.fixture(scope="module")
def gpu1_lock(gpu1_install: InstallResult, connections, index: PackageIndex):
    conn = connections["gpu1"]
    return create_lock(conn, Agent(conn), opts(index.url))


def remote_snapshot(conn: SSHConnection) -> tuple[str, str, str]:
    """(env symlink target, generations, what the env's python imports). Generations are the
    non-dot entries (`.lock`, uv's `.uv-cache` live there too)."""
    out = conn.run(
        f"readlink {ENV}; echo; ls /root/.provision/envs/.provision.gens | tr '\\n' ' '; echo; "
        f"{ENV}/bin/python -c 'import torch; print(torch.__version__)' 2>&1 | tail -1",
        timeout=300,
    ).stdout.split("\n")
    return out[0], out[2], out[3] if len(out) > 3 else ""


def test_install_on_a_cpu_host_plans_cpu_and_verifies_there(
    gpu1_install: InstallResult, connections, index: PackageIndex
) -> None:
    r = gpu1_install
    assert r.action == "installed", r.message
    assert r.env == ENV and r.plan["variant"] == "cpu" and r.plan["torch"] == TORCH
    if not HOST_HAS_GPU["gpu1"]:
        assert "no NVIDIA GPU: CPU build" in r.reasons
    assert r.verify["ok"] and r.verify["torch"]["version"] == "2.13.0+cpu"
    assert r.verify["python"]["executable"].startswith("/root/.provision/envs/.provision.gens/")
    assert any(
        req.startswith("GET /files/torch-2.13.0") and req.endswith(" 200") for req in index.requests
    )
    target, gens, imported = remote_snapshot(connections["gpu1"])
    assert target == r.generation and gens.split() == [target.rsplit("/", 1)[1]]
    assert imported == "2.13.0+cpu"
    # pip's cache went to the data SSD (the system disk is small on rentals); uv's sits beside
    # the generations, on their filesystem, so the env's files are hard links into it (H5)
    cache = "/root/autodl-tmp/.cache/pip"
    if (r.installer or {}).get("tool") == "uv":
        cache = "/root/.provision/envs/.provision.gens/.uv-cache"
    cached = connections["gpu1"].run(f"du -sm {cache} | cut -f1").stdout.strip()
    assert f"--cache-dir {cache}" in r.pip_command
    assert int(cached or 0) > 100, r.pip_command


def test_identical_reinstall_does_nothing(
    gpu1_install: InstallResult, connections, index: PackageIndex
) -> None:
    conn = connections["gpu1"]
    before = remote_snapshot(conn)
    files_before = [r for r in index.requests if r.startswith("GET /files/")]
    again = install(conn, Agent(conn), opts(index.url))
    assert again.action == "unchanged" and "nothing to do" in again.message
    assert "pip" not in again.timings
    assert remote_snapshot(conn) == before
    assert [
        r for r in index.requests if r.startswith("GET /files/")
    ] == files_before  # nothing downloaded


def test_broken_or_missing_index_leaves_the_env_intact(
    gpu1_install: InstallResult, connections, fleet: Fleet, wheelhouse: Path
) -> None:
    conn = connections["gpu1"]
    before = remote_snapshot(conn)
    # 1. nothing listens there any more
    with PackageIndex(wheelhouse, host=fleet.controller_address) as gone:
        dead = gone.url
    with pytest.raises(InstallError) as err:
        install(conn, Agent(conn), opts(dead, extras=["filelock"]))
    assert "is unchanged" in err.value.result.message
    assert any(
        "Connection refused" in ln or "NewConnectionError" in ln
        for ln in err.value.result.pip_lines
    )
    assert remote_snapshot(conn) == before
    # 2. the index answers, but torch's wheel is gone (404)
    wheel = next(p.name for p in wheelhouse.glob("torch-*.whl"))
    with PackageIndex(wheelhouse, host=fleet.controller_address, broken_files={wheel}) as broken:
        with pytest.raises(InstallError) as err:
            install(conn, Agent(conn), opts(broken.url, extras=["filelock"], pip_cache="off"))
    assert any("404" in ln for ln in err.value.result.pip_lines)
    assert remote_snapshot(conn) == before
    assert conn.run("test -e /root/.provision/envs/.provision.gens/.lock").exit_code == 1


def test_lock_on_one_host_install_locked_on_another(
    gpu1_lock, connections, fleet: Fleet, known_hosts: Path, tmp_path: Path
) -> None:
    path = write_lock(gpu1_lock, tmp_path / "provision.lock")
    assert read_lock(path).resolved_on["host"] == "gpu1"
    inventory = fleet.write_inventory(tmp_path / "inventory.ini")
    env = dict(
        os.environ, PYTHONPATH=str(ROOT), COLUMNS="1000", PROVISION_KNOWN_HOSTS=str(known_hosts)
    )
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "provision",
            "install",
            "gpu2",
            "-i",
            str(inventory),
            "--locked",
            str(path),
            "--relay",
            "--known-hosts",
            "strict",
            "--json",
            "--no-project",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=900,
    )
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)["hosts"]["gpu2"]
    assert doc["action"] == "installed" and doc["verify"]["torch"]["version"] == "2.13.0+cpu"
    assert "--require-hashes" in doc["pip_command"] and "--no-index" in doc["pip_command"]
    # relayed: this machine fetched the wheels, one tar stream carried them to gpu2
    assert doc["relayed"]["files"] == len(gpu1_lock.packages) == doc["relayed"]["sent"]
    assert doc["relayed"]["bytes_sent"] > 150_000_000
    freezes = {
        name: conn.run(freeze_command(f"{ENV}/bin/python")).stdout
        for name, conn in connections.items()
    }
    assert "torch==2.13.0+cpu" in freezes["gpu2"].splitlines()
    assert freezes["gpu1"] == freezes["gpu2"]


def test_a_lock_is_refused_where_the_python_differs(
    gpu1_lock, connections, index: PackageIndex, tmp_path: Path
) -> None:
    conn = connections["gpu2"]
    lock = read_lock(write_lock(gpu1_lock, tmp_path / "provision.lock"))
    # the env's Python as the host itself reports it, and a lock for another one
    have = conn.run("python3 -c 'import sys; print(\"%d.%d\" % sys.version_info[:2])'").stdout.strip()
    other = "3.12" if have != "3.12" else "3.13"
    lock.requires["python"] = other
    with pytest.raises(InstallError) as err:
        install(
            conn,
            Agent(conn),
            opts(index.url, torch="latest", locked=lock, env="/root/.provision/envs/other"),
        )
    assert err.value.result.action == "refused"
    assert (
        f"resolved for Python {other}" in err.value.result.message
        and have in err.value.result.message
    )
    assert conn.run("test -e /root/.provision/envs/other").exit_code == 1
