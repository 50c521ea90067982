"""The stage pipeline on the host: a reader thread turns the input into samples (with their
sha256) while the main thread writes them into the LMDB; the queue between them is bounded in
bytes, and events go to the controller from a thread of their own (never blocking the writes).

The controller's stream is the samples' bytes back to back, in manifest order from the resume
point (`sample_batches`): names, sizes and order are in the manifest the request carried, so
the stream has no per-file headers to build, send or parse.
"""

import collections
import fcntl
import hashlib
import threading
import time

from provision.agent.datasets import framing
from provision.agent.datasets.lmdb_writer import StageError

QUEUE_BYTES = 64 * 1024 * 1024
RUN_BYTES = 4 * 1024 * 1024  # what the writer takes from the queue at a time
PROGRESS_INTERVAL = 0.5


class StreamEnded(StageError):
    kind = "stream_ended"


class Progress(object):
    """Counts shared by the pipeline; a ticker thread turns them into progress events."""

    def __init__(self, emit, phase, total, total_bytes, start=0, start_bytes=0):
        self.emit = emit
        self.phase = phase
        self.total = total
        self.total_bytes = total_bytes
        self.done = start
        self.bytes = start_bytes
        self.base_done = start
        self.base_bytes = start_bytes
        self.t0 = time.monotonic()
        self._stop = threading.Event()
        self._thread = None
        self._lock = threading.Lock()
        self._window = []  # (t, bytes, done) of the last few seconds, for current rates
        self.committed = lambda: None  # samples safely on disk: where a rerun resumes

    def event(self):
        now = time.monotonic()
        with self._lock:
            done, nbytes = self.done, self.bytes
        self._window.append((now, nbytes, done))
        while len(self._window) > 2 and now - self._window[0][0] > 5.0:
            self._window.pop(0)
        t_old, b_old, d_old = self._window[0]
        span = now - t_old
        if span < 0.2:
            span = max(now - self.t0, 1e-6)
            b_old, d_old = self.base_bytes, self.base_done
        rate_b = (nbytes - b_old) / span
        rate_s = (done - d_old) / span
        left = max(self.total_bytes - nbytes, 0)
        eta = left / rate_b if rate_b > 0 else None
        return {
            "phase": self.phase,
            "done": done,
            "total": self.total,
            "bytes": nbytes,
            "total_bytes": self.total_bytes,
            "samples_per_s": round(rate_s, 1),
            "bytes_per_s": round(rate_b),
            "eta_s": round(eta, 1) if eta is not None else None,
            "elapsed_s": round(now - self.t0, 2),
            "committed": self.committed(),
        }

    def add(self, samples, nbytes):
        with self._lock:
            self.done += samples
            self.bytes += nbytes

    def tick(self):
        try:
            self.emit(**self.event())
        except Exception:
            pass  # a lost controller must not stop the writes: the data still gets committed

    def start(self, interval=PROGRESS_INTERVAL):
        def run():
            while not self._stop.wait(interval):
                self.tick()

        self._thread = threading.Thread(target=run, name="progress", daemon=True)
        self._thread.start()
        return self

    def stop(self):
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=1.0)
        self.tick()


class Emitter(object):
    """Events to the controller without ever blocking the stage.

    A dead or stalled link fills stdout's pipe and would block whoever writes to it; here only
    this thread does, events queue up (the oldest progress is dropped when full), and the
    writes go on. A heartbeat keeps the controller's stall watchdog quiet during long quiet
    steps (listing a network disk, fsync of a big file).
    """

    def __init__(self, ctx, heartbeat=1.0, limit=256):
        self.ctx = ctx
        self.items = []
        self.limit = limit
        self.cond = threading.Condition()
        self.closed = False
        self.dead = False
        self.ready_sent = False
        self.heartbeat = heartbeat
        self.thread = threading.Thread(target=self._run, name="emitter", daemon=True)
        self.thread.start()

    def _put(self, kind, fields):
        with self.cond:
            if self.closed or self.dead:
                return
            if len(self.items) >= self.limit:
                for k, item in enumerate(self.items):
                    if item[0] == "progress":
                        del self.items[k]
                        break
                else:
                    return
            self.items.append((kind, fields))
            self.cond.notify()

    def emit(self, **fields):
        if fields.get("phase") == "ready":
            if self.ready_sent:
                return  # the controller acts on the first one only
            self.ready_sent = True
        self._put("progress", fields)

    def log(self, message):
        self._put("log", {"message": message})

    def _run(self):
        while True:
            with self.cond:
                if not self.items and not self.closed:
                    self.cond.wait(self.heartbeat)
                if not self.items:
                    if self.closed:
                        return
                    item = ("progress", {"phase": "heartbeat"})
                else:
                    item = self.items.pop(0)
            try:
                if item[0] == "log":
                    self.ctx.log(item[1]["message"])
                else:
                    self.ctx.progress(**item[1])
            except (OSError, ValueError):
                self.dead = True  # stdout gone (controller lost): keep working silently
                return

    def close(self, timeout=2.0):
        """Flush what is queued (bounded: a stalled link must not hold the result back)."""
        with self.cond:
            self.closed = True
            self.cond.notify()
        self.thread.join(timeout)


