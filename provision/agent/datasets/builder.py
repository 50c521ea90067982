"""The core of a dataset stage, shared by every source kind (a controller stream, a folder or
archive on the host, a downloaded URL: download.py) and by `provision stage --local`: build (or
resume, or skip) one LMDB, check it against its checksums, stage a path on the host. ingest.py's
agent commands and download.py both build on it; neither imports the other's module back.
"""

import errno
import json
import os
import time

from provision.agent.datasets import DEFAULT_STALL, lmdb_writer, reader
from provision.agent.datasets.deps import import_lmdb
from provision.agent.datasets.lmdb_writer import DiskFullError, StageError
from provision.agent.datasets.pipeline import (
    Progress,
    one_by_one,
    run_pipeline,
    start_feed,
)

READER_MODULE = "provision_lmdb.py"


# -- small helpers ----------------------------------------------------------------------------
def free_bytes(path):
    """Free bytes for an unprivileged writer on the filesystem that holds (or will hold) path."""
    probe = os.path.abspath(path)
    while not os.path.exists(probe):
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    st = os.statvfs(probe)
    return st.f_bavail * st.f_frsize


def _gb(n):
    return "%.2f GB" % (n / 1e9) if n >= 1e8 else "%.1f MB" % (n / 1e6)


def check_space(path, need, extra_note=""):
    free = free_bytes(os.path.dirname(path))
    if need > free:
        raise DiskFullError(
            errno.ENOSPC,
            "not enough space for %s: it needs about %s, %s is free.%s Free some space, or "
            "stage to a bigger disk with --dest DIR" % (path, _gb(need), _gb(free), extra_note),
        )
    return free


def write_reader_module(directory):
    """Put provision_lmdb.py (reader.py: stdlib + lmdb only) beside the datasets."""
    import pkgutil  # here, not at import: every stage call's start-up counts

    data = pkgutil.get_data("provision.agent.datasets", "reader.py")
    target = os.path.join(directory, READER_MODULE)
    try:
        with open(target, "rb") as fh:
            if fh.read() == data:
                return target
    except OSError:
        pass
    import tempfile

    fd, tmp = tempfile.mkstemp(prefix=os.path.basename(target) + ".tmp-", dir=os.path.dirname(target) or ".")
    os.fchmod(fd, 0o644)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.replace(tmp, target)
    return target


# -- the core, shared by every source kind and by `provision stage --local` ---------------------
def build(path, manifest, items_from, source_desc, emit, log, **options):
    """Build (or resume, or skip) the LMDB at `path` for `manifest`; see `Build`."""
    return Build(path, manifest, items_from, source_desc, emit, log, **options).run()


class Build(object):
    """One dataset build: skip if up to date, else open or resume the partial, write, finish.

    items_from(first) -> iterator of (index, relpath, data) from sample `first` on, or, with
    `batched`, of lists of them (a stream read in pieces: one hand-over per piece).
    `start`: where the caller's stream begins (an int for a controller stream with a known
    resume point); None: this side picks the partial's committed count, and `on_ready(start=K)`
    tells the caller (a controller waiting to stream from K), or `on_ready(skip=True)` when
    there is nothing to do, or `on_ready(abort=True)` when the build fails before reading.
    """

    def __init__(
        self,
        path,
        manifest,
        items_from,
        source_desc,
        emit,
        log,
        verify=False,
        clean=False,
        stall_timeout=DEFAULT_STALL,
        start=None,
        extra_need=0,
        write_reader=True,
        extra_meta=None,
        commit=None,
        on_ready=None,
        batched=False,
    ):
        self.path = path
        self.manifest = manifest
        self.items_from = items_from
        self.source_desc = source_desc
        self.emit = emit
        self.log = log
        self.verify = verify
        self.clean = clean
        self.stall_timeout = stall_timeout
        self.start = start
        self.extra_need = extra_need
        self.write_reader = write_reader
        self.extra_meta = extra_meta
        self.commit = commit
        self.on_ready = on_ready
        self.batched = batched
        self.ready_sent = False
        self.feed = None
        self.t0 = time.monotonic()

    def _start_feed(self, first):
        items = self.items_from(first)
        return start_feed(items if self.batched else one_by_one(items))

    def _ready(self, **fields):
        if self.on_ready is not None and not self.ready_sent:
            self.ready_sent = True
            self.on_ready(**fields)

    def run(self):
        # A stream with a known start is parsed right away, while the checks and the LMDB
        # set-up below run: the controller is already sending.
        if self.start is not None and self.start < len(self.manifest):
            self.feed = self._start_feed(self.start)
        try:
            return self._run()
        except BaseException:
            self._ready(abort=True)
            raise
        finally:
            if self.feed is not None:
                self.feed.close()

    def _run(self):
        path, manifest = self.path, self.manifest
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
        except OSError as exc:
            raise StageError(
                "cannot create %s: %s" % (os.path.dirname(path), exc.strerror or exc)
            ) from None
        fingerprint = manifest.fingerprint()
        final = lmdb_writer.describe(path)
        if final and (final.get("error") or final.get("format") != reader.FORMAT):
            raise StageError(
                "%s exists and is not a provision dataset (%s); move it away or pick another "
                "--name or --dest" % (path, final.get("error") or "no format marker")
            )
        if (
            final
            and final.get("complete") == "1"
            and final.get("fingerprint") == fingerprint
            and not self.clean
        ):
            self._ready(skip=True, path=path)
            result = finished_result(path, final, skipped=True, seconds=time.monotonic() - self.t0)
            if self.verify:
                result["verify"] = verify_file(path, manifest, self.emit)
            if self.write_reader:
                result["reader"] = write_reader_module(os.path.dirname(path))
            return result
        writer = lmdb_writer.DatasetWriter(
            path, manifest, self.source_desc, emit_log=self.log, extra_meta=self.extra_meta
        )
        if self.commit:  # tuning (and tests): commit every N samples / S seconds
            writer.txn_samples = int(self.commit.get("samples") or writer.txn_samples)
            writer.txn_seconds = float(self.commit.get("seconds") or writer.txn_seconds)
        # Refuse before creating anything when even a resume cannot fit (what a partial already
        # holds counts as written); the exact check follows once the resume point is known.
        have = 0 if self.clean else _size(writer.partial)
        check_space(
            path, manifest.estimate_lmdb_bytes() - have + self.extra_need, _old_version_note(final)
        )
        committed = writer.open(clean=self.clean)
        try:
            summary = self._write(writer, committed, final)
        except BaseException:
            try:
                writer.close()  # commit what is complete: the next run resumes there
            except Exception as exc:
                self.log("could not commit the last samples: %s" % exc)
            if self.clean:
                lmdb_writer.remove_files(writer.partial)
            raise
        result = {
            "path": path,
            "count": summary["count"],
            "bytes": summary["bytes"],
            "file_bytes": os.path.getsize(path),
            "checksum": summary["checksum"],
            "fingerprint": fingerprint,
            "layout": manifest.layout,
            "classes": len(manifest.classes),
            "labelled": manifest.labels is not None,
            "resumed_from": committed,
            "skipped": False,
            "verified": bool(self.verify),
            "seconds": round(time.monotonic() - self.t0, 3),
        }
        if self.write_reader:
            result["reader"] = write_reader_module(os.path.dirname(path))
        return result

    def _write(self, writer, committed, final):
        manifest = self.manifest
        first = committed if self.start is None else self.start
        if committed < first:
            raise StageError(
                "the partial at %s holds %d samples but the stream starts at %d; rerun the stage"
                % (writer.partial, committed, first)
            )
        need = manifest.estimate_lmdb_bytes(committed) + self.extra_need
        check_space(self.path, need, _old_version_note(final))
        self._ready(start=committed, path=self.path)
        if committed:
            self.log(
                "resuming %s at sample %d of %d"
                % (os.path.basename(self.path), committed, len(manifest))
            )
        done_bytes = sum(manifest.sizes[:committed])
        progress = Progress(
            self.emit, "stage", len(manifest), manifest.total_bytes, committed, done_bytes
        )
        progress.committed = lambda: writer.committed
        progress.start()
        try:
            if first < len(manifest):
                if self.feed is None:
                    self.feed = self._start_feed(first)
                run_pipeline(
                    self.feed, writer, manifest, progress, self.stall_timeout, skip_until=committed
                )
            if self.verify:
                progress.phase = "verify"
            return writer.finalize(
                verify=self.verify,
                on_verify=lambda n: self.emit(phase="verify", done=n, total=len(manifest)),
            )
        finally:
            progress.stop()


