"""The controller side of the agent on a LocalConnection: one command per call (bootstrap,
bundle and request together), the core bundle for the light commands, the memo that keeps a
warm run from sending bundles, and a host that lost its agent."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from provision.connection.local import LocalConnection
from provision.remote import agent as remote_agent
from provision.remote import agent_bundle
from provision.remote.agent import Agent


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


class CountingLocal(LocalConnection):
    """A real LocalConnection that counts the commands it runs (each one is a process here,
    a channel over SSH)."""

    def __init__(self) -> None:
        super().__init__()
        self.commands: list[str] = []

    def stream(self, command, **kwargs):
        self.commands.append(str(command))
        return super().stream(command, **kwargs)

    def run(self, command, **kwargs):
        self.commands.append(str(command))
        return super().run(command, **kwargs)


def _folder(home, kind: str):
    return home / ".cache" / "provision" / f"agent-{remote_agent.agent_digest(kind)}"


def test_light_commands_skip_site_and_use_the_core_bundle_the_others_the_full_one():
    agent = Agent(LocalConnection(), python="python3")
    core, full = remote_agent.agent_digest("core"), remote_agent.agent_digest("full")
    assert core != full
    for command in ("facts", "health", "ping"):
        line = agent._command(command, "python3")
        assert line.startswith("command -v python3 >/dev/null 2>&1 || exit 98; exec python3 -S -c ")
        assert f' "$HOME"/.cache/provision/agent-{core} {command} agent-{full} ' in line
    warm = agent._command("facts", "python3", send=False)  # no bundle: no bootstrap text either
    assert warm.rstrip().endswith(f' "$HOME"/.cache/provision/agent-{core} facts agent-{full}') and len(warm) < 600
    for command in ("stage", "verify_dataset", "dataset_status"):  # full bundle, no site
        line = agent._command(command, "python3")
        assert line.startswith("command -v python3 >/dev/null 2>&1 || exit 98; exec python3 -S -c ")
        assert f' "$HOME"/.cache/provision/agent-{full} {command} agent-{core} ' in line
    for command in ("bench", "verify_torch", "train_start"):  # torch may need site's .pth files
        line = agent._command(command, "python3")
        assert " -S " not in line
        assert f' "$HOME"/.cache/provision/agent-{full} {command} agent-{core} ' in line


def test_without_site_an_lmdb_only_a_pth_import_line_finds_is_still_found(tmp_path):
    """The dataset commands start with -S; where py-lmdb is importable only through an `import`
    line of a .pth file (which -S skips), the agent runs site's start-up and finds it."""
    import subprocess
    import sys

    hidden = tmp_path / "hidden"
    hidden.mkdir()
    (hidden / "lmdb.py").write_text("__version__ = 'fake'\n")
    user_site = tmp_path / "userbase" / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    user_site.mkdir(parents=True)
    (user_site / "zz_hidden.pth").write_text(f"import sys; sys.path.insert(0, {str(hidden)!r})\n")
    code = (
        "import os, sys; sys.path.insert(0, sys.argv[1]); "
        "from provision.agent import protocol; protocol.add_site_packages(); "
        # this Python's own py-lmdb (if any) out of sight: only the .pth line can find one
        "sys.path[:] = [p for p in sys.path if not os.path.exists(os.path.join(p, 'lmdb'))]; "
        "from provision.agent.datasets import deps; m = deps.import_lmdb(); print(m.__version__, m.__file__)"
    )
    repo = str(Path(__file__).resolve().parents[2])
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONUSERBASE": str(tmp_path / "userbase")}
    done = subprocess.run([sys.executable, "-S", "-c", code, repo], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["fake", str(hidden / "lmdb.py")]


def test_first_contact_is_one_command_and_a_warm_run_sends_no_bundle(home, monkeypatch):
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")  # as many Docker images set it
    conn = CountingLocal()
    agent = Agent(conn)
    first = agent.call("facts", {"only": ["hostname", "python"]})
    assert len(conn.commands) == 1  # no probe, no separate upload
    assert (agent.uploads, agent.bundles_sent) == (1, 1)
    assert first["hostname"] == os.uname().nodename
    assert os.path.realpath(first["python"]["agent"]["executable"]) == os.path.realpath(sys.executable)
    assert _folder(home, "core").is_dir() and not _folder(home, "full").exists()  # lazy

    # a new process (a new Agent, same memo) on the same host: no bundle on the wire
    conn2 = CountingLocal()
    again = Agent(conn2)
    assert again.call("facts", {"only": ["hostname"]})["hostname"] == first["hostname"]
    assert (again.uploads, again.bundles_sent, len(conn2.commands)) == (0, 0, 1)

    # the first heavy command ships the full agent; light ones then run from it
    agent.call("dataset_status", {"path": str(home / "nothing-here")})
    assert _folder(home, "full").is_dir() and agent.uploads == 2
    assert agent._kind("facts") == "full" and agent.call("ping")["protocol"] == 1


def test_shipped_bytecode_is_used_and_never_rewritten(home, monkeypatch):
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    Agent(LocalConnection()).call("facts", {"only": ["hostname", "python", "cpu"]})
    folder = _folder(home, "core")
    tag = sys.implementation.cache_tag
    pycs = {p: p.stat().st_mtime_ns for p in folder.rglob("__pycache__/*.pyc")}
    names = {p.name.split(".")[0] for p in pycs}
    assert {"protocol", "python_env", "_util", "cpu"} <= names
    assert all(p.name.endswith(f".{tag}.pyc") for p in pycs)
    Agent(LocalConnection()).call("facts", {"only": ["hostname", "cpu"]})
    assert {p: p.stat().st_mtime_ns for p in folder.rglob("__pycache__/*.pyc")} == pycs


def test_a_host_that_lost_its_agent_gets_it_again_in_the_repeated_call(home):
    Agent(LocalConnection()).call("ping")
    shutil.rmtree(home / ".cache" / "provision")
    conn = CountingLocal()
    agent = Agent(conn)  # the memo says the host has it: nothing sent first
    assert agent.call("ping")["protocol"] == 1
    assert len(conn.commands) == 2 and agent.bundles_sent == 1 and agent.uploads == 1


def test_a_partial_agent_folder_is_replaced(home):
    Agent(LocalConnection()).call("ping")
    folder = _folder(home, "core")
    (folder / "provision" / "agent" / "facts" / "cpu.py").write_text("")  # cut short
    (folder / "provision" / "agent" / "facts" / "__pycache__").rename(folder / "moved")
    agent = Agent(LocalConnection())
    assert agent.call("facts", {"only": ["cpu"]})["cpu"]
    assert agent.uploads == 1
    assert sorted(p.name for p in folder.parent.iterdir()) == [folder.name]  # nothing aside
    assert (folder / "provision" / "agent" / "facts" / "cpu.py").stat().st_size > 0


def test_ping_and_errors_keep_their_message(home):
    agent = Agent(LocalConnection())
    assert agent.call("ping")["protocol"] == 1
    with pytest.raises(Exception, match="unknown fact key"):
        agent.call("facts", {"only": ["nope"]})


def test_a_module_missing_from_the_core_falls_back_to_the_full_agent(home, monkeypatch):
    """If the core's import scan ever misses a module, the call still succeeds (full agent)."""
    real = agent_bundle.core_names

    def without_cpu(files):
        return [n for n in real(files) if not n.endswith("facts/cpu.py")]

    agent_bundle.reset()
    monkeypatch.setattr(agent_bundle, "core_names", without_cpu)
    try:
        agent = Agent(LocalConnection())
        assert agent.call("facts", {"only": ["cpu"]})["cpu"]
        assert _folder(home, "full").is_dir()
    finally:
        monkeypatch.undo()
        agent_bundle.reset()
