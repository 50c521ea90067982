"""The embedded default dataset for `provision up` with no --dataset: small, generated, no download.

ImageFolder layout of PNG images written with the stdlib (zlib), so it needs nothing installed.
"""

from __future__ import annotations

import random
import struct
import zlib
from pathlib import Path

SAMPLE_CLASSES = ("circle", "stripes", "checker", "noise")


def _png(width: int, height: int, rgb_rows: list[bytes]) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    raw = b"".join(b"\x00" + row for row in rgb_rows)  # filter type 0 per row
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b"")


def _pixel(kind: str, x: int, y: int, size: int, rng: random.Random, tint: tuple[int, int, int]) -> tuple[int, int, int]:
    if kind == "circle":
        c = size / 2
        on = (x - c) ** 2 + (y - c) ** 2 < (size / 3) ** 2
    elif kind == "stripes":
        on = (x // 4) % 2 == 0
    elif kind == "checker":
        on = ((x // 6) + (y // 6)) % 2 == 0
    else:
        on = rng.random() < 0.5
    base = 220 if on else 30
    return tuple(min(255, max(0, base + t + rng.randint(-12, 12))) for t in tint)  # type: ignore[return-value]


def make_sample_dataset(dest: str | Path, per_class: int = 64, size: int = 64, seed: int = 0) -> Path:
    """Write `per_class` images for each of 4 classes; deterministic for a seed. Returns `dest`."""
    root = Path(dest)
    rng = random.Random(seed)
    for kind in SAMPLE_CLASSES:
        folder = root / kind
        folder.mkdir(parents=True, exist_ok=True)
        for i in range(per_class):
            tint = (rng.randint(-20, 20), rng.randint(-20, 20), rng.randint(-20, 20))
            rows = [bytes(v for x in range(size) for v in _pixel(kind, x, y, size, rng, tint)) for y in range(size)]
            (folder / f"{kind}_{i:04d}.png").write_bytes(_png(size, size, rows))
    return root
