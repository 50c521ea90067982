"""What provision measured feeds later predictions.

Every bench and train report carries a `prediction` section (check.py): per workload, the
predicted and the measured samples/s on that host's GPU. `from_history` takes, per catalogue
GPU, the median of measured ÷ predicted over the latest checks in the report history
(provision/report/history.py): the gap a datasheet roofline leaves on that GPU (clocks, power
limits, drivers, the host) is mostly the GPU's, not the model's, so it carries over to other
models. `remember` keeps the last `provision choose` document, which a later train report on a
host of one of its GPUs compares itself with.
"""

from __future__ import annotations

import json
import logging
import statistics
from pathlib import Path
from typing import Any

from provision.choose.plan import Calibration
from provision.paths import state_dir, write_atomic
from provision.report import history

LAST_CHOICE = "choose-last.json"
MAX_CHECKS = 20  # per GPU: the newest ones


def factors_from(docs: list[dict[str, Any]]) -> Calibration:
    ratios: dict[str, list[float]] = {}
    for doc in docs:  # newest first
        section = doc.get("prediction") if isinstance(doc, dict) else None
        if not isinstance(section, dict) or not section.get("gpu"):
            continue
        for check in section.get("checks") or []:
            ratio = check.get("ratio") if isinstance(check, dict) else None
            if isinstance(ratio, (int, float)) and not isinstance(ratio, bool) and 0.05 < ratio < 20:
                bucket = ratios.setdefault(str(section["gpu"]), [])
                if len(bucket) < MAX_CHECKS:
                    bucket.append(float(ratio))
    return Calibration({gpu: (statistics.median(r), len(r)) for gpu, r in ratios.items() if r})


def from_history(path: Path | None = None) -> Calibration:
    try:
        return factors_from(history.documents(path))
    except (OSError, ValueError) as exc:  # an unreadable history predicts from the datasheet alone
        logging.getLogger(__name__).warning("report history not read (%s): predictions uncalibrated", exc)
        return Calibration()


def remember(doc: dict[str, Any], directory: Path | None = None) -> None:
    where = (directory or state_dir()) / LAST_CHOICE
    try:
        where.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(where, json.dumps(doc, default=str) + "\n")
    except OSError:
        pass  # a read-only state dir costs only the later comparison


def last_choice(directory: Path | None = None) -> dict[str, Any] | None:
    try:
        doc = json.loads(((directory or state_dir()) / LAST_CHOICE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) and isinstance(doc.get("gpus"), list) else None
