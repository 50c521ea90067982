"""The host side of `provision train` for real on this machine (LocalConnection, temp data dir,
real processes): code sync by content hash, detached runs, exit codes, stop by process group,
secrets only in a 0600 file that is removed, the idle stop, the sampler's /proc readers."""

from __future__ import annotations

import json
import os
import stat
import sys
import time
from pathlib import Path

import pytest

from provision.agent.train import procs, rundir
from provision.agent.train.sampler import read_diskstats, read_nfs_bytes
from provision.agent.train.summary import epochs_from_log
from provision.connection.local import LocalConnection
from provision.inventory.model import Host
from provision.train.launch import HostTrainer, TrainSpec


@pytest.fixture
def trainer(tmp_path: Path):
    data = tmp_path / "data"
    data.mkdir()
    host = Host("localhost", local=True, vars={"data_dir": str(data)})
    with LocalConnection(host) as conn:
        yield HostTrainer(conn)


def _code(tmp_path: Path, files: dict[str, str]) -> Path:
    code = tmp_path / "code"
    for rel, text in files.items():
        (code / rel).parent.mkdir(parents=True, exist_ok=True)
        (code / rel).write_text(text)
    return code


def _spec(code: Path | None, *command: str, **kw) -> TrainSpec:
    return TrainSpec(command=list(command), code_dir=str(code) if code else None, python=sys.executable, **kw)


def test_run_finishes_and_unchanged_code_is_not_resent(trainer: HostTrainer, tmp_path: Path) -> None:
    code = _code(tmp_path, {"job.py": "import os\nprint('cwd', os.getcwd())\n", "lib/util.py": "X = 1\n"})
    first = trainer.start(_spec(code, "python", "job.py"))
    assert first["sync"] == {"sent": 2, "kept": 0, "removed": 0, "files": 2}
    run = trainer.follow_to_end(first["run"]["run_id"])
    assert run["state"] == "finished" and run["exit_code"] == 0
    assert Path(run["log"]).read_text().strip() == f"cwd {run['workdir']}"
    assert run["workdir"] == f"{trainer.data_dir}/runs/{run['run_id']}/code"
    (code / "lib/util.py").write_text("X = 2\n")
    (code / "job.py").unlink()
    (code / "main.py").write_text("print('main')\n")
    second = trainer.start(_spec(code, "python", "main.py"))
    assert second["sync"] == {"sent": 2, "kept": 0, "removed": 1, "files": 2}
    third = trainer.start(_spec(code, "python", "main.py"))
    assert third["sync"]["sent"] == 0 and third["sync"]["kept"] == 2
    final = trainer.follow_to_end(third["run"]["run_id"])
    assert sorted(os.listdir(final["workdir"])) == ["lib", "main.py"]


def test_failure_gives_exit_code_and_a_missing_program_fails_cleanly(trainer: HostTrainer, tmp_path: Path) -> None:
    code = _code(tmp_path, {"bad.py": "print('before')\nraise SystemExit(7)\n"})
    run = trainer.follow_to_end(trainer.start(_spec(code, "python", "bad.py"))["run"]["run_id"])
    assert run["state"] == "failed" and run["exit_code"] == 7
    missing = trainer.start(_spec(code, "./no-such-program"))
    state = trainer.wait_ended(missing["run"]["run_id"], timeout=30)
    assert state["state"] == "failed" and state["exit_code"] == 127
    assert "cannot start" in trainer.status(missing["run"]["run_id"])["tail"][0]


def test_secrets_travel_in_a_0600_file_that_is_removed(trainer: HostTrainer, tmp_path: Path) -> None:
    secret = "s3cr3t-" + os.urandom(4).hex()
    code = _code(tmp_path, {"env.py": (
        "import os, sys, time\n"
        "print('plain', os.environ['PLAIN'])\n"
        "print('secret ok', os.environ['TOKEN'] == sys.argv[1][::-1])\n"
        "print('run', os.environ['PROVISION_RUN_ID'])\n")})
    started = trainer.start(_spec(code, "python", "env.py", secret[::-1], env={"PLAIN": "1"},
                                  secret_env={"TOKEN": secret}))
    run_dir = Path(started["run_dir"])
    run = trainer.follow_to_end(started["run"]["run_id"])
    log = Path(run["log"]).read_text()
    assert "plain 1" in log and "secret ok True" in log and f"run {run['run_id']}" in log
    assert not (run_dir / rundir.ENV_FILE).exists()
    for path in run_dir.rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path


def test_env_file_is_created_0600(tmp_path: Path) -> None:
    path = tmp_path / "env.json"
    rundir.write_json_atomic(str(path), {"TOKEN": "x"}, mode=0o600)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_stop_ends_the_whole_group_and_the_run_is_stopped(trainer: HostTrainer, tmp_path: Path) -> None:
    code = _code(tmp_path, {"tree.py": (
        "import subprocess, sys, time\n"
        "kids = [subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']) for _ in range(2)]\n"
        "print('children', *[k.pid for k in kids], flush=True)\n"
        "time.sleep(600)\n")})
    started = trainer.start(_spec(code, "python", "tree.py"))
    run_id = started["run"]["run_id"]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not trainer.status(run_id)["tail"]:
        time.sleep(0.1)
    pgid = trainer.status(run_id)["run"]["pgid"]
    members = procs.run_processes(pgid, run_id)
    assert len(members) == 3
    result = trainer.stop(run_id, grace=5)
    assert result["run"]["state"] == "stopped" and result["ended"]["left"] == []
    assert procs.run_processes(pgid, run_id) == []
    assert [r["state"] for r in trainer.list_runs() if r["run_id"] == run_id] == ["stopped"]
    assert trainer.stop(run_id)["already"] is True


