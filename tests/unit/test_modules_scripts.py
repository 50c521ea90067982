"""script and raw on this machine: arguments stay data, creates/removes, chdir, check mode."""

from __future__ import annotations

from pathlib import Path

from builtin_support import ok, results, run_tasks


def test_script_runs_with_quoted_args_chdir_and_guards(tmp_path: Path) -> None:
    (tmp_path / "files").mkdir()
    (tmp_path / "files" / "show.sh").write_text('#!/bin/sh\npwd\nfor a in "$@"; do echo "[$a]"; done\ntouch made\n')
    (tmp_path / "work").mkdir()
    tasks = """
    - script: show.sh "two words" {{ evil }} plain
      args:
        chdir: TMP/work
        creates: TMP/work/made
      register: r
    """
    evil = "$(touch TMP/PWNED);x"
    first = ok(run_tasks(tmp_path, tasks, extra_vars={"evil": evil.replace("TMP", str(tmp_path))}))
    (status, reg), = results(first)
    assert status == "changed" and reg["rc"] == 0
    assert reg["stdout_lines"] == [
        str(tmp_path / "work"), "[two words]", f"[{evil.replace('TMP', str(tmp_path))}]", "[plain]",
    ]
    assert not (tmp_path / "PWNED").exists()
    second = ok(run_tasks(tmp_path, tasks, extra_vars={"evil": "x"}))
    assert second.results[0].status == "skipped"
    assert "matching creates option" in second.results[0].result["msg"]


def test_script_check_mode_failure_and_executable(tmp_path: Path) -> None:
    (tmp_path / "fail.sh").write_text("echo out; echo err >&2; exit 4\n")
    check = run_tasks(tmp_path, "- script: TMP/fail.sh", check=True)
    assert check.results[0].status == "skipped"
    guarded = run_tasks(tmp_path, "- script: TMP/fail.sh removes=TMP/fail.sh", check=True)
    assert guarded.results[0].status == "changed"
    failed = run_tasks(tmp_path, "- script: TMP/fail.sh\n  args: {executable: /bin/sh}")
    r = failed.results[0]
    assert r.status == "failed" and r.result["rc"] == 4
    assert r.result["stdout"].strip() == "out" and r.result["stderr"].strip() == "err"
    missing = run_tasks(tmp_path, "- script: nothere.sh")
    assert missing.results[0].status == "failed" and "nothere.sh" in missing.results[0].msg


def test_raw_runs_shell_text_values_as_data(tmp_path: Path) -> None:
    tasks = """
    - raw: echo {{ word }} > TMP/out; cat TMP/out
      register: r
    """
    result = ok(run_tasks(tmp_path, tasks, extra_vars={"word": "a;touch TMP/PWNED".replace("TMP", str(tmp_path))}))
    (status, reg), = results(result)
    assert status == "changed" and reg["rc"] == 0
    assert reg["stdout"].strip() == f"a;touch {tmp_path}/PWNED"
    assert not (tmp_path / "PWNED").exists()
    assert run_tasks(tmp_path, tasks, check=True, extra_vars={"word": "x"}).results[0].status == "skipped"
    failed = run_tasks(tmp_path, "- raw: exit 3")
    assert failed.results[0].status == "failed" and failed.results[0].result["rc"] == 3
