"""The stage stream's speed parts: the sample stream (the samples' bytes back to back, read on
the host in batches), tar headers (code sync), frames (raw / zstd, chosen by measurement), the
batched LMDB writer, and the agent's ingest of a framed stream."""

from __future__ import annotations

import fcntl
import hashlib
import io
import itertools
import os
import random
import subprocess
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from provision.agent.datasets import framing, ingest, lmdb_writer, pipeline, reader, tarstream
from provision.agent.datasets.manifest import Manifest
from provision.staging import compress
from provision.staging.sample import make_text_folder
from provision.staging.source import StreamFailure, plan_local, sample_stream

zstandard = pytest.importorskip("zstandard")

NAMES = ["a.jpg", "x/" * 60 + "long.jpg", "ünï/cödé.png", "new\nline", "d/e/f.bin", "z" * 100]


def _tar(names: list[str]) -> bytes:
    out = io.BytesIO()
    for i, name in enumerate(names):
        data = bytes([i]) * (i * 700 + 3)
        out.write(tarstream.header(name, len(data), 1_700_000_000 + i))
        out.write(data + tarstream.padding(len(data)))
    out.write(tarstream.END)
    return out.getvalue()


def test_headers_are_what_tarfile_reads_and_checksums() -> None:
    raw = _tar(NAMES)
    members = tarfile.open(fileobj=io.BytesIO(raw)).getmembers()
    assert [m.name for m in members] == NAMES
    assert [m.mtime for m in members] == [1_700_000_000 + i for i in range(len(NAMES))]
    assert [m.size for m in members] == [i * 700 + 3 for i in range(len(NAMES))]
    for name in NAMES:
        block = tarstream.header(name, 5, 123)[-512:]
        assert tarfile.calc_chksums(block)[0] == int(block[148:154], 8)
        assert tarstream._header_sum(block) == int(block[148:154], 8)


def test_reader_takes_gnu_tar_output_and_its_own(tmp_path: Path) -> None:
    (tmp_path / "src" / "sub").mkdir(parents=True)
    (tmp_path / "src" / "sub" / "f.txt").write_bytes(b"hi")
    (tmp_path / "src" / ("n" * 150)).write_bytes(b"x" * 3000)
    gnu = subprocess.run(["tar", "cf", "-", "-C", str(tmp_path), "src"], capture_output=True)
    got = dict(tarstream.read_members(io.BytesIO(gnu.stdout)))
    assert got == {"src/sub/f.txt": b"hi", "src/" + "n" * 150: b"x" * 3000}
    ours = [(n, len(d)) for n, d in tarstream.read_members(io.BytesIO(_tar(NAMES)))]
    assert ours == [(n, i * 700 + 3) for i, n in enumerate(NAMES)]


def test_reader_hands_out_members_as_a_pipe_delivers_them() -> None:
    """read1: a member is parsed as soon as its bytes are in, not when 1 MiB has arrived."""
    raw = _tar(NAMES[:2])
    r, w = os.pipe()
    os.write(w, raw[: 512 + 512])  # the first member (3 bytes + padding), nothing more
    members = tarstream.read_members(os.fdopen(r, "rb"))
    assert next(members) == ("a.jpg", b"\0" * 3)
    os.write(w, raw[1024:])
    os.close(w)
    assert [n for n, _ in members] == [NAMES[1]]


def test_truncated_and_corrupt_streams_are_told_apart() -> None:
    raw = _tar(NAMES[:3])
    with pytest.raises(tarstream.StreamTruncated):
        list(tarstream.read_members(io.BytesIO(raw[:1500])))
    bad = bytearray(raw)
    bad[10] ^= 0xFF
    with pytest.raises(tarstream.TarFormatError, match="checksum"):
        list(tarstream.read_members(io.BytesIO(bytes(bad))))


