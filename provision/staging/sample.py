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
