"""`ansible_mounts` as Ansible's setup module lists them (its Linux hardware facts), so that a
role's template over `ansible_mounts` (mullholland.motd's /etc/motd) renders the same.

Setup's rules, not provision's own storage view (disks.py): every line of /etc/mtab (else
/proc/mounts) whose device starts with "/" or "\\" or holds ":/" (a network export) and whose
type is not "none" — so single files bind-mounted from a disk (/etc/resolv.conf, /etc/hosts in
a container) are listed and an overlay or tmpfs root is not; octal escapes decoded; ",bind"
added to the options of a mount whose source is a sub-tree (what `findmnt` shows as
`dev[/dir]`, read here from mountinfo's root field, and only where findmnt is installed, as
setup asks it); statvfs sizes, blocks and inodes; the device's UUID from udev's /dev/disk/by-uuid links
(lsblk's source; no process is started), else "N/A".
"""

from __future__ import annotations

import os

from provision.agent.facts._util import read_text, which
from provision.agent.facts.mounts import read_mounts, unescape

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, List


def gather(root: str = "/") -> List[Dict[str, Any]]:
    mtab = os.path.join(root, "etc/mtab")
    text = read_text(mtab if os.path.exists(mtab) else os.path.join(root, "proc/mounts")) or ""
    binds = _bind_mounts(root)
    uuids = _uuids(root)
    out = []
    for line in text.splitlines():
        fields = [unescape(f) for f in line.split()]
        if len(fields) < 4:
            continue
        device, mount, fstype, options = fields[0], fields[1], fields[2], fields[3]
        if (not device.startswith(("/", "\\")) and ":/" not in device) or fstype == "none":
            continue
        if mount in binds and "bind" not in options:
            options += ",bind"
        info: Dict[str, Any] = {
            "mount": mount,
            "device": device,
            "fstype": fstype,
            "options": options,
            "dump": _int(fields[4]) if len(fields) > 4 else 0,
            "passno": _int(fields[5]) if len(fields) > 5 else 0,
        }
        info.update(_size(mount))
        info["uuid"] = uuids.get(device) or "N/A"
        out.append(info)
    return out


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        return 0


def _bind_mounts(root: str) -> set:
    if which("findmnt") is None:
        return set()
    return {
        str(m["mountpoint"])
        for m in read_mounts(os.path.join(root, "proc/self/mountinfo"))
        if m["root"] != "/"
    }


def _uuids(root: str = "/") -> Dict[str, str]:
    """device path -> UUID, from udev's /dev/disk/by-uuid links (what lsblk's UUID column shows
    on a udev system), device-mapper names included. Read, not run: `lsblk` would cost every
    facts call a process and the subprocess import on each host."""
    folder = os.path.join(root, "dev", "disk", "by-uuid")
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return {}
    uuids: Dict[str, str] = {}
    for name in names:
        uuids.setdefault(os.path.realpath(os.path.join(folder, name)), name)
    mapper = os.path.join(root, "dev", "mapper")
    try:
        mapped = sorted(os.listdir(mapper))
    except OSError:
        mapped = []
    for name in mapped:  # mtab names /dev/mapper/vg-root; the link points at /dev/dm-N
        real = os.path.realpath(os.path.join(mapper, name))
        if real in uuids:
            uuids.setdefault("/dev/mapper/" + name, uuids[real])
    return uuids


def _size(mount: str) -> Dict[str, int]:
    try:
        st = os.statvfs(mount)
    except OSError:
        return {}
    return {
        "size_total": st.f_frsize * st.f_blocks,
        "size_available": st.f_frsize * st.f_bavail,
        "block_size": st.f_bsize,
        "block_total": st.f_blocks,
        "block_available": st.f_bavail,
        "block_used": st.f_blocks - st.f_bavail,
        "inode_total": st.f_files,
        "inode_available": st.f_favail,
        "inode_used": st.f_files - st.f_favail,
    }
