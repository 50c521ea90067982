"""`provision run` as a user runs it: a subprocess, stdout/stderr split, exit codes, -e forms,
--json, --check, Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from provision.cli.run import parse_extra_vars
from provision.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]


def provision(
    *args: str, cwd: Path | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="200")
    return subprocess.run(
        [sys.executable, "-m", "provision", "run", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=timeout,
    )


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


def test_json_document_on_stdout_and_exit_codes(tmp_path: Path) -> None:
    pb = write(
        tmp_path / "site.yml",
        f"""
        - hosts: localhost
          gather_facts: false
          tasks:
            - name: make
              file: path={tmp_path}/x state=directory
            - name: greet
              debug: msg="hello {{{{ who }}}}"
        """,
    )
    proc = provision(str(pb), "--json", "-e", "who=world")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)  # exactly one JSON document
    assert doc["recap"] == {
        "localhost": {"ok": 2, "changed": 1, "failed": 0, "skipped": 0, "unreachable": 0,
                      "ignored": 0, "rescued": 0}
    }
    assert [r["task"] for r in doc["results"]] == ["make", "greet"]
    assert doc["results"][1]["msg"] == "hello world"
    assert isinstance(doc["elapsed"], float)
    assert "PLAY RECAP" in proc.stderr  # humans read stderr


def test_failure_exit_code_and_message(tmp_path: Path) -> None:
    pb = write(
        tmp_path / "site.yml",
        """
        - hosts: localhost
          gather_facts: false
          tasks:
            - name: breaks
              command: ls /no/such/dir
        """,
    )
    proc = provision(str(pb))
    assert proc.returncode == 1
    assert "FAILED" in proc.stderr and "breaks" in proc.stderr and "rc: 2" in proc.stderr


def test_invalid_playbook_exit_2_with_position(tmp_path: Path) -> None:
    pb = write(
        tmp_path / "site.yml",
        """
        - hosts: localhost
          tasks:
            - shel: echo hi
        """,
    )
    proc = provision(str(pb), cwd=tmp_path)
    assert proc.returncode == 2
    assert "site.yml:3:7: unknown module 'shel'" in proc.stderr
    assert proc.stdout == ""


def test_check_syntax_and_list_tasks(tmp_path: Path) -> None:
    pb = write(
        tmp_path / "site.yml",
        """
        - hosts: localhost
          tasks:
            - {name: one, debug: {msg: x}, tags: [a]}
            - {name: two, debug: {msg: y}, tags: [b]}
        """,
    )
    assert provision(str(pb), "--syntax-check").returncode == 0
    listed = provision(str(pb), "--list-tasks", "-t", "b")
    assert "two" in listed.stderr and "one" not in listed.stderr


def test_check_mode_flag(tmp_path: Path) -> None:
    pb = write(
        tmp_path / "site.yml",
        f"""
        - hosts: localhost
          gather_facts: false
          tasks:
            - copy: dest={tmp_path}/f content=x
        """,
    )
    proc = provision(str(pb), "--check", "--diff")
    assert proc.returncode == 0
    assert not (tmp_path / "f").exists()
    assert "check mode" in proc.stderr and "+x" in proc.stderr


def test_extra_vars_forms(tmp_path: Path) -> None:
    vars_file = write(tmp_path / "v.yml", "a: 1\nnested: {k: v}\n")
    merged = parse_extra_vars(["x=1 y='two words'", f"@{vars_file}", '{"z": [1, 2]}', "a=override"])
    assert merged == {
        "x": "1",
        "y": "two words",
        "a": "override",
        "nested": {"k": "v"},
        "z": [1, 2],
    }
    with pytest.raises(ConfigError, match="expected name=value"):
        parse_extra_vars(["justaword"])
    with pytest.raises(ConfigError, match="no such file"):
        parse_extra_vars(["@/no/such/vars.yml"])


def test_ctrl_c_stops_cleanly_and_prints_recap(tmp_path: Path) -> None:
    marker = tmp_path / "started"
    inventory = write(
        tmp_path / "hosts.ini", "h1 ansible_connection=local\nh2 ansible_connection=local\n"
    )
    pb = write(
        tmp_path / "site.yml",
        f"""
        - hosts: all
          gather_facts: false
          tasks:
            - name: first
              shell: touch {marker}-{{{{ inventory_hostname }}}}
            - name: long
              command: sleep 60
            - name: never
              debug: msg=not-reached
        """,
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(
        [sys.executable, "-m", "provision", "run", str(pb), "-i", str(inventory)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    try:
        for _ in range(600):  # both hosts past the first task (bounded wait)
            if Path(f"{marker}-h1").exists() and Path(f"{marker}-h2").exists():
                break
            time.sleep(0.05)
        time.sleep(0.3)  # into `sleep 60`
        os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole group
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130
    assert "PLAY RECAP" in err and "interrupted" in err
    assert "not-reached" not in err
