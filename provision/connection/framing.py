"""Frame every command sent to a host so its result holds only what the command printed.

sshd runs each command through the login shell, and bash sources ~/.bashrc for ssh commands:
rental images print banners, conda-init notes and MOTDs there, on stdout and stderr, before the
command runs. So the command text is wrapped: a per-connection random marker is printed on
stdout (followed by the command's process-group id) and on stderr right before the command
starts; whatever came before the marker is the shell's, not the command's, and is dropped
(logged at debug level for -v). Binary stdout passes through untouched after the marker.

The command runs in a process group of its own so a timeout or Ctrl-C can end it and everything
it started by killing the group. OpenSSH's sshd already makes each session's shell a session and
group leader, so there the frame just `exec`s /bin/sh in its place; only where the login shell
leads no group (another server, a wrapper) does it go through util-linux's `setsid -w`, which
waits and returns the command's status (128+N when killed by signal N). Skipping `setsid` saves
a fork and an exec per command: 5.2 -> 3.7 ms of host CPU for `nproc` (bash login shell).
"""

from __future__ import annotations

import secrets

from provision.errors import BoundsError
from provision.shell import Raw, sh

# $1 = marker, $2 = the command. `$$` of this sh is the group leader: the login shell's pid,
# which sshd made a session leader and this sh replaced, or setsid's new group. The
# command runs as its child, not exec'd: a command killed by signal N then exits 128+N (as in a
# shell) instead of making `setsid -w` fail with "child did not exit normally".
_BOOT = 'printf "%s %s\\n" "$1" "$$"; printf "%s\\n" "$1" >&2; /bin/sh -c "$2"; exit $?'
# `kill -0 -$$` (a builtin: no process) succeeds only when a group with our pid exists, i.e.
# the login shell leads its group. "$@" (empty in the login shell's -c) holds the setsid words:
# unquoted $var would not split in zsh. The command appears once in the text.
_WRAP = (
    "if ! kill -0 -$$ 2>/dev/null && command -v setsid >/dev/null 2>&1; then set -- setsid -w; fi; "
    'exec "$@" /bin/sh -c {boot} sh {marker} {command}'
)


def new_marker() -> str:
    """Random, so no banner printed by accident can fake it. (A hostile host can: its ~/.bashrc
    sees the command text. It then fakes only its own output and pgid; the bounds hold anyway.)"""
    return "provision-" + secrets.token_hex(8)


def wrap(command: str, marker: str) -> Raw:
    """Shell text for the login shell: prints the markers, then runs `command` with sh."""
    return sh(_WRAP, boot=_BOOT, marker=marker, command=str(command))  # str(): a Raw is quoted too


def stop_group(pgid: int, grace: float = 2.0) -> Raw:
    """TERM the command's process group now, KILL it after `grace` seconds in the background (so
    the caller needn't wait out the grace and the killer survives the connection going away)."""
    return sh(
        # no `--`: dash's kill rejects it; a negative number is a group for every kill
        "kill -TERM -{pgid} 2>/dev/null; "
        "(sleep {grace}; kill -KILL -{pgid} 2>/dev/null) >/dev/null 2>&1 </dev/null & exit 0",
        pgid=str(pgid),
        grace=f"{grace:g}",
    )


# What a login shell may print before the command starts, per stream: banners, MOTDs and
# conda-init notes are a few KB; more is a start-up file printing without end (issue 20).
PREAMBLE_MAX = 1 << 20
PREAMBLE_KEEP = 4096  # the end of it, for -v logs and the error
_PGID_MAX = 32  # the marker line's pgid field: digits, then a newline
STARTUP_FILES = "~/.bashrc, ~/.bash_profile, ~/.profile, /etc/bash.bashrc, /etc/profile, /etc/profile.d/*"


def noise_error(host: str, stream: str, tail: bytes) -> BoundsError:
    shown = tail[-160:].decode("utf-8", "replace")
    return BoundsError(
        host,
        f"the login shell printed more than {PREAMBLE_MAX >> 20} MiB on {stream} before the command "
        f"started (ending {shown!r}), so it was stopped: one of the host's shell start-up files "
        f"({STARTUP_FILES}) prints without end. Make it print only for interactive shells "
        "(`case $- in *i*) ;; *) return;; esac` at the top of ~/.bashrc) or remove the loop.",
    )


class Framer:
    """Strips what precedes the marker from one output stream, fed chunk by chunk.

    Until the marker shows up nothing is passed on (a banner may arrive in pieces); after it,
    every byte is the command's. With `with_pgid` the marker line also carries the pgid.
    Bounded: only the bytes a marker could still start in are kept and searched again (each
    byte is searched about once), and past PREAMBLE_MAX bytes without a marker `feed` raises
    BoundsError naming the host and its start-up files."""

    def __init__(self, marker: str, *, with_pgid: bool, host: str = "host", stream: str = "stdout") -> None:
        self._token = (marker + (" " if with_pgid else "\n")).encode()
        self._with_pgid = with_pgid
        self._host = host
        self._stream = stream
        self._buf = bytearray()  # unsearched tail (a marker may begin in it), then the pgid field
        self._seen = 0  # bytes of preamble dropped so far
        self._tail = bytearray()  # the last PREAMBLE_KEEP bytes of the preamble
        self._at: int | None = None  # where the token ended in _buf, waiting for the pgid's newline
        self.found = False
        self.pgid: int | None = None
        self.preamble = b""  # what the login shell printed before the command (its end, for -v logs)

    def _drop(self, data: bytes | bytearray) -> None:
        self._seen += len(data)
        self._tail += data
        del self._tail[:-PREAMBLE_KEEP]

    def feed(self, data: bytes) -> bytes:
        if self.found:
            return data
        self._buf += data
        if self._at is None:
            at = self._buf.find(self._token)
            if at < 0:
                keep = len(self._token) - 1  # a marker split across chunks
                if len(self._buf) > keep:
                    self._drop(self._buf[: len(self._buf) - keep])
                    del self._buf[: len(self._buf) - keep]
                if self._seen > PREAMBLE_MAX:
                    raise noise_error(self._host, self._stream, bytes(self._tail))
                return b""
            self._drop(self._buf[:at])
            del self._buf[: at + len(self._token)]
            self._at = 0
        if self._with_pgid:
            end = self._buf.find(b"\n", 0, _PGID_MAX + 1)
            if end < 0:
                if len(self._buf) <= _PGID_MAX:
                    return b""
                end = -1  # not our marker line's shape: no pgid, the bytes are the command's
            field = bytes(self._buf[:end]).strip() if end >= 0 else b""
            self.pgid = int(field) if field.isdigit() and len(field) < 12 else None
            del self._buf[: end + 1]
        self.preamble = bytes(self._tail)
        rest = bytes(self._buf)
        self._buf.clear()
        self.found = True
        return rest

    def finish(self) -> bytes:
        """At end of stream: without a marker the command never ran (the shell failed first),
        so everything is the shell's message: hand it over rather than lose the reason (its
        last PREAMBLE_KEEP bytes: the reason is at the end)."""
        if self.found:
            return b""
        rest = bytes(self._tail + self._buf)
        self._buf.clear()
        self._tail.clear()
        return rest
