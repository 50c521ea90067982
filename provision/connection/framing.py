"""Frame every command sent to a host so its result holds only what the command printed.

sshd runs each command through the login shell, and bash sources ~/.bashrc for ssh commands:
rental images print banners, conda-init notes and MOTDs there, on stdout and stderr, before the
command runs. So the command text is wrapped: a per-connection random marker is printed on
stdout (followed by the command's process-group id) and on stderr right before the command
starts; whatever came before the marker is the shell's, not the command's, and is dropped
(logged at debug level for -v). Binary stdout passes through untouched after the marker.

The command itself runs under `setsid` (its own session and process group, when the host has
util-linux's setsid) so a timeout or Ctrl-C can end it and everything it started by killing the
group. `setsid -w` waits and returns the command's status (128+N when killed by signal N).
"""

from __future__ import annotations

import secrets

from provision.shell import Raw, sh

# $1 = marker, $2 = the command. `$$` of this sh is the group leader once setsid made it one
# (without setsid it is the login shell's pid, which sshd already made a session leader). The
# command runs as its child, not exec'd: a command killed by signal N then exits 128+N (as in a
# shell) instead of making `setsid -w` fail with "child did not exit normally".
_BOOT = 'printf "%s %s\\n" "$1" "$$"; printf "%s\\n" "$1" >&2; /bin/sh -c "$2"; exit $?'
_WRAP = (
    "if command -v setsid >/dev/null 2>&1; then exec setsid -w /bin/sh -c {boot} sh {marker} {command}; "
    "else exec /bin/sh -c {boot} sh {marker} {command}; fi"
)


def new_marker() -> str:
    """Random, so no banner and no command output can fake it."""
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


class Framer:
    """Strips what precedes the marker from one output stream, fed chunk by chunk.

    Until the marker shows up nothing is passed on (a banner may arrive in pieces); after it,
    every byte is the command's. With `with_pgid` the marker line also carries the pgid."""

    def __init__(self, marker: str, *, with_pgid: bool) -> None:
        self._token = (marker + (" " if with_pgid else "\n")).encode()
        self._with_pgid = with_pgid
        self._buf = bytearray()
        self.found = False
        self.pgid: int | None = None
        self.preamble = b""  # what the login shell printed before the command (for -v logs)

    def feed(self, data: bytes) -> bytes:
        if self.found:
            return data
        self._buf += data
        at = self._buf.find(self._token)
        if at < 0:
            return b""
        start = at + len(self._token)
        if self._with_pgid:
            end = self._buf.find(b"\n", start)
            if end < 0:
                return b""
            field = bytes(self._buf[start:end]).strip()
            self.pgid = int(field) if field.isdigit() else None
            start = end + 1
        self.preamble = bytes(self._buf[:at])
        rest = bytes(self._buf[start:])
        self._buf.clear()
        self.found = True
        return rest

    def finish(self) -> bytes:
        """At end of stream: without a marker the command never ran (the shell failed first),
        so everything is the shell's message: hand it over rather than lose the reason."""
        if self.found:
            return b""
        rest = bytes(self._buf)
        self._buf.clear()
        return rest
