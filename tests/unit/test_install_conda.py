"""conda as rentals ship it (issue 9.4), against a conda-style prefix built in a temporary dir:
PREFIX with conda-meta/ and bin/conda (a stand-in file: no real conda exists for the tests) and
envs/NAME, each a real venv whose site-packages sees this machine's installed torch through a
.pth file — the way /root/miniconda3 holds AutoDL's preinstalled torch.

Facts list the prefixes, envs and their torch (read from metadata, not imported); `up`'s keep
step keeps a working torch found in the active or base env (adding the small packages it lacks,
torch pinned); a managed env can be built from a conda Python; `--conda` is gone, with the remedy.
"""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from provision.agent.facts import python_env
from provision.connection.local import LocalConnection
from provision.errors import ConfigError
from provision.install.installer import InstallOptions, install
from provision.install.mirrors import IndexOptions
from provision.inventory.model import Host
from provision.remote.agent import Agent
from provision.remote.environment import ManagedEnv
from tests.support.package_index import PackageIndex, small_wheelhouse

TORCH_SITE = str(Path(torch.__file__).resolve().parents[1])  # where this machine's torch lives
TORCH_VERSION = importlib.metadata.version("torch")


def conda_style_env(path: Path) -> Path:
    """A venv at `path` that conda would recognise (conda-meta/) and that sees torch — and its
    dependencies and pip, consistent with it — via .pth, as a conda env has them installed."""
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(path)], check=True, timeout=300
    )
    meta = path / "conda-meta"
    meta.mkdir(exist_ok=True)
    (meta / f"python-{sys.version.split()[0]}-h0_0.json").write_text("{}")
    (meta / "history").write_text("")
    [site] = (path / "lib").glob("python3*/site-packages")
    (site / "zz-conda-torch.pth").write_text(TORCH_SITE + "\n")
    return path


@pytest.fixture(scope="module")
def prefix(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """PREFIX (base) with envs/train (the env a rental image activates)."""
    root = tmp_path_factory.mktemp("conda") / "miniconda3"
    conda_style_env(root)
    (root / "bin" / "conda").write_text("#!/bin/sh\necho 'not a real conda' >&2; exit 1\n")
    (root / "bin" / "conda").chmod(0o755)
    conda_style_env(root / "envs" / "train")
    return root


def conda_facts(prefix: Path, home: Path, active: str | None = None) -> dict:
    env = {"CONDA_EXE": str(prefix / "bin" / "conda"), "PATH": ""}
    if active:
        env["CONDA_PREFIX"] = active
    return python_env.conda(env, str(home))


def test_facts_list_prefixes_envs_and_their_torch_from_metadata(
    prefix: Path, tmp_path: Path
) -> None:
    conda = conda_facts(prefix, tmp_path, active=str(prefix / "envs" / "train"))
    assert conda["base"] == str(prefix) and conda["prefixes"][0] == str(prefix)
    by_name = {e["name"]: e for e in conda["envs"]}
    assert set(by_name) >= {"base", "train"}
    for name in ("base", "train"):
        entry = by_name[name]
        assert entry["torch"]["version"] == TORCH_VERSION  # found through the .pth, not imported
        assert entry["torch"]["location"] == TORCH_SITE
        assert entry["executable"].endswith("/bin/python") and Path(entry["executable"]).exists()
        assert entry["python"] == sys.version.split()[0]
    assert by_name["train"]["active"] and not by_name["base"]["active"]
    # an env without torch says so
    bare = tmp_path / "bare"
    conda_style_env(bare)
    (next((bare / "lib").glob("python3*/site-packages")) / "zz-conda-torch.pth").unlink()
    conda = conda_facts(prefix, tmp_path, active=str(bare))
    assert {e["path"]: e["torch"] for e in conda["envs"]}[str(bare)] is None


def cpu_facts(conda: dict) -> dict:
    """A CPU host's facts with these conda envs (so the plan means the same on a GPU server)."""
    from provision.remote.facts import gather_facts

    facts = gather_facts(Agent(LocalConnection()))
    python = dict(facts.get("python") or {}, conda=conda)
    return dict(facts, gpus=[], nvidia={}, python=python)


def host_without_torch(tmp_path: Path) -> LocalConnection:
    """The host's python3 has no torch (a bare venv), as on AutoDL where torch is in conda."""
    bare = tmp_path / "system"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True, timeout=300
    )
    return LocalConnection(Host(name="localhost", local=True, python=str(bare / "bin" / "python")))


