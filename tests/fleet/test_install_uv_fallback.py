"""pip builds the env when no uv can be had (`--installer auto`, the default), through the CLI on
a fresh fleet host: the host has no uv, the index has no uv wheel to bootstrap from, and this
controller has none to relay (its `uv` package shadowed by one that fails to import, no uv on
PATH) -- a controller without uv installed. ONE torch install, by pip, verified and switched.
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
from tests.support.package_index import PackageIndex, torch_wheelhouse

ROOT = Path(__file__).resolve().parents[2]
ENV = "/root/.provision/envs/provision"


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


def test_pip_builds_the_env_when_no_uv_can_be_had(fleet: Fleet, tmp_path: Path) -> None:
    shadow = tmp_path / "no-uv"
    (shadow / "uv").mkdir(parents=True)
    (shadow / "uv" / "__init__.py").write_text("raise ImportError('uv is not installed here')\n")
    inventory = fleet.write_inventory(tmp_path / "inventory.ini")
    known = fleet.write_known_hosts(tmp_path / "known_hosts")
    host = fleet.hosts[0]
    variant = ["--variant", "cpu"] if nvidia_gpu_names(fleet, host) else []
    env = dict(os.environ, PYTHONPATH=f"{shadow}{os.pathsep}{ROOT}", PATH="/usr/bin:/bin",
               COLUMNS="1000", PROVISION_KNOWN_HOSTS=str(known))  # fmt: skip
    with PackageIndex(torch_wheelhouse(), host=fleet.controller_address) as index:
        run = subprocess.run(
            [sys.executable, "-m", "provision", "install", host.name, "-i", str(inventory),
             "--torch", "2.13.0", *variant, "--index-url", index.url, "--known-hosts", "strict",
             "--json", "--no-project"],
            capture_output=True, text=True, env=env, cwd=tmp_path, timeout=1200,
        )  # fmt: skip
        asked_for_uv = [q for q in index.requests if "/simple/uv/" in q]
    assert run.returncode == 0, run.stderr[-3000:]
    doc = json.loads(run.stdout)["hosts"][host.name]
    assert doc["action"] == "installed", doc["message"]
    assert doc["installer"] == {"tool": "pip"}
    warning = next(w for w in doc["warnings"] if w.startswith("uv unavailable"))
    assert "this machine has no uv to relay" in warning and warning.endswith("pip builds the environment")
    assert asked_for_uv  # the bootstrap from the same index was tried first
    assert doc["pip_command"].startswith(f"{doc['generation']}/bin/python -m pip install")
    assert doc["verify"]["ok"] and doc["verify"]["torch"]["version"] == "2.13.0+cpu"
    conn = SSHConnection(host.as_host(), ConnectOptions(known_hosts="strict",
                                                        extra_known_hosts=[str(known)]))  # fmt: skip
    try:
        pyvenv = conn.run(f"cat {doc['generation']}/pyvenv.cfg", timeout=60).stdout
        assert "uv = " not in pyvenv and "-m venv" in pyvenv  # python -m venv made it
        imported = conn.run(f"{ENV}/bin/python -c 'import torch; print(torch.__version__)'", timeout=300)
        assert imported.stdout.strip().splitlines()[-1] == "2.13.0+cpu"
        assert conn.run("test -e ~/.cache/provision/uv/bin/uv", timeout=60).exit_code == 1
    finally:
        conn.close()
