"""Layouts, labels files, manifests and source listing: what becomes a sample, in what order."""

from __future__ import annotations

import io
import json
import os
import tarfile
import zipfile
from pathlib import Path

import pytest

from provision.agent.datasets import layouts
from provision.agent.datasets.layouts import Entry, LayoutError
from provision.agent.datasets.manifest import Manifest
from provision.agent.datasets.sources import SourceError, open_source


def write(root: Path, rel: str, data: bytes = b"x") -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def entries(*paths: str) -> list[Entry]:
    return [Entry(p, 1, 0) for p in paths]


# -- detection --------------------------------------------------------------------------------
def test_detect_picks_each_layout() -> None:
    assert layouts.detect(entries("cat/1.jpg", "dog/2.jpg")) == "imagefolder"
    assert layouts.detect(entries("labels.csv", "img/1.jpg")) == "labels"
    assert layouts.detect(entries("a-000.tar", "a-001.tar")) == "webdataset"
    assert layouts.detect(entries("1.jpg", "cat/2.jpg")) == "files"
    assert layouts.detect(entries("1.jpg"), labels_file="x.csv") == "labels"


def test_imagefolder_labels_follow_sorted_class_names_and_component_order(tmp_path: Path) -> None:
    for rel in ("dog/b.jpg", "cat/z.jpg", "cat-2/a.jpg", "cat/a.jpg", "dog/sub/c.jpg"):
        write(tmp_path, rel, rel.encode())
    plan = open_source(str(tmp_path))
    m = plan.manifest
    assert m.layout == "imagefolder"
    assert m.classes == ["cat", "cat-2", "dog"]
    # component-wise: everything of `cat` before `cat-2` (a plain string sort puts "cat-2/" first)
    assert m.paths == ["cat/a.jpg", "cat/z.jpg", "cat-2/a.jpg", "dog/b.jpg", "dog/sub/c.jpg"]
    assert m.labels == [0, 0, 1, 2, 2]
    assert m.sizes == [len(p.encode()) for p in m.paths]


def test_imagefolder_explicit_refuses_top_level_files(tmp_path: Path) -> None:
    write(tmp_path, "cat/1.jpg")
    write(tmp_path, "stray.jpg")
    with pytest.raises(LayoutError, match=r"1 are at the top level.*'stray.jpg'"):
        open_source(str(tmp_path), layout="imagefolder")
    assert open_source(str(tmp_path)).manifest.layout == "files"


def test_hidden_files_are_left_out(tmp_path: Path) -> None:
    write(tmp_path, "cat/1.jpg")
    write(tmp_path, "cat/.DS_Store")
    write(tmp_path, ".git/config")
    assert open_source(str(tmp_path)).manifest.paths == ["cat/1.jpg"]


# -- labels files -----------------------------------------------------------------------------
def test_csv_with_header_quotes_and_newlines() -> None:
    data = b'path,label\n"a,b.jpg",cat\n"new\nline.jpg",dog\nplain.jpg,cat\n'
    rows = layouts.parse_labels_file(data, "labels.csv")
    assert [(p, lab) for _, p, lab in rows] == [
        ("a,b.jpg", "cat"),
        ("new\nline.jpg", "dog"),
        ("plain.jpg", "cat"),
    ]
    assert rows[1][0] == 4  # the physical line where the record ends, for error messages


def test_jsonl_json_txt_and_tsv_formats() -> None:
    jl = b'{"path": "a.jpg", "label": 3}\n\n{"file": "b.jpg", "class": 1}\n'
    assert [(p, lab) for _, p, lab in layouts.parse_labels_file(jl, "labels.jsonl")] == [
        ("a.jpg", 3),
        ("b.jpg", 1),
    ]
    js = json.dumps({"a.jpg": "x", "b.jpg": "y"}).encode()
    assert [(p, lab) for _, p, lab in layouts.parse_labels_file(js, "labels.json")] == [
        ("a.jpg", "x"),
        ("b.jpg", "y"),
    ]
    txt = b"file label\nwith space.jpg 7\n"
    assert [(p, lab) for _, p, lab in layouts.parse_labels_file(txt, "labels.txt")] == [
        ("with space.jpg", "7")
    ]
    tsv = b"a.jpg\t1\n"
    assert [(p, lab) for _, p, lab in layouts.parse_labels_file(tsv, "labels.tsv")] == [
        ("a.jpg", "1")
    ]


def test_bad_labels_files_name_file_and_line() -> None:
    with pytest.raises(LayoutError, match=r"labels.jsonl:2: invalid JSON"):
        layouts.parse_labels_file(b'{"path": "a", "label": 1}\n{oops\n', "labels.jsonl")
    with pytest.raises(LayoutError, match=r"labels.csv:2: expected `path,label`"):
        layouts.parse_labels_file(b"a.jpg,1\nlonely\n", "labels.csv")


def test_labelled_layout_checks_listed_files(tmp_path: Path) -> None:
    write(tmp_path, "img/a.jpg")
    write(tmp_path, "img/b.jpg")
    write(tmp_path, "img/unlisted.jpg")
    write(tmp_path, "labels.csv", b"img/b.jpg,dog\nimg/a.jpg,cat\n")
    plan = open_source(str(tmp_path))
    m = plan.manifest
    assert (m.layout, m.paths, m.labels, m.classes) == (
        "labels",
        ["img/a.jpg", "img/b.jpg"],
        [0, 1],
        ["cat", "dog"],
    )
    assert "1 files" in plan.warnings[0] and "unlisted.jpg" in plan.warnings[0]

    write(tmp_path, "labels.csv", b"img/a.jpg,1\nimg/gone.jpg,2\n")
    with pytest.raises(LayoutError, match=r"labels.csv:2: 'img/gone.jpg' is not in"):
        open_source(str(tmp_path))
    write(tmp_path, "labels.csv", b"img/a.jpg,1\nimg/a.jpg,2\n")
    with pytest.raises(
        LayoutError, match=r"labels.csv:2: 'img/a.jpg' is listed twice \(first on line 1\)"
    ):
        open_source(str(tmp_path))


