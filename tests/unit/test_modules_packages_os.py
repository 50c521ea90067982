"""dnf/yum and package. There is no RHEL here, so these run the modules' real scripts on this
machine with a fake `rpm` and `dnf` first on PATH (a temp dir): they prove the queries and the
command lines (what would be installed, with which options), not dnf itself."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from builtin_support import ok, results, run_tasks

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="dnf refuses to run without root, as the module does")

FAKE_RPM = """#!/bin/sh
# installed packages: one name per line in $FAKE_DB
last=""; for a in "$@"; do last=$a; done
grep -qx -- "$last" "$FAKE_DB"
"""
FAKE_DNF = """#!/bin/sh
echo "$*" >> "$FAKE_LOG"
case " $* " in
  *" list --upgrades "*) for a in "$@"; do last=$a; done; grep -qx -- "$last" "$FAKE_UPGRADES" && echo "$last.x86_64 2.0 repo"; exit 0 ;;
  *" install "*) for a in "$@"; do case $a in -*|install) ;; *) echo "$a" >> "$FAKE_DB" ;; esac; done ;;
  *" remove "*) for a in "$@"; do case $a in -*|remove) ;; *) grep -vx -- "$a" "$FAKE_DB" > "$FAKE_DB.n"; mv "$FAKE_DB.n" "$FAKE_DB" ;; esac; done ;;
esac
exit 0
"""


@pytest.fixture
def fake_rhel(tmp_path: Path) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("rpm", FAKE_RPM), ("dnf", FAKE_DNF)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    # only the tools the scripts use: no apt-get on this PATH, so `package` must pick dnf
    for tool in ("sh", "grep", "id", "cat", "mv", "tr", "sed", "tail", "head"):
        found = shutil.which(tool)
        assert found, tool
        os.symlink(found, bin_dir / tool)
    (tmp_path / "db").write_text("bash\ncurl\n")
    (tmp_path / "upgrades").write_text("curl\n")
    return {
        "PATH": str(bin_dir),
        "FAKE_DB": str(tmp_path / "db"),
        "FAKE_LOG": str(tmp_path / "log"),
        "FAKE_UPGRADES": str(tmp_path / "upgrades"),
    }


def _env_block(env: dict[str, str]) -> str:
    return "  environment:\n" + "".join(f"    {k}: {v}\n" for k, v in env.items())


def test_dnf_installs_only_what_is_missing(tmp_path: Path, fake_rhel: dict[str, str]) -> None:
    task = "- dnf: {name: [bash, htop, nvtop], state: present, enablerepo: epel, install_weak_deps: no}\n" + _env_block(fake_rhel)
    check = ok(run_tasks(tmp_path, task, check=True))
    assert check.results[0].status == "changed" and not (tmp_path / "log").exists()
    first = ok(run_tasks(tmp_path, task))
    (status, reg), = results(first)
    assert status == "changed" and reg["results"] == ["Installed: htop", "Installed: nvtop"]
    assert (tmp_path / "log").read_text().splitlines() == [
        "-y --enablerepo=epel --setopt=install_weak_deps=False install htop nvtop"
    ]
    second = ok(run_tasks(tmp_path, task))
    assert second.results[0].status == "ok" and second.results[0].result["msg"] == "Nothing to do"


def test_yum_latest_absent_and_package_dispatch(tmp_path: Path, fake_rhel: dict[str, str]) -> None:
    env = _env_block(fake_rhel)
    latest = ok(run_tasks(tmp_path, "- yum: {name: [curl, bash], state: latest}\n" + env))
    assert latest.results[0].result["results"] == ["Installed: curl"]
    absent = ok(run_tasks(tmp_path, "- package: {name: bash, state: absent}\n" + env))
    assert absent.results[0].status == "changed" and absent.results[0].result["results"] == ["Removed: bash"]
    assert "bash" not in (tmp_path / "db").read_text().split()
    again = ok(run_tasks(tmp_path, "- package: {name: bash, state: absent}\n" + env))
    assert again.results[0].status == "ok"


def test_dnf_rejects_bad_names_before_running(tmp_path: Path) -> None:
    # arguments are checked when the task runs (Ansible's rule): the task fails, nothing ran
    bad = run_tasks(tmp_path, "- dnf: {name: 'bad name;x'}").results[-1]
    assert bad.status == "failed" and "RPM package name" in bad.msg, bad.msg
