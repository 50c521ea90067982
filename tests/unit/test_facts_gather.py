"""The `facts` agent command end to end, as the controller runs it: a fresh interpreter, the
request on stdin, JSON lines on stdout. Run with every Python found here that the agent must
support (this one, Debian's /usr/bin/python3 without pynvml or torch, a 3.8 if present)."""

import glob
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from provision.agent import facts as facts_command
from provision.agent import nvidia
from provision.agent.facts import cpu, mounts

REPO = Path(__file__).resolve().parents[2]


def _real_home() -> str:
    """This machine's home (tests run with a temporary HOME, tests/conftest.py)."""
    import pwd

    return pwd.getpwuid(os.getuid()).pw_dir

def interpreters():
    found = [sys.executable]
    candidates = ["/usr/bin/python3"] + sorted(
        glob.glob(os.path.join(_real_home(), ".pyenv/versions/3.8*/bin/python3"))
    )
    for path in candidates:
        if os.access(path, os.X_OK) and os.path.realpath(path) not in map(os.path.realpath, found):
            found.append(path)
    return found


def run_agent(python, command, request, cwd):
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run(
        [python, "-m", "provision.agent", command],
        input=(json.dumps(request) + "\n").encode(),
        capture_output=True,
        env=env,
        cwd=str(cwd),
        timeout=120,
    )
    return (
        proc.returncode,
        [json.loads(line) for line in proc.stdout.decode().splitlines()],
        proc.stderr.decode(),
    )


@pytest.mark.parametrize("python", interpreters())
def test_facts_with_each_python(python, tmp_path):
    code, events, stderr = run_agent(python, "facts", {}, tmp_path)
    assert code == 0, stderr
    (event,) = events
    assert event["event"] == "result"
    facts = event["data"]
    assert set(facts_command.KEYS) <= set(facts)
    failed = {
        k: facts[k]
        for k in facts_command.KEYS
        if isinstance(facts[k], dict) and "error" in facts[k]
    }
    assert failed == {}
    assert facts["schema"] == 1
    assert os.path.realpath(facts["python"]["agent"]["executable"]) == os.path.realpath(python)
    assert facts["cpu"]["effective_cpus"] >= 1
    assert facts["memory"]["effective_total_bytes"] > 0
    assert any(m["mountpoint"] == "/" for m in facts["disks"]["mounts"])
    assert facts["data_dir"]["path"] and facts["data_dir"]["reason"]
    assert isinstance(facts["gpus"], list)
    if not facts["gpus"]:
        assert facts["nvidia"]["reason"]
    if facts["torch"]["installed"]:
        assert facts["torch"]["version"]
    else:
        assert "not installed" in facts["torch"]["reason"]


def test_only_some_keys_and_a_requested_data_dir(tmp_path):
    code, events, stderr = run_agent(
        sys.executable, "facts", {"only": ["cpu", "data_dir"], "data_dir": str(tmp_path)}, tmp_path
    )
    assert code == 0, stderr
    facts = events[0]["data"]
    assert set(facts) == {"schema", "cpu", "data_dir", "timings_ms", "seconds"}
    assert (
        facts["data_dir"]["path"] == str(tmp_path)
        and facts["data_dir"]["reason"] == "requested with the data_dir variable"
    )


def test_unknown_key_is_a_clear_error(tmp_path):
    code, events, _ = run_agent(sys.executable, "facts", {"only": ["gpu"]}, tmp_path)
    assert code == 1
    assert events[-1]["event"] == "error"
    assert (
        "unknown fact key(s) ['gpu']" in events[-1]["message"] and "gpus" in events[-1]["message"]
    )


def test_one_failing_source_does_not_stop_the_others(monkeypatch):
    def broken(root="/", mounts=None):
        raise OSError("/proc/cpuinfo: Input/output error")

    monkeypatch.setattr(cpu, "gather", broken)
    facts = facts_command.gather({"only": ["cpu", "memory", "hostname"]}, ctx=None)
    assert facts["cpu"] == {"error": "OSError: /proc/cpuinfo: Input/output error"}
    assert facts["memory"]["total_bytes"] > 0 and facts["hostname"]


def test_mountinfo_is_read_once_per_call_and_shared(monkeypatch):
    calls = []
    real = mounts.read_mounts

    def counting(path="/proc/self/mountinfo"):
        calls.append(path)
        return real(path)

    monkeypatch.setattr(mounts, "read_mounts", counting)
    for module in ("cgroup", "disks", "data_dir", "system"):  # their own imported names too
        monkeypatch.setattr(f"provision.agent.facts.{module}.read_mounts", counting)
    facts = facts_command.gather({}, ctx=None)
    assert calls == ["/proc/self/mountinfo"]
    assert facts["cpu"]["cgroup_version"] == cpu.gather()["cgroup_version"]
    assert any(m["mountpoint"] == "/" for m in facts["disks"]["mounts"])
    assert facts["data_dir"]["path"]


def test_the_gpu_query_runs_inline_without_driver_tools_and_in_a_thread_with_them(
    monkeypatch, tmp_path
):
    import threading

    seen = []
    real_collect = nvidia.collect

    def collect(**kwargs):
        seen.append(threading.current_thread() is threading.main_thread())
        return real_collect(**kwargs)

    monkeypatch.setattr(nvidia, "collect", collect)
    monkeypatch.setenv("PROVISION_AGENT_NO_NVML", "1")
    monkeypatch.setattr(nvidia, "find_nvidia_smi", lambda: None)
    facts = facts_command.gather({"only": ["gpus", "nvidia"]}, ctx=None)
    assert facts["gpus"] == [] and facts["nvidia"]["reason"]
    monkeypatch.setattr(nvidia, "find_nvidia_smi", lambda: str(tmp_path / "nvidia-smi"))
    facts = facts_command.gather({"only": ["gpus"]}, ctx=None)
    assert seen == [True, False]  # inline (no thread to start), then in a thread
