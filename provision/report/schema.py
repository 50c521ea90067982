"""The versioned report document: one per host per run.

Schema `provision.report/v1` (docs/reports.md lists every key):

    schema, host, created (ISO 8601, UTC), price_per_hour (number | null),
    facts     the agent's `facts` result (docs/facts.md)
    compat    `provision check`'s per-host result (verdict OK/WARN/BROKEN, problems, fix, verify)
    install   {"python": managed env's interpreter, "torch": version, "managed": bool, ...}
    datasets  [{"name", "path", "format", ...}] the datasets the benchmark read
    bench     the agent's `bench` result (docs/bench.md)
    diagnosis [{"id", "severity", "title", "evidence", "recommendation"}]
    timings   (optional, `up` only) where the run's time went: provision/engine/timings.py
    prediction (optional) `provision choose`'s prediction for the host's GPU beside the measured
              figures: provision/choose/check.py

Every consumer reads it through `headline` or `get`, so a missing section renders as "not
measured", never as a crash. `validate` checks the shape (and the types of the figures the
renderers, the ranking and the history rely on) and names the key at fault.

This module is the bottom of report/: it imports nothing of the project but errors.py. The
sections a document carries are contributed by providers (provision/report/sections.py);
assembling and writing a document is provision/report/document.py's.
"""

from __future__ import annotations

import datetime as _dt
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from provision.errors import ConfigError

SCHEMA = "provision.report/v1"
REQUIRED_KEYS = (
    "schema",
    "host",
    "created",
    "facts",
    "compat",
    "install",
    "datasets",
    "bench",
    "diagnosis",
)
SEVERITIES = ("critical", "warn", "info")
FINDING_KEYS = ("id", "severity", "title", "evidence", "recommendation")
# Figures the ranking, charts and history read: number or null when present.
_NUMBERS = (
    "bench.amp.speedup",
    "bench.amp.train_samples_per_s",
    "bench.dataloader.best_samples_per_s",
    "bench.dataloader.best_num_workers",
    "price_per_hour",
)


@dataclass
class Finding:
    id: str
    severity: str  # critical | warn | info
    title: str
    evidence: str
    recommendation: str

    def as_dict(self) -> dict[str, str]:
        return asdict(self)


def get(doc: Any, dotted: str, default: Any = None) -> Any:
    """`get(report, "bench.amp.speedup")`; list indices allowed (`facts.gpus.0.name`)."""
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
    return default if cur is None and default is not None else cur


def parse_time(text: Any) -> _dt.datetime:
    """ISO 8601, also with a trailing "Z" (which Python 3.10's fromisoformat refuses)."""
    value = str(text)
    if value.endswith(("Z", "z")):
        value = value[:-1] + "+00:00"
    return _dt.datetime.fromisoformat(value)


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def validate(doc: Any, where: str = "report") -> None:
    """Raise ValueError naming the first problem (`where: key: what is wrong`)."""
    if not isinstance(doc, dict):
        raise ValueError(f"{where}: not a JSON object (got {type(doc).__name__})")
    if doc.get("schema") != SCHEMA:
        raise ValueError(
            f"{where}: schema {doc.get('schema')!r}, expected {SCHEMA!r}"
            " (a file written by `provision bench`/`up`, or `--json` of `provision report`'s reports)"
        )
    for key in REQUIRED_KEYS:
        if key not in doc:
            raise ValueError(f"{where}: missing key {key!r}")
    if not isinstance(doc["host"], str) or not doc["host"]:
        raise ValueError(f"{where}: host must be a non-empty string, got {doc['host']!r}")
    try:
        created = parse_time(doc["created"])
    except ValueError:
        raise ValueError(
            f"{where}: created must be an ISO 8601 time, got {doc['created']!r}"
        ) from None
    if created.tzinfo is None:
        raise ValueError(f"{where}: created {doc['created']!r} has no time zone (use UTC: +00:00)")
    for key in ("facts", "compat", "install", "bench"):
        if not isinstance(doc[key], dict):
            raise ValueError(f"{where}: {key} must be an object, got {type(doc[key]).__name__}")
    if doc["install"] and "python" not in doc["install"]:
        raise ValueError(f"{where}: install lacks 'python' (the managed environment's interpreter)")
    if not isinstance(doc["datasets"], list) or not all(
        isinstance(d, dict) for d in doc["datasets"]
    ):
        raise ValueError(f"{where}: datasets must be a list of objects")
    for dotted in _NUMBERS:
        value = get(doc, dotted)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise ValueError(f"{where}: {dotted} must be a number or null, got {value!r}")
    price = doc.get("price_per_hour")
    if price is not None and price <= 0:
        raise ValueError(f"{where}: price_per_hour must be positive, got {price!r}")
    if not isinstance(doc["diagnosis"], list):
        raise ValueError(f"{where}: diagnosis must be a list")
    timings = doc.get("timings")
    if timings is not None and not (
        isinstance(timings, dict) and isinstance(timings.get("steps"), list)
    ):
        raise ValueError(f"{where}: timings must be an object with a steps list")
    for i, finding in enumerate(doc["diagnosis"]):
        if not isinstance(finding, dict):
            raise ValueError(f"{where}: diagnosis[{i}] must be an object")
        for key in FINDING_KEYS:
            if not isinstance(finding.get(key), str) or not finding[key]:
                raise ValueError(f"{where}: diagnosis[{i}] lacks {key!r} (a non-empty string)")
        if finding["severity"] not in SEVERITIES:
            raise ValueError(
                f"{where}: diagnosis[{i}].severity {finding['severity']!r} is not one of "
                + ", ".join(SEVERITIES)
            )