# -- choosing compression ----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("ratio", "compress_mbps", "link_mbps", "worth"),
    [
        (0.4, 400, 25, True),  # text over 200 Mbit/s
        (0.4, 400, 150, True),  # text on a fast link, fast CPU: 1/400 + 0.4/150 < 0.9/150
        (0.4, 150, 150, False),  # the CPU can't keep up with a fast link
        (0.99, 400, 25, False),  # JPEGs: nothing to gain
        (0.96, 10_000, 1, True),  # JPEG sets (~4 % fewer bytes) where the link is the bottleneck
        (0.96, 400, 100, False),  # ... but not where compressing would not hide behind the link
        (0.99, 10_000, 1, False),  # barely compresses: not worth a frame, whatever the link
        (0.4, 0, 25, False),  # not measured yet
        (0.4, 400, 0, False),
    ],
)
def test_worth_compressing(ratio: float, compress_mbps: float, link_mbps: float, worth: bool) -> None:
    assert compress.worth_compressing(ratio, compress_mbps * 1e6, link_mbps * 1e6) is worth


# The pure decision, against a fake pace model: what one window of each mode measures.
MB = 1 << 20


def _choices(windows: int, raw_pace, zstd_pace, ratio=0.4, cpu=400e6) -> list[bool]:  # noqa: ANN001
    """The modes the chooser picks, window by window; the model's link is the raw pace."""
    chooser = compress.Chooser()
    modes = []
    for w in range(windows):
        on = chooser.compress_next(ratio, cpu)
        modes.append(on)
        pace = zstd_pace(w) if on else raw_pace(w)
        chooser.record(on, compress.WINDOW * MB, compress.WINDOW * MB / pace)
    return modes


def test_chooser_measures_raw_first_then_tries_zstd_where_the_model_allows() -> None:
    modes = _choices(6, lambda w: 25e6, lambda w: 60e6)  # text over 200 Mbit/s
    assert modes[:3] == [False, True, True]
    assert all(modes[1:])


def test_chooser_falls_back_to_raw_when_compressing_slows_the_measured_pace() -> None:
    # the model (independent link and CPU) says compress; the CPU-bound stream says otherwise
    assert compress.worth_compressing(0.4, 400e6, 100e6)
    modes = _choices(40, lambda w: 100e6, lambda w: 75e6)
    assert modes[:3] == [False, True, False]
    # re-measured now and then (the two are close), never kept
    tries = [w for w, on in enumerate(modes) if on]
    assert tries[0] == 1 and len(tries) >= 3
    assert all(b - a > compress.REMEASURE for a, b in itertools.pairwise(tries))


def test_chooser_remeasures_a_far_slower_mode_rarely() -> None:
    modes = _choices(70, lambda w: 20e6, lambda w: 60e6)
    raw_after_trial = [w for w, on in enumerate(modes) if not on and w > 1]
    assert raw_after_trial
    assert all(b - a > compress.REMEASURE_FAR for a, b in itertools.pairwise(raw_after_trial))
    assert len(raw_after_trial) <= 70 // compress.REMEASURE_FAR + 1


def test_chooser_switches_when_the_link_slows_down() -> None:
    modes = _choices(40, lambda w: 100e6 if w < 20 else 15e6, lambda w: 75e6 if w < 20 else 45e6)
    assert not any(modes[11:19])  # raw while it was faster (19: zstd re-measured)
    late = modes[24:]  # the raw windows after w=20 measured the slow link: zstd from then on,
    assert sum(late) >= 0.8 * len(late)  # raw only re-measured now and then


def test_chooser_keeps_raw_for_incompressible_data_or_a_tie() -> None:
    assert not any(_choices(20, lambda w: 25e6, lambda w: 99e6, ratio=0.99))
    tie = _choices(20, lambda w: 100e6, lambda w: 101e6)  # not GAIN better: raw
    assert tie[1] and not any(tie[2:9])


def test_chooser_does_not_try_zstd_where_the_model_says_it_cannot_pay() -> None:
    # a fast link and a slow CPU: 1/c + r/L > 0.9/L, whatever a window would have measured
    assert not any(_choices(20, lambda w: 500e6, lambda w: 900e6, cpu=100e6))


