"""One sample of the machine and the run's processes per interval, as a JSON line.

Per sample: all-CPU busy and iowait % (/proc/stat, the bench's reader), CPU cores used by the
run's main process and by the rest of its process group (DataLoader workers), their RSS,
memory available, read MB/s per whole disk (/proc/diskstats: local block devices), NFS read
MB/s per mount (/proc/self/mountstats), files the run holds open on network mounts (FUSE and
other network filesystems have no per-mount counters, so what the run has open there is the
evidence), and per-GPU figures (gpu.py).

Cost is bounded per sample: the run's known processes' /proc/PID/stat (a pass over all of
/proc/*/stat every FULL_SCAN_EVERY samples finds new workers), at most MAX_FD_PIDS processes' fd
tables of at most MAX_FDS entries each, and NVML queries; benchmarks/train_overhead.py
measures it.
"""

from __future__ import annotations

import os
import time

from provision.agent.bench.sampler import cpu_percent, read_proc_stat
from provision.agent.facts.mounts import is_network_fs, read_mounts
from provision.agent.train import procs

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, List, Optional, Tuple

MAX_FD_PIDS = 16
MAX_FDS = 512
MOUNTS_REFRESH_S = 30.0
FULL_SCAN_EVERY = 5  # samples between passes over all of /proc for new processes of the run


def read_meminfo(path: str = "/proc/meminfo") -> Dict[str, int]:
    out = {}
    try:
        with open(path) as f:
            for line in f:
                key, _, rest = line.partition(":")
                if key in ("MemTotal", "MemAvailable"):
                    out[key] = int(rest.split()[0]) // 1024
    except (OSError, ValueError, IndexError):
        pass
    return out


def whole_disks(sys_block: str = "/sys/block") -> List[str]:
    try:
        return sorted(n for n in os.listdir(sys_block) if not n.startswith(("loop", "ram", "zram", "sr", "fd")))
    except OSError:
        return []


def read_diskstats(disks: List[str], path: str = "/proc/diskstats") -> Dict[str, int]:
    """disk -> sectors read (512 bytes each, whatever the device's sector size)."""
    wanted = set(disks)
    out = {}
    try:
        with open(path) as f:
            for line in f:
                fields = line.split()
                if len(fields) > 5 and fields[2] in wanted:
                    out[fields[2]] = int(fields[5])
    except (OSError, ValueError):
        pass
    return out


def read_nfs_bytes(path: str = "/proc/self/mountstats") -> Dict[str, int]:
    """NFS mountpoint -> bytes read by applications (the first figure of its `bytes:` line)."""
    out = {}
    current = None
    try:
        with open(path) as f:
            for line in f:
                if line.startswith("device "):
                    parts = line.split()
                    current = parts[4] if len(parts) > 7 and parts[7].startswith("nfs") else None
                elif current and line.strip().startswith("bytes:"):
                    out[current] = int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return out


class RunSampler(object):
    """Call sample() once per interval; each call returns one JSON-able dict."""

    def __init__(self, main_pid: int, pgid: int, gpu_probe: Any = None) -> None:
        self.main_pid = main_pid
        self.pgid = pgid
        self.gpu = gpu_probe
        self.disks = whole_disks()
        self._stat = read_proc_stat()
        self._disk = read_diskstats(self.disks)
        self._nfs = read_nfs_bytes()
        # CPU seconds per pid at the previous sample; a pid first seen later is a new worker
        self._cpu = dict((pid, st[3]) for pid, st in procs.group_members(pgid).items())
        self._t = time.time()
        self._n = 0
        self._mounts_at = 0.0
        self.network_mounts = []  # type: List[Tuple[str, str]]
        self._refresh_mounts()

    def _refresh_mounts(self) -> None:
        self._mounts_at = time.time()
        mounts = read_mounts()
        self.network_mounts = sorted(
            ((str(m["mountpoint"]), str(m["fs_type"])) for m in mounts if is_network_fs(str(m["fs_type"]))),
            key=lambda m: -len(m[0]),
        )

    def network_mount_of(self, path: str) -> Optional[Tuple[str, str]]:
        for point, fs_type in self.network_mounts:
            if path == point or path.startswith(point.rstrip("/") + "/"):
                return point, fs_type
        return None

    def sample(self) -> Dict[str, Any]:
        now = time.time()
        dt = max(1e-6, now - self._t)
        self._t = now
        if now - self._mounts_at > MOUNTS_REFRESH_S:
            self._refresh_mounts()
        stat = read_proc_stat()
        busy, iowait = cpu_percent(self._stat, stat)
        self._stat = stat
        self._n += 1
        if self._n % FULL_SCAN_EVERY == 0 or not self._cpu:
            members = procs.group_members(self.pgid)  # finds new workers
        else:  # the known members only: a pass over all of /proc costs ~1 ms per 100 processes
            members = procs.group_members(self.pgid, list(self._cpu))
        main = workers = 0.0
        rss = 0
        cpu_now = {}
        for pid, (_, _, _, cpu_s, rss_b, _) in members.items():
            cpu_now[pid] = cpu_s
            used = max(0.0, cpu_s - self._cpu.get(pid, 0.0))
            if pid == self.main_pid:
                main += used
            else:
                workers += used
            rss += rss_b
        self._cpu = cpu_now
        mem = read_meminfo()
        disk = read_diskstats(self.disks)
        reads = {d: round((disk[d] - self._disk.get(d, disk[d])) * 512 / dt / 1e6, 2) for d in disk}
        self._disk = disk
        nfs = read_nfs_bytes()
        nfs_rates = {m: round((nfs[m] - self._nfs.get(m, nfs[m])) / dt / 1e6, 2) for m in nfs}
        self._nfs = nfs
        row = {
            "t": round(now, 3),
            "cpu": busy,
            "iowait": iowait,
            "cores_main": round(main / dt, 2),
            "cores_workers": round(workers / dt, 2),
            "procs": len(members),
            "rss_mb": rss // (1 << 20),
            "mem_avail_mb": mem.get("MemAvailable"),
            "mem_total_mb": mem.get("MemTotal"),
            "disk_read_mb_s": {d: r for d, r in reads.items() if r},
        }  # type: Dict[str, Any]
        if nfs_rates:
            row["nfs_read_mb_s"] = nfs_rates
        if self.network_mounts:
            opened = self._network_files(list(members))
            if opened:
                row["network_open"] = opened
        if self.gpu is not None:
            gpus = self.gpu.sample()
            if gpus:
                row["gpus"] = gpus
        return row

    def _network_files(self, pids: List[int]) -> Dict[str, int]:
        """network mountpoint -> files the run's processes hold open there."""
        counts = {}  # type: Dict[str, int]
        for pid in sorted(pids)[:MAX_FD_PIDS]:
            base = "/proc/%d/fd" % pid
            try:
                names = os.listdir(base)[:MAX_FDS]
            except OSError:
                continue
            for name in names:
                try:
                    target = os.readlink(os.path.join(base, name))
                except OSError:
                    continue
                if not target.startswith("/"):
                    continue  # pipe:, socket:, anon_inode:
                hit = self.network_mount_of(target)
                if hit:
                    key = "%s (%s)" % hit
                    counts[key] = counts.get(key, 0) + 1
        return counts
