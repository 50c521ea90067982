"""`provision train --distributed` end to end (issue 13): real sshd hosts in their own network
namespaces, real torch (the fleet's `conda` kind), real torchrun with gloo, the DDP job in
tests/fleet/train_scripts/ddp.py.

What users rely on: every rank ends with the same weights, on 2 and on 3 hosts; hosts meet on
the network they share even when the SSH address can't carry rank traffic; one failing rank,
Ctrl-C and `provision stop` end every rank on every host (checked in the process list: fleet
hosts share this machine's PID namespace, so /proc here lists every host's processes, and each
carries its host's PROVISION_RUN_MARK); different torch versions are refused before anything runs.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from fleet import Fleet, FleetError, preflight
from polling import wait_until

SCRIPTS = Path(__file__).resolve().parent / "train_scripts"
PYTHON = "/root/miniconda3/bin/python"  # the conda kind's interpreter (has torch)
REPO = Path(__file__).resolve().parents[2]
WEIGHTS = re.compile(r"^(\S+)/rank(\d+) \| weights (\d+) ([0-9a-f]{64})$", re.M)


class DistFleet:
    def __init__(self, fleet: Fleet, work: Path) -> None:
        self.fleet = fleet
        self.work = work
        (work / "ssh_config").write_text("")
        self.inventory = fleet.write_inventory(work / "hosts.ini")

    def argv(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "provision", *args]

    def common(self) -> list[str]:
        return ["-i", str(self.inventory), "--ssh-config", str(self.work / "ssh_config")]

    def train_argv(self, hosts: list[str], *args: str, command: list[str]) -> list[str]:
        return self.argv("train", *hosts, *self.common(), "--distributed", "--dir", str(SCRIPTS),
                         "--python", PYTHON, "--out", str(self.work / "reports"), "--no-live", *args,
                         "--", *command)

    def run(self, argv: list[str], timeout: float = 300) -> subprocess.CompletedProcess:
        env = dict(os.environ, PYTHONPATH=str(REPO))
        return subprocess.run(argv, capture_output=True, text=True, cwd=self.work, timeout=timeout, env=env)

    def ssh(self, host: str, command: str) -> str:
        h = self.fleet.host(host)
        proc = subprocess.run(
            ["ssh", "-F", "/dev/null", "-i", h.key_file, "-o", "StrictHostKeyChecking=no",
             "-o", "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes", "-o", "LogLevel=ERROR",
             "-p", str(h.port), f"{h.user}@{h.address}", command],
            capture_output=True, text=True, timeout=60,
        )
        assert proc.returncode == 0, proc.stderr
        return proc.stdout


def run_processes(run_id: str) -> dict[str, list[int]]:
    """mark -> pids of every live process (on any fleet host) that carries this run's id."""
    found: dict[str, list[int]] = {}
    marker = f"PROVISION_RUN_ID={run_id}".encode()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            env = Path(f"/proc/{name}/environ").read_bytes().split(b"\0")
            state = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in env and state not in ("Z", "X"):
            mark = next((e.split(b"=", 1)[1].decode() for e in env if e.startswith(b"PROVISION_RUN_MARK=")), "?")
            found.setdefault(mark, []).append(int(name))
    return found


def _fleet(kinds: Any, n: int) -> Fleet:
    reason = preflight()
    if reason:
        pytest.skip(f"SSH test fleet unavailable: {reason}")
    try:
        return Fleet(n, kinds=kinds).start()
    except FleetError as exc:
        pytest.fail(f"could not start the distributed test fleet: {exc}", pytrace=False)


@pytest.fixture(scope="module")
def df(tmp_path_factory: pytest.TempPathFactory):
    fleet = _fleet("conda", 3)
    try:
        yield DistFleet(fleet, tmp_path_factory.mktemp("dist"))
    finally:
        fleet.stop()


def _weights(stderr: str) -> dict[int, tuple[str, str]]:
    return {int(m.group(2)): (m.group(1), m.group(4)) for m in WEIGHTS.finditer(stderr)}


