"""`provision install` on this machine (LocalConnection) with the REAL torch 2.13.0 CPU wheel,
served by a PEP 503 index the test runs on 127.0.0.1.

Real torch installs are slow (~900 MB unpacked on two shared cores), so there is ONE: the
module's env (install, then a no-op reinstall). Every failure case fails before a second torch
lands and checks that env is exactly as it was. The `--locked --relay` reinstall with an
identical `pip freeze` runs on the fleet (tests/fleet/test_install.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
from pathlib import Path

import pytest

from provision.connection.local import LocalConnection
from provision.install.installer import (
    InstallCancelled,
    InstallError,
    InstallOptions,
    InstallResult,
    create_lock,
    install,
)
from provision.install.lockfile import read_lock, write_lock
from provision.install.mirrors import IndexOptions
from provision.remote.agent import Agent
from tests.support.package_index import PackageIndex, build_wheel, torch_wheelhouse

pytestmark = pytest.mark.slow
BASE_PYTHON = "/usr/bin/python3"
TORCH = "2.13.0"

if not Path(BASE_PYTHON).exists():  # pragma: no cover - the fleet image and this machine have it
    pytest.skip(
        "needs Debian's /usr/bin/python3 (3.11) for the cp311 wheel", allow_module_level=True
    )


@pytest.fixture(scope="module")
def wheelhouse() -> Path:
    return torch_wheelhouse()


@pytest.fixture(scope="module")
def index(wheelhouse: Path):
    with PackageIndex(wheelhouse) as idx:
        yield idx


@pytest.fixture(scope="module")
def conn() -> LocalConnection:
    return LocalConnection()


@pytest.fixture(scope="module")
def facts(conn: LocalConnection) -> dict:
    from provision.remote.facts import gather_facts

    return gather_facts(Agent(conn))


@pytest.fixture(scope="module")
def envs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("envs")


def options(env: Path, index_url: str, **kw) -> InstallOptions:
    kw.setdefault("torch", TORCH)
    return InstallOptions(
        env=str(env),
        python=BASE_PYTHON,
        index=IndexOptions(index_url=index_url),
        pip_cache="off",
        pip_retries=1,
        pip_timeout=10,
        **kw,
    )


@pytest.fixture(scope="module")
def installed(conn: LocalConnection, index: PackageIndex, envs: Path, facts: dict) -> InstallResult:
    """The one env every failure test starts from (and must leave as it was). Asked for the
    newest torch: the test index lags (2.13.0 only), so the install takes what it has."""
    return install(conn, Agent(conn), options(envs / "main", index.url, torch="latest"), facts=facts)


def snapshot(env: Path) -> tuple[str, str]:
    """(symlink target, what its python imports): "exactly as it was" and "usable"."""
    proc = subprocess.run(
        [str(env / "bin/python"), "-c", "import torch; print(torch.__version__)"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    return os.readlink(env), proc.stdout.strip() or proc.stderr.strip()[-200:]


def generations(env: Path) -> list[str]:
    return sorted(
        p.name for p in (env.parent / f".{env.name}.gens").iterdir() if not p.name.startswith(".")
    )


def test_install_verifies_and_switches(installed: InstallResult, envs: Path, index) -> None:
    env = envs / "main"
    assert installed.action == "installed", installed.message
    assert installed.plan["variant"] == "cpu" and installed.plan["torch"] == TORCH
    lag = [w for w in installed.warnings if "not on " + index.url in w]
    assert lag and lag[0].endswith(f"newest there that fits: {TORCH}")
    assert installed.message.endswith(lag[0])  # said in the one line users surely read
    assert installed.packages["torch"] == "2.13.0+cpu"
    torch = installed.verify["torch"]
    assert torch["version"] == "2.13.0+cpu" and torch["cuda"] is None
    assert installed.verify["ok"] is True and installed.verify["cpu"]["matmul"]["ok"]
    assert env.is_symlink() and os.readlink(env) == installed.generation
    assert snapshot(env)[1] == "2.13.0+cpu"
    manifest = json.loads((env / "provision-env.json").read_text())
    assert manifest["packages"]["torch"] == "2.13.0+cpu" and manifest["fingerprint"]
    assert {"facts", "create", "pip", "verify", "switch"} <= set(installed.timings)


def test_second_identical_install_does_nothing(
    installed: InstallResult, conn, index, envs: Path, facts
) -> None:
    before = snapshot(envs / "main"), generations(envs / "main")
    again = install(conn, Agent(conn), options(envs / "main", index.url, torch="latest"), facts=facts)
    assert again.action == "unchanged" and not again.changed
    assert "nothing to do" in again.message
    assert (
        "pip" not in again.timings and "create" not in again.timings
    )  # no env built, pip never ran
    assert again.verify["torch"]["version"] == "2.13.0+cpu"
    assert (snapshot(envs / "main"), generations(envs / "main")) == before


def test_unreachable_index_leaves_the_env_as_it_was(
    installed: InstallResult, conn, envs: Path, facts
) -> None:
    env = envs / "main"
    before = snapshot(env), generations(env)
    with PackageIndex(torch_wheelhouse()) as gone:
        dead = gone.url  # a port nothing listens on once the server stops
    # a different request (an extra package) forces a rebuild, which cannot reach its index
    with pytest.raises(InstallError) as err:
        install(conn, Agent(conn), options(env, dead, extras=["filelock"]), facts=facts)
    result = err.value.result
    assert result.action == "failed"
    assert "pip failed" in result.message and "is unchanged" in result.message
    # the cause, not pip's last line ("No matching distribution"), is what the user reads
    assert "could not reach the package index" in result.message
    assert any("Connection refused" in ln or "NewConnectionError" in ln for ln in result.pip_lines)
    assert any(
        "No matching distribution" in ln or "Could not find a version" in ln
        for ln in result.pip_lines
    )
    assert (snapshot(env), generations(env)) == before  # same target, torch imports, aside dir gone
    assert not (env.parent / f".{env.name}.gens" / ".lock").exists()


def test_missing_wheel_leaves_the_env_as_it_was(
    installed: InstallResult, conn, wheelhouse, envs: Path, facts
) -> None:
    env = envs / "main"
    before = snapshot(env), generations(env)
    wheel = next(p.name for p in wheelhouse.glob("torch-*.whl"))
    with PackageIndex(wheelhouse, broken_files={wheel}) as broken:  # listed, but the download 404s
        with pytest.raises(InstallError) as err:
            install(conn, Agent(conn), options(env, broken.url, extras=["filelock"]), facts=facts)
        assert any(
            r.startswith("GET /files/torch-") and r.endswith(" 404") for r in broken.requests
        )
    assert any("404" in ln for ln in err.value.result.pip_lines)
    assert (snapshot(env), generations(env)) == before


def test_failed_verification_leaves_the_env_as_it_was(
    installed, conn, tmp_path: Path, envs: Path, facts
) -> None:
    env = envs / "main"
    before = snapshot(env), generations(env)
    # a "torch 2.13.0" that installs fine but cannot be imported (a broken build)
    build_wheel(
        tmp_path,
        "torch",
        TORCH,
        body='raise ImportError("libtorch_cpu.so: cannot open shared object file")\n',
    )
    build_wheel(tmp_path, "provtest_beta", "1.0")  # a different request than the env's: a rebuild
    with PackageIndex(tmp_path) as bad:
        with pytest.raises(InstallError) as err:  # pip is satisfied, the import is not
            install(conn, Agent(conn), options(env, bad.url, extras=["provtest-beta"]), facts=facts)
    result = err.value.result
    assert "failed verification" in result.message and "libtorch_cpu.so" in result.message
    assert result.verify and result.verify["installed"] is False
    assert (snapshot(env), generations(env)) == before


def test_ctrl_c_during_pip_stops_it_and_leaves_the_env(
    installed, conn, wheelhouse, envs: Path, facts
) -> None:
    env = envs / "main"
    before = snapshot(env), generations(env)
    cancel = threading.Event()
    seen: list[str] = []

    def progress(message: str) -> None:
        seen.append(message)
        if message.startswith(("pip install", "uv pip install")):  # either installer's step
            threading.Timer(1.0, cancel.set).start()

    with PackageIndex(wheelhouse, delay=2.0) as slow:
        with pytest.raises(InstallCancelled):
            install(
                conn,
                Agent(conn),
                options(env, slow.url, extras=["filelock"], cancel=cancel),
                facts=facts,
                progress=progress,
            )
    assert (snapshot(env), generations(env)) == before
    stray = subprocess.run(
        ["pgrep", "-f", str(env.parent / f".{env.name}.gens")], capture_output=True, text=True
    )
    assert stray.stdout.split() == []  # pip and its supervisor are gone


def test_no_plan_is_refused_before_touching_anything(conn, index, tmp_path: Path, facts) -> None:
    with pytest.raises(InstallError) as err:
        install(conn, Agent(conn), options(tmp_path / "e", index.url, torch="1.0"), facts=facts)
    assert err.value.result.action == "refused"
    assert "no torch release" in err.value.result.message
    assert not (tmp_path / "e").exists() and not (tmp_path / ".e.gens").exists()


def test_an_unmanaged_env_is_refused(conn, index, tmp_path: Path, facts) -> None:
    mine = tmp_path / "venv"
    subprocess.run([BASE_PYTHON, "-m", "venv", str(mine)], check=True)
    with pytest.raises(InstallError) as err:
        install(conn, Agent(conn), options(mine, index.url), facts=facts)
    assert err.value.result.action == "refused"
    assert "not an environment provision manages" in err.value.result.message
    assert mine.is_dir() and not mine.is_symlink()


def test_credentials_stay_out_of_output_and_argv(conn, wheelhouse, tmp_path: Path, facts) -> None:
    token = "tok-" + os.urandom(6).hex()
    with PackageIndex(
        wheelhouse, auth=("bob", token), watch_secret=token, hide={"torch"}
    ) as private:
        with pytest.raises(InstallError) as err:
            install(
                conn,
                Agent(conn),
                options(tmp_path / "e", private.url_with_credentials()),
                facts=facts,
            )
        assert "GET /simple/torch/ 404" in private.requests  # authenticated, then not found
        assert private.secret_seen_in == []
    dumped = json.dumps(err.value.result.as_dict()) + str(err.value)
    assert token not in dumped
    assert "bob:****@" in dumped


def test_lock_records_exactly_what_the_install_put_there(
    installed, conn, index, envs: Path, tmp_path: Path, facts
) -> None:
    lock = read_lock(
        write_lock(
            create_lock(conn, Agent(conn), options(envs / "unused", index.url), facts=facts),
            tmp_path / "provision.lock",
        )
    )
    assert lock.package("torch").version == "2.13.0+cpu" and len(lock.package("torch").sha256) == 64
    assert lock.requires["python"] == "3.11" and lock.requires["min_glibc"] == "2.28"
    assert lock.resolved_on["host"] == "localhost" and lock.plan["variant"] == "cpu"
    # the same closure the install resolved (the full --locked reinstall runs on the fleet)
    assert {p.name.lower(): p.version for p in lock.packages} == {
        k.lower(): v for k, v in installed.packages.items()
    }
    assert not (envs / "unused").exists()
    leftovers = subprocess.run(
        ["sh", "-c", "ls -d ~/.cache/provision/lock-* 2>/dev/null"], capture_output=True, text=True
    ).stdout.split()
    assert leftovers == []  # the throwaway resolver venv is gone


def test_a_lock_for_another_python_is_refused(
    installed, conn, index, tmp_path: Path, facts
) -> None:
    lock = read_lock(
        write_lock(
            create_lock(conn, Agent(conn), options(tmp_path / "x", index.url), facts=facts),
            tmp_path / "a.lock",
        )
    )
    lock.requires["python"] = "3.10"
    with pytest.raises(InstallError) as err:
        install(
            conn,
            Agent(conn),
            options(tmp_path / "e", index.url, torch="latest", locked=lock),
            facts=facts,
        )
    assert err.value.result.action == "refused"
    assert "resolved for Python 3.10" in err.value.result.message
    assert not (tmp_path / "e").exists()


def _playbook(tmp_path: Path, task: str, check: bool = False):
    from provision.engine.runner import run_playbook
    from provision.inventory.model import Host

    pb = tmp_path / "site.yml"
    pb.write_text("- hosts: localhost\n  gather_facts: false\n  tasks:\n" + task)
    return run_playbook(pb, hosts=[Host("localhost", local=True)], check=check)


def test_playbook_module_shares_the_install(installed, index, envs: Path, tmp_path: Path) -> None:
    env = envs / "main"
    before = snapshot(env), generations(env)
    task = (
        f"    - name: torch\n      install_torch:\n        torch: '{TORCH}'\n        env: {env}\n"
        f"        python: {BASE_PYTHON}\n        index_url: {index.url}\n      register: t\n"
        "    - debug: {msg: '{{ t.python }} {{ t.action }} {{ provision_torch.variant }}'}\n"
    )
    same = _playbook(tmp_path, task)
    assert same.ok, [(r.task, r.msg) for r in same.results]
    assert same.results[0].status == "ok"  # nothing to do: not "changed"
    assert same.results[-1].result["msg"] == f"{env}/bin/python unchanged cpu"
    # check mode with a different request: it would change, and changes nothing
    check = _playbook(
        tmp_path,
        task.replace("        index_url", "        packages: [filelock]\n        index_url"),
        check=True,
    )
    assert check.ok and check.results[0].status == "changed"
    assert "would install torch 2.13.0+cpu" in check.results[0].msg
    # a failure is the task's, with pip's lines, and the env stays
    with PackageIndex(torch_wheelhouse(), hide={"torch"}) as empty:
        failed = _playbook(
            tmp_path,
            task.replace(index.url, empty.url).replace(
                "        index_url", "        packages: [filelock]\n        index_url"
            ),
        )
    assert failed.results[0].status == "failed"
    assert "pip failed" in failed.results[0].msg
    assert any("torch==2.13.0" in ln for ln in failed.results[0].result["pip_lines"])
    assert (snapshot(env), generations(env)) == before


def test_no_torch_fits_warns_and_goes_on_unless_required(index, tmp_path: Path) -> None:
    """`up --no-bench` (required: false): a torch the index lacks is a warning with the reason,
    changed=false, and the next task runs; required (the bench needs it), it fails with the hint."""
    env = tmp_path / "e"
    task = (
        f"    - name: torch\n      install_torch:\n        torch: '1.0'\n        env: {env}\n"
        f"        python: {BASE_PYTHON}\n        index_url: {index.url}\n"
        "        required: false\n        no_fit_hint: --no-bench\n      register: t\n"
        "    - debug: {msg: 'went on: {{ t.action }}'}\n"
    )
    soft = _playbook(tmp_path, task)
    assert soft.ok, [(r.task, r.msg) for r in soft.results]
    first = soft.results[0]
    assert first.status == "ok" and first.result["changed"] is False
    assert first.result["action"] == "no-fit" and "no torch release" in first.msg
    assert first.result["warnings"][-1] == first.msg
    assert soft.results[-1].result["msg"] == "went on: no-fit"
    hard = _playbook(tmp_path, task.replace("required: false", "required: true"))
    assert hard.results[0].status == "failed" and len(hard.results) == 1
    assert "no torch release" in hard.results[0].msg
    assert hard.results[0].msg.endswith("option: --no-bench")
    assert not env.exists() and not (tmp_path / ".e.gens").exists()


def test_index_url_shows_and_only_its_userinfo_password_is_masked(index, tmp_path: Path) -> None:
    """Messages name the index (`not on URL`): a credential-free URL is shown as given; from
    `user:TOKEN@host` only TOKEN is hidden, in this task's result and the later ones."""
    creds = index.url.replace("http://", "http://puller:s3cr3t-t0ken@")

    def run(url: str):
        task = (
            f"    - name: torch\n      install_torch:\n        torch: '1.0'\n"
            f"        env: {tmp_path / 'e'}\n        python: {BASE_PYTHON}\n"
            f"        index_url: '{url}'\n        required: false\n      register: t\n"
            f"    - debug: {{msg: 'index {url}'}}\n"
        )
        played = _playbook(tmp_path, task)
        assert played.ok, [(r.task, r.msg) for r in played.results]
        return json.dumps([r.result for r in played.results]), played.results[-1].result["msg"]

    text, shown = run(index.url)
    assert shown == f"index {index.url}" and "********" not in text
    text, shown = run(creds)
    assert shown == "index " + creds.replace("s3cr3t-t0ken", "********")
    assert "s3cr3t-t0ken" not in text
