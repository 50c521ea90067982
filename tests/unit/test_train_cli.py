"""`provision train` / `runs` / `logs` / `stop` and the `train` playbook module on localhost (no
SSH: the same agent commands run locally), with stdlib jobs so no torch import is paid."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from provision.cli.main import main
from provision.engine.runner import run_playbook
from provision.inventory.model import Host


def _provision(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "provision", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=timeout)


@pytest.fixture
def site(tmp_path: Path) -> Path:
    (tmp_path / "data").mkdir()
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "job.py").write_text("import sys\nfor i in range(3):\n    print('line', i)\nsys.exit(int(sys.argv[1]))\n")
    (tmp_path / "hosts.ini").write_text(f"localhost ansible_connection=local data_dir={tmp_path / 'data'}\n")
    return tmp_path


def test_train_json_runs_and_logs(site: Path) -> None:
    common = ["-i", str(site / "hosts.ini"), "--json"]
    run = _provision("train", "localhost", *common, "--dir", "code", "--python", sys.executable,
                     "--run-id", "r-ok", "--out", str(site / "rep"), "--", "python", "job.py", "0", cwd=site)
    assert run.returncode == 0, run.stderr[-3000:]
    entry = json.loads(run.stdout)["runs"]["localhost"]
    assert entry["run_id"] == "r-ok" and entry["state"] == "finished" and entry["exit_code"] == 0
    assert entry["workdir"] == str(site / "data" / "runs" / "r-ok" / "code")
    assert entry["profile"]["steps"] is None  # no DataLoader: nothing measured, not a guess
    assert any(f["id"] == "data_wait_unknown" for f in entry["findings"])
    assert "localhost | line 2" in run.stderr
    report = json.loads(Path(entry["report"]["json"]).read_text())
    assert report["train"]["run_id"] == "r-ok"
    assert "provision train" in Path(entry["report"]["markdown"]).read_text()
    failed = _provision("train", "localhost", *common, "--dir", "code", "--python", sys.executable,
                        "--run-id", "r-bad", "--out", str(site / "rep"), "--", "python", "job.py", "5", cwd=site)
    assert failed.returncode == 1
    bad = json.loads(failed.stdout)["runs"]["localhost"]
    assert bad["state"] == "failed" and bad["exit_code"] == 5
    runs = json.loads(_provision("runs", "localhost", *common, cwd=site).stdout)["hosts"]["localhost"]["runs"]
    assert [(r["run_id"], r["state"], r["exit_code"]) for r in runs] == [("r-ok", "finished", 0), ("r-bad", "failed", 5)]
    logs = json.loads(_provision("logs", "localhost", "r-bad", *common, cwd=site).stdout)["hosts"]["localhost"]
    assert logs["tail"] == ["line 0", "line 1", "line 2"]
    # the compare shows the job before/after: the second train report against the first
    compare = _provision("report", report_path(bad), "--compare", "--json", cwd=site)
    assert compare.returncode == 0, compare.stderr
    figures = json.loads(compare.stdout)["compare"]["localhost"]["figures"]
    assert "run seconds" in figures


def report_path(entry: dict) -> str:
    return entry["report"]["json"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["train", "localhost"], "give the command after --"),
        (["train", "localhost", "-e", "1BAD=x", "--", "true"], "-e '1BAD=x'"),
        (["train", "localhost", "--env-from", "PROVISION_NOT_SET_X", "--", "true"], "is not set"),
        (["train", "localhost", "--stop-when-idle", "soon", "--", "true"], "give a duration"),
        (["train", "localhost", "--dir", "/nonexistent/code", "--", "true"], "not a folder"),
    ],
)
def test_usage_errors_name_what_to_fix(argv: list[str], message: str, capsys: pytest.CaptureFixture[str],
                                      tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # whatever happens, nothing is written outside the test's dir
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_train_module_in_a_playbook(site: Path) -> None:
    pb = site / "site.yml"
    pb.write_text(textwrap.dedent(f"""
        - hosts: localhost
          gather_facts: false
          vars:
            data_dir: {site / 'data'}
          tasks:
            - name: train
              train:
                command: [python, job.py, "0"]
                dir: {site / 'code'}
                python: {sys.executable}
              register: job
            - name: show
              debug:
                msg: "{{{{ job.run.state }}}} {{{{ job.run.exit_code }}}}"
    """))
    result = run_playbook(pb, hosts=[Host("localhost", local=True, vars={"data_dir": str(site / "data")})])
    statuses = [(r.task, r.status) for r in result.results]
    assert statuses[0][1] == "changed", result.results[0]
    assert "finished 0" in str(result.results[1].result), result.results[1]


def test_logs_go_to_stdout_prefixed_only_for_several_hosts(site: Path) -> None:
    """`provision logs HOST RUN > file` and `| grep` get the log (issue 22); no prefix when
    stdout is not a terminal and one host is named, `HOST | ` with several, --no-prefix: never."""
    (site / "hosts.ini").write_text(
        f"localhost ansible_connection=local data_dir={site / 'data'}\n"
        f"[pair]\nlocalhost\nlocal2 ansible_connection=local data_dir={site / 'data'}\n")
    inv = ["-i", str(site / "hosts.ini")]
    run = _provision("train", "localhost", *inv, "--json", "--dir", "code", "--python", sys.executable,
                     "--run-id", "r-log", "--out", str(site / "rep"), "--", "python", "job.py", "0", cwd=site)
    assert run.returncode == 0, run.stderr[-3000:]
    one = _provision("logs", "localhost", "r-log", *inv, cwd=site)
    assert one.returncode == 0, one.stderr
    assert one.stdout == "line 0\nline 1\nline 2\n" and "line 0" not in one.stderr
    follow = _provision("logs", "localhost", "r-log", "-f", *inv, cwd=site)
    assert follow.returncode == 0 and follow.stdout == "line 0\nline 1\nline 2\n", follow.stderr
    both = _provision("logs", "pair", "r-log", *inv, cwd=site)
    assert sorted(both.stdout.splitlines()) == sorted(
        f"{h} | line {i}" for h in ("localhost", "local2") for i in range(3))
    bare = _provision("logs", "pair", "r-log", "--no-prefix", *inv, cwd=site)
    assert sorted(bare.stdout.splitlines()) == sorted(f"line {i}" for _ in range(2) for i in range(3))


def test_ctrl_c_in_attach_detaches_and_the_run_goes_on(site: Path) -> None:
    import signal
    import time

    inv = ["-i", str(site / "hosts.ini")]
    (site / "code" / "slow.py").write_text(
        "import time\nfor i in range(600):\n    print('tick', i, flush=True)\n    time.sleep(0.5)\n")
    start = _provision("train", "localhost", *inv, "--dir", "code", "--python", sys.executable, "--detach",
                       "--run-id", "r-att", "--", "python", "slow.py", cwd=site)
    assert start.returncode == 0, start.stderr
    attach = subprocess.Popen([sys.executable, "-m", "provision", "attach", "localhost", "r-att", *inv, "--no-live"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=site)
    try:
        assert attach.stderr is not None
        deadline = time.monotonic() + 120
        seen = ""
        while time.monotonic() < deadline and "| tick" not in seen:
            seen += attach.stderr.readline() or ""
        assert "| tick" in seen, seen[-2000:]
        attach.send_signal(signal.SIGINT)
        _, err = attach.communicate(timeout=60)
    finally:
        if attach.poll() is None:
            attach.kill()
    try:
        assert attach.returncode == 130, err
        assert "detached; r-att still running on localhost; `provision stop localhost r-att` stops it" in err
        assert "stopped:" not in err
        runs = json.loads(_provision("runs", "localhost", *inv, "--json", cwd=site).stdout)["hosts"]["localhost"]["runs"]
        assert [r["state"] for r in runs if r["run_id"] == "r-att"] == ["running"]
    finally:
        stop = _provision("stop", "localhost", "r-att", *inv, "--grace", "2", cwd=site)
        assert stop.returncode == 0, stop.stderr
