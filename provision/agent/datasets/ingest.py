"""Agent commands `stage`, `dataset_status`, `verify_dataset`: build dataset LMDBs on the host.

stage: the samples arrive as ONE stream on stdin from the controller (their bytes back to back in
manifest order, in frames sent raw or zstd-compressed: pipeline.sample_batches, framing.py), or
are read from a folder/archive already on the host, or from an http(s) URL the host downloads. A
reader thread takes the input apart while the main thread writes LMDB transactions, so
transfer, hashing and writes overlap (pipeline.py). Nothing is unpacked to disk: each sample
goes from the stream straight into the LMDB.

Resume: the controller asks `dataset_status` first and streams only samples from the partial's
committed count on. If the partial moved further meanwhile (the previous agent committed its last
samples after the status call), the surplus at the head of the stream is read and dropped.
"""

import errno
import fcntl
import json
import os
import time

from provision.agent.datasets import DEFAULT_STALL, framing, lmdb_writer, reader
from provision.agent.datasets.deps import (
    MissingDependency,
    import_lmdb,
    lmdb_version,
    python_info,
    python_tag,
)
from provision.agent.datasets.lmdb_writer import DiskFullError, StageError
from provision.agent.datasets.manifest import Manifest
from provision.agent.datasets.pipeline import (
    Emitter,
    Progress,
    StreamEnded,  # noqa: F401  (re-exported: ingest.StreamEnded)
    one_by_one,
    run_pipeline,
    sample_batches,
    start_feed,
)

READER_MODULE = "provision_lmdb.py"
_MiB = 1024 * 1024


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


class StageLock(object):
    """One stage of a dataset at a time on this host (flock on a hidden file beside it)."""

    def __init__(self, path, wait):
        d, base = os.path.split(path)
        self.dataset = path
        self.path = os.path.join(d, "." + base + ".stage-lock")
        self.wait = wait
        self.fd = None

    def __enter__(self):
        deadline = time.monotonic() + self.wait
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                if time.monotonic() > deadline:
                    raise StageError(
                        "another stage of %s is still running on this host (lock %s held for "
                        "over %ds); wait for it or stop it" % (self.dataset, self.path, self.wait)
                    ) from None
                time.sleep(0.2)
                continue
            try:
                same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
            except OSError:
                same = False
            if same:
                self.fd = fd
                return self
            os.close(fd)  # the file was removed by the previous holder: lock the new one

    def __exit__(self, *exc):
        try:
            os.remove(self.path)
        except OSError:
            pass
        os.close(self.fd)


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
            result = _finished_result(path, final, skipped=True, seconds=time.monotonic() - self.t0)
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


def _finished_result(path, meta, skipped, seconds):
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


# -- agent commands ---------------------------------------------------------------------------
def resolve_path(request):
    """The dataset file: `path` as given; else `dest` (a folder, or a file ending in .lmdb);
    else <data_dir>/datasets/NAME.lmdb with data_dir chosen as the `facts` command does."""
    if request.get("path"):
        return request["path"]
    name = request.get("name")
    if not name:
        raise StageError("the request names no dataset (name) and no path")
    dest = request.get("dest")
    if dest:
        return dest if dest.endswith(".lmdb") else os.path.join(dest, name + ".lmdb")
    from provision.agent.facts import data_dir  # lazy: only without a destination (per-call agent)

    chosen = data_dir.choose(
        {"data_dir": request.get("data_dir")} if request.get("data_dir") else {}
    )
    if not chosen.get("path"):
        raise StageError(
            "no data directory for datasets on this host (%s); give one with --dest DIR or the "
            "data_dir inventory variable" % chosen.get("reason", "none found")
        )
    return os.path.join(chosen["path"], "datasets", name + ".lmdb")


def _path(request):
    path = resolve_path(request)
    if not path or not isinstance(path, str):
        raise StageError("the request has no dataset path")
    path = os.path.abspath(os.path.expanduser(path))
    if os.path.basename(path) in ("", ".", ".."):
        raise StageError("bad dataset path %r" % request.get("path"))
    return path


