"""How every agent call starts on the host: `python3 [-S] -c STUB FOLDER COMMAND KEEP THIS_TEXT`.

The stub (provision/remote/agent.py) imports this module from FOLDER, where it lies as
provision_boot.py with its bytecode, and falls back to exec'ing THIS_TEXT from argv when it is
not there (a first contact) or broken: a warm call compiles nothing. One ssh command does it
all, cold or warm. stdin: a header line `PROVISION-BUNDLE N`, N bytes of
bundle (N may be 0: the controller believes the agent is there), then the request line and any
payload, which protocol.main reads next from the same buffered stdin. When FOLDER holds a
complete agent (every file its MANIFEST names, at its size) the bundle is skipped; else it is
unpacked into FOLDER.tmp-PID and renamed into place -- a half-written agent is never run, a
parallel first contact (another controller) that renamed first wins with identical files, a
partial or damaged folder is moved aside and replaced. Without a bundle and without a complete
agent it exits 97 and the controller repeats the call with one. COMMAND "-" only installs.
PROVISION_STDIN_HEAD (base64, optional, removed from the environment at once) is read as if it
came before stdin: the executor's first request rides in its exec request (sshd opens a
session's stdin only after the exec, a round trip later; remote/executor.py).
Runs on the host's Python 3.8+ with -S: os, sys and io (loaded at start anyway) on the warm
path; zlib when unpacking.
"""

import io
import os
import sys

MISSING = 97
HEADER = b"PROVISION-BUNDLE "
HEAD_ENV = "PROVISION_STDIN_HEAD"


class _Head(io.RawIOBase):
    """fd 0 with some bytes before it (unbuffered underneath: a pipe read returns what came)."""

    def __init__(self, head):
        io.RawIOBase.__init__(self)
        self._head = head

    def readable(self):
        return True

    def readinto(self, buf):
        if self._head:
            n = min(len(buf), len(self._head))
            buf[:n] = self._head[:n]
            self._head = self._head[n:]
            return n
        data = os.read(0, len(buf))
        buf[: len(data)] = data
        return len(data)


def _stdin():
    head = os.environ.pop(HEAD_ENV, None)
    if head is None:
        return sys.stdin.buffer
    import binascii  # built in: no import from disk

    sys.stdin = io.TextIOWrapper(io.BufferedReader(_Head(binascii.a2b_base64(head))))
    return sys.stdin.buffer


def intact(folder):
    try:
        with open(os.path.join(folder, "MANIFEST"), "rb") as f:
            lines = f.read().splitlines()
        base = os.fsencode(folder)
        for line in lines:
            size, name = line.split(b" ", 1)
            if os.stat(os.path.join(base, name)).st_size != int(size):
                return False
    except (OSError, ValueError):
        return False
    return bool(lines)


def _remove(path):
    import shutil

    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        try:
            os.unlink(path)
        except OSError:
            pass


def unpack(blob, folder):
    import zlib

    data = memoryview(zlib.decompress(blob))
    # a random name, made here (mkdir never follows a planted name): everything below is ours
    tmp = "%s.tmp-%d-%s" % (folder, os.getpid(), os.urandom(6).hex())
    os.mkdir(tmp, 0o700)
    base = os.fsencode(tmp)
    made = set()
    pos = 0
    while pos < len(data):
        end = bytes(data[pos:pos + 1024]).index(b"\n") + pos
        size, name = bytes(data[pos:end]).split(b" ", 1)
        start, pos = end + 1, end + 1 + int(size)
        if name.startswith(b"/") or b".." in name.split(b"/") or pos > len(data):
            raise ValueError("damaged agent bundle (entry %r)" % name)
        path = os.path.join(base, name)
        parent = os.path.dirname(path)
        if parent not in made:
            os.makedirs(parent, exist_ok=True)
            made.add(parent)
        with open(path, "wb") as f:
            f.write(data[start:pos])
    for _ in range(3):
        try:
            os.rename(tmp, folder)
            return True
        except OSError:
            if intact(folder):  # a parallel first contact put the same agent in place
                _remove(tmp)
                return False
            aside = "%s.bad-%d" % (folder, os.getpid())
            try:
                os.rename(folder, aside)  # partial or damaged: out of the way, then ours
            except OSError:
                pass
            else:
                _remove(aside)
    _remove(tmp)
    raise OSError("could not put the agent in place at %s" % folder)


def prune(folder, keep):
    """Agents of other versions untouched for 30 days go (a controller that still wants one
    sends it again); leftovers of interrupted unpacks after an hour."""
    import time

    cache, now = os.path.dirname(folder), time.time()
    current = set([os.path.basename(folder)] + [n for n in keep.split(",") if n])
    for name in os.listdir(cache):
        if not name.startswith("agent-") or name in current:
            continue
        path = os.path.join(cache, name)
        age = 3600 if (".tmp-" in name or ".bad-" in name) else 30 * 86400
        try:
            if os.lstat(path).st_mtime < now - age:
                _remove(path)
        except OSError:
            pass


def run(argv):
    folder, command, keep = argv[0], argv[1], argv[2] if len(argv) > 2 else ""
    stdin = _stdin()
    head = stdin.readline()
    if not head.startswith(HEADER):
        sys.stderr.write("provision agent: no bundle header on stdin\n")
        return 2
    size = int(head[len(HEADER):])
    blob = stdin.read(size) if size else b""
    if len(blob) != size:
        sys.stderr.write("provision agent: bundle cut short (%d of %d bytes)\n" % (len(blob), size))
        return 2
    if not intact(folder):
        if not size:
            return MISSING
        os.makedirs(os.path.dirname(folder), exist_ok=True)
        if unpack(blob, folder):
            sys.stdout.write('{"event": "unpacked"}\n')
            sys.stdout.flush()
            prune(folder, keep)
    if command == "-":
        return 0
    sys.path[0] = folder
    sys.path_importer_cache.pop(folder, None)  # the stub's import looked before the unpack
    sys.dont_write_bytecode = False  # PYTHONDONTWRITEBYTECODE=1 would recompile every call
    sys.argv = [os.path.join(folder, "__main__.py"), command]
    # only after the bundle is unpacked onto sys.path: it may not exist before
    from provision.agent.protocol import main

    return main([command])

