"""Files on the host that hold secrets are the user's alone, and values stay out of command text:

- a training run's folder is 0700 and its state.json 0600 (state.json keeps the command line and
  the `stop_command`, often a cloud API token: it used to be 0644 in a 0755 folder);
- the connection sends `env` values on stdin, read by the shell: the text run has none of them;
- git's `repo` credentials are taken out of the URL before anything is built from it;
- cron and git refuse values that would be read as more than one line or as a glob.
"""

from __future__ import annotations

import os
import signal
import stat
import sys
import time
from pathlib import Path

import pytest

from provision.agent.train import rundir
from provision.connection.local import LocalConnection
from provision.inventory.model import Host
from provision.modules.base import get_module
from provision.modules.git import split_credentials
from provision.train.launch import HostTrainer, TrainSpec


def test_run_folder_and_state_json_are_private(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    host = Host("localhost", local=True, vars={"data_dir": str(data)})
    stop = "vastai destroy instance 1 --api-key stopSECRET"
    with LocalConnection(host) as conn:
        trainer = HostTrainer(conn)
        started = trainer.start(TrainSpec(command=[sys.executable, "-c", "pass"], python=sys.executable,
                                          stop_when_idle=3600, stop_command=stop))
        run_id = started["run"]["run_id"]
        trainer.follow_to_end(run_id)
    folder = data / "runs" / run_id
    try:
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
        state = folder / rundir.STATE
        assert stop in state.read_text()  # it is there (the idle stop needs it) ...
        assert stat.S_IMODE(state.stat().st_mode) == 0o600  # ... for the user alone
        assert not [p for p in folder.iterdir() if ".tmp-" in p.name]
    finally:
        _end_idle_watchers(folder)


def _end_idle_watchers(folder: Path) -> None:
    """The supervisor stays to watch for idleness (an hour here) after the job: end it with the
    test, as `provision stop` would, rather than leave it running past the suite."""
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and str(folder).encode() in (proc / "cmdline").read_bytes():
                os.kill(int(proc.name), signal.SIGTERM)
        except OSError:
            continue


def test_write_json_atomic_never_follows_a_planted_name(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("untouched")
    target = tmp_path / "state.json"
    for pid in range(1, 4096):  # the old name was state.json.tmp-PID
        (tmp_path / f"state.json.tmp-{pid}").symlink_to(victim)
    rundir.write_json_atomic(str(target), {"a": 1})
    assert victim.read_text() == "untouched"
    assert rundir.read_json(str(target)) == {"a": 1}
    assert stat.S_IMODE(target.stat().st_mode) == 0o600


def test_env_values_travel_on_stdin_not_in_the_command_text(tmp_path: Path) -> None:
    seen: list[str] = []

    class Recording(LocalConnection):
        def _execute(self, command, full, *args, **kwargs):  # type: ignore[no-untyped-def]
            seen.append(full)
            return super()._execute(command, full, *args, **kwargs)

    secret = "envSECRET" + str(time.time_ns())
    with Recording(Host("localhost", local=True)) as conn:
        result = conn.run('printf %s "$TOKEN"; cat', env={"TOKEN": secret}, stdin=b"|rest")
        streamed = conn.stream('printf %s "$TOKEN"', env={"TOKEN": secret + "\nline2"})
    assert result.stdout == secret + "|rest"
    assert streamed.stdout == secret + "\nline2"
    assert seen and not [text for text in seen if secret in text]


@pytest.mark.parametrize(
    ("url", "bare", "user", "password"),
    [
        ("https://oauth2:tok%40en@git.example.com/a/b.git", "https://git.example.com/a/b.git", "oauth2", "tok@en"),
        ("http://TOKEN@host:8080/r", "http://host:8080/r", "TOKEN", ""),
        ("https://git.example.com/a.git", "https://git.example.com/a.git", None, None),
        ("git@github.com:a/b.git", "git@github.com:a/b.git", None, None),
        ("ssh://git@host/r.git", "ssh://git@host/r.git", None, None),
    ],
)
def test_git_credentials_leave_the_url(url: str, bare: str, user: str | None, password: str | None) -> None:
    got, env = split_credentials(url)
    assert got == bare
    assert env.get("PV_GIT_USER") == user and env.get("PV_GIT_PASS") == password


def test_git_refuses_a_glob_as_version() -> None:
    git = get_module("git")()  # type: ignore[misc]
    errors = git.check_args({"repo": "https://h/r.git", "version": "ma?n", "remote": "origin"})
    assert any("ma?n" in e for e in errors), errors


@pytest.mark.parametrize("key", ["name", "minute", "hour", "user", "job", "weekday"])
def test_cron_refuses_a_line_break_in_any_field(key: str) -> None:
    cron = get_module("cron")()  # type: ignore[misc]
    args = {"name": "n", "job": "/bin/true", "minute": "*", "hour": "*", "day": "*", "month": "*",
            "weekday": "*", "state": "present", "user": "root", "cron_file": "pv"}
    args[key] = args[key] + "\n* * * * * root touch /tmp/PWNED"
    errors = cron.check_args(args)
    assert any("line break" in e and key in e for e in errors), errors
    args[key] = args[key].split("\n")[0]
    assert not [e for e in cron.check_args(args) if "line break" in e]