def test_idle_stop_runs_once_after_the_job(trainer: HostTrainer, tmp_path: Path) -> None:
    stamp = tmp_path / "stopped"
    code = _code(tmp_path, {"q.py": "import time; time.sleep(0.5); print('done', time.time())\n"})
    spec = _spec(code, "python", "q.py", stop_when_idle=0.5, stop_command=f"date +%s.%N >> {stamp}")
    started = trainer.start(spec)
    run = trainer.follow_to_end(started["run"]["run_id"])
    assert not stamp.exists() or float(stamp.read_text().split()[0]) >= run["ended"]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        idle = (rundir.read_state(started["run_dir"]) or {}).get("idle") or {}
        if idle.get("status") not in (None, "watching"):
            break
        time.sleep(0.1)
    assert idle["status"] == "stopped"
    lines = stamp.read_text().split()
    assert len(lines) == 1 and float(lines[0]) >= run["ended"] + 0.5


def test_idle_watch_can_be_cancelled(trainer: HostTrainer, tmp_path: Path) -> None:
    stamp = tmp_path / "stopped"
    started = trainer.idle("start", 3600, f"touch {stamp}")
    assert started["running"] is True
    assert trainer.idle("status")["running"] is True
    assert trainer.idle("cancel")["cancelled"] is True
    assert trainer.idle("status")["running"] is False and not stamp.exists()


def test_a_reused_run_id_is_refused_in_words(trainer: HostTrainer, tmp_path: Path) -> None:
    """Issue 31: not a raw `[Errno 17] File exists`; the first run's folder is left as it was."""
    from provision.errors import AgentError

    code = _code(tmp_path, {"job.py": "print('one')\n"})
    run = trainer.follow_to_end(trainer.start(_spec(code, "python", "job.py", run_id="exp7"))["run"]["run_id"])
    with pytest.raises(AgentError) as err:
        trainer.start(_spec(code, "python", "job.py", run_id="exp7"))
    assert "run id 'exp7' is already used on this host" in str(err.value) and "Errno" not in str(err.value)
    assert Path(run["log"]).read_text().strip() == "one"


def test_unknown_run_names_the_runs_dir(trainer: HostTrainer) -> None:
    from provision.errors import AgentError

    with pytest.raises(AgentError, match="no run 'nope'"):
        trainer.status("nope")


def test_proc_readers_parse_real_formats(tmp_path: Path) -> None:
    stats = tmp_path / "diskstats"
    stats.write_text(" 259 0 nvme0n1 100 0 2048 5 0 0 0 0 0 0 0\n 259 1 nvme0n1p1 1 0 8 0 0 0 0 0 0 0 0\n")
    assert read_diskstats(["nvme0n1"], str(stats)) == {"nvme0n1": 2048}
    mountstats = tmp_path / "mountstats"
    mountstats.write_text(
        "device proc mounted on /proc with fstype proc\n"
        "device srv:/export mounted on /mnt/data with fstype nfs4 statvers=1.1\n"
        "\tbytes:\t123456 0 0 0 123456 0 30 0\n")
    assert read_nfs_bytes(str(mountstats)) == {"/mnt/data": 123456}


def test_epoch_times_from_common_log_lines(tmp_path: Path) -> None:
    log = tmp_path / "log"
    log.write_text("Epoch 1/3 took 10.5s\nepoch=2 time=11.0 sec\nEpoch 3: loss 0.1, 14.2 seconds\nno epoch here\n")
    assert epochs_from_log(str(log)) == [{"epoch": 1, "seconds": 10.5}, {"epoch": 2, "seconds": 11.0},
                                         {"epoch": 3, "seconds": 14.2}]


def test_state_json_is_replaced_atomically(tmp_path: Path) -> None:
    rundir.write_json_atomic(str(tmp_path / "state.json"), {"a": 1})
    rundir.update_state(str(tmp_path), b=2)
    assert json.loads((tmp_path / "state.json").read_text()) == {"a": 1, "b": 2}
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]


def test_workdir_is_synced_in_place_and_runs_there(trainer: HostTrainer, tmp_path: Path) -> None:
    code = _code(tmp_path, {"w.py": "import os; print(os.getcwd())\n"})
    workdir = tmp_path / "project"
    first = trainer.start(_spec(code, "python", "w.py", workdir=str(workdir)))
    run = trainer.follow_to_end(first["run"]["run_id"])
    assert run["workdir"] == str(workdir) and Path(run["log"]).read_text().strip() == str(workdir)
    assert (workdir / "w.py").is_file() and (workdir / ".provision-code.json").is_file()
    again = trainer.start(_spec(code, "python", "w.py", workdir=str(workdir)))
    assert again["sync"]["sent"] == 0
    (workdir / "w.py").write_text("print('edited on the host')\n")  # changed there: sent again
    third = trainer.start(_spec(code, "python", "w.py", workdir=str(workdir)))
    assert third["sync"]["sent"] == 1
    trainer.follow_to_end(third["run"]["run_id"])


def test_live_view_shows_log_lines_as_data(tmp_path: Path) -> None:
    from rich.console import Console

    from provision.train.live import RunView

    console = Console(record=True, force_terminal=True, width=160, file=open(os.devnull, "w"))
    with RunView(console, live=True) as view:
        assert view.live
        view.update("gpu1", run_id="r1", state="running", started=time.time(), data_wait_fraction=0.61,
                    steps=40, cpu_util_mean=97.0)
        view.lines("gpu1", ["epoch [1/3] loss [bold]0.5"])
    text = console.export_text()
    assert "gpu1 | epoch [1/3] loss [bold]0.5" in text  # brackets are the log's, not markup
