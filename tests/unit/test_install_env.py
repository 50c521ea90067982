"""The install machinery on this machine, with real pip, real venvs and a real local index
(tiny wheels built on the spot; the torch installs are in test_install_torch.py).

What a user relies on: the managed env is replaced only by an atomic switch, a failed build leaves
no trace, the host's pip configuration cannot add sources, credentials never reach argv, pip's
failure comes back as the few lines that matter, and a Ctrl-C stops pip on the host.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path

import pytest

from provision.connection.local import LocalConnection
from provision.errors import HostError
from provision.install.installer import InstallOptions, run_pip
from provision.install.mirrors import IndexConfig, IndexOptions, build_index_config
from provision.install.pip import install_command, relevant_lines
from provision.remote.environment import ManagedEnv
from tests.support.package_index import PackageIndex, build_wheel, small_wheelhouse

BASE_PYTHON = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else "python3"


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return small_wheelhouse(tmp_path_factory.mktemp("wheels"))


@pytest.fixture(scope="module")
def template_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One venv made once; tests copy nothing from it, they only run its pip (venv creation costs
    seconds on 2 cores)."""
    path = tmp_path_factory.mktemp("venv") / "v"
    subprocess.run([BASE_PYTHON, "-m", "venv", str(path)], check=True)
    return path


def _index(index: PackageIndex) -> IndexConfig:
    return build_index_config(
        IndexOptions(index_url=index.url),
        plan_index_url=None,
        variant="cpu",
        reachable_torch_index=None,
    )


def _version_in(python: Path, module: str) -> str | None:
    proc = subprocess.run(
        [str(python), "-c", f"import {module}; print({module}.__version__)"],
        capture_output=True,
        text=True,
    )
    return proc.stdout.strip() if proc.returncode == 0 else None


def test_pip_ignores_the_hosts_pip_configuration(
    wheels: Path, tmp_path: Path, template_venv: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a "host" whose environment and pip.conf point at a directory with a newer, different build
    rogue = tmp_path / "rogue"
    rogue.mkdir()
    build_wheel(rogue, "provtest_alpha", "9.0")
    conf = tmp_path / "pip.conf"
    conf.write_text(f"[global]\nfind-links = {rogue}\n")
    monkeypatch.setenv("PIP_FIND_LINKS", str(rogue))
    monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))
    conn = LocalConnection()
    with PackageIndex(wheels) as index:
        cmd = install_command(str(template_venv / "bin/python"), ["provtest-alpha"], _index(index))
        run = conn.run(cmd.script(), stdin=cmd.stdin, timeout=300)
    assert run.ok, run.stderr
    assert (
        _version_in(template_venv / "bin/python", "provtest_alpha") == "2.0"
    )  # the index's newest, not 9.0
    assert "--trusted-host" in cmd.argv  # plain http index


def test_credentials_never_reach_any_command_line(wheels: Path, template_venv: Path) -> None:
    token = "s3cr3t-tok-" + os.urandom(4).hex()
    conn = LocalConnection()
    with PackageIndex(wheels, auth=("alice", token), watch_secret=token) as index:
        cfg = _index_with_creds = build_index_config(
            IndexOptions(index_url=index.url_with_credentials()),
            plan_index_url=None,
            variant="cpu",
            reachable_torch_index=None,
        )
        cmd = install_command(str(template_venv / "bin/python"), ["provtest-beta"], cfg)
        run = conn.run(cmd.script(), stdin=cmd.stdin, timeout=300)
        assert run.ok, run.stderr  # the credentials did reach pip (the index demands them)...
        assert any(r.startswith("GET /simple/provtest-beta/ 200") for r in index.requests)
        assert index.secret_seen_in == []  # ...but no process's argv held them while it fetched
        assert (
            token not in cmd.script()
            and token not in cmd.display
            and token not in " ".join(cmd.argv)
        )
        assert "alice:****@" in cmd.display
        assert token not in str(_index_with_creds.as_dict())
        # the watch itself works: a process with the token in argv is seen
        sleeper = subprocess.Popen(["sh", "-c", "sleep 30", token])  # $0 = the token
        try:
            subprocess.run(["curl", "-s", "-o", "/dev/null", index.url], check=False, timeout=30)
        finally:
            sleeper.kill()
            sleeper.wait()
        assert any(token in c for c in index.secret_seen_in)


