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
