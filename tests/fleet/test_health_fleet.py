"""`provision health` and playbooks/health.yml over real SSH to the test fleet (CPU hosts).

Each test runs the CLI as a user would and reads only what a user sees: exit code, stdout (one
JSON document with --json) and stderr. The fleet's hosts have no NVIDIA driver: each is a
host-level verdict with `gpus: []` and the reason.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import truth
from fleet import Fleet

REPO = Path(__file__).resolve().parents[2]
NAMES = [f"gpu{i}" for i in range(1, 9)]


def provision(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    env = dict(os.environ, COLUMNS="200")  # carries the per-test PROVISION_* paths
    return subprocess.run(
        [sys.executable, "-m", "provision", *args],
        capture_output=True, text=True, cwd=REPO, env=env, timeout=timeout,
    )  # fmt: skip


def describe(proc: subprocess.CompletedProcess) -> str:
    return f"exit {proc.returncode}\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"


LOAD = "host: load average"
SMALL_DISK = "host: data dir /root/autodl-tmp has only"


def reasons_other_than(result: dict, *allowed: str) -> list[str]:
    """The fleet's hosts share this machine's CPUs and load average; the agent degrades a host
    whose load is above 2x its CPUs, which other test runs here can cause, so that reason is
    always allowed. Anything else not `allowed` is a real finding."""
    return [r for r in result["reasons"] if not r.startswith((LOAD, *allowed))]


def logins(fleet: Fleet) -> dict[str, int]:
    return {
        h.name: h.log_file.read_text(errors="replace").count("Accepted publickey")
        for h in fleet.hosts
    }


@pytest.fixture
def inventory(fleet: Fleet, tmp_path: Path) -> str:
    return str(fleet.write_inventory(tmp_path / "inventory.ini"))


@pytest.fixture
def ssh_config(tmp_path: Path) -> str:
    path = tmp_path / "ssh_config"
    path.write_text("")  # the controller's ~/.ssh/config never takes part
    return str(path)


def test_json_health_of_the_fleet(fleet: Fleet, inventory: str, ssh_config: str):
    proc = provision(
        "health", "all", "-i", inventory, "--forks", "8", "--json", "--ssh-config", ssh_config
    )
    document = json.loads(proc.stdout)
    assert list(document) == ["hosts"]
    hosts = document["hosts"]
    assert sorted(hosts) == NAMES
    for name, result in hosts.items():
        assert set(result) >= {"verdict", "reasons", "gpus", "host", "nvidia", "kernel_log"}, name
        gpus = truth.nvidia_gpu_names(fleet, name)  # what the host's own nvidia-smi lists
        assert [g.get("name") for g in result["gpus"]] == gpus
        assert any(r.startswith(SMALL_DISK) for r in result["reasons"]), result["reasons"]
        if not gpus:
            assert "no NVIDIA GPU" in result["nvidia"]["reason"]
            # the shared fleet's "SSD" is a 4 GiB tmpfs: under the agent's 10 GiB, so degraded
            assert result["verdict"] == "degraded"
            assert reasons_other_than(result, SMALL_DISK) == [], (name, result["reasons"])
        else:
            assert result["verdict"] in ("degraded", "failing")
        host = result["host"]
        assert host["data_dir"]["path"] == "/root/autodl-tmp"  # the host's own tmpfs "SSD"
        assert 0 < host["data_dir"]["free_bytes"] <= 4 * 2**30
        assert len(host["load_average"]) == 3
        assert host["memory"]["effective_total_bytes"] > 0
    assert proc.returncode == 0, describe(proc)


def test_cpu_hosts_with_room_are_healthy(make_fleet, tmp_path: Path, ssh_config: str):
    own = make_fleet(2, ssd_size="64g")  # tmpfs: a size limit, no memory taken
    inventory = own.write_inventory(tmp_path / "own.ini")
    proc = provision("health", "all", "-i", str(inventory), "--json", "--ssh-config", ssh_config)
    hosts = json.loads(proc.stdout)["hosts"]
    assert sorted(hosts) == ["gpu1", "gpu2"]
    for name, result in hosts.items():
        assert len(result["gpus"]) == len(truth.nvidia_gpu_names(own, name))
        assert result["host"]["data_dir"]["free_bytes"] > 60 * 2**30
        if not result["gpus"]:  # a GPU server's GPUs may have reasons of their own
            assert reasons_other_than(result) == [], (name, result["reasons"])
            if not result["reasons"]:
                assert result["verdict"] == "healthy"
    assert proc.returncode == 0, describe(proc)


def test_table_has_a_host_row_per_cpu_host(fleet: Fleet, inventory: str, ssh_config: str):
    proc = provision("health", "gpu1", "gpu2", "-i", inventory, "--ssh-config", ssh_config)
    assert proc.returncode == 0, describe(proc)
    assert proc.stdout == ""
    rows = [line for line in proc.stderr.splitlines() if "CPUs, no GPU" in line]
    assert [r.strip("│ ").split()[0] for r in rows] == ["gpu1", "gpu2"]
    assert "Fleet health · 2 host(s)" in proc.stderr
    assert "gpu1, gpu2: no GPU: no NVIDIA GPU" in proc.stderr
    assert "/root/autodl-tmp" in proc.stderr


def test_watch_keeps_one_connection_per_host(fleet: Fleet, inventory: str, ssh_config: str):
    before = logins(fleet)
    proc = provision(
        "health", "gpu3", "gpu4", "-i", inventory, "--watch", "0.5", "--count", "2",
        "--ssh-config", ssh_config,
    )  # fmt: skip
    assert proc.returncode == 0, describe(proc)
    assert proc.stderr.count("Fleet health · 2 host(s)") == 2
    assert "refresh 2 every 0.5 s, 0 more" in proc.stderr
    after = logins(fleet)
    # two refreshes over one SSH login per host (the agent is uploaded once, too)
    assert {n: after[n] - before[n] for n in ("gpu3", "gpu4")} == {"gpu3": 1, "gpu4": 1}


def test_unreachable_host_exits_4_and_the_others_report(
    fleet: Fleet, tmp_path: Path, ssh_config: str
):
    path = fleet.write_inventory(tmp_path / "inv.ini")
    dead = fleet.dead_address()
    with open(path, "a") as f:
        f.write(
            f"dead ansible_host={dead} ansible_user=root ansible_ssh_private_key_file={fleet.key_file}\n"
        )
    proc = provision(
        "health", "gpu1", "dead", "-i", str(path), "--json", "--connect-timeout", "2",
        "--ssh-config", ssh_config,
    )  # fmt: skip
    hosts = json.loads(proc.stdout)["hosts"]
    assert set(hosts["dead"]) == {"error", "unreachable"} and hosts["dead"]["unreachable"] is True
    assert dead in hosts["dead"]["error"]
    assert len(hosts["gpu1"]["gpus"]) == len(truth.nvidia_gpu_names(fleet, "gpu1"))
    assert proc.returncode == 4, describe(proc)


def test_expect_gpus_makes_cpu_hosts_failing(fleet: Fleet, inventory: str, ssh_config: str):
    have = len(truth.nvidia_gpu_names(fleet, "gpu5"))  # one more than the host has
    proc = provision(
        "health",
        "gpu5",
        "-i",
        inventory,
        "--expect-gpus",
        str(have + 1),
        "--json",
        "--ssh-config",
        ssh_config,
    )
    assert proc.returncode == 1, describe(proc)
    result = json.loads(proc.stdout)["hosts"]["gpu5"]
    assert result["verdict"] == "failing"
    assert f"host: {have} GPU(s) visible, {have + 1} expected" in result["reasons"]


def test_health_playbook_over_ssh(fleet: Fleet, inventory: str, ssh_config: str):
    playbook = str(REPO / "playbooks" / "health.yml")
    proc = provision(
        "run", playbook, "gpu1", "gpu2", "-i", inventory, "--json", "--ssh-config", ssh_config
    )
    assert proc.returncode == 0, describe(proc)
    document = json.loads(proc.stdout)
    for name in ("gpu1", "gpu2"):
        assert document["recap"][name]["failed"] == 0
        verdict = [r for r in document["results"] if r["host"] == name and r["task"] == "Verdict"]
        gpus = len(truth.nvidia_gpu_names(fleet, name))
        assert verdict and verdict[0]["msg"].startswith("degraded: " if not gpus else "")  # the 4 GiB "SSD"
        assert "data dir /root/autodl-tmp has only" in verdict[0]["msg"]
        assert verdict[0]["msg"].endswith(f"({gpus} GPU(s))")

    proc = provision(
        "run", playbook, "gpu1", "gpu2", "-i", inventory, "-e", "expect_gpus=1", "--json",
        "--ssh-config", ssh_config,
    )  # fmt: skip
    assert proc.returncode == 1, describe(proc)
    recap = json.loads(proc.stdout)["recap"]
    assert recap["gpu1"]["failed"] == 1 and recap["gpu2"]["failed"] == 1
