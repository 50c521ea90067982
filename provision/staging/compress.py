"""zstd on the stage stream, where it pays: chosen per window of frames by measuring the stream.

The stream is cut into frames (provision/agent/datasets/framing.py), each sent raw or as one
zstd frame. Whether compressing pays depends on the link, the data and the CPU, and a model of
them (`worth_compressing`: compressing at c bytes/s then sending r of it at the link's L bytes/s,
against sending it raw) assumes the three are independent. They are not when the CPU is the
bottleneck (the "link" pace is then the same cores encrypting, and the host decompresses on them
too): there the model said "compress" and compressing made the stage slower. So the model only
proposes; the measured pace decides. `Chooser` times windows of WINDOW frames (raw stream bytes
per wall second, compression included) in each mode: raw first, then one zstd window where the
sampled ratio and the model say it may pay, then whichever was faster, re-measuring the other
mode now and then (often while the two are close, rarely when one is far ahead), so a stream whose
data or link changes switches over. Sending raw is never slower than a plain `tar | ssh` copy,
so the raw windows cost nothing against that baseline.

On a link far slower than the compressor (LINK_BOUND: level 1 compresses at 8x the raw pace or
more) compressing costs no time on the stream: the sender compresses the next frame while the
kernel drains the socket. There even a few percent fewer bytes are that much sooner (JPEG sets:
~4 %, their headers and markers), so the model proposes a trial down to TRIAL_RATIO and a
measured gain of half the bytes saved keeps it.

The ratio is sampled on the first two frames and, while sending raw, one frame in PROBE_EVERY (a
sample spread over the stream); a sampled frame that shrank is sent compressed. JPEGs and other
compressed files stay raw (r ~ 0.99). `zstandard` is optional on both ends: without it here, or
on the host, every frame is raw.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from provision.agent.datasets import framing

PROBE_EVERY = 16  # while sending raw, test-compress one frame in this many
SAMPLES = 2  # the first frames are all test-compressed (the ratio); not timed (buffers fill)
WINDOW = 4  # frames per decision: long enough that a window's pace is not one frame's noise
MARGIN = 0.9  # the model proposes compressing only when it predicts it at least 10% faster
GAIN = 1.03  # measured: zstd must beat raw's pace by 3% to be kept
FAR = 1.5  # a mode this much slower than the other is re-measured only every REMEASURE_FAR
REMEASURE = 8  # windows between re-measurements of the slower mode while the two are close
REMEASURE_FAR = 32
USELESS_RATIO = 0.95  # a compressed frame bigger than this share of the raw one goes raw
LINK_BOUND = 8  # compressing this many times faster than the link hides behind the link
TRIAL_RATIO = 0.985  # on such a link, frames this much smaller are worth sending compressed
SLOW_LINK = 50e6  # bytes/s: below this the better ratio of level 3 is worth its CPU


def zstandard_module() -> Any:
    try:
        import zstandard
    except Exception:
        return None
    return zstandard


def link_bound(compress_bps: float, link_bps: float) -> bool:
    """The link, not the CPU, sets the pace: compressing a frame takes a small part of the time
    the link takes to carry the one before it, so it overlaps."""
    return compress_bps > 0 and link_bps > 0 and compress_bps >= LINK_BOUND * link_bps


def useful_ratio(compress_bps: float, link_bps: float) -> float:
    """The compressed share of a frame below which sending it compressed pays."""
    return TRIAL_RATIO if link_bound(compress_bps, link_bps) else USELESS_RATIO


def worth_compressing(ratio: float, compress_bps: float, link_bps: float) -> bool:
    """True when compressing then sending beats sending raw: on a link-bound stream whenever the
    ratio is under TRIAL_RATIO (the compressing overlaps the sending); elsewhere by MARGIN in a
    serial model (the same thread compresses and sends). Unknown figures (0) say no."""
    if ratio <= 0 or compress_bps <= 0 or link_bps <= 0 or ratio >= useful_ratio(compress_bps, link_bps):
        return False
    if link_bound(compress_bps, link_bps):
        return True
    return 1.0 / compress_bps + ratio / link_bps < MARGIN / link_bps


def keep_gain(ratio: float) -> float:
    """How much faster a zstd window must measure to be kept: GAIN, or half the bytes it saves
    when that is less (4 % fewer bytes can give at most ~4 %)."""
    if ratio <= 0:
        return GAIN
    return min(GAIN, 1.0 + (1.0 / ratio - 1.0) / 2)


def _ema(old: float, new: float, weight: float = 0.3) -> float:
    return new if old <= 0 else old + weight * (new - old)


@dataclass
class Chooser:
    """Per window: compress or not, from the paces measured so far (pure: no clock, no I/O).

    `record` takes what one window did; `compress_next` says what the next one does. The paces
    are raw stream bytes per wall second in each mode (EMA), so whatever slows a mode down (a
    starved CPU, a host that decompresses on the same cores) counts against it."""

    raw_pace: float = 0.0
    zstd_pace: float = 0.0
    since: dict[bool, int] = field(default_factory=lambda: {False: 0, True: 0})  # windows since
    # each mode was last measured

    def record(self, compressed: bool, raw_bytes: int, seconds: float) -> None:
        if seconds <= 0 or raw_bytes <= 0:
            return
        pace = raw_bytes / seconds
        if compressed:
            self.zstd_pace = _ema(self.zstd_pace, pace, 0.5)
        else:
            self.raw_pace = _ema(self.raw_pace, pace, 0.5)
        self.since[compressed] = 0
        self.since[not compressed] += 1

    def compress_next(self, ratio: float, compress_bps: float) -> bool:
        if self.raw_pace <= 0:
            return False  # the baseline first: raw is what tar | ssh does
        if ratio <= 0 or ratio >= useful_ratio(compress_bps, self.raw_pace):
            return False  # not sampled yet, or nothing to gain
        if self.zstd_pace <= 0:
            # never tried: only where the model says it may pay (data that compresses well on a
            # link slow enough); while it says no, the ratio samples keep asking. The link is
            # the raw windows' pace: the sender's per-frame pace is fooled while the socket and
            # channel buffers absorb the first megabytes.
            return worth_compressing(ratio, compress_bps, self.raw_pace)
        best = self.zstd_pace > keep_gain(ratio) * self.raw_pace
        fast, slow = (self.zstd_pace, self.raw_pace) if best else (self.raw_pace, self.zstd_pace)
        every = REMEASURE_FAR if fast > FAR * slow else REMEASURE
        if self.since[not best] >= every:
            return not best  # re-measure the slower mode: the data or the link may have changed
        return best


@dataclass
class StreamStats:
    """What the chooser measured; goes into the stage result as `compression`."""

    ratio: float = 0.0  # compressed / raw bytes of the sampled frames (EMA)
    compress_bps: float = 0.0  # raw bytes compressed per second of CPU (EMA)
    link_bps: float = 0.0  # wire bytes taken by the sender per second (EMA)
    frames: int = 0
    zstd_frames: int = 0
    raw_bytes: int = 0  # sample stream bytes
    wire_bytes: int = 0  # what was sent (frame headers included)
    levels: set[int] = field(default_factory=set)
    chooser: Chooser = field(default_factory=Chooser)
    windows: dict[str, int] = field(default_factory=lambda: {"raw": 0, "zstd": 0})

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
            # what decided: each mode's measured pace (raw MB per wall second) and its windows
            "raw_mb_per_s": _mb(self.chooser.raw_pace),
            "zstd_mb_per_s": _mb(self.chooser.zstd_pace),
            "windows": dict(self.windows),
        }


def _compressor(cache: dict[int, Any], zstandard: Any, level: int) -> Any:
    cctx = cache.get(level)
    if cctx is None:
        cctx = cache[level] = zstandard.ZstdCompressor(level=level)
    return cctx


def _mb(bps: float) -> float | None:
    return round(bps / 1e6, 1) if bps else None


def framed_stream(
    chunks: Iterator[bytes],
    zstd: bool,
    stats: StreamStats | None = None,
    clock: Callable[[], float] = time.perf_counter,
    later: Callable[[float], bool] | None = None,
) -> Iterator[bytes]:
    """The chunks as frames (header and body yielded apart: no copy of the body). `zstd`: the
    host decodes zstd frames; without it, or without zstandard here, every frame is raw.
    `later`: for a host that does not decode zstd yet, asked at every window with the sampled
    ratio whether it does now (zstandard shipped to it meanwhile: staging/zstd_ship.py).
    `clock`: wall seconds (compressing is timed by wall clock too: a starved CPU is slow)."""
    stats = stats if stats is not None else StreamStats()
    here = zstandard_module()
    zstandard = here if zstd else None
    later = later if here is not None and zstandard is None else None
    chooser = stats.chooser
    compressors: dict[int, Any] = {}
    speeds: dict[int, float] = {}  # level -> raw bytes compressed per wall second (EMA)
    on = False  # this window's mode
    window_bytes, window_start = 0, 0.0
    try:
        for k, chunk in enumerate(chunks):
            if k >= SAMPLES and (k - SAMPLES) % WINDOW == 0:  # a window starts
                if window_bytes:
                    chooser.record(on, window_bytes, clock() - window_start)
                if later is not None and later(stats.ratio):
                    zstandard, later = here, None
                if zstandard is not None:
                    on = chooser.compress_next(stats.ratio, stats.compress_bps)
                stats.windows["zstd" if on else "raw"] += 1
                window_bytes, window_start = 0, clock()
            body, kind = chunk, framing.RAW
            # where the host lacks zstd, the samples still measure (is shipping it worth it?)
            measure_only = later is not None and k < SAMPLES
            if measure_only or (zstandard is not None and (on or k < SAMPLES or k % PROBE_EVERY == 0)):
                # level 3 only on a slow link once level 1 is known to keep far ahead of it
                slow = 0 < stats.link_bps < SLOW_LINK and speeds.get(1, 0) > 8 * stats.link_bps
                level = 3 if slow else 1
                cctx = _compressor(compressors, here, level)
                c0 = clock()
                packed = cctx.compress(chunk)
                spent = max(clock() - c0, 1e-6)
                stats.ratio = _ema(stats.ratio, len(packed) / max(1, len(chunk)))
                speeds[level] = _ema(speeds.get(level, 0.0), len(chunk) / spent)
                stats.compress_bps = speeds[level]
                if not measure_only and len(packed) < useful_ratio(stats.compress_bps, chooser.raw_pace) * len(chunk):
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
            if k >= SAMPLES:
                window_bytes += len(chunk)
    finally:
        close = getattr(chunks, "close", None)
        if close is not None:
            close()