def _size(path):
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _old_version_note(final):
    if final and final.get("file_bytes"):
        return " (the previous version, %s, stays until the new one is complete.)" % _gb(
            final["file_bytes"]
        )
    return ""


def finished_result(path, meta, skipped, seconds):
    return {
        "path": path,
        "count": int(meta.get("count", 0)),
        "bytes": int(meta.get("bytes", 0)),
        "file_bytes": meta.get("file_bytes"),
        "checksum": meta.get("checksum"),
        "fingerprint": meta.get("fingerprint"),
        "layout": meta.get("layout"),
        "classes": len(json.loads(meta.get("classes") or "[]")),
        "resumed_from": None,
        "skipped": skipped,
        "verified": False,
        "seconds": round(seconds, 3),
    }


def verify_file(path, manifest=None, emit=None):
    """Re-read every record of a finished dataset against its checksums (and the manifest)."""
    import_lmdb()
    t0 = time.monotonic()
    env, meta = lmdb_writer.open_readonly(path)
    try:
        reader.check_format(meta, path)
        on_progress = (
            (lambda n: emit(phase="verify", done=n, total=int(meta["count"]))) if emit else None
        )
        checksum, total, problems = lmdb_writer.check_records(
            env, manifest, full=True, on_progress=on_progress
        )
    finally:
        env.close()
    if checksum != meta.get("checksum"):
        problems.append(
            "dataset checksum %s differs from the recorded %s" % (checksum, meta.get("checksum"))
        )
    if manifest is None and int(meta.get("count", -1)) != int(
        meta.get("expected_count", meta.get("count", -1))
    ):
        problems.append(
            "count %s differs from the expected %s"
            % (meta.get("count"), meta.get("expected_count"))
        )
    return {
        "ok": not problems,
        "problems": problems[:20],
        "count": int(meta.get("count", 0)),
        "bytes": total,
        "checksum": checksum,
        "seconds": round(time.monotonic() - t0, 3),
    }


def stage_host_path(
    path, source, emit, log, verify_, clean, stall, display=None, extra=None, extra_meta=None
):
    src = os.path.abspath(os.path.expanduser(source.get("path") or ""))
    if not os.path.exists(src):
        raise StageError("%s does not exist on this host" % src)
    if os.path.abspath(src) == os.path.abspath(path):
        raise StageError("the source and the destination are the same file")
    emit(phase="list", done=0, total=None)
    from provision.agent.datasets.sources import open_source  # not on a stream's start-up path

    plan = open_source(
        src, source.get("layout") or "auto", source.get("labels"), display=display or src
    )
    for w in plan.warnings:
        log(w)
    result = build(
        path,
        plan.manifest,
        plan.iter_samples,
        display or src,
        emit,
        log,
        verify=verify_,
        clean=clean,
        stall_timeout=stall,
        extra_meta=extra_meta,
    )
    result["warnings"] = plan.warnings
    if extra:
        result.update(extra)
    return result
