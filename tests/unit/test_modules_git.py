"""git on this machine against a bare repository made in the test (no network): clone, depth,
version, update, local modifications, remote URL changes, check mode."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from builtin_support import ok, results, run_tasks

GIT_ENV = {
    "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid",
    "HOME": "/nonexistent", "GIT_CONFIG_NOSYSTEM": "1", "PATH": "/usr/bin:/bin",
}  # fmt: skip


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, env=GIT_ENV, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def upstream(tmp_path: Path) -> tuple[Path, Path]:
    work = tmp_path / "work"
    work.mkdir()
    git(work, "init", "-q", "-b", "main")
    for i in range(3):
        (work / "f.txt").write_text(f"v{i}\n")
        git(work, "add", "f.txt")
        git(work, "commit", "-q", "-m", f"c{i}")
    git(work, "tag", "v1", "HEAD~1")
    git(work, "branch", "stable", "HEAD~2")
    bare = tmp_path / "up.git"
    git(tmp_path, "clone", "-q", "--bare", str(work), str(bare))
    return work, bare


def test_git_clone_depth_update_and_check(tmp_path: Path, upstream: tuple[Path, Path]) -> None:
    work, bare = upstream
    head = git(work, "rev-parse", "HEAD")
    tasks = f"- git: {{repo: {bare}, dest: TMP/co, depth: 1}}\n  register: g"
    check = ok(run_tasks(tmp_path, tasks, check=True))
    assert check.results[0].status == "changed" and check.results[0].result["after"] == head
    assert not (tmp_path / "co").exists()
    first = ok(run_tasks(tmp_path, tasks))
    (status, reg), = results(first)
    assert status == "changed" and reg["before"] is None and reg["after"] == head
    assert git(tmp_path / "co", "rev-list", "--count", "HEAD") == "1"  # depth honoured (file://)
    second = ok(run_tasks(tmp_path, tasks))
    assert second.results[0].status == "ok" and second.results[0].result["before"] == head
    assert second.results[0].result["remote_url_changed"] is False
    # upstream moves: check mode sees it without moving, a real run follows
    (work / "f.txt").write_text("v3\n")
    git(work, "commit", "-qam", "c3")
    git(work, "push", "-q", str(bare), "main")
    new = git(work, "rev-parse", "HEAD")
    seen = ok(run_tasks(tmp_path, tasks, check=True))
    assert seen.results[0].status == "changed" and seen.results[0].result["after"] == new
    assert git(tmp_path / "co", "rev-parse", "HEAD") == head
    moved = ok(run_tasks(tmp_path, tasks))
    assert moved.results[0].result["before"] == head and moved.results[0].result["after"] == new
    assert (tmp_path / "co" / "f.txt").read_text() == "v3\n"


def test_git_versions_local_mods_and_remote_url(tmp_path: Path, upstream: tuple[Path, Path]) -> None:
    work, bare = upstream
    for version, expect in (("v1", "HEAD~1"), ("stable", "HEAD~2"), (git(work, "rev-parse", "HEAD~1")[:12], "HEAD~1")):
        dest = tmp_path / f"co-{version}"
        tasks = f"- git: {{repo: {bare}, dest: {dest}, version: {version}}}"
        ok(run_tasks(tmp_path, tasks))
        assert git(dest, "rev-parse", "HEAD") == git(work, "rev-parse", expect)
        assert ok(run_tasks(tmp_path, tasks)).results[0].status == "ok"
    dest = tmp_path / "co-v1"
    (dest / "f.txt").write_text("local edit\n")
    refused = run_tasks(tmp_path, f"- git: {{repo: {bare}, dest: {dest}, version: v1}}")
    assert refused.results[0].status == "failed" and "Local modifications exist" in refused.results[0].msg
    forced = ok(run_tasks(tmp_path, f"- git: {{repo: {bare}, dest: {dest}, version: v1, force: yes}}"))
    assert forced.results[0].status == "changed" and (dest / "f.txt").read_text() == "v1\n"
    moved = tmp_path / "moved.git"
    bare.rename(moved)
    relinked = ok(run_tasks(tmp_path, f"- git: {{repo: {moved}, dest: {dest}, version: v1}}"))
    assert relinked.results[0].status == "changed" and relinked.results[0].result["remote_url_changed"] is True
    assert git(dest, "config", "remote.origin.url") == f"file://{moved}"
    missing = run_tasks(tmp_path, f"- git: {{repo: {moved}, dest: TMP/x, version: nosuchbranch}}")
    assert missing.results[0].status == "failed" and "git clone failed" in missing.results[0].msg
