"""`provision health` and playbooks/health.yml on localhost, end to end: the real CLI and the
real agent, with nvidia-smi and dmesg replaced by programs answering from real-format captures
(an 8x V100S box with a throttled GPU, an ECC error, an x8 link; a kernel log with Xid events).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from provision.cli.health import exit_code
from provision.engine.runner import run_playbook
from provision.errors import AgentError, UnreachableError
from provision.inventory.model import Host
from provision.parallel import HostOutcome
from provision.paths import bundle_dir

REPO = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).parent / "fixtures" / "nvidia"
V100_VERDICTS = [
    "healthy",
    "healthy",
    "healthy",
    "degraded",
    "healthy",
    "failing",
    "degraded",
    "healthy",
]


def _program(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(0o755)


@pytest.fixture
def gpu_env(tmp_path: Path) -> dict[str, str]:
    """Environment of a host whose nvidia-smi shows 8 V100S (fixture) and whose dmesg has Xids."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _program(
        bin_dir / "nvidia-smi",
        f'#!/bin/sh\nexec "{sys.executable}" "{FIXTURES / "fake_nvidia_smi.py"}" "$@"\n',
    )
    _program(bin_dir / "dmesg", f"#!/bin/sh\ncat '{FIXTURES / 'kernel-xid.log'}'\n")
    return {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "PROVISION_AGENT_NO_NVML": "1",  # answer from nvidia-smi, not this machine's NVML
        "FAKE_SMI_XML": str(FIXTURES / "v100s-8gpu-460.73.01.xml"),
    }


@pytest.fixture
def cpu_env(tmp_path: Path) -> dict[str, str]:
    """A host without NVIDIA anything: no nvidia-smi on PATH, no NVML."""
    from provision.agent.nvidia import NVIDIA_SMI_PLACES

    found = [p for p in NVIDIA_SMI_PLACES if os.path.exists(p)]
    if found:  # the agent also looks in these fixed places: this machine can't play a CPU host
        pytest.skip(f"this machine has {found[0]}: a CPU-only host can't be simulated here")
    bin_dir = tmp_path / "cpu-bin"
    bin_dir.mkdir()
    return {"PATH": f"{bin_dir}:/usr/bin:/bin", "PROVISION_AGENT_NO_NVML": "1"}


def health(
    *args: str, env: dict[str, str] | None = None, timeout: float = 180
) -> subprocess.CompletedProcess:
    full = dict(os.environ, COLUMNS="200")
    full.pop("FAKE_SMI_XML", None)
    full.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "provision", "health", *args],
        capture_output=True, text=True, cwd=REPO, env=full, timeout=timeout,
    )  # fmt: skip


def describe(proc: subprocess.CompletedProcess) -> str:
    return f"exit {proc.returncode}\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"


def only_load_reasons(result: dict) -> bool:
    """This shared test machine's load average is the fleet's: judged by the agent, it may
    degrade a host. Any other reason is a real finding."""
    return all(r.startswith("host: load average") for r in result["reasons"])


# -- GPUs ----------------------------------------------------------------------------------------


def test_json_health_of_an_eight_gpu_host(gpu_env):
    proc = health("localhost", "--json", env=gpu_env)
    assert proc.returncode == 1, describe(proc)  # a failing GPU: exit 1
    document = json.loads(proc.stdout)
    assert list(document) == ["hosts"] and list(document["hosts"]) == ["localhost"]
    result = document["hosts"]["localhost"]
    assert result["verdict"] == "failing"
    assert [g["verdict"] for g in result["gpus"]] == V100_VERDICTS
    assert "GPU 5: 1 uncorrectable ECC error(s) since the driver loaded" in result["reasons"]
    assert "GPU 6: PCIe link runs x8 of x16" in result["reasons"]
    assert result["kernel_log"]["source"] == "dmesg"
    assert result["nvidia"]["driver_version"] == "460.73.01"
    for gpu in result["gpus"]:
        for key in ("utilization", "memory", "temperature", "power", "clocks", "clock_event_reasons",
                    "ecc", "retired_pages", "remapped_rows", "pcie", "processes", "xid_events"):  # fmt: skip
            assert key in gpu, key
    assert "Fleet health" not in proc.stderr  # --json: no table


def test_one_screen_table_with_a_row_per_gpu_and_the_reasons(gpu_env):
    proc = health("localhost", env=gpu_env)
    assert proc.returncode == 1, describe(proc)
    assert proc.stdout == ""  # human output on stderr only
    err = proc.stderr
    assert "Fleet health · 1 host(s): 1 failing" in err
    rows = [line for line in err.splitlines() if "V100S-PCIE-32GB" in line]
    assert len(rows) == 8
    assert [
        next(v for v in ("healthy", "degraded", "failing") if v in r) for r in rows
    ] == V100_VERDICTS
    assert "88°C" in rows[3] and "705/1597" in rows[3]
    assert "3x8/3x16" in rows[6] and "3x16/3x16" in rows[0]
    assert "ECC 1 unc/0 corr" in rows[5] and "pwr-cap" in rows[4]
    assert "233/250 W" in rows[0] and "97%" in rows[0]
    assert "8 GPU(s)" in err and "driver 460.73.01" in err
    assert "localhost: GPU 3: clocks slowed by hw_slowdown, hw_thermal_slowdown" in err
    assert "Xid 79 on 0000:47:00, not a visible GPU" in err


