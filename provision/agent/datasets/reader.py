"""Read a dataset staged by `provision stage`: a PyTorch-style dataset over one LMDB file.

    from provision.data import LMDBDataset, decode      # on the controller
    from provision_lmdb import LMDBDataset, decode      # on the host: this file, written beside
                                                        # the dataset as <dir>/provision_lmdb.py

    ds = LMDBDataset("/root/autodl-tmp/datasets/flowers.lmdb", transform=decode)
    loader = torch.utils.data.DataLoader(ds, batch_size=64, num_workers=4)

This file needs only the standard library and py-lmdb (`pip install lmdb`), and runs on
Python 3.8+, so training scripts can use it without installing provision.

Layout (format version 1, documented in docs/datasets.md): one LMDB environment per dataset,
stored as a single file (subdir=False), with three named databases:
  data   key = index as 8-byte big-endian unsigned  ->  the original file's bytes
  index  same key  ->  struct "<BqQ32s" (flags, label, size, sha256) + relative path (UTF-8)
  meta   b"format", b"version", b"count", b"classes" (JSON), b"checksum", ... (UTF-8 values)

Why the env opens lazily: py-lmdb >= 2 refuses to open one path twice in a process, and a
DataLoader worker forked while the parent holds the env open inherits that record. So the
dataset holds no env until the first item is read in a process, drops it when pickled
(spawn / forkserver workers), and reopens it after a fork.
"""

import io
import json
import os
import struct
import threading

FORMAT = "provision-lmdb"
FORMAT_VERSION = 1
DATA_DB = b"data"
INDEX_DB = b"index"
META_DB = b"meta"
MAX_DBS = 4
KEY = struct.Struct(">Q")
RECORD = struct.Struct("<BqQ32s")  # flags (bit 0: has label), label, size, sha256 digest
HAS_LABEL = 1


def key(index):
    """The key of sample `index` (sortable: byte order is index order)."""
    return KEY.pack(index)


def encode_record(relpath, label, size, digest):
    flags = HAS_LABEL if label is not None else 0
    return RECORD.pack(flags, label if label is not None else 0, size, digest) + relpath.encode(
        "utf-8"
    )


def decode_record(raw):
    """(relpath, label or None, size, sha256 digest) from an index record."""
    raw = bytes(raw)
    flags, label, size, digest = RECORD.unpack_from(raw)
    relpath = raw[RECORD.size :].decode("utf-8")
    return relpath, (label if flags & HAS_LABEL else None), size, digest


def _lmdb():
    try:
        import lmdb
    except ImportError:
        raise ImportError(
            "reading a provision LMDB dataset needs py-lmdb: pip install lmdb"
        ) from None
    return lmdb


def open_env(path, readonly=True, max_readers=1024, **kwargs):
    """Open a dataset's env with the read settings every reader should use.

    readonly, lock=False (the file never changes once renamed into place, so readers need no
    lock table), readahead=False (random access: the kernel's readahead only wastes page cache).
    """
    lmdb = _lmdb()
    if not os.path.exists(path):
        raise FileNotFoundError("no LMDB dataset at %s" % path)
    return lmdb.open(
        path,
        subdir=os.path.isdir(path),
        readonly=readonly,
        lock=False,
        readahead=False,
        meminit=False,
        max_readers=max_readers,
        max_dbs=MAX_DBS,
        **kwargs,
    )


def read_meta(env):
    """All metadata of an open env as {str: str}."""
    meta_db = env.open_db(META_DB, create=False)
    out = {}
    with env.begin(db=meta_db) as txn:
        for k, v in txn.cursor():
            out[bytes(k).decode("utf-8")] = bytes(v).decode("utf-8")
    return out


def check_format(meta, path):
    if meta.get("format") != FORMAT:
        raise ValueError("%s is not a provision LMDB dataset (no format marker)" % path)
    version = int(meta.get("version", "0"))
    if version > FORMAT_VERSION:
        raise ValueError(
            "%s has format version %d; this reader knows up to %d: update provision (or the "
            "provision_lmdb.py beside the dataset)" % (path, version, FORMAT_VERSION)
        )
    if meta.get("complete") != "1":
        raise ValueError("%s is not a complete dataset (a stage was interrupted?)" % path)


_ENVS = {}  # (real path, inode) -> [env, pid, users]: one env per file per process
_ENVS_LOCK = threading.Lock()


def _after_fork_in_child():
    global _ENVS_LOCK
    _ENVS_LOCK = threading.Lock()  # a lock held by another thread at fork time stays held


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _acquire(path, max_readers):
    """The process-wide env for `path` (py-lmdb opens a file once per process). Envs inherited
    through fork are closed first: a child must open its own."""
    st = os.stat(path)
    key = (os.path.realpath(path), st.st_ino)
    pid = os.getpid()
    with _ENVS_LOCK:
        for k, entry in list(_ENVS.items()):
            if entry[1] != pid:
                try:
                    entry[0].close()
                except Exception:
                    pass
                del _ENVS[k]
        entry = _ENVS.get(key)
        if entry is None:
            entry = [open_env(path, max_readers=max_readers), pid, 0]
            _ENVS[key] = entry
        entry[2] += 1
        return key, entry[0]


