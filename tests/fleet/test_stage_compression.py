"""zstd on the stage stream over real SSH: used where the host's Python has zstandard, the data
compresses and the link is slow; never where the host lacks it; the dataset is the same bytes
either way (its checksum equals a local build's)."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest
from fleet import Fleet

from provision.remote.agent import Agent
from provision.shell import path, sh
from provision.staging import make_request, stage_dataset, stage_local
from provision.staging.sample import make_text_folder

zstandard = pytest.importorskip("zstandard")
SSD = "/root/autodl-tmp"


@pytest.fixture(scope="module")
def text(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("text") / "logs"
    # ~16 MB, ~3x with zstd: 16 frames, enough for the raw baseline window and the zstd ones
    return make_text_folder(root, 800, classes=4, size=20_000)


@pytest.fixture(scope="module")
def local_checksum(text: Path, tmp_path_factory: pytest.TempPathFactory) -> str:
    out = tmp_path_factory.mktemp("local") / "logs.lmdb"
    return stage_local(make_request(str(text), name="logs"), str(out))["checksum"]


def _give_host_zstandard(conn) -> None:
    """Put this machine's zstandard package into the host user's site-packages (the hosts run
    the same Debian python3 ABI the controller's cp311 build is for, else skip)."""
    import sys

    version = conn.run("python3 -c 'import sys; print(\"%d.%d\" % sys.version_info[:2])'")
    host_py = version.stdout.strip().splitlines()[-1]
    if host_py != "{}.{}".format(*sys.version_info[:2]):
        pytest.skip(f"the host's python3 is {host_py}; this zstandard build is for another")
    package = Path(zstandard.__file__).parent
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.add(package, arcname="zstandard")
    site = path(f"~/.local/lib/python{host_py}/site-packages")
    result = conn.run(sh("mkdir -p {site} && tar xf - -C {site}", site=site), stdin=buf.getvalue())
    assert result.ok, result.stderr
    check = conn.run("python3 -c 'import zstandard'")
    assert check.ok, check.stderr


def _remove_zstandard(conn) -> None:
    conn.run("rm -rf ~/.local/lib/python3*/site-packages/zstandard")


def test_host_without_zstandard_gets_raw_frames(
    fleet: Fleet, connect, text: Path, local_checksum: str
) -> None:
    fh = fleet.hosts[2]
    conn = connect(fh.as_host())
    _remove_zstandard(conn)
    try:
        agent = Agent(conn)
        result = stage_dataset(conn, agent, str(text), name="logs", dest=SSD + "/z0")
        assert result["count"] == 800
        assert result["checksum"] == local_checksum
        assert result["compression"]["codec"] == "none"
        assert result["compression"]["zstd_frames"] == 0
        assert result["wire_bytes"] > result["stream_bytes"]  # the frame headers, nothing else
        check = agent.call("verify_dataset", {"path": result["path"]})
        assert check["ok"] and check["count"] == 800
    finally:
        fleet.ns_exec(fh, f"rm -rf {SSD}/z0", check=False)


def test_compressible_data_over_a_slow_link_goes_zstd(
    make_fleet, connect, text: Path, local_checksum: str
) -> None:
    own = make_fleet(1)  # shaping changes the link: not on the shared fleet
    fh = own.hosts[0]
    conn = connect(fh.as_host())
    _give_host_zstandard(conn)
    own.shape(fh, rate="40mbit", delay=None)  # 5 MB/s: far below what zstd compresses at
    try:
        agent = Agent(conn)
        result = stage_dataset(conn, agent, str(text), name="logs", dest=SSD + "/z1")
        assert result["count"] == 800
        assert result["checksum"] == local_checksum  # the same bytes as without compression
        summary = result["compression"]
        assert summary["codec"] == "zstd" and summary["zstd_frames"] >= 1
        assert result["wire_bytes"] < 0.7 * result["stream_bytes"]
        assert summary["sampled_ratio"] < 0.7
        # measured, not assumed: a raw baseline window first, then zstd windows
        assert summary["windows"]["raw"] >= 1 and summary["windows"]["zstd"] >= 1
        assert summary["raw_mb_per_s"] and summary["zstd_mb_per_s"]  # both paces were measured
        check = agent.call("verify_dataset", {"path": result["path"]})
        assert check["ok"] and check["count"] == 800
    finally:
        own.unshape(fh)


def test_a_host_without_zstandard_gets_it_shipped_where_the_data_pays(
    make_fleet, connect, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """~48 MB of text to a host whose Python lacks zstandard, over a slow link: the controller
    samples the ratio, uploads its own zstandard for the host's Python meanwhile (the stream
    starts raw), checks it imports there, then compresses; the next stage finds it in place."""
    import sys

    from provision.agent.datasets.deps import python_tag

    big = make_text_folder(tmp_path_factory.mktemp("big") / "logs", 2400, classes=4, size=20_000)
    want = stage_local(make_request(str(big), name="logs"), str(tmp_path_factory.mktemp("bl") / "l.lmdb"))
    own = make_fleet(1)
    fh = own.hosts[0]
    conn = connect(fh.as_host())
    host_py = conn.run("python3 -c 'import sys; print(\"%d.%d\" % sys.version_info[:2])'").stdout.split()[-1]
    if host_py != "{}.{}".format(*sys.version_info[:2]):
        pytest.skip(f"the host's python3 is {host_py}; this machine's zstandard is for another")
    _remove_zstandard(conn)
    assert not conn.run("python3 -c 'import zstandard'").ok  # the case: the host has none
    own.shape(fh, rate="40mbit", delay=None)
    try:
        agent = Agent(conn)
        result = stage_dataset(conn, agent, str(big), name="logs", dest=SSD + "/s1")
        assert result["count"] == 2400 and result["checksum"] == want["checksum"]
        summary = result["compression"]
        assert summary["zstandard_shipped"] == "shipped", summary
        assert summary["codec"] == "zstd" and summary["zstd_frames"] >= 1, summary
        assert result["wire_bytes"] < 0.8 * result["stream_bytes"]
        shipped = f"/root/.cache/provision/pylib/{python_tag()}-zstandard.zip"
        assert own.ns_exec(fh, f"test -s {shipped}", check=False).returncode == 0
        again = stage_dataset(conn, agent, str(big), name="logs2", dest=SSD + "/s2")
        assert again["checksum"] == want["checksum"]
        assert "zstandard_shipped" not in again["compression"]  # decoded at once: nothing to ship
        assert again["compression"]["codec"] == "zstd"
        check = agent.call("verify_dataset", {"path": again["path"]})
        assert check["ok"] and check["count"] == 2400
    finally:
        own.unshape(fh)