def test_watch_refreshes_count_times(gpu_env):
    proc = health("localhost", "--watch", "0.2", "--count", "2", env=gpu_env)
    assert proc.returncode == 1, describe(proc)
    # not a terminal: each refresh is printed after the previous one
    assert proc.stderr.count("Fleet health · 1 host(s)") == 2
    assert "refresh 1 every 0.2 s, 1 more" in proc.stderr
    assert "refresh 2 every 0.2 s, 0 more" in proc.stderr


# -- CPU hosts -----------------------------------------------------------------------------------


def test_cpu_host_is_a_host_row_with_the_reason(cpu_env):
    proc = health("localhost", "--json", env=cpu_env)
    result = json.loads(proc.stdout)["hosts"]["localhost"]
    assert result["gpus"] == []
    assert "no NVIDIA GPU" in result["nvidia"]["reason"]
    assert result["host"]["data_dir"]["free_bytes"] > 0
    assert len(result["host"]["load_average"]) == 3
    assert result["verdict"] == "healthy" or only_load_reasons(result), result["reasons"]
    assert proc.returncode == 0, describe(proc)

    proc = health("localhost", env=cpu_env)
    assert proc.returncode == 0, describe(proc)
    assert "CPUs, no GPU" in proc.stderr and "localhost: no GPU: no NVIDIA GPU" in proc.stderr


def test_expected_gpus_missing_is_failing(cpu_env):
    proc = health("localhost", "--json", "--expect-gpus", "2", env=cpu_env)
    assert proc.returncode == 1, describe(proc)
    result = json.loads(proc.stdout)["hosts"]["localhost"]
    assert result["verdict"] == "failing"
    assert "host: 0 GPU(s) visible, 2 expected" in result["reasons"]


def test_unreachable_host_is_reported_and_exits_4(cpu_env):
    # nothing listens on loopback port 1: refused at once
    proc = health("root@127.0.0.1:1", "localhost", "--json", "--connect-timeout", "2", env=cpu_env)
    hosts = json.loads(proc.stdout)["hosts"]
    assert hosts["root@127.0.0.1:1"]["unreachable"] is True
    assert "Connection refused" in hosts["root@127.0.0.1:1"]["error"]
    assert proc.returncode == 4, describe(proc)  # localhost is never failing here (see above)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--count", "2"], "--count bounds the refreshes of --watch"),
        (["--watch", "0"], "--watch takes a number of seconds > 0"),
        (["--watch", "1", "--count", "0"], "--count must be >= 1"),
        (["--watch", "1", "--json"], "--json prints one document"),
    ],
)
def test_usage_errors(args, message):
    proc = health("localhost", *args)
    assert proc.returncode == 2, describe(proc)
    assert message in proc.stderr


def test_exit_code_rules():
    host = Host(name="h")

    def ok(verdict: str) -> HostOutcome:
        return HostOutcome(host, value={"verdict": verdict})

    unreachable = HostOutcome(host, error=UnreachableError("h", "no route"))
    broken = HostOutcome(host, error=AgentError("h", "agent crashed"))
    assert exit_code({"a": ok("healthy"), "b": ok("degraded")}) == 0
    assert exit_code({"a": ok("healthy"), "b": ok("failing")}) == 1
    assert exit_code({"a": ok("healthy"), "b": unreachable}) == 4
    assert exit_code({"a": ok("failing"), "b": unreachable}) == 1
    assert exit_code({"a": broken}) == 1


# -- the playbook --------------------------------------------------------------------------------


def test_health_playbook_prints_the_verdict_and_fails_a_failing_host(gpu_env, monkeypatch):
    for key, value in gpu_env.items():  # LocalConnection's commands inherit this environment
        monkeypatch.setenv(key, value)
    playbook = bundle_dir("playbooks") / "health.yml"
    result = run_playbook(playbook, hosts=[Host(name="localhost", local=True)])
    assert result.failed_hosts == ["localhost"] and result.exit_code() == 1
    by_task = {r.task: r for r in result.for_host("localhost")}
    check = by_task["Check GPUs and host"]
    assert check.status == "ok" and check.result["verdict"] == "failing"
    assert len(check.result["gpus"]) == 8
    assert by_task["Verdict"].msg.startswith("failing: ")
    assert "(8 GPU(s))" in by_task["Verdict"].msg
    assert by_task["Fail the host when its health is not good enough"].status == "failed"

    relaxed = run_playbook(playbook, hosts=[Host(name="localhost", local=True)],
                           extra_vars={"health_fail_on": "never"})  # fmt: skip
    assert relaxed.failed_hosts == [] and relaxed.exit_code() == 0
