"""`provision stage` against real sshd hosts: one tar stream over SSH into an LMDB on the host's
tmpfs "SSD", read back on the host; killed controller, dropped link and full disk, then resume.

Host state is checked through ns_exec (outside SSH) or the agent; the hosts' Debian python3 has
no py-lmdb, so these runs also exercise shipping it.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import signal
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fleet import Fleet, FleetHost

from provision.connection.base import ConnectOptions
from provision.connection.ssh import SSHConnection
from provision.errors import HostError
from provision.remote.agent import Agent
from provision.staging import HostStage, make_request, stage_dataset, stage_hosts
from provision.staging.sample import make_image_folder
from provision.staging.source import plan_local, sample_stream
from tests.support.hostile_names import HOSTILE_NAMES

REPO = Path(__file__).resolve().parents[2]
SSD = "/root/autodl-tmp"
HOSTILE = HOSTILE_NAMES
# Reads a staged dataset on the host with the reader written beside it and the py-lmdb that
# provision shipped: [relpath, label, sha256] per sample, as JSON.
READ_BACK = r"""
import glob, hashlib, json, sys
sys.path[:0] = [sys.argv[1]] + glob.glob('/root/.cache/provision/pylib/*/site')
from provision_lmdb import LMDBDataset
ds = LMDBDataset(sys.argv[2])
print(json.dumps({"classes": ds.classes, "rows": [[ds.relpath(i), ds[i][1], hashlib.sha256(ds[i][0]).hexdigest()] for i in range(len(ds))]}))
"""


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_image_folder(
        tmp_path_factory.mktemp("fimages") / "flowers", 2000, classes=5, size=32
    )


@pytest.fixture(scope="module")
def big_images(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """~6 MB: long enough to interrupt on a shaped link."""
    return make_image_folder(tmp_path_factory.mktemp("fbig") / "big", 3000, classes=3, size=48)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("fhostile") / "hostile"
    (root / "imgs").mkdir(parents=True)
    with open(root / "labels.csv", "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        for i, name in enumerate(HOSTILE):
            (root / "imgs" / name).write_bytes(name.encode() * (i + 3))
            w.writerow([f"imgs/{name}", i % 2])
    return root


def expected(root: Path) -> list[list]:
    """[relpath, label, sha256] for an image folder, in staging order."""
    rows = []
    for label, c in enumerate(sorted(p.name for p in root.iterdir())):
        for f in sorted((root / c).iterdir()):
            rows.append([f"{c}/{f.name}", label, hashlib.sha256(f.read_bytes()).hexdigest()])
    return rows


def read_on_host(fleet: Fleet, host: FleetHost | str, path: str) -> dict:
    proc = fleet.ns_exec(
        host, ["/usr/bin/python3", "-B", "-c", READ_BACK, os.path.dirname(path), path]
    )
    return json.loads(proc.stdout)


def ssd_listing(fleet: Fleet, host: FleetHost | str) -> list[str]:
    out = fleet.ns_exec(host, f"cd {SSD} && find . -mindepth 1 | sort").stdout
    return [line[2:] for line in out.splitlines()]


def wait_for_commit(fleet: Fleet, host: FleetHost, partial: str, timeout: float = 60) -> int:
    """Poll the partial LMDB on the host (outside SSH) until a commit shows; returns its size."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        proc = fleet.ns_exec(host, f"stat -c %s {partial} 2>/dev/null || echo 0", check=False)
        size = int((proc.stdout.strip() or "0").splitlines()[-1])
        if size > 200_000:
            return size
        time.sleep(0.1)
    raise AssertionError(f"no commit to {partial} within {timeout}s")


@pytest.fixture
def host_ssd(fleet: Fleet) -> Iterator:
    """A fleet host with data_dir set to its tmpfs SSD, cleaned afterwards."""
    created: list[FleetHost] = []

    def pick(index: int = 0):
        h = fleet.hosts[index]
        created.append(h)
        return h, h.as_host(vars={"data_dir": SSD})

    yield pick
    for h in created:
        fleet.unshape(h)
        fleet.link_up(h)
        fleet.ns_exec(h, f"rm -rf {SSD}/* {SSD}/.[!.]*", check=False)