def test_failure_lines_name_the_cause(wheels: Path, template_venv: Path) -> None:
    conn = LocalConnection()
    with PackageIndex(wheels) as index:
        port = index.address[1]
    # the index is gone: a closed port on loopback (connection refused)
    cfg = build_index_config(
        IndexOptions(index_url=f"http://127.0.0.1:{port}/simple/"),
        plan_index_url=None,
        variant="cpu",
        reachable_torch_index=None,
    )
    cmd = install_command(
        str(template_venv / "bin/python"), ["provtest-alpha==1.0"], cfg, retries=1, timeout=5
    )
    run = conn.run(cmd.script(), stdin=cmd.stdin, timeout=300)
    assert not run.ok
    lines = relevant_lines(run.stdout + run.stderr)
    assert sum("Retrying" in ln for ln in lines) <= 1  # pip's retry pages collapse to the last one
    assert any("No matching distribution" in ln or "Could not find a version" in ln for ln in lines)
    assert any("Connection refused" in ln or "NewConnectionError" in ln for ln in lines)
    assert not any(ln.startswith("Collecting") for ln in lines)


def test_managed_env_switch_is_a_symlink_rename(tmp_path: Path) -> None:
    conn = LocalConnection()
    env = ManagedEnv(conn, str(tmp_path / "envs" / "proj"))
    st = env.state()
    assert not st.exists and not st.managed and st.generations == []
    first = env.new_generation_path()
    env.create_venv(BASE_PYTHON, first)
    env.write_manifest(first, {"fingerprint": "a"})
    assert env.switch(first) is None
    st = env.state()
    assert (
        st.managed and st.target == first and st.has_python and st.manifest == {"fingerprint": "a"}
    )
    assert os.readlink(env.path) == first
    second = env.new_generation_path()
    env.create_venv(BASE_PYTHON, second)
    assert env.switch(second) == first
    assert os.readlink(env.path) == second
    assert Path(first, "bin/python").exists()  # the previous generation is kept
    third = env.new_generation_path()
    Path(third).mkdir()
    assert env.prune(keep=[second, first]) == [third]
    assert sorted(env.state().generations) == sorted([first, second])
    with pytest.raises(ValueError):
        env.discard(str(tmp_path))  # never anything outside the generations dir


def test_an_unmanaged_directory_is_never_replaced(tmp_path: Path) -> None:
    conn = LocalConnection()
    target = tmp_path / "myvenv"
    (target / "bin").mkdir(parents=True)
    (target / "bin" / "keep.txt").write_text("mine")
    env = ManagedEnv(conn, str(target))
    gen = env.new_generation_path()
    Path(gen).mkdir(parents=True)
    with pytest.raises(HostError, match="not an environment provision manages"):
        env.switch(gen)
    assert (target / "bin" / "keep.txt").read_text() == "mine"
    assert not target.is_symlink()


def test_one_install_per_env_at_a_time(tmp_path: Path) -> None:
    conn = LocalConnection()
    env = ManagedEnv(conn, str(tmp_path / "e"))
    env.acquire("first")
    try:
        with pytest.raises(HostError, match="another install .* is running \\(first\\)"):
            ManagedEnv(conn, str(tmp_path / "e")).acquire("second")
    finally:
        env.release()
    env.acquire("third")
    env.release()


def test_cancel_stops_pip_on_the_host_and_discard_cleans_up(wheels: Path, tmp_path: Path) -> None:
    conn = LocalConnection()
    env = ManagedEnv(conn, str(tmp_path / "envs" / "p"))
    gen = env.new_generation_path()
    env.create_venv(BASE_PYTHON, gen)
    cancel = threading.Event()
    options = InstallOptions(cancel=cancel, pip_deadline=120)
    with PackageIndex(wheels, delay=3.0) as index:  # every answer takes 3 s: pip is mid-run
        cmd = install_command(
            f"{gen}/bin/python", ["provtest-alpha"], _index(index), retries=0, timeout=30
        )
        timer = threading.Timer(1.0, cancel.set)
        timer.start()
        started = time.monotonic()
        code, _ = run_pip(conn, cmd, gen, options, lambda m: None)
        timer.join()
        assert code == 130
        assert time.monotonic() - started < 60
        pid = int(Path(gen, ".provision-pip.pid").read_text())
        assert Path(f"/proc/{pid}").exists()  # the supervisor still runs until discarded
        env.discard(gen)
    assert not Path(gen).exists()
    assert (
        not Path(f"/proc/{pid}").exists()
        or "provtest" not in Path(f"/proc/{pid}/cmdline").read_text()
    )
    leftovers = subprocess.run(["pgrep", "-f", gen], capture_output=True, text=True).stdout.split()
    assert leftovers == []


