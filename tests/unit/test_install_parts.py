"""The install pieces that need no torch: mirrors and index choice, pip command lines (run for
real through sh), lock files, project files, probing, wheel tags, the CLI's option handling."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from provision.connection.local import LocalConnection
from provision.errors import ConfigError
from provision.install.installer import InstallOptions, requirements_for
from provision.install.lockfile import (
    Lock,
    LockedPackage,
    min_glibc,
    packages_from_report,
    platform_problems,
    read_lock,
    write_lock,
)
from provision.install.mirrors import (
    PRESETS,
    IndexOptions,
    build_index_config,
    index_kind,
    mask_url,
    secrets_of,
    torch_index_candidates,
    url_kind,
)
from provision.install.pip import install_command, relevant_lines
from provision.install.planning import Plan, PythonInfo
from provision.install.project import find_project, load_project, python_for
from tests.support.package_index import PackageIndex

# -- mirrors ---------------------------------------------------------------------------------


def test_presets_name_a_pypi_mirror_and_known_torch_wheel_mirrors() -> None:
    assert set(PRESETS) == {"pypi", "tuna", "aliyun", "ustc", "huawei", "tencent"}
    for preset in PRESETS.values():
        assert preset.pypi.startswith("https://") and preset.source
        assert url_kind(preset.pypi) == "pypi"
        for m in preset.torch_wheels:
            assert "{variant}" in m.url and m.usage in ("index", "find-links")


@pytest.mark.parametrize(
    ("url", "kind"),
    [
        ("https://pypi.tuna.tsinghua.edu.cn/simple", "pypi"),
        ("https://mirrors.aliyun.com/pypi/simple/", "pypi"),
        ("https://pypi.org/simple", "pypi"),
        ("https://download.pytorch.org/whl/cu126", "pytorch"),
        ("https://mirrors.aliyun.com/pytorch-wheels/cu126/", "pytorch"),
        ("https://mirrors.nju.edu.cn/pytorch/whl/cu126", "pytorch"),
        ("https://devpi.corp.example/root/pypi/+simple/", "custom"),
        ("http://127.0.0.1:8080/simple/", "custom"),
    ],
)
def test_index_kinds(url: str, kind: str) -> None:
    assert url_kind(url) == kind


def test_a_pypi_mirror_as_the_only_index_tells_the_resolver_pypi() -> None:
    assert index_kind(IndexOptions(index_url="https://pypi.tuna.tsinghua.edu.cn/simple")) == "pypi"
    assert (
        index_kind(IndexOptions(mirror="tuna")) == "pytorch"
    )  # torch from its wheel mirror / pytorch.org
    assert index_kind(IndexOptions()) == "pytorch"


def test_preset_candidates_try_the_mirror_then_pytorch_org() -> None:
    cands = torch_index_candidates(IndexOptions(mirror="aliyun"), "cu126")
    assert cands == [
        ("https://mirrors.aliyun.com/pytorch-wheels/cu126/", "find-links"),
        ("https://download.pytorch.org/whl/cu126", "index"),
    ]
    assert torch_index_candidates(IndexOptions(mirror="huawei"), "cpu") == [
        ("https://download.pytorch.org/whl/cpu", "index")
    ]
    assert torch_index_candidates(IndexOptions(index_url="https://x/simple"), "cpu") == []


def test_index_config_for_a_preset() -> None:
    opts = IndexOptions(mirror="aliyun")
    flat = build_index_config(
        opts,
        plan_index_url=None,
        variant="cu126",
        reachable_torch_index=("https://mirrors.aliyun.com/pytorch-wheels/cu126/", "find-links"),
    )
    assert flat.index_url == "https://mirrors.aliyun.com/pypi/simple/"
    assert flat.find_links == ["https://mirrors.aliyun.com/pytorch-wheels/cu126/"]
    assert flat.kind == "pytorch" and not flat.trusted_hosts
    official = build_index_config(
        opts,
        plan_index_url=None,
        variant="cu126",
        reachable_torch_index=("https://download.pytorch.org/whl/cu126", "index"),
    )
    assert official.index_url == "https://download.pytorch.org/whl/cu126"
    assert official.extra_index_urls == ["https://mirrors.aliyun.com/pypi/simple/"]
    pypi = build_index_config(
        opts,
        plan_index_url=None,
        variant="cu130",
        reachable_torch_index=None,
        fallback_to_pypi=True,
    )
    assert pypi.index_url == "https://mirrors.aliyun.com/pypi/simple/" and pypi.kind == "pypi"


def test_plain_http_index_gets_trusted_host_and_a_warning() -> None:
    cfg = build_index_config(
        IndexOptions(
            index_url="http://10.0.0.5:3141/simple/",
            extra_index_urls=["http://u:p@cache.lan/simple"],
        ),
        plan_index_url=None,
        variant="cpu",
        reachable_torch_index=None,
    )
    assert cfg.trusted_hosts == ["10.0.0.5:3141", "cache.lan"]
    assert len(cfg.warnings) == 2 and "plain http" in cfg.warnings[0]
    assert "u:p@" not in " ".join(cfg.warnings) and "u:****@cache.lan" in cfg.warnings[1]


def test_mask_and_scrub_credentials() -> None:
    assert (
        mask_url("https://user:tok3n@host.example/simple")
        == "https://user:****@host.example/simple"
    )
    assert mask_url("https://tok3nonly@host.example/simple") == "https://****@host.example/simple"
    assert mask_url("https://host.example/simple") == "https://host.example/simple"
    assert secrets_of(["https://user:tok%2F3n@h/s"]) == ["user:tok%2F3n", "tok%2F3n", "tok/3n"]


@pytest.mark.parametrize(
    ("opts", "message"),
    [
        (IndexOptions(mirror="tuna", index_url="https://x/simple"), "pick one"),
        (IndexOptions(mirror="nope"), "unknown --mirror 'nope'"),
        (IndexOptions(index_url="ftp://x/simple"), "not an http"),
        (IndexOptions(proxy="not a url"), "not a proxy URL"),
    ],
)
def test_bad_index_options_are_named(opts: IndexOptions, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        opts.validate()


# -- pip command lines -------------------------------------------------------------------------


def test_hostile_values_stay_data_in_the_pip_command(tmp_path: Path) -> None:
    """Run the generated script for real with a fake `python` that prints its argv."""
    fake = tmp_path / "python"
    fake.write_text(
        '#!/bin/sh\nfor a in "$@"; do printf "%s\\n" "$a"; done\nenv | grep -E "^PIP_(INDEX|CONFIG)" | sort\n'
    )
    fake.chmod(0o755)
    marker = tmp_path / "PWNED"
    evil = f"pkg; touch {marker} $(touch {marker}) `touch {marker}`"
    cfg = build_index_config(
        IndexOptions(index_url="https://u:s3cr3t@idx.example/simple"),
        plan_index_url=None,
        variant="cpu",
        reachable_torch_index=None,
    )
    cmd = install_command(
        str(fake), [evil, "torch==2.13.0+cpu"], cfg, requirement_files=[f"{tmp_path}/r q.txt"]
    )
    run = LocalConnection().run(
        cmd.script(), stdin=cmd.stdin, env={"PIP_FIND_LINKS": "/opt/wheels"}
    )
    assert run.ok, run.stderr
    lines = run.stdout.splitlines()
    assert evil in lines and "torch==2.13.0+cpu" in lines and f"{tmp_path}/r q.txt" in lines
    assert not marker.exists()
    assert (
        "PIP_INDEX_URL=https://u:s3cr3t@idx.example/simple" in lines
    )  # reached pip via the env...
    assert "PIP_CONFIG_FILE=/dev/null" in lines
    assert not any(ln.startswith("PIP_FIND_LINKS") for ln in lines)  # ...the host's pip env did not
    assert "s3cr3t" not in cmd.script() and "s3cr3t" not in " ".join(cmd.argv)
    assert "s3cr3t" not in cmd.display


def test_relevant_lines_keep_errors_and_the_last_retry() -> None:
    output = "\n".join(
        ["Looking in indexes: https://user:****@idx/simple", "Collecting torch==2.13.0"]
        + [
            f"WARNING: Retrying (Retry(total={n})) after connection broken by 'ReadTimeoutError'"
            for n in (2, 1, 0)
        ]
        + [
            "ERROR: Could not find a version that satisfies the requirement torch==2.13.0 (from versions: none)",
            "ERROR: No matching distribution found for torch==2.13.0",
            "Traceback noise",
            "  more noise",
        ]
    )
    lines = relevant_lines(output, ["s3cr3t"])
    assert lines[0].startswith("WARNING: Retrying (Retry(total=0))")
    assert lines[-1] == "ERROR: No matching distribution found for torch==2.13.0"
    assert not any("Collecting" in ln or "noise" in ln for ln in lines)
    assert relevant_lines("one\ntwo\n") == ["one", "two"]  # nothing recognised: the tail


def test_pins_carry_the_variant_only_on_a_pytorch_index() -> None:
    plan = Plan(torch="2.5.1", variant="cu124", torchvision="0.20.1", torchaudio="2.5.1")
    assert requirements_for(plan, ["torchvision"], ["numpy"], "pytorch") == [
        "torch==2.5.1+cu124",
        "torchvision==0.20.1+cu124",
        "numpy",
    ]
    assert requirements_for(plan, [], [], "pypi") == ["torch==2.5.1"]
    with pytest.raises(ConfigError, match="torchaudio"):
        requirements_for(Plan(torch="2.13.0", variant="cpu"), ["torchaudio"], [], "custom")


def test_platform_tags_follow_glibc() -> None:
    tags = PythonInfo("python3", "3.11.2", "x86_64", "2.36").platform_tags()
    assert tags[0] == "manylinux_2_36_x86_64" and "manylinux_2_28_x86_64" in tags
    assert "manylinux2014_x86_64" in tags and tags[-1] == "linux_x86_64"
    assert (
        "manylinux_2_28_x86_64"
        not in PythonInfo("python3", "3.8.10", "x86_64", "2.27").platform_tags()
    )
    assert PythonInfo("python3", "3.11.2", "x86_64", None).abi == "cp311"


# -- lock files ----------------------------------------------------------------------------------


def _lock() -> Lock:
    return Lock(
        plan={"torch": "2.13.0", "variant": "cpu"},
        requires={"python": "3.11", "machine": "x86_64", "variant": "cpu", "min_glibc": "2.28"},
        packages=[
            LockedPackage(
                "torch",
                "2.13.0+cpu",
                "a" * 64,
                "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl",
                "https://download.pytorch.org/whl/cpu/torch-2.13.0%2Bcpu-cp311-cp311-manylinux_2_28_x86_64.whl",
            )
        ],
        index={"index_url": "https://download.pytorch.org/whl/cpu"},
    )


def test_lock_round_trip_and_requirements(tmp_path: Path) -> None:
    path = write_lock(_lock(), tmp_path / "provision.lock")
    text = path.read_text()
    assert text.startswith("# provision.lock") and "lock_version: 1" in text
    lock = read_lock(path)
    assert lock.requirements_text() == f"torch==2.13.0+cpu --hash=sha256:{'a' * 64}\n"
    assert lock.package("TORCH").filename.startswith("torch-2.13.0+cpu")


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (
            lambda t: t.replace("lock_version: 1", "lock_version: 7"),
            r"provision.lock:\d+: lock_version 7",
        ),
        (lambda t: t.replace("a" * 64, "zz"), r"provision.lock:\d+: sha256 of torch is not 64 hex"),
        (lambda t: t.replace("requires:", "requirez:"), r"`requires` missing"),
        (lambda t: t + "  - [unclosed\n", r"provision.lock:\d+: not valid YAML"),
    ],
)
def test_bad_lock_files_name_file_and_line(tmp_path: Path, mutate, message: str) -> None:
    path = write_lock(_lock(), tmp_path / "provision.lock")
    path.write_text(mutate(path.read_text()))
    with pytest.raises(ConfigError, match=message):
        read_lock(path)


def test_lock_platform_checks() -> None:
    lock = _lock()
    assert platform_problems(lock, "3.11.2", "x86_64", "2.36") == []
    problems = platform_problems(lock, "3.10.12", "aarch64", "2.27")
    assert len(problems) == 3
    assert "resolved for Python 3.11" in problems[0] and "cp311" in problems[0]
    assert "glibc >= 2.28" in problems[2]


def test_min_glibc_of_wheels() -> None:
    assert (
        min_glibc(["a-1-py3-none-any.whl", "torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl"])
        == "2.28"
    )
    assert (
        min_glibc(
            ["m-3-cp311-cp311-manylinux2014_x86_64.manylinux_2_17_x86_64.manylinux_2_28_x86_64.whl"]
        )
        == "2.17"
    )
    assert min_glibc(["a-1-py3-none-any.whl"]) is None


def test_packages_from_pip_report() -> None:
    report = {
        "version": "1",
        "install": [
            {
                "metadata": {"name": "torch", "version": "2.13.0+cpu"},
                "download_info": {
                    "url": "http://i/files/torch-2.13.0%2Bcpu-cp311-cp311-linux_x86_64.whl",
                    "archive_info": {"hash": "sha256=" + "b" * 64},
                },
            },
            {
                "metadata": {"name": "filelock", "version": "3.0"},
                "download_info": {
                    "url": "http://i/f.whl",
                    "archive_info": {"hashes": {"sha256": "c" * 64}},
                },
            },
        ],
    }
    pkgs = packages_from_report(report)
    assert [(p.name, p.sha256[0]) for p in pkgs] == [("filelock", "c"), ("torch", "b")]
    assert pkgs[1].filename == "torch-2.13.0+cpu-cp311-cp311-linux_x86_64.whl"


# -- project files -------------------------------------------------------------------------------


def test_project_file(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_text("numpy\n")
    (tmp_path / "provision.yml").write_text(
        'python: "3.11"\ntorch: "2.5"\nwith: [torchvision]\npackages: [numpy, "transformers==4.44.2"]\n'
        "requirements: requirements.txt\nmirror: tuna\ndatasets:\n  - {name: d, source: ./d}\n"
    )
    (tmp_path / "sub").mkdir()
    found = find_project(tmp_path / "sub")
    assert found == tmp_path / "provision.yml"
    p = load_project(found)
    assert (p.python, p.torch, p.with_, p.mirror) == ("3.11", "2.5", ["torchvision"], "tuna")
    assert p.packages == ["numpy", "transformers==4.44.2"]
    assert p.requirements == tmp_path / "requirements.txt"
    assert p.datasets == [{"name": "d", "source": "./d"}]
    assert (
        python_for(p.python) == "python3.11"
        and python_for("/opt/py/bin/python") == "/opt/py/bin/python"
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "torch: '2.5'\nmirorr: tuna\n",
            r"provision.yml:2: unknown key 'mirorr' \(did you mean 'mirror'\?\)",
        ),
        (
            "torch: '2.5'\n\nwith: [torchtext]\n",
            r"provision.yml:3: 'with' takes torchvision, torchaudio",
        ),
        ("python: 3.10\n", r"provision.yml:1: quote the Python version"),
        ("mirror: nowhere\n", r"provision.yml:1: unknown mirror 'nowhere'"),
        (
            "requirements: missing.txt\n",
            r"provision.yml:1: 'requirements': .*missing.txt does not exist",
        ),
        ("packages: {a: 1}\n", r"provision.yml:1: 'packages' must be"),
        (
            "mirror: tuna\nindex_url: https://x/simple\n",
            r"provision.yml:2: give either 'mirror' or 'index_url'",
        ),
        ("- just\n- a list\n", r"provision.yml:1: provision.yml is a mapping"),
    ],
)
def test_bad_project_files_name_file_and_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "provision.yml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_project(path)


def test_install_options_validation(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--with takes"):
        InstallOptions(with_=["torchtext"]).validate()
    with pytest.raises(ConfigError, match="exactly the lock"):
        InstallOptions(locked=_lock(), torch="2.5").validate()
    with pytest.raises(ConfigError, match="no such file on the controller"):
        InstallOptions(requirements=[str(tmp_path / "nope.txt")]).validate()


# -- the CLI -------------------------------------------------------------------------------------


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    import sys

    root = Path(__file__).resolve().parents[2]
    return subprocess.run(
        [sys.executable, "-m", "provision", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**__import__("os").environ, "PYTHONPATH": str(root), "COLUMNS": "1000"},
        timeout=600,
    )


def test_cli_usage_errors_exit_2(tmp_path: Path) -> None:
    run = _cli(
        "install", "localhost", "--mirror", "tuna", "--index-url", "https://x/simple", cwd=tmp_path
    )
    assert run.returncode == 2 and "pick one" in run.stderr
    (tmp_path / "provision.yml").write_text("torhc: '2.5'\n")
    run = _cli("install", "localhost", cwd=tmp_path)
    assert run.returncode == 2 and "provision.yml:1: unknown key 'torhc'" in run.stderr
    run = _cli("lock", "--no-project", cwd=tmp_path)
    assert run.returncode == 2 and "--offline" in run.stderr


def test_cli_offline_lock_against_the_test_index(tmp_path: Path) -> None:
    from tests.support.package_index import torch_wheelhouse

    with PackageIndex(torch_wheelhouse()) as index:
        run = _cli(
            "lock",
            "--offline",
            "--python",
            "3.11",
            "--torch",
            "2.13",
            "--index-url",
            index.url,
            "-o",
            str(tmp_path / "p.lock"),
            "--json",
            "--no-project",
            cwd=tmp_path,
        )
        assert run.returncode == 0, run.stderr
        doc = json.loads(run.stdout)
        assert doc["plan"]["variant"] == "cpu" and doc["resolved_on"]["host"] is None
        lock = read_lock(tmp_path / "p.lock")
        assert lock.package("torch").version == "2.13.0+cpu"
        assert {p.name.lower() for p in lock.packages} >= {
            "torch",
            "sympy",
            "mpmath",
            "jinja2",
            "markupsafe",
        }
        assert lock.requires == {
            "python": "3.11",
            "machine": "x86_64",
            "variant": "cpu",
            "min_glibc": "2.28",
        }
        # a GPU description is checked against the tables: a K80 with driver 470 cannot run torch 2.13
        run = _cli(
            "lock",
            "--offline",
            "--python",
            "3.11",
            "--torch",
            "2.13",
            "--gpu",
            "Tesla K80",
            "--driver",
            "470.256.02",
            "--index-url",
            index.url,
            "-o",
            str(tmp_path / "k.lock"),
            "--no-project",
            cwd=tmp_path,
        )
        assert run.returncode == 1 and not (tmp_path / "k.lock").exists()
        assert "no PyTorch build matches torch 2.13 on Tesla K80 (sm_37)" in run.stderr
        assert "option: use torch 2.7.1+cu118" in run.stderr
        # an RTX 3090 needs a CUDA build; an index that only has +cpu must not be locked for it
        run = _cli(
            "lock",
            "--offline",
            "--python",
            "3.11",
            "--torch",
            "2.13",
            "--gpu",
            "NVIDIA GeForce RTX 3090",
            "--driver",
            "570.86.10",
            "--index-url",
            index.url,
            "-o",
            str(tmp_path / "g.lock"),
            "--no-project",
            cwd=tmp_path,
        )
        assert run.returncode == 2 and not (tmp_path / "g.lock").exists()
        # the index is asked first: what it has is named, before pip resolves anything
        assert "fits this host, but " + index.url in run.stderr
        assert "has no build that fits (it has torch 2.13.0+cpu)" in run.stderr


def test_cli_options_over_the_project_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from provision.cli.install import build_options
    from provision.cli.main import build_parser

    write_lock(_lock(), tmp_path / "team.lock")
    (tmp_path / "provision.yml").write_text(
        'torch: "2.5"\nwith: [torchvision]\npackages: [numpy]\nmirror: tuna\nlocked: team.lock\n'
        "env: ~/.provision/envs/proj\n"
    )
    monkeypatch.chdir(tmp_path)
    parse = build_parser().parse_args
    options, project = build_options(parse(["install", "h"]))  # the lock is the request
    assert project.path == tmp_path / "provision.yml"
    assert options.locked is not None and options.torch == "latest" and options.with_ == []
    assert options.index.mirror == "tuna" and options.env == "~/.provision/envs/proj"
    options, _ = build_options(
        parse(["install", "h", "--torch", "2.6", "--index-url", "https://x/simple"])
    )
    assert (
        options.locked is None and options.torch == "2.6"
    )  # a --torch means: resolve, not the lock
    assert options.index.mirror is None and options.index.index_url == "https://x/simple"
    assert options.with_ == ["torchvision"] and options.extras == ["numpy"]
    options, _ = build_options(parse(["install", "h", "--no-project"]))
    assert options.locked is None and options.torch == "latest" and options.index.mirror is None