# -- stage and read back ----------------------------------------------------------------------
def test_stage_over_ssh_then_read_back_on_the_host(
    fleet: Fleet, connect, images: Path, hostile: Path, host_ssd
) -> None:
    fh, host = host_ssd(0)
    conn = connect(host)
    agent = Agent(conn)
    events: list[dict] = []
    result = stage_dataset(conn, agent, str(images), on_event=events.append, verify=True)
    path = f"{SSD}/datasets/flowers.lmdb"
    assert result["path"] == path and result["count"] == 2000 and result["verified"]
    assert "lmdb" in [e.get("phase") for e in events]  # Debian's python3 got py-lmdb shipped
    got = read_on_host(fleet, fh, path)
    assert got["classes"] == [f"class{c:02d}" for c in range(5)]
    assert got["rows"] == expected(images)

    labelled = stage_dataset(conn, agent, str(hostile))
    assert labelled["count"] == len(HOSTILE) and labelled["layout"] == "labels"
    rows = read_on_host(fleet, fh, labelled["path"])["rows"]
    assert sorted(r[0] for r in rows) == sorted(f"imgs/{n}" for n in HOSTILE)
    for rel, label, digest in rows:
        name = rel[len("imgs/") :]
        assert digest == hashlib.sha256((hostile / "imgs" / name).read_bytes()).hexdigest()
        assert label == HOSTILE.index(name) % 2
    assert (
        fleet.ns_exec(fh, "ls /root/PWNED /root/PWNED2 2>&1 || true").stdout.count("No such file")
        == 2
    )
    check = agent.call("verify_dataset", {"path": labelled["path"]})
    assert check["ok"] and check["count"] == len(HOSTILE)

    # a rerun does nothing: same file, no new upload of py-lmdb
    before = fleet.ns_exec(fh, f"stat -c %Y.%i {path}").stdout
    events.clear()
    again = stage_dataset(conn, agent, str(images), on_event=events.append)
    phases = [e["phase"] for e in events]
    assert again["skipped"] is True and phases[-1] == "skipped"
    assert not {"lmdb", "stage"} & set(phases)  # nothing shipped, nothing streamed
    assert fleet.ns_exec(fh, f"stat -c %Y.%i {path}").stdout == before


def test_default_destination_is_the_facts_data_dir(fleet: Fleet, connect, images: Path) -> None:
    fh = fleet.hosts[1]
    conn = connect(fh.as_host())
    agent = Agent(conn)
    facts = agent.call("facts", {"only": ["data_dir"]})
    result = stage_dataset(conn, agent, str(images), name="dd")
    try:
        assert result["path"] == os.path.join(facts["data_dir"]["path"], "datasets", "dd.lmdb")
    finally:
        conn.run(f"rm -f {result['path']}")


def test_several_hosts_in_parallel_from_one_read(
    fleet: Fleet, ssh_options: ConnectOptions, images: Path, host_ssd
) -> None:
    picked = [host_ssd(i) for i in (2, 3, 4, 5)]
    plan = plan_local(str(images))
    outcomes = stage_hosts(
        [h for _, h in picked], make_request(str(images)), ssh_options, forks=4, plan=plan
    )
    assert {n: o.message for n, o in outcomes.items() if not o.ok} == {}
    for fh, _ in picked:
        assert read_on_host(fleet, fh, f"{SSD}/datasets/flowers.lmdb")["rows"] == expected(images)


def test_path_traversal_archives_are_refused_on_both_sides(
    fleet: Fleet, connect, tmp_path: Path, host_ssd
) -> None:
    evil = tmp_path / "evil.tar"
    with tarfile.open(evil, "w") as tf:
        for name in ("ok/1.jpg", "../../../root/.ssh/authorized_keys"):
            info = tarfile.TarInfo(name)
            info.size = 4
            tf.addfile(info, io.BytesIO(b"evil"))
    fh, host = host_ssd(0)
    conn = connect(host)
    from provision.errors import ConfigError

    with pytest.raises(
        ConfigError, match=r"'\.\./\.\./\.\./root/\.ssh/authorized_keys'.*'\.\.' component"
    ):
        stage_dataset(conn, None, str(evil))
    conn.put(evil.read_bytes(), "/root/evil.tar")
    with pytest.raises(HostError, match=r"authorized_keys.*'\.\.' component"):
        stage_dataset(conn, None, "host:/root/evil.tar")
    assert "evil" not in fleet.ns_exec(fh, "cat /root/.ssh/authorized_keys").stdout
    assert not any(n.endswith(".lmdb") for n in ssd_listing(fleet, fh))