def test_two_hosts_train_to_the_same_weights_with_reports(df: DistFleet) -> None:
    proc = df.run(df.train_argv(["gpu1", "gpu2"], "--json", "--run-id", "two-hosts",
                                command=["python", "ddp.py", "--steps", "20"]))
    assert proc.returncode == 0, proc.stderr[-4000:]
    doc = json.loads(proc.stdout)
    assert set(doc["runs"]) == {"gpu1", "gpu2"}
    for host, entry in doc["runs"].items():
        assert entry["state"] == "finished" and entry["exit_code"] == 0, (host, entry)
        assert entry["profile"]["steps"] and entry["profile"]["steps"] >= 10
        report = json.loads(Path(entry["report"]["json"]).read_text())
        assert report["train"]["distributed"]["hosts"] == ["gpu1", "gpu2"]
        # the instrumentation counted DDP's trainable parameters: ddp.py's 32-64-1 MLP in fp32
        assert report["train"]["summary"]["grad_bytes"] == (32 * 64 + 64 + 64 * 1 + 1) * 4
        assert Path(entry["report"]["html"]).read_text().count("<svg") >= 1
    section = doc["distributed"]
    assert section["nnodes"] == 2 and section["world_size"] == 2
    assert section["fabric"]["master_host"] == "gpu1"
    assert section["fabric"]["master_addr"] == df.fleet.host("gpu1").address  # one shared network here
    assert section["allreduce"]["status"] == "ok" and section["allreduce"]["busbw_gbs"] > 0
    weights = _weights(proc.stderr)
    assert sorted(weights) == [0, 1], proc.stderr[-3000:]
    assert {h for h, _ in weights.values()} == {"gpu1", "gpu2"}  # one rank on each host
    assert len({w for _, w in weights.values()}) == 1, weights  # DDP kept them in step
    # on each host: the per-rank log torchrun wrote, and the weights file of that host's rank
    for host in ("gpu1", "gpu2"):
        rank = next(r for r, (h, _) in weights.items() if h == host)
        run_dir = "/root/autodl-tmp/runs/two-hosts"
        assert df.ssh(host, f"cat {run_dir}/weights-rank{rank}.txt").strip() == weights[rank][1]
        logs = df.ssh(host, f"find {run_dir}/ranks -name 'stdout.log'").split()
        assert logs, f"{host}: no per-rank log under {run_dir}/ranks"
        assert f"[rank{rank}]:weights" in df.ssh(host, f"cat {run_dir}/output.log")
    assert run_processes("two-hosts") == {}
    # `runs` sees the one run on both hosts
    runs = df.run(df.argv("runs", "gpu1", "gpu2", *df.common(), "--json"))
    assert runs.returncode == 0, runs.stderr
    assert runs.stdout.count("two-hosts") >= 2
    # the same two hosts again: the all-reduce measured above is shown with its age, not re-run
    again = df.run(df.train_argv(["gpu1", "gpu2"], "--json", "--run-id", "two-hosts-again",
                                 command=["python", "ddp.py", "--steps", "2"]))
    assert again.returncode == 0, again.stderr[-4000:]
    reused = json.loads(again.stdout)["distributed"]["allreduce"]
    assert reused["busbw_gbs"] == section["allreduce"]["busbw_gbs"] and reused["reused"]["age_s"] >= 0
    assert "--fresh-allreduce measures again" in again.stderr


def test_three_hosts_train_to_the_same_weights(df: DistFleet) -> None:
    proc = df.run(df.train_argv(["gpu1", "gpu2", "gpu3"], "--no-allreduce", "--master", "gpu2",
                                command=["python", "ddp.py", "--steps", "12"]))
    assert proc.returncode == 0, proc.stderr[-4000:]
    weights = _weights(proc.stderr)
    assert sorted(weights) == [0, 1, 2], proc.stderr[-3000:]
    assert {h for h, _ in weights.values()} == {"gpu1", "gpu2", "gpu3"}
    assert len({w for _, w in weights.values()}) == 1, weights
    # --master: gpu2 serves the rendezvous and is node 0
    assert f"fabric: {df.fleet.host('gpu2').address} on" in proc.stderr
    assert re.search(r"^gpu2: run \S+ running \(node 0\)", proc.stderr, re.M), proc.stderr[-3000:]
    assert "all-reduce between the hosts" not in proc.stderr  # --no-allreduce


