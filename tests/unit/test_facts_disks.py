"""Mount classification and block-device resolution, on real-format mountinfo and a fake /sys."""

import os

from provision.agent.facts import disks, mounts

# A rented container's mountinfo: overlay root, Docker's single-file bind mounts, a local NVMe
# data disk, AutoDL-style network storage, NFS, SMB, and the usual pseudo filesystems.
CONTAINER_MOUNTINFO = """\
2310 1870 0:312 / / rw,relatime master:730 - overlay overlay rw,lowerdir=/var/lib/docker/overlay2/l/ABC:/var/lib/docker/overlay2/l/DEF,upperdir=/var/lib/docker/overlay2/9f2c/diff,workdir=/var/lib/docker/overlay2/9f2c/work
2311 2310 0:315 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw
2312 2310 0:316 / /dev rw,nosuid - tmpfs tmpfs rw,size=65536k,mode=755
2316 2312 0:314 / /dev/shm rw,nosuid,nodev,noexec,relatime - tmpfs shm rw,size=65536k
2317 2310 0:318 / /sys ro,nosuid,nodev,noexec,relatime - sysfs sysfs ro
2318 2317 0:30 / /sys/fs/cgroup ro,nosuid,nodev,noexec,relatime - cgroup2 cgroup rw
2320 2310 259:2 /var/lib/docker/containers/9f2c/resolv.conf /etc/resolv.conf rw,relatime - ext4 /dev/nvme0n1p2 rw
2321 2310 259:2 /var/lib/docker/containers/9f2c/hosts /etc/hosts rw,relatime - ext4 /dev/nvme0n1p2 rw
2322 2310 259:5 /instances/abc /root/autodl-tmp rw,relatime - xfs /dev/nvme1n1 rw,attr2,inode64,prjquota
2323 2310 0:401 / /root/autodl-fs rw,relatime - fuse.juicefs JuiceFS:autodl-fs rw,user_id=0,group_id=0,allow_other
2324 2310 0:402 / /mnt/nfs\\040share rw,relatime - nfs4 10.0.0.5:/export/data rw,vers=4.1,rsize=1048576
2325 2310 0:403 / /mnt/smb rw,relatime - cifs //fileserver/team rw,vers=3.1.1,username=alice
2326 2310 0:404 / /mnt/s3 rw,nosuid,nodev - fuse.s3fs s3fs rw,user_id=0
2327 2310 8:17 / /mnt/ntfs rw,relatime - fuseblk /dev/sdb1 rw,user_id=0,allow_other
"""


def test_parse_mountinfo_fields_and_escapes():
    parsed = mounts.parse_mountinfo(CONTAINER_MOUNTINFO)
    root = parsed[0]
    assert (root["mountpoint"], root["fs_type"], root["major"], root["minor"]) == (
        "/",
        "overlay",
        0,
        312,
    )
    assert "upperdir=/var/lib/docker/overlay2/9f2c/diff" in root["super_options"]
    assert parsed[8]["root"] == "/instances/abc" and parsed[8]["source"] == "/dev/nvme1n1"
    assert parsed[10]["mountpoint"] == "/mnt/nfs share"  # \040 is a space


def test_network_and_pseudo_classification():
    kinds = {m["mountpoint"]: m["fs_type"] for m in mounts.parse_mountinfo(CONTAINER_MOUNTINFO)}
    network = {point for point, fs in kinds.items() if mounts.is_network_fs(fs)}
    assert network == {"/root/autodl-fs", "/mnt/nfs share", "/mnt/smb", "/mnt/s3"}
    assert not mounts.is_network_fs("fuseblk") and not mounts.is_network_fs("xfs")
    for fs in ("ceph", "glusterfs", "lustre", "beegfs", "9p", "fuse.sshfs", "fuse.ossfs", "smb3"):
        assert mounts.is_network_fs(fs), fs
    assert (
        mounts.is_pseudo_fs("cgroup2")
        and mounts.is_pseudo_fs("tmpfs")
        and not mounts.is_pseudo_fs("overlay")
    )


def test_real_mounts_skip_pseudo_and_single_file_binds():
    points = [
        m["mountpoint"] for m in disks.real_mounts(mounts.parse_mountinfo(CONTAINER_MOUNTINFO))
    ]
    assert "/proc" not in points and "/dev/shm" not in points and "/sys/fs/cgroup" not in points
    if os.path.isfile("/etc/hosts"):  # Docker binds files over /etc/hosts; those are not disks
        assert "/etc/hosts" not in points
    assert points[0] == "/" and "/root/autodl-tmp" in points and "/mnt/s3" in points


def test_mount_for_prefers_the_longest_mountpoint(tmp_path):
    data = tmp_path / "data"
    (data / "sub").mkdir(parents=True)
    table = mounts.parse_mountinfo(
        f"1 0 8:1 / / rw - ext4 /dev/sda1 rw\n2 1 259:1 / {data} rw - xfs /dev/nvme0n1 rw\n"
    )
    assert mounts.mount_for(str(data / "sub"), table)["fs_type"] == "xfs"
    assert mounts.mount_for(str(tmp_path), table)["fs_type"] == "ext4"


