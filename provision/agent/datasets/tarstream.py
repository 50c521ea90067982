"""The stage stream: a plain POSIX (pax) tar of regular files, written and read without tarfile.

tarfile costs ~40 us per header to write and, in stream mode, copies its read buffer on every
small read; for 8,000 small JPEGs that is most of a second on each side. This writes ustar
headers directly (a pax record only for names that need one: non-ASCII, over 100 bytes, or with
newlines) and reads them back with a tolerant parser. The output is an ordinary tar: `tar tvf`
lists it, and tarfile reads it.
"""

BLOCK = 512
END = b"\0" * (2 * BLOCK)
_ZERO = b"\0" * BLOCK


class TarFormatError(ValueError):
    kind = "stream"


def _octal(value, width):
    """A NUL-terminated octal field (numbers too large for it use the base-256 form)."""
    digits = "%o" % value
    if len(digits) < width:
        return digits.encode("ascii").rjust(width - 1, b"0") + b"\0"
    return b"\x80" + value.to_bytes(width - 1, "big")


def _template(typeflag):
    """A ustar header with every constant field filled and name, size, mtime left zero."""
    header = bytearray(BLOCK)
    header[100:108] = b"0000644\0"
    header[108:116] = b"0000000\0"
    header[116:124] = b"0000000\0"
    header[156:157] = typeflag
    header[257:265] = b"ustar\x0000"
    header[265:269] = b"root"
    header[297:301] = b"root"
    # the checksum counts its own field as 8 spaces
    return bytes(header[:124]), bytes(header[156:]), sum(header) + 8 * 32


_TEMPLATES = {t: _template(t) for t in (b"0", b"x")}


def _ustar(name, size, mtime, typeflag):
    # Built from a template: summing all 512 bytes per header cost ~15 us, most of the header
    # time for 8,000 small files; only name, size and mtime vary.
    head, tail, base = _TEMPLATES[typeflag]
    name = name[:100]
    size_f = _octal(size, 12)
    mtime_f = _octal(max(0, int(mtime)), 12)
    check = base + sum(name) + sum(size_f) + sum(mtime_f)
    return b"".join(
        (
            name,
            head[len(name) :],
            size_f,
            mtime_f,
            ("%06o\0 " % check).encode("ascii"),
            tail,
        )
    )


def _pax_record(key, value):
    body = b" " + key + b"=" + value + b"\n"
    n = len(body) + 1
    while len(str(n).encode()) + len(body) != n:
        n += 1
    return str(n).encode() + body


def header(relpath, size, mtime):
    """The header block(s) for one regular file `relpath` of `size` bytes."""
    raw = relpath.encode("utf-8", "surrogateescape")
    if len(raw) <= 100 and raw.isascii() and b"\n" not in raw and b"\0" not in raw:
        return _ustar(raw, size, mtime, b"0")
    pax = _pax_record(b"path", raw)
    padding = -len(pax) % BLOCK
    short = b"PaxHeaders/long-name"  # readers use the pax path; this only fills the field
    return (
        _ustar(b"././@PaxHeader", len(pax), mtime, b"x")
        + pax
        + b"\0" * padding
        + _ustar(short, size, mtime, b"0")
    )


def padding(size):
    return b"\0" * (-size % BLOCK)


def _number(field):
    if field[:1] in (b"\x80", b"\xff"):
        return int.from_bytes(field[1:], "big")
    text = field.split(b"\0", 1)[0].strip()
    try:
        return int(text, 8) if text else 0
    except ValueError:
        raise TarFormatError(
            "bad number %r in a tar header: the stream is not a tar or is corrupt" % field
        ) from None


def _parse_pax(data):
    out = {}
    pos = 0
    while pos < len(data):
        space = data.find(b" ", pos)
        if space < 0:
            break
        length = int(data[pos:space])
        record = data[space + 1 : pos + length - 1]
        key, _, value = record.partition(b"=")
        out[key] = value
        pos += length
    return out


