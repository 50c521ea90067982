"""A generated image dataset: for tests, the benchmark, and `provision up` without a dataset.

Smooth random images (upscaled noise) saved as JPEG: at 224x224 and quality 85 each file is
about 12 KB, so 8,000 of them make the ~95 MB folder of the anchors' data-plane benchmark.
"""

from __future__ import annotations

import os
import random
from pathlib import Path


def make_image_folder(
    root: str | os.PathLike[str],
    count: int,
    classes: int = 10,
    size: int = 224,
    quality: int = 85,
    seed: int = 0,
) -> Path:
    """ROOT/classNN/imgNNNNN.jpg, `count` images spread round-robin over `classes` folders."""
    from PIL import Image

    rng = random.Random(seed)
    root = Path(root)
    detail = max(2, size // 8)
    for c in range(classes):
        (root / f"class{c:02d}").mkdir(parents=True, exist_ok=True)
    for i in range(count):
        noise = rng.randbytes(detail * detail * 3)
        img = Image.frombytes("RGB", (detail, detail), noise).resize((size, size), Image.BILINEAR)
        img.save(root / f"class{i % classes:02d}" / f"img{i:05d}.jpg", "JPEG", quality=quality)
    return root


_WORDS = (
    "the of and to in is was for on that with as by at from it this be are an or which have "
    "sensor reading value error ok warm cold node rack gpu batch step loss epoch train eval"
).split()


def make_text_folder(
    root: str | os.PathLike[str], count: int, classes: int = 10, size: int = 12_000, seed: int = 0
) -> Path:
    """ROOT/classNN/recNNNNN.csv: `count` CSV files of about `size` bytes (numbers and words, as
    logs and tabular data are): data that compresses (zstd level 1: about 3x), unlike JPEGs."""
    rng = random.Random(seed)
    root = Path(root)
    for c in range(classes):
        (root / f"class{c:02d}").mkdir(parents=True, exist_ok=True)
    for i in range(count):
        rows = ["id,x,y,z,label,note"]
        n = 0
        while n < size:
            words = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(2, 6)))
            row = f"{i}-{len(rows)},{rng.random():.5f},{rng.gauss(0, 1):.4f},{rng.randint(0, 999)},{i % classes},{words}"
            rows.append(row)
            n += len(row) + 1
        (root / f"class{i % classes:02d}" / f"rec{i:05d}.csv").write_text("\n".join(rows) + "\n")
    return root
