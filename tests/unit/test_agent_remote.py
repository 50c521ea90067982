"""The controller side of the agent on a LocalConnection: upload into $HOME/.cache/provision,
the command line each agent command runs with, and bytecode reuse on later calls."""

from __future__ import annotations

import os
import sys

import pytest

from provision.connection.local import LocalConnection
from provision.remote import agent as remote_agent
from provision.remote.agent import Agent


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


def test_light_commands_skip_site_and_run_the_script_not_the_folder():
    agent = Agent(LocalConnection(), python="python3")
    facts = agent._command("facts", "python3")
    assert facts.endswith(
        f'exec python3 -S "$HOME"/.cache/provision/agent-{remote_agent.agent_digest()}/__main__.py facts'
    )
    for command in ("health", "ping"):
        assert " -S " in agent._command(command, "python3")
    for command in ("stage", "bench", "verify_torch", "verify_dataset", "dataset_status"):
        line = agent._command(command, "python3")
        assert " -S " not in line and line.endswith(f"/__main__.py {command}")


def test_facts_through_the_agent_and_bytecode_written_despite_the_environment(home, monkeypatch):
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")  # as many Docker images set it
    agent = Agent(LocalConnection())
    first = agent.call("facts", {"only": ["hostname", "python"]})
    assert agent.uploads == 1 and first["hostname"] == os.uname().nodename
    assert os.path.realpath(first["python"]["agent"]["executable"]) == os.path.realpath(
        sys.executable
    )
    folder = home / ".cache" / "provision" / f"agent-{remote_agent.agent_digest()}"
    cached = sorted(p.name.split(".")[0] for p in folder.rglob("__pycache__/*.pyc"))
    assert {"protocol", "python_env", "_util"} <= set(cached)
    stamps = {p: p.stat().st_mtime_ns for p in folder.rglob("__pycache__/*.pyc")}
    second = agent.call("facts", {"only": ["hostname"]})
    assert agent.uploads == 1 and second["hostname"] == first["hostname"]
    assert {p: p.stat().st_mtime_ns for p in folder.rglob("__pycache__/*.pyc")} == stamps


def test_ping_under_dash_s_and_errors_keep_their_message(home):
    agent = Agent(LocalConnection())
    assert agent.call("ping")["protocol"] == 1
    with pytest.raises(Exception, match="unknown fact key"):
        agent.call("facts", {"only": ["nope"]})


def test_the_content_hash_covers_the_zips_main(monkeypatch):
    before = remote_agent.agent_digest()
    monkeypatch.setattr(remote_agent, "_sources", None)
    monkeypatch.setattr(remote_agent, "_MAIN", remote_agent._MAIN + b"# changed\n")
    assert remote_agent.agent_digest() != before