def test_up_keeps_the_torch_of_the_active_conda_env(prefix: Path, tmp_path: Path) -> None:
    conn = host_without_torch(tmp_path)
    facts = cpu_facts(conda_facts(prefix, tmp_path, active=str(prefix / "envs" / "train")))
    wheels = small_wheelhouse(tmp_path / "wheels")
    with PackageIndex(wheels) as index:
        options = InstallOptions(
            torch="any", keep_base=True, env=str(tmp_path / "managed"), extras=["provtest-alpha"],
            index=IndexOptions(index_url=index.url), pip_cache="off",
        )  # fmt: skip
        result = install(conn, Agent(conn), options, facts=facts)
    env_python = prefix / "envs" / "train" / "bin" / "python"
    assert result.action == "unchanged", result.message
    assert Path(result.python).parent == env_python.parent, (result.message, result.warnings)
    assert f"torch {TORCH_VERSION}" in result.message and "added provtest-alpha" in result.message
    assert result.verify["torch"]["version"] == TORCH_VERSION
    assert not (tmp_path / "managed").exists()  # no multi-GB managed env for nothing
    # the small package landed beside the kept torch, and torch is the same one
    out = subprocess.run(
        [str(env_python), "-c", "import provtest_alpha, torch, json; print(json.dumps([provtest_alpha.__version__, torch.__version__, torch.__file__]))"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    version, torch_version, torch_file = json.loads(out.stdout)
    assert version == "2.0" and torch_version == TORCH_VERSION
    assert torch_file.startswith(TORCH_SITE)


def test_base_is_kept_when_no_env_is_active_and_a_named_python_wins(
    prefix: Path, tmp_path: Path
) -> None:
    conn = host_without_torch(tmp_path)
    facts = cpu_facts(conda_facts(prefix, tmp_path))
    options = InstallOptions(torch="any", keep_base=True, env=str(tmp_path / "managed"))
    result = install(conn, Agent(conn), options, facts=facts)
    assert result.action == "unchanged" and Path(result.python).parent == prefix / "bin"
    # --python names the interpreter: the conda envs are not looked at (and check mode builds nothing)
    named = InstallOptions(
        torch="any", keep_base=True, env=str(tmp_path / "managed"), check_only=True,
        python=conn.host.python, index=IndexOptions(index_url="http://127.0.0.1:9/simple/"),
    )  # fmt: skip
    result = install(conn, Agent(conn), named, facts=facts)
    assert result.action == "would-install", result.message


def test_a_managed_env_can_be_built_from_a_conda_python(prefix: Path, tmp_path: Path) -> None:
    env = ManagedEnv(LocalConnection(), str(tmp_path / "envs" / "provision"))
    generation = env.new_generation_path()
    env.create_venv(str(prefix / "bin" / "python"), generation)
    out = subprocess.run(
        [env.python_of(generation), "-c", "import sys; print(sys.version.split()[0])"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.stdout.strip() == sys.version.split()[0]
    # never --system-site-packages: the conda env's torch is not visible in the managed env
    seen = subprocess.run(
        [env.python_of(generation), "-c", "import torch"], capture_output=True, timeout=120
    )
    assert seen.returncode != 0


def test_conda_create_is_gone_and_says_what_to_do_instead(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"--python /root/miniconda3/bin/python"):
        InstallOptions(conda="torch21").validate()
    run = subprocess.run(
        [sys.executable, "-m", "provision", "install", "localhost", "--conda", "torch21", "--no-project"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )  # fmt: skip
    assert (
        run.returncode == 2 and "--conda torch21: conda environments are not created" in run.stderr
    )
