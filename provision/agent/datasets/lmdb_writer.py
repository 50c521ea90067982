"""Write a dataset LMDB: under NAME.lmdb.partial, resumable, renamed into place when complete.

Writes go in large transactions (tens of MB, or every couple of seconds) with keys appended in
order; each commit also records how many samples are committed, which is where a rerun resumes.
map_size starts from the manifest's exact sizes with room to spare and doubles on MapFullError
(writemap stays off, so the file only grows as data is written: no sparse giant file).
"""

import errno
import hashlib
import json
import os
import time

from provision.agent.datasets import reader
from provision.agent.datasets.deps import import_lmdb

PARTIAL_SUFFIX = ".partial"
TXN_BYTES = 16 * 1024 * 1024  # bigger transactions measured slower (LMDB dirty-page lists)
TXN_SAMPLES = 20000
TXN_SECONDS = 2.0
_MiB = 1024 * 1024


class DiskFullError(OSError):
    kind = "disk_full"

    def __str__(self):
        return self.strerror or OSError.__str__(self)


class StageError(RuntimeError):
    kind = "stage"


def partial_path(path):
    return path + PARTIAL_SUFFIX


def lock_path(path):
    return path + "-lock"


def remove_files(path):
    """Remove an LMDB file and its lock file; returns bytes freed."""
    freed = 0
    for p in (path, lock_path(path)):
        try:
            freed += os.path.getsize(p)
            os.remove(p)
        except OSError:
            pass
    return freed


def _is_disk_full(exc):
    return (
        getattr(exc, "errno", None) in (errno.ENOSPC, errno.EDQUOT)
        or "No space left" in str(exc)
        or "quota" in str(exc).lower()
    )


def open_readonly(path):
    """(env, meta) of an LMDB file for status/verify; the caller closes env."""
    env = reader.open_env(path)
    try:
        return env, reader.read_meta(env)
    except Exception:
        env.close()
        raise


def describe(path):
    """What is at `path` (final or partial): None, or its meta plus size."""
    if not os.path.exists(path):
        return None
    if os.path.isdir(path):
        return {"path": path, "error": "is a directory, not a provision dataset file"}
    import_lmdb()
    try:
        env, meta = open_readonly(path)
        env.close()
    except Exception as exc:
        return {"path": path, "error": "unreadable: %s" % exc}
    meta["path"] = path
    meta["file_bytes"] = os.path.getsize(path)
    return meta


