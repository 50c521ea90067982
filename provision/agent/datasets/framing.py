"""The stage stream's frames: the sample stream cut into frames, each sent raw or zstd-compressed.

    frame = kind (1 byte: b"R" raw, b"Z" one zstd frame) + length (4 bytes, big-endian) + body

The controller decides per frame (provision/staging/compress.py): compression only pays where
the data compresses and the link, not the CPU, is what limits the stage. A host whose Python
cannot import `zstandard` says so (`codecs()`), and then gets raw frames only: compression is
never required. `FrameReader` turns the frames back into the plain sample stream for
pipeline.sample_batches.
"""

import struct

RAW = b"R"
ZSTD = b"Z"
HEADER = struct.Struct(">cI")
MAX_FRAME = 64 * 1024 * 1024  # a bigger length means the stream is not what we think


class FrameError(ValueError):
    kind = "stream"


class FramesTruncated(FrameError):
    kind = "stream_ended"


def _zstandard():
    """The host's zstandard, else the copy the controller shipped (provision/staging/hostlib.py)
    -- looked up again on each call: it may land while a stage runs."""
    # looked up on each call: the controller's zstandard may be shipped while a stage runs
    from provision.agent.datasets.deps import import_optional

    return import_optional("zstandard")


def codecs():
    """The codecs this host can decode besides raw: ["zstd"] where zstandard imports."""
    return ["zstd"] if _zstandard() is not None else []


def codecs_command(request, ctx):
    """Agent command `stage_codecs`: what codecs() says now (after zstandard was shipped)."""
    return {"codecs": codecs()}


def frame(kind, body):
    return HEADER.pack(kind, len(body)) + body


class FrameReader(object):
    """A file-like `read1`/`read` over the decoded frames of `stream`."""

    def __init__(self, stream):
        self.stream = stream
        self.read_raw = getattr(stream, "read1", None) or stream.read
        self.left = 0  # bytes left in the current raw frame
        self.pending = b""  # decoded bytes not yet handed out
        self.ended = False
        self.decompressor = None
        self.raw_bytes = 0  # what arrived on the wire
        self.decoded_bytes = 0  # what the frames decoded to

    def _exact(self, n):
        parts = []
        got = 0
        while got < n:
            more = self.stream.read(n - got)
            if not more:
                break
            parts.append(more)
            got += len(more)
        return b"".join(parts)

    def _next_frame(self):
        head = self._exact(HEADER.size)
        if not head:
            self.ended = True
            return
        if len(head) < HEADER.size:
            raise FramesTruncated("the stream ended inside a frame header")
        kind, length = HEADER.unpack(head)
        if length > MAX_FRAME or kind not in (RAW, ZSTD):
            raise FrameError("bad frame header %r: the stream is not what the agent expects" % head)
        self.raw_bytes += HEADER.size + length
        if kind == RAW:
            self.left = length
            return
        body = self._exact(length)
        if len(body) < length:
            raise FramesTruncated("the stream ended inside a compressed frame")
        if self.decompressor is None:
            zstandard = _zstandard()
            if zstandard is None:
                raise FrameError("a zstd frame arrived but zstandard does not import here")
            self.decompressor = zstandard.ZstdDecompressor()
        try:
            self.pending = self.decompressor.decompress(body)
        except Exception as exc:
            raise FrameError("a zstd frame does not decompress: %s" % exc) from None
        self.decoded_bytes += len(self.pending)

    def read1(self, n=-1):
        if n is None or n < 0:
            n = 1 << 20
        while not self.pending and not self.left:
            if self.ended:
                return b""
            self._next_frame()
        if self.pending:
            out, self.pending = self.pending[:n], self.pending[n:]
            return out
        out = self.read_raw(min(n, self.left))
        if not out:
            raise FramesTruncated("the stream ended inside a frame")
        self.left -= len(out)
        self.decoded_bytes += len(out)
        return out

    read = read1

    def fileno(self):
        # the pipe under the frames: sample_batches widens it (sshd then wakes ~16x less per MB)
        return self.stream.fileno()
