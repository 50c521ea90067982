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

import fcntl
import os
import time

from provision.agent.datasets import DEFAULT_STALL, framing, lmdb_writer
from provision.agent.datasets.builder import build, free_bytes, stage_host_path, verify_file
from provision.agent.datasets.deps import (
    MissingDependency,
    import_lmdb,
    lmdb_version,
    python_info,
    python_tag,
)
from provision.agent.datasets.download import stage_url
from provision.agent.datasets.lmdb_writer import StageError
from provision.agent.datasets.manifest import Manifest
from provision.agent.datasets.pipeline import (
    Emitter,
    StreamEnded,  # noqa: F401  (re-exported: ingest.StreamEnded)
    sample_batches,
)


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
            return stage_host_path(path, source, emit, log, verify_, clean, stall)
        if kind == "url":
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


__all__ = ["stage", "status", "verify", "build", "verify_file", "MissingDependency"]