def test_a_failing_rank_ends_every_rank_on_every_host(df: DistFleet) -> None:
    proc = df.run(df.train_argv(["gpu1", "gpu2", "gpu3"], "--json", "--no-allreduce", "--run-id", "one-fails",
                                command=["python", "ddp.py", "--steps", "100000", "--sleep", "0.05",
                                         "--fail-rank", "1", "--fail-at", "5"]))
    assert proc.returncode == 1, proc.stderr[-4000:]
    doc = json.loads(proc.stdout)
    states = {h: e["state"] for h, e in doc["runs"].items()}
    assert "failed" in states.values() and set(states.values()) <= {"failed", "stopped"}, states
    failed = [f for f in doc["distributed"]["findings"] if f["id"] == "rank_failed"]
    assert failed, doc["distributed"]["findings"]
    first = failed[0]
    assert "/rank1 failed (exit code 3)" in first["title"], first
    assert "failing on purpose" in first["evidence"], first
    # the command returned: nothing of the run is left on any host
    assert run_processes("one-fails") == {}


def test_ctrl_c_stops_every_rank(df: DistFleet) -> None:
    argv = df.train_argv(["gpu1", "gpu2"], "--no-allreduce", "--run-id", "ctrl-c",
                         command=["python", "ddp.py", "--steps", "100000", "--sleep", "0.1"])
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=df.work, env=env)
    try:
        seen: list[str] = []
        assert proc.stderr is not None
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and sum("| step 5 rank" in s for s in seen) < 2:
            line = proc.stderr.readline()
            if not line:
                break
            seen.append(line)
        assert sum("| step 5 rank" in s for s in seen) == 2, "".join(seen[-40:])
        marks = run_processes("ctrl-c")
        assert {m.rsplit(".", 1)[1] for m in marks} == {"0", "1"}, marks  # ranks running on both hosts
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0
    assert run_processes("ctrl-c") == {}
    for host in ("gpu1", "gpu2"):
        state = json.loads(df.ssh(host, "cat /root/autodl-tmp/runs/ctrl-c/state.json"))
        assert state["state"] == "stopped", (host, state)


def test_provision_stop_on_one_host_ends_the_run_on_every_host(df: DistFleet) -> None:
    proc = df.run(df.train_argv(["gpu1", "gpu2", "gpu3"], "--no-allreduce", "--detach", "--run-id", "stopped",
                                command=["python", "ddp.py", "--steps", "100000", "--sleep", "0.1"]))
    assert proc.returncode == 0, proc.stderr[-3000:]

    def all_ranks_stepping() -> bool:
        return all("step 5 rank" in df.ssh(h, "cat /root/autodl-tmp/runs/stopped/output.log")
                   for h in ("gpu1", "gpu2", "gpu3"))

    wait_until("every rank to take 5 steps", all_ranks_stepping, 240, interval=0.2)
    assert len(run_processes("stopped")) == 3
    stop = df.run(df.argv("stop", "gpu2", "stopped", *df.common(), "--grace", "5", "--json"))
    assert stop.returncode == 0, stop.stderr
    assert set(json.loads(stop.stdout)["hosts"]) == {"gpu1", "gpu2", "gpu3"}
    assert run_processes("stopped") == {}


def test_different_torch_versions_are_refused_before_anything_starts(df: DistFleet) -> None:
    # gpu3's interpreter really imports another torch: a torch package earlier on its sys.path
    site = df.ssh("gpu3", f"{PYTHON} -c 'import site; print(site.getsitepackages()[0])'").strip()
    df.ssh("gpu3", "mkdir -p /root/oldtorch/torch && printf '__version__ = \"2.12.1+cu121\"\\ncuda = \"12.1\"\\n' "
                   f"> /root/oldtorch/torch/version.py && touch /root/oldtorch/torch/__init__.py && "
                   f"echo /root/oldtorch > {site}/aa-oldtorch.pth")
    try:
        proc = df.run(df.train_argv(["gpu1", "gpu2", "gpu3"], "--run-id", "refused",
                                    command=["python", "ddp.py"]))
    finally:
        df.ssh("gpu3", f"rm -rf /root/oldtorch {site}/aa-oldtorch.pth")
    assert proc.returncode != 0
    err = proc.stderr
    assert "torch versions or CUDA builds differ" in err, err[-3000:]
    assert "gpu3: torch 2.12.1+cu121 (CUDA 12.1)" in err and "gpu1: torch 2.13.0" in err, err[-3000:]
    for host in ("gpu1", "gpu2", "gpu3"):  # nothing started: no run dir anywhere
        assert "refused" not in df.ssh(host, "ls /root/autodl-tmp/runs 2>/dev/null || true").split()