def _release(key):
    with _ENVS_LOCK:
        entry = _ENVS.get(key)
        if entry is None or entry[1] != os.getpid():
            return
        entry[2] -= 1
        if entry[2] <= 0:
            del _ENVS[key]
            entry[0].close()


class LMDBDataset(object):
    """`ds[i]` -> (data: bytes, label: int or None), or (transform(data), label) with a transform.

    Safe with DataLoader workers under fork, spawn and forkserver (see the module docstring).
    Several datasets over one file in one process share its env.
    """

    def __init__(self, path, transform=None, target_transform=None, max_readers=1024):
        self.path = os.path.abspath(os.path.expanduser(str(path)))
        self.transform = transform
        self.target_transform = target_transform
        self.max_readers = max_readers
        self._env = None
        self._key = None
        self._pid = None
        self._dbs = None
        self._targets = None
        if not os.path.exists(self.path):
            raise FileNotFoundError("no LMDB dataset at %s" % self.path)
        # Read the metadata now; the env is released again (closed unless another dataset in
        # this process uses it), so no worker inherits one this object opened.
        key, env = _acquire(self.path, max_readers)
        try:
            self.meta = read_meta(env)
        finally:
            _release(key)
        check_format(self.meta, self.path)
        self._len = int(self.meta["count"])
        self.classes = json.loads(self.meta.get("classes") or "[]")
        self.class_to_idx = dict((name, i) for i, name in enumerate(self.classes))

    # -- env handling -----------------------------------------------------------------------
    def _open(self):
        pid = os.getpid()
        if self._env is not None and self._pid == pid:
            return self._dbs
        self._env = None  # inherited through fork: _acquire closes the copy and reopens
        key, env = _acquire(self.path, self.max_readers)
        self._dbs = (env.open_db(DATA_DB, create=False), env.open_db(INDEX_DB, create=False))
        self._env, self._key, self._pid = env, key, pid
        return self._dbs

    def close(self):
        if self._env is not None and self._pid == os.getpid():
            _release(self._key)
        self._env = self._dbs = self._pid = self._key = None

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_env"] = state["_dbs"] = state["_pid"] = state["_key"] = None
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    # -- access -----------------------------------------------------------------------------
    def __len__(self):
        return self._len

    def _index(self, i):
        if i < 0:
            i += self._len
        if not 0 <= i < self._len:
            raise IndexError("index %d out of range for %d samples" % (i, self._len))
        return i

    def raw(self, i):
        """(data bytes, relpath, label or None, size, sha256 digest) of sample i."""
        i = self._index(i)
        data_db, index_db = self._open()
        k = KEY.pack(i)
        with self._env.begin() as txn:
            data = txn.get(k, db=data_db)
            rec = txn.get(k, db=index_db)
        if data is None or rec is None:
            raise KeyError(
                "sample %d missing from %s (damaged file? run provision stage --verify)"
                % (i, self.path)
            )
        relpath, label, size, digest = decode_record(rec)
        return bytes(data), relpath, label, size, digest

    def __getitem__(self, i):
        data, _, label, _, _ = self.raw(i)
        if self.transform is not None:
            data = self.transform(data)
        if self.target_transform is not None:
            label = self.target_transform(label)
        return data, label

    def record(self, i):
        """(relpath, label or None, size, sha256 digest) without reading the data."""
        i = self._index(i)
        _, index_db = self._open()
        with self._env.begin() as txn:
            rec = txn.get(KEY.pack(i), db=index_db)
        if rec is None:
            raise KeyError("sample %d missing from %s" % (i, self.path))
        return decode_record(rec)

    def relpath(self, i):
        """The sample's path relative to the source root, exactly as it was there."""
        return self.record(i)[0]

    def label(self, i):
        return self.record(i)[1]

    @property
    def targets(self):
        """Every sample's label, in order (read once; e.g. for a weighted sampler)."""
        if self._targets is None:
            _, index_db = self._open()
            out = []
            with self._env.begin() as txn:
                for _, rec in txn.cursor(db=index_db):
                    out.append(decode_record(rec)[1])
            self._targets = out
        return self._targets

    def __repr__(self):
        return "LMDBDataset(%r, %d samples, %d classes)" % (self.path, self._len, len(self.classes))


def decode(data, mode="RGB"):
    """Image bytes -> PIL image in `mode` (None keeps the file's own mode)."""
    from PIL import Image

    img = Image.open(io.BytesIO(data))
    img.load()
    return img.convert(mode) if mode and img.mode != mode else img


def decode_tensor(data):
    """Image bytes -> uint8 CHW torch tensor: torchvision.io when present, else PIL."""
    import torch

    try:
        from torchvision.io import ImageReadMode, decode_image
    except Exception:  # absent, or built for another torch (RuntimeError: operator torchvision::nms does not exist)
        img = decode(data, "RGB")
        t = torch.frombuffer(bytearray(img.tobytes()), dtype=torch.uint8)
        return t.view(img.size[1], img.size[0], 3).permute(2, 0, 1).contiguous()
    buf = torch.frombuffer(bytearray(data), dtype=torch.uint8)
    return decode_image(buf, mode=ImageReadMode.RGB)
