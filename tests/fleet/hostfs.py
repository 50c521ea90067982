"""A fleet host's own device nodes and /etc files: shell lines for its keeper script (fleet.py).

Why: a role run as root on a test host must never reach the machine running the tests. A bind
mount of this machine's /dev (or /etc/hosts) hands the host this machine's own inodes: a CIS
role's `chmod o-w /dev/null` on a twin changed this machine's /dev/null. So every host gets a
tmpfs /dev with nodes of its own (mknod: the same devices, other inodes, so a chmod, chown or
rm there stays on the host), a devpts instance of its own, its own /dev/shm, and private copies
of /etc/hosts and /etc/resolv.conf (as Docker gives a container: files bind-mounted from the
container's own directory, never the machine's).
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

# name, type, major, minor, mode: the nodes a container's /dev has (Docker's, runc's defaults)
DEVICES = (
    ("null", "c", 1, 3, "666"),
    ("zero", "c", 1, 5, "666"),
    ("full", "c", 1, 7, "666"),
    ("random", "c", 1, 8, "666"),
    ("urandom", "c", 1, 9, "666"),
    ("tty", "c", 5, 0, "666"),
)
# given only where this machine has them (sshfs in the train tests needs fuse)
OPTIONAL_DEVICES = (("fuse", "c", 10, 229, "666"),)
LINKS = (
    ("fd", "/proc/self/fd"),
    ("stdin", "/proc/self/fd/0"),
    ("stdout", "/proc/self/fd/1"),
    ("stderr", "/proc/self/fd/2"),
    ("ptmx", "pts/ptmx"),  # the host's own devpts instance's multiplexer
)


def own_dev(root: str) -> list[str]:
    """Lines that mount a /dev of the host's own over `root`/dev ("" = this machine's / seen
    from the host's mount namespace, which the tmpfs covers there only)."""
    dev = f"{root}/dev"
    lines = [f"mount -t tmpfs -o mode=755,size=1m,nosuid,noexec fleet-dev {dev}"]
    nodes = list(DEVICES) + [d for d in OPTIONAL_DEVICES if os.path.exists(f"/dev/{d[0]}")]
    for name, kind, major, minor, mode in nodes:
        lines.append(f"mknod -m {mode} {dev}/{name} {kind} {major} {minor}")
    lines += [f"ln -s {target} {dev}/{name}" for name, target in LINKS]
    lines += [
        f"mkdir -m 755 {dev}/pts {dev}/shm",
        f"mount -t devpts -o newinstance,ptmxmode=0666,mode=620,gid=5 fleet-pts {dev}/pts",
        f"mount -t tmpfs -o mode=1777,nosuid,nodev fleet-shm {dev}/shm",
    ]
    return lines


def own_etc(root: str, workdir: Path) -> list[str]:
    """Lines that give the host its own /etc/hosts and /etc/resolv.conf: files in its workdir
    bind-mounted over `root`/etc's (a host with its own root filesystem has its own /etc/hosts
    already, in its overlay; a host on this machine's / gets a copy of this machine's)."""
    q = shlex.quote
    # no DNS from here: a resolver that fails at once, so `sudo: unable to resolve host` is
    # printed without a resolver timeout first (as on a rental whose /etc/hosts lacks its name)
    (workdir / "resolv.conf").write_text("nameserver 127.0.0.1\noptions timeout:1 attempts:1\n")
    lines = [f"mount --bind {q(str(workdir / 'resolv.conf'))} {root}/etc/resolv.conf"]
    if not root:
        hosts = workdir / "hosts"
        try:
            hosts.write_text(Path("/etc/hosts").read_text())
        except OSError:
            hosts.write_text("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n")
        lines.append(f"mount --bind {q(str(hosts))} /etc/hosts")
    return lines
