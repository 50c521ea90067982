"""`verify_torch` for real: the agent zipapp over LocalConnection, with this machine's torch (CPU).

GPU paths need a GPU host (tests/fleet or a device run); here the CPU checks, the missing-torch
and the CPU-build-on-a-GPU-host verdicts run for real.
"""

from __future__ import annotations

import shutil
import sys

import pytest

from provision.agent.torch_verify import _arch_support
from provision.connection.local import LocalConnection
from provision.remote.agent import Agent

torch = pytest.importorskip("torch")


@pytest.fixture
def agent(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))  # the agent caches its zipapp under ~/.cache
    return Agent(LocalConnection())


def test_verify_with_cpu_torch(agent):
    events = []
    result = agent.call(
        "verify_torch", {"matmul_size": 128}, python=sys.executable, on_event=events.append
    )
    assert result["installed"] is True
    t = result["torch"]
    assert t["version"] == torch.__version__
    assert t["variant"] == "cpu" and t["cuda"] is None and t["cuda_available"] is False
    assert t["cudnn"] is None and t["arch_list"] == []
    cpu = result["cpu"]
    assert cpu["matmul"]["ok"] and cpu["matmul"]["max_rel_err"] < 1e-5
    assert cpu["conv"]["ok"]
    assert cpu["autocast_bf16"]["ok"] and cpu["autocast_bf16"]["dtype"] == "bfloat16"
    assert result["devices"] == [] and result["problems"] == [] and result["ok"] is True
    assert result["python"]["executable"] == sys.executable
    assert {"event": "progress", "step": "cpu"} in events


def test_cpu_build_on_a_gpu_host_is_a_problem(agent):
    result = agent.call(
        "verify_torch", {"matmul_size": 64, "expect_gpus": 2}, python=sys.executable
    )
    assert result["ok"] is False
    assert any("CPU-only build" in p and "2 NVIDIA GPU" in p for p in result["problems"])


@pytest.mark.skipif(not shutil.which("/usr/bin/python3"), reason="needs a second Python")
def test_python_without_torch(agent):
    import subprocess

    probe = subprocess.run(["/usr/bin/python3", "-c", "import torch"], capture_output=True)
    if probe.returncode == 0:
        pytest.skip("/usr/bin/python3 has torch")
    result = agent.call("verify_torch", {}, python="/usr/bin/python3")
    assert result["installed"] is False and result["ok"] is False
    assert "torch is not importable in /usr/bin/python3" in result["problems"][0]


@pytest.mark.parametrize(
    ("arch_list", "cap", "expected"),
    [
        (
            ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"],
            (8, 9),
            ("sm_86", "sass"),
        ),
        (["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"], (12, 0), (None, None)),
        (
            ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120", "compute_120"],
            (12, 0),
            ("sm_120", "sass"),
        ),
        (
            ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120", "compute_120"],
            (12, 1),
            ("sm_120", "sass"),
        ),
        (
            ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120", "compute_120"],
            (13, 0),
            ("compute_120", "ptx"),
        ),
        (["sm_75", "sm_80", "sm_90", "sm_100", "sm_120"], (7, 0), (None, None)),
        (["sm_37", "sm_50"], (3, 7), ("sm_37", "sass")),
    ],
)
def test_arch_support(arch_list, cap, expected):
    assert _arch_support(arch_list, cap) == expected


# --- `provision check localhost`: facts + resolver + verify_torch, for real -----------------


def _check_localhost(tmp_path, *argv):
    import json
    import os
    import subprocess
    from pathlib import Path

    env = dict(os.environ, HOME=str(tmp_path))
    repo = Path(__file__).resolve().parents[2]
    proc = subprocess.run(
        [sys.executable, "-m", "provision", "check", "localhost", "--json", *argv],
        capture_output=True, text=True, env=env, cwd=repo, timeout=300,
    )  # fmt: skip
    return proc.returncode, json.loads(proc.stdout) if proc.stdout.strip() else None, proc.stderr


def test_check_localhost_keeps_a_working_torch(tmp_path):
    rc, doc, err = _check_localhost(tmp_path, "--torch", "any")
    assert rc == 0, err
    host = doc["hosts"]["localhost"]
    assert host["verdict"] == "OK" and host["fix"] is None and host["problems"] == []
    assert host["plan"]["action"] == "keep" and host["plan"]["variant"] == "cpu"
    assert host["plan"]["torch"] == torch.__version__.split("+")[0]
    assert host["verify"]["ok"] is True and host["verify"]["cpu"]["conv"]["ok"] is True
    assert host["python"] == sys.executable


def test_check_localhost_env_without_python_is_broken(tmp_path):
    rc, doc, err = _check_localhost(tmp_path, "--env", str(tmp_path / "no-such-env"))
    assert rc == 1, err
    host = doc["hosts"]["localhost"]
    assert host["verdict"] == "BROKEN"
    assert any("no-such-env/bin/python" in p for p in host["problems"])
    assert host["fix"].startswith("provision install localhost")
