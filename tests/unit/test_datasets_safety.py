"""Hostile names round-trip as data; sources pointing outside themselves are refused; the agent
package stays Python 3.8 compatible."""

from __future__ import annotations

import ast
import io
import json
import os
import shutil
import subprocess
import tarfile
import zipfile
from pathlib import Path

import pytest

from provision.agent.datasets import tarstream
from provision.agent.datasets.safety import UnsafePathError, link_target, member_relpath
from provision.agent.datasets.sources import open_source
from tests.support.hostile_names import HOSTILE_NAMES, LONG_NAME

REPO = Path(__file__).resolve().parents[2]
HOSTILE = [*HOSTILE_NAMES, LONG_NAME]


def _real_home() -> str:
    """This machine's home (tests run with a temporary HOME, tests/conftest.py)."""
    import pwd

    return pwd.getpwuid(os.getuid()).pw_dir

def test_tar_stream_round_trips_hostile_names_and_tarfile_agrees() -> None:
    parts = []
    for name in HOSTILE:
        data = name.encode() * 2
        parts += [
            tarstream.header(name, len(data), 1_700_000_000),
            data,
            tarstream.padding(len(data)),
        ]
    blob = b"".join(parts) + tarstream.END
    got = list(tarstream.read_members(io.BytesIO(blob)))
    assert [n for n, _ in got] == HOSTILE
    assert all(d == n.encode() * 2 for n, d in got)
    # an ordinary tar: the standard library reads the same names and sizes
    with tarfile.open(fileobj=io.BytesIO(blob)) as tf:
        assert [(m.name, m.size) for m in tf.getmembers()] == [
            (n, len(n.encode()) * 2) for n in HOSTILE
        ]


def test_tar_stream_reports_truncation_and_garbage() -> None:
    data = b"z" * 3000
    blob = tarstream.header("a", len(data), 0) + data + tarstream.padding(len(data))
    with pytest.raises(tarstream.StreamTruncated):
        list(tarstream.read_members(io.BytesIO(blob[:1000])))
    with pytest.raises(tarstream.TarFormatError, match="not a tar or is corrupt"):
        list(tarstream.read_members(io.BytesIO(b"\x01" * 512)))
    # EOF exactly between members reads as a short archive; the stage then sees too few samples
    assert [n for n, _ in tarstream.read_members(io.BytesIO(blob))] == ["a"]


@pytest.mark.parametrize("name", ["../evil.jpg", "a/../../evil.jpg", "/etc/passwd", "C:/x.jpg"])
def test_member_names_leaving_the_archive_are_refused(name: str) -> None:
    with pytest.raises(UnsafePathError):
        member_relpath(name, "x.tar")


def test_member_names_are_normalised_but_kept_exact() -> None:
    assert member_relpath("./a//b\\c.jpg", "x") == "a/b\\c.jpg"
    assert link_target("a/b/link", "../c", "x") == "a/c"
    with pytest.raises(UnsafePathError):
        link_target("a/link", "../../etc/passwd", "x")
    with pytest.raises(UnsafePathError):
        link_target("a/link", "/etc/passwd", "x")


def test_path_traversal_tar_is_refused_naming_the_member(tmp_path: Path) -> None:
    arc = tmp_path / "evil.tar"
    with tarfile.open(arc, "w") as tf:
        for name in ("ok/1.jpg", "../../escape.jpg"):
            info = tarfile.TarInfo(name)
            info.size = 1
            tf.addfile(info, io.BytesIO(b"x"))
    with pytest.raises(UnsafePathError, match=r"'\.\./\.\./escape\.jpg'.*'\.\.' component"):
        open_source(str(arc))


def test_absolute_member_and_escaping_symlink_member_in_tar(tmp_path: Path) -> None:
    arc = tmp_path / "abs.tar"
    with tarfile.open(arc, "w") as tf:
        info = tarfile.TarInfo("/root/.ssh/authorized_keys")
        info.size = 1
        tf.addfile(info, io.BytesIO(b"x"))
    with pytest.raises(UnsafePathError, match="absolute path"):
        open_source(str(arc))
    arc2 = tmp_path / "link.tar"
    with tarfile.open(arc2, "w") as tf:
        info = tarfile.TarInfo("cat/link.jpg")
        info.type = tarfile.SYMTYPE
        info.linkname = "../../../etc/shadow"
        tf.addfile(info)
    with pytest.raises(UnsafePathError, match="leaves the archive root"):
        open_source(str(arc2))