def test_integer_labels_stay_integers_and_external_labels_file(tmp_path: Path) -> None:
    src = tmp_path / "src"
    write(src, "a.jpg")
    write(src, "b.jpg")
    ext = write(
        tmp_path,
        "my_labels.jsonl",
        b'{"path": "a.jpg", "label": 5}\n{"path": "b.jpg", "label": -1}\n',
    )
    m = open_source(str(src), labels=str(ext)).manifest
    assert (m.labels, m.classes) == ([5, -1], [])
    with pytest.raises(SourceError, match="does not exist"):
        open_source(str(src), labels=str(tmp_path / "nope.csv"))
    with pytest.raises(LayoutError, match="no labels file 'nope.csv'"):
        open_source(str(src), labels="nope.csv")


# -- archives and WebDataset --------------------------------------------------------------------
def _tar(path: Path, members: dict[str, bytes], mode: str = "w") -> Path:
    with tarfile.open(path, mode) as tf:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = 1_700_000_000
            tf.addfile(info, io.BytesIO(data))
    return path


def test_archive_wrapper_folder_is_stripped_and_order_is_member_order(tmp_path: Path) -> None:
    arc = _tar(
        tmp_path / "d.tar.gz",
        {"data/dog/1.jpg": b"d1", "data/cat/2.jpg": b"c2", "data/cat/1.jpg": b"c1"},
        "w:gz",
    )
    plan = open_source(str(arc))
    m = plan.manifest
    assert m.paths == ["dog/1.jpg", "cat/2.jpg", "cat/1.jpg"]
    assert m.labels == [1, 0, 0] and m.classes == ["cat", "dog"]
    assert [d for _, _, d in plan.iter_samples()] == [b"d1", b"c2", b"c1"]
    assert [d for _, _, d in plan.iter_samples(start=2)] == [b"c1"]


def test_zip_imagefolder(tmp_path: Path) -> None:
    with zipfile.ZipFile(tmp_path / "d.zip", "w") as zf:
        zf.writestr("cat/1.jpg", b"c1")
        zf.writestr("dog/1.jpg", b"d1")
    plan = open_source(str(tmp_path / "d.zip"))
    assert plan.manifest.paths == ["cat/1.jpg", "dog/1.jpg"]
    assert [d for _, _, d in plan.iter_samples(1)] == [b"d1"]


def test_webdataset_shards_group_by_key(tmp_path: Path) -> None:
    shards = tmp_path / "shards"
    shards.mkdir()
    _tar(
        shards / "train-000.tar",
        {
            "000.jpg": b"i0",
            "000.cls": b"3\n",
            "000.json": b"{}",
            "001.seg.png": b"i1",
            "001.cls": b"5",
        },
    )
    _tar(
        shards / "train-001.tar",
        {"dir/002.png": b"i2", "dir/002.cls": b"3", "003.txt": b"only text"},
    )
    plan = open_source(str(shards))
    m = plan.manifest
    assert m.layout == "webdataset"
    assert m.paths == [
        "train-000.tar/000.jpg",
        "train-000.tar/001.seg.png",
        "train-001.tar/dir/002.png",
    ]
    assert m.labels == [3, 5, 3] and m.classes == []
    assert [d for _, _, d in plan.iter_samples()] == [b"i0", b"i1", b"i2"]
    assert any("no data member" in w and "003" in w for w in plan.warnings)
    single = open_source(str(shards / "train-000.tar"))
    assert single.manifest.layout == "webdataset" and single.manifest.paths == [
        "000.jpg",
        "001.seg.png",
    ]


def test_not_an_archive(tmp_path: Path) -> None:
    write(tmp_path, "x.bin", b"\x00garbage" * 100)
    with pytest.raises(SourceError, match="neither a folder nor a tar/zip archive"):
        open_source(str(tmp_path / "x.bin"))


# -- manifest ---------------------------------------------------------------------------------
def test_fingerprint_tracks_content_not_location(tmp_path: Path) -> None:
    a = tmp_path / "a"
    write(a, "cat/1.jpg", b"one")
    os.utime(a / "cat/1.jpg", (1_700_000_000, 1_700_000_000))
    fp = open_source(str(a)).manifest.fingerprint()
    b = tmp_path / "b"
    os.rename(a, b)
    assert open_source(str(b)).manifest.fingerprint() == fp
    os.utime(b / "cat/1.jpg", (1_700_000_100, 1_700_000_100))
    assert open_source(str(b)).manifest.fingerprint() != fp


def test_manifest_wire_round_trip_and_estimate() -> None:
    m = Manifest("labels", ["a 中文\n.jpg", "b"], [10, 5000], [1, 2], [0, None], ["x"], source="s")
    back = Manifest.from_wire(json.loads(json.dumps(m.to_wire())))
    assert (back.paths, back.sizes, back.mtimes, back.labels, back.classes) == (
        m.paths,
        m.sizes,
        m.mtimes,
        m.labels,
        m.classes,
    )
    assert back.fingerprint() == m.fingerprint()
    assert m.estimate_lmdb_bytes() > m.total_bytes
    assert m.estimate_lmdb_bytes(start=1) < m.estimate_lmdb_bytes()
    with pytest.raises(ValueError, match="bad manifest"):
        Manifest.from_wire({"packed": "not base64!"})
