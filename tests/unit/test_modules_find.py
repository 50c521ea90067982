"""find on this machine: Ansible's filters and its result shape."""

from __future__ import annotations

import os
import time
from pathlib import Path

from builtin_support import ok, results, run_tasks


def _tree(root: Path) -> None:
    (root / "a" / "b").mkdir(parents=True)
    (root / "top.log").write_text("error: disk\n")
    (root / "top.txt").write_text("x" * 2048)
    (root / ".hidden.log").write_text("h\n")
    (root / "a" / "mid.log").write_text("fine\n")
    (root / "a" / "b" / "deep.log").write_text("error: deep\n")
    os.symlink("top.log", root / "link.log")
    old = time.time() - 10 * 86400
    os.utime(root / "top.txt", (old, old))


def _paths(tmp_path: Path, task: str) -> list[str]:
    result = ok(run_tasks(tmp_path, task + "\n  register: r"))
    (status, reg), = results(result)
    assert status == "ok" and reg["changed"] is False
    base = str(tmp_path / "t") + "/"
    return sorted(f["path"].removeprefix(base) for f in reg["files"])


def test_find_filters(tmp_path: Path) -> None:
    _tree(tmp_path / "t")
    assert _paths(tmp_path, "- find: {paths: TMP/t, patterns: '*.log'}") == ["top.log"]
    assert _paths(tmp_path, "- find: {paths: TMP/t, patterns: '*.log', recurse: yes}") == [
        "a/b/deep.log", "a/mid.log", "top.log",
    ]
    assert _paths(tmp_path, "- find: {paths: TMP/t, patterns: '*.log', recurse: yes, depth: 2}") == [
        "a/mid.log", "top.log",
    ]
    assert _paths(tmp_path, "- find: {paths: TMP/t, patterns: '*.log', hidden: yes}") == [".hidden.log", "top.log"]
    assert _paths(tmp_path, "- find: {paths: TMP/t, patterns: '^t.*[gt]$', use_regex: yes}") == ["top.log", "top.txt"]
    assert _paths(tmp_path, "- find: {paths: TMP/t, recurse: yes, contains: '^error'}") == ["a/b/deep.log", "top.log"]
    assert _paths(tmp_path, "- find: {paths: TMP/t, size: 1k}") == ["top.txt"]
    assert _paths(tmp_path, "- find: {paths: TMP/t, age: 1w}") == ["top.txt"]
    assert _paths(tmp_path, "- find: {paths: TMP/t, file_type: directory}") == ["a"]
    assert _paths(tmp_path, "- find: {paths: TMP/t, file_type: link}") == ["link.log"]
    assert _paths(tmp_path, "- find: {paths: TMP/t, patterns: '*', excludes: '*.txt'}") == ["top.log"]


def test_find_result_shape_checksum_limit_and_bad_paths(tmp_path: Path) -> None:
    _tree(tmp_path / "t")
    result = ok(run_tasks(tmp_path, "- find: {paths: [TMP/t, TMP/none], patterns: top.log, get_checksum: yes}"))
    (_, reg), = results(result)
    assert reg["matched"] == 1 and reg["examined"] >= 5
    entry = reg["files"][0]
    for key in ("mode", "isdir", "isreg", "islnk", "uid", "gid", "size", "mtime", "pw_name", "gr_name", "checksum", "rusr"):
        assert key in entry, key
    assert entry["isreg"] is True and entry["size"] == len("error: disk\n")
    assert str(tmp_path / "none") in reg["skipped_paths"]
    assert reg["msg"] == "Not all paths examined, check warnings for details"
    limited = ok(run_tasks(tmp_path, "- find: {paths: TMP/t, recurse: yes, limit: 1}"))
    assert results(limited)[0][1]["matched"] == 1
    assert results(limited)[0][1]["msg"] == "Limit of matches reached"
    bad = run_tasks(tmp_path, "- find: {paths: TMP/t, age: soon}")
    assert bad.results[0].status == "failed" and "age" in bad.results[0].msg
