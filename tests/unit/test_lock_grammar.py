"""Lock files and pip reports are data with a grammar (issue 29, defect 1): a package's name is a
PEP 508 name, its version one PEP 440 version, its hash hex, its file name a plain wheel name —
a direct reference (`evil @ https://…`), an option (`-e`, `-r`, `--index-url`), a marker, a path
or a URL in any of them is refused with the file and line (lock) or the entry (a host's report),
before a requirements line for the controller's `pip download` is ever written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from provision.errors import ConfigError
from provision.install.lockfile import LockedPackage, PinError, packages_from_report, read_lock
from provision.install.pins import pin_problem
from provision.install.relay import RelayError, fetch

SHA = "a" * 64
WHEEL = "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"

NAMES = [
    "evil @ https://evil.example/evil-1.0.tar.gz#",
    "evil@file:///tmp/evil-1.0.tar.gz",
    "-e git+https://evil.example/evil.git#egg=evil",
    "--index-url=https://evil.example/simple",
    "-r /etc/shadow",
    'torch; os_name == "posix"',
    "torch[extra]",
    "../../evil",
    "https://evil.example/evil-1.0-py3-none-any.whl",
    "torch\n--extra-index-url https://evil.example/",
]
VERSIONS = ["2.0 --index-url https://evil.example/", ">=1.0", "1.*", "1.0; python_version>'3'", "1.0 @ https://x",
            " 1.0", "1.0\n-e ."]


def _lock_text(name: str = "torch", version: str = "2.13.0+cpu", filename: str = WHEEL) -> str:
    return yaml.safe_dump({
        "lock_version": 1, "plan": {"torch": "2.13.0", "variant": "cpu"},
        "requires": {"python": "3.11", "machine": "x86_64"},
        "packages": [
            {"name": "filelock", "version": "3.0", "filename": "filelock-3.0-py3-none-any.whl", "sha256": "b" * 64},
            {"name": name, "version": version, "filename": filename, "sha256": SHA},
        ],
    }, sort_keys=False)


def _line_of(text: str, key: str, nth: int) -> int:
    return [i + 1 for i, line in enumerate(text.splitlines()) if line.lstrip("- ").startswith(f"{key}:")][nth]


@pytest.mark.parametrize("name", NAMES)
def test_a_lock_names_only_packages(tmp_path: Path, name: str) -> None:
    text = _lock_text(name=name)
    path = tmp_path / "provision.lock"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        read_lock(path)
    assert str(err.value).startswith(f"{path}:{_line_of(text, 'name', 1)}: name "), err.value
    assert "not a package name" in str(err.value)


@pytest.mark.parametrize("version", VERSIONS)
def test_a_lock_pins_one_version(tmp_path: Path, version: str) -> None:
    text = _lock_text(version=version)
    path = tmp_path / "provision.lock"
    path.write_text(text)
    with pytest.raises(ConfigError, match=re.escape(f"{path}:{_line_of(text, 'version', 1)}: 'torch': version")):
        read_lock(path)


@pytest.mark.parametrize("filename", ["../../etc/evil.whl", "/tmp/x.whl", ".hidden.whl", "a\x00.whl"])
def test_a_lock_file_name_is_one_name(tmp_path: Path, filename: str) -> None:
    path = tmp_path / "provision.lock"
    path.write_text(_lock_text(filename=filename))
    with pytest.raises(ConfigError, match="is not one plain file name"):
        read_lock(path)


def test_a_good_lock_still_reads(tmp_path: Path) -> None:
    path = tmp_path / "provision.lock"
    path.write_text(_lock_text())
    lock = read_lock(path)
    assert lock.requirements_text().splitlines()[1] == f"torch==2.13.0+cpu --hash=sha256:{SHA}"


def _report(name: str, version: str = "1.0", url: str = "https://files.example/x-1.0-py3-none-any.whl") -> dict:
    return {"version": "1", "install": [
        {"metadata": {"name": "torch", "version": "2.13.0"},
         "download_info": {"url": "https://files.example/torch-2.13.0-py3-none-any.whl",
                           "archive_info": {"hashes": {"sha256": SHA}}}},
        {"metadata": {"name": name, "version": version},
         "download_info": {"url": url, "archive_info": {"hashes": {"sha256": SHA}}}},
    ]}


@pytest.mark.parametrize("name", NAMES)
def test_a_hosts_pip_report_names_only_packages(name: str) -> None:
    """`provision lock gpu1` copies gpu1's own report: its names are the host's word."""
    with pytest.raises(PinError, match=re.escape("gpu1's pip report: install[1]: name ")):
        packages_from_report(_report(name), "gpu1's pip report")


@pytest.mark.parametrize("version", VERSIONS)
def test_a_hosts_pip_report_pins_one_version(version: str) -> None:
    with pytest.raises(PinError, match=r"install\[1\]: x: version"):
        packages_from_report(_report("x", version))


@pytest.mark.parametrize("report", [[], "install", {"install": "x"}, {"install": [["a"]]}])
def test_a_report_of_the_wrong_shape_is_refused(report: object) -> None:
    with pytest.raises(PinError):
        packages_from_report(report)  # type: ignore[arg-type]


def test_no_requirement_line_from_a_bad_package() -> None:
    with pytest.raises(PinError, match="not a package name"):
        LockedPackage("evil @ https://evil.example/e.tar.gz#", "1.0", SHA).requirement_line()
    assert LockedPackage("Torch_Vision.x", "0.20.1+cu124", SHA).requirement_line().startswith("Torch_Vision.x==0.20.1+cu124 ")


def test_the_relay_downloads_wheels_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An sdist would be built (its setup.py run) on the controller: refused before pip runs."""
    from provision.install.mirrors import IndexConfig
    from provision.install.planning import PythonInfo

    monkeypatch.setenv("PROVISION_HOME", str(tmp_path / "state"))
    monkeypatch.setattr("provision.install.relay._pip", lambda *a, **k: pytest.fail("pip ran"))
    sdist = LockedPackage("evil", "1.0", SHA, "evil-1.0.tar.gz", "https://evil.example/evil-1.0.tar.gz")
    with pytest.raises(RelayError, match=r"wheels only[\s\S]*evil-1.0.tar.gz"):
        fetch([sdist], IndexConfig(None), PythonInfo("python3", "3.11.2", "x86_64", "2.36"))


def test_pin_grammar_accepts_real_pins() -> None:
    for name, version in (("torch", "2.5.1+cu124"), ("nvidia-cudnn-cu12", "9.1.0.70"), ("a", "1!2.0rc1.post3.dev4"),
                          ("zope.interface", "6.0"), ("Pillow", "10.4.0")):
        assert pin_problem(name, version, SHA) is None, (name, version)
