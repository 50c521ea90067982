"""Staging end to end without SSH: the real agent (a subprocess, over LocalConnection), real
files, real LMDB, a real torch DataLoader. Interruptions, disk full, resume, idempotent reruns."""

from __future__ import annotations

import csv
import errno
import hashlib
import http.server
import io
import json
import os
import signal
import subprocess
import tarfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from provision.agent.datasets import ingest
from provision.connection.local import LocalConnection
from provision.data import LMDBDataset, decode
from provision.errors import HostError
from provision.inventory.model import Host
from provision.remote.agent import Agent
from provision.staging import HostStage, make_request, stage_dataset, stage_hosts, stage_local
from provision.staging.sample import make_image_folder
from provision.staging.source import Broadcast, plan_local, sample_stream
from tests.support.hostile_names import HOSTILE_NAMES

HOSTILE = HOSTILE_NAMES


# -- fixtures ---------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def images(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """2,000 small JPEGs in 5 class folders."""
    return make_image_folder(
        tmp_path_factory.mktemp("images") / "flowers", 2000, classes=5, size=32
    )


@pytest.fixture(scope="session")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Flat files with hostile names plus labels.csv (quoted fields, a newline inside one)."""
    root = tmp_path_factory.mktemp("hostile") / "src"
    (root / "imgs").mkdir(parents=True)
    rows = []
    for i, name in enumerate(HOSTILE):
        (root / "imgs" / name).write_bytes(hashlib.sha256(name.encode()).digest() * (i + 1))
        rows.append([f"imgs/{name}", ["cat", "dog", "猫"][i % 3]])
    with open(root / "labels.csv", "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["path", "label"])
        w.writerows(rows)
    return root


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The 'host' home: the agent is cached under it."""
    h = tmp_path / "home"
    h.mkdir()
    monkeypatch.setenv("HOME", str(h))
    return h


@pytest.fixture
def conn(home: Path) -> LocalConnection:
    return LocalConnection()


def expected(root: Path) -> list[tuple[str, bytes, int]]:
    """(relpath, bytes, label) for an image folder, in staging order."""
    classes = sorted(p.name for p in root.iterdir())
    out = []
    for label, c in enumerate(classes):
        for f in sorted((root / c).iterdir()):
            out.append((f"{c}/{f.name}", f.read_bytes(), label))
    return out


def read_all(path: str | Path) -> list[tuple[str, bytes, int | None]]:
    ds = LMDBDataset(path)
    try:
        return [(ds.relpath(i), ds[i][0], ds[i][1]) for i in range(len(ds))]
    finally:
        ds.close()


def chunked(stream: Iterator[bytes], size: int = 16384) -> Iterator[bytes]:
    for chunk in stream:
        for i in range(0, len(chunk), size):
            yield chunk[i : i + size]


# -- stage and read back ----------------------------------------------------------------------
def test_stage_local_builds_and_reads_back_every_record(images: Path, tmp_path: Path) -> None:
    request = make_request(str(images), verify=True)
    result = stage_local(request, str(tmp_path / "out" / "flowers.lmdb"))
    assert result["count"] == 2000 and result["verified"] and not result["skipped"]
    assert read_all(tmp_path / "out" / "flowers.lmdb") == expected(images)
    ds = LMDBDataset(tmp_path / "out" / "flowers.lmdb", transform=decode)
    img, label = ds[-1]
    assert img.size == (32, 32) and img.mode == "RGB" and label == 4
    assert ds.classes == [f"class{c:02d}" for c in range(5)]
    assert ds.targets == [e[2] for e in expected(images)]
    ds.close()
    # the reader module written beside the dataset works on its own
    assert (tmp_path / "out" / "provision_lmdb.py").read_bytes() == Path(ingest.__file__).with_name(
        "reader.py"
    ).read_bytes()