def test_path_traversal_zip_is_refused(tmp_path: Path) -> None:
    arc = tmp_path / "evil.zip"
    with zipfile.ZipFile(arc, "w") as zf:
        zf.writestr("cat/1.jpg", b"x")
        zf.writestr("../../evil.jpg", b"x")
    with pytest.raises(UnsafePathError, match=r"evil\.jpg"):
        open_source(str(arc))


def test_symlink_leaving_the_folder_is_refused_inside_is_followed(tmp_path: Path) -> None:
    outside = tmp_path / "secret.txt"
    outside.write_bytes(b"secret")
    src = tmp_path / "src"
    (src / "cat").mkdir(parents=True)
    (src / "cat" / "1.jpg").write_bytes(b"one")
    (src / "cat" / "alias.jpg").symlink_to(src / "cat" / "1.jpg")
    (src / "dog").symlink_to(src / "cat", target_is_directory=True)
    plan = open_source(str(src))
    assert plan.manifest.paths == ["cat/1.jpg", "cat/alias.jpg", "dog/1.jpg", "dog/alias.jpg"]
    assert [d for _, _, d in plan.iter_samples()] == [b"one"] * 4
    (src / "cat" / "leak.jpg").symlink_to(outside)
    with pytest.raises(
        UnsafePathError, match=r"leak\.jpg is a symlink to .*secret\.txt, outside the source folder"
    ):
        open_source(str(src))


def test_hostile_names_in_a_folder_list_exactly(tmp_path: Path) -> None:
    for name in HOSTILE:
        (tmp_path / name).write_bytes(name.encode())
    plan = open_source(str(tmp_path))
    assert sorted(plan.manifest.paths) == sorted(HOSTILE)
    assert all(data == rel.encode() for _, rel, data in plan.iter_samples())
    assert not (Path.cwd() / "PWNED").exists()


# -- Python 3.8 on the host ---------------------------------------------------------------------
AGENT_FILES = sorted((REPO / "provision" / "agent" / "datasets").glob("*.py"))


@pytest.mark.parametrize("path", AGENT_FILES, ids=lambda p: p.name)
def test_agent_dataset_code_parses_as_python_3_8(path: Path) -> None:
    ast.parse(path.read_text(), filename=str(path), feature_version=(3, 8))


def _python38() -> str | None:
    for cand in (
        shutil.which("python3.8"),
        os.path.join(_real_home(), ".pyenv/versions/3.8.18/bin/python3.8"),
    ):
        if cand and os.path.exists(cand):
            probe = subprocess.run([cand, "-c", "import lmdb"], capture_output=True)
            if probe.returncode == 0:
                return cand
    return None


def test_agent_stage_and_reader_run_on_python_3_8(tmp_path: Path) -> None:
    py38 = _python38()
    if py38 is None:
        pytest.skip("no Python 3.8 with py-lmdb here (pyenv 3.8 + pip install 'lmdb<2')")
    from provision.staging.source import plan_local, sample_stream

    src = tmp_path / "src"
    for i, name in enumerate(HOSTILE[:6]):
        (src / f"c{i % 2}").mkdir(parents=True, exist_ok=True)
        (src / f"c{i % 2}" / name).write_bytes(name.encode() * 100)
    plan = plan_local(str(src))
    dest = tmp_path / "out" / "d.lmdb"
    request = {
        "path": str(dest),
        "source": {"kind": "stream", "manifest": plan.manifest.to_wire(), "start": 0},
    }
    payload = (json.dumps(request) + "\n").encode() + b"".join(sample_stream(plan))
    proc = subprocess.run(
        [py38, "-m", "provision.agent", "stage"], input=payload, capture_output=True, cwd=REPO
    )
    events = [json.loads(line) for line in proc.stdout.decode().splitlines()]
    assert events[-1]["event"] == "result", proc.stdout.decode() + proc.stderr.decode()
    assert events[-1]["data"]["count"] == len(plan.manifest)
    code = (
        "import sys, json; sys.path.insert(0, sys.argv[1]); from provision_lmdb import LMDBDataset; "
        "ds = LMDBDataset(sys.argv[2]); "
        "print(json.dumps([[ds.relpath(i), ds[i][1], ds[i][0].decode()] for i in range(len(ds))]))"
    )
    out = subprocess.run(
        [py38, "-c", code, str(dest.parent), str(dest)], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)
    assert [r[0] for r in rows] == plan.manifest.paths
    assert [r[1] for r in rows] == plan.manifest.labels
    assert all(r[2] == r[0].split("/", 1)[1] * 100 for r in rows)
