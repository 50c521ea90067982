"""verify_torch's memo: a passed verification answers again only while nothing it depends on
changed, only when asked for, never for a failure; real torch (CPU) under this interpreter."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from provision.agent import torch_verify, verify_memo


class _Ctx:
    def progress(self, **_: object) -> None:
        pass


@pytest.fixture
def host_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    site = tmp_path / "env" / "lib" / "site-packages"  # stands for a site-packages pip writes to
    site.mkdir(parents=True)
    monkeypatch.setattr(sys, "path", [*sys.path, str(site)])
    return home


def test_a_passed_verification_is_remembered_until_the_environment_changes(host_home: Path) -> None:
    request = {"expect_gpus": 0, "memo_s": 600}
    first = torch_verify.verify(dict(request), _Ctx())
    assert first["ok"] and "memo" not in first
    again = torch_verify.verify(dict(request), _Ctx())
    assert again["memo"]["age_s"] >= 0 and again["torch"] == first["torch"]
    memo_dir = host_home / ".cache" / "provision" / "verify"
    assert stat.S_IMODE(memo_dir.stat().st_mode) == 0o700
    assert all(stat.S_IMODE(f.stat().st_mode) == 0o600 for f in memo_dir.iterdir())
    # asked without the memo (right after an install): verified afresh
    assert "memo" not in torch_verify.verify({"expect_gpus": 0}, _Ctx())
    # another expectation is another question
    assert verify_memo.recall({"expect_gpus": 1, "memo_s": 600}) is None
    # pip adds a package: the site-packages folder changes, the memo no longer answers
    site = next(p for p in sys.path if p.endswith(os.path.join("lib", "site-packages"))
                and p.startswith(str(host_home.parent)))  # fmt: skip
    (Path(site) / "newpkg").mkdir()
    assert verify_memo.recall(request) is None


def test_failures_are_never_remembered_and_old_answers_expire(host_home: Path) -> None:
    request = {"expect_gpus": 0, "memo_s": 600}
    verify_memo.remember(request, {"ok": False, "problems": ["broken"]})
    assert verify_memo.recall(request) is None
    verify_memo.remember(request, {"ok": True, "problems": []})
    assert verify_memo.recall(request)["ok"] is True
    assert verify_memo.recall({**request, "memo_s": 0}) is None
    memo = next((host_home / ".cache" / "provision" / "verify").iterdir())
    memo.write_text(memo.read_text().replace('"at": ', '"at": -1000 + '))  # not JSON any more
    assert verify_memo.recall(request) is None