def make_sys(tmp_path):
    """/sys with an NVMe partition, a SATA SSD, an HDD, and an LVM volume on the NVMe."""
    sys_root = tmp_path / "sys"
    devices = sys_root / "devices" / "pci0000:00"

    def disk(name, rotational, model, partitions=(), major_minor=None, size="1953525168"):
        path = devices / name
        (path / "queue").mkdir(parents=True)
        (path / "queue" / "rotational").write_text(rotational + "\n")
        (path / "device").mkdir()
        (path / "device" / "model").write_text(model + "\n")
        (path / "size").write_text(size + "\n")
        (sys_root / "block").mkdir(parents=True, exist_ok=True)
        (sys_root / "block" / name).symlink_to(path)
        (sys_root / "class" / "block").mkdir(parents=True, exist_ok=True)
        (sys_root / "class" / "block" / name).symlink_to(path)
        for part, mm in partitions:
            (path / part).mkdir()
            (path / part / "partition").write_text("1\n")
            (sys_root / "class" / "block" / part).symlink_to(path / part)
            (sys_root / "dev" / "block").mkdir(parents=True, exist_ok=True)
            (sys_root / "dev" / "block" / mm).symlink_to(path / part)
        if major_minor:
            (sys_root / "dev" / "block").mkdir(parents=True, exist_ok=True)
            (sys_root / "dev" / "block" / major_minor).symlink_to(path)
        return path

    disk(
        "nvme0n1",
        "0",
        "SAMSUNG MZQL23T8HCLS-00A07",
        partitions=[("nvme0n1p1", "259:1"), ("nvme0n1p2", "259:2")],
    )
    disk("sda", "0", "INTEL SSDSC2KG96", major_minor="8:0")
    disk("sdb", "1", "ST16000NM001G", partitions=[("sdb1", "8:17")])
    dm = devices / "virtual" / "dm-0"
    (dm / "slaves").mkdir(parents=True)
    (dm / "slaves" / "nvme0n1p2").symlink_to(devices / "nvme0n1" / "nvme0n1p2")
    (dm / "queue").mkdir()
    (dm / "queue" / "rotational").write_text("0\n")
    (dm / "size").write_text("100\n")
    (sys_root / "block" / "dm-0").symlink_to(dm)
    (sys_root / "dev" / "block" / "253:0").symlink_to(dm)
    (sys_root / "block" / "loop0").symlink_to(dm)  # loop devices are left out of the list
    return str(sys_root)


def test_block_devices_follow_partitions_and_device_mapper(tmp_path):
    sys_root = make_sys(tmp_path)
    nvme = disks.block_device(259, 1, sys_root)
    assert nvme == {
        "name": "nvme0n1",
        "media": "nvme",
        "rotational": False,
        "model": "SAMSUNG MZQL23T8HCLS-00A07",
    }
    assert disks.block_device(8, 0, sys_root)["media"] == "ssd"
    assert disks.block_device(8, 17, sys_root)["media"] == "hdd"
    lvm = disks.block_device(253, 0, sys_root)
    assert lvm["media"] == "nvme" and lvm["built_on"] == ["nvme0n1"]
    assert disks.block_device(0, 312, sys_root)["media"] == "unknown"  # overlay/anonymous
    listed = disks.block_devices(sys_root)
    assert [d["name"] for d in listed] == ["dm-0", "nvme0n1", "sda", "sdb"]
    assert listed[1]["size_bytes"] == 1953525168 * 512
    assert disks.media("vda", True) == "virtio"  # virtio's rotational flag means nothing


def test_overlay_resolves_to_the_disk_under_its_upper_dir(tmp_path):
    sys_root = make_sys(tmp_path)
    docker = tmp_path / "var-lib-docker"
    upper = docker / "overlay2" / "9f2c" / "diff"
    upper.mkdir(parents=True)
    table = mounts.parse_mountinfo(
        f"1 0 0:312 / / rw - overlay overlay rw,upperdir={upper},workdir=x\n"
        f"2 1 259:1 / {docker} rw - ext4 /dev/nvme0n1p1 rw\n"
    )
    info = disks.overlay_backing(table[0], table, sys_root)
    assert info["name"] == "nvme0n1" and info["media"] == "nvme"
    assert info["via"] == f"overlay upperdir on {docker}"
    hidden = mounts.parse_mountinfo(
        "1 0 0:312 / / rw - overlay overlay rw,upperdir=/nonexistent/diff\n"
    )
    assert disks.overlay_backing(hidden[0], hidden, sys_root)["media"] == "unknown"


def test_describe_a_local_mount_and_mask_network_credentials(tmp_path):
    sys_root = make_sys(tmp_path)
    table = mounts.parse_mountinfo(f"7 1 259:1 / {tmp_path} rw,relatime - xfs /dev/nvme0n1p1 rw\n")
    entry = disks.describe(table[0], table, sys_root)
    assert entry["network"] is False and entry["writable"] is True
    assert entry["free_bytes"] > 0 and entry["total_bytes"] >= entry["free_bytes"]
    assert entry["device"]["media"] == "nvme"
    assert disks._mask_source("alice:s3cret@10.0.0.5:/export") == "***@10.0.0.5:/export"


def test_statvfs_that_never_answers_is_reported_not_waited_on(monkeypatch):
    import threading

    gate = threading.Event()
    monkeypatch.setattr(os, "statvfs", lambda path: gate.wait(5))
    result = disks.space("/mnt/dead-nfs", timeout=0.2)
    gate.set()
    assert result["total_bytes"] is None and "did not answer" in result["error"]