@pytest.mark.filterwarnings("ignore:This DataLoader will create 4 worker processes")
def test_stage_through_the_agent_then_dataloader_fork_and_spawn(
    images: Path, conn: LocalConnection, tmp_path: Path
) -> None:
    torch = pytest.importorskip("torch")
    events: list[dict] = []
    result = stage_dataset(
        conn, Agent(conn), str(images), dest=str(tmp_path / "d"), on_event=events.append
    )
    path = tmp_path / "d" / "flowers.lmdb"
    assert result["path"] == str(path) and result["count"] == 2000 and result["resumed_from"] == 0
    phases = [e.get("phase") for e in events]
    assert phases[0] == "status" and "start" in phases and phases[-1] == "done"
    want = expected(images)
    ds = LMDBDataset(path)
    assert ds[0][0] == want[0][1]  # the parent opens the env before the workers fork
    for ctx in ("fork", "spawn"):
        loader = torch.utils.data.DataLoader(
            ds, batch_size=None, num_workers=4, multiprocessing_context=ctx
        )
        got = [(data, label) for data, label in loader]
        assert got == [(w[1], w[2]) for w in want], ctx
    ds.close()
    assert not (tmp_path / "d" / "flowers.lmdb.partial").exists()


def test_hostile_names_and_labels_file_round_trip(
    hostile: Path, conn: LocalConnection, tmp_path: Path
) -> None:
    result = stage_dataset(
        conn, None, str(hostile), name="hostile", dest=str(tmp_path / "d"), verify=True
    )
    assert result["count"] == len(HOSTILE) and result["layout"] == "labels" and result["verified"]
    rows = read_all(tmp_path / "d" / "hostile.lmdb")
    ds = LMDBDataset(tmp_path / "d" / "hostile.lmdb")
    assert ds.classes == ["cat", "dog", "猫"]
    ds.close()
    by_path = {p: (d, label) for p, d, label in rows}
    for i, name in enumerate(HOSTILE):
        data, label = by_path[f"imgs/{name}"]
        assert data == (hostile / "imgs" / name).read_bytes()
        assert ["cat", "dog", "猫"][label] == ["cat", "dog", "猫"][i % 3]
    assert not list(Path.cwd().glob("PWNED*")) and not list(Path(os.environ["HOME"]).glob("PWNED*"))


def test_rerun_of_an_up_to_date_dataset_does_nothing(
    images: Path, conn: LocalConnection, tmp_path: Path
) -> None:
    agent = Agent(conn)
    first = stage_dataset(conn, agent, str(images), dest=str(tmp_path))
    stat = os.stat(first["path"])
    t0 = time.monotonic()
    again = stage_dataset(conn, agent, str(images), dest=str(tmp_path))
    assert again["skipped"] is True and again["count"] == 2000
    assert time.monotonic() - t0 < 30  # generous bound: a hang, not a speed test
    assert os.stat(first["path"]).st_mtime_ns == stat.st_mtime_ns
    checked = stage_dataset(conn, agent, str(images), dest=str(tmp_path), verify=True)
    assert checked["skipped"] and checked["verify"]["ok"] and checked["verify"]["count"] == 2000


def test_changed_source_is_restaged(tmp_path: Path, conn: LocalConnection) -> None:
    src = make_image_folder(tmp_path / "src", 20, classes=2, size=16)
    agent = Agent(conn)
    first = stage_dataset(conn, agent, str(src), dest=str(tmp_path / "d"))
    victim = src / "class01" / "img00003.jpg"
    victim.write_bytes(b"new content")
    second = stage_dataset(conn, agent, str(src), dest=str(tmp_path / "d"))
    assert not second["skipped"] and second["checksum"] != first["checksum"]
    assert (
        dict((p, d) for p, d, _ in read_all(second["path"]))["class01/img00003.jpg"]
        == b"new content"
    )