def test_chooser_keeps_a_few_percent_on_a_link_bound_stream_but_not_on_a_cpu_bound_one() -> None:
    # 8,000 JPEGs: zstd level 1 takes ~4 % off at ~540 MB/s. At 200 Mbit/s (25 MB/s) that is ~4 %
    # sooner (the compressing overlaps the sending); unshaped on the fleet (~120 MB/s, the same
    # cores encrypting) it is never tried
    jpeg = 0.958
    # kept at half the bytes saved: a window 2.5 % faster keeps zstd, one 1.5 % faster does not
    assert sum(_choices(12, lambda w: 25e6, lambda w: 25e6 * 1.025, ratio=jpeg, cpu=540e6)[2:]) >= 9
    assert not any(_choices(12, lambda w: 25e6, lambda w: 25e6 * 1.015, ratio=jpeg, cpu=540e6)[2:9])
    modes = _choices(12, lambda w: 25e6, lambda w: 25e6 / jpeg, ratio=jpeg, cpu=540e6)
    assert modes[:2] == [False, True] and sum(modes[2:]) >= 9, modes
    assert not any(_choices(12, lambda w: 120e6, lambda w: 130e6, ratio=jpeg, cpu=540e6))
    # a trial that measures no better (the host decoding on busy cores) goes back to raw
    flat = _choices(12, lambda w: 25e6, lambda w: 25.2e6, ratio=jpeg, cpu=540e6)
    assert flat[1] and not any(flat[2:9])


# framed_stream against a fake link: time passes as the sender takes bytes, as zstd compresses,
# and (the fleet's case: host and controller on the same cores) as the host decompresses.
class _Link:
    """`buffer`: bytes the pipe and socket hold; the sender waits only while the backlog is
    larger, so with one (a real link) compressing the next frame overlaps the sending."""

    def __init__(self, link_bps: float, cpu_bps: float, host_unzstd_bps: float = 0, buffer: int = 0) -> None:
        self.t = 0.0
        self.done = 0.0  # when the link has carried everything handed to it
        self.link_bps = link_bps
        self.cpu_bps = cpu_bps
        self.host_unzstd_bps = host_unzstd_bps
        self.buffer = buffer

    def clock(self) -> float:
        return self.t

    def pull(self, stream) -> bytes:  # noqa: ANN001
        out = []
        kind = framing.RAW
        for piece in stream:
            piece = bytes(piece)
            if len(piece) == framing.HEADER.size and piece[:1] in (framing.RAW, framing.ZSTD):
                kind = piece[:1]
            elif kind == framing.ZSTD and self.host_unzstd_bps:
                self.t += MB / self.host_unzstd_bps
            self.done = max(self.t, self.done) + len(piece) / self.link_bps
            self.t = max(self.t, self.done - self.buffer / self.link_bps)
            out.append(piece)
        return b"".join(out)


class _TimedZstd:
    """zstandard whose compress costs fake time: its input over the link's cpu_bps."""

    def __init__(self, link: _Link) -> None:
        self.link = link

    def ZstdCompressor(self, level: int):  # noqa: ANN201, N802
        real = zstandard.ZstdCompressor(level=level)
        link = self.link

        class Timed:
            def compress(self, data: bytes) -> bytes:
                link.t += len(data) / link.cpu_bps
                return real.compress(data)

        return Timed()


def _text_chunks(n: int) -> list[bytes]:
    rng = random.Random(1)
    words = [b"gpu", b"loss", b"epoch", b"0.125", b"node", b"step", b"rack"]
    two = [b" ".join(rng.choice(words) for _ in range(200_000))[:MB] for _ in range(2)]
    return [two[i % 2] for i in range(n)]


