"""uv command lines for the host (provision/install/uv.py): pip's index options in uv's spelling,
secrets via stdin only, the host's uv configuration switched off; and the real uv building a
venv from the tests' own index on this machine."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from provision.connection.local import LocalConnection
from provision.install import uv
from provision.install.mirrors import IndexConfig
from provision.inventory.model import Host
from tests.support.package_index import PackageIndex, small_wheelhouse


def test_index_options_translate_and_secrets_go_to_env() -> None:
    index = IndexConfig(
        index_url="https://user:s3cr3t@idx.example/simple",
        extra_index_urls=["https://download.pytorch.org/whl/cpu", "https://u:tok@extra/simple"],
        find_links=["/root/wheels"],
        trusted_hosts=["mirror.local"],
    )
    cmd = uv.install_command_uv(
        "/root/.cache/provision/uv/bin/uv",
        "/env/gen/bin/python",
        ["torch==2.13.0+cpu"],
        index,
        requirement_files=["/env/gen/.provision/req.txt"],
        require_hashes=True,
        cache_dir="/data/.cache/pip",
    )
    args = cmd.argv
    assert args[:5] == ["/root/.cache/provision/uv/bin/uv", "pip", "install", "--python", "/env/gen/bin/python"]
    assert args[args.index("--index-strategy") + 1] == "unsafe-best-match"
    assert "--require-hashes" in args and args[args.index("--link-mode") + 1] == "hardlink"
    assert "--compile-bytecode" not in args  # the verification's import compiles what it needs
    assert args[args.index("--extra-index-url") + 1] == "https://download.pytorch.org/whl/cpu"
    assert args[args.index("--find-links") + 1] == "/root/wheels"
    assert args[args.index("--allow-insecure-host") + 1] == "mirror.local"
    assert "--trusted-host" not in args
    assert args[args.index("--cache-dir") + 1] == "/data/.cache/pip/uv"
    assert args[-3:] == ["-r", "/env/gen/.provision/req.txt", "torch==2.13.0+cpu"]
    # credentials never in argv: in the env block read from stdin, under uv's names
    assert not any("s3cr3t" in a or "tok" in a for a in args)
    assert cmd.env["UV_INDEX_URL"] == "https://user:s3cr3t@idx.example/simple"
    assert cmd.env["UV_EXTRA_INDEX_URL"] == "https://u:tok@extra/simple"
    assert b"UV_INDEX_URL=https://user:s3cr3t@idx.example/simple\n" in cmd.stdin
    assert "s3cr3t" not in cmd.display and "tok@" not in cmd.display


def test_the_host_script_switches_uv_config_off_and_runs_under_the_venv_python() -> None:
    cmd = uv.install_command_uv("/opt/uv", "/env/gen/bin/python", ["x"], IndexConfig("https://i/simple"))
    script = cmd.detached_script("/g/log", "/g/exit", "/g/pid")
    assert "export UV_NO_CONFIG=1 UV_PYTHON_DOWNLOADS=never" in script
    assert 'unset "$v"' in script and "PIP_CONFIG_FILE=/dev/null" in script
    assert "nohup /env/gen/bin/python -c" in script
    assert script.index("/opt/uv pip install") > script.index("-c")


def test_unknown_installer_is_a_usage_error() -> None:
    from provision.errors import ConfigError
    from provision.install.installer import InstallOptions

    with pytest.raises(ConfigError, match="--installer 'conda'.*auto, uv, pip"):
        InstallOptions(installer="conda").validate()


@pytest.fixture
def local_conn(tmp_path: Path):
    conn = LocalConnection(Host(name="localhost", address="127.0.0.1", local=True))
    yield conn
    conn.close()


def test_real_uv_fills_a_venv_from_the_tests_index_like_pip(tmp_path: Path, local_conn) -> None:
    found = uv.controller_uv()
    if found is None:
        pytest.skip("uv is a test dependency: pip install uv")
    wheels = small_wheelhouse(tmp_path / "wheels")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    with PackageIndex(wheels) as index:
        cmd = uv.install_command_uv(
            found,
            str(venv / "bin" / "python"),
            ["provtest-alpha", "provtest-beta==1.0"],
            IndexConfig(index.url),
            cache_dir=str(tmp_path / "cache"),
        )
        result = local_conn.run(cmd.script(), stdin=cmd.stdin, timeout=300)
        assert result.ok, result.stderr
    # the best version across the index, as pip picks; named as their metadata says
    packages = uv.installed_packages(local_conn, str(venv / "bin" / "python"))
    assert packages == {"provtest-alpha": "2.0", "provtest-beta": "1.0"}
    assert uv.installed_packages(local_conn, str(venv / "bin" / "python"), since=packages) == {}
    check = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import provtest_alpha as a; print(a.__version__)"],
        capture_output=True,
        text=True,
    )
    assert check.stdout.strip() == "2.0"
    assert (tmp_path / "cache" / "uv").is_dir()


def test_find_host_uv_prefers_ours_and_checks_it_runs(tmp_path: Path, local_conn, monkeypatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    ours = tmp_path / ".cache" / "provision" / "uv" / "bin" / "uv"
    ours.parent.mkdir(parents=True)
    ours.write_text("#!/bin/sh\necho broken >&2; exit 1\n")
    ours.chmod(0o755)
    assert uv.find_host_uv(local_conn) is None  # there but does not run: not used
    found = uv.controller_uv()
    if found is None:
        pytest.skip("uv is a test dependency: pip install uv")
    ours.unlink()
    ours.symlink_to(found)
    assert uv.find_host_uv(local_conn) == str(ours)
