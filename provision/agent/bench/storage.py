"""Read throughput of the data disk vs the network disk, with the page cache kept out.

A file written just before is in the page cache, so reading it back would measure RAM. Reads
use O_DIRECT where the filesystem allows it (aligned buffers from mmap); otherwise the file's
cached pages are dropped with posix_fadvise(DONTNEED) after an fsync, which local filesystems
honour. The method used is reported. Sizes and times are bounded, the test file is removed.
"""

import mmap
import os
import random
import shutil
import time

from provision.agent.bench.common import sig
from provision.agent.bench.timing import median

BLOCK = 1 << 20  # sequential I/O size
SMALL = 4096  # random-read size (one page / one logical block on most devices)


def mount_of(path, mounts_file="/proc/mounts"):
    """(mount point, fs type, device) of the filesystem holding `path`: longest prefix wins."""
    path = os.path.realpath(path)
    best = ("/", None, None)
    try:
        with open(mounts_file) as f:
            for line in f:
                parts = line.split()
                if len(parts) < 3:
                    continue
                device, point, fstype = parts[0], parts[1].replace("\\040", " "), parts[2]
                inside = path == point or path.startswith(point.rstrip("/") + "/")
                if inside and len(point) >= len(best[0]):
                    best = (point, fstype, device)
    except OSError:
        pass
    return best


NETWORK_FS = (
    "nfs",
    "nfs4",
    "cifs",
    "smb3",
    "fuse",
    "fuse.juicefs",
    "ceph",
    "glusterfs",
    "lustre",
    "9p",
)


def free_space(path):
    usage = shutil.disk_usage(path)
    return {
        "total_gb": round(usage.total / 1e9, 1),
        "free_gb": round(usage.free / 1e9, 1),
        "used_pct": round(100.0 * (usage.total - usage.free) / usage.total, 1)
        if usage.total
        else None,
    }


def _open_direct(path):
    """(fd, method): O_DIRECT when the filesystem takes it, else a plain fd with cache dropped."""
    flag = getattr(os, "O_DIRECT", 0)
    if flag:
        try:
            return os.open(path, os.O_RDONLY | flag), "O_DIRECT"
        except OSError:
            pass  # tmpfs, some FUSE and network filesystems refuse it
    fd = os.open(path, os.O_RDONLY)
    if hasattr(os, "posix_fadvise"):
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        return fd, "posix_fadvise DONTNEED"
    return fd, "none (figures may include page-cache hits)"


def _write_file(path, size, seconds):
    """Write up to `size` bytes (1 MiB blocks) within `seconds`, fsync; (bytes, MB/s)."""
    chunk = os.urandom(BLOCK)  # incompressible, so compressing filesystems can't cheat
    written = 0
    start = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        while written < size and time.perf_counter() - start < seconds:
            written += os.write(fd, chunk)
        os.fsync(fd)
        if hasattr(os, "posix_fadvise"):
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)  # the written pages are clean now
    finally:
        os.close(fd)
    elapsed = time.perf_counter() - start
    return written, written / elapsed / 1e6


def _sequential_read(path, seconds):
    fd, method = _open_direct(path)
    buf = mmap.mmap(-1, BLOCK)  # page-aligned, as O_DIRECT requires
    total, offset = 0, 0
    start = time.perf_counter()
    try:
        while time.perf_counter() - start < seconds:
            n = os.preadv(fd, [buf], offset)
            if n <= 0:
                break
            total += n
            offset += n
    finally:
        os.close(fd)
        buf.close()
    elapsed = time.perf_counter() - start
    return {
        "mb_s": sig(total / elapsed / 1e6),
        "bytes": total,
        "seconds": round(elapsed, 3),
        "method": method,
    }


def _random_read(path, size, seconds, max_reads, seed=0):
    fd, method = _open_direct(path)
    if method != "O_DIRECT" and hasattr(os, "posix_fadvise"):
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)  # no readahead inflating the figure
    buf = mmap.mmap(-1, SMALL)
    rng = random.Random(seed)
    blocks = max(1, size // SMALL)
    latencies = []
    start = time.perf_counter()
    try:
        while len(latencies) < max_reads and time.perf_counter() - start < seconds:
            offset = rng.randrange(blocks) * SMALL
            t0 = time.perf_counter()
            os.preadv(fd, [buf], offset)
            latencies.append(time.perf_counter() - t0)
    finally:
        os.close(fd)
        buf.close()
    elapsed = time.perf_counter() - start
    iops = len(latencies) / elapsed
    return {
        "iops": sig(iops),
        "mb_s": sig(iops * SMALL / 1e6),
        "latency_ms": round(median(latencies) * 1e3, 4),
        "reads": len(latencies),
        "block_bytes": SMALL,
        "method": method,
    }


def measure_dir(path, quick, role="data"):
    path = os.path.expanduser(path)
    if not os.path.isdir(path):
        return {
            "path": path,
            "role": role,
            "status": "error",
            "reason": "%s is not a directory on this host" % path,
        }
    point, fstype, device = mount_of(path)
    out = {"path": path, "role": role, "mount": point, "fstype": fstype, "device": device}
    out["network_fs"] = bool(fstype and (fstype in NETWORK_FS or fstype.startswith("fuse")))
    out.update(free_space(path))
    want = (64 if quick else 1024) << 20
    size = min(want, int(shutil.disk_usage(path).free * 0.05)) // BLOCK * BLOCK
    if size < 8 * BLOCK:
        out["status"] = "skipped"
        out["reason"] = "less than 160 MiB free: no room for a test file"
        return out
    test_file = os.path.join(path, ".provision-bench-%d.tmp" % os.getpid())
    try:
        written, write_mb_s = _write_file(test_file, size, 5.0 if quick else 30.0)
        out["file_mb"] = written >> 20
        out["seq_write_mb_s"] = sig(write_mb_s)
        out["seq_read"] = _sequential_read(test_file, 3.0 if quick else 15.0)
        out["random_read"] = _random_read(
            test_file, written, 1.0 if quick else 5.0, 2000 if quick else 50000
        )
    finally:
        try:
            os.unlink(test_file)
        except OSError:
            pass
    out["status"] = "ok"
    return out


def measure(request, quick):
    dirs = [("data", request.get("data_dir") or os.path.expanduser("~"))]
    if request.get("network_dir"):
        dirs.append(("network", request["network_dir"]))
    results = [measure_dir(path, quick, role) for role, path in dirs]
    out = {"dirs": results}
    data, net = results[0], (results[1] if len(results) > 1 else None)
    if net and data.get("seq_read") and net.get("seq_read"):
        out["seq_read_ratio_data_vs_network"] = round(
            data["seq_read"]["mb_s"] / max(net["seq_read"]["mb_s"], 1e-9), 2
        )
        out["random_iops_ratio_data_vs_network"] = round(
            data["random_read"]["iops"] / max(net["random_read"]["iops"], 1e-9), 2
        )
    return out