def test_hosts_meet_on_the_second_network_when_ssh_goes_through_a_gateway(tmp_path: Path) -> None:
    fleet = _fleet([{"conda", "backnet", "gateway"}, {"conda", "backnet", "gateway"}], 2)
    try:
        dist = DistFleet(fleet, tmp_path)
        proc = dist.run(dist.train_argv(["gpu1", "gpu2"], "--json", command=["python", "ddp.py", "--steps", "10"]))
        assert proc.returncode == 0, proc.stderr[-4000:]
        section = json.loads(proc.stdout)["distributed"]
        back = fleet.host("gpu1").back_address
        assert back and section["fabric"]["master_addr"] == back, section["fabric"]
        assert section["fabric"]["master_addr"] != fleet.host("gpu1").address  # not the SSH (gateway) address
        backs = {fleet.host(h).back_address for h in ("gpu1", "gpu2")}
        seen = set(re.findall(r"MASTER_ADDR=(\S+?)\)", proc.stderr))
        assert seen and seen <= backs, (seen, backs)  # the ranks' store is on the back network too
        weights = _weights(proc.stderr)
        assert sorted(weights) == [0, 1] and len({w for _, w in weights.values()}) == 1, weights
    finally:
        fleet.stop()


def test_a_playbook_train_task_with_distributed_runs_one_job_across_the_plays_hosts(
        df: DistFleet, tmp_path: Path) -> None:
    play = tmp_path / "dist.yml"
    play.write_text(f"""
- name: distributed
  hosts: all
  gather_facts: false
  tasks:
    - name: ddp across the play
      train:
        command: [python, ddp.py, --steps, "10"]
        dir: {SCRIPTS}
        python: {PYTHON}
        distributed: true
        allreduce: false
        run_id: from-a-play
      register: job
    - name: show
      debug:
        msg: "nodes={{{{ job.distributed.nnodes }}}} state={{{{ job.run.state }}}}"
""")
    proc = df.run(df.argv("run", str(play), "gpu1", "gpu3", *df.common()))
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    assert (proc.stdout + proc.stderr).count("nodes=2 state=finished") == 2, proc.stdout[-3000:]
    hashes = {}
    for host in ("gpu1", "gpu3"):
        state = json.loads(df.ssh(host, "cat /root/autodl-tmp/runs/from-a-play/state.json"))
        assert state["state"] == "finished" and state["distributed"]["nnodes"] == 2, state
        hashes[host] = df.ssh(host, "cat /root/autodl-tmp/runs/from-a-play/weights-rank*.txt").strip()
    assert len(set(hashes.values())) == 1 and all(hashes.values()), hashes
    assert "from-a-play" not in df.ssh("gpu2", "ls /root/autodl-tmp/runs 2>/dev/null || true")


def test_attach_to_one_host_follows_and_reports_the_whole_distributed_run(df: DistFleet) -> None:
    proc = df.run(df.train_argv(["gpu2", "gpu3"], "--no-allreduce", "--detach", "--json", "--run-id", "attached",
                                command=["python", "ddp.py", "--steps", "40", "--sleep", "0.05"]))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert {e["state"] for e in json.loads(proc.stdout)["runs"].values()} == {"running"}
    attach = df.run(df.argv("attach", "gpu3", "attached", *df.common(), "--json", "--no-live",
                            "--out", str(df.work / "reports")))
    assert attach.returncode == 0, attach.stderr[-3000:]
    doc = json.loads(attach.stdout)
    assert {h: e["state"] for h, e in doc["runs"].items()} == {"gpu2": "finished", "gpu3": "finished"}
    assert doc["distributed"]["hosts"] == ["gpu2", "gpu3"] and doc["distributed"]["world_size"] == 2
    weights = _weights(attach.stderr)
    assert sorted(weights) == [0, 1] and len({w for _, w in weights.values()}) == 1, attach.stderr[-3000:]
