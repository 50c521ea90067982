"""Connections kept across runs: where OpenSSH ControlMasters that outlive provision live.

With `--persist S` (the CLI's default 60) a host's master is started with ControlPersist=S and
left running when provision ends, so the next run within S seconds of idleness skips the TCP
connect, key exchange and authentication: its first command is one session over the master.

Each kept master has a folder of its own under one per-user directory (0700, owned by us,
checked before every use: another user's or a world-readable directory is never used), named
by a hash of everything that decides where and how the master logs in -- the full master
command line and generated ssh_config (user, address, port, key, jump hosts, known-hosts
files and policy, keepalives, algorithms) and the version (mtime, size) of every ssh config
file it includes. A different option, another known_hosts file or an edited ssh config is
another folder, so a kept master is only ever reused by a connection that would have made the
very same one. The host-key policy is checked when the master starts (its one handshake); a
reused master is the same TCP connection to the same sshd, so the key it verified still holds.

`provision disconnect [HOSTS]` ends them (ssh -O exit); tests point PROVISION_SSH_PERSIST_DIR
at a directory of their own and end every master in it (tests/conftest.py).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import shutil
import socket
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from provision.connection import openssh_args as args
from provision.connection.base import ConnectOptions
from provision.inventory.model import Host

DIR_ENV = "PROVISION_SSH_PERSIST_DIR"
PLACEHOLDER = "\0dir\0"  # stands for the master's folder while its command line is hashed
TARGET_FILE = "target"  # `name<TAB>address<TAB>user@host:port`: what `disconnect HOSTS` matches


class KeptDirError(OSError):
    """The per-user directory is unsafe (not ours, not 0700, a symlink): nothing is kept there."""


def base_dir() -> str:
    """The per-user directory of kept masters: PROVISION_SSH_PERSIST_DIR, else /tmp/pvkept-UID
    (short: a unix socket path must stay under ~100 bytes)."""
    configured = os.environ.get(DIR_ENV)
    if configured:
        return configured
    tmp = tempfile.gettempdir()
    if len(tmp) > 40:
        tmp = "/tmp"
    return os.path.join(tmp, f"pvkept-{os.getuid()}")


def checked_base(create: bool = True) -> str:
    """base_dir(), made 0700 when missing; KeptDirError unless it is a real directory of ours
    that nobody else can enter (a planted directory or symlink would let another user's
    process answer on our sockets)."""
    path = base_dir()
    if create:
        with contextlib.suppress(FileExistsError):
            os.mkdir(path, 0o700)
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise KeptDirError(f"{path} is not a directory")
    if st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise KeptDirError(f"{path} must be owned by uid {os.getuid()} with mode 0700")
    return path


def key(host: Host, options: ConnectOptions) -> str:
    """The folder name of the master this host + options would start (see the module doc)."""
    digest = hashlib.sha256()
    argv = args.master_argv(host, options, PLACEHOLDER)
    digest.update("\0".join(argv).encode())
    digest.update(args.config_text(options, PLACEHOLDER).encode())
    for path in args.user_configs(options):
        try:
            st = os.stat(path)
        except OSError:
            continue
        digest.update(f"\0{path}\0{st.st_mtime_ns}\0{st.st_size}".encode())
    return digest.hexdigest()[:20]


def folder(host: Host, options: ConnectOptions) -> str:
    """This host's kept-master folder (made 0700), in the checked per-user directory."""
    path = os.path.join(checked_base(), key(host, options))
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o700)
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
        raise KeptDirError(f"{path} is not a directory of ours")
    return path


@contextlib.contextmanager
def locked(path: str, bound: float = 60.0) -> Iterator[None]:
    """One process at a time starts (or adopts) the master of a folder: two runs starting the
    same host at once share one master instead of racing for its socket. Bounded: past
    `bound` seconds (another run's start that hangs) it goes on without the lock."""
    fd = os.open(os.path.join(path, "lock"), os.O_CREAT | os.O_RDWR, 0o600)
    try:
        deadline = time.monotonic() + bound
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.02)
        yield
    finally:
        os.close(fd)


def answers(sock: str) -> bool:
    """Whether a master listens on `sock` (a connect, nothing sent: no process started)."""
    try:
        with socket.socket(socket.AF_UNIX) as probe:
            probe.settimeout(1.0)
            probe.connect(sock)
        return True
    except OSError:
        return False


@dataclass
class Kept:
    path: str  # the folder
    name: str  # the inventory name it was started for
    address: str
    display: str  # user@host:port

    @property
    def socket(self) -> str:
        return os.path.join(self.path, "m")

    def matches(self, wanted: str) -> bool:
        return wanted in (self.name, self.address, self.display) or (
            "@" not in wanted and self.display.split("@", 1)[-1].rsplit(":", 1)[0] == wanted
        )


def record_target(path: str, host: Host, display: str) -> None:
    text = "\t".join(re.sub(r"[\t\n]", " ", v) for v in (host.name, host.connect_address, display))
    Path(path, TARGET_FILE).write_text(text + "\n")


def kept() -> list[Kept]:
    """Every kept-master folder of this user (running or not)."""
    try:
        base = checked_base(create=False)
    except OSError:
        return []
    found = []
    for entry in sorted(Path(base).iterdir()):
        try:
            fields = (entry / TARGET_FILE).read_text().rstrip("\n").split("\t")
        except OSError:
            fields = []
        found.append(Kept(str(entry), *(fields + ["", "", ""])[:3]))
    return found


def end(entry: Kept) -> bool:
    """End one kept master (`ssh -O exit`, then its pid from `-O check` by SIGKILL) and remove
    its folder. True when a master was running there."""
    running = answers(entry.socket)
    if running:
        control = ["ssh", "-S", entry.socket, "-F", os.devnull, "-O"]
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            subprocess.run([*control, "exit", "--", "kept"], capture_output=True, timeout=5)
        if answers(entry.socket):
            with contextlib.suppress(OSError, subprocess.TimeoutExpired):
                said = subprocess.run([*control, "check", "--", "kept"], capture_output=True,
                                      text=True, timeout=5)  # fmt: skip
                pid = re.search(r"pid=(\d+)", said.stderr + said.stdout)
                if pid:
                    os.kill(int(pid.group(1)), 9)
    shutil.rmtree(entry.path, ignore_errors=True)
    return running


def disconnect(targets: list[str] | None = None) -> list[Kept]:
    """End the kept masters of `targets` (inventory names, addresses or user@host:port), or of
    every host when None; returns the ones that were running."""
    ended = []
    for entry in kept():
        if targets and not any(entry.matches(t) for t in targets):
            continue
        if end(entry):
            ended.append(entry)
    return ended
