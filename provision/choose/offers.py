"""Offers to rank: a CSV (`id,gpu,count,price_per_hour` header, optional `memory_gb`,
`interconnect` = nvlink|pcie) or the raw JSON of vast.ai's `vastai search offers --raw` (a list
of offers, or {"offers": [...]}, with `id`, `gpu_name`, `num_gpus`, `dph_total`, `gpu_ram` (MB),
`bw_nvlink` and `pcie_bw` (GB/s) — field names as vast-python's `offers_fields` lists them).
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from provision.errors import ConfigError

CSV_REQUIRED = ("id", "gpu", "count", "price_per_hour")


@dataclass(frozen=True)
class Offer:
    id: str
    gpu: str  # as the provider wrote it
    count: int
    price_per_hour: float  # the whole offer (all its GPUs), per hour
    memory_gb: float | None = None  # per GPU
    link: str | None = None  # nvlink | pcie | None (unknown: the GPU's catalogue row decides)
    link_gbs: float | None = None
    where: str = ""  # file:line or file[index], for messages


def _number(value: Any, what: str, where: str, integer: bool = False) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{where}: {what} {value!r} is not a number") from None
    if x <= 0 or (integer and x != int(x)):
        raise ConfigError(f"{where}: {what} must be a positive {'whole ' if integer else ''}number, got {value!r}")
    return x


def load(path: str | Path) -> list[Offer]:
    p = Path(path).expanduser()
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"--offers {p}: no such file") from None
    except UnicodeDecodeError:
        raise ConfigError(f"--offers {p}: not a text file (CSV or vast.ai JSON)") from None
    if text.lstrip().startswith(("[", "{")):
        return parse_vast(text, str(p))
    return parse_csv(text, str(p))


def parse_csv(text: str, name: str = "offers.csv") -> list[Offer]:
    reader = csv.DictReader(text.splitlines())
    header = [h.strip() for h in reader.fieldnames or []]
    missing = [k for k in CSV_REQUIRED if k not in header]
    if missing:
        raise ConfigError(f"{name}:1: CSV header lacks {', '.join(missing)} (needs {','.join(CSV_REQUIRED)})")
    out = []
    for line, raw in enumerate(reader, start=2):
        rec = {(k or "").strip(): (v or "").strip() for k, v in raw.items()}
        if not any(rec.values()):
            continue
        where = f"{name}:{line}"
        if not rec["gpu"]:
            raise ConfigError(f"{where}: gpu is empty")
        link = rec.get("interconnect", "").lower() or None
        if link not in (None, "nvlink", "pcie"):
            raise ConfigError(f"{where}: interconnect {link!r} is not nvlink or pcie")
        out.append(Offer(
            id=rec["id"] or str(line - 1), gpu=rec["gpu"],
            count=int(_number(rec["count"], "count", where, integer=True)),
            price_per_hour=_number(rec["price_per_hour"], "price_per_hour", where),
            memory_gb=_number(rec["memory_gb"], "memory_gb", where) if rec.get("memory_gb") else None,
            link=link, where=where))
    if not out:
        raise ConfigError(f"{name}: no offers (a header and no rows)")
    return out


def parse_vast(text: str, name: str = "offers.json") -> list[Offer]:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{name}:{exc.lineno}:{exc.colno}: not valid JSON ({exc.msg})") from None
    rows = doc.get("offers") if isinstance(doc, dict) else doc
    if not isinstance(rows, list):
        raise ConfigError(f"{name}: expected vast.ai's `search offers --raw` output (a JSON list of offers)")
    out = []
    for i, row in enumerate(rows):
        where = f"{name}[{i}]"
        if not isinstance(row, dict):
            raise ConfigError(f"{where}: an offer must be a JSON object")
        for key in ("id", "gpu_name", "num_gpus", "dph_total"):
            if row.get(key) in (None, ""):
                raise ConfigError(f"{where}: lacks {key!r} (is this `vastai search offers --raw` output?)")
        nvlink = row.get("bw_nvlink")
        pcie = row.get("pcie_bw")
        has_nvlink = isinstance(nvlink, (int, float)) and nvlink > 0
        out.append(Offer(
            id=str(row["id"]), gpu=str(row["gpu_name"]),
            count=int(_number(row["num_gpus"], "num_gpus", where, integer=True)),
            price_per_hour=_number(row["dph_total"], "dph_total", where),
            memory_gb=(_number(row["gpu_ram"], "gpu_ram", where) / 1024) if row.get("gpu_ram") else None,
            link="nvlink" if has_nvlink else ("pcie" if isinstance(pcie, (int, float)) and pcie > 0 else None),
            link_gbs=float(nvlink) if has_nvlink else (float(pcie) if isinstance(pcie, (int, float)) and pcie > 0 else None),
            where=where))
    if not out:
        raise ConfigError(f"{name}: no offers in the list")
    return out
