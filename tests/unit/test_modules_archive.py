"""unarchive on this machine: tar and zip, controller or host source, idempotence, check mode."""

from __future__ import annotations

import io
import os
import tarfile
import zipfile
from pathlib import Path

import pytest
from builtin_support import assert_idempotent, ok, results, run_tasks


def _tar(path: Path, mode: str, files: dict[str, bytes]) -> Path:
    with tarfile.open(path, mode) as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o640, 1700000000
            tar.addfile(info, io.BytesIO(data))
    return path


FILES = {"pkg/bin/tool": b"#!/bin/sh\necho tool\n", "pkg/README": b"read me\n", "pkg/o'brien $(x).txt": b"odd\n"}


@pytest.mark.parametrize("mode", ["w:gz", "w:bz2", "w:xz", "w"])
def test_unarchive_tar_from_controller(tmp_path: Path, mode: str) -> None:
    (tmp_path / "files").mkdir()
    _tar(tmp_path / "files" / "pkg.tar", mode, FILES)
    (tmp_path / "dest").mkdir()
    first = assert_idempotent(tmp_path, "- unarchive: {src: pkg.tar, dest: TMP/dest, list_files: yes}\n  register: u")
    (status, reg), = results(first)
    assert reg["handler"] == {"w:gz": "TgzArchive", "w:bz2": "TarBzipArchive", "w:xz": "TarXzArchive", "w": "TarArchive"}[mode]
    assert sorted(reg["files"]) == sorted(FILES)
    for name, data in FILES.items():
        assert (tmp_path / "dest" / name).read_bytes() == data
        assert oct((tmp_path / "dest" / name).stat().st_mode & 0o777) == "0o640"
    assert oct((tmp_path / "dest").stat().st_mode & 0o777) == "0o755"  # dest keeps its own mode
    assert not [p for p in os.listdir(tmp_path / "dest") if p.startswith(".pv-")]


def test_unarchive_zip_on_host_detects_drift_and_check_mode(tmp_path: Path) -> None:
    with zipfile.ZipFile(tmp_path / "data.zip", "w") as zf:
        zf.writestr("d/a.txt", "alpha\n")
        zf.writestr("d/sub/b.txt", "beta\n")
    (tmp_path / "out").mkdir()
    tasks = "- unarchive: {src: TMP/data.zip, dest: TMP/out, remote_src: yes, mode: 'u=rw,go=r'}"
    assert_idempotent(tmp_path, tasks)
    target = tmp_path / "out" / "d" / "a.txt"
    target.write_text("edited\n")
    check = ok(run_tasks(tmp_path, tasks, check=True, diff=True))
    assert check.results[0].status == "changed" and target.read_text() == "edited\n"
    assert "d/a.txt" in check.results[0].result["diff"][0]["note"]
    ok(run_tasks(tmp_path, tasks))
    assert target.read_text() == "alpha\n" and oct(target.stat().st_mode & 0o777) == "0o644"


def test_unarchive_creates_include_exclude_and_errors(tmp_path: Path) -> None:
    _tar(tmp_path / "a.tgz", "w:gz", FILES)
    (tmp_path / "d1").mkdir()
    (tmp_path / "d2").mkdir()
    ok(run_tasks(tmp_path, "- unarchive: {src: TMP/a.tgz, dest: TMP/d1, remote_src: yes, include: [pkg/README]}"))
    assert [p.name for p in (tmp_path / "d1" / "pkg").iterdir()] == ["README"]
    ok(run_tasks(tmp_path, "- unarchive: {src: TMP/a.tgz, dest: TMP/d2, remote_src: yes, exclude: ['pkg/bin/*']}"))
    assert not (tmp_path / "d2" / "pkg" / "bin" / "tool").exists() and (tmp_path / "d2" / "pkg" / "README").exists()
    skipped = run_tasks(tmp_path, "- unarchive: {src: TMP/a.tgz, dest: TMP/d1, remote_src: yes, creates: TMP/d1/pkg}")
    assert skipped.results[0].status == "skipped"
    nodir = run_tasks(tmp_path, "- unarchive: {src: TMP/a.tgz, dest: TMP/none, remote_src: yes}")
    assert nodir.results[0].status == "failed" and "must be an existing dir" in nodir.results[0].msg
    (tmp_path / "not.tgz").write_text("plain text\n")
    bad = run_tasks(tmp_path, "- unarchive: {src: TMP/not.tgz, dest: TMP/d1, remote_src: yes}")
    assert bad.results[0].status == "failed" and "Failed to find handler" in bad.results[0].msg