class BoundedQueue(object):
    """FIFO bounded in bytes (one oversized item is let in alone); the writer takes items in
    runs (get_many), so the two threads meet once per run, not once per sample."""

    def __init__(self, limit=QUEUE_BYTES):
        self.limit = limit
        self.items = collections.deque()
        self.size = 0
        self.cond = threading.Condition()
        self.closed = False
        self.waiting = False  # the writer waits for items: wake it on the next put

    def put(self, item, nbytes):
        with self.cond:
            while self.size and self.size + nbytes > self.limit and not self.closed:
                self.cond.wait()
            if self.closed:
                raise StageError("writer stopped")
            self.items.append((item, nbytes))
            self.size += nbytes
            if self.waiting:
                self.cond.notify_all()

    def get_many(self, timeout, max_bytes=RUN_BYTES):
        """([items], timed_out): every queued item up to about `max_bytes`, waiting up to
        `timeout` seconds for the first."""
        with self.cond:
            deadline = time.monotonic() + timeout
            while not self.items:
                left = deadline - time.monotonic()
                if left <= 0:
                    return [], True
                self.waiting = True
                try:
                    self.cond.wait(left)
                finally:
                    self.waiting = False
            out = []
            taken = 0
            while self.items and (not out or taken < max_bytes):
                item, nbytes = self.items.popleft()
                out.append(item)
                taken += nbytes
            self.size -= taken
            self.cond.notify_all()  # room for the reader
            return out, False

    def get(self, timeout):
        items, timed_out = self.get_many(timeout, max_bytes=0)
        return (items[0] if items else None), timed_out

    def close(self):
        with self.cond:
            self.closed = True
            self.cond.notify_all()


_DONE = ("done",)


def _produce(batches, queue):
    """Reader thread: lists of (index, relpath, data) from the source into the queue, one queue
    item per list, each sample with its sha256 (hashlib lets go of the GIL: the hashing overlaps
    with the writer's puts). One hand-over per list, not per sample: the two threads meet once
    per read of the stream, so neither spends its time waking the other."""
    sha256 = hashlib.sha256
    try:
        for batch in batches:
            items = [(i, relpath, data, sha256(data).digest()) for i, relpath, data in batch]
            if items:
                queue.put(items, sum(len(item[2]) for item in items))
        queue.put(_DONE, 0)
    except BaseException as exc:  # handed to the writer, which reports it after committing
        try:
            queue.put(("error", exc), 0)
        except StageError:
            pass


def one_by_one(items):
    """Batches of one sample, for sources read a file at a time (a folder on the host)."""
    for item in items:
        yield [item]


def sample_batches(stream, manifest, first, chunk=1 << 20):
    """Lists of (index, relpath, data) from the controller's stream: the bytes of samples
    first.. back to back in manifest order (their names and sizes are in the manifest, so the
    stream carries nothing else), one list per read; `stream` is stdin or a framing.FrameReader.

    The stream must hold exactly those samples: it ending inside one is StreamEnded (the
    complete ones are committed, a rerun resumes there); bytes past the last are an error."""
    try:
        fcntl.fcntl(stream.fileno(), 1031, 1 << 20)  # F_SETPIPE_SZ: fewer wake-ups per MB
    except Exception:
        pass
    raw_read = getattr(stream, "read1", None) or stream.read
    sizes, paths, n = manifest.sizes, manifest.paths, len(manifest)
    i = first

    def read(k):
        try:
            return raw_read(k)
        except framing.FramesTruncated as exc:
            raise StreamEnded("the stream ended at sample %d of %d (%s)" % (i, n, exc)) from None

    buf, pos = b"", 0
    batch = []
    while i < n:
        size = sizes[i]
        have = len(buf) - pos
        if have < size:
            if batch:
                yield batch  # hand over what is complete before waiting for more
                batch = []
            # gather the rest of sample i (and whatever follows it in the same reads) in one
            # join: a big sample is never copied once per read
            parts = [buf[pos:]] if have else []
            while have < size:
                more = read(max(chunk, size - have))
                if not more:
                    where = "after sample %d" % i if not have else "inside sample %d" % i
                    raise StreamEnded(
                        "the input ended %s of %d (connection lost or controller stopped?)"
                        % (where, n)
                    )
                parts.append(more)
                have += len(more)
            buf, pos = (parts[0] if len(parts) == 1 else b"".join(parts)), 0
        batch.append((i, paths[i], buf[pos : pos + size]))
        pos += size
        i += 1
    if batch:
        yield batch
    if pos < len(buf) or read(1):
        raise StageError("the stream holds more than the %d samples of the manifest" % n)


def start_feed(batches):
    """Start reading the source in its own thread, into a queue bounded in bytes."""
    queue = BoundedQueue()
    threading.Thread(target=_produce, args=(batches, queue), name="source", daemon=True).start()
    return queue


def run_pipeline(queue, writer, manifest, progress, stall_timeout, skip_until=0):
    """Write items from the feed into `writer` as they come.

    Items with an index below `skip_until` are already committed (a resume that overlapped the
    previous run's last commit) and are dropped.
    """
    label = manifest.label
    try:
        done = False
        while not done:
            items, timed_out = queue.get_many(stall_timeout)
            if timed_out:
                raise StreamEnded(
                    "no data for %ds after sample %d of %d: the connection looks lost"
                    % (stall_timeout, writer.next_index, len(manifest))
                )
            run = []
            failure = None
            for entry in items:
                if entry is _DONE:
                    done = True
                    break
                if entry[0] == "error":
                    failure = entry[1]
                    break
                run.extend(item for item in entry if item[0] >= skip_until)
            if run:
                writer.add_many(run, label)
                progress.add(len(run), sum(len(item[2]) for item in run))
            if failure is not None:
                raise failure
    finally:
        queue.close()
    if writer.next_index != len(manifest):
        raise StreamEnded(
            "the input ended after sample %d of %d (connection lost or controller stopped?)"
            % (writer.next_index, len(manifest))
        )
