"""The versioned report document: one per host per run.

Schema `provision.report/v1` (docs/reports.md): host, created, facts, compat, install, datasets,
bench, diagnosis, price_per_hour. Every consumer reads it through `headline` or `get`, so a
missing section renders as "not measured", never as a crash.
"""

from __future__ import annotations

import datetime as _dt
import json
from pathlib import Path
from typing import Any

SCHEMA = "provision.report/v1"
REQUIRED_KEYS = ("schema", "host", "created", "facts", "compat", "install", "datasets", "bench", "diagnosis")


def get(doc: Any, dotted: str, default: Any = None) -> Any:
    """`get(report, "bench.amp.speedup")`; list indices allowed (`gpus.0.name`)."""
    cur = doc
    for part in dotted.split("."):
        if isinstance(cur, dict):
            if part not in cur:
                return default
            cur = cur[part]
        elif isinstance(cur, list) and part.isdigit() and int(part) < len(cur):
            cur = cur[int(part)]
        else:
            return default
    return cur


def build_report(
    host: str,
    *,
    facts: dict[str, Any] | None = None,
    compat: dict[str, Any] | None = None,
    install: dict[str, Any] | None = None,
    datasets: list[dict[str, Any]] | None = None,
    bench: dict[str, Any] | None = None,
    price_per_hour: float | None = None,
) -> dict[str, Any]:
    from provision.report.diagnosis import diagnose

    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "host": host,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "facts": facts or {},
        "compat": compat or {},
        "install": install or {},
        "datasets": datasets or [],
        "bench": bench or {},
        "price_per_hour": price_per_hour,
    }
    doc["diagnosis"] = [f.as_dict() for f in diagnose(doc)]
    return doc


def validate(doc: Any, where: str = "report") -> None:
    """Raise ValueError naming the first problem; used on load and in tests."""
    if not isinstance(doc, dict):
        raise ValueError(f"{where}: not a JSON object")
    if doc.get("schema") != SCHEMA:
        raise ValueError(f"{where}: schema {doc.get('schema')!r}, expected {SCHEMA!r}")
    for key in REQUIRED_KEYS:
        if key not in doc:
            raise ValueError(f"{where}: missing key {key!r}")
    if not isinstance(doc["diagnosis"], list):
        raise ValueError(f"{where}: diagnosis must be a list")
    for i, finding in enumerate(doc["diagnosis"]):
        for key in ("id", "severity", "title", "evidence", "recommendation"):
            if key not in finding:
                raise ValueError(f"{where}: diagnosis[{i}] lacks {key!r}")


def load_report(path: str | Path) -> dict[str, Any]:
    from provision.errors import ConfigError

    p = Path(path)
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{p}: no such report file") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{p}:{exc.lineno}:{exc.colno}: not valid JSON ({exc.msg})") from None
    try:
        validate(doc, str(p))
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    return doc


def headline(doc: dict[str, Any]) -> dict[str, Any]:
    """The few numbers a comparison ranks by."""
    train = get(doc, "bench.amp.train_samples_per_s")
    loader = get(doc, "bench.dataloader.best_samples_per_s")
    effective = min(x for x in (train, loader) if x) if (train or loader) else None
    price = doc.get("price_per_hour")
    per_money = effective * 3600 / price if effective and price else None
    gpus = get(doc, "facts.gpus", []) or []
    return {
        "host": doc.get("host"),
        "gpu": ", ".join(sorted({g.get("name", "?") for g in gpus})) or "CPU",
        "gpu_count": len(gpus),
        "train_samples_per_s": train,
        "loader_samples_per_s": loader,
        "effective_samples_per_s": effective,
        "amp_speedup": get(doc, "bench.amp.speedup"),
        "best_num_workers": get(doc, "bench.dataloader.best_num_workers"),
        "price_per_hour": price,
        "samples_per_money": per_money,
        "critical": sum(1 for f in doc.get("diagnosis", []) if f.get("severity") == "critical"),
        "warnings": sum(1 for f in doc.get("diagnosis", []) if f.get("severity") == "warn"),
    }


def write_report(doc: dict[str, Any], out_dir: str | Path) -> dict[str, str]:
    """Write JSON, Markdown and HTML side by side; return their paths."""
    from provision.report.render import render_html, render_markdown

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    stamp = doc["created"].replace(":", "").replace("+0000", "Z")
    base = out / f"{_safe(doc['host'])}-{stamp}"
    paths = {
        "json": base.with_suffix(".json"),
        "markdown": base.with_suffix(".md"),
        "html": base.with_suffix(".html"),
    }
    paths["json"].write_text(json.dumps(doc, indent=2, default=str, ensure_ascii=False), encoding="utf-8")
    paths["markdown"].write_text(render_markdown([doc]), encoding="utf-8")
    paths["html"].write_text(render_html([doc]), encoding="utf-8")
    return {k: str(v) for k, v in paths.items()}


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name) or "host"
