"""`provision train --distributed` without hosts: the torchrun argv each host runs, the torch
check that refuses mismatched hosts, the nproc choice, log labels, and the whole-run findings
(rank_failed, straggler, network_bound) from profiles as provision/agent/train/summary.py
returns them. The fleet test (tests/fleet/test_train_distributed.py) runs it for real."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from provision.errors import ConfigError
from provision.report.document import validate
from provision.train.diagnosis import (
    diagnose_distributed,
    network_bound,
    rank_failed,
    step_seconds,
    straggler,
)
from provision.train.distributed import (
    FailureWatch,
    check_same_torch,
    host_addr,
    label_lines,
    nproc_for,
    parse_nproc,
    plan_nodes,
    torchrun_argv,
    user_program,
)
from provision.train.report import build_document


@dataclass
class FakeFabric:
    """Only the attributes the launcher reads (the real one is provision.distributed.fabric.Fabric)."""
    master_host: str = "a"
    master_addr: str = "10.0.0.1"
    master_port: int = 29511
    ifaces: dict[str, str] = field(default_factory=lambda: {"a": "ib0", "b": "ib0"})
    hosts: list[str] = field(default_factory=lambda: ["a", "b"])
    network: str = "10.0.0.0/24"
    ib: bool = True

    def env(self, host: str) -> dict[str, str]:
        return {"MASTER_ADDR": self.master_addr, "MASTER_PORT": str(self.master_port),
                "GLOO_SOCKET_IFNAME": self.ifaces[host], "NCCL_SOCKET_IFNAME": self.ifaces[host]}


def facts_with(addr: str, iface: str = "ib0", gpus: Any = None) -> dict[str, Any]:
    return {"network": {"interfaces": [
        {"name": "eth0", "ipv4": [{"address": "203.0.113.9", "prefix": 24}]},
        {"name": iface, "ipv4": [{"address": addr, "prefix": 24}]}]}, "gpus": gpus if gpus is not None else []}


# -- the command ---------------------------------------------------------------------------------


def test_torchrun_argv_is_a_list_with_the_rendezvous_and_the_users_program() -> None:
    argv = torchrun_argv(["python", "train.py", "--lr", "0.1; rm -rf /"], nnodes=3, node_rank=2, nproc=8,
                         master_addr="10.0.0.1", master_port=29511, run_id="r1", is_host=False,
                         local_addr="10.0.0.3", log_dir="/d/runs/r1/ranks")
    assert argv[:3] == ["python", "-m", "torch.distributed.run"]
    assert "--nnodes=3" in argv and "--node-rank=2" in argv and "--nproc-per-node=8" in argv
    assert "--rdzv-backend=c10d" in argv and "--rdzv-endpoint=10.0.0.1:29511" in argv and "--rdzv-id=r1" in argv
    assert "--rdzv-conf=is_host=0,join_timeout=300" in argv
    assert "--local-addr=10.0.0.3" in argv and "--max-restarts=0" in argv
    assert "--log-dir=/d/runs/r1/ranks" in argv and "--tee=3" in argv
    # the user's words stay words: no shell ever sees them
    assert argv[-3:] == ["train.py", "--lr", "0.1; rm -rf /"]


def test_the_master_hosts_the_store_and_ipv6_is_bracketed() -> None:
    argv = torchrun_argv(["python", "t.py"], nnodes=2, node_rank=0, nproc=1, master_addr="fd00::1",
                         master_port=29500, run_id="r", is_host=True, local_addr="fd00::1", log_dir="/l")
    assert "--rdzv-endpoint=[fd00::1]:29500" in argv and "--rdzv-conf=is_host=1,join_timeout=300" in argv


@pytest.mark.parametrize("command, program", [
    (["python", "train.py", "-x"], ["train.py", "-x"]),
    (["python3", "train.py"], ["train.py"]),
    (["/opt/env/bin/python3.11", "t.py"], ["t.py"]),
    (["python", "-m", "pkg.train", "--a"], ["-m", "pkg.train", "--a"]),
    (["bash", "run.sh"], ["--no-python", "bash", "run.sh"]),
])
def test_user_program(command: list[str], program: list[str]) -> None:
    assert user_program(command) == program


@pytest.mark.parametrize("command, says", [
    ([], "give the command after --"),
    (["python"], "needs a script"),
    (["python", "-m"], "needs a module"),
    (["python", "-u", "t.py"], "interpreter option '-u'"),
])
def test_user_program_refuses_what_torchrun_cant_run(command: list[str], says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        user_program(command)


def test_plan_nodes_ranks_by_fabric_order_with_each_hosts_own_address_and_env() -> None:
    fabric = FakeFabric(master_host="b", master_addr="10.0.0.2", hosts=["b", "a"])
    facts = {"a": facts_with("10.0.0.1"), "b": facts_with("10.0.0.2")}
    plans = plan_nodes(["python", "t.py"], fabric, facts, {"a": 2, "b": 4}, "r9",
                       {"a": "/x/runs/r9", "b": "/y/runs/r9/"})
    assert [(p.host, p.node_rank, p.nproc) for p in plans] == [("b", 0, 4), ("a", 1, 2)]
    b, a = plans
    assert "--rdzv-conf=is_host=1,join_timeout=300" in b.command and "--local-addr=10.0.0.2" in b.command
    assert "--rdzv-conf=is_host=0,join_timeout=300" in a.command and "--local-addr=10.0.0.1" in a.command
    assert "--log-dir=/x/runs/r9/ranks" in a.command and "--log-dir=/y/runs/r9/ranks" in b.command
    assert a.env["GLOO_SOCKET_IFNAME"] == "ib0" and a.env["MASTER_ADDR"] == "10.0.0.2"
    assert a.env["TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE"] == "[rank${rank}]:"


def test_host_addr_is_the_address_on_the_fabrics_network_or_a_clear_error() -> None:
    fabric = FakeFabric()
    assert host_addr(fabric, {"b": facts_with("10.0.0.7")}, "b") == "10.0.0.7"
    with pytest.raises(ConfigError, match="b has no IPv4 address on ib0"):
        host_addr(fabric, {"b": {"network": {"interfaces": [{"name": "eth0", "ipv4": []}]}}}, "b")


def test_nproc_from_facts_one_per_gpu_and_one_on_cpu() -> None:
    assert nproc_for(None, {"gpus": [{"index": 0}, {"index": 1}]}) == 2
    assert nproc_for(None, {"gpus": []}) == 1
    assert nproc_for(None, {"gpus": {"error": "no NVML"}}) == 1
    assert nproc_for("3", {"gpus": []}) == 3
    assert parse_nproc("auto") is None and parse_nproc(None) is None and parse_nproc("4") == "4"
    with pytest.raises(ConfigError, match="--nproc-per-node 'zero'"):
        parse_nproc("zero")
    with pytest.raises(ConfigError):
        parse_nproc("0")


def test_torch_check_names_each_host_and_version() -> None:
    same = {"version": "2.4.0+cu121", "cuda": "12.1", "installed": True, "python": "/e/bin/python"}
    check_same_torch({"a": same, "b": dict(same)})
    with pytest.raises(ConfigError) as err:
        check_same_torch({"a": same, "b": dict(same, version="2.4.0+cu118", cuda="11.8")})
    text = str(err.value)
    assert "a: torch 2.4.0+cu121 (CUDA 12.1)" in text and "b: torch 2.4.0+cu118 (CUDA 11.8)" in text
    assert "nothing was started" in text
    with pytest.raises(ConfigError, match="b: /e/bin/python: .*cannot import torch"):
        check_same_torch({"a": same, "b": {"installed": False, "python": "/e/bin/python",
                                           "error": "/e/bin/python cannot import torch"}})


def test_log_lines_get_host_and_rank_labels() -> None:
    assert label_lines("gpu2", ["[rank3]:loss 0.5", "W torchrun says", "[rank10]:"]) == [
        "gpu2/rank3 | loss 0.5", "gpu2 | W torchrun says", "gpu2/rank10 | "]


def test_failure_watch_stops_each_other_host_once() -> None:
    w = FailureWatch()
    assert not w.should_stop("a")
    w.ended("b", "failed")
    assert w.should_stop("a") and not w.should_stop("a") and not w.should_stop("b")
    w.ended("c", "finished")
    assert w.should_stop("c")  # a finished host has nothing left to stop, but asking is harmless


# -- the whole run's findings ----------------------------------------------------------------------


def summary(host_state: str = "finished", steps: int = 100, wait: float = 1.0, step: float = 9.0,
            grad: int | None = None, tail: list[str] | None = None, ended: float = 0.0,
            share: float | None = None, ddp: bool = True) -> dict[str, Any]:
    return {"dist": {"backend": "gloo", "world_size": 2, "rank": 0} if ddp else None, "collectives": 1 if ddp else 0,
            "run": {"run_id": "r1", "state": host_state, "exit_code": 0 if host_state == "finished" else 1,
                    "seconds": 12.0, "ended": ended, "log": "/d/runs/r1/output.log", "command": ["python", "t.py"]},
            "steps": steps, "wait_s": wait, "step_s": step, "grad_bytes": grad,
            "data_wait_fraction": share if share is not None else (round(wait / (wait + step), 3) if wait + step else None),
            "tail": tail or []}


TORCHRUN_FAILURE = [
    "[rank1]:step 5 rank 1", "[rank1]:rank 1 failing on purpose at step 5", "[rank0]:other rank line",
    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
    "Root Cause (first observed failure):", "[0]:", "  time      : 2026-12-01_12:05:02", "  host      : gpu2",
    "  rank      : 1 (local_rank: 0)", "  exitcode  : 3 (pid: 10518) ", "  error_file: <N/A>",
]


def test_rank_failed_names_host_rank_exit_code_and_that_ranks_last_lines() -> None:
    f = rank_failed("gpu2", summary("failed", tail=TORCHRUN_FAILURE))
    assert f is not None and f.id == "rank_failed" and f.severity == "critical"
    assert f.title == "gpu2/rank1 failed (exit code 3)"
    assert "failing on purpose" in f.evidence and "other rank line" not in f.evidence
    assert "provision logs gpu2 r1" in f.recommendation and "/d/runs/r1/ranks" in f.recommendation
    assert rank_failed("gpu1", summary("stopped")) is None and rank_failed("gpu1", summary()) is None


def test_rank_failed_lists_the_first_host_to_fail_first() -> None:
    late = summary("failed", tail=[line.replace("gpu2", "gpu3").replace("rank      : 1", "rank      : 2")
                                   .replace("exitcode  : 3", "exitcode  : 1") for line in TORCHRUN_FAILURE], ended=20.0)
    found = diagnose_distributed({"gpu3": late, "gpu2": summary("failed", tail=TORCHRUN_FAILURE, ended=10.0),
                                  "gpu1": summary("stopped", ended=21.0)})
    assert [f.title for f in found if f.id == "rank_failed"] == ["gpu2/rank1 failed (exit code 3)",
                                                                  "gpu3/rank2 failed (exit code 1)"]


def test_no_straggler_or_network_finding_without_a_process_group() -> None:
    """Independent jobs on each host (no init_process_group, no collectives): nobody waits."""
    apart = {"a": summary(ddp=False), "b": summary(step=14.0, ddp=False)}
    assert straggler(apart) is None
    assert straggler({"a": summary(share=0.02, ddp=False), "b": summary(share=0.45, ddp=False)}) is None
    big = {h: summary(grad=100_000_000, ddp=False) for h in ("a", "b")}
    assert network_bound(big, {"status": "ok", "busbw_gbs": 1.0, "hosts": 2}) is None
    # --grad-mb given by the user: they say gradients are all-reduced
    assert network_bound(big, {"status": "ok", "busbw_gbs": 1.0, "hosts": 2}, grad_bytes=100_000_000) is not None


def test_rank_failed_says_the_others_were_stopped_only_when_they_were() -> None:
    found = diagnose_distributed({"gpu2": summary("failed", tail=TORCHRUN_FAILURE, ended=10.0),
                                  "gpu1": summary("stopped", ended=11.0)})
    [f] = [f for f in found if f.id == "rank_failed"]
    assert "provision stopped the run on gpu1 when it failed" in f.evidence
    alone = rank_failed("gpu2", summary("failed", tail=TORCHRUN_FAILURE))
    assert alone is not None and "stopped" not in alone.evidence


def test_every_rank_failing_on_its_own_is_said_so() -> None:
    """The same error on each host (a bad argument, CUDA missing everywhere): each failed on its own."""
    err = ["[rank0]:Traceback (most recent call last):", '[rank0]:  File "/w/t.py", line 3, in <module>',
           "[rank0]:ValueError: bad --lr"]
    one = summary("failed", tail=err + TORCHRUN_FAILURE, ended=10.0)
    two = summary("failed", tail=[x.replace("rank0", "rank1") for x in err] + TORCHRUN_FAILURE, ended=10.5)
    found = [f for f in diagnose_distributed({"gpu1": one, "gpu2": two}) if f.id == "rank_failed"]
    assert len(found) == 2
    assert "(ValueError: bad --lr)" in found[0].evidence and "gpu2 failed too" in found[0].evidence
    assert "stopped" not in found[0].evidence
    assert "failed on its own, with the same error as gpu1 (ValueError: bad --lr)" in found[1].evidence
    broken = summary("failed", tail=["[rank1]:RuntimeError: Connection closed by peer [198.18.0.2]:1234"], ended=12.0)
    [_, second] = [f for f in diagnose_distributed({"gpu1": one, "gpu2": broken}) if f.id == "rank_failed"]
    assert "after gpu1 failed: its connection to the failed rank broke" in second.evidence
    store = summary("failed", tail=["torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The "
                                    "connection to the C10d store has failed. See inner exception for details."],
                    ended=12.0)
    [_, second] = [f for f in diagnose_distributed({"gpu1": one, "gpu2": store}) if f.id == "rank_failed"]
    assert "after gpu1 failed: its connection to the failed rank broke" in second.evidence


def test_straggler_by_step_time_and_by_its_own_data_wait() -> None:
    even = {"a": summary(), "b": summary(), "c": summary(step=9.5)}
    assert straggler(even) is None
    slow = straggler({"a": summary(), "b": summary(), "c": summary(step=14.0)})
    assert slow is not None and slow.title.startswith("c is the straggler") and "150 ms per step vs 100 ms" in slow.evidence
    # DDP keeps step times equal; the host that waits on its own DataLoader is the one holding the others
    waiting = straggler({"a": summary(share=0.02), "b": summary(share=0.45)})
    assert waiting is not None and waiting.title.startswith("b is the straggler") and "45%" in waiting.evidence
    assert straggler({"a": summary()}) is None


def test_network_bound_from_gradient_bytes_and_the_measured_bandwidth() -> None:
    allreduce = {"status": "ok", "busbw_gbs": 1.0, "hosts": 2}
    # 100 MB of gradients, 2 hosts: 100 ms of all-reduce per step at 1 GB/s; a step is 100 ms
    runs = {"a": summary(grad=100_000_000), "b": summary()}
    f = network_bound(runs, allreduce)
    assert f is not None and f.severity == "critical" and "100%" in f.title
    assert "100.0 MB of gradients" in f.evidence and "1.00 GB/s" in f.evidence and "no_sync" in f.recommendation
    assert network_bound({"a": summary(grad=10_000_000), "b": summary()}, allreduce) is None  # 10 ms of 100
    assert network_bound({"a": summary(), "b": summary()}, allreduce) is None  # gradient size unknown
    warn = network_bound({"a": summary(), "b": summary()}, allreduce, grad_bytes=60_000_000)  # --grad-mb
    assert warn is not None and warn.severity == "warn"
    assert network_bound(runs, {"status": "error", "reason": "timeout"}) is None
    assert network_bound(runs, None) is None


def test_step_seconds_prefers_the_instrumentation() -> None:
    assert step_seconds(summary(steps=100, wait=1.0, step=9.0)) == pytest.approx(0.1)
    assert step_seconds(summary(steps=100, wait=0, step=0)) == pytest.approx(0.12)  # 12 s run
    assert step_seconds(summary(steps=0)) is None


def test_the_report_document_carries_the_distributed_section() -> None:
    s = summary()
    s.update(timeline={}, epochs=[], loader={}, cpu={}, gpu={"per_gpu": []}, io={})
    doc = build_document("gpu1", s["run"], s, [], {}, None, distributed={"hosts": ["gpu1", "gpu2"], "findings": []})
    validate(doc, "test")
    assert doc["train"]["distributed"]["hosts"] == ["gpu1", "gpu2"]


# -- the torch a host's interpreter imports (agent command train_torch) ---------------------------


def test_train_torch_reads_the_torch_that_interpreter_imports(tmp_path) -> None:
    import subprocess
    import sys

    from provision.agent.train.commands import torch_of

    env = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    python = str(env / "bin" / "python")
    bare = torch_of({"python": python}, None)
    assert bare["installed"] is False and "cannot import torch" in bare["error"]
    site = subprocess.run([python, "-c", "import site; print(site.getsitepackages()[0])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    pkg = tmp_path / "env" / site.split(str(env) + "/", 1)[1] / "torch"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("raise SystemExit('never imported: facts read files')\n")
    (pkg / "version.py").write_text("__version__ = '9.9.9+cu999'\ncuda = '99.9'\nhip = None\n")
    found = torch_of({"python": python}, None)
    assert found["installed"] is True and found["version"] == "9.9.9+cu999" and found["cuda"] == "99.9"
    assert found["python"] == python
    missing = torch_of({"python": str(tmp_path / "nope" / "python")}, None)
    assert missing["installed"] is False and "cannot run" in missing["error"]


# -- the playbook meeting point ----------------------------------------------------------------------


def test_gang_leader_runs_once_for_all_and_everyone_gets_the_result() -> None:
    import threading

    from provision.train.gang import Gang

    gang = Gang(["a", "b", "c"])
    calls: list[dict[str, Any]] = []
    results: dict[str, Any] = {}

    def lead(members: dict[str, Any]) -> dict[str, Any]:
        calls.append(dict(members))
        return {"ran_on": sorted(members)}

    threads = [threading.Thread(target=lambda n=n: results.__setitem__(n, gang.run(n, n.upper(), lead, 30)))
               for n in ("c", "a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(calls) == 1 and calls[0] == {"a": "A", "b": "B", "c": "C"}
    assert results == {n: {"ran_on": ["a", "b", "c"]} for n in "abc"}


def test_gang_errors_reach_every_host_and_a_missing_host_ends_the_wait() -> None:
    import threading

    from provision.train.gang import Gang, GangError

    gang = Gang(["a", "b"])
    errors: dict[str, BaseException] = {}

    def fail(members: dict[str, Any]) -> None:
        raise ConfigError("the torch versions differ")

    def join(name: str) -> None:
        try:
            gang.run(name, None, fail, 30)
        except BaseException as exc:
            errors[name] = exc

    threads = [threading.Thread(target=join, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert {n: str(e) for n, e in errors.items()} == {n: "the torch versions differ" for n in "ab"}
    lonely = Gang(["a", "b"])
    with pytest.raises(GangError, match=r"b did not reach this task within 0s"):
        lonely.run("a", None, fail, join_timeout=0.2)
    with pytest.raises(GangError, match="not one of the play's hosts"):
        Gang(["a"]).run("z", None, fail, 1)


# -- the CLI on localhost: one host, two ranks, real torchrun ----------------------------------------


def test_distributed_on_localhost_two_ranks_same_weights(tmp_path) -> None:
    import json
    import os
    import re
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    pytest.importorskip("torch")
    repo = Path(__file__).resolve().parents[2]
    (tmp_path / "data").mkdir()
    (tmp_path / "code").mkdir()
    shutil.copy(repo / "tests" / "fleet" / "train_scripts" / "ddp.py", tmp_path / "code" / "ddp.py")
    (tmp_path / "hosts.ini").write_text(f"localhost ansible_connection=local data_dir={tmp_path / 'data'}\n")
    proc = subprocess.run(
        [sys.executable, "-m", "provision", "train", "localhost", "-i", str(tmp_path / "hosts.ini"), "--json",
         "--distributed", "--nproc-per-node", "2", "--no-allreduce", "--python", sys.executable, "--no-live",
         "--dir", "code", "--out", str(tmp_path / "rep"), "--run-id", "loc", "--", "python", "ddp.py", "--steps", "4"],
        capture_output=True, text=True, cwd=tmp_path, timeout=300, env=dict(os.environ, PYTHONPATH=str(repo)))
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    assert doc["runs"]["localhost"]["state"] == "finished"
    assert doc["distributed"]["world_size"] == 2 and doc["distributed"]["nproc_per_node"] == {"localhost": 2}
    weights = dict(re.findall(r"^localhost/rank(\d) \| weights \d ([0-9a-f]{64})$", proc.stderr, re.M))
    assert sorted(weights) == ["0", "1"] and len(set(weights.values())) == 1, proc.stderr[-2000:]
    files = sorted((tmp_path / "data" / "runs" / "loc").glob("weights-rank*.txt"))
    assert [f.name for f in files] == ["weights-rank0.txt", "weights-rank1.txt"]


def test_distributed_options_without_distributed_are_refused(tmp_path) -> None:
    import os
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    (tmp_path / "hosts.ini").write_text(f"localhost ansible_connection=local data_dir={tmp_path}\n")
    proc = subprocess.run(
        [sys.executable, "-m", "provision", "train", "localhost", "-i", str(tmp_path / "hosts.ini"), "--no-code",
         "--master", "gpu1:29500", "--", "python", "t.py"],
        capture_output=True, text=True, cwd=tmp_path, timeout=120, env=dict(os.environ, PYTHONPATH=str(repo)))
    assert proc.returncode != 0 and "--master: only with --distributed" in proc.stderr, proc.stderr
    assert not (tmp_path / "runs").exists()


def test_the_example_playbook_loads_and_its_train_task_uses_the_modules_options() -> None:
    from pathlib import Path

    import yaml

    from provision.engine.playbook import load_playbook
    from provision.modules.train import Train

    path = Path(__file__).resolve().parents[2] / "examples" / "distributed-train.yml"
    playbook = load_playbook(path)
    assert [p.name for p in playbook.plays][-1] == "distributed training"
    tasks = [t for play in yaml.safe_load(path.read_text()) for t in play.get("tasks") or [] if "train" in t]
    assert len(tasks) == 1 and tasks[0]["train"]["distributed"] is True
    assert set(tasks[0]["train"]) <= set(Train.args)


def test_the_layout_before_a_run_names_the_host_that_differs() -> None:
    from provision.train.layout import describe, host_layout, odd_hosts

    def facts(mount: str, fs: str, free_gib: float, network: bool = False) -> dict[str, Any]:
        return {"data_dir": {"path": f"{mount}", "mountpoint": mount, "fs_type": fs, "media": "nvme",
                             "network": network, "free_bytes": int(free_gib * (1 << 30))}}

    same = {h: host_layout(facts("/root/autodl-tmp", "ext4", 200), "r1", None) for h in ("a", "b", "c")}
    assert odd_hosts(same) == {}
    assert describe("a", same["a"]) == ("a: data dir /root/autodl-tmp (ext4, nvme at /root/autodl-tmp; 200.0 GiB "
                                        "free); workdir /root/autodl-tmp/runs/r1/code")
    odd = dict(same, c=host_layout(facts("/", "overlay", 0.8), "r1", None))
    why = odd_hosts(odd)
    assert set(why) == {"c"}
    assert "mount / (the others: /root/autodl-tmp)" in why["c"] and "filesystem overlay" in why["c"]
    assert "only 0.8 GiB free (floor 10.0 GiB)" in why["c"]
    net = dict(same, b=host_layout(facts("/root/autodl-tmp", "nfs4", 500, network=True), "r1", "/w"))
    assert odd_hosts(net) == {"b": "filesystem nfs4 (the others: ext4); its data dir is on network storage"}
    assert net["b"]["workdir"] == "/w"