# -- interruptions and resume -----------------------------------------------------------------
@pytest.mark.parametrize("cut", ["between samples", "inside a sample"])
def test_stream_cut_midway_then_resume_without_resending(
    images: Path, conn: LocalConnection, tmp_path: Path, cut: str
) -> None:
    agent = Agent(conn)
    request = make_request(str(images), dest=str(tmp_path), commit={"samples": 100})
    plan = plan_local(str(images))
    blob = b"".join(sample_stream(plan))
    if cut == "between samples":
        # end right after sample 1200: the stream is the samples' bytes back to back
        payload = [blob[: sum(plan.manifest.sizes[:1200])]]
    else:
        payload = [blob[: len(blob) // 2 + 77]]
    hs = HostStage(conn, agent, request, plan).prepare()
    with pytest.raises(HostError, match="rerun the same command to resume"):
        hs.run(iter(payload))
    partial = tmp_path / "flowers.lmdb.partial"
    assert partial.exists() and not (tmp_path / "flowers.lmdb").exists()
    with pytest.raises(ValueError, match="not a complete dataset"):
        LMDBDataset(partial)

    hs2 = HostStage(conn, agent, request, plan).prepare()
    assert 0 < hs2.start <= 1200  # every completely received sample was committed
    sent: list[int] = []
    result = hs2.run(sample_stream(plan, hs2.start, on_sample=lambda i, n: sent.append(i)))
    assert sent[0] == hs2.start and len(sent) == 2000 - hs2.start  # nothing resent
    assert result["resumed_from"] == hs2.start and result["count"] == 2000
    assert read_all(result["path"]) == expected(images)


def test_killed_agent_resumes_from_its_last_commit(
    images: Path, conn: LocalConnection, tmp_path: Path
) -> None:
    agent = Agent(conn)
    request = make_request(str(images), dest=str(tmp_path), commit={"samples": 50})
    plan = plan_local(str(images))
    state: dict = {}
    ready = threading.Event()

    def on_event(event: dict) -> None:
        if event.get("phase") == "start":
            state["pid"] = event["pid"]
        if (event.get("committed") or 0) > 0:
            ready.set()

    def slow() -> Iterator[bytes]:
        stream = chunked(sample_stream(plan))
        for n, piece in enumerate(stream):
            yield piece
            if n == 40:  # ~650 KB in: wait for a commit, then kill -9 the agent
                assert ready.wait(20), "no commit reported"
                os.kill(state["pid"], signal.SIGKILL)
                return

    hs = HostStage(conn, agent, request, plan, on_event).prepare()
    with pytest.raises(HostError, match="resume"):
        hs.run(slow())
    hs2 = HostStage(conn, agent, request, plan).prepare()
    assert hs2.start > 0
    result = hs2.run()
    assert result["resumed_from"] == hs2.start
    assert read_all(result["path"]) == expected(images)


def test_source_that_fails_midway_reports_the_source_error(
    tmp_path: Path, conn: LocalConnection
) -> None:
    src = make_image_folder(tmp_path / "src", 30, classes=3, size=16)
    request = make_request(str(src), dest=str(tmp_path / "d"))
    plan = plan_local(str(src))
    hs = HostStage(conn, Agent(conn), request, plan).prepare()
    (src / "class02" / "img00029.jpg").write_bytes(b"shorter")  # changed after listing
    with pytest.raises(
        HostError, match=r"reading the source failed: .*img00029\.jpg changed while staging"
    ):
        hs.run()


# -- disk space -------------------------------------------------------------------------------
@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs: the host's SSD, nearly full. Needs root and mount."""
    mnt = tmp_path / "ssd"
    mnt.mkdir()
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)], capture_output=True, text=True
    )
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_not_enough_space_is_refused_before_streaming(
    images: Path, conn: LocalConnection, small_disk: Path
) -> None:
    with pytest.raises(
        HostError,
        match=r"not enough space for .*flowers\.lmdb: it needs about .* MB, .* MB is free",
    ):
        stage_dataset(conn, None, str(images), dest=str(small_disk))
    assert os.listdir(small_disk) == []  # nothing written


def _fill(directory: Path) -> Path:
    filler = directory / "filler"
    with open(filler, "wb", buffering=0) as fh:
        try:
            while True:
                fh.write(b"\0" * 4096)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
    return filler


