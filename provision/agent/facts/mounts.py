"""/proc/self/mountinfo: what is mounted where, and what kind of storage it is.

A line is `ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTIONS`
(proc(5)); paths escape space, tab, newline and backslash as octal (`\\040`).
"""

from __future__ import annotations

import os

from provision.agent.facts._util import read_text

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Dict, List, Optional

# Kernel and virtual filesystems: never where data goes.
PSEUDO_FS = {
    "proc",
    "sysfs",
    "devtmpfs",
    "devpts",
    "tmpfs",
    "ramfs",
    "cgroup",
    "cgroup2",
    "securityfs",
    "pstore",
    "bpf",
    "debugfs",
    "tracefs",
    "mqueue",
    "hugetlbfs",
    "configfs",
    "fusectl",
    "autofs",
    "binfmt_misc",
    "rpc_pipefs",
    "nsfs",
    "efivarfs",
    "selinuxfs",
    "squashfs",
    "nfsd",
    "fuse.lxcfs",
    "fuse.gvfsd-fuse",
    "fuse.portal",
    "fuse.snapfuse",
    "iso9660",
}
# Network or distributed storage: reachable over the network, slow for many small files.
NETWORK_FS = {
    "nfs",
    "nfs4",
    "cifs",
    "smb3",
    "smbfs",
    "ceph",
    "glusterfs",
    "lustre",
    "beegfs",
    "9p",
    "gpfs",
    "afs",
    "ocfs2",
    "gfs2",
    "virtiofs",
    "davfs",
    "orangefs",
    "pvfs2",
    "cvmfs",
    "weka",
    "wekafs",
    "panfs",
}
# FUSE filesystems backed by a local disk; every other fuse.* (juicefs, s3fs, ossfs, sshfs,
# rclone, gcsfuse, goofys, ceph-fuse, mfs ...) is treated as network storage.
LOCAL_FUSE = {
    "fuseblk",
    "fuse.ntfs-3g",
    "fuse.gocryptfs",
    "fuse.encfs",
    "fuse.bindfs",
    "fuse.mergerfs",
}


def unescape(path: str) -> str:
    if "\\" not in path:  # nearly every path: no need for re
        return path
    import re

    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), path)


def parse_mountinfo(text: str) -> List[Dict[str, object]]:
    mounts = []
    for line in text.splitlines():
        fields = line.split()
        if "-" not in fields or len(fields) < 7:
            continue
        sep = fields.index("-")
        if len(fields) < sep + 3:
            continue
        major, _, minor = fields[2].partition(":")
        mounts.append(
            {
                "mount_id": fields[0],
                "major": int(major) if major.isdigit() else None,
                "minor": int(minor) if minor.isdigit() else None,
                "root": unescape(fields[3]),
                "mountpoint": unescape(fields[4]),
                "options": fields[5].split(","),
                "fs_type": fields[sep + 1],
                "source": unescape(fields[sep + 2]),
                "super_options": fields[sep + 3].split(",") if len(fields) > sep + 3 else [],
            }
        )
    return mounts


def read_mounts(path: str = "/proc/self/mountinfo") -> List[Dict[str, object]]:
    return parse_mountinfo(read_text(path) or "")


def is_network_fs(fs_type: str) -> bool:
    if fs_type in NETWORK_FS or fs_type.startswith("nfs"):
        return True
    if fs_type.startswith("fuse.") or fs_type == "fuse":
        return fs_type not in LOCAL_FUSE and fs_type not in PSEUDO_FS
    return False


def is_pseudo_fs(fs_type: str) -> bool:
    return fs_type in PSEUDO_FS


def mount_for(path: str, mounts: List[Dict[str, object]]) -> Optional[Dict[str, object]]:
    """The mount a path lives on: the longest mountpoint that prefixes its real path.
    When a mountpoint is mounted over several times, the last mount is the visible one."""
    real = os.path.realpath(path)
    best = None
    best_len = -1
    for mount in mounts:
        point = str(mount["mountpoint"])
        if real == point or real.startswith(point.rstrip("/") + "/") or point == "/":
            if len(point) >= best_len:
                best, best_len = mount, len(point)
    return best
