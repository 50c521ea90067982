"""zstd on the stage stream, where it pays: chosen per frame by measuring the link and the data.

The stream is cut into frames (provision/agent/datasets/framing.py), each sent raw or as one
zstd frame. Compressing costs controller CPU in the sending thread, so it pays only when
`1/c + r/L < 1/L` (per byte: compressing at c bytes/s, then sending r of it at the link's L
bytes/s, against sending it raw). Both sides of that are measured as the stream goes: the
ratio r and speed c on sample frames (the first two, then one in 16 while sending raw: a sample
of the data spread over the stream), the link rate L from how long the sender takes to take
each frame. JPEGs and other compressed files stay raw (r ~ 0.99); text, arrays and uncompressed
images get compressed on a slow link and on a fast one only when the CPU keeps up.

`zstandard` is optional on both ends: without it here, or on the host, every frame is raw.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from provision.agent.datasets import framing

PROBE_EVERY = 16  # while sending raw, test-compress one frame in this many
MARGIN = 0.9  # compress only when it is predicted at least 10% faster
USELESS_RATIO = 0.95  # a compressed frame bigger than this share of the raw one goes raw
SLOW_LINK = 50e6  # bytes/s: below this the better ratio of level 3 is worth its CPU


def zstandard_module() -> Any:
    try:
        import zstandard
    except Exception:
        return None
    return zstandard


def worth_compressing(ratio: float, compress_bps: float, link_bps: float) -> bool:
    """True when compressing then sending beats sending raw, by MARGIN (serial model: the same
    thread compresses and sends). Unknown figures (0) say no."""
    if ratio <= 0 or compress_bps <= 0 or link_bps <= 0 or ratio >= USELESS_RATIO:
        return False
    return 1.0 / compress_bps + ratio / link_bps < MARGIN / link_bps


def _ema(old: float, new: float, weight: float = 0.3) -> float:
    return new if old <= 0 else old + weight * (new - old)


@dataclass
class StreamStats:
    """What the chooser measured; goes into the stage result as `compression`."""

    ratio: float = 0.0  # compressed / raw bytes of the sampled frames (EMA)
    compress_bps: float = 0.0  # raw bytes compressed per second of CPU (EMA)
    link_bps: float = 0.0  # wire bytes taken by the sender per second (EMA)
    frames: int = 0
    zstd_frames: int = 0
    raw_bytes: int = 0  # tar stream bytes
    wire_bytes: int = 0  # what was sent (frame headers included)
    levels: set[int] = field(default_factory=set)

    def summary(self) -> dict[str, Any]:
        return {
            "codec": "zstd" if self.zstd_frames else "none",
            "frames": self.frames,
            "zstd_frames": self.zstd_frames,
            "stream_bytes": self.raw_bytes,
            "wire_bytes": self.wire_bytes,
            "sampled_ratio": round(self.ratio, 3) if self.ratio else None,
            "link_mb_per_s": round(self.link_bps / 1e6, 1) if self.link_bps else None,
            "compress_mb_per_s": round(self.compress_bps / 1e6, 1) if self.compress_bps else None,
            "levels": sorted(self.levels),
        }


def framed_stream(
    chunks: Iterator[bytes],
    zstd: bool,
    stats: StreamStats | None = None,
    clock: Callable[[], float] = time.perf_counter,
    cpu_clock: Callable[[], float] = time.thread_time,
) -> Iterator[bytes]:
    """The chunks as frames (header and body yielded apart: no copy of the body). `zstd`: the
    host decodes zstd frames; without it, or without zstandard here, every frame is raw."""
    stats = stats if stats is not None else StreamStats()
    zstandard = zstandard_module() if zstd else None
    compressors: dict[int, Any] = {}
    speeds: dict[int, float] = {}  # level -> raw bytes compressed per CPU second (EMA)
    on = False
    try:
        for k, chunk in enumerate(chunks):
            body, kind = chunk, framing.RAW
            if zstandard is not None and (on or k < 2 or k % PROBE_EVERY == 0):
                # level 3 only on a slow link once level 1 is known to keep far ahead of it
                slow = 0 < stats.link_bps < SLOW_LINK and speeds.get(1, 0) > 8 * stats.link_bps
                level = 3 if slow else 1
                cctx = compressors.get(level)
                if cctx is None:
                    cctx = compressors[level] = zstandard.ZstdCompressor(level=level)
                c0 = cpu_clock()
                packed = cctx.compress(chunk)
                spent = max(cpu_clock() - c0, 1e-6)
                stats.ratio = _ema(stats.ratio, len(packed) / max(1, len(chunk)))
                speeds[level] = _ema(speeds.get(level, 0.0), len(chunk) / spent)
                stats.compress_bps = speeds[level]
                if len(packed) < USELESS_RATIO * len(chunk):
                    body, kind = packed, framing.ZSTD
                    stats.zstd_frames += 1
                    stats.levels.add(level)
            header = framing.HEADER.pack(kind, len(body))
            t0 = clock()
            yield header
            yield body
            took = clock() - t0  # the sender took the frame: the link's pace, once it is full
            if took > 0:
                stats.link_bps = _ema(stats.link_bps, (len(body) + len(header)) / took)
            stats.frames += 1
            stats.raw_bytes += len(chunk)
            stats.wire_bytes += len(body) + len(header)
            on = worth_compressing(stats.ratio, stats.compress_bps, stats.link_bps)
    finally:
        close = getattr(chunks, "close", None)
        if close is not None:
            close()
