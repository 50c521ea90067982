"""NVLink summary from `nvidia-smi topo -m`, for hosts without NVML in Python.

The matrix is tab separated: a header row of `GPU0 GPU1 ... NIC0 CPU Affinity NUMA Affinity`,
then one row per device. A GPU-to-GPU cell is `X` (self), `NV<n>` (n bonded NVLinks) or a PCIe
path (`PIX`, `PXB`, `PHB`, `NODE`, `SYS`).
"""

import re
from typing import Any, Dict

_GPU = re.compile(r"^GPU(\d+)$")
_NVLINK = re.compile(r"^NV(\d+)$")


def parse_topo_matrix(text: str) -> Dict[str, Any]:
    header = None
    paths: Dict[str, Dict[str, str]] = {}
    peers: Dict[str, Dict[str, int]] = {}
    for line in text.splitlines():
        if not line.strip() or line.startswith("Legend"):
            if header is not None and paths:
                break
            continue
        cells = [cell.strip() for cell in line.split("\t")]
        if header is None:
            if any(_GPU.match(cell) for cell in cells):
                header = cells
            continue
        row = _GPU.match(cells[0])
        if not row:
            continue
        source = row.group(1)
        for column, cell in zip(header[1:], cells[1:]):  # noqa: B905 (3.8; rows may be short)
            target = _GPU.match(column)
            if not target or target.group(1) == source:
                continue
            paths.setdefault(source, {})[target.group(1)] = cell
            links = _NVLINK.match(cell)
            if links:
                peers.setdefault(source, {})[target.group(1)] = int(links.group(1))
    return {
        "source": "nvidia-smi topo -m",
        "paths": paths,
        "peers": peers,
        "connected": bool(peers),
    }
