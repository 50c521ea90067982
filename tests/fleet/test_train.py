"""`provision train` end to end on rental-like fleet hosts (issue 12): real sshd, real torch (the
fleet's `conda` kind: /root/miniconda3/bin/python imports this machine's torch 2.13.0 CPU), real
training scripts from tests/fleet/train_scripts/, a real network filesystem (sshfs from one
fleet host to another over the fleet bridge) for the io_bound case.

What is asserted is what users rely on: the --json contract, the findings and their advice, that
a run survives its controller being killed, that `stop` leaves no process behind on the host,
and that the idle stop runs its command once, after the job ended.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fleet import Fleet, FleetError, preflight

SCRIPTS = Path(__file__).resolve().parent / "train_scripts"
PYTHON = "/root/miniconda3/bin/python"  # the conda kind's interpreter (has torch)
NETDISK = "/root/netdisk"  # on gpu1: an sshfs mount of gpu2's /root/autodl-tmp/shared
ENTRY_KEYS = {"run_id", "state", "exit_code", "seconds", "workdir", "log", "profile", "findings", "report"}
PROFILE_KEYS = {"steps", "data_wait_fraction", "gpu_util_mean", "cpu_util_mean", "num_workers", "amp"}


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str

    @property
    def doc(self) -> dict[str, Any]:
        assert self.stdout.strip(), f"no JSON on stdout; stderr:\n{self.stderr[-3000:]}"
        return json.loads(self.stdout)


@dataclass
class TrainFleet:
    fleet: Fleet
    inventory: Path
    work: Path

    def args(self) -> list[str]:
        return ["-i", str(self.inventory), "--ssh-config", str(self.work / "ssh_config"), "--json"]

    def cmd(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "provision", *args]

    def provision(self, *args: str, timeout: float = 240) -> Run:
        proc = subprocess.run(self.cmd(*args), capture_output=True, text=True, cwd=self.work, timeout=timeout)
        return Run(proc.returncode, proc.stdout, proc.stderr)

    def train(self, host: str, *args: str, command: list[str], timeout: float = 240) -> Run:
        return self.provision("train", host, *self.args(), "--dir", str(SCRIPTS), "--python", PYTHON,
                              "--out", str(self.work / "reports"), *args, "--", *command, timeout=timeout)

    def ssh(self, host: str, command: str) -> str:
        h = self.fleet.host(host)
        proc = subprocess.run(
            ["ssh", "-F", "/dev/null", "-i", h.key_file, "-o", "StrictHostKeyChecking=no",
             "-o", "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes", "-o", "LogLevel=ERROR",
             f"root@{h.address}", command],
            capture_output=True, text=True, timeout=60,
        )
        assert proc.returncode == 0, proc.stderr
        return proc.stdout


@pytest.fixture(scope="module")
def tf(tmp_path_factory: pytest.TempPathFactory):
    reason = preflight()
    if reason:
        pytest.skip(f"SSH test fleet unavailable: {reason}")
    try:
        fleet = Fleet(3, kinds="conda").start()
    except FleetError as exc:
        pytest.fail(f"could not start the train test fleet: {exc}", pytrace=False)
    work = tmp_path_factory.mktemp("train")
    (work / "ssh_config").write_text("")
    inventory = fleet.write_inventory(work / "hosts.ini")
    stamp = "/root/autodl-tmp/idle-stopped"
    text = inventory.read_text().replace(
        "gpu3 ansible_host", f"gpu3 stop_command='date +%s.%N >> {stamp}' ansible_host")
    inventory.write_text(text)
    try:
        yield TrainFleet(fleet, inventory, work)
    finally:
        fleet.stop()


def _entry(run: Run, host: str) -> dict[str, Any]:
    entry = run.doc["runs"][host]
    assert set(entry) == ENTRY_KEYS, entry
    assert set(entry["profile"]) == PROFILE_KEYS, entry["profile"]
    return entry


def _finding(entry: dict[str, Any], fid: str) -> dict[str, Any] | None:
    return next((f for f in entry["findings"] if f["id"] == fid), None)


def test_starved_loader_is_input_bound_with_num_workers_advice(tf: TrainFleet) -> None:
    run = tf.train("gpu1", command=["python", "starved.py"])
    assert run.returncode == 0, run.stderr[-3000:]
    entry = _entry(run, "gpu1")
    assert entry["state"] == "finished" and entry["exit_code"] == 0
    prof = entry["profile"]
    assert prof["data_wait_fraction"] > 0.5, prof
    assert prof["num_workers"] == 0 and prof["steps"] >= 60 and prof["amp"] is False
    assert prof["gpu_util_mean"] is None  # a CPU host
    found = _finding(entry, "input_bound")
    assert found is not None, entry["findings"]
    report = json.loads(Path(entry["report"]["json"]).read_text())
    cpus = report["facts"]["cpu"]["usable_cpus"]
    assert f"num_workers={max(2, cpus - 1)}" in found["recommendation"], found
    assert _finding(entry, "gpu_rules_not_applied") is not None  # and it says why
    # the run's log and code dir are on the host, the code dir holds what was shipped
    assert entry["workdir"].startswith("/root/autodl-tmp/runs/" + entry["run_id"])
    assert "epoch 1 took" in tf.ssh("gpu1", f"cat {entry['log']}")
    assert "starved.py" in tf.ssh("gpu1", f"ls {entry['workdir']}").split()
    assert "epoch 0 took" in run.stderr  # followed live with the host prefix
    assert "gpu1 | epoch 0 took" in run.stderr
    html = Path(entry["report"]["html"]).read_text()
    assert "input_bound" in html and "<svg" in html


def test_compute_bound_is_not_input_bound_and_code_is_not_resent(tf: TrainFleet) -> None:
    run = tf.train("gpu1", command=["python", "compute.py"])
    assert run.returncode == 0, run.stderr[-3000:]
    entry = _entry(run, "gpu1")
    assert entry["profile"]["data_wait_fraction"] < 0.3, entry["profile"]
    assert _finding(entry, "input_bound") is None, entry["findings"]
    # the same --dir as the previous test's run: nothing changed, nothing sent
    assert "code: 0 sent" in run.stderr, run.stderr[-2000:]


def test_reading_from_a_network_disk_is_io_bound(tf: TrainFleet) -> None:
    fleet = tf.fleet
    if shutil.which("sshfs") is None:
        pytest.skip("sshfs is not installed (scripts/test.sh installs it)")
    server = fleet.host("gpu2")
    fleet.ns_exec(server, "mkdir -p /root/autodl-tmp/shared && cd /root/autodl-tmp/shared && "
                  "for i in $(seq 1 60); do head -c 20000 /dev/urandom > sample-$i.bin; done")
    # a rented network disk is slow next to the GPU's step: a 4 Mbit/s link from the file server makes
    # each 20 KB sample wait ~40 ms, so the run is I/O-bound however loaded the machine running it is
    fleet.shape(server, rate="4mbit", delay=None)
    try:
        fleet.ns_exec("gpu1", (
            f"mkdir -p {NETDISK} && sshfs -o IdentityFile={server.key_file} -o StrictHostKeyChecking=no "
            f"-o UserKnownHostsFile=/dev/null "
            f"root@{server.address}:/root/autodl-tmp/shared {NETDISK} </dev/null >/dev/null 2>&1"))
        run = tf.train("gpu1", command=["python", "netdisk.py", NETDISK])
        assert run.returncode == 0, run.stderr[-3000:]
        entry = _entry(run, "gpu1")
        found = _finding(entry, "io_bound")
        assert found is not None, json.dumps({k: entry.get(k) for k in ("profile", "findings")})[:6000]
        assert "fuse.sshfs" in found["evidence"] and NETDISK in found["evidence"]
        assert f"provision stage host:{NETDISK} gpu1 --name netdisk" in found["recommendation"], found
    finally:
        fleet.ns_exec("gpu1", f"fusermount -u {NETDISK} || umount -l {NETDISK}", check=False)
        fleet.unshape(server)


def test_failing_script_gives_exit_code_and_last_log_lines(tf: TrainFleet) -> None:
    run = tf.train("gpu2", command=["python", "fail.py"])
    assert run.returncode == 1, run.stderr[-3000:]
    entry = _entry(run, "gpu2")
    assert entry["state"] == "failed" and entry["exit_code"] == 3
    found = _finding(entry, "failed")
    assert found is not None and found["severity"] == "critical"
    assert "marker-7f3a" in found["evidence"] and "working on batch 4" in found["evidence"]


def test_killed_controller_then_attach_sees_the_same_run_finish(tf: TrainFleet) -> None:
    run_id = "attach-" + os.urandom(3).hex()
    cmd = tf.cmd("train", "gpu2", *tf.args(), "--dir", str(SCRIPTS), "--python", PYTHON, "--run-id", run_id,
                 "--out", str(tf.work / "reports"), "--", "python", "long.py", "24")
    proc = subprocess.Popen(cmd, cwd=tf.work, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen = []
    deadline = time.monotonic() + 120
    assert proc.stderr is not None
    for line in proc.stderr:  # until the job is visibly running
        seen.append(line)
        if "gpu2 | step 2" in line or time.monotonic() > deadline:
            break
    proc.kill()  # SIGKILL: no clean-up of any kind on the controller
    proc.wait(timeout=30)
    assert any("gpu2 | step 2" in s for s in seen), "".join(seen)[-3000:]
    runs = tf.provision("runs", "gpu2", *tf.args())
    assert runs.returncode == 0, runs.stderr
    [listed] = [r for r in runs.doc["hosts"]["gpu2"]["runs"] if r["run_id"] == run_id]
    assert listed["state"] == "running", listed
    attached = tf.provision("attach", "gpu2", run_id, *tf.args(), "--out", str(tf.work / "reports"))
    assert attached.returncode == 0, attached.stderr[-3000:]
    entry = _entry(attached, "gpu2")
    assert entry["run_id"] == run_id and entry["state"] == "finished" and entry["exit_code"] == 0
    assert "gpu2 | done after 24 steps" in attached.stderr


def test_stop_ends_every_process_of_the_run(tf: TrainFleet, monkeypatch: pytest.MonkeyPatch) -> None:
    run_id = "stop-" + os.urandom(3).hex()
    secret = "tok-" + os.urandom(8).hex()
    monkeypatch.setenv("TRAIN_TEST_TOKEN", secret)  # in the controller's environment only
    started = tf.train("gpu1", "--detach", "--run-id", run_id, "--env-from", "TRAIN_TEST_TOKEN",
                       command=["python", "long.py", "100000"])
    assert secret not in started.stdout + started.stderr
    assert started.returncode == 0, started.stderr[-3000:]
    entry = _entry(started, "gpu1")
    assert entry["state"] == "running"
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:  # the two DataLoader workers are up once steps print
        logs = tf.provision("logs", "gpu1", run_id, *tf.args())
        if any(line.startswith("step ") for line in logs.doc["hosts"]["gpu1"]["tail"] or []):
            break
        time.sleep(1)
    state = json.loads(tf.ssh("gpu1", f"cat /root/autodl-tmp/runs/{run_id}/state.json"))
    pgid = state["pgid"]
    # the secret reached the job's environment only: not argv, not the run's files
    assert secret not in tf.ssh("gpu1", "ps -eo args=")
    assert tf.ssh("gpu1", f"grep -rl {secret} /root/autodl-tmp/runs/{run_id} || true").strip() == ""
    assert tf.ssh("gpu1", f"grep -ac {secret} /proc/{pgid}/environ || true").strip() == "1"
    members = tf.ssh("gpu1", f"ps -o pid= -g {pgid} || true").split()
    assert len(members) >= 3, members  # main + 2 workers
    stopped = tf.provision("stop", "gpu1", run_id, *tf.args())
    assert stopped.returncode == 0, stopped.stderr
    result = stopped.doc["hosts"]["gpu1"]
    assert result["state"] == "stopped" and result["left"] == []
    assert set(map(int, members)) <= set(result["terminated"]) | set(result["killed"])
    listing = tf.ssh("gpu1", "ps -eo pid=,pgid=,stat=,args=")
    rows = [line.split(None, 3) for line in listing.splitlines() if line.strip()]
    # a zombie (stat Z) has ended and holds nothing; init reaps it when it gets to it
    rows = [r for r in rows if not r[2].startswith("Z")]
    assert not [r for r in rows if r[1] == str(pgid)], listing
    assert not [r for r in rows if "long.py 100000" in r[-1]], listing
    # issue 31: the same --run-id again is refused in words, not with a raw `[Errno 17] File exists`
    again = tf.train("gpu1", "--detach", "--run-id", run_id, command=["python", "long.py", "1"])
    assert again.returncode != 0
    said = json.dumps(again.doc["runs"]["gpu1"]) + again.stderr
    assert f"run id '{run_id}' is already used on this host" in said and "Errno 17" not in said, said[-3000:]


def test_idle_stop_runs_once_and_only_after_the_job_ended(tf: TrainFleet) -> None:
    stamp = "/root/autodl-tmp/idle-stopped"
    run = tf.train("gpu3", "--stop-when-idle", "2s", command=["python", "quick.py"])
    assert run.returncode == 0, run.stderr[-3000:]
    entry = _entry(run, "gpu3")
    state = json.loads(tf.ssh("gpu3", f"cat /root/autodl-tmp/runs/{entry['run_id']}/state.json"))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        state = json.loads(tf.ssh("gpu3", f"cat /root/autodl-tmp/runs/{entry['run_id']}/state.json"))
        if (state.get("idle") or {}).get("status") not in (None, "watching"):
            break
        time.sleep(0.5)
    assert state["idle"]["status"] == "stopped", state
    stamps = [float(x) for x in tf.ssh("gpu3", f"cat {stamp}").split()]
    assert len(stamps) == 1, stamps  # once
    assert stamps[0] >= state["ended"] + 2.0  # after the job ended, and after 2 s of idleness
    time.sleep(1.5)
    assert len(tf.ssh("gpu3", f"cat {stamp}").split()) == 1  # and never again
    # `provision idle`: a watcher of its own, cancellable before it fires
    watch = tf.provision("idle", "gpu3", "--after", "1h", *tf.args())
    assert watch.returncode == 0, watch.stderr
    assert watch.doc["hosts"]["gpu3"]["running"] is True
    cancel = tf.provision("idle", "gpu3", "--cancel", *tf.args())
    assert cancel.returncode == 0 and cancel.doc["hosts"]["gpu3"]["cancelled"] is True, cancel.stderr
    assert len(tf.ssh("gpu3", f"cat {stamp}").split()) == 1


def test_idle_without_stop_command_offers_but_runs_nothing(tf: TrainFleet) -> None:
    run = tf.provision("idle", "gpu1", "--after", "1s", *tf.args())
    assert run.returncode == 1
    assert "no stop_command var" in run.stderr + run.stdout
