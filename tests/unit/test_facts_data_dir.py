"""Choosing the data directory, in a fake root whose mountinfo names real temporary directories
(so free space and writability are measured for real)."""

import os

from provision.agent.facts import data_dir


def fake_root(tmp_path, lines):
    """`lines`: (mountpoint relative to tmp_path or "/", fs type, options, major:minor)."""
    root = tmp_path / "root-fs"
    (root / "proc" / "self").mkdir(parents=True)
    text = []
    for n, (point, fs, options, dev) in enumerate(lines):
        real = "/" if point == "/" else str(root / point)
        if point != "/":
            os.makedirs(real, exist_ok=True)
        text.append(f"{100 + n} 1 {dev} / {real} {options} - {fs} src{n} rw")
    (root / "proc" / "self" / "mountinfo").write_text("\n".join(text) + "\n")
    return root


def test_autodl_local_disk_is_chosen_and_network_dirs_are_listed(tmp_path):
    root = fake_root(
        tmp_path,
        [
            ("/", "ext4", "rw,relatime", "254:0"),
            ("root/autodl-tmp", "xfs", "rw,relatime", "259:5"),
            ("root/autodl-fs", "fuse.juicefs", "rw,relatime", "0:401"),
            ("root/autodl-pub", "nfs4", "ro,relatime", "0:402"),
        ],
    )
    chosen = data_dir.choose({}, str(root))
    assert chosen["path"] == str(root / "root/autodl-tmp")
    assert chosen["fs_type"] == "xfs" and chosen["network"] is False and chosen["writable"] is True
    assert chosen["reason"].startswith("AutoDL local data disk")
    assert chosen["free_bytes"] > 0
    listed = {os.path.basename(d["path"]): d for d in chosen["network_dirs"]}
    assert (
        listed["autodl-fs"]["fs_type"] == "fuse.juicefs"
        and "kept after release" in listed["autodl-fs"]["description"]
    )
    assert listed["autodl-pub"]["fs_type"] == "nfs4"


def test_network_workspace_is_passed_over_for_the_largest_local_filesystem(tmp_path):
    root = fake_root(
        tmp_path,
        [
            ("/", "ext4", "rw,relatime", "254:0"),
            ("workspace", "fuse.mfs", "rw,relatime", "0:77"),
        ],
    )
    chosen = data_dir.choose({}, str(root))
    assert chosen["rejected"] == [
        {"path": str(root / "workspace"), "why": "network storage (fuse.mfs)"}
    ]
    assert chosen["mountpoint"] == "/"
    # On the root filesystem the home directory is used, not / itself.
    assert chosen["path"] in (os.path.expanduser("~"), "/var/tmp")
    assert chosen["reason"].startswith("largest local writable filesystem: / (")
    assert "passed over %s (network storage (fuse.mfs))" % (root / "workspace") in chosen["reason"]


def test_read_only_known_layout_is_rejected(tmp_path):
    root = fake_root(
        tmp_path, [("/", "ext4", "rw", "254:0"), ("hy-tmp", "ext4", "ro,relatime", "259:3")]
    )
    chosen = data_dir.choose({}, str(root))
    assert chosen["rejected"] == [{"path": str(root / "hy-tmp"), "why": "not writable"}]


def test_requested_directory_that_does_not_exist_yet(tmp_path):
    root = fake_root(tmp_path, [("/", "ext4", "rw", "254:0"), ("data", "xfs", "rw", "259:1")])
    wanted = root / "data" / "datasets" / "imagenet"
    chosen = data_dir.choose({"data_dir": str(wanted)}, str(root))
    assert chosen["path"] == str(wanted) and chosen["exists"] is False
    assert chosen["mountpoint"] == str(root / "data") and chosen["fs_type"] == "xfs"
    assert chosen["reason"] == "requested with the data_dir variable"


def test_requested_network_directory_carries_a_warning(tmp_path):
    root = fake_root(tmp_path, [("/", "ext4", "rw", "254:0"), ("nfs", "nfs4", "rw", "0:50")])
    chosen = data_dir.choose({"data_dir": str(root / "nfs")}, str(root))
    assert chosen["network"] is True and "network storage (nfs4)" in chosen["warning"]