def test_run_pip_reports_exit_code_and_output(wheels: Path, tmp_path: Path) -> None:
    conn = LocalConnection()
    env = ManagedEnv(conn, str(tmp_path / "envs" / "p"))
    gen = env.new_generation_path()
    env.create_venv(BASE_PYTHON, gen)
    seen: list[str] = []
    with PackageIndex(wheels) as index:
        cmd = install_command(
            f"{gen}/bin/python", ["provtest-alpha==1.0", "provtest-beta"], _index(index)
        )
        code, output = run_pip(conn, cmd, gen, InstallOptions(), seen.append)
        assert code == 0, output
        assert "Successfully installed" in output
        assert any(s.startswith("Successfully installed") for s in seen)
        cmd = install_command(f"{gen}/bin/python", ["provtest-alpha==7.0"], _index(index))
        code, output = run_pip(conn, cmd, gen, InstallOptions(), seen.append)
    assert code == 1
    assert any("provtest-alpha==7.0" in ln for ln in relevant_lines(output))
    assert _version_in(Path(gen, "bin/python"), "provtest_alpha") == "1.0"


def test_relay_downloads_once_pushes_one_stream_and_installs_offline(
    wheels: Path, tmp_path: Path
) -> None:
    from provision.install import relay
    from provision.install.planning import PythonInfo

    py = PythonInfo(BASE_PYTHON, "3.11.2", "x86_64", "2.36")
    with PackageIndex(wheels) as index:
        cfg = _index(index)
        packages = relay.resolve_for(py, ["provtest-alpha==1.0", "provtest-beta"], cfg)
        assert sorted(p.name for p in packages) == ["provtest-alpha", "provtest-beta"]
        files = relay.fetch(packages, cfg, py)
        downloads = [r for r in index.requests if r.startswith("GET /files/")]
        assert len(downloads) == 2
        assert relay.fetch(packages, cfg, py) == files  # cached: nothing fetched again
        assert [r for r in index.requests if r.startswith("GET /files/")] == downloads
    # the index is gone: the host gets the wheels from us and installs with --no-index
    conn = LocalConnection()
    host_dir = str(tmp_path / "host" / "wheels")
    sent, size = relay.push(conn, files, host_dir)
    assert sent == 2 and size == sum(f.stat().st_size for f in files)
    assert relay.push(conn, files, host_dir) == (0, 0)  # already there: nothing sent
    env = ManagedEnv(conn, str(tmp_path / "envs" / "r"))
    gen = env.new_generation_path()
    env.create_venv(BASE_PYTHON, gen)
    reqs = tmp_path / "reqs.txt"
    reqs.write_text("".join(p.requirement_line() + "\n" for p in packages))
    cmd = install_command(
        f"{gen}/bin/python",
        [],
        relay.relay_index(host_dir),
        requirement_files=[str(reqs)],
        require_hashes=True,
    )
    assert "--no-index" in cmd.argv
    run = conn.run(cmd.script(), stdin=cmd.stdin, timeout=300)
    assert run.ok, run.stderr
    assert _version_in(Path(gen, "bin/python"), "provtest_alpha") == "1.0"
    # a file that does not match its hash is refused
    Path(host_dir, files[0].name).write_bytes(b"tampered")
    gen2 = env.new_generation_path()
    env.create_venv(BASE_PYTHON, gen2)
    cmd = install_command(
        f"{gen2}/bin/python",
        [],
        relay.relay_index(host_dir),
        requirement_files=[str(reqs)],
        require_hashes=True,
    )
    run = conn.run(cmd.script(), stdin=cmd.stdin, timeout=300)
    assert not run.ok
    lines = relevant_lines(run.stdout + run.stderr)
    assert any("DO NOT MATCH THE HASHES" in ln for ln in lines)
    assert any(ln.strip().startswith("provtest-alpha==1.0 from ") for ln in lines)  # which package