def status(request, ctx):
    """What is at the destination: finished / partial datasets, free space, lmdb availability."""
    path = _path(request)
    fingerprint = request.get("fingerprint")
    out = {
        "path": path,
        "python": python_info(),
        "lmdb": lmdb_version(),
        "free_bytes": free_bytes(os.path.dirname(path)),
        "codecs": framing.codecs(),
        "final": None,
        "partial": None,
        "up_to_date": False,
        "resume_from": 0,
    }
    if out["lmdb"] is None:
        out["final_exists"] = os.path.exists(path)
        return out
    final = lmdb_writer.describe(path)
    partial = lmdb_writer.describe(lmdb_writer.partial_path(path))
    keep = (
        "fingerprint",
        "count",
        "committed",
        "complete",
        "checksum",
        "file_bytes",
        "error",
        "layout",
        "expected_count",
    )
    out["final"] = dict((k, v) for k, v in (final or {}).items() if k in keep) or None
    out["partial"] = dict((k, v) for k, v in (partial or {}).items() if k in keep) or None
    if final and final.get("complete") == "1" and final.get("fingerprint") == fingerprint:
        out["up_to_date"] = True
    if partial and fingerprint and partial.get("fingerprint") == fingerprint:
        out["resume_from"] = int(partial.get("committed", 0))
    return out


def verify(request, ctx):
    path = _path(request)
    emitter = Emitter(ctx)
    try:
        manifest = Manifest.from_wire(request["manifest"]) if request.get("manifest") else None
        return verify_file(path, manifest, emitter.emit)
    finally:
        emitter.close()


def stage(request, ctx):
    emitter = Emitter(ctx)
    try:
        return _stage(request, emitter.emit, emitter.log, ctx.stdin)
    except BaseException:
        # a controller waiting for `ready` (start "auto") must not wait for a stream's end
        emitter.emit(phase="ready", abort=True)
        raise
    finally:
        emitter.close()


def _stage(request, emit, log, stdin):
    path = _path(request)
    source = request.get("source") or {}
    kind = source.get("kind")
    verify_ = bool(request.get("verify"))
    clean = bool(request.get("clean"))
    stall = float(request.get("stall_timeout") or DEFAULT_STALL)
    emit(phase="start", pid=os.getpid())
    import_lmdb()
    _interrupt_on_signals()
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)  # the stage lock lives there
    except OSError as exc:
        raise StageError(
            "cannot create %s: %s" % (os.path.dirname(path), exc.strerror or exc)
        ) from None
    with StageLock(path, wait=stall + 30):
        if kind == "stream":
            manifest = Manifest.from_wire(source["manifest"])
            # "auto": this side picks the resume point and tells the controller, which waits
            # for that `ready` event before it streams (one round trip instead of two)
            auto = source.get("start") == "auto"
            # framed: frames raw or zstd, the controller's choice per frame (framing.py); the
            # codecs this host decodes go back in `ready` (or came from dataset_status)
            frames = framing.FrameReader(stdin) if source.get("framed") else None
            result = build(
                path,
                manifest,
                lambda first: sample_batches(frames or stdin, manifest, first),
                source.get("description") or "controller stream",
                emit,
                log,
                verify=verify_,
                clean=clean,
                stall_timeout=stall,
                start=None if auto else int(source.get("start") or 0),
                commit=request.get("commit"),
                batched=True,
                on_ready=(
                    (lambda **f: emit(phase="ready", codecs=framing.codecs(), python_tag=python_tag(), **f))
                    if auto
                    else None
                ),
            )
            if frames is not None and frames.raw_bytes:
                result["wire_bytes"] = frames.raw_bytes
                result["stream_bytes"] = frames.decoded_bytes
            return result
        if kind == "host":
            return _stage_host_path(path, source, emit, log, verify_, clean, stall)
        if kind == "url":
            # cycle: download builds on this module's builder (same folder; not yet split)
            from provision.agent.datasets.download import stage_url

            return stage_url(path, source, emit, log, verify_, clean, stall)
    raise StageError("unknown source kind %r (stream, host or url)" % kind)


class Interrupted(KeyboardInterrupt):
    pass


def _interrupt_on_signals():
    """SIGTERM / SIGHUP end the stage like Ctrl-C: the complete samples are committed first."""
    import signal

    def handler(signum, frame):
        raise Interrupted("signal %d" % signum)

    for sig in (signal.SIGTERM, signal.SIGHUP):
        try:
            signal.signal(sig, handler)
        except (ValueError, OSError):
            pass  # not the main thread (in-process use): nothing to do


def _stage_host_path(
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


__all__ = ["stage", "status", "verify", "build", "verify_file", "MissingDependency"]
