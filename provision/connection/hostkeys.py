"""Host-key verification, which Fabric leaves off (it auto-adds every key, loads no known_hosts).

Files read: ~/.ssh/known_hosts, then the project's own (state dir, or PROVISION_KNOWN_HOSTS).
`accept-new` records first-seen keys in the project's file only: the user's ssh file is theirs.
"""

from __future__ import annotations

import fcntl
import logging
import threading
from pathlib import Path

import paramiko

from provision.connection.hostkey_files import project_known_hosts, user_known_hosts
from provision.paths import write_atomic

log = logging.getLogger("provision.hostkeys")
POLICIES = ("strict", "accept-new", "off")
__all__ = ["POLICIES", "apply_policy", "project_known_hosts", "user_known_hosts"]


class _AcceptNewPolicy(paramiko.MissingHostKeyPolicy):
    """Like OpenSSH's StrictHostKeyChecking=accept-new: record unknown keys, refuse changed ones
    (paramiko raises BadHostKeyException for changed keys before a policy is asked)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = f"{hostname} {key.get_name()} {key.get_base64()}\n"
        # many hosts connect in parallel threads/processes: one writer at a time (a lock file,
        # since the file itself is replaced), each rewriting the whole file by temp + rename
        with open(self.path.with_name(self.path.name + ".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            before = _stamp(self.path)
            old = self.path.read_bytes() if self.path.exists() else b""
            if old and not old.endswith(b"\n"):
                old += b"\n"  # a line cut by an older crash stays its own (ignored) line
            write_atomic(self.path, old + line.encode("utf-8"))
            _PARSED.recorded(self.path, before, _stamp(self.path), hostname, key)
        client.get_host_keys().add(hostname, key.get_name(), key)
        log.info("recorded new host key for %s in %s", hostname, self.path)


class _WarnAcceptPolicy(paramiko.MissingHostKeyPolicy):
    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        log.warning("host key checking is OFF: accepting %s key for %s unverified", key.get_name(), hostname)


def _stamp(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


class _ParsedFiles:
    """The known_hosts files parsed once per process while they are unchanged.

    Each connection used to parse every file again (a paramiko key object per line), so a run
    on N hosts parsed N x N lines: at 256 hosts that was ~7 s of controller CPU per run. The
    parsed table is shared read-only by every connection; a file changed by someone else (its
    inode, size or mtime) is parsed again, and a key our own accept-new recorded is added to the
    table when nobody else touched the file in between."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stamps: tuple[tuple[Path, tuple[int, int, int] | None], ...] = ()
        self._keys = paramiko.HostKeys()

    def keys(self, files: list[Path]) -> paramiko.HostKeys:
        stamps = tuple((path, _stamp(path)) for path in files)
        with self._lock:
            if stamps != self._stamps:
                keys = paramiko.HostKeys()
                for path, stamp in stamps:
                    if stamp is not None and path.is_file():
                        keys.load(str(path))
                self._keys, self._stamps = keys, stamps
            return self._keys

    def recorded(self, path: Path, before: object, after: object, hostname: str, key: paramiko.PKey) -> None:
        with self._lock:
            stamps = dict(self._stamps)
            if stamps.get(path, False) != before:
                self._stamps = ()  # changed by another process, or never read: parse next time
                return
            keys = paramiko.HostKeys()  # a new table: connections may be reading the old one
            keys._entries = [*self._keys._entries]  # noqa: SLF001 (the entries, not re-parsed)
            keys.add(hostname, key.get_name(), key)
            stamps[path] = after  # type: ignore[assignment]
            self._keys, self._stamps = keys, tuple(stamps.items())


_PARSED = _ParsedFiles()


def apply_policy(client: paramiko.SSHClient, policy: str, extra_files: list[str] | None = None) -> None:
    """Configure a paramiko client for one of `strict`, `accept-new`, `off`."""
    if policy not in POLICIES:
        raise ValueError(f"--known-hosts must be one of {', '.join(POLICIES)}, got {policy!r}")
    if policy == "off":
        client.set_missing_host_key_policy(_WarnAcceptPolicy())
        return
    files = [user_known_hosts(), project_known_hosts(), *(Path(f) for f in extra_files or [])]
    # system keys: consulted, never rewritten by paramiko; parsed once per process (_ParsedFiles)
    client._system_host_keys = _PARSED.keys(files)  # noqa: SLF001 (load_system_host_keys re-parses)
    if policy == "strict":
        client.set_missing_host_key_policy(paramiko.RejectPolicy())
    else:
        client.set_missing_host_key_policy(_AcceptNewPolicy(project_known_hosts()))


def known_hosts_name(address: str, port: int) -> str:
    return address if port == 22 else f"[{address}]:{port}"


def changed_key_message(address: str, port: int, exc: paramiko.BadHostKeyException) -> str:
    name = known_hosts_name(address, port)
    return (
        f"host key for {name} CHANGED: offered {exc.key.get_name()} {exc.key.get_fingerprint().hex()}, "
        f"known {exc.expected_key.get_name()} {exc.expected_key.get_fingerprint().hex()}. "
        "This is a man-in-the-middle risk, or the rental's IP:port was given to a new server. "
        f"If you trust the new server: ssh-keygen -R '{name}' -f {project_known_hosts()} "
        f"(and -f {user_known_hosts()}), or use --known-hosts off for throwaway hosts."
    )
