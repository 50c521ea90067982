"""The tests' wheelhouse holds on any machine (tests/support/package_index.py): a wheel rebuilt
from an installed distribution installs with pip and imports, pure or with compiled code, and
carries the installed distribution's own tags."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.support.package_index import (
    INSTALLED_TORCH,
    TORCH_REQUIREMENT,
    repack_installed,
    wheel_requirements,
)


def _install_and_import(wheel: Path, target: Path, module: str) -> str:
    pip = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-index", "--no-deps", "--no-compile",
         "--target", str(target), str(wheel)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert pip.returncode == 0, pip.stderr[-2000:]
    probe = subprocess.run(
        [sys.executable, "-S", "-c", f"import sys; sys.path.insert(0, {str(target)!r}); import {module}; "
         f"print({module}.__file__)"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert probe.returncode == 0, probe.stderr[-2000:]
    return probe.stdout.strip()


@pytest.mark.parametrize(("dist", "module"), [("filelock", "filelock"), ("markupsafe", "markupsafe")])
def test_repacked_installed_distribution_installs_and_imports(tmp_path: Path, dist: str, module: str) -> None:
    pytest.importorskip(module)
    wheel = repack_installed(dist, tmp_path)
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        record = next(n for n in names if n.endswith(".dist-info/RECORD"))
        wheel_file = zf.read(record.replace("RECORD", "WHEEL")).decode()
        assert zf.testzip() is None
    assert not any(n.endswith((".dist-info/INSTALLER", ".dist-info/direct_url.json")) for n in names)
    # the file name's tags are the installed WHEEL's own
    tag = wheel.name.removesuffix(".whl").split("-", 2)[2]
    for line in wheel_file.splitlines():
        if line.startswith("Tag:"):
            py, abi, plat = line.split(":", 1)[1].strip().split("-")
            assert py in tag.split("-")[0].split(".") and plat in tag.split("-")[2].split(".")
    where = _install_and_import(wheel, tmp_path / "site", module)
    assert where.startswith(str(tmp_path / "site")), where


def test_torch_requirement_is_the_installed_torch() -> None:
    if INSTALLED_TORCH is None:
        pytest.skip("no torch installed")
    import torch

    assert TORCH_REQUIREMENT == f"torch=={torch.__version__}"


def test_wheel_requirements_apply_markers_for_this_interpreter(tmp_path: Path) -> None:
    from tests.support.package_index import build_wheel

    wheel = build_wheel(tmp_path, "provtest_marks", "1.0", requires=[
        "always", f"this ; python_version == '{sys.version_info.major}.{sys.version_info.minor}'",
        "never ; python_version < '3'", "extra_only ; extra == 'x'"])  # fmt: skip
    assert wheel_requirements(wheel) == ["always", f'this; python_version == "{sys.version_info.major}.{sys.version_info.minor}"']