def _frames(chunks: list[bytes], zstd: bool, link: _Link, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(compress, "zstandard_module", lambda: _TimedZstd(link))
    stats = compress.StreamStats()
    wire = link.pull(compress.framed_stream(iter(chunks), zstd, stats, clock=link.clock))
    return wire, stats


def _decode(wire: bytes) -> bytes:
    frames = framing.FrameReader(io.BufferedReader(io.BytesIO(wire)))
    return b"".join(iter(lambda: frames.read1(1 << 16), b""))


def test_text_on_a_slow_link_goes_compressed_and_decodes_exactly(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    chunks = _text_chunks(18)
    wire, stats = _frames(chunks, True, _Link(25e6, 400e6), monkeypatch)
    assert _decode(wire) == b"".join(chunks)
    # the samples, one raw window (the baseline), then zstd: the trial measured faster
    assert stats.windows == {"raw": 1, "zstd": 3}
    assert stats.zstd_frames == len(chunks) - compress.WINDOW
    assert len(wire) < 0.5 * sum(map(len, chunks))
    summary = stats.summary()
    assert summary["codec"] == "zstd" and summary["zstd_mb_per_s"] > summary["raw_mb_per_s"]


def test_compressing_that_slows_the_stream_down_goes_back_to_raw(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the model says compress (fast CPU, ratio ~0.3), but the host decoding on the same cores
    # makes each zstd window slower than a raw one
    chunks = _text_chunks(18)
    wire, stats = _frames(chunks, True, _Link(100e6, 400e6, host_unzstd_bps=40e6), monkeypatch)
    assert _decode(wire) == b"".join(chunks)
    assert stats.windows == {"raw": 3, "zstd": 1}
    summary = stats.summary()
    assert summary["raw_mb_per_s"] > summary["zstd_mb_per_s"]


def _jpeg_like_chunks(n: int) -> list[bytes]:
    """Frames that zstd shrinks by ~4 %, as the fleet's JPEG sets: random bytes with a little
    repeated header-like text in each."""
    rng = random.Random(3)
    out = []
    for _ in range(n):
        parts = []
        while sum(map(len, parts)) < MB:
            parts += [rng.randbytes(12_000), b"JFIF\x00\x01" + b"\x00" * 500]
        out.append(b"".join(parts)[:MB])
    return out


def test_jpeg_like_data_on_a_slow_link_goes_compressed_and_decodes_exactly(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    chunks = _jpeg_like_chunks(18)
    wire, stats = _frames(chunks, True, _Link(25e6, 540e6, buffer=2 * MB), monkeypatch)
    assert _decode(wire) == b"".join(chunks)
    assert 0.9 < stats.ratio < compress.TRIAL_RATIO
    assert stats.windows["zstd"] >= 2 and stats.zstd_frames >= 2 * compress.WINDOW
    assert len(wire) < 0.98 * sum(map(len, chunks))
    # the same data where the link outpaces what compressing can hide: raw after the samples
    wire, stats = _frames(chunks, True, _Link(200e6, 540e6, buffer=2 * MB), monkeypatch)
    assert _decode(wire) == b"".join(chunks)
    assert stats.windows["zstd"] == 0


def test_random_data_stays_raw_after_the_samples(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(2)
    chunks = [rng.randbytes(MB) for _ in range(20)]
    wire, stats = _frames(chunks, True, _Link(25e6, 400e6), monkeypatch)
    assert _decode(wire) == b"".join(chunks)
    assert stats.zstd_frames == 0 and stats.windows["zstd"] == 0
    assert stats.ratio > compress.USELESS_RATIO
    assert len(wire) == sum(map(len, chunks)) + len(chunks) * framing.HEADER.size


def test_a_fast_link_with_a_slow_cpu_stays_raw(monkeypatch: pytest.MonkeyPatch) -> None:
    chunks = _text_chunks(10)
    wire, stats = _frames(chunks, True, _Link(500e6, 100e6), monkeypatch)
    assert _decode(wire) == b"".join(chunks)
    assert stats.zstd_frames == compress.SAMPLES  # only the samples, sent compressed once made
    assert stats.windows["zstd"] == 0


def test_no_zstd_on_the_host_means_raw_frames_only(monkeypatch: pytest.MonkeyPatch) -> None:
    chunks = _text_chunks(3)
    wire, stats = _frames(chunks, False, _Link(1e6, 400e6), monkeypatch)
    assert stats.zstd_frames == 0 and stats.ratio == 0
    assert _decode(wire) == b"".join(chunks)


def test_a_host_without_zstd_is_asked_again_and_gets_zstd_once_it_can(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A host that lacks zstandard: the controller still samples the ratio (to decide whether
    shipping zstandard pays), sends raw, and once `later` says the host decodes zstd, the
    chooser may use it -- the stream decodes to the same bytes."""
    chunks = _text_chunks(22)
    link = _Link(25e6, 400e6)
    monkeypatch.setattr(compress, "zstandard_module", lambda: _TimedZstd(link))
    asked: list[float] = []

    def later(ratio: float) -> bool:
        asked.append(ratio)
        return len(asked) >= 2  # shipped and importable from the second window on

    stats = compress.StreamStats()
    wire = link.pull(compress.framed_stream(iter(chunks), False, stats, clock=link.clock, later=later))
    assert _decode(wire) == b"".join(chunks)
    assert len(asked) == 2 and 0 < asked[0] < 0.5  # the samples' ratio, then no more asking
    # the first window raw (the baseline, measured meanwhile), zstd from the second on
    assert stats.windows == {"raw": 1, "zstd": 4}
    assert stats.zstd_frames == 4 * compress.WINDOW
    assert len(wire) < 0.5 * sum(map(len, chunks))


def test_a_host_that_never_gets_zstd_stays_raw(monkeypatch: pytest.MonkeyPatch) -> None:
    chunks = _text_chunks(10)
    link = _Link(25e6, 400e6)
    monkeypatch.setattr(compress, "zstandard_module", lambda: _TimedZstd(link))
    asked: list[float] = []
    stats = compress.StreamStats()
    wire = link.pull(compress.framed_stream(iter(chunks), False, stats, clock=link.clock,
                                            later=lambda r: asked.append(r) or False))
    assert _decode(wire) == b"".join(chunks)
    assert stats.zstd_frames == 0 and stats.windows["zstd"] == 0
    assert len(asked) == 2  # every window asks again: the upload may still be under way
    assert len(wire) == sum(map(len, chunks)) + len(chunks) * framing.HEADER.size


def test_shipping_zstandard_only_where_the_saved_bytes_pay_for_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from provision.staging import hostlib, zstd_ship

    monkeypatch.setattr(hostlib, "zstandard_package_size", lambda tag: 12_000_000)
    mb = 1_000_000
    cases = [  # (sampled ratio, stream bytes, ships)
        (0.0, 500 * mb, False),  # not sampled yet
        (0.96, 500 * mb, False),  # JPEGs: 4 % of 500 MB is 20 MB < 2 x 12 MB
        (0.4, 30 * mb, False),  # text, but a short stream: 18 MB saved
        (0.4, 48 * mb, True),  # 28.8 MB saved
        (0.9, 300 * mb, True),
    ]
    for ratio, size, ships in cases:
        shipping = zstd_ship.ZstdShipping(None, None, "cp311-x86_64", size)
        assert shipping._worth_it(ratio) is ships, (ratio, size)
    monkeypatch.setattr(hostlib, "zstandard_package_size", lambda tag: None)  # nothing matches here
    assert zstd_ship.ZstdShipping(None, None, "cp39-aarch64", 10**12)._worth_it(0.3) is False


def test_a_hostile_python_tag_ships_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from provision.staging import hostlib

    puts: list[str] = []
    for tag in ("../../etc/cron.d/x", "cp311-x86_64/../..", "cp311-x86_64\nrm", ""):
        assert hostlib.ship_zstandard(None, tag, put=lambda data, remote, mode: puts.append(remote)) is False
    assert puts == []


def test_frame_errors_name_the_problem(monkeypatch: pytest.MonkeyPatch) -> None:
    good = framing.frame(framing.ZSTD, zstandard.ZstdCompressor().compress(b"x" * 5000))
    with pytest.raises(framing.FramesTruncated):
        _decode(good[:-3])
    with pytest.raises(framing.FrameError, match="bad frame header"):
        _decode(b"Q\0\0\0\5hello")
    with pytest.raises(framing.FrameError, match="does not decompress"):
        _decode(framing.frame(framing.ZSTD, b"not zstd at all"))
    monkeypatch.setattr(framing, "_zstandard", lambda: None)
    assert framing.codecs() == []
    with pytest.raises(framing.FrameError, match="zstandard does not import"):
        _decode(good)


# -- the batched writer --------------------------------------------------------------------
def _manifest(n: int) -> tuple[Manifest, list[bytes]]:
    datas = [hashlib.sha256(b"%d" % i).digest() * (1 + i % 50) for i in range(n)]
    paths = [f"c{i % 3}/s{i:04d}.bin" for i in range(n)]
    labels = [i % 3 for i in range(n)]
    return Manifest("files", paths, [len(d) for d in datas], [0] * n, labels, ["a", "b", "c"]), datas


def _items(m: Manifest, datas: list[bytes], start: int = 0):
    return [
        (i, m.paths[i], datas[i], hashlib.sha256(datas[i]).digest())
        for i in range(start, len(datas))
    ]


def test_add_many_commits_by_size_and_count_and_reads_back(tmp_path: Path) -> None:
    m, datas = _manifest(500)
    w = lmdb_writer.DatasetWriter(str(tmp_path / "d.lmdb"), m, "test")
    w.open()
    w.txn_samples = 64
    items = _items(m, datas)
    for k in range(0, len(items), 37):  # runs that cross commit boundaries
        w.add_many(items[k : k + 37], m.label)
    assert w.committed == 448  # 7 full transactions of 64; the rest is pending
    w.finalize()
    ds = reader.LMDBDataset(str(tmp_path / "d.lmdb"))
    assert len(ds) == 500
    assert [ds[i] for i in (0, 77, 499)] == [(datas[i], i % 3) for i in (0, 77, 499)]


def test_a_bad_sample_in_a_run_keeps_the_good_ones_before_it(tmp_path: Path) -> None:
    m, datas = _manifest(50)
    w = lmdb_writer.DatasetWriter(str(tmp_path / "d.lmdb"), m, "test")
    w.open()
    items = _items(m, datas)
    items[30] = (30, m.paths[30], datas[30] + b"!", items[30][3])  # changed while staging
    with pytest.raises(lmdb_writer.StageError, match="sample 30 .*the source changed"):
        w.add_many(items, m.label)
    w.close()
    w2 = lmdb_writer.DatasetWriter(str(tmp_path / "d.lmdb"), m, "test")
    assert w2.open() == 30  # a rerun resumes after the 30 good samples


def test_map_full_mid_run_grows_and_replays(tmp_path: Path) -> None:
    m, datas = _manifest(300)
    w = lmdb_writer.DatasetWriter(str(tmp_path / "d.lmdb"), m, "test")
    w._initial_map_size = lambda: 256 * 1024  # type: ignore[method-assign]  # far too small
    w.open()
    w.add_many(_items(m, datas), m.label)
    result = w.finalize(verify=True)
    assert result["count"] == 300


# -- the sample stream: no headers, cut by the manifest's sizes ------------------------------
def _sized_manifest(sizes: list[int]) -> Manifest:
    paths = [f"c/{i:03d}.bin" for i in range(len(sizes))]
    return Manifest("files", paths, sizes, [0] * len(sizes), None, [])


def _data(sizes: list[int]) -> list[bytes]:
    rng = random.Random(7)
    return [bytes(rng.getrandbits(8) for _ in range(min(n, 64))) * (n // 64 + 1) for n in sizes]


@pytest.mark.parametrize("chunk", [1, 7, 4096, 1 << 20])
def test_sample_batches_cut_the_stream_by_the_manifest_sizes(chunk: int) -> None:
    """Empty samples, samples far bigger than a read, many in one read: every byte where it
    belongs, whatever the read size."""
    sizes = [0, 5, 3 * 1024 * 1024 + 1, 0, 1, 700, 0]
    data = [d[:n] for d, n in zip(_data(sizes), sizes, strict=True)]
    stream = io.BufferedReader(io.BytesIO(b"".join(data)))
    batches = list(pipeline.sample_batches(stream, _sized_manifest(sizes), 0, chunk=chunk))
    got = [item for batch in batches for item in batch]
    assert [i for i, _, _ in got] == list(range(len(sizes)))
    assert [d for _, _, d in got] == data
    assert [p for _, p, _ in got] == _sized_manifest(sizes).paths


def test_sample_batches_from_a_resume_point_and_per_read() -> None:
    """From sample 2 on; a pipe that delivers two samples at a time hands them over two by two
    (one hand-over per read, not per sample, and none held back waiting for more)."""
    sizes = [10] * 6
    r, w = os.pipe()
    reader_file = os.fdopen(r, "rb")
    batches = pipeline.sample_batches(reader_file, _sized_manifest(sizes), 2)
    os.write(w, b"a" * 10 + b"b" * 10)
    assert [i for i, _, _ in next(batches)] == [2, 3]
    os.write(w, b"c" * 10 + b"d" * 10)
    os.close(w)
    assert [(i, d) for i, _, d in next(batches)] == [(4, b"c" * 10), (5, b"d" * 10)]
    assert list(batches) == []


@pytest.mark.parametrize("framed", [False, True])
def test_the_pipe_under_the_stream_is_widened_framed_or_not(framed: bool) -> None:
    """sshd writes into the agent's stdin: a 64 KiB pipe costs it ~2x the CPU per MB of a 1 MiB
    one (measured: 96 MB, host CPU 460 -> 190 ms). The frames' reader must not hide the pipe."""
    want = min(1 << 20, int(Path("/proc/sys/fs/pipe-max-size").read_text()))
    sizes = [10, 10]
    r, w = os.pipe()
    with os.fdopen(r, "rb") as stdin:
        assert fcntl.fcntl(r, 1032) < want  # F_GETPIPE_SZ: the default, 64 KiB
        body = b"a" * 10 + b"b" * 10
        os.write(w, framing.frame(framing.RAW, body) if framed else body)
        os.close(w)
        stream = framing.FrameReader(stdin) if framed else stdin
        batches = list(pipeline.sample_batches(stream, _sized_manifest(sizes), 0))
        assert fcntl.fcntl(r, 1032) >= want
    assert [d for batch in batches for _, _, d in batch] == [b"a" * 10, b"b" * 10]


def test_sample_batches_say_where_a_short_or_long_stream_went_wrong() -> None:
    sizes = [100, 100, 100]
    m = _sized_manifest(sizes)
    blob = b"x" * 300
    with pytest.raises(pipeline.StreamEnded, match="after sample 2 of 3"):
        list(pipeline.sample_batches(io.BytesIO(blob[:200]), m, 0))
    with pytest.raises(pipeline.StreamEnded, match="inside sample 1 of 3"):
        list(pipeline.sample_batches(io.BytesIO(blob[:150]), m, 0))
    with pytest.raises(lmdb_writer.StageError, match="more than the 3 samples"):
        list(pipeline.sample_batches(io.BytesIO(blob + b"!"), m, 0))


def test_sample_stream_refuses_a_file_that_changed_size_since_the_listing(tmp_path: Path) -> None:
    src = tmp_path / "src" / "c0"
    src.mkdir(parents=True)
    for i in range(3):
        (src / f"{i}.bin").write_bytes(b"v" * 1000)
    plan = plan_local(str(tmp_path / "src"))
    (src / "1.bin").write_bytes(b"v" * 999)  # the source changes after it was listed
    failure = StreamFailure()
    sent = b"".join(sample_stream(plan, 0, failure))
    assert sent == b"v" * 1000  # sample 0 only: the stream ends before the changed file
    assert "1.bin changed while staging (was 1000 bytes, now 999)" in str(failure.error)
    with pytest.raises(Exception, match="changed while staging"):
        b"".join(sample_stream(plan))


# -- the agent's side of a framed stream ----------------------------------------------------
def _stage(tmp_path: Path, plan, wire: bytes, framed: bool, name: str) -> dict:
    request = {
        "path": str(tmp_path / (name + ".lmdb")),
        "source": {
            "kind": "stream",
            "framed": framed,
            "manifest": plan.manifest.to_wire(),
            "start": 0,
        },
    }
    stdin = io.BufferedReader(io.BytesIO(wire))
    return ingest._stage(request, lambda **f: None, lambda m: None, stdin)


def test_agent_builds_the_same_dataset_from_framed_zstd_and_a_plain_stream(tmp_path: Path) -> None:
    make_text_folder(tmp_path / "src", 120, classes=3, size=20_000)
    plan = plan_local(str(tmp_path / "src"))
    plain = b"".join(sample_stream(plan))
    stats = compress.StreamStats()
    framed = b"".join(
        bytes(p)
        for p in compress.framed_stream(
            sample_stream(plan), True, stats, clock=itertools.count().__next__
        )
    )
    assert stats.zstd_frames >= 1 and len(framed) < len(plain)
    a = _stage(tmp_path, plan, plain, False, "plain")
    b = _stage(tmp_path, plan, framed, True, "framed")
    assert a["count"] == b["count"] == 120
    assert a["checksum"] == b["checksum"]
    assert b["wire_bytes"] == len(framed) and b["stream_bytes"] == len(plain)
    assert "wire_bytes" not in a


def test_agent_says_a_framed_stream_cut_short_is_a_lost_stream(tmp_path: Path) -> None:
    make_text_folder(tmp_path / "src", 60, classes=2, size=20_000)
    plan = plan_local(str(tmp_path / "src"))
    framed = b"".join(bytes(p) for p in compress.framed_stream(sample_stream(plan), False))
    with pytest.raises(ingest.StreamEnded):
        _stage(tmp_path, plan, framed[: len(framed) // 2], True, "cut")


# -- the one-call stage's payload: starts on `ready`, can be iterated again ----------------------
def test_after_ready_waits_for_ready_and_a_repeated_attempt_ends_the_first() -> None:
    import threading

    from provision.staging.payload import AfterReady

    made: list[dict] = []

    def stream(said: dict) -> Iterator[bytes]:
        made.append(said)
        return iter([b"a", b"b"])

    payload = AfterReady(stream)
    first_out: list[bytes] = []
    first = threading.Thread(target=lambda: first_out.extend(payload), daemon=True)
    first.start()  # as a feeder would: blocked until `ready`
    first.join(0.2)
    assert first.is_alive() and not made
    second = iter(payload)  # the call repeated (the host lacked the agent): a new attempt
    first.join(5)
    assert not first.is_alive() and first_out == []  # the abandoned attempt sent nothing
    payload.ready({"phase": "ready", "start": 7})
    assert list(second) == [b"a", b"b"] and made == [{"phase": "ready", "start": 7}]


def test_after_ready_sends_nothing_for_skip_or_after_close() -> None:
    import threading

    from provision.staging.payload import AfterReady

    skip = AfterReady(lambda said: iter([b"x"]))
    skip.ready({"skip": True})
    assert list(skip) == []
    closed = AfterReady(lambda said: iter([b"x"]))
    out: list[bytes] = []
    waiter = threading.Thread(target=lambda: out.extend(closed), daemon=True)
    waiter.start()
    closed.close()  # the call ended (host gone) before any `ready`
    waiter.join(5)
    assert not waiter.is_alive() and out == []


def test_after_ready_keeps_a_ready_that_came_before_the_feeder_asked() -> None:
    from provision.staging.payload import AfterReady

    payload = AfterReady(lambda said: iter([b"from", str(said["start"]).encode()]))
    payload.ready({"start": 3})  # the agent answered before the feeder reached the payload
    assert list(payload) == [b"from", b"3"]