# -- interruptions ----------------------------------------------------------------------------
def test_killed_controller_then_rerun_resumes(
    fleet: Fleet, tmp_path: Path, big_images: Path, ssh_config_file: Path, host_ssd
) -> None:
    fh, _ = host_ssd(6)
    inventory = fleet.write_inventory(tmp_path / "hosts.ini")
    fleet.shape(fh, rate="8mbit", delay=None)  # ~6 MB takes several seconds: time to interrupt
    cmd = [
        sys.executable,
        "-m",
        "provision",
        "stage",
        str(big_images),
        fh.name,
        "-i",
        str(inventory),
        "--dest",
        f"{SSD}/datasets",
        "--ssh-config",
        str(ssh_config_file),
        "--json",
    ]
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_for_commit(fleet, fh, f"{SSD}/datasets/big.lmdb.partial")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    fleet.unshape(fh)
    done = subprocess.run(cmd + ["--verify"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    entry = json.loads(done.stdout)["hosts"][fh.name]
    assert entry["count"] == 3000 and entry["resumed_from"] > 0 and entry["verified"]
    assert read_on_host(fleet, fh, entry["path"])["rows"] == expected(big_images)
    assert ssd_listing(fleet, fh) == ["datasets", "datasets/big.lmdb", "datasets/provision_lmdb.py"]


def test_dropped_link_then_rerun_resumes(fleet: Fleet, connect, big_images: Path, host_ssd) -> None:
    fh, host = host_ssd(7)
    fleet.shape(fh, rate="8mbit", delay=None)
    conn = connect(host)
    agent = Agent(conn)

    def pull_the_cable() -> None:
        wait_for_commit(fleet, fh, f"{SSD}/datasets/big.lmdb.partial")
        fleet.link_down(fh)

    cutter = threading.Thread(target=pull_the_cable)
    cutter.start()
    with pytest.raises(HostError, match="rerun the same command to resume"):
        stage_dataset(conn, agent, str(big_images), stall_timeout=3)
    cutter.join()
    fleet.link_up(fh)
    fleet.unshape(fh)
    result = stage_dataset(conn, agent, str(big_images), stall_timeout=3)
    assert result["count"] == 3000 and result["resumed_from"] > 0
    assert read_on_host(fleet, fh, result["path"])["rows"] == expected(big_images)


def test_disk_full_on_the_host_ssd(
    make_fleet, ssh_options: ConnectOptions, big_images: Path, images: Path
) -> None:
    small = make_fleet(1, ssd_size="8m")
    fh = small.hosts[0]
    conn = SSHConnection(fh.as_host(vars={"data_dir": SSD}), ssh_options)
    try:
        agent = Agent(conn)
        # refused up front when the estimate does not fit: nothing written
        small.ns_exec(fh, f"dd if=/dev/zero of={SSD}/other bs=1M count=6 2>/dev/null")
        with pytest.raises(
            HostError,
            match=r"not enough space for .*/flowers\.lmdb: it needs about .* MB, .* MB is free",
        ):
            stage_dataset(conn, agent, str(images))
        assert ssd_listing(small, fh) in (["other"], ["datasets", "other"])  # no file written
        small.ns_exec(fh, f"rm {SSD}/other")

        # fills up mid-way (another writer takes the space): clear error, partial kept, resume
        request = make_request(str(big_images), commit={"samples": 200})
        plan = plan_local(str(big_images))
        committed = threading.Event()

        def on_event(event: dict) -> None:
            if (event.get("committed") or 0) > 0:
                committed.set()

        def fill_midway() -> Iterator[bytes]:
            for n, chunk in enumerate(sample_stream(plan)):
                if n == 2:
                    assert committed.wait(30)
                    small.ns_exec(fh, f"dd if=/dev/zero of={SSD}/filler bs=64k 2>/dev/null || true")
                yield chunk

        hs = HostStage(conn, agent, request, plan, on_event).prepare()
        with pytest.raises(
            HostError,
            match=r"disk full writing /root/autodl-tmp/datasets/big\.lmdb\.partial after \d+ of 3000",
        ):
            hs.run(fill_midway())
        assert "datasets/big.lmdb.partial" in ssd_listing(small, fh)
        small.ns_exec(fh, f"rm {SSD}/filler")
        result = stage_dataset(conn, agent, str(big_images))
        assert result["resumed_from"] > 0 and result["count"] == 3000
        assert read_on_host(small, fh, result["path"])["rows"] == expected(big_images)
    finally:
        conn.close()