def _read_exact(stream, n):
    data = stream.read(n)
    if data is None:
        data = b""
    if len(data) == n:
        return data
    chunks = [data]
    got = len(data)
    while got < n:
        more = stream.read(n - got)
        if not more:
            break
        chunks.append(more)
        got += len(more)
    return b"".join(chunks)


class StreamTruncated(TarFormatError):
    kind = "stream_ended"


def _header_sum(block):
    """The ustar checksum of a header block: every byte, its own field as spaces.

    Only the used fields are summed (zero bytes add nothing): the name up to its last non-NUL,
    the numeric fields, the type and magic, owner names and the prefix up to its last non-NUL.
    """
    return (
        sum(block[0:100].rstrip(b"\0"))
        + sum(block[100:148])
        + 256
        + sum(block[156:265].rstrip(b"\0"))
        + sum(block[265:345].rstrip(b"\0"))
        + sum(block[345:512].rstrip(b"\0"))
    )


class _Reader(object):
    """Reads a stream in large pieces and hands out exact slices: one read per ~1 MiB instead of
    two or three per member. Uses read1 where the stream has it, so a pipe's data is handed on
    as it arrives (read(n) would wait for all n bytes)."""

    def __init__(self, stream, chunk=1 << 20):
        self.read = getattr(stream, "read1", None) or stream.read
        self.chunk = chunk
        self.buf = b""
        self.pos = 0

    def take(self, n):
        """Exactly n bytes, or fewer at the end of the stream."""
        buf, pos = self.buf, self.pos
        if len(buf) - pos >= n:
            self.pos = pos + n
            return buf[pos : pos + n]
        parts = [buf[pos:]]
        got = len(buf) - pos
        self.buf, self.pos = b"", 0
        while True:
            more = self.read(max(self.chunk, n - got))
            if not more:
                return b"".join(parts)
            if got + len(more) >= n:
                cut = n - got
                parts.append(more[:cut])
                self.buf, self.pos = more, cut
                return b"".join(parts) if len(parts) > 1 or parts[0] else parts[-1]
            parts.append(more)
            got += len(more)


def read_members(stream):
    """(name, data) for each regular file of a tar read sequentially from `stream`.

    Raises StreamTruncated when the stream stops inside a member, TarFormatError on garbage.
    Ends normally at the end-of-archive blocks or at EOF on a header boundary.
    """
    pending = {}
    take = _Reader(stream).take
    while True:
        block = take(BLOCK)
        if not block or block == _ZERO:
            return
        if len(block) < BLOCK:
            raise StreamTruncated("the stream ended inside a tar header")
        stored = _number(block[148:156])
        check = _header_sum(block)
        if stored != check:
            raise TarFormatError("bad tar header checksum: the stream is not a tar or is corrupt")
        size = _number(block[124:136])
        typeflag = block[156:157]
        pad = -size % BLOCK
        body = take(size + pad) if size else b""
        if len(body) < size + pad:
            raise StreamTruncated("the stream ended inside a member")
        if pad:
            body = body[:size]
        if typeflag == b"x":
            pending.update(_parse_pax(body))
            continue
        if typeflag in (b"g",):
            continue
        if typeflag == b"L":  # GNU long name
            pending[b"path"] = body.rstrip(b"\0")
            continue
        name = pending.get(b"path")
        if name is None:
            name = block[0:100].split(b"\0", 1)[0]
            prefix = block[345:500].split(b"\0", 1)[0]
            if block[257:262] == b"ustar" and prefix:
                name = prefix + b"/" + name
        pending = {}
        if typeflag in (b"0", b"\0", b"7"):
            yield name.decode("utf-8", "surrogateescape"), body
        elif typeflag == b"5":
            continue
        else:
            raise TarFormatError("unexpected tar member type %r for %r" % (typeflag, name))