def load_report(path: str | Path) -> dict[str, Any]:
    """Read and validate one report file; ConfigError names the file (and line for bad JSON)."""
    p = Path(path)
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{p}: no such report file") from None
    except IsADirectoryError:
        raise ConfigError(f"{p}: is a directory; give the report's .json file") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{p}: not a text file; give the report's .json file") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{p}:{exc.lineno}:{exc.colno}: not valid JSON ({exc.msg})") from None
    try:
        validate(doc, str(p))
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    return doc


def headline(doc: dict[str, Any]) -> dict[str, Any]:
    """The few numbers hosts are ranked and compared by.

    effective samples/s = min(training, loading): a host trains no faster than its slower half.
    samples per money = effective samples/s x 3600 / price_per_hour.
    """
    train = get(doc, "bench.amp.train_samples_per_s")
    loader = get(doc, "bench.dataloader.best_samples_per_s")
    measured = [x for x in (train, loader) if x]
    effective = min(measured) if measured else None
    price = doc.get("price_per_hour")
    per_money = effective * 3600 / price if effective and price else None
    gpus = get(doc, "facts.gpus") or []
    names = sorted({str(g.get("name") or "?") for g in gpus if isinstance(g, dict)})
    diagnosis = doc.get("diagnosis") or []
    return {
        "host": doc.get("host"),
        "created": doc.get("created"),
        "gpu": ", ".join(names) or "CPU",
        "gpu_count": len(gpus),
        "device": get(doc, "bench.amp.device") or get(doc, "bench.host.device"),
        "image_size": get(doc, "bench.amp.image_size"),
        "train_samples_per_s": train,
        "loader_samples_per_s": loader,
        "effective_samples_per_s": effective,
        "bottleneck": None
        if not (train and loader)
        else ("loader" if loader < train else "training"),
        "amp_speedup": get(doc, "bench.amp.speedup"),
        "amp_dtype": get(doc, "bench.amp.best_dtype"),
        "best_num_workers": get(doc, "bench.dataloader.best_num_workers"),
        "price_per_hour": price,
        "samples_per_money": per_money,
        "critical": sum(1 for f in diagnosis if f.get("severity") == "critical"),
        "warnings": sum(1 for f in diagnosis if f.get("severity") == "warn"),
    }


def price_of(host: Any) -> float | None:
    """The inventory's price_per_hour, checked up front: a bad value is the user's to fix."""
    price = host.vars.get("price_per_hour")
    if price is None:
        return None
    try:
        value = float(price)
    except (TypeError, ValueError):
        value = -1.0
    if value <= 0:
        raise ConfigError(
            f"{host.name}: price_per_hour must be a positive number, got {price!r} (inventory var)"
        )
    return value


def pct_delta(new: Any, old: Any) -> float | None:
    """The change from `old` to `new` in %, one decimal; None when either is not a number."""
    if not isinstance(new, (int, float)) or not isinstance(old, (int, float)) or not old:
        return None
    return round(100.0 * (new - old) / old, 1)


def cudnn_text(value: Any) -> str | None:
    """torch.backends.cudnn.version() (90100, 8902) or a dotted string -> "9.1.0" / "8.9.2"."""
    if value is None:
        return None
    if isinstance(value, int):
        major, rest = (
            (value // 10000, value % 10000) if value >= 10000 else (value // 1000, value % 1000)
        )
        return f"{major}.{rest // 100}.{rest % 100}"
    return str(value)


def loader_curve(doc: dict[str, Any], source_name: str | None = None) -> list[tuple[int, float]]:
    """(num_workers, samples/s) of one DataLoader source (default: the primary one), in order."""
    source = loader_source(doc, source_name)
    points = []
    for s in (source or {}).get("settings") or []:
        if s.get("samples_per_s") is not None and s.get("num_workers") is not None:
            points.append((int(s["num_workers"]), float(s["samples_per_s"])))
    return sorted(points)


def loader_source(doc: dict[str, Any], name: str | None = None) -> dict[str, Any] | None:
    sources = [s for s in get(doc, "bench.dataloader.sources") or [] if isinstance(s, dict)]
    name = name or get(doc, "bench.dataloader.primary")
    for s in sources:
        if (s.get("source") or {}).get("name") == name:
            return s
    return sources[0] if sources else None