class DatasetWriter(object):
    def __init__(self, final_path, manifest, source, emit_log=None, extra_meta=None):
        self.final = final_path
        self.partial = partial_path(final_path)
        self.manifest = manifest
        self.source = source
        self.log = emit_log or (lambda msg: None)
        self.lmdb = import_lmdb()
        self.env = None
        self.txn = None
        self.pending = []  # (key, index record, data) of the open transaction, replayed on MapFull
        self.pending_bytes = 0
        self.committed = 0
        self.next_index = 0
        self.last_commit = time.monotonic()
        self.bytes_written = 0
        self.extra_meta = dict(extra_meta or {})
        self.txn_bytes, self.txn_samples, self.txn_seconds = TXN_BYTES, TXN_SAMPLES, TXN_SECONDS

    # -- opening ----------------------------------------------------------------------------
    def open(self, clean=False):
        """Open (or resume) the partial; returns the number of samples already committed."""
        if clean:
            remove_files(self.partial)
        if os.path.exists(self.partial):
            committed = self._try_resume()
            if committed is not None:
                return committed
        remove_files(self.partial)
        self._open_env(self._initial_map_size())
        m = self.manifest
        with self.env.begin(write=True, db=self.meta_db) as txn:
            for k, v in (
                ("format", reader.FORMAT),
                ("version", str(reader.FORMAT_VERSION)),
                ("fingerprint", m.fingerprint()),
                ("layout", m.layout),
                ("classes", json.dumps(m.classes, ensure_ascii=False)),
                ("source", self.source),
                ("expected_count", str(len(m))),
                ("committed", "0"),
                ("hash", "sha256"),
                ("started", _now()),
            ):
                txn.put(k.encode(), v.encode("utf-8"))
        self.committed = self.next_index = 0
        return 0

    def _try_resume(self):
        try:
            env = self.lmdb.open(
                self.partial,
                subdir=False,
                max_dbs=reader.MAX_DBS,
                map_size=self._initial_map_size(),
                readahead=False,
                lock=False,
            )
        except self.lmdb.Error as exc:
            self.log("discarding unreadable partial %s: %s" % (self.partial, exc))
            return None
        try:
            meta_db = env.open_db(reader.META_DB, create=False)
            with env.begin(db=meta_db) as txn:
                fp = txn.get(b"fingerprint")
                committed = int(txn.get(b"committed") or b"0")
        except self.lmdb.Error:
            env.close()
            return None
        if fp is None or fp.decode() != self.manifest.fingerprint():
            env.close()
            self.log(
                "the partial %s was built from a different source; starting over" % self.partial
            )
            return None
        self.env = env
        self._open_dbs()
        self.committed = self.next_index = committed
        self._grow_if_needed()
        return committed

    def _initial_map_size(self):
        need = self.manifest.estimate_lmdb_bytes()
        size = int(need * 1.25) + 64 * _MiB
        try:
            size = max(size, int(os.path.getsize(self.partial) * 1.5))
        except OSError:
            pass
        return size

    def _open_env(self, map_size):
        self.env = self.lmdb.open(
            self.partial,
            subdir=False,
            map_size=map_size,
            max_dbs=reader.MAX_DBS,
            readahead=False,
            meminit=False,
            writemap=False,
            lock=False,  # one writer per dataset is ensured by the stage lock; no -lock file
        )
        self._open_dbs()

    def _open_dbs(self):
        self.data_db = self.env.open_db(reader.DATA_DB)
        self.index_db = self.env.open_db(reader.INDEX_DB)
        self.meta_db = self.env.open_db(reader.META_DB)

    def _grow_if_needed(self):
        have = self.env.info()["map_size"]
        want = self._initial_map_size()
        if want > have:
            self.env.set_mapsize(want)

    # -- writing ----------------------------------------------------------------------------
    def add(self, index, relpath, label, data):
        """One sample; see add_many."""
        digest = hashlib.sha256(data).digest()
        self.add_many([(index, relpath, data, digest)], lambda i: label)

    def add_many(self, items, label_of):
        """Consecutive samples (index, relpath, data, sha256 digest of data), written in runs:
        one Cursor.putmulti per database per run (a put per sample from Python cost ~8 us
        each), committing whenever the transaction is full. What was valid before a bad item is
        written before the error is raised, as with one put per sample."""
        run = []
        for index, relpath, data, digest in items:
            problem = None
            if index != self.next_index:
                problem = "sample %d arrived while %d was expected" % (index, self.next_index)
            elif len(data) != self.manifest.sizes[index] or relpath != self.manifest.paths[index]:
                problem = (
                    "sample %d is %r (%d bytes) but the manifest says %r (%d bytes): the source "
                    "changed while staging; rerun"
                    % (
                        index,
                        relpath,
                        len(data),
                        self.manifest.paths[index],
                        self.manifest.sizes[index],
                    )
                )
            if problem is not None:
                if run:
                    self._put_run(run)
                raise StageError(problem)
            record = reader.encode_record(relpath, label_of(index), len(data), digest)
            run.append((reader.key(index), record, data))
            self.next_index += 1
            self.pending_bytes += len(data)
            if (
                self.pending_bytes >= self.txn_bytes
                or len(self.pending) + len(run) >= self.txn_samples
                or time.monotonic() - self.last_commit >= self.txn_seconds
            ):
                full, run = run, []
                self._put_run(full)
                self.commit()
        if run:
            self._put_run(run)

    def _put_run(self, run):
        self.pending.extend(run)
        try:
            if self.txn is None:
                self.txn = self.env.begin(write=True)
            _put_all(self.txn, self.data_db, self.index_db, run)
        except self.lmdb.MapFullError:
            self._grow_and_replay()  # replays self.pending, this run included
        except self.lmdb.Error as exc:
            self._fail(exc)

    def _grow_and_replay(self):
        while True:
            self.txn.abort()
            self.txn = None
            new = self.env.info()["map_size"] * 2
            self.log("growing the LMDB map to %d MiB" % (new // _MiB))
            self.env.set_mapsize(new)
            self.txn = self.env.begin(write=True)
            try:
                _put_all(self.txn, self.data_db, self.index_db, self.pending)
                return
            except self.lmdb.MapFullError:
                continue  # a transaction bigger than twice the map: double again

    def commit(self):
        if self.txn is None:
            return
        count = self.committed + len(self.pending)
        try:
            while True:
                try:
                    self.txn.put(b"committed", str(count).encode(), db=self.meta_db)
                    self.txn.commit()
                    break
                except self.lmdb.MapFullError:
                    self._grow_and_replay()
        except self.lmdb.Error as exc:
            self.txn = None
            self.pending, self.pending_bytes = [], 0
            self.next_index = self.committed
            self._fail(exc)
        self.txn = None
        self.bytes_written += self.pending_bytes
        self.pending, self.pending_bytes = [], 0
        self.committed = count
        self.last_commit = time.monotonic()

    def _fail(self, exc):
        if self.txn is not None:
            self.txn.abort()
            self.txn = None
            self.pending, self.pending_bytes = [], 0
            self.next_index = self.committed
        if _is_disk_full(exc):
            raise DiskFullError(
                errno.ENOSPC,
                "disk full writing %s after %d of %d samples; the partial dataset is kept there: "
                "free space and rerun to resume, or rerun with --clean to remove it"
                % (self.partial, self.committed, len(self.manifest)),
            )
        raise StageError("LMDB write to %s failed: %s" % (self.partial, exc))

    def close(self):
        """Commit what is complete and close (the partial stays for a resume)."""
        if self.env is None:
            return
        try:
            if self.txn is not None:
                self.commit()
        finally:
            self.env.close()
            self.env = None

    # -- finishing --------------------------------------------------------------------------
    def finalize(self, verify=False, on_verify=None):
        """Check the partial against the manifest, mark it complete, rename it into place."""
        self.commit()
        m = self.manifest
        if self.committed != len(m):
            raise StageError("only %d of %d samples were written" % (self.committed, len(m)))
        checksum, total, problems = check_records(self.env, m, full=verify, on_progress=on_verify)
        if problems:
            raise StageError(
                "verification of %s failed: %s (%d problems); the partial is kept: rerun with "
                "--clean to rebuild it" % (self.partial, problems[0], len(problems))
            )
        try:
            with self.env.begin(write=True, db=self.meta_db) as txn:
                for k, v in (
                    ("count", str(len(m))),
                    ("bytes", str(total)),
                    ("checksum", checksum),
                    ("complete", "1"),
                    ("completed", _now()),
                    ("verified", "full" if verify else "index"),
                ) + tuple(self.extra_meta.items()):
                    txn.put(k.encode(), v.encode("utf-8"))
        except self.lmdb.Error as exc:
            self._fail(exc)
        self.env.sync(True)
        self.env.close()
        self.env = None
        if os.path.isdir(self.final):
            raise StageError(
                "%s exists and is a directory; move it away or pick another --name" % self.final
            )
        os.replace(self.partial, self.final)
        remove_files_lock_only(self.partial)
        _fsync_dir(os.path.dirname(self.final))
        return {"checksum": checksum, "bytes": total, "count": len(m)}


def _put_all(txn, data_db, index_db, run):
    """(key, index record, data) triples in key order, appended to the data and index dbs."""
    data_cursor = txn.cursor(db=data_db)
    if hasattr(data_cursor, "putmulti"):
        data_cursor.putmulti([(k, data) for k, _, data in run], append=True)
        txn.cursor(db=index_db).putmulti([(k, rec) for k, rec, _ in run], append=True)
        return
    for k, rec, data in run:  # py-lmdb without putmulti
        txn.put(k, data, db=data_db, append=True)
        txn.put(k, rec, db=index_db, append=True)


def remove_files_lock_only(path):
    try:
        os.remove(lock_path(path))
    except OSError:
        pass


def check_records(env, manifest, full=False, on_progress=None):
    """(dataset checksum, total bytes, problems) for an env holding the manifest's samples.

    Always compares every index record (path, size, order, count) with the manifest; with
    `full`, also re-reads every value and compares its sha256 with the recorded one. This runs
    after the last sample arrived, so it is on the clock: records are compared as bytes against
    the manifest (~2 us each), decoded only to word a problem.
    """
    data_db = env.open_db(reader.DATA_DB, create=False)
    index_db = env.open_db(reader.INDEX_DB, create=False)
    problems = []
    dataset = hashlib.sha256()
    total = 0
    n = len(manifest) if manifest is not None else None
    if manifest is not None:
        paths = [p.encode("utf-8") for p in manifest.paths]
        sizes = manifest.sizes
        labels = manifest.labels
    head = reader.RECORD.size
    unpack = reader.RECORD.unpack_from
    unkey = reader.KEY.unpack
    has_label = reader.HAS_LABEL
    seen = 0
    last = time.monotonic()
    with env.begin() as txn:
        for k, rec in txn.cursor(db=index_db).iternext():
            i = unkey(k)[0]
            flags, label, size, digest = unpack(rec)
            if i != seen:
                problems.append("sample %d missing (found %d)" % (seen, i))
                seen = i
            if manifest is not None:
                want_label = labels[i] if labels is not None and i < n else None
                if i >= n:
                    problems.append("extra sample %d" % i)
                elif (
                    size != sizes[i]
                    or rec[head:] != paths[i]
                    or (label if flags & has_label else None) != want_label
                ):
                    relpath = reader.decode_record(rec)[0]
                    problems.append(
                        "sample %d is %r/%d bytes, manifest says %r/%d"
                        % (i, relpath, size, manifest.paths[i], manifest.sizes[i])
                    )
            if full:
                value = txn.get(k, db=data_db)
                if value is None:
                    problems.append(
                        "sample %d (%r) has no data" % (i, reader.decode_record(rec)[0])
                    )
                elif len(value) != size or hashlib.sha256(value).digest() != digest:
                    problems.append(
                        "sample %d (%r) does not match its checksum"
                        % (i, reader.decode_record(rec)[0])
                    )
                if on_progress is not None and time.monotonic() - last >= 0.5:
                    last = time.monotonic()
                    on_progress(seen + 1)
            dataset.update(digest)
            total += size
            seen += 1
            if len(problems) > 100:
                break
        data_entries = txn.stat(data_db)["entries"]
        if data_entries != seen:
            problems.append("%d data records for %d index records" % (data_entries, seen))
    if manifest is not None and seen != n and not problems:
        problems.append("%d samples, manifest has %d" % (seen, n))
    return "sha256:" + dataset.hexdigest(), total, problems


def _now():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _fsync_dir(path):
    try:
        fd = os.open(path or ".", os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
