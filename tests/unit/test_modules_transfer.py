"""fetch and slurp on this machine: Ansible's destination layout, idempotence, check mode."""

from __future__ import annotations

import base64
from pathlib import Path

from builtin_support import ok, results, run_tasks


def test_fetch_layout_flat_and_idempotence(tmp_path: Path) -> None:
    src = tmp_path / "remote" / "app.log"
    src.parent.mkdir()
    src.write_bytes(b"line\n" * 1000 + bytes(range(256)))
    tasks = """
    - fetch: {src: TMP/remote/app.log, dest: TMP/got}
      register: tree
    - fetch: {src: TMP/remote/app.log, dest: TMP/flat/, flat: yes}
      register: flat
    """
    first = ok(run_tasks(tmp_path, tasks))
    (s1, tree), (s2, flat) = results(first)
    assert s1 == s2 == "changed"
    nested = tmp_path / "got" / "localhost" / str(src).lstrip("/")
    assert Path(tree["dest"]) == nested and nested.read_bytes() == src.read_bytes()
    assert (tmp_path / "flat" / "app.log").read_bytes() == src.read_bytes()
    assert tree["checksum"] == tree["remote_checksum"]
    second = ok(run_tasks(tmp_path, tasks))
    assert [s for s, _ in results(second)] == ["ok", "ok"]
    src.write_bytes(b"changed\n")
    third = ok(run_tasks(tmp_path, tasks))
    assert [s for s, _ in results(third)] == ["changed", "changed"]
    assert nested.read_bytes() == b"changed\n"
    # like Ansible: check mode is not supported, the task is skipped
    check = run_tasks(tmp_path, tasks, check=True)
    assert [r.status for r in check.results] == ["skipped", "skipped"]


def test_fetch_missing_and_directory(tmp_path: Path) -> None:
    failed = run_tasks(tmp_path, "- fetch: {src: TMP/none, dest: TMP/got}")
    assert failed.results[0].status == "failed"
    assert "does not exist" in failed.results[0].msg
    ignored = ok(run_tasks(tmp_path, "- fetch: {src: TMP/none, dest: TMP/got, fail_on_missing: no}"))
    assert ignored.results[0].status == "ok"
    isdir = run_tasks(tmp_path, "- fetch: {src: TMP, dest: TMP/got}")
    assert "directory" in isdir.results[0].msg


def test_slurp_binary_and_errors(tmp_path: Path) -> None:
    data = bytes(range(256)) * 3
    (tmp_path / "blob").write_bytes(data)
    result = ok(run_tasks(tmp_path, "- slurp: {src: TMP/blob}\n  register: s\n- copy: {dest: TMP/out, content: '{{ s.content }}'}"))
    (status, reg), _ = results(result)
    assert status == "ok" and reg["encoding"] == "base64" and reg["source"] == str(tmp_path / "blob")
    assert base64.b64decode(reg["content"]) == data
    missing = run_tasks(tmp_path, "- slurp: {path: TMP/none}")
    assert missing.results[0].status == "failed" and "File not found" in missing.results[0].msg
