"""LMDBDataset on its own: lazy env, pickling, forks after the parent read, the format checks."""

from __future__ import annotations

import multiprocessing as mp
import os
import pickle
from pathlib import Path

import pytest

from provision.agent.datasets import reader
from provision.agent.datasets.ingest import build
from provision.agent.datasets.manifest import Manifest
from provision.data import LMDBDataset, decode, decode_tensor
from provision.staging.sample import make_image_folder
from provision.staging.source import plan_local


@pytest.fixture(scope="module")
def staged(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("reader")
    src = make_image_folder(base / "src", 60, classes=3, size=24)
    plan = plan_local(str(src))
    path = base / "d.lmdb"
    build(str(path), plan.manifest, plan.iter_samples, "test", lambda **k: None, lambda m: None)
    return src, path


def _first_bytes(ds: LMDBDataset) -> bytes:
    return ds[0][0]


def test_no_env_is_held_until_an_item_is_read(staged: tuple[Path, Path]) -> None:
    _, path = staged
    ds = LMDBDataset(path)
    assert ds._env is None and len(ds) == 60 and ds.classes == ["class00", "class01", "class02"]
    ds[5]
    assert ds._env is not None
    clone = pickle.loads(pickle.dumps(ds))
    assert clone._env is None and clone[5] == ds[5]  # two datasets, one file, one process
    ds.close()
    assert clone[6][1] == 0  # still open for the other one
    clone.close()
    assert not reader._ENVS


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_workers_read_after_the_parent_opened_the_env(
    staged: tuple[Path, Path], method: str
) -> None:
    src, path = staged
    ds = LMDBDataset(path)
    first = ds[0][0]  # the parent holds the env open while the children start
    with mp.get_context(method).Pool(2) as pool:
        got = pool.map(_first_bytes, [ds, ds])
    assert got == [first, first] == [(src / "class00" / "img00000.jpg").read_bytes()] * 2
    ds.close()


def test_items_records_labels_and_transforms(staged: tuple[Path, Path]) -> None:
    src, path = staged
    ds = LMDBDataset(path, transform=decode, target_transform=lambda y: y * 10)
    img, label = ds[20]
    assert img.size == (24, 24) and label == 10
    rel, lab, size, digest = ds.record(20)
    assert rel == "class01/img00001.jpg" and lab == 1 and size == (src / rel).stat().st_size
    assert ds.relpath(-1) == "class02/img00059.jpg"
    with pytest.raises(IndexError):
        ds[60]
    assert ds.targets == [0] * 20 + [1] * 20 + [2] * 20
    ds.close()
    torch = pytest.importorskip("torch")
    t = decode_tensor((src / rel).read_bytes())
    assert t.dtype == torch.uint8 and tuple(t.shape) == (3, 24, 24)


def test_partial_and_foreign_files_are_refused(tmp_path: Path) -> None:
    import lmdb

    foreign = tmp_path / "other.lmdb"
    env = lmdb.open(str(foreign), subdir=False, max_dbs=4)
    env.open_db(b"meta")
    env.close()
    with pytest.raises(ValueError, match="not a provision LMDB dataset"):
        LMDBDataset(foreign)
    with pytest.raises(FileNotFoundError, match="no LMDB dataset at"):
        LMDBDataset(tmp_path / "missing.lmdb")
    newer = tmp_path / "newer.lmdb"
    env = lmdb.open(str(newer), subdir=False, max_dbs=4)
    with env.begin(write=True, db=env.open_db(b"meta")) as txn:
        txn.put(b"format", reader.FORMAT.encode())
        txn.put(b"version", str(reader.FORMAT_VERSION + 1).encode())
    env.close()
    with pytest.raises(ValueError, match="update provision"):
        LMDBDataset(newer)


def test_records_encode_labels_and_unicode_paths() -> None:
    for label in (None, 0, -1, 2**40):
        raw = reader.encode_record("目录/a b\n.jpg", label, 123, b"\x01" * 32)
        assert reader.decode_record(raw) == ("目录/a b\n.jpg", label, 123, b"\x01" * 32)
    assert reader.key(1) < reader.key(256) < reader.key(2**40)


def test_a_labels_less_dataset_reads_none(tmp_path: Path) -> None:
    m = Manifest("files", ["a", "b"], [1, 2], [0, 0])
    data = {"a": b"1", "b": b"22"}
    build(
        str(tmp_path / "f.lmdb"),
        m,
        lambda first: ((i, p, data[p]) for i, p in enumerate(m.paths) if i >= first),
        "t",
        lambda **k: None,
        lambda msg: None,
    )
    ds = LMDBDataset(tmp_path / "f.lmdb")
    assert [ds[i] for i in range(2)] == [(b"1", None), (b"22", None)] and ds.classes == []
    ds.close()
    assert os.path.exists(tmp_path / "provision_lmdb.py")