@pytest.mark.parametrize("clean", [False, True])
def test_disk_full_midway_keeps_the_partial_for_resume(
    tmp_path: Path, conn: LocalConnection, small_disk: Path, clean: bool
) -> None:
    src = make_image_folder(tmp_path / "src", 300, classes=3, size=32)
    agent = Agent(conn)
    request = make_request(str(src), dest=str(small_disk), commit={"samples": 20}, clean=clean)
    plan = plan_local(str(src))
    committed = threading.Event()
    filler: list[Path] = []

    def on_event(event: dict) -> None:
        if (event.get("committed") or 0) > 0:
            committed.set()

    def fill_midway() -> Iterator[bytes]:
        for n, piece in enumerate(chunked(sample_stream(plan), 4096)):
            if n == 40:
                assert committed.wait(20)
                filler.append(_fill(small_disk))  # another process takes the free space
            yield piece

    hs = HostStage(conn, agent, request, plan, on_event).prepare()
    with pytest.raises(
        HostError,
        match=r"stage: disk full writing .*/src\.lmdb\.partial after \d+ of 300 samples; the partial dataset is kept",
    ):
        hs.run(fill_midway())
    partial = small_disk / f"{request.name}.lmdb.partial"
    assert sorted(os.listdir(small_disk)) == sorted(["filler"] + ([] if clean else [partial.name]))
    filler[0].unlink()
    result = stage_dataset(conn, agent, str(src), dest=str(small_disk))
    assert result["count"] == 300
    assert (result["resumed_from"] == 0) if clean else (result["resumed_from"] > 0)
    assert read_all(result["path"]) == expected(src)


# -- verify -----------------------------------------------------------------------------------
def test_verify_finds_a_corrupted_record(tmp_path: Path, conn: LocalConnection) -> None:
    src = make_image_folder(tmp_path / "src", 40, classes=2, size=64)
    result = stage_dataset(conn, None, str(src), dest=str(tmp_path / "d"))
    victim = (src / "class01" / "img00007.jpg").read_bytes()
    raw = bytearray(Path(result["path"]).read_bytes())
    at = raw.find(victim)
    assert at > 0
    raw[at + len(victim) // 2] ^= 0xFF
    Path(result["path"]).write_bytes(bytes(raw))
    checked = stage_dataset(conn, None, str(src), dest=str(tmp_path / "d"), verify=True)
    assert checked["skipped"] and not checked["verify"]["ok"]
    assert any(
        "class01/img00007.jpg" in p and "checksum" in p for p in checked["verify"]["problems"]
    )


# -- other sources ----------------------------------------------------------------------------
def test_host_path_archive_is_read_by_the_agent(
    images: Path, conn: LocalConnection, tmp_path: Path
) -> None:
    arc = tmp_path / "flowers.tar.gz"
    with tarfile.open(arc, "w:gz") as tf:
        tf.add(images, arcname="flowers")
    result = stage_dataset(conn, None, f"host:{arc}", dest=str(tmp_path / "d"))
    assert result["count"] == 2000 and result["layout"] == "imagefolder"
    got = sorted(read_all(result["path"]))
    assert got == sorted(expected(images))
    again = stage_dataset(conn, None, f"host:{arc}", dest=str(tmp_path / "d"))
    assert again["skipped"]


class _RangeHandler(http.server.BaseHTTPRequestHandler):
    """Serves one file with ETag and Range; drops the first full GET halfway through."""

    blob = b""
    log: list[str] = []
    drop_first = True

    def log_message(self, *args: object) -> None:
        pass

    def _headers(self, code: int, length: int, extra: dict | None = None) -> None:
        self.send_response(code)
        self.send_header("Content-Length", str(length))
        self.send_header("ETag", '"v1"')
        self.send_header("Accept-Ranges", "bytes")
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()

    def do_HEAD(self) -> None:  # noqa: N802
        self.log.append("HEAD")
        self._headers(200, len(self.blob))

    def do_GET(self) -> None:  # noqa: N802
        rng = self.headers.get("Range")
        self.log.append(f"GET {rng}")
        if rng:
            start = int(rng.split("=")[1].split("-")[0])
            body = self.blob[start:]
            self._headers(
                206,
                len(body),
                {"Content-Range": f"bytes {start}-{len(self.blob) - 1}/{len(self.blob)}"},
            )
            self.wfile.write(body)
            return
        self._headers(200, len(self.blob))
        if type(self).drop_first:
            type(self).drop_first = False
            self.wfile.write(self.blob[: len(self.blob) // 2])
            self.wfile.flush()
            self.connection.shutdown(2)  # the link drops mid-download
            return
        self.wfile.write(self.blob)


def test_url_source_downloads_with_range_resume(
    images: Path, conn: LocalConnection, tmp_path: Path
) -> None:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        tf.add(images, arcname="flowers")
    _RangeHandler.blob, _RangeHandler.log, _RangeHandler.drop_first = buf.getvalue(), [], True
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _RangeHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/flowers.tar"
        result = stage_dataset(conn, None, url, dest=str(tmp_path / "d"), stall_timeout=20)
        assert result["count"] == 2000 and result["downloaded_bytes"] == len(_RangeHandler.blob)
        assert any(line.startswith("GET bytes=") for line in _RangeHandler.log), _RangeHandler.log
        assert sorted(read_all(result["path"])) == sorted(expected(images))
        assert not (tmp_path / "d" / "flowers.lmdb.download").exists()
        again = stage_dataset(conn, None, url, dest=str(tmp_path / "d"))
        assert again["skipped"] and _RangeHandler.log[-1] == "HEAD"
    finally:
        server.shutdown()


def test_lmdb_is_shipped_to_a_python_without_it(tmp_path: Path, conn: LocalConnection) -> None:
    debian = "/usr/bin/python3"
    if not os.path.exists(debian):
        pytest.skip("no /usr/bin/python3")
    if subprocess.run([debian, "-c", "import lmdb"], capture_output=True).returncode == 0:
        pytest.skip("/usr/bin/python3 already has lmdb")
    if subprocess.run(
        [debian, "-c", "import sys; assert sys.version_info[:2] == (3, 11)"]
    ).returncode:
        pytest.skip("/usr/bin/python3 is not the controller's minor version")
    src = make_image_folder(tmp_path / "src", 10, classes=2, size=16)
    agent = Agent(conn, python=debian)
    result = stage_dataset(conn, agent, str(src), dest=str(tmp_path / "d"))
    assert result["count"] == 10
    assert (Path(os.environ["HOME"]) / ".cache/provision/pylib/cp311-x86_64.zip").exists()
    assert stage_dataset(conn, agent, str(src), dest=str(tmp_path / "d"))["skipped"]


# -- several hosts from one read --------------------------------------------------------------
def test_several_hosts_share_one_read_of_the_source(
    images: Path, tmp_path: Path, home: Path
) -> None:
    from provision.connection.base import ConnectOptions

    plan = plan_local(str(images))
    reads = []
    original = plan.source.iter_data

    def counting(entries):  # type: ignore[no-untyped-def]
        reads.append(len(entries))
        return original(entries)

    plan.source.iter_data = counting  # type: ignore[method-assign]
    hosts = [
        Host(name=f"h{i}", local=True, vars={"data_dir": str(tmp_path / f"h{i}")}) for i in range(3)
    ]
    request = make_request(str(images))
    outcomes = stage_hosts(hosts, request, ConnectOptions(), forks=3, plan=plan)
    assert all(o.ok for o in outcomes.values()), {n: o.message for n, o in outcomes.items()}
    assert reads == [2000]
    for i in range(3):
        assert read_all(tmp_path / f"h{i}" / "datasets" / "flowers.lmdb") == expected(images)


def test_broadcast_drops_a_consumer_that_stops() -> None:
    cast = Broadcast(iter([bytes([i]) * 10 for i in range(100)]), 2, depth=2)
    fast = cast.consumer(0)
    quitter = cast.consumer(1)
    assert next(quitter) == b"\0" * 10
    quitter.close()  # its host failed
    assert len(list(fast)) == 100


# -- the command line -------------------------------------------------------------------------
def test_cli_local_and_localhost_json(
    images: Path, tmp_path: Path, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from provision.cli.main import main

    assert main(["stage", str(images), "--local", str(tmp_path / "l" / "x.lmdb"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["hosts"]["local"]["count"] == 2000 and doc["hosts"]["local"]["path"].endswith(
        "x.lmdb"
    )
    assert (
        main(
            [
                "stage",
                str(images),
                "localhost",
                "--dest",
                str(tmp_path / "r"),
                "--name",
                "fl",
                "--json",
            ]
        )
        == 0
    )
    doc = json.loads(capsys.readouterr().out)
    entry = doc["hosts"]["localhost"]
    assert entry["path"] == str(tmp_path / "r" / "fl.lmdb") and entry["count"] == 2000
    assert {"bytes", "seconds", "resumed_from", "skipped"} <= set(entry)
    assert (
        main(
            [
                "stage",
                str(images),
                "localhost",
                "--dest",
                str(tmp_path / "r"),
                "--name",
                "fl",
                "--json",
            ]
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out)["hosts"]["localhost"]["skipped"] is True


def test_cli_bad_input_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from provision.cli.main import main

    assert main(["stage", "no/such/dir", "--local", str(tmp_path / "x.lmdb")]) == 2
    assert "no such file or folder here" in capsys.readouterr().err
    assert (
        main(["stage", str(tmp_path), "--local", str(tmp_path / "x.lmdb"), "--name", "../evil"])
        == 2
    )
    assert "--name" in capsys.readouterr().err
    (tmp_path / "a.jpg").write_bytes(b"x")
    assert (
        main(
            [
                "stage",
                str(tmp_path),
                "--local",
                str(tmp_path / "o" / "x.lmdb"),
                "--layout",
                "imagefolder",
            ]
        )
        == 2
    )
    assert "class folder" in capsys.readouterr().err
    # the same bad layout with a host: still a usage error, and nothing is sent
    argv = [
        "stage",
        str(tmp_path),
        "localhost",
        "--dest",
        str(tmp_path / "h"),
        "--layout",
        "imagefolder",
    ]
    assert main(argv) == 2
    assert "class folder" in capsys.readouterr().err and not (tmp_path / "h").exists()


def test_a_foreign_file_at_the_destination_is_never_overwritten(
    tmp_path: Path, conn: LocalConnection
) -> None:
    src = make_image_folder(tmp_path / "src", 5, classes=1, size=16)
    (tmp_path / "d").mkdir()
    precious = tmp_path / "d" / "src.lmdb"
    precious.write_bytes(b"someone else's file")
    with pytest.raises(HostError, match=r"src\.lmdb exists and is not a provision dataset"):
        stage_dataset(conn, None, str(src), dest=str(tmp_path / "d"))
    assert precious.read_bytes() == b"someone else's file"


def test_agent_picks_the_resume_point_when_start_is_auto(
    images: Path, tmp_path: Path, home: Path
) -> None:
    """The one-call protocol used over SSH: request with start "auto", the agent answers with a
    `ready` event (start K, or skip) before it reads the stream."""
    import subprocess
    import sys

    plan = plan_local(str(images))
    repo = Path(__file__).resolve().parents[2]
    request = {
        "path": str(tmp_path / "d.lmdb"),
        "source": {"kind": "stream", "manifest": plan.manifest.to_wire(), "start": "auto"},
        "commit": {"samples": 100},
    }

    def run(send) -> list[dict]:  # type: ignore[no-untyped-def]
        proc = subprocess.Popen(
            [sys.executable, "-m", "provision.agent", "stage"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=repo,
            bufsize=0,
        )
        assert proc.stdin and proc.stdout
        proc.stdin.write((json.dumps(request) + "\n").encode())
        events = []
        for line in proc.stdout:
            event = json.loads(line)
            events.append(event)
            if event.get("phase") == "ready":
                send(proc.stdin, event)
                proc.stdin.close()
            if event["event"] in ("result", "error"):
                break
        proc.wait(timeout=60)
        return events

    def first_700(stdin, ready) -> None:  # type: ignore[no-untyped-def]
        assert ready["start"] == 0
        sent = 0
        for chunk in chunked(sample_stream(plan, 0), 512):
            chunk = chunk[: sum(plan.manifest.sizes[:700]) - sent]  # the stream up to sample 700
            stdin.write(chunk)
            sent += len(chunk)
            if sent >= sum(plan.manifest.sizes[:700]):
                break

    events = run(first_700)
    assert (
        events[-1]["event"] == "error" and "ended after sample 700 of 2000" in events[-1]["message"]
    )
    seen: dict = {}

    def rest(stdin, ready) -> None:  # type: ignore[no-untyped-def]
        seen.update(ready)
        for chunk in sample_stream(plan, ready["start"]):
            stdin.write(chunk)

    events = run(rest)
    assert seen["start"] == 700 and events[-1]["data"]["resumed_from"] == 700
    assert read_all(tmp_path / "d.lmdb") == expected(images)
    events = run(lambda stdin, ready: seen.update(ready))
    assert seen.get("skip") is True and events[-1]["data"]["skipped"] is True
